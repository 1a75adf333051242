//! Runs longer than a request (docs/SERVE.md, "Runs longer than a
//! request"; docs/JOURNAL.md, "Waiting and cancelling"): through the
//! official TypeScript SDK clients, a served run that outlasts the client's
//! 60 s request timeout is answered `running`, waited for and its value
//! got; a cancel reaps a sleeping bash; and from another process, `codemode
//! runs cancel` stops a `codemode run` within about a second (local store
//! and PostgreSQL) while `codemode runs wait` follows it to its end.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve_clients::{Served, client, clients, execute};

/// Pids of live (not zombie) processes whose command line contains
/// `marker` (a program's bash runs in a PID namespace: its `$$` is not the
/// host's pid).
pub(crate) fn processes_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) == Some("Z");
        if !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// Watches for a process whose command line has `marker` for up to 60 s:
/// whether one was seen, and when none was left after that.
fn watch(marker: String) -> std::thread::JoinHandle<(bool, Option<Instant>)> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut seen = false;
        while start.elapsed() < Duration::from_secs(60) {
            let running = !processes_with(&marker).is_empty();
            if seen && !running {
                return (true, Some(Instant::now()));
            }
            seen |= running;
            std::thread::sleep(Duration::from_millis(20));
        }
        (seen, None)
    })
}

/// Waits up to 20 s for `file` in `ws` (a program's bash makes it when
/// it has started its sleep).
fn started(ws: &Path, file: &str) {
    assert!(within(Duration::from_secs(20), || ws.join(file).exists()), "no {file}");
}

/// Polls `done` every 20 ms for up to `bound`; whether it became true.
fn within(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < bound {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// The "Done when" of issue 33: a served run of 3 minutes, through the
/// TypeScript SDK's client with a 60 s request timeout and the default
/// --yield-after (45 s). The model gets `running`, waits (each wait
/// answered within the timeout, with progress meanwhile), and gets the
/// value. The test mostly sleeps.
#[test]
fn a_three_minute_served_run_outlasts_a_60_s_request_timeout() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let program = "let slept = 0; for (let i = 0; i < 6; i++) { await tools.bash({command: 'sleep 30'}); slept += 30 } \
                   return {slept}";
    let plan = json!({
        "server": served.server(&["--posture", "full-access", "--deadline", "300"]),
        "steps": [
            {"call": execute(program), "timeout_ms": 60000},
            {"wait_for": 0, "timeout_ms": 60000, "progress": true, "most": 10},
        ],
    });
    let started = Instant::now();
    let out = client(&dir, "v1", &plan);
    assert!(started.elapsed() >= Duration::from_secs(180), "the run took {:?}", started.elapsed());
    let first = out.structured(0);
    assert_eq!(first["status"], "running", "{}", out.text(0));
    assert!(out.text(0).contains("{\"wait\": "), "{}", out.text(0));
    let run_id = first["run_id"].as_str().unwrap();
    let end = out.structured(1);
    assert_eq!(end["status"], "completed", "{}", out.text(1));
    assert_eq!(end["value"], json!({"slept": 180}));
    assert_eq!(end["run_id"], run_id);
    let waits = out.steps[1]["waits"].as_array().unwrap();
    // 180 s less the first 45, in waits of at most 45 s: three or four.
    assert!((3..=4).contains(&waits.len()), "{waits:?}");
    for (i, wait) in waits.iter().enumerate() {
        assert!(wait["ms"].as_u64().unwrap() < 50_000, "wait {i} took longer than --yield-after: {wait}");
        let last = i == waits.len() - 1;
        assert_eq!(wait["status"], if last { "completed" } else { "running" }, "{wait}");
        // Each full wait sees a call end (one every 30 s) or a heartbeat.
        if !last {
            assert!(!wait["progress"].as_array().unwrap().is_empty(), "no progress in wait {i}: {wait}");
        }
    }
    let receipt = served.receipt(run_id);
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["calls"].as_array().unwrap().len(), 6);
}

/// A run answered `running` is waited for on both SDKs (2025-11-25 and
/// 2026-07-28), and `{"cancel"}` ends another one: its sleeping bash is
/// reaped, its receipt says `cancelled`; an id this server never answered
/// `running` for is refused.
#[test]
fn a_served_run_is_waited_for_on_both_sdks_and_a_cancel_reaps_its_bash() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let seconds = format!("{}.{}", 300 + u32::from(sdk == "v2"), std::process::id());
        // Spelled apart: the client's command line holds the plan, and must
        // not match the sleep's.
        let sleeper = format!("await tools.bash({{command: 'exec sleep ' + '{seconds}'}}); return 'slept'");
        let plan = json!({
            "server": served.server(&["--posture", "full-access", "--yield-after", "0.5"]),
            "steps": [
                {"call": execute("await tools.bash({command: 'sleep 1'}); await tools.bash({command: 'sleep 1'}); return 7")},
                {"wait_for": 0},
                {"call": execute(&sleeper)},
                {"call": {"name": "execute_tools"}, "cancel_of": 2},
                {"call": {"name": "execute_tools", "arguments": {"wait": "run-never-answered"}}},
                {"call": {"name": "execute_tools", "arguments": {"wait": "r", "code": "return 1"}}},
                {"call": execute("await tools.bash({command: 'sleep 3'}); return 1")},
                {"wait_for": 6},
            ],
        });
        let watcher = watch(format!("sleep {seconds}"));
        let out = client(&dir, sdk, &plan);
        let ended = Instant::now();
        assert_eq!(out.structured(0)["status"], "running", "{sdk}: {}", out.text(0));
        assert_eq!(out.structured(1)["value"], 7, "{sdk}: {}", out.text(1));
        assert_eq!(out.structured(2)["status"], "running", "{sdk}: {}", out.text(2));
        let cancelled = out.structured(3);
        assert_eq!(cancelled["status"], "cancelled", "{sdk}: {}", out.text(3));
        assert_eq!(cancelled["run_id"], out.structured(2)["run_id"], "{sdk}");
        assert_eq!(cancelled["stopped"]["running"], json!([1]), "{sdk}: {cancelled}");
        let (seen, gone) = watcher.join().unwrap();
        assert!(seen, "{sdk}: the sleep never ran");
        // Gone while the server still ran (its last run, waited for, sleeps
        // 3 s), not when the client closed it.
        let gone = gone.unwrap_or_else(|| panic!("{sdk}: the cancelled bash's sleep is left"));
        assert!(gone + Duration::from_secs(2) < ended, "{sdk}: the sleep went only with the server");
        let receipt = served.receipt(cancelled["run_id"].as_str().unwrap());
        assert_eq!(receipt["status"], "cancelled", "{sdk}");
        assert_eq!(out.result(4)["isError"], true, "{sdk}");
        assert!(
            out.text(4).contains("not a run this server answered `running` for"),
            "{sdk}: {}",
            out.text(4)
        );
        assert!(out.text(5).contains("remove `code`"), "{sdk}: {}", out.text(5));
    }
}

/// `codemode runs cancel` from another process cancels a `codemode run`
/// in progress within about a second (its bash's sleep reaped, its receipt
/// `cancelled`, exit 130 as for Ctrl-C), while `codemode runs wait`,
/// started before, returns when the run ends with the same exit code.
/// `journal` is `--journal`'s value, if any.
fn cancel_from_another_process(journal: Option<&str>) {
    let ws = crate::common::workspace();
    let seconds = format!("302.{}{}", std::process::id(), u32::from(journal.is_some()));
    let program = format!("await tools.bash({{command: 'touch started; exec sleep {seconds}'}}); return 1");
    std::fs::write(ws.path().join("long.js"), program).unwrap();
    let mut place = vec!["--workspace", ws.path().to_str().unwrap()];
    if let Some(url) = journal {
        place.extend(["--journal", url]);
    }
    let run_args: Vec<&str> =
        [&["run", "--posture", "full-access", "--deadline", "600"], &place[..], &["long.js"]].concat();
    let run = crate::cli::spawn(&run_args, ws.path(), &[]);
    started(ws.path(), "started");
    let marker = format!("sleep {seconds}");
    assert!(!processes_with(&marker).is_empty(), "the sleep runs");
    // The run's journal is made as it starts (PostgreSQL: while its first
    // call begins), so it is looked for a few times.
    let mut running = None;
    let listed = within(Duration::from_secs(10), || {
        let list = crate::cli::codemode(&[&["runs", "list", "--json"], &place[..]].concat(), "", ws.path());
        let listed: Value = serde_json::from_slice(&list.stdout).unwrap_or_else(|e| panic!("{e}: {list:?}"));
        running = listed.as_array().unwrap().iter().find(|r| r["state"] == "running").cloned();
        running.is_some()
    });
    assert!(listed, "the run is not listed as running");
    let running = running.unwrap();
    let run_id = running["run_id"].as_str().unwrap().to_owned();
    let waiter = crate::cli::spawn(
        &[&["runs", "wait", run_id.as_str(), "--json"], &place[..]].concat(),
        ws.path(),
        &[],
    );
    // `runs wait` with a short bound answers 7 while the run goes on.
    let short = crate::cli::codemode(
        &[&["runs", "wait", run_id.as_str(), "--timeout", "0.3"], &place[..]].concat(),
        "",
        ws.path(),
    );
    assert_eq!(short.status.code(), Some(7), "{short:?}");

    let asked = Instant::now();
    let cancel =
        crate::cli::codemode(&[&["runs", "cancel", run_id.as_str()], &place[..]].concat(), "", ws.path());
    let took = asked.elapsed();
    assert_eq!(cancel.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancel.stderr));
    assert!(took < Duration::from_secs(3), "the cancel took {took:?}");
    assert!(String::from_utf8_lossy(&cancel.stderr).contains("cancelled"), "{cancel:?}");
    let ran = run.wait_with_output().unwrap();
    assert_eq!(ran.status.code(), Some(130), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(
        within(Duration::from_secs(5), || processes_with(&marker).is_empty()),
        "the cancelled run's sleep is left"
    );
    let waited = waiter.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(130), "{}", String::from_utf8_lossy(&waited.stderr));
    let out: Value = serde_json::from_slice(&waited.stdout).unwrap();
    let status = out.get("status").or_else(|| out.get("state")).cloned();
    assert_eq!(status, Some(json!("cancelled")), "{out}");
    // A second cancel finds the run ended: 5, nothing done.
    let again =
        crate::cli::codemode(&[&["runs", "cancel", run_id.as_str()], &place[..]].concat(), "", ws.path());
    assert_eq!(again.status.code(), Some(5), "{again:?}");
    let unknown =
        crate::cli::codemode(&[&["runs", "wait", "run-unknown"], &place[..]].concat(), "", ws.path());
    assert_eq!(unknown.status.code(), Some(5), "{unknown:?}");
}

#[test]
fn runs_cancel_from_another_process_stops_a_run_on_the_local_store() {
    cancel_from_another_process(None);
}

#[test]
fn runs_cancel_from_another_process_stops_a_run_on_postgresql() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some(db) = rt.block_on(crate::journal_postgres::database("long_runs_cancel")) else { return };
    cancel_from_another_process(Some(&db.url));
    rt.block_on(db.drop_schema());
}

/// `codemode runs cancel` of a paused run ends it `cancelled` at once: its
/// pending call never runs, and a later resume is refused (exit 5).
#[test]
fn runs_cancel_ends_a_paused_run_and_a_resume_is_refused() {
    let ws = crate::common::workspace();
    let dir = ws.path();
    std::fs::write(dir.join("prog.js"), "await tools.write({path: 'late.txt', content: 'x'}); return 1")
        .unwrap();
    let paused = crate::cli::codemode(&["run", "prog.js", "--approve", "pause", "--json"], "", dir);
    assert_eq!(paused.status.code(), Some(4), "{}", String::from_utf8_lossy(&paused.stderr));
    let receipt: Value = serde_json::from_slice(&paused.stdout).unwrap();
    let run_id = receipt["run_id"].as_str().unwrap();
    let cancel = crate::cli::codemode(&["runs", "cancel", run_id], "", dir);
    assert_eq!(cancel.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancel.stderr));
    let shown = crate::cli::codemode(&["runs", "show", run_id, "--json"], "", dir);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["state"], "cancelled", "{shown}");
    let resume = crate::cli::codemode(&["resume", run_id, "--allow", "1"], "", dir);
    assert_eq!(resume.status.code(), Some(5), "{}", String::from_utf8_lossy(&resume.stderr));
    assert!(!dir.join("late.txt").exists(), "the pending write ran");
}
