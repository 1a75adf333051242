//! Writers on one file are serialized (issue 15, item 4), through the real
//! binary: parallel `edit`s of one file in one program, and from two
//! codemode processes at once, are each applied when reported ok (before,
//! sixteen parallel edits all reported ok and a few were applied); a lock
//! another process holds makes an edit wait, and the wait ends at the
//! run's deadline or the call's own timeout without changing the file; no
//! lock file is left in the workspace.

use std::path::Path;

use serde_json::Value;

use crate::cli::{codemode, spawn};

/// `count` lines `line <prefix><i>`, each a distinct marker.
fn markers(prefix: &str, count: usize) -> String {
    (0..count).map(|i| format!("line {prefix}{i}\n")).collect()
}

/// A program making `count` parallel edits of `f.txt`, each replacing the
/// marker `<prefix><i>` by `<prefix><i>-done`; returns each call's outcome.
fn parallel_edits(prefix: &str, count: usize) -> String {
    format!(
        "const calls = [];
         for (let i = 0; i < {count}; i++) {{
           calls.push(tools.call('edit', {{path: 'f.txt', edits: [{{old: `line {prefix}${{i}}\\n`, new: `line {prefix}${{i}}-done\\n`}}]}}));
         }}
         const settled = await Promise.allSettled(calls);
         return settled.map(s => s.status === 'fulfilled' ? 'ok' : s.reason.kind + ': ' + s.reason.message);"
    )
}

/// The receipt of a `run --json`, with the run's outcome checked.
fn receipt(out: &std::process::Output) -> Value {
    let receipt: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["status"], "completed", "{receipt:#}");
    receipt
}

/// Every entry of `dir` but `.codemode`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".codemode")
        .collect();
    names.sort();
    names
}

#[test]
fn sixteen_parallel_edits_of_one_file_in_one_program_are_all_applied() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("f.txt"), markers("M", 16)).unwrap();
    let out = codemode(&["run", "-", "--json", "--approve", "allow"], &parallel_edits("M", 16), ws.path());
    let receipt = receipt(&out);
    assert_eq!(receipt["value"], serde_json::json!(vec!["ok"; 16]), "every edit reports ok");
    let text = std::fs::read_to_string(ws.path().join("f.txt")).unwrap();
    let expected: String = (0..16).map(|i| format!("line M{i}-done\n")).collect();
    assert_eq!(text, expected, "every edit reported ok was applied");
    assert_eq!(entries(ws.path()), ["f.txt"], "no lock or temp file is left");
}

#[test]
fn edits_from_two_processes_at_once_are_all_applied() {
    const EACH: usize = 60;
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("f.txt");
    std::fs::write(&file, markers("A", EACH) + &markers("B", EACH)).unwrap();
    let start = |prefix: &str| {
        let mut child = spawn(&["run", "-", "--json", "--approve", "allow"], ws.path(), &[]);
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, parallel_edits(prefix, EACH).as_bytes()).unwrap();
        drop(stdin);
        child
    };
    let (a, b) = (start("A"), start("B"));
    let mut expected = String::new();
    for (prefix, child) in [("A", a), ("B", b)] {
        let receipt = receipt(&child.wait_with_output().unwrap());
        let statuses = receipt["value"].as_array().unwrap_or_else(|| panic!("{receipt}"));
        assert_eq!(statuses.len(), EACH, "{receipt}");
        // Every edit succeeds: none meets the other process's rename
        // half-way (a name renamed over while it was looked up once read
        // as `f.txt (deleted)` and failed as "does not exist").
        let failed: Vec<&Value> = statuses.iter().filter(|s| *s != "ok").collect();
        assert!(failed.is_empty(), "{failed:?}");
        for i in 0..EACH {
            expected += &format!("line {prefix}{i}-done\n");
        }
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text, expected, "every edit of both processes was applied");
    assert_eq!(entries(ws.path()), ["f.txt"], "no lock or temp file is left");
}

#[test]
fn an_edit_waits_for_another_process_lock_and_gives_up_at_the_deadline() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("f.txt");
    std::fs::write(&path, "before\n").unwrap();
    let edit = "return await tools.call('edit', {path: 'f.txt', edits: [{old: 'before', new: 'after'}]});";

    // Another process (this test) holds the file's lock: the run's edit
    // waits, and the run ends at its deadline with the file unchanged.
    let held = std::fs::File::open(&path).unwrap();
    held.lock().unwrap();
    let out = codemode(&["run", "-", "--json", "--approve", "allow", "--deadline", "1"], edit, ws.path());
    let ended: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ended["status"], "timed_out", "{ended:#}");
    assert_ne!(ended["calls"][0]["status"], "ok", "{ended:#}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\n", "the waiting edit changed nothing");

    // Released while a run waits: its edit goes through.
    let mut child = spawn(&["run", "-", "--json", "--approve", "allow"], ws.path(), &[]);
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, edit.as_bytes()).unwrap();
    drop(stdin);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\n", "the edit waits for the lock");
    held.unlock().unwrap();
    let done = receipt(&child.wait_with_output().unwrap());
    assert_eq!(done["calls"][0]["status"], "ok", "{done:#}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
}

#[test]
fn an_edit_waiting_for_a_lock_ends_at_its_own_timeout_with_the_file_unchanged() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("f.txt");
    std::fs::write(&path, "before\n").unwrap();
    let mut policy = codemode::Policy::full_access();
    let settings = codemode::policy::ToolSettings { timeout_ms: Some(300), ..Default::default() };
    policy.tools.insert("edit".to_owned(), settings);
    let engine = crate::common::engine_builder().workspace(ws.path()).policy(policy).build().unwrap();
    let held = std::fs::File::open(&path).unwrap();
    held.lock().unwrap();
    let out = engine.call_blocking(
        "edit",
        &serde_json::json!({"path": "f.txt", "edits": [{"old": "before", "new": "after"}]}),
    );
    let error = out.error.as_ref().expect("the edit did not get the lock");
    assert_eq!(error["kind"], "timeout", "{error}");
    assert_eq!(out.call.status, codemode::receipt::CallStatus::Failed);
    drop(held);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\n", "the timed-out edit changed nothing");
    let out = engine.call_blocking(
        "edit",
        &serde_json::json!({"path": "f.txt", "edits": [{"old": "before", "new": "after"}]}),
    );
    assert!(out.is_ok(), "{:?}", out.error);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
}
