//! Review of issue 33 (durable runs, round two), through the real binary.
//!
//! A cancel request (`codemode runs cancel`) that the run's process never
//! acted on (it was stopped, then killed) stays beside the journal. A
//! later recovery of the run, even one a person asked for with `--allow`,
//! must end the run `cancelled` before anything runs again: it used to
//! replay, run the allowed call again (its side effect done a second
//! time), and only then, on the cancel watch's next look (300 ms), kill it
//! half-way. The defence: `engine/resume.rs` asks the store for a cancel
//! request once the run is claimed, before the replay.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cli::{codemode, spawn};

/// Waits until the journal of the only run of `ws` holds a `start` line;
/// the run's id.
fn started_run(ws: &Path) -> String {
    let runs = crate::common::runs_dir(ws);
    for _ in 0..500 {
        for entry in std::fs::read_dir(&runs).into_iter().flatten().flatten() {
            let journal = std::fs::read_to_string(entry.path().join("journal.jsonl")).unwrap_or_default();
            if journal.contains(r#"{"t":"start","seq":1}"#) {
                return entry.file_name().to_string_lossy().into_owned();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no run started in {}", runs.display());
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

#[test]
fn a_cancel_requested_before_a_crash_ends_the_recovery_before_anything_runs_again() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    // The call's side effect comes first (one line per run of it), then
    // it sleeps long enough to be killed in flight.
    std::fs::write(
        ws.join("prog.js"),
        "await tools.bash({command: 'echo ran >> count.txt; sleep 5'}); return 1",
    )
    .unwrap();
    let mut child = spawn(&["run", "prog.js", "--posture", "full-access"], ws, &[]);
    let id = started_run(ws);
    while std::fs::read_to_string(ws.join("count.txt")).unwrap_or_default().is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The process cannot look for the request: stopped, then killed.
    signal(child.id(), "-STOP");
    let cancel = codemode(&["runs", "cancel", &id, "--timeout", "0"], "", ws);
    assert_eq!(cancel.status.code(), Some(7), "{}", String::from_utf8_lossy(&cancel.stderr));
    child.kill().unwrap();
    let _ = child.wait();

    // The recovery a person starts, then the call allowed again.
    let first = codemode(&["resume", &id, "--posture", "full-access"], "", ws);
    let second = codemode(&["resume", &id, "--allow", "1", "--posture", "full-access"], "", ws);
    let said =
        format!("{}\n{}", String::from_utf8_lossy(&first.stderr), String::from_utf8_lossy(&second.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.join("count.txt")).unwrap(),
        "ran\n",
        "the call in flight at the crash did not run again: {said}"
    );
    assert_eq!(first.status.code(), Some(130), "the recovery ends cancelled at once: {said}");
    assert_eq!(second.status.code(), Some(5), "a cancelled run is not resumed: {said}");
    let list = codemode(&["runs", "list"], "", ws);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.lines().any(|l| l.starts_with(&id) && l.contains("cancelled")), "{list}");
}

/// A rollback of a run made in another workspace (a journal folder
/// shared by both, as PostgreSQL is) used to write that workspace's
/// pre-images into this one's files and mark the run undone, so that the
/// rollback where the run was made found "nothing left to undo". The
/// defence: `Engine::rollback` refuses a run whose journal header names
/// another workspace.
#[test]
fn a_run_of_another_workspace_is_not_rolled_back_here() {
    let (a, b) = (crate::common::workspace(), crate::common::workspace());
    let (a, b) = (a.path(), b.path());
    let journals = tempfile::tempdir().unwrap();
    let journal = journals.path().to_str().unwrap();
    std::fs::write(a.join("conf.txt"), "workspace a's own\n").unwrap();
    std::fs::write(
        a.join("prog.js"),
        r#"await tools.write({path: "conf.txt", content: "same\n"}); return 1"#,
    )
    .unwrap();
    let out = codemode(&["run", "prog.js", "--posture", "full-access", "--journal", journal], "", a);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rest = err.split("run run-").nth(1).unwrap_or_else(|| panic!("no run id: {err}"));
    let id = format!("run-{}", &rest[..25]);
    // b's file holds what the run left in a's.
    std::fs::write(b.join("conf.txt"), "same\n").unwrap();
    let here = codemode(&["rollback", &id, "--posture", "full-access", "--journal", journal], "", b);
    let said = String::from_utf8_lossy(&here.stderr);
    assert_eq!(
        std::fs::read_to_string(b.join("conf.txt")).unwrap(),
        "same\n",
        "a's bytes not written in b: {said}"
    );
    assert_eq!(here.status.code(), Some(5), "{said}");
    assert!(said.contains("was made in workspace"), "{said}");
    let there = codemode(&["rollback", &id, "--posture", "full-access", "--journal", journal], "", a);
    assert_eq!(there.status.code(), Some(0), "{}", String::from_utf8_lossy(&there.stderr));
    assert_eq!(std::fs::read_to_string(a.join("conf.txt")).unwrap(), "workspace a's own\n");
}
