//! Receipts are kept (issue 30, the retention fault; docs/SECURITY.md,
//! "Receipts are kept"). An untrusted workspace `codemode.toml` with
//! `[journal] keep_runs = 1, keep_days = 0` erased earlier receipts, the
//! receipt of the run that wrote it included. A workspace's untrusted
//! file cannot shorten retention below the defaults now
//! (`ConfigFile::without_grants`), a run never removes its own receipt,
//! and no run newer than the oldest paused run is removed
//! (`Runs::prune`).

use std::path::Path;

use serde_json::Value;

use crate::cli::codemode;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A `codemode run` of `program` in `ws` with `extra` options; its run id
/// (from the receipt printed with `--json`, or the line on stderr).
fn run(ws: &Path, program: &str, extra: &[&str]) -> String {
    std::fs::write(ws.join("prog.js"), program).unwrap();
    let args = [&["run", "prog.js"][..], extra].concat();
    let out = codemode(&args, "", ws);
    let err = stderr(&out);
    err.split("run run-")
        .nth(1)
        .map(|rest| format!("run-{}", &rest[..25]))
        .or_else(|| {
            let v: Value = serde_json::from_slice(&out.stdout).ok()?;
            Some(v["run_id"].as_str()?.to_owned())
        })
        .unwrap_or_else(|| panic!("{err}"))
}

fn receipt_kept(ws: &Path, run_id: &str) -> bool {
    crate::common::runs_dir(ws).join(run_id).join("receipt.json").is_file()
}

/// The fault as it was found: a run's program writes an untrusted
/// `codemode.toml` asking to keep one run for no days; the next runs must
/// keep every receipt, the writing run's included, and say the numbers
/// were ignored.
#[test]
fn an_untrusted_file_cannot_shorten_retention() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let first = run(ws, "return 1;", &["--approve", "deny"]);
    let writer = run(
        ws,
        "await tools.write({path: 'codemode.toml', content: '[journal]\\nkeep_runs = 1\\nkeep_days = 0\\n'}); \
         return 2;",
        &["--approve", "allow"],
    );
    // (Whether or not the write was allowed, the file is there now, as a
    // program of an earlier run would have left it.)
    std::fs::write(ws.join("codemode.toml"), "[journal]\nkeep_runs = 1\nkeep_days = 0\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(ws.join("prog.js"), "return 3;").unwrap();
    let out = codemode(&["run", "prog.js", "--approve", "deny"], "", ws);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(receipt_kept(ws, &first), "an earlier receipt was erased");
    assert!(receipt_kept(ws, &writer), "the receipt of the run that wrote the file was erased");
    assert!(
        err.contains("keep_runs below the default") && err.contains("keep_days below the default"),
        "{err}"
    );
    let listed = codemode(&["runs", "list", "--json"], "", ws);
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.len(), 3, "{listed:#?}");
}

/// Even the user's own file (`--config`, applied whole) asking for no
/// runs never removes the receipt of the run that prunes, nor a run newer
/// than the oldest paused run.
#[test]
fn a_run_keeps_its_own_receipt_and_every_run_after_a_paused_one() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let config = tempfile::tempdir().unwrap();
    let config = config.path().join("codemode.toml");
    std::fs::write(&config, "[journal]\nkeep_runs = 0\n").unwrap();
    let config = config.to_str().unwrap();
    let before = run(ws, "return 0;", &["--approve", "deny"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let paused = run(
        ws,
        "await tools.write({path: 'x.txt', content: 'x'}); return 1;",
        &["--approve", "pause", "--json", "--config", config],
    );
    let after: Vec<String> = (0..2)
        .map(|i| {
            std::thread::sleep(std::time::Duration::from_millis(1100));
            run(ws, &format!("return {i};"), &["--approve", "deny", "--config", config])
        })
        .collect();
    assert!(!receipt_kept(ws, &before), "older than the paused run: pruned by count as asked");
    for id in &after {
        assert!(receipt_kept(ws, id), "{id}: a run newer than the paused run was erased");
    }
    let listed = codemode(&["runs", "list", "--json"], "", ws);
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(listed.iter().any(|r| r["run_id"] == paused.as_str()), "the paused run is kept: {listed:#?}");
}
