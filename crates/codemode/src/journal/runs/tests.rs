//! Listing, showing and pruning runs in a temporary workspace.

use super::read::JournalRead;
use super::*;
use crate::journal::Retention;
use crate::receipt::{CallStatus, Decision};
use std::time::Duration;
use std::time::SystemTime;

fn header(run_id: &str, name: &str) -> String {
    serde_json::json!({
        "t": "header", "journal_version": 1, "run_id": run_id,
        "started_at": "2026-01-02T03:04:05Z", "started_unix_ms": 1, "codemode_version": "0.1.0",
        "workspace": "/ws",
        "program": {"name": name, "sha256": "ab", "source": "return 1;", "path": "/ws/p.js"},
        "catalog_sha256": "cat", "policy_sha256": "pol", "policy": {}, "limits": {},
    })
    .to_string()
}

const CALL_1: &str = r#"{"t":"call","seq":1,"tool":"read","caller":"program","args":{"path":"a.txt"}}"#;
const DONE_1: &str = r#"{"t":"done","seq":1,"how":"inline","ok":true,"end":{"status":"ok","decision":"auto","elapsed_ms":1.0,"bytes":3},"payload":{}}"#;
const CALL_2: &str =
    r#"{"t":"call","seq":2,"tool":"write","caller":"program","args":{"path":"b.txt","content":"x"}}"#;
const PENDING_2: &str = r#"{"t":"pending","seq":2,"tool":"write","args":{"path":"b.txt","content":"x"},"reason":"posture ask: write changes files"}"#;

/// A store with one paused run (a read done, a write pending) and one
/// completed run, and the workspace it is in.
async fn two_runs() -> (tempfile::TempDir, Runs) {
    let ws = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(ws.path()).unwrap();
    let runs = Runs::in_folder(None, real.join("runs"));
    let store = runs.store().clone();
    let mut j = store.create("run-a", header("run-a", "p.js")).await.unwrap();
    j.append(format!("{CALL_1}\n{DONE_1}\n{CALL_2}\n{PENDING_2}\n")).await.unwrap();
    j.commit(RunState::Paused).await.unwrap();
    drop(j);
    let mut j = store.create("run-b", header("run-b", "q.js")).await.unwrap();
    j.append(format!("{CALL_1}\n{DONE_1}\n")).await.unwrap();
    j.commit(RunState::Completed).await.unwrap();
    drop(j);
    (ws, runs)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_journal_shows_its_program_calls_and_pending_calls() {
    let (_ws, runs) = two_runs().await;
    let d = runs.show("run-a").await.unwrap();
    assert_eq!(d.state, "paused");
    let program = d.program.unwrap();
    assert_eq!(
        (program.name.as_str(), program.sha256.as_str(), program.path.as_deref()),
        ("p.js", "ab", Some("/ws/p.js"))
    );
    assert_eq!((d.catalog_sha256.as_deref(), d.policy_sha256.as_deref()), (Some("cat"), Some("pol")));
    assert_eq!(d.calls.len(), 2);
    assert_eq!((d.calls[0].status, d.calls[0].decision), (Some(CallStatus::Ok), Some(Decision::Auto)));
    assert_eq!(d.calls[1].status, None);
    assert_eq!(d.pending.len(), 1);
    assert_eq!(d.pending[0].arguments["path"], "b.txt");
    assert!(d.pending[0].reason.as_deref().unwrap().contains("posture ask"));
    assert!(d.receipt.is_none());

    let list = runs.list().await.unwrap();
    let shown: Vec<_> =
        list.iter().map(|l| (l.run_id.as_str(), l.state.as_str(), l.calls, l.pending)).collect();
    assert!(shown.contains(&("run-a", "paused", Some(2), 1)), "{shown:?}");
    assert!(shown.contains(&("run-b", "completed", Some(1), 0)), "{shown:?}");
    assert_eq!(list[0].program.as_deref().map(|p| p.ends_with(".js")), Some(true));

    let e = runs.show("run-nope").await.unwrap_err();
    assert!(matches!(e, StoreError::NotResumable { state: NotResumableState::Unknown, .. }), "{e}");
    let e = runs.show("../etc").await.unwrap_err();
    assert!(matches!(e, StoreError::NotResumable { state: NotResumableState::Unknown, .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_closes_a_pending_call() {
    let read = JournalRead::of(&[
        header("r", "p.js"),
        CALL_2.into(),
        PENDING_2.into(),
        r#"{"t":"decision","seq":2,"allow":true,"at":"2026-01-02T03:04:05Z"}"#.into(),
        "not json".into(),
    ]);
    assert_eq!(read.open_pending().count(), 0);
    assert_eq!(read.decisions.len(), 1);
    assert!(read.header.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_keeps_paused_runs_past_the_count_until_their_age() {
    let (_ws, runs) = two_runs().await;
    let keep_one = Retention { keep_runs: 0, keep_days: 7 };
    // run-b came after the paused run-a: kept while run-a waits.
    let report = runs.prune(keep_one, &PruneOptions::default().dry_run(true)).await.unwrap();
    assert!(report.removed.is_empty(), "{:?}", report.removed);
    assert_eq!(runs.list().await.unwrap().len(), 2);
    // The report says what kept it.
    assert_eq!((report.kept_for_paused, report.paused_run.as_deref()), (1, Some("run-a")));

    let later = SystemTime::now() + Duration::from_secs(8 * 86_400);
    let report = runs.prune(keep_one, &PruneOptions::keeping("run-b").at(later)).await.unwrap();
    let removed: Vec<_> = report.removed.iter().map(|r| (r.run_id.as_str(), r.why)).collect();
    assert_eq!(removed, [("run-a", PruneReason::Age)]);
    assert_eq!(report.kept, 1);
    let left: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| l.run_id).collect();
    assert_eq!(left, ["run-b"]);
    assert!(!runs.receipts_folder().join("run-a").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_run_is_not_pruned() {
    let (_ws, runs) = two_runs().await;
    let held = runs.store().create("run-c", header("run-c", "r.js")).await.unwrap();
    let later = SystemTime::now() + Duration::from_secs(30 * 86_400);
    let report = runs
        .prune(Retention { keep_runs: 0, keep_days: 0 }, &PruneOptions::default().at(later))
        .await
        .unwrap();
    assert_eq!(report.busy, ["run-c"]);
    assert_eq!(report.removed.len(), 2);
    drop(held);
    let left: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| (l.run_id, l.state)).collect();
    assert_eq!(left, [("run-c".to_owned(), "interrupted".to_owned())]);
}

/// A journal cut by a crash inside a character loses only its cut
/// line; a journal damaged in a complete line is listed as unreadable
/// and the other runs are still listed.
#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_journal_does_not_hide_the_other_runs() {
    let (_ws, runs) = two_runs().await;
    let mut j = runs.store().create("run-c", header("run-c", "é.js")).await.unwrap();
    j.append(format!("{CALL_1}\n")).await.unwrap();
    j.commit(RunState::Paused).await.unwrap();
    drop(j);
    let journal = |id: &str| runs.receipts_folder().join(id).join(super::super::local::JOURNAL_FILE);
    // run-c: a line with "✓" appended and cut inside it, no newline.
    let mut bytes = std::fs::read(journal("run-c")).unwrap();
    bytes.extend_from_slice(&"{\"t\":\"call\",\"x\":\"✓".as_bytes()[..18]);
    std::fs::write(journal("run-c"), &bytes).unwrap();
    // run-b: a complete line made invalid.
    let mut bytes = std::fs::read(journal("run-b")).unwrap();
    let at = bytes.iter().position(|&b| b == b'\n').unwrap() + 5;
    bytes[at] = 0xff;
    std::fs::write(journal("run-b"), &bytes).unwrap();

    let list = runs.list().await.unwrap();
    let shown: Vec<_> = list.iter().map(|l| (l.run_id.as_str(), l.state.as_str(), l.calls)).collect();
    assert!(shown.contains(&("run-a", "paused", Some(2))), "{shown:?}");
    assert!(shown.contains(&("run-b", UNREADABLE, None)), "{shown:?}");
    assert!(shown.contains(&("run-c", "paused", Some(1))), "{shown:?}");
    let e = runs.show("run-b").await.unwrap_err();
    assert!(e.to_string().contains("line 2 is not UTF-8"), "{e}");
    assert_eq!(runs.show("run-c").await.unwrap().calls.len(), 1);
}

/// Two processes pruning the same folder at once (two `codemode run`s
/// ending together) each find runs the other is removing: neither may
/// call that a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_prunes_at_once_report_no_failures() {
    let ws = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(ws.path()).unwrap();
    let runs = Runs::in_folder(None, real.join("runs"));
    for i in 0..300 {
        let id = format!("run-{i:03}");
        let mut j = runs.store().create(&id, header(&id, "p.js")).await.unwrap();
        j.append(format!("{CALL_1}\n{DONE_1}\n")).await.unwrap();
        j.commit(RunState::Completed).await.unwrap();
        let receipts = runs.receipts_folder().join(&id);
        std::fs::create_dir_all(&receipts).unwrap();
        std::fs::write(receipts.join("spill-1.json"), "{}").unwrap();
    }
    let none = Retention { keep_runs: 0, keep_days: 7 };
    let (a, b, c) = (
        Runs::in_folder(None, real.join("runs")),
        Runs::in_folder(None, real.join("runs")),
        Runs::in_folder(None, real.join("runs")),
    );
    let options = PruneOptions::default();
    let (ra, rb, rc) = tokio::join!(
        tokio::spawn(async move { a.prune(none, &PruneOptions::default()).await }),
        tokio::spawn(async move { b.prune(none, &PruneOptions::default()).await }),
        c.prune(none, &options),
    );
    let mut removed = Vec::new();
    for report in [ra.unwrap().unwrap(), rb.unwrap().unwrap(), rc.unwrap()] {
        assert_eq!(report.failures, Vec::<String>::new());
        // (A run another prune was removing may be missing from a scan.)
        assert!(report.removed.len() + report.kept <= 300);
        removed.extend(report.removed.into_iter().map(|r| r.run_id));
    }
    // Every run was removed by one of them. (Rarely by two: both
    // `remove_dir_all`s of one folder can succeed, so a run may be in
    // two reports.)
    removed.sort();
    removed.dedup();
    assert_eq!(removed.len(), 300);
    assert_eq!(runs.list().await.unwrap().len(), 0);
}

/// An interrupted run waits for its recovery (a restarted batch recovers
/// its lines' runs): not counted against `keep_runs`, removed by age only.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_run_is_not_pruned_by_count() {
    let ws = tempfile::tempdir().unwrap();
    let runs = Runs::in_folder(None, std::fs::canonicalize(ws.path()).unwrap().join("runs"));
    let mut j = runs.store().create("run-b", header("run-b", "q.js")).await.unwrap();
    j.commit(RunState::Completed).await.unwrap();
    drop(j);
    drop(runs.store().create("run-c", header("run-c", "r.js")).await.unwrap());
    let report =
        runs.prune(Retention { keep_runs: 0, keep_days: 30 }, &PruneOptions::default()).await.unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    let left: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| (l.run_id, l.state)).collect();
    assert_eq!(left, [("run-c".to_owned(), "interrupted".to_owned())]);
    let later = SystemTime::now() + Duration::from_secs(31 * 86_400);
    let report = runs
        .prune(Retention { keep_runs: 0, keep_days: 30 }, &PruneOptions::default().at(later))
        .await
        .unwrap();
    assert_eq!(report.removed.len(), 1, "by age: {report:?}");
}

/// A run id as `Engine::new_run_id` makes them, started `ago` before now.
fn run_id_started(ago: Duration, n: u32) -> String {
    let at = codemode_base::time_text::rfc3339_utc(SystemTime::now() - ago);
    let basic: String = at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    format!("run-{basic}-{n:08x}")
}

/// Completed runs named `ids` in a fresh store.
async fn completed(ids: &[String]) -> (tempfile::TempDir, Runs) {
    let ws = tempfile::tempdir().unwrap();
    let runs = Runs::in_folder(None, std::fs::canonicalize(ws.path()).unwrap().join("runs"));
    for id in ids {
        let mut j = runs.store().create(id, header(id, "p.js")).await.unwrap();
        j.append(format!("{CALL_1}\n{DONE_1}\n")).await.unwrap();
        j.commit(RunState::Completed).await.unwrap();
    }
    (ws, runs)
}

/// A store of at most keep_runs runs, all started within keep_days,
/// is settled by the folder's names: no journal is opened, so a run
/// another process holds is not even seen (a full prune reports it busy).
#[tokio::test(flavor = "multi_thread")]
async fn a_prune_with_nothing_due_reads_no_journal() {
    let ids: Vec<String> = (0..3).map(|n| run_id_started(Duration::from_secs(60), n)).collect();
    let (_ws, runs) = completed(&ids).await;
    let held_id = run_id_started(Duration::ZERO, 9);
    let _held = runs.store().create(&held_id, header(&held_id, "p.js")).await.unwrap();
    let retention = |keep_runs| Retention { keep_runs, keep_days: 7 };

    let report = runs.prune(retention(4), &PruneOptions::default()).await.unwrap();
    assert!(report.busy.is_empty() && report.removed.is_empty(), "{report:?}");
    assert_eq!(report.kept, 4);

    // One run past keep_runs: every journal is read, the held run seen.
    let report = runs.prune(retention(3), &PruneOptions::default()).await.unwrap();
    assert_eq!(report.busy, std::slice::from_ref(&held_id));
    assert_eq!(report.removed.len(), 0, "the held run does not count: {report:?}");
}

/// A name that does not settle it (a run id older than keep_days, or not
/// a run id as the engine makes them) makes the prune read every run, and
/// then it prunes exactly as without the names.
#[tokio::test(flavor = "multi_thread")]
async fn a_prune_with_nothing_due_by_name_is_the_full_prune() {
    for odd in [run_id_started(Duration::from_secs(8 * 86_400), 1), "run-by-hand".to_owned()] {
        let (_ws, runs) = completed(std::slice::from_ref(&odd)).await;
        let held_id = run_id_started(Duration::ZERO, 9);
        let _held = runs.store().create(&held_id, header(&held_id, "p.js")).await.unwrap();
        let report =
            runs.prune(Retention { keep_runs: 5, keep_days: 7 }, &PruneOptions::default()).await.unwrap();
        assert_eq!(report.busy, [held_id], "{odd}: every journal read");
        // The journal was written just now: its age, not its name's, counts.
        assert!(report.removed.is_empty(), "{odd}: {report:?}");
    }
}

/// With slack, runs past keep_runs gather until they are more than the
/// slack, then the prune goes down to keep_runs, oldest first.
#[tokio::test(flavor = "multi_thread")]
async fn slack_lets_runs_gather_then_prunes_to_keep_runs() {
    let ids: Vec<String> =
        (0..12).map(|n| run_id_started(Duration::from_secs(600 - u64::from(n)), n)).collect();
    let (_ws, runs) = completed(&ids[..11]).await;
    let retention = Retention { keep_runs: 10, keep_days: 7 };
    let options = PruneOptions::default().slack(1);
    let report = runs.prune(retention, &options).await.unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.kept, 11);

    let mut j = runs.store().create(&ids[11], header(&ids[11], "p.js")).await.unwrap();
    j.commit(RunState::Completed).await.unwrap();
    drop(j);
    let report = runs.prune(retention, &options).await.unwrap();
    assert_eq!(report.kept, 10, "{report:?}");
    assert_eq!(report.removed.len(), 2, "{report:?}");
    // Without slack, the same store is pruned at once.
    let report = runs.prune(Retention { keep_runs: 9, ..retention }, &PruneOptions::default()).await.unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
}

/// The pruning of `codemode run` goes on while its run does: the run being
/// made counts as the newest against `keep_runs` whether its folder is
/// there yet or not, both when the folder's names settle it and when every
/// run is read; a kept run that is not being made counts only when found.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_being_made_counts_before_its_folder_is_made() {
    let ids: Vec<String> =
        (0..3).map(|n| run_id_started(Duration::from_secs(60 - u64::from(n)), n)).collect();
    let coming = run_id_started(Duration::ZERO, 9);
    let keep = |keep_runs| Retention { keep_runs, keep_days: 7 };
    let removed =
        |report: &PruneReport| -> Vec<String> { report.removed.iter().map(|r| r.run_id.clone()).collect() };

    // Three runs and the one being made are past three: the oldest goes.
    let (_ws, runs) = completed(&ids).await;
    let report = runs.prune(keep(3), &PruneOptions::keeping_run_being_made(&coming)).await.unwrap();
    assert_eq!(removed(&report), [ids[0].clone()], "{report:?}");

    // Every run read (past the slack): the run being made still counts first.
    let (_ws, runs) = completed(&ids).await;
    let report = runs.prune(keep(1), &PruneOptions::keeping_run_being_made(&coming)).await.unwrap();
    assert_eq!(report.removed.len(), 3, "only the run being made is kept: {report:?}");

    // A kept run that is not being made (it leaves no folder, or is gone)
    // takes no run's place.
    let (_ws, runs) = completed(&ids).await;
    let report = runs.prune(keep(3), &PruneOptions::keeping(&coming)).await.unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    let report = runs.prune(keep(1), &PruneOptions::keeping(&coming)).await.unwrap();
    assert_eq!(report.removed.len(), 2, "{report:?}");

    // Within keep_runs with the run being made, the names settle it: no
    // journal is read, so a run another process holds is not even seen.
    // The same id twice, and ids that are no run's, count at most once.
    let (_ws, runs) = completed(&ids).await;
    let held_id = run_id_started(Duration::ZERO, 8);
    let _held = runs.store().create(&held_id, header(&held_id, "p.js")).await.unwrap();
    let mut options = PruneOptions::keeping_run_being_made(&coming);
    options.keep.extend([coming.clone(), String::new(), "not a run".to_owned()]);
    let report = runs.prune(keep(5), &options).await.unwrap();
    assert!(report.busy.is_empty() && report.removed.is_empty(), "settled by the names: {report:?}");
    // One fewer kept: every run is read and the held run seen (it does not
    // count, so the three and the run being made are within four).
    let report = runs.prune(keep(4), &options).await.unwrap();
    assert_eq!(report.busy, std::slice::from_ref(&held_id));
    assert!(report.removed.is_empty(), "{report:?}");
}

/// Runs at once in several processes each prune while their run runs,
/// each keeping its own: a run that changed after a prune started is left
/// to the next prune (it counts), so two runs at once never remove each
/// other's; a run whose time is far ahead (a clock set back) is not one of
/// those, and goes for its count as any other.
#[tokio::test(flavor = "multi_thread")]
async fn a_prune_leaves_runs_that_changed_after_it_started_to_the_next() {
    let ids: Vec<String> = (0..2).map(|n| run_id_started(Duration::from_secs(60), n)).collect();
    let (_ws, runs) = completed(&ids).await;
    let keep_one = Retention { keep_runs: 1, keep_days: 7 };
    let removed = |report: &PruneReport| report.removed.len();
    // Started before both last changed: it removes neither.
    let before = SystemTime::now() - Duration::from_secs(30);
    let report = runs.prune(keep_one, &PruneOptions::default().at(before)).await.unwrap();
    assert_eq!(removed(&report), 0, "{report:?}");
    // Started long before (their times are an hour ahead of it): that is
    // a clock set back, not runs ending meanwhile: the older goes.
    let long_before = SystemTime::now() - Duration::from_secs(3_600);
    let report = runs.prune(keep_one, &PruneOptions::default().at(long_before)).await.unwrap();
    assert_eq!(removed(&report), 1, "{report:?}");
}

/// A paused run whose journal no resume can read (a damaged line) is
/// listed as unreadable, as the resume says, and holds no later run back
/// from the count: it waits for nobody.
#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_paused_run_is_unreadable_and_holds_no_run_back() {
    let (_ws, runs) = two_runs().await;
    let journal = runs.receipts_folder().join("run-a").join("journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    let at = text.rfind(r#"{"t":"state""#).unwrap();
    text.insert_str(at, "not json\n");
    std::fs::write(&journal, text).unwrap();
    let listed: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| (l.run_id, l.state)).collect();
    assert!(listed.contains(&("run-a".to_owned(), UNREADABLE.to_owned())), "{listed:?}");
    // `show` says the same, and which line: no pending call to decide.
    let shown = runs.show("run-a").await.unwrap();
    assert_eq!(shown.state, UNREADABLE);
    assert!(shown.unreadable.as_deref().is_some_and(|why| why.contains("line")), "{:?}", shown.unreadable);
    assert!(shown.pending.is_empty(), "{:?}", shown.pending);
    let report =
        runs.prune(Retention { keep_runs: 0, keep_days: 7 }, &PruneOptions::default()).await.unwrap();
    let removed: Vec<_> = report.removed.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(removed, ["run-b"], "{report:?}");
}

/// A run whose folder the process that made it still holds (it will still
/// write its receipt or its journal there: `Engine::hold_run_folder`) is
/// busy to every prune, whatever its count or age, until let go.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_run_folder_is_not_pruned_until_let_go() {
    let (_ws, runs) = two_runs().await;
    let folder = runs.receipts_folder().join("run-b");
    let held = crate::journal::folder_hold::hold_shared(&folder).unwrap();
    let later = SystemTime::now() + Duration::from_secs(30 * 86_400);
    let none = Retention { keep_runs: 0, keep_days: 0 };
    let report = runs.prune(none, &PruneOptions::default().at(later)).await.unwrap();
    assert_eq!(report.busy, ["run-b"], "{report:?}");
    assert!(folder.join("journal.jsonl").is_file(), "left whole");
    drop(held);
    let report = runs.prune(none, &PruneOptions::default().at(later)).await.unwrap();
    assert!(report.busy.is_empty() && !folder.exists(), "{report:?}");
}

/// A journal left empty (its process died as it made the file) is listed
/// as unreadable, as `resume` answers ("the journal is empty"), not as an
/// interrupted run waiting for its recovery.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_journal_is_listed_unreadable() {
    let (_ws, runs) = two_runs().await;
    let folder = runs.receipts_folder().join("run-c");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join(super::super::local::JOURNAL_FILE), "").unwrap();
    let list = runs.list().await.unwrap();
    let shown: Vec<_> = list.iter().map(|l| (l.run_id.as_str(), l.state.as_str())).collect();
    assert!(shown.contains(&("run-c", UNREADABLE)), "{shown:?}");
    assert!(shown.contains(&("run-a", "paused")), "{shown:?}");
    assert_eq!(runs.show("run-c").await.unwrap().state, UNREADABLE);
}
