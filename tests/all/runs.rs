//! Runs on disk through the real binary (docs/JOURNAL.md, "Runs on disk"):
//! `codemode runs list|show|prune`, the retention after each run, runs
//! kept outside the workspace (and moved there from an old `.codemode/`),
//! and where `--journal` and `[journal]` send journals.
//!
//! Until runs write journals themselves, journals are made here through
//! the public store (`LocalStore` + `RunJournal`), next to receipt folders
//! of real `codemode run`s.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use codemode::journal::{JournalStore, LocalStore, RunJournal, RunState};
use serde_json::{Value, json};

use crate::cli::spawn;

/// Runs the binary in `ws` with `stdin`, without a trust record.
fn codemode(args: &[&str], stdin: &str, ws: &Path) -> Output {
    let mut child = spawn(args, ws, &[]);
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `codemode runs list --json` in `ws`, with `extra` options.
fn list(ws: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["runs", "list", "--json"];
    args.extend_from_slice(extra);
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn ids(listing: &[Value]) -> Vec<String> {
    listing.iter().map(|r| r["run_id"].as_str().unwrap().to_owned()).collect()
}

/// A user's own codemode.toml (given with --config, so its retention
/// applies) keeping `keep_runs` runs: its folder and its path.
fn config_keeping(keep_runs: u64) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("codemode.toml");
    std::fs::write(&path, format!("[journal]\nkeep_runs = {keep_runs}\n")).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

/// A real run of `program` that saves its receipt; returns its run id.
fn real_run(ws: &Path, program: &str) -> String {
    real_run_with(ws, program, &[])
}

/// [`real_run`] with `extra` options.
fn real_run_with(ws: &Path, program: &str, extra: &[&str]) -> String {
    std::fs::write(ws.join("prog.js"), program).unwrap();
    let mut args = vec!["run", "prog.js", "--approve", "deny"];
    args.extend_from_slice(extra);
    let out = codemode(&args, "", ws);
    let err = stderr(&out);
    let id = err
        .split("run run-")
        .nth(1)
        .map(|rest| format!("run-{}", &rest[..25]))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(crate::common::runs_dir(ws).join(&id).join("receipt.json").is_file(), "{err}");
    id
}

/// The header line of a journal of `run_id` running `name`.
fn header(run_id: &str, name: &str) -> String {
    json!({
        "t": "header", "journal_version": 1, "run_id": run_id,
        "started_at": "2026-01-02T03:04:05Z", "started_unix_ms": 1_767_322_245_000u64,
        "codemode_version": "0.1.0", "workspace": "/ws",
        "program": {"name": name, "sha256": "5e11", "source": "...", "path": format!("/ws/{name}")},
        "catalog_sha256": "ca7a", "policy_sha256": "9011", "policy": {}, "limits": {},
    })
    .to_string()
}

const READ_CALL: &str = r#"{"t":"call","seq":1,"tool":"read","caller":"program","args":{"path":"a.txt"}}"#;
const READ_DONE: &str = r#"{"t":"done","seq":1,"how":"inline","ok":true,"end":{"status":"ok","decision":"auto","elapsed_ms":0.5,"bytes":17},"payload":{"content":"x"}}"#;
const WRITE_CALL: &str =
    r#"{"t":"call","seq":2,"tool":"write","caller":"program","args":{"path":"out.txt","content":"hi"}}"#;
const WRITE_PENDING: &str = r#"{"t":"pending","seq":2,"tool":"write","args":{"path":"out.txt","content":"hi"},"reason":"posture ask: write changes files","subject":"out.txt"}"#;

/// Writes a journal of `run_id` into the local store at `root`, ending in
/// `state`: a read done and, when paused, a write pending.
fn journal(root: &Path, run_id: &str, state: RunState) {
    let store = LocalStore::new(root);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut j = store.create(run_id, header(run_id, "paused.js")).await.unwrap();
        let mut lines = vec![READ_CALL.to_owned(), READ_DONE.to_owned()];
        if state == RunState::Paused {
            lines.extend([WRITE_CALL.to_owned(), WRITE_PENDING.to_owned()]);
        }
        j.append(lines.iter().map(|l| format!("{l}\n")).collect()).await.unwrap();
        j.commit(state).await.unwrap();
    });
}

/// Sets the modification time of every file in a run folder (and the
/// folder) to `days` days ago.
fn age_days(run_folder: &Path, days: u64) {
    let when = SystemTime::now() - Duration::from_secs(days * 86_400 + 60);
    for entry in std::fs::read_dir(run_folder).unwrap() {
        let file = std::fs::File::options().append(true).open(entry.unwrap().path()).unwrap();
        file.set_modified(when).unwrap();
    }
    std::fs::File::open(run_folder).unwrap().set_modified(when).unwrap();
}

fn runs_dir(ws: &Path) -> PathBuf {
    crate::common::runs_dir(ws)
}

#[test]
fn list_and_show_real_runs_and_journals() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let with_receipt =
        real_run(ws, "const r = await tools.read({path: 'a.txt'}); return r.metadata.total_lines;");
    // Its journal gone (as for a run made with `--journal off`, or before
    // journals): a receipt-only run.
    std::fs::remove_file(runs_dir(ws).join(&with_receipt).join("journal.jsonl")).unwrap();
    // `run --json` saves no receipt; a value over its bound leaves a
    // folder of spill files (and the run's journal).
    let out = codemode(&["run", "-", "--json"], "return 'x'.repeat(40000);", ws);
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spill_only = receipt["run_id"].as_str().unwrap().to_owned();
    assert!(
        runs_dir(ws).join(&spill_only).is_dir()
            && !runs_dir(ws).join(&spill_only).join("receipt.json").exists()
    );
    journal(&runs_dir(ws), "run-20260102T030405Z-0000paus", RunState::Paused);
    journal(&runs_dir(ws), "run-20260102T030405Z-0000done", RunState::Completed);

    let listing = list(ws, &[]);
    assert_eq!(listing.len(), 4, "{listing:#?}");
    let by_id =
        |id: &str| listing.iter().find(|r| r["run_id"] == id).unwrap_or_else(|| panic!("{id}: {listing:#?}"));
    let real = by_id(&with_receipt);
    assert_eq!(
        (real["state"].as_str(), real["calls"].as_u64(), real["journal"].as_bool()),
        (Some("completed"), Some(1), Some(false))
    );
    assert!(real["receipt"].as_str().unwrap().ends_with("receipt.json"));
    // No receipt, but its journal says how it ended.
    assert_eq!(by_id(&spill_only)["state"], "completed");
    let paused = by_id("run-20260102T030405Z-0000paus");
    assert_eq!(
        (paused["state"].as_str(), paused["pending"].as_u64(), paused["calls"].as_u64()),
        (Some("paused"), Some(1), Some(2))
    );
    assert_eq!(paused["program"], "paused.js");
    assert_eq!(by_id("run-20260102T030405Z-0000done")["pending"], 0);
    // Oldest first: updated times never go down.
    let times: Vec<u64> = listing.iter().map(|r| r["updated_unix"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");

    // The table names every run, the newest last.
    let out = codemode(&["runs", "list"], "", ws);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("RUN ID"), "{table}");
    assert_eq!(table.lines().count(), 5, "{table}");
    assert!(table.lines().last().unwrap().starts_with(ids(&listing).last().unwrap().as_str()), "{table}");

    // A journaled run: program, digests, calls, and the pending call with
    // its arguments and reason.
    let out = codemode(&["runs", "show", "run-20260102T030405Z-0000paus"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "paused",
        "paused.js (/ws/paused.js), sha256 5e11",
        "sha256 ca7a",
        "sha256 9011",
        "read  auto/ok",
        "write  -/pending",
        r#"{"path":"out.txt","content":"hi"}"#,
        "posture ask: write changes files",
        "codemode resume run-20260102T030405Z-0000paus",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    let out = codemode(&["runs", "show", "run-20260102T030405Z-0000paus", "--json"], "", ws);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["pending"][0]["seq"], 2);
    assert_eq!(shown["pending"][0]["arguments"]["path"], "out.txt");
    assert_eq!(shown["pending"][0]["subject"], "out.txt");
    assert_eq!(
        (shown["calls"][0]["status"].as_str(), shown["calls"][1]["status"].as_str()),
        (Some("ok"), None)
    );
    assert_eq!(shown["program"]["sha256"], "5e11");
    assert_eq!(shown["receipt"], Value::Null);

    // A receipt-only run: its calls from the receipt, and where it is.
    let out = codemode(&["runs", "show", &with_receipt, "--json"], "", ws);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["state"], "completed");
    assert_eq!(shown["calls"][0]["tool"], "read");
    assert_eq!(shown["calls"][0]["decision"], "auto");
    assert_eq!(shown["journal"], Value::Null);
    assert!(shown["receipt"].as_str().unwrap().contains(&with_receipt));
    let out = codemode(&["runs", "show", &with_receipt], "", ws);
    assert!(String::from_utf8_lossy(&out.stdout).contains("receipt.json"));
}

#[test]
fn an_unknown_run_id_is_exit_5_with_the_resume_error() {
    let ws = crate::common::workspace();
    for id in ["run-20260102T030405Z-ffffffff", "../a.txt"] {
        let out = codemode(&["runs", "show", id], "", ws.path());
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
        assert!(stderr(&out).contains("unknown id"), "{}", stderr(&out));
        let out = codemode(&["runs", "show", id, "--json"], "", ws.path());
        assert_eq!(out.status.code(), Some(5));
        let error: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (error["error"]["kind"].as_str(), error["error"]["state"].as_str()),
            (Some("not_resumable"), Some("unknown"))
        );
    }
}

#[test]
fn prune_by_age_and_by_count_and_a_dry_run_removes_nothing() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let runs: Vec<String> = (0..4).map(|i| real_run(ws, &format!("return {i};"))).collect();
    journal(&runs_dir(ws), "run-20260102T030405Z-0000paus", RunState::Paused);
    // The two oldest runs are ten days old.
    age_days(&runs_dir(ws).join(&runs[0]), 10);
    age_days(&runs_dir(ws).join(&runs[1]), 10);

    let out = codemode(&["runs", "prune", "--dry-run"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("would remove {} (completed, 10d old, older than 7 days)", runs[0])),
        "{said}"
    );
    assert!(said.contains(&format!("would remove {}", runs[1])), "{said}");
    assert_eq!(list(ws, &[]).len(), 5, "a dry run removes nothing");

    let out = codemode(&["runs", "prune", "--json"], "", ws);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut removed: Vec<&str> =
        report["removed"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    removed.sort();
    let mut oldest = [runs[0].as_str(), runs[1].as_str()];
    oldest.sort();
    assert_eq!(removed, oldest);
    assert_eq!(report["removed"][0]["why"], "age");
    assert!(!runs_dir(ws).join(&runs[0]).exists());

    // By count: the newest run stays, and so does the paused run (a person
    // may answer it; only its age removes it).
    let out = codemode(&["runs", "prune", "--keep-runs", "1"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let left = ids(&list(ws, &[]));
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"run-20260102T030405Z-0000paus".to_owned()), "{left:?}");
    let newest = left.iter().find(|id| *id != "run-20260102T030405Z-0000paus").unwrap();
    assert!(runs[2..].contains(newest), "{left:?}");

    // Past keep_days a paused run goes too.
    age_days(&runs_dir(ws).join("run-20260102T030405Z-0000paus"), 8);
    let out = codemode(&["runs", "prune", "--keep-runs", "1"], "", ws);
    assert!(String::from_utf8_lossy(&out.stdout).contains("run-20260102T030405Z-0000paus (paused, 8d old"));
    assert_eq!(ids(&list(ws, &[])).len(), 1);
}

#[test]
fn a_run_held_by_another_process_is_not_pruned() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let store = LocalStore::new(runs_dir(ws));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let id = "run-20260102T030405Z-0000held";
    let held: Box<dyn RunJournal> = rt.block_on(store.create(id, header(id, "busy.js"))).unwrap();
    age_days(&runs_dir(ws).join(id), 30);

    let out = codemode(&["runs", "prune", "--keep-runs", "0", "--keep-days", "0", "--json"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["busy"], json!([id]));
    assert_eq!(report["removed"], json!([]));
    assert!(runs_dir(ws).join(id).join("journal.jsonl").is_file());
    assert_eq!(list(ws, &[])[0]["state"], "running");

    // Once let go (the process died), it is interrupted, and prunable.
    drop(held);
    assert_eq!(list(ws, &[])[0]["state"], "interrupted");
    let out = codemode(&["runs", "prune", "--keep-runs", "0", "--keep-days", "0"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!runs_dir(ws).join(id).exists());
}

#[test]
fn each_run_prunes_to_the_configured_retention_keeping_paused_runs() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    // The user's own file (--config): its retention applies. (A
    // workspace's untrusted file cannot shorten it: tests/all/attacks/retention.rs.)
    let (_config_dir, config) = config_keeping(2);
    let config = config.as_str();
    journal(&runs_dir(ws), "run-20260102T030405Z-0000paus", RunState::Paused);
    age_days(&runs_dir(ws).join("run-20260102T030405Z-0000paus"), 1);
    let made: Vec<String> =
        (0..4).map(|i| real_run_with(ws, &format!("return {i};"), &["--config", config])).collect();
    // Every run after the paused one stays while it waits (a person
    // reviewing it sees what ran since).
    let left = ids(&list(ws, &[]));
    assert_eq!(left.len(), 5, "{left:?}");
    // Once it is gone (by age), the count applies.
    for _ in 0..2 {
        let out = codemode(&["runs", "prune", "--keep-runs", "2", "--keep-days", "1"], "", ws);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let left = ids(&list(ws, &[]));
    assert_eq!(left, made[2..].to_vec(), "the newest stay");
}

/// The pruning after a run lets a tenth of keep_runs more gather, reading
/// no journal meanwhile (docs/JOURNAL.md, "What it reads"), then prunes
/// down to keep_runs, the newest staying.
#[test]
fn runs_past_keep_runs_gather_for_a_tenth_then_go_together() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let (_config_dir, config) = config_keeping(10);
    let config = config.as_str();
    let made: Vec<String> =
        (0..11).map(|i| real_run_with(ws, &format!("return {i};"), &["--config", config])).collect();
    assert_eq!(ids(&list(ws, &[])).len(), 11, "one past keep_runs (10) stays: the slack is 10 / 10");
    let last = real_run_with(ws, "return 11;", &["--config", config]);
    let mut left = ids(&list(ws, &[]));
    left.sort();
    let mut newest: Vec<String> = made[2..].iter().cloned().chain([last]).collect();
    newest.sort();
    assert_eq!(left, newest, "past the slack, pruned to the 10 newest");
}

/// `codemode run` prunes while its run runs, counting the run as the
/// newest before its folder is made; a run that leaves nothing (journal
/// off, no receipt saved with `--json`) takes no kept run's place, and one
/// that leaves a journal (`--json`, journal on) counts.
#[test]
fn a_run_that_leaves_no_folder_takes_no_kept_run_s_place() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let (_config_dir, config) = config_keeping(1);
    let config = config.as_str();
    let kept = real_run_with(ws, "return 1;", &["--config", config]);
    std::fs::write(ws.join("prog.js"), "return 2;").unwrap();
    let json_run = |extra: &[&str]| {
        let mut args = vec!["run", "prog.js", "--json", "--config", config];
        args.extend_from_slice(extra);
        let out = codemode(&args, "", ws);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
        receipt["run_id"].as_str().unwrap().to_owned()
    };
    json_run(&["--journal", "off"]);
    assert_eq!(ids(&list(ws, &[])), [kept], "the run that left nothing took no place");
    let journaled = json_run(&[]);
    assert_eq!(ids(&list(ws, &[])), [journaled], "a journaled run is the newest, counted while it ran");
}

/// Waits for `children` (commands run at once in `ws`, round `round`):
/// each exits with `code` and warns of nothing, and runs are left.
fn ended_quietly_leaving_runs(ws: &Path, children: Vec<std::process::Child>, code: i32, round: usize) {
    for child in children {
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "round {round}: {err}");
        assert!(!err.contains("warning") && !err.contains("WARN"), "round {round}: {err}");
    }
    assert!(!ids(&list(ws, &[])).is_empty(), "round {round}: the newest run stays");
}

/// Several `codemode run`s at once with `keep_runs = 1`, as scripts and
/// agents start them: each prunes while its run runs, keeping its own, and
/// none removes a run that changed after its prune started or one whose
/// receipt or journal is still being written. So the newest run always
/// stays, and no run warns of a receipt it could not save or a run it
/// could not remove. (Each used to keep only its own: a burst often left
/// no run at all, and warnings.)
#[test]
fn runs_at_once_with_keep_runs_one_keep_the_newest_and_warn_of_nothing() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let (_config_dir, config) = config_keeping(1);
    std::fs::write(ws.join("p.js"), "return 1;").unwrap();
    for burst in 0..4 {
        let children: Vec<_> =
            (0..6).map(|_| spawn(&["run", "p.js", "--config", config.as_str()], ws, &[])).collect();
        ended_quietly_leaving_runs(ws, children, 0, burst);
    }
}

/// Resumes at once prune after their runs end, each keeping its own run:
/// each prunes as from when it started, so runs the others ended meanwhile
/// are left to the next prune, and the newest stay.
#[test]
fn resumes_at_once_with_keep_runs_one_keep_the_newest_and_warn_of_nothing() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let (_config_dir, config) = config_keeping(1);
    std::fs::write(ws.join("w.js"), "await tools.write({path: 'w.txt', content: 'w'}); return 1;").unwrap();
    for round in 0..3 {
        let paused: Vec<String> = (0..4)
            .map(|_| {
                let out = codemode(
                    &["run", "w.js", "--approve", "pause", "--config", config.as_str(), "-q"],
                    "",
                    ws,
                );
                assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
                stderr(&out).split_whitespace().nth(3).unwrap().to_owned()
            })
            .collect();
        let children: Vec<_> = paused
            .iter()
            .map(|id| spawn(&["resume", id.as_str(), "--deny", "1", "--config", config.as_str()], ws, &[]))
            .collect();
        ended_quietly_leaving_runs(ws, children, 1, round);
    }
}

/// `codemode run --json` saves no receipt: with its journal kept elsewhere
/// (`--journal DIR`) it leaves no folder in the runs folder, not even an
/// empty one (it holds its folder only when something will be written
/// there).
#[test]
fn a_json_run_with_its_journal_elsewhere_leaves_no_folder() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let journals = tempfile::tempdir().unwrap();
    std::fs::write(ws.join("p.js"), "return 1;").unwrap();
    let out = codemode(&["run", "p.js", "--json", "--journal", journals.path().to_str().unwrap()], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let folders = std::fs::read_dir(runs_dir(ws)).map(|d| d.count()).unwrap_or(0);
    assert_eq!(folders, 0, "no folder in the runs folder");
}

/// A run `codemode runs list` shows but whose journal this store does not
/// have (made with `--journal off`, or its journal removed) is refused by
/// `resume` and `rollback` saying so, not as an unknown id.
#[test]
fn a_run_without_its_journal_is_refused_as_such_not_as_unknown() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let id = real_run_with(ws, "return 1;", &["--journal", "off"]);
    assert_eq!(ids(&list(ws, &[])), std::slice::from_ref(&id));
    for args in [vec!["resume", id.as_str(), "--allow", "1"], vec!["rollback", id.as_str()]] {
        let out = codemode(&args, "", ws);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {err}");
        assert!(
            err.contains("has a receipt but no journal") && !err.contains("unknown id"),
            "{args:?}: {err}"
        );
    }
    let out = codemode(&["resume", "run-20000101T000000Z-00000000", "--allow", "1"], "", ws);
    assert!(stderr(&out).contains("unknown id"), "{}", stderr(&out));
    // The refusal alone, not a summary of a run of nothing.
    assert!(stderr(&out).starts_with("codemode: resume refused (not_resumable): "), "{}", stderr(&out));
    assert!(!stderr(&out).contains("0 calls"), "{}", stderr(&out));
}

#[test]
fn runs_never_show_in_git_status() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(ws).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start"]);
    let id = real_run(ws, "return (await tools.read({path: 'a.txt'})).content;");
    std::fs::remove_file(ws.join("prog.js")).unwrap();
    assert!(runs_dir(ws).join(&id).join("receipt.json").is_file());
    assert!(!ws.join(".codemode").exists(), "run state is not in the workspace");
    assert_eq!(git(&["status", "--porcelain", "--untracked-files=all", "--ignored=no"]), "");
}

#[test]
fn an_untrusted_journal_url_does_not_apply_and_a_named_one_does() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let elsewhere = tempfile::tempdir().unwrap();
    let journals = elsewhere.path().join("journals");
    journal(&journals, "run-20260102T030405Z-00000far", RunState::Paused);
    std::fs::write(ws.join("codemode.toml"), format!("[journal]\nurl = \"{}\"\n", journals.display()))
        .unwrap();

    // Untrusted: ignored, and said so; the default folder is used.
    let out = codemode(&["runs", "list", "--json"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[journal] url is ignored") && stderr(&out).contains("codemode trust"),
        "{}",
        stderr(&out)
    );
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!([]));
    let out = codemode(&["run", "-"], "return 1;", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stderr(&out)
        .lines()
        .find(|l| l.contains("is not trusted"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{}", stderr(&out)));
    assert!(line.contains("journal url"), "{line}");

    // Named with --config: the user's own, it applies: its journals are
    // listed, with the receipt folders of the workspace.
    let listing = list(ws, &["--config", "codemode.toml"]);
    assert_eq!(listing.len(), 2, "{listing:#?}");
    let far = listing.iter().find(|r| r["run_id"] == "run-20260102T030405Z-00000far").unwrap();
    assert_eq!((far["journal"].as_bool(), far["state"].as_str()), (Some(true), Some("paused")));
    // --journal wins over both.
    assert_eq!(
        list(ws, &["--config", "codemode.toml", "--journal", "off"]).len(),
        1,
        "off reads the default folder: the run above"
    );
    let listing = list(ws, &["--journal", journals.to_str().unwrap()]);
    assert_eq!(listing[0]["pending"], 1);

    // A database URL applies when the file is the user's (a database that
    // cannot be reached is a warning of the run, without the password);
    // untrusted, it is ignored.
    std::fs::write(ws.join("codemode.toml"), "[journal]\nurl = \"postgres://me:s3cret@127.0.0.1:9/runs\"\n")
        .unwrap();
    let out = codemode(&["run", "-"], "return 1;", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("journal could not be written"), "{}", stderr(&out));
    let out = codemode(&["run", "-", "--config", "codemode.toml"], "return 1;", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("journal could not be written") && err.contains("PostgreSQL"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn journal_off_writes_no_journal_and_a_journal_folder_in_the_workspace_is_refused() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("prog.js"), "return 'x'.repeat(40000);").unwrap();
    let out = codemode(&["run", "prog.js", "--journal", "off"], "", ws);
    // Completed with its value cut (exit 6).
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let folders: Vec<PathBuf> = std::fs::read_dir(runs_dir(ws)).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(folders.len(), 1);
    assert!(folders[0].join("receipt.json").is_file());
    assert!(!folders[0].join("journal.jsonl").exists(), "--journal off writes no journal");

    // Inside the workspace tool calls could read or change journals:
    // refused, `.codemode/` too (tests/all/attacks/run_state.rs). Outside
    // is the user's choice.
    let out = codemode(&["run", "prog.js", "--journal", "journals"], "", ws);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is inside the workspace"), "{}", stderr(&out));
    let elsewhere = tempfile::tempdir().unwrap();
    let journals = elsewhere.path().join("journals");
    let out = codemode(&["run", "prog.js", "--journal", journals.to_str().unwrap()], "", ws);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let out = codemode(&["run", "prog.js", "--journal", "mysql://db"], "", ws);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--journal") && stderr(&out).contains("not supported"), "{}", stderr(&out));
}

/// Runs an earlier version kept in `<workspace>/.codemode/runs` are moved to
/// the state folder once, said in one line, as history: a paused one comes
/// in ended (interrupted), and a decision recorded there is dropped (a
/// program may have written either).
#[test]
fn runs_kept_in_an_old_codemode_folder_are_moved_once_and_said() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let old = ws.join(".codemode/runs");
    let id = "run-20260102T030405Z-0000old1";
    journal(&old, id, RunState::Paused);
    let approval = r#"{"t":"approval","seq":2,"decision":"allow","by":"person","at":"2026-01-02T03:04:06Z"}"#;
    let mut file = std::fs::File::options().append(true).open(old.join(id).join("journal.jsonl")).unwrap();
    writeln!(file, "{approval}").unwrap();
    let out = codemode(&["runs", "list", "--json"], "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let said: Vec<&str> = err.lines().filter(|l| l.contains("moved 1 run(s)")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("1 decision(s)") && said[0].contains("codemode approve"), "{}", said[0]);
    assert!(said[0].contains("1 paused run(s) among them can no longer be resumed"), "{}", said[0]);
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ids(&listed), [id]);
    assert_eq!(listed[0]["state"], "interrupted");
    assert!(!old.exists(), "the old folder is gone");
    let moved = std::fs::read_to_string(runs_dir(ws).join(id).join("journal.jsonl")).unwrap();
    assert!(!moved.contains(r#""t":"approval""#), "{moved}");
    // Once: the next command says nothing.
    let out = codemode(&["runs", "list", "--json"], "", ws);
    assert!(!stderr(&out).contains("moved"), "{}", stderr(&out));
}

/// `runs wait` and `runs cancel` with `--json` put one JSON object on
/// stdout whatever the outcome (scripts parse it): an unknown run, a
/// paused run cancelled, a run still going at `--timeout`; a run made
/// without a journal is waited on through its receipt, and a paused run
/// ended since its receipt says so.
#[test]
fn runs_wait_and_cancel_answer_json_on_every_path() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let json_of = |out: &Output| -> Value {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: stdout {:?}, stderr {}", out.stdout, stderr(out)))
    };
    let unknown = codemode(&["runs", "wait", "run-20261207T000000Z-00000000", "--json"], "", ws);
    assert_eq!(unknown.status.code(), Some(5), "{}", stderr(&unknown));
    assert_eq!(json_of(&unknown)["error"]["kind"], "not_resumable");

    std::fs::write(ws.join("w.js"), "await tools.write({path: 'w.txt', content: 'x'});").unwrap();
    // Without --json, so its receipt is saved (as paused).
    let paused = codemode(&["run", "w.js", "--approve", "pause"], "", ws);
    assert_eq!(paused.status.code(), Some(4), "{}", stderr(&paused));
    let err = stderr(&paused);
    let id = err.split("run run-").nth(1).map(|rest| format!("run-{}", &rest[..25])).expect("a run id");
    let cancelled = codemode(&["runs", "cancel", &id, "--json"], "", ws);
    assert_eq!(cancelled.status.code(), Some(0), "{}", stderr(&cancelled));
    assert_eq!(json_of(&cancelled), serde_json::json!({"run_id": id, "state": "cancelled", "was": "paused"}));
    let again = codemode(&["runs", "cancel", &id, "--json"], "", ws);
    assert_eq!((again.status.code(), &json_of(&again)["state"]), (Some(5), &Value::from("cancelled")));
    let waited = codemode(&["runs", "wait", &id], "", ws);
    assert_eq!(waited.status.code(), Some(130), "{}", stderr(&waited));
    assert!(
        stderr(&waited).contains("its receipt is of before that, when it was paused"),
        "{}",
        stderr(&waited)
    );

    let off = real_run_with(ws, "return 5", &["--journal", "off"]);
    let waited = codemode(&["runs", "wait", &off, "--json"], "", ws);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    assert_eq!(json_of(&waited)["value"], 5);

    let mut going = spawn(&["run", "-", "--approve", "allow"], ws, &[]);
    going.stdin.take().unwrap().write_all(b"await tools.bash({command: 'sleep 5'}); return 1").unwrap();
    let listed = |ws: &Path| list(ws, &[]).iter().any(|r| r["state"] == "running");
    let waited_since = std::time::Instant::now();
    while !listed(ws) && waited_since.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let running = list(ws, &[]).into_iter().find(|r| r["state"] == "running").expect("a run going");
    let id = running["run_id"].as_str().unwrap();
    let still = codemode(&["runs", "wait", id, "--timeout", "0", "--json"], "", ws);
    assert_eq!(still.status.code(), Some(7), "{}", stderr(&still));
    assert_eq!(json_of(&still)["state"], "running");
    let _ = going.kill();
    let _ = going.wait();
}

/// `runs wait` takes a run id, never a path, and shows only the receipt
/// of the run it names (review findings): a path given as the id, or a
/// receipt of another run planted in a run's folder, is no outcome of it.
/// A store that cannot be read still answers `--json` with its object.
#[test]
fn runs_wait_shows_no_receipt_but_the_named_runs() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let off = real_run_with(ws, "return 5", &["--journal", "off"]);
    let folder = crate::common::runs_dir(ws).join(&off);
    let by_path = codemode(&["runs", "wait", folder.to_str().unwrap(), "--json"], "", ws);
    assert_eq!(by_path.status.code(), Some(5), "{}", stderr(&by_path));
    let receipt = folder.join("receipt.json");
    let planted = std::fs::read_to_string(&receipt).unwrap().replace(&off, "run-20261207T000000Z-00000000");
    std::fs::write(&receipt, planted).unwrap();
    let wrong = codemode(&["runs", "wait", &off, "--json"], "", ws);
    assert_eq!(wrong.status.code(), Some(5), "{}", stderr(&wrong));
    let unreachable = codemode(
        &["runs", "wait", &off, "--json", "--journal", "postgres://nobody@127.0.0.1:1/none"],
        "",
        ws,
    );
    let answer: Value = serde_json::from_slice(&unreachable.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", stderr(&unreachable)));
    assert!(answer["error"]["message"].is_string(), "{answer}");
}

/// An interrupted run whose journal a recovery could not read shows
/// `unreadable` in `runs list` and `runs show`, as a paused one does.
#[test]
fn an_interrupted_run_with_a_damaged_journal_reads_unreadable() {
    let ws = crate::common::workspace();
    let root = runs_dir(ws.path());
    journal(&root, "run-damaged", RunState::Running);
    let file = root.join("run-damaged").join("journal.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, r#"{"t":"call","seq":"#);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let listed = list(ws.path(), &[]);
    let state = listed.iter().find(|r| r["run_id"] == "run-damaged").map(|r| r["state"].clone());
    assert_eq!(state, Some(Value::from("unreadable")), "{listed:?}");
    let shown = codemode(&["runs", "show", "run-damaged", "--json"], "", ws.path());
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["state"], "unreadable", "{shown}");
    assert!(shown["unreadable"].as_str().unwrap().contains("line 3"), "{shown}");
}
