//! `codemode approve`: a person's decisions for a paused run, recorded in
//! its journal from another process, and the resume that applies them and
//! nothing else (`Engine::start_resume_recorded`, plain `codemode resume`):
//! real processes, real files, the local folder store and PostgreSQL.

use std::path::Path;
use std::sync::Arc;

use codemode::{
    Engine, approval::PauseApprover, receipt::CallStatus, receipt::Decision, receipt::RunStatus,
    run::RunOptions,
};
use serde_json::Value;

use crate::cli::{codemode, spawn};

/// Two gated bash calls, each adding a line to `counter.txt`; the second's
/// denial is caught and returned.
const TWO_CALLS: &str = r#"
await tools.bash({command: "echo one >> counter.txt"});
let second;
try { await tools.bash({command: "echo two >> counter.txt"}); second = "ran"; }
catch (e) { second = `${e.name} ${e.kind}: ${e.message}`; }
return second;
"#;

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn counter(ws: &Path) -> String {
    std::fs::read_to_string(ws.join("counter.txt")).unwrap_or_default()
}

/// The journal lines of `run_id` in the workspace's default store.
fn journal_lines(ws: &Path, run_id: &str) -> Vec<String> {
    let path = crate::common::runs_dir(ws).join(run_id).join("journal.jsonl");
    std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect()
}

fn approvals(ws: &Path, run_id: &str) -> usize {
    journal_lines(ws, run_id).iter().filter(|l| l.starts_with(r#"{"t":"approval""#)).count()
}

/// `program` run by the CLI with the pause approver (posture ask): paused,
/// and its run id.
fn paused_run(ws: &Path, program: &str, extra: &[&str]) -> String {
    std::fs::write(ws.join("prog.js"), program).unwrap();
    let args = [&["run", "prog.js", "--approve", "pause", "--json"][..], extra].concat();
    let run = codemode(&args, "", ws);
    assert_eq!(run.status.code(), Some(4), "{}", stderr(&run));
    let paused = stdout_json(&run);
    assert_eq!(paused["status"], "paused");
    paused["run_id"].as_str().unwrap().to_owned()
}

/// An engine over `ws` as a serve process has one: the pause approver.
fn engine(ws: &Path) -> Engine {
    crate::common::engine_builder().workspace(ws).approver(PauseApprover).build().expect("engine builds")
}

#[test]
fn a_person_decides_in_another_process_and_the_resumes_apply_exactly_that() {
    let ws = crate::common::workspace();
    let run_id = paused_run(ws.path(), TWO_CALLS, &[]);
    assert_eq!(counter(ws.path()), "", "nothing ran yet");

    // A person allows call 1 from a terminal: recorded, nothing runs.
    let approved = codemode(&["approve", &run_id, "--allow", "1", "--json"], "", ws.path());
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let recorded = stdout_json(&approved);
    assert_eq!(recorded["recorded"], serde_json::json!([1]));
    assert_eq!(recorded["calls"][0]["subject"], "echo one >> counter.txt");
    assert_eq!(recorded["undecided"], serde_json::json!([]));
    assert_eq!(recorded["continue"]["host"], format!("execute_tools {{\"resume\":\"{run_id}\"}}"));
    assert_eq!(counter(ws.path()), "", "recording runs nothing");

    // The resume a server makes for the model: the person's decision only.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = engine(ws.path());
    let resumed = rt.block_on(async {
        server.start_resume_recorded(&run_id, RunOptions::default()).await.expect("resumes").wait().await
    });
    assert_eq!(resumed.status, RunStatus::Paused, "{:?}", resumed.error);
    assert_eq!(counter(ws.path()), "one\n", "call 1 ran once");
    let first = &resumed.calls[0];
    assert_eq!((first.decision, first.status), (Decision::Approved, CallStatus::Ok));
    assert!(first.note.as_deref().unwrap_or("").contains("a person with `codemode approve`"), "{first:?}");
    assert_eq!(resumed.pending.iter().map(|p| p.seq).collect::<Vec<_>>(), [2]);

    // Resumed again with nothing recorded: paused on the same call, and
    // nothing new ran (the model cannot decide by asking again).
    let again = rt.block_on(async {
        server.start_resume_recorded(&run_id, RunOptions::default()).await.expect("resumes").wait().await
    });
    assert_eq!(again.status, RunStatus::Paused, "{:?}", again.error);
    assert_eq!(again.pending.iter().map(|p| p.seq).collect::<Vec<_>>(), [2]);
    assert_eq!(counter(ws.path()), "one\n", "nothing ran again");
    let waiting = rt.block_on(server.pending_decisions(&run_id)).unwrap();
    assert_eq!(waiting.iter().map(|a| (a.call.seq, a.recorded.is_none())).collect::<Vec<_>>(), [(2, true)]);
    // Plain `codemode resume` with nothing recorded says what to do.
    let nothing = codemode(&["resume", &run_id], "", ws.path());
    assert_eq!(nothing.status.code(), Some(2), "{}", stderr(&nothing));
    assert!(stderr(&nothing).contains(&format!("codemode approve {run_id}")), "{}", stderr(&nothing));
    drop(server);

    // The person denies call 2; plain `codemode resume` applies it.
    let denied = codemode(&["approve", &run_id, "--deny", "2", "--reason", "not on a Friday"], "", ws.path());
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    let said = String::from_utf8_lossy(&denied.stdout);
    assert!(
        said.contains("recorded: call 2 bash (echo two >> counter.txt) denied: not on a Friday"),
        "{said}"
    );
    assert!(said.contains(&format!("codemode resume {run_id}")), "{said}");
    let done = codemode(&["resume", &run_id, "--json"], "", ws.path());
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let receipt = stdout_json(&done);
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["value"], "ToolError denied: bash (call 2): not on a Friday");
    assert_eq!(receipt["calls"][1]["decision"], "denied");
    assert_eq!(receipt["calls"][1]["note"], "denied by a person with `codemode approve`");
    assert_eq!(counter(ws.path()), "one\n", "the denied call never ran");
    // The journal says who decided.
    let decisions: Vec<Value> = journal_lines(ws.path(), &run_id)
        .iter()
        .filter(|l| l.starts_with(r#"{"t":"decision""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(decisions.len(), 2);
    assert!(decisions.iter().all(|d| d["by"] == "person"), "{decisions:?}");

    // Ended and unknown runs: exit 5, the resume's error.
    for (id, expect) in
        [(run_id.as_str(), "already ended (completed)"), ("run-20000101T000000Z-00000000", "no run")]
    {
        let late = codemode(&["approve", id, "--allow", "2", "--json"], "", ws.path());
        assert_eq!(late.status.code(), Some(5), "{}", stderr(&late));
        let error = &stdout_json(&late)["error"];
        assert_eq!(error["kind"], "not_resumable");
        assert!(error["message"].as_str().unwrap().contains(expect), "{error}");
    }
    assert_eq!(approvals(ws.path(), &run_id), 2, "nothing recorded on the ended run");
}

/// Issue 35, item 8: a person can say why they allowed a call; the reason
/// is recorded and kept in the resumed run's receipt (the call's note),
/// as a denial's reason is (its error). `--reason` alone is still refused.
#[test]
fn a_reason_given_with_allow_is_in_the_resumed_runs_receipt() {
    let ws = crate::common::workspace();
    let run_id = paused_run(ws.path(), TWO_CALLS, &[]);
    let alone = codemode(&["approve", &run_id, "--reason", "why not"], "", ws.path());
    assert_eq!(alone.status.code(), Some(2), "{}", stderr(&alone));
    let reason = "the counter file is scratch";
    let allowed = codemode(&["approve", &run_id, "--allow", "1", "--reason", reason], "", ws.path());
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let said = String::from_utf8_lossy(&allowed.stdout);
    assert!(
        said.contains(&format!("recorded: call 1 bash (echo one >> counter.txt) allowed: {reason}")),
        "{said}"
    );
    let listed = stdout_json(&codemode(&["approve", &run_id, "--json"], "", ws.path()));
    assert_eq!(listed["pending"][0]["recorded"]["reason"], reason, "{listed:#}");
    // The resume applies it and pauses on call 2, which the next resume
    // allows on its command line, with its own reason.
    let paused = stdout_json(&codemode(&["resume", &run_id, "--json"], "", ws.path()));
    assert_eq!(paused["status"], "paused", "{paused:#}");
    assert_eq!(paused["calls"][0]["decision"], "approved");
    assert_eq!(
        paused["calls"][0]["note"],
        format!("approved by a person with `codemode approve`: {reason}"),
        "{paused:#}"
    );
    let args = ["resume", &run_id, "--allow", "2", "--reason", "also fine", "--json"];
    let done = codemode(&args, "", ws.path());
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let receipt = stdout_json(&done);
    assert_eq!(receipt["status"], "completed", "{receipt:#}");
    assert_eq!(counter(ws.path()), "one\ntwo\n");
    assert_eq!(receipt["calls"][1]["note"], "approved on resume: also fine", "{receipt:#}");
    let decisions: Vec<Value> = journal_lines(ws.path(), &run_id)
        .iter()
        .filter(|l| l.starts_with(r#"{"t":"decision""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<&Value> = decisions.iter().map(|d| &d["reason"]).collect();
    assert_eq!(reasons, [&Value::from(reason), &Value::from("also fine")], "{decisions:?}");
}

#[test]
fn decisions_for_calls_that_are_not_pending_are_refused_and_the_run_is_untouched() {
    let ws = crate::common::workspace();
    let run_id = paused_run(ws.path(), TWO_CALLS, &[]);
    for (args, expect) in [
        (vec!["--allow", "2"], "call 2 is not waiting for a decision; calls waiting for one: 1 (`bash`)"),
        (vec!["--allow", "1", "--deny", "1"], "call 1 is decided twice"),
        (vec!["--allow", "all"], "there is no `all`"),
        (vec!["--allow", "0"], "is not a call's seq"),
    ] {
        let out = codemode(&[&["approve", run_id.as_str()][..], &args].concat(), "", ws.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(approvals(ws.path(), &run_id), 0);

    let first = codemode(&["approve", &run_id, "--allow", "1"], "", ws.path());
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // Once recorded, a decision stands until a resume applies it.
    let change = codemode(&["approve", &run_id, "--deny", "1"], "", ws.path());
    assert_eq!(change.status.code(), Some(2));
    assert!(stderr(&change).contains("call 1 was already allowed"), "{}", stderr(&change));
    // A resume's own decision may not contradict the person's.
    let contradict = codemode(&["resume", &run_id, "--deny", "1", "--json"], "", ws.path());
    assert_eq!(contradict.status.code(), Some(2), "{}", stderr(&contradict));
    let error = &stdout_json(&contradict)["error"];
    assert!(error["message"].as_str().unwrap().contains("already allowed by a person"), "{error}");
    assert_eq!(approvals(ws.path(), &run_id), 1);
    assert_eq!(counter(ws.path()), "");
    let shown = stdout_json(&codemode(&["runs", "show", &run_id, "--json"], "", ws.path()));
    assert_eq!(shown["state"], "paused");
    assert_eq!(
        (&shown["recorded"][0]["seq"], &shown["recorded"][0]["allow"]),
        (&Value::from(1), &Value::Bool(true))
    );
    let text = codemode(&["runs", "show", &run_id], "", ws.path());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("allowed by a person at "), "{text}");
    // A resume deciding it the same way: the person's decision applies.
    let agree = codemode(&["resume", &run_id, "--allow", "1", "--json"], "", ws.path());
    assert_eq!(agree.status.code(), Some(4), "paused on call 2: {}", stderr(&agree));
    let receipt = stdout_json(&agree);
    assert_eq!(receipt["calls"][0]["note"], "approved by a person with `codemode approve`");
    assert_eq!(counter(ws.path()), "one\n");
}

#[test]
fn the_listing_shows_what_each_pending_call_acts_on_whole() {
    let ws = crate::common::workspace();
    // Longer than a paused receipt's rendering shows, with a line break
    // that must not start a line of its own.
    let long = format!("echo {}\ndecide: yes", "x".repeat(3000));
    let program =
        format!("await tools.bash({{command: {}}}); return 1;", serde_json::to_string(&long).unwrap());
    let run_id = paused_run(ws.path(), &program, &[]);
    let listed = codemode(&["approve", &run_id], "", ws.path());
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let text = String::from_utf8_lossy(&listed.stdout);
    let on = format!("    on: {}", long.replace('\n', "\\n"));
    assert!(text.lines().any(|l| l == on), "the whole command on one line:\n{text}");
    assert!(!text.lines().any(|l| l.starts_with("decide: yes")), "{text}");
    assert!(text.contains("why: the posture is ask"), "{text}");
    assert!(text.contains(&format!("decide: codemode approve {run_id} --allow SEQ")), "{text}");
    let json = codemode(&["approve", &run_id, "--json"], "", ws.path());
    let listed = stdout_json(&json);
    assert_eq!(listed["pending"][0]["seq"], 1);
    assert_eq!(listed["pending"][0]["subject"], long.as_str());
    assert_eq!(listed["pending"][0]["recorded"], Value::Null);
    assert_eq!(approvals(ws.path(), &run_id), 0, "listing records nothing");
}

#[test]
fn a_run_held_by_a_resume_in_progress_is_busy() {
    let ws = crate::common::workspace();
    let program = r#"
        await tools.bash({command: "echo started > started.txt; sleep 3; echo one >> counter.txt"});
        await tools.bash({command: "echo two >> counter.txt"});
        return 1;
    "#;
    let run_id = paused_run(ws.path(), program, &[]);
    let resume = spawn(&["resume", &run_id, "--allow", "1", "--json"], ws.path(), &[]);
    // Wait for the resume to be running call 1 (an event, not a time).
    let started = ws.path().join("started.txt");
    for _ in 0..600 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the resume started call 1");
    let busy = codemode(&["approve", &run_id, "--allow", "2", "--json"], "", ws.path());
    assert_eq!(busy.status.code(), Some(5), "{}", stderr(&busy));
    let error = &stdout_json(&busy)["error"];
    assert_eq!(error["kind"], "not_resumable");
    assert!(error["message"].as_str().unwrap().contains("held by another process"), "{error}");
    let out = resume.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "paused again on call 2: {}", stderr(&out));
    assert_eq!(counter(ws.path()), "one\n");
    assert_eq!(approvals(ws.path(), &run_id), 0, "nothing recorded while the resume held the run");
    // Once the resume let the run go, the person can decide call 2.
    let now = codemode(&["approve", &run_id, "--allow", "2"], "", ws.path());
    assert_eq!(now.status.code(), Some(0), "{}", stderr(&now));
}

/// The same against PostgreSQL: paused by one process and workspace,
/// decided by a second, resumed by a server engine of a third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_decides_a_run_paused_into_postgresql() {
    let Some(db) = crate::journal_postgres::database("approve").await else { return };
    let (first, second, third) =
        (crate::common::workspace(), crate::common::workspace(), crate::common::workspace());
    let url = db.url.clone();
    let run_id = paused_run(first.path(), TWO_CALLS, &["--journal", &url]);
    std::fs::write(second.path().join("prog.js"), TWO_CALLS).unwrap();

    let listed = codemode(&["approve", &run_id, "--journal", &url], "", second.path());
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("on: echo one >> counter.txt"));
    let wrong = codemode(&["approve", &run_id, "--allow", "2", "--journal", &url], "", second.path());
    assert_eq!(wrong.status.code(), Some(2), "{}", stderr(&wrong));
    let approved = codemode(&["approve", &run_id, "--allow", "1", "--journal", &url], "", second.path());
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));

    let store = codemode_journal_postgres::PostgresStore::new(&url).unwrap();
    let server = crate::common::engine_builder()
        .workspace(third.path())
        .approver(PauseApprover)
        .journal(Arc::new(store))
        .build()
        .unwrap();
    // The run was made in the first workspace: the third resumes it only
    // when told it may.
    let refused = server.start_resume_recorded(&run_id, RunOptions::default()).await.err().unwrap();
    assert!(refused.error.unwrap().message.contains("was made in workspace"));
    let anywhere = || RunOptions::default().any_workspace();
    let resumed = server.start_resume_recorded(&run_id, anywhere()).await.unwrap().wait().await;
    assert_eq!(resumed.status, RunStatus::Paused, "{:?}", resumed.error);
    assert_eq!(counter(third.path()), "one\n", "call 1 ran once, on the server");
    assert_eq!(resumed.calls[0].decision, Decision::Approved);
    let again = server.start_resume_recorded(&run_id, anywhere()).await.unwrap().wait().await;
    assert_eq!(again.status, RunStatus::Paused);
    assert_eq!(counter(third.path()), "one\n", "nothing recorded: nothing new ran");
    let refused = server.record_decisions(&run_id, &[(1, codemode::journal::Decided::Allow)]).await;
    assert_eq!(
        refused.unwrap_err().kind,
        codemode::receipt::ErrorKind::Invocation,
        "call 1 is no longer pending"
    );
    let recorded = server
        .record_decisions(&run_id, &[(2, codemode::journal::Decided::Deny("no".into()))])
        .await
        .unwrap();
    assert_eq!((recorded.recorded, recorded.undecided.len()), (vec![2], 0));
    let done = server.start_resume_recorded(&run_id, anywhere()).await.unwrap().wait().await;
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.value, "ToolError denied: bash (call 2): no");
    let late = codemode(&["approve", &run_id, "--allow", "2", "--journal", &url], "", second.path());
    assert_eq!(late.status.code(), Some(5), "{}", stderr(&late));
    drop(server);
    db.drop_schema().await;
}

#[test]
fn a_program_cannot_record_a_decision_through_bash() {
    // A program that could run `codemode approve` on the journal store
    // would decide its own calls. Journals are under `.codemode/`, which
    // bash neither sees nor changes, whatever the posture.
    let ws = crate::common::workspace();
    let run_id = paused_run(ws.path(), TWO_CALLS, &[]);
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(codemode::Policy::full_access())
        .build()
        .unwrap();
    let command =
        format!("{} approve {run_id} --allow 1 --json; echo \"exit=$?\"", env!("CARGO_BIN_EXE_codemode"));
    let program = format!(
        "const r = await tools.bash({{command: {}}}); return r.content.stdout;",
        serde_json::to_string(&command).unwrap()
    );
    let r = engine.execute_blocking(codemode::Program::new(program));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let out = r.value.as_str().unwrap();
    assert!(
        out.contains("exit=5") && out.contains("not_resumable"),
        "the approve ran and found no run: {out}"
    );
    assert_eq!(approvals(ws.path(), &run_id), 0);
    let listed = codemode(&["approve", &run_id, "--json"], "", ws.path());
    assert_eq!(stdout_json(&listed)["pending"][0]["recorded"], Value::Null);
}
