//! Durable runs: the journal, pausing on an approval, resuming in another
//! engine or process (docs/JOURNAL.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use codemode::journal::Decided;
use codemode::{
    Engine, Program, Receipt, Tool, ToolSpec, approval::PauseApprover, receipt::CallStatus,
    receipt::Decision, receipt::ErrorKind, receipt::RunStatus, tool::ToolContext, tool::ToolFuture,
    tool::ToolOutput,
};
use serde_json::{Value, json};

use crate::cli::{codemode, spawn};

/// `count {label}`: a read-only tool that counts its invocations.
struct Count(Arc<AtomicUsize>);
impl Tool for Count {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("count", "Counts its calls.", json!({"type": "object"})).read_only(true)
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move { Ok(ToolOutput::new(json!({"n": n, "args": args}))) })
    }
}

/// An engine over `ws` with the pause approver and a `count` tool whose
/// calls add to `counter`; every engine over one workspace shares its
/// journal folder, as two processes would.
fn engine(ws: &std::path::Path, counter: &Arc<AtomicUsize>) -> Engine {
    crate::common::engine_builder()
        .workspace(ws)
        .approver(PauseApprover)
        .tool(Count(counter.clone()))
        .build()
        .expect("engine builds")
}

fn seqs_of(receipt: &Receipt) -> Vec<u64> {
    receipt.pending.iter().map(|p| p.seq).collect()
}

const READ_THEN_WRITE: &str = r#"
const first = await tools.count({step: 1});
const r = await tools.read({path: "a.txt"});
const stamp = Date.now(), luck = Math.random();
console.log("before the write", stamp, luck);
const w = await tools.write({path: "out.txt", content: `${r.content.length} ${luck}`});
return {first: first.content.n, stamp, luck, wrote: w.content.bytes};
"#;

#[test]
fn a_gated_write_pauses_and_a_second_engine_resumes_it_without_calling_anything_twice() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let paused = engine(ws.path(), &counter).execute_blocking(Program::new(READ_THEN_WRITE));
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    assert_eq!(seqs_of(&paused), [3]);
    let pending = &paused.pending[0];
    assert_eq!(pending.tool, "write");
    assert_eq!(pending.arguments["path"], "out.txt");
    assert!(pending.reason.contains("posture"), "{}", pending.reason);
    assert_eq!(paused.calls[2].decision, Decision::Pending);
    // It did nothing yet (RECEIPTS.md); the calls before it ran.
    let never: Vec<bool> = paused.calls.iter().map(|c| c.never_started).collect();
    assert_eq!(never, [false, false, true]);
    assert!(!ws.path().join("out.txt").exists(), "the write did not run");
    assert_eq!(counter.load(Ordering::SeqCst), 1);
    let logged = paused.logs[0].text.clone();

    // Another engine (as another process would be) over the same journals.
    let other = engine(ws.path(), &counter);
    let done = other.resume_blocking(&paused.run_id, &[(3, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.run_id, paused.run_id);
    assert_eq!(counter.load(Ordering::SeqCst), 1, "count ran once: the resume answered it from the journal");
    let content = std::fs::read_to_string(ws.path().join("out.txt")).unwrap();
    assert_eq!(content.split(' ').nth(1).unwrap(), done.value["luck"].to_string(), "Math.random replayed");
    assert_eq!(done.logs.len(), 1, "the log line once: {:?}", done.logs);
    assert_eq!(done.logs[0].text, logged, "Date.now and Math.random replayed identically");
    // One receipt for the whole run: each call once, one numbering.
    let calls: Vec<(u64, &str, Decision, CallStatus)> =
        done.calls.iter().map(|c| (c.seq, c.tool.as_str(), c.decision, c.status)).collect();
    assert_eq!(
        calls,
        [
            (1, "count", Decision::Auto, CallStatus::Ok),
            (2, "read", Decision::Auto, CallStatus::Ok),
            (3, "write", Decision::Approved, CallStatus::Ok)
        ]
    );
    assert!(done.pending.is_empty());
    assert!(done.approval_wait_ms >= paused.approval_wait_ms);
    assert!(done.elapsed_ms >= paused.elapsed_ms + (done.approval_wait_ms - paused.approval_wait_ms) - 1.0);

    // The run is over: resuming again is a distinct, final error.
    let again = other.resume_blocking(&paused.run_id, &[(3, Decided::Allow)]);
    let e = again.error.expect("refused");
    assert_eq!(e.kind, ErrorKind::NotResumable);
    assert!(e.message.contains("already ended (completed)"), "{}", e.message);
}

#[test]
fn a_denied_call_rejects_and_the_program_goes_on() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let source = r#"
        let outcome;
        try { await tools.write({path: "x.txt", content: "x"}); outcome = "written"; }
        catch (e) { outcome = `${e.name} ${e.kind}: ${e.message}`; }
        const after = await tools.count({});
        return {outcome, after: after.content.n};
    "#;
    let paused = engine(ws.path(), &counter).execute_blocking(Program::new(source));
    assert_eq!((paused.status, seqs_of(&paused)), (RunStatus::Paused, vec![1]));
    let done = engine(ws.path(), &counter)
        .resume_blocking(&paused.run_id, &[(1, Decided::Deny("no writes today".into()))]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    let outcome = done.value["outcome"].as_str().unwrap();
    assert!(outcome.starts_with("ToolError denied: ") && outcome.contains("no writes today"), "{outcome}");
    assert_eq!(done.value["after"], 1);
    assert_eq!((done.calls[0].decision, done.calls[0].status), (Decision::Denied, CallStatus::Refused));
    assert!(!ws.path().join("x.txt").exists());
}

#[test]
fn a_run_pauses_three_times_and_ends() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let source = r#"
        const seen = [];
        for (const name of ["one", "two", "three"]) {
          const before = await tools.count({name});
          seen.push(before.content.n);
          await tools.write({path: `${name}.txt`, content: name});
        }
        return seen;
    "#;
    let mut receipt = engine(ws.path(), &counter).execute_blocking(Program::new(source));
    let run_id = receipt.run_id.clone();
    let mut rounds = 0;
    while receipt.status == RunStatus::Paused {
        rounds += 1;
        let seq = receipt.pending[0].seq;
        receipt = engine(ws.path(), &counter).resume_blocking(&run_id, &[(seq, Decided::Allow)]);
    }
    assert_eq!(rounds, 3);
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    assert_eq!(receipt.value, json!([1, 2, 3]), "each count ran once, in order");
    assert_eq!(counter.load(Ordering::SeqCst), 3);
    assert_eq!(receipt.calls.len(), 6);
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::Ok), "{:?}", receipt.calls);
    for name in ["one", "two", "three"] {
        assert_eq!(std::fs::read_to_string(ws.path().join(format!("{name}.txt"))).unwrap(), name);
    }
}

#[test]
fn parallel_calls_pause_together_and_running_calls_finish_first() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let source = r#"
        const [a, b, c] = await Promise.all([
          tools.write({path: "a1.txt", content: "1"}),
          tools.count({}),
          tools.write({path: "a2.txt", content: "2"}),
        ]);
        return [a.content.bytes, b.content.n, c.content.bytes];
    "#;
    let paused = engine(ws.path(), &counter).execute_blocking(Program::new(source));
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(seqs_of(&paused), [1, 3]);
    assert_eq!(paused.calls[1].status, CallStatus::Ok, "the running call finished and was journaled");
    let done = engine(ws.path(), &counter)
        .resume_blocking(&paused.run_id, &[(1, Decided::Allow), (3, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.value, json!([1, 1, 1]));
    assert_eq!(counter.load(Ordering::SeqCst), 1);
}

#[test]
fn a_replay_that_takes_another_path_is_a_divergence_and_runs_nothing_live() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    // A program that is not deterministic would ask for other arguments
    // on replay; the same program against a journal that holds other
    // arguments at call 1 is that case.
    let paused = engine(ws.path(), &counter).execute_blocking(Program::new(
        "await tools.count({a: 1}); await tools.write({path: 'd.txt', content: 'd'}); return 1;",
    ));
    assert_eq!(paused.status, RunStatus::Paused);
    let journal = crate::common::runs_dir(ws.path()).join(&paused.run_id).join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains(r#""args":{"a":1}"#));
    std::fs::write(&journal, text.replace(r#""args":{"a":1}"#, r#""args":{"a":2}"#)).unwrap();
    let diverged = engine(ws.path(), &counter).resume_blocking(&paused.run_id, &[(2, Decided::Allow)]);
    // Nothing new ran, so the run is still paused; the warning names both
    // calls.
    assert_eq!(diverged.status, RunStatus::Paused, "{:?}", diverged.error);
    let warning = diverged.warnings.iter().find(|w| w.contains("another path")).expect("said");
    assert!(
        warning.contains("call 1") && warning.contains(r#"{"a":1}"#) && warning.contains(r#"{"a":2}"#),
        "{warning}"
    );
    assert!(warning.contains("still paused"), "{warning}");
    assert!(!ws.path().join("d.txt").exists(), "the allowed write never ran");
    assert_eq!(counter.load(Ordering::SeqCst), 1);
}

#[test]
fn a_changed_policy_or_catalog_is_refused_up_front_and_the_run_stays_paused() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let paused = engine(ws.path(), &counter)
        .execute_blocking(Program::new("await tools.write({path: 'p.txt', content: 'p'}); return 1;"));
    assert_eq!(paused.status, RunStatus::Paused);
    // Without the `count` tool the catalog differs.
    let fewer = crate::common::engine_builder().workspace(ws.path()).approver(PauseApprover).build().unwrap();
    let refused = fewer.resume_blocking(&paused.run_id, &[(1, Decided::Allow)]);
    let e = refused.error.expect("refused");
    assert_eq!(e.kind, ErrorKind::Divergence);
    assert!(e.message.contains("the catalog changed"), "{}", e.message);
    // A stricter policy.
    let mut policy = codemode::Policy::default();
    policy.rules.deny.push(codemode::policy::Rule::parse("bash").unwrap());
    let stricter = crate::common::engine_builder()
        .workspace(ws.path())
        .approver(PauseApprover)
        .policy(policy)
        .tool(Count(counter.clone()))
        .build()
        .unwrap();
    let e = stricter.resume_blocking(&paused.run_id, &[(1, Decided::Allow)]).error.expect("refused");
    assert!(e.message.contains(r#"deny: [] -> ["bash"]"#), "{}", e.message);
    // A decision for a call that is not pending.
    let e =
        engine(ws.path(), &counter).resume_blocking(&paused.run_id, &[(7, Decided::Allow)]).error.unwrap();
    assert_eq!(e.kind, ErrorKind::Invocation);
    assert!(
        e.message.contains("call 7 is not waiting") && e.message.contains("1 (`write`)"),
        "{}",
        e.message
    );
    // Still paused: the right engine resumes it.
    let done = engine(ws.path(), &counter).resume_blocking(&paused.run_id, &[(1, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
}

#[test]
fn without_a_journal_a_pause_is_a_refusal() {
    let ws = crate::common::workspace();
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .approver(PauseApprover)
        .no_journal()
        .build()
        .unwrap();
    let r = engine.execute_blocking(Program::new(
        "try { await tools.write({path: 'n.txt', content: 'n'}); } catch (e) { return e.kind + ': ' + e.message; }",
    ));
    assert_eq!(r.status, RunStatus::Completed);
    assert!(r.value.as_str().unwrap().contains("only a journaled program run can pause"), "{}", r.value);
    assert!(!crate::common::runs_dir(ws.path()).join(&r.run_id).join("journal.jsonl").exists());
}

// ---------------------------------------------------------------------------
// The CLI: pause in one process, resume in another.

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A workspace whose policy (named with --config, so it applies whole)
/// allows `bash(sh count.sh)`: that step appends to a counter file, so
/// each real run of it shows.
fn cli_workspace() -> tempfile::TempDir {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("policy.toml"), "[rules]\nallow = [\"bash(sh count.sh)\"]\n").unwrap();
    std::fs::write(ws.path().join("count.sh"), "echo ran >> counter.txt; echo hello\n").unwrap();
    std::fs::write(
        ws.path().join("prog.js"),
        r#"
        const r = await tools.bash({command: "sh count.sh"});
        const x = Math.random();
        await tools.write({path: "out.txt", content: r.content.stdout + x});
        return x;
        "#,
    )
    .unwrap();
    ws
}

#[test]
fn the_cli_pauses_with_exit_4_and_resume_in_another_process_runs_the_write_once() {
    let ws = cli_workspace();
    let run = codemode(
        &["run", "prog.js", "--approve", "pause", "--config", "policy.toml", "--json"],
        "",
        ws.path(),
    );
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let paused = stdout_json(&run);
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["pending"][0]["seq"], 2);
    let run_id = paused["run_id"].as_str().unwrap();
    // The compact rendering says how to go on.
    let shown = codemode(&["run", "prog.js", "--approve", "pause", "--config", "policy.toml"], "", ws.path());
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(
        stderr.contains("pending: call 2 write (out.txt)") && stderr.contains("decide: codemode resume run-"),
        "{stderr}"
    );

    let resumed =
        codemode(&["resume", run_id, "--allow", "2", "--config", "policy.toml", "--json"], "", ws.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let done = stdout_json(&resumed);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["calls"].as_array().unwrap().len(), 2);
    // bash ran twice in all: once for the first run, once for the second
    // `run` above; the resume answered it from the journal.
    assert_eq!(std::fs::read_to_string(ws.path().join("counter.txt")).unwrap(), "ran\nran\n");
    let out = std::fs::read_to_string(ws.path().join("out.txt")).unwrap();
    assert_eq!(
        out,
        format!("hello\n{}", done["value"]),
        "the write ran once, with the replayed random value"
    );

    // Finished and unknown ids: exit 5, kind not_resumable, every time.
    for id in [run_id, "run-20000101T000000Z-00000000"] {
        for _ in 0..2 {
            let again =
                codemode(&["resume", id, "--allow", "2", "--config", "policy.toml", "--json"], "", ws.path());
            assert_eq!(again.status.code(), Some(5), "{}", String::from_utf8_lossy(&again.stderr));
            assert_eq!(stdout_json(&again)["error"]["kind"], "not_resumable");
        }
    }
}

#[test]
fn an_edited_program_is_refused_and_the_run_stays_paused() {
    let ws = cli_workspace();
    let run = codemode(
        &["run", "prog.js", "--approve", "pause", "--config", "policy.toml", "--json"],
        "",
        ws.path(),
    );
    let run_id = stdout_json(&run)["run_id"].as_str().unwrap().to_owned();
    let original = std::fs::read_to_string(ws.path().join("prog.js")).unwrap();
    std::fs::write(ws.path().join("prog.js"), format!("{original}// edited\n")).unwrap();
    let refused =
        codemode(&["resume", &run_id, "--allow", "2", "--config", "policy.toml", "--json"], "", ws.path());
    assert_eq!(refused.status.code(), Some(1));
    let error = &stdout_json(&refused)["error"];
    assert_eq!(error["kind"], "divergence");
    assert!(error["message"].as_str().unwrap().contains("prog.js changed since the run paused"), "{error}");
    assert!(!ws.path().join("out.txt").exists());
    std::fs::write(ws.path().join("prog.js"), original).unwrap();
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--config", "policy.toml"], "", ws.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
}

#[test]
fn two_resumes_at_once_one_wins_the_other_is_refused() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("slow.js"),
        "await tools.bash({command: 'sleep 2; echo slept >> slept.txt'}); return 1;",
    )
    .unwrap();
    let run = codemode(&["run", "slow.js", "--approve", "pause", "--json"], "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let run_id = stdout_json(&run)["run_id"].as_str().unwrap().to_owned();
    let a = spawn(&["resume", &run_id, "--allow", "1", "--json"], ws.path(), &[]);
    let b = spawn(&["resume", &run_id, "--allow", "1", "--json"], ws.path(), &[]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(5)],
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let loser = if a.status.code() == Some(5) { &a } else { &b };
    let message = stdout_json(loser)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("held by another process"), "{message}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("slept.txt")).unwrap(),
        "slept\n",
        "the command ran once"
    );
}

#[test]
fn a_process_killed_right_after_pausing_loses_nothing() {
    let ws = cli_workspace();
    let mut child =
        spawn(&["run", "prog.js", "--approve", "pause", "--config", "policy.toml", "--json"], ws.path(), &[]);
    // Read the receipt as it is printed, then kill the process at once
    // (before it saves receipt.json or exits on its own).
    let mut stdout = child.stdout.take().unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    use std::io::Read;
    while !text.contains("\"status\": \"paused\"") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the receipt came: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let run_id = text.split("\"run_id\": \"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let resumed =
        codemode(&["resume", &run_id, "--allow", "2", "--config", "policy.toml", "--json"], "", ws.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(std::fs::read_to_string(ws.path().join("counter.txt")).unwrap(), "ran\n");
}

#[test]
fn a_run_killed_mid_call_is_interrupted_and_its_call_in_flight_waits_for_a_person() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("policy.toml"), "[rules]\nallow = [\"bash(sleep*)\"]\n").unwrap();
    std::fs::write(
        ws.path().join("long.js"),
        "await tools.read({path: 'a.txt'}); await tools.bash({command: 'sleep 30'}); return 1;",
    )
    .unwrap();
    let mut child = spawn(&["run", "long.js", "--config", "policy.toml"], ws.path(), &[]);
    let runs = crate::common::runs_dir(ws.path());
    let journal = (0..200)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let entry = std::fs::read_dir(&runs).ok()?.flatten().next()?;
            let j = entry.path().join("journal.jsonl");
            // The read's result is in the journal while the bash call runs.
            std::fs::read_to_string(&j).ok()?.contains(r#"{"t":"start","seq":2}"#).then_some(j)
        })
        .expect("the run's journal shows its calls while it runs");
    child.kill().unwrap();
    let _ = child.wait();
    let run_id = journal.parent().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
    let listed = codemode(&["runs", "list", "--json"], "", ws.path());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("interrupted"));
    // Recovered (docs/JOURNAL.md, "Recovery"): the read is answered from
    // the journal, the bash call in flight waits for a person.
    // Without the run's policy: refused, and the run stays interrupted.
    let out = codemode(&["resume", &run_id, "--json"], "", ws.path());
    let message = stdout_json(&out)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("the run stays interrupted"), "{message}");
    let listed = codemode(&["runs", "list", "--json"], "", ws.path());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("interrupted"));
    let out = codemode(&["resume", &run_id, "--config", "policy.toml", "--json"], "", ws.path());
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    let paused = stdout_json(&out);
    assert_eq!(paused["pending"][0]["seq"], 2);
    assert_eq!(paused["pending"][0]["kind"], "unknown_outcome");
}

#[test]
fn a_program_cannot_rewrite_its_own_journal() {
    // A forged `pending` line would make a resume run other arguments than
    // the person allowed; the journal is in the state folder, outside the
    // workspace, which no writer tool and no bash command reaches,
    // whatever the posture.
    let ws = crate::common::workspace();
    let policy = codemode::Policy::full_access();
    let engine = crate::common::engine_builder().workspace(ws.path()).policy(policy).build().unwrap();
    let source = r#"
        const id = JOURNAL;
        const forged = '{"t":"pending","seq":9,"tool":"bash","args":{"command":"touch pwned"},"reason":"x"}';
        const tries = [
          () => tools.write({path: id, content: forged}),
          () => tools.edit({path: id, edits: [{old: "header", new: "x"}]}),
          () => tools.bash({command: `echo '${forged}' >> ${id}`}),
        ];
        const out = [];
        for (const t of tries) {
          try { const r = await t(); out.push(r.content.exit_code === 0 ? "ran" : "failed"); }
          catch (e) { out.push(e.kind); }
        }
        return out;
    "#;
    // The run id is known only once the run starts: find it from the
    // receipt of a first run, then target that run's folder from a second
    // run's program (the same folder layout).
    let first = engine.execute_blocking(Program::new("return 1;"));
    let journal = crate::common::runs_dir(ws.path()).join(&first.run_id).join("journal.jsonl");
    // (Written after the receipt: the store's read waits for it.)
    stored_lines(&engine, &first.run_id);
    let before = std::fs::read_to_string(&journal).unwrap();
    let r = engine.execute_blocking(Program::new(source.replace("JOURNAL", &format!("{:?}", journal))));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let outcomes = r.value.as_array().unwrap();
    assert_eq!(outcomes[0], "refused", "{outcomes:?}");
    assert_eq!(outcomes[1], "refused", "{outcomes:?}");
    assert_ne!(outcomes[2], "ran", "{outcomes:?}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), before, "the journal is unchanged");
    assert!(!ws.path().join("pwned").exists());
}

// ---------------------------------------------------------------------------
// Found by review.

#[test]
fn a_resume_cancelled_while_it_replays_leaves_the_run_paused() {
    let ws = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    // Work before the pause that a replay must redo (hundreds of ms).
    let source = r#"
        let x = 0;
        for (let i = 0; i < 4e6; i++) x += i % 7;
        await tools.write({path: "w.txt", content: String(x)});
        return x;
    "#;
    let paused = engine(ws.path(), &counter).execute_blocking(Program::new(source));
    assert_eq!(paused.status, RunStatus::Paused);
    let other = engine(ws.path(), &counter);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stopped = rt.block_on(async {
        let run = other.start_resume(&paused.run_id, &[(1, Decided::Allow)]).await.expect("claimed");
        run.cancel();
        run.wait().await
    });
    assert_eq!(stopped.status, RunStatus::Paused, "{:?} {:?}", stopped.error, stopped.warnings);
    assert_eq!(seqs_of(&stopped), [1]);
    assert!(stopped.warnings.iter().any(|w| w.contains("still paused")), "{:?}", stopped.warnings);
    assert!(!ws.path().join("w.txt").exists());
    let journal = crate::common::runs_dir(ws.path()).join(&paused.run_id).join("journal.jsonl");
    assert!(
        !std::fs::read_to_string(journal).unwrap().contains(r#""t":"decision""#),
        "a stopped resume decided nothing"
    );
    let done = other.resume_blocking(&paused.run_id, &[(1, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert!(ws.path().join("w.txt").exists());
}

#[test]
fn runs_that_end_before_their_first_call_still_journal_their_end() {
    let ws = crate::common::workspace();
    let engine = crate::common::engine_builder().workspace(ws.path()).build().unwrap();
    for (source, state) in
        [("return (", "failed"), ("throw new Error('x')", "failed"), ("return 1", "completed")]
    {
        let r = engine.execute_blocking(Program::new(source));
        let lines = stored_lines(&engine, &r.run_id);
        let last = lines.last().unwrap();
        assert!(last.contains(&format!("\"state\":\"{state}\"")), "{source}: {last}");
    }
}

/// The journal lines of `run_id` as `engine`'s store reads them (a read
/// waits for the journals of runs that ended before theirs was made).
fn stored_lines(engine: &Engine, run_id: &str) -> Vec<String> {
    let store = engine.journal_store().expect("a journal store").clone();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(store.load(run_id)).unwrap().lines
}

#[test]
fn a_run_that_never_waits_is_journaled_after_its_receipt_and_read_at_once() {
    // No call it waited on: its journal is made on the store's threads
    // after the receipt, and the store's own reads and listings wait for
    // it, so this process sees the run it ended (and dropping the engine
    // waits until it is written and synced).
    let ws = crate::common::workspace();
    let engine = crate::common::builder(&ws).build().unwrap();
    let mut ids = Vec::new();
    for i in 0..20 {
        let r = engine.execute_blocking(Program::new(format!("await tools.echo({{i: {i}}}); return {i};")));
        assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
        ids.push(r.run_id);
    }
    let store = engine.journal_store().unwrap().clone();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let listed = rt.block_on(store.list()).unwrap();
    for id in &ids {
        let run = listed.iter().find(|s| &s.run_id == id).unwrap_or_else(|| panic!("{id} is not listed"));
        assert_eq!(run.state, codemode::journal::RunState::Completed);
    }
    let last = ids.last().unwrap();
    let lines = rt.block_on(store.load(last)).unwrap().lines;
    store.flush();
    assert!(lines[0].starts_with(r#"{"t":"header""#), "{lines:?}");
    assert!(lines[1].starts_with(r#"{"t":"call","seq":1,"tool":"echo""#), "{lines:?}");
    assert!(lines[2].starts_with(r#"{"t":"done","seq":1"#), "{lines:?}");
    assert!(lines[3].contains(r#""state":"completed""#), "{lines:?}");
    assert_eq!(lines.len(), 4, "{lines:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let folder = crate::common::runs_dir(ws.path()).join(last);
    assert_eq!(mode(&folder.join("journal.jsonl")), 0o600);
    assert_eq!(mode(&folder), 0o700);
}

#[test]
fn a_journal_that_cannot_be_written_is_said_on_the_receipt_or_stderr() {
    // What refuses the run's folder before anything is made (a file where
    // the runs folder should be) is a warning on the receipt.
    let ws = crate::common::workspace();
    crate::common::block_runs_dir(ws.path());
    let out = codemode(&["run", "-", "--json"], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let receipt = stdout_json(&out);
    assert_eq!(receipt["status"], "completed");
    let warnings = receipt["warnings"].to_string();
    assert!(warnings.contains("the run's journal could not be written"), "{warnings}");

    // A failure when the folder is made, after the run of a program that
    // never waited (an immutable runs folder: refused even to root), is a
    // warning on the printed receipt too (with --json the command waits
    // for the journal before its output), and on stderr.
    struct Immutable(std::path::PathBuf);
    impl Drop for Immutable {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
        }
    }
    let ws = crate::common::workspace();
    let runs = crate::common::runs_dir(ws.path());
    std::fs::create_dir_all(&runs).unwrap();
    let made = std::process::Command::new("chattr").arg("+i").arg(&runs).status();
    assert!(made.is_ok_and(|s| s.success()), "chattr +i (e2fsprogs) works on the test folder's filesystem");
    let _undo = Immutable(runs);
    let out = codemode(&["run", "-", "--json"], "return 1;", ws.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let receipt = stdout_json(&out);
    assert_eq!(receipt["status"], "completed");
    let warnings = receipt["warnings"].as_array().expect("warnings").clone();
    assert!(
        warnings.iter().any(|w| w.as_str().is_some_and(|w| w
            .starts_with("the run's journal could not be written: cannot write the journal ")
            && w.contains("journal.jsonl"))),
        "{warnings:?}"
    );
    assert!(stderr.contains("cannot write the journal") && stderr.contains("journal.jsonl"), "{stderr}");
}

#[test]
fn a_run_that_waits_on_a_call_has_its_journal_while_it_runs() {
    // The first call it waits on hands its lines over, and the journal is
    // made then, before the run ends: a tool of the same run finds it.
    struct SeesJournal(std::path::PathBuf);
    impl codemode::Tool for SeesJournal {
        fn spec(&self) -> codemode::ToolSpec {
            codemode::ToolSpec::new("sees_journal", "Waits for a journal file.", json!({"type": "object"}))
                .read_only(true)
        }
        fn call(&self, _: Value, _: codemode::tool::ToolContext) -> codemode::tool::ToolFuture {
            let runs = self.0.clone();
            Box::pin(async move {
                for _ in 0..500 {
                    let found = std::fs::read_dir(&runs)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .any(|e| e.path().join("journal.jsonl").is_file());
                    if found {
                        return Ok(codemode::tool::ToolOutput::new(json!(true)));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Ok(codemode::tool::ToolOutput::new(json!(false)))
            })
        }
    }
    let ws = crate::common::workspace();
    let engine =
        crate::common::builder(&ws).tool(SeesJournal(crate::common::runs_dir(ws.path()))).build().unwrap();
    let r = engine.execute_blocking(Program::new(
        "await tools.sleep({ms: 1}); const r = await tools.sees_journal({}); return r.content;",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(true), "the journal was made while the run went on");
}

#[test]
fn the_clock_is_journaled_even_when_the_program_changed_object_prototype_before_first_using_date() {
    // Date is made on first use, while the program runs; the shim around it
    // (whose reads of the clock are journaled) is installed whatever the
    // program put on Object.prototype.
    let ws = crate::common::workspace();
    let engine = crate::common::builder(&ws).build().unwrap();
    let r = engine.execute_blocking(Program::new(
        "Object.prototype.enumerable = true; Object.prototype.writable = false; \
         const t = Date.now(); delete Object.prototype.enumerable; delete Object.prototype.writable; return t > 0;",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let lines = stored_lines(&engine, &r.run_id);
    assert!(lines.iter().any(|l| l.starts_with(r#"{"t":"now""#)), "{lines:?}");
}

#[test]
fn journals_are_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let ws = crate::common::workspace();
    let engine = crate::common::engine_builder().workspace(ws.path()).build().unwrap();
    let r = engine.execute_blocking(Program::new("return 1"));
    // Written after the receipt: waited for.
    engine.journal_store().unwrap().flush();
    let folder = crate::common::runs_dir(ws.path()).join(&r.run_id);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&folder.join("journal.jsonl")), 0o600);
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&crate::common::runs_dir(ws.path())), 0o700);
}

#[test]
fn a_journal_reached_through_a_link_or_from_another_workspace_is_not_resumed() {
    let real = crate::common::workspace();
    let counter = Arc::new(AtomicUsize::new(0));
    let paused = engine(real.path(), &counter)
        .execute_blocking(Program::new("await tools.write({path: 'l.txt', content: 'l'}); return 1;"));
    assert_eq!(paused.status, RunStatus::Paused);
    // A copy of the journal in another workspace's folder.
    let other = crate::common::workspace();
    let runs = crate::common::runs_dir(other.path()).join(&paused.run_id);
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::copy(
        crate::common::runs_dir(real.path()).join(&paused.run_id).join("journal.jsonl"),
        runs.join("journal.jsonl"),
    )
    .unwrap();
    let e =
        engine(other.path(), &counter).resume_blocking(&paused.run_id, &[(1, Decided::Allow)]).error.unwrap();
    assert_eq!(e.kind, ErrorKind::Divergence);
    assert!(e.message.contains("was made in workspace"), "{}", e.message);
    assert!(!other.path().join("l.txt").exists() && !real.path().join("l.txt").exists());
}

#[test]
fn call_and_batch_refuse_pause_up_front() {
    let ws = crate::common::workspace();
    let out = codemode(
        &["call", "write", "{\"path\":\"x\",\"content\":\"x\"}", "--approve", "pause"],
        "",
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a direct call cannot pause"));
    let out = codemode(
        &["batch", "--approve", "pause"],
        "{\"tool\":\"read\",\"arguments\":{\"path\":\"a.txt\"}}\n",
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a batch cannot pause"));
}

/// `nap {}`: a read-only tool that answers after 50 ms.
struct Nap;
impl Tool for Nap {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("nap", "Answers after 50 ms.", json!({"type": "object"})).read_only(true)
    }
    fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(ToolOutput::new(json!("rested")))
        })
    }
}

#[test]
fn a_resume_cancelled_after_the_allowed_call_was_made_again_but_before_it_ran_stays_paused() {
    let ws = crate::common::workspace();
    let build = || {
        crate::common::engine_builder()
            .workspace(ws.path())
            .approver(PauseApprover)
            .tool(Nap)
            .build()
            .unwrap()
    };
    // The write is made first and pauses; the nap finishes while the run
    // pauses (its result is journaled, never handed over); on replay the
    // write is held until the nap's result is handed back, and the long
    // loop after it is where the resume is cancelled.
    let source = r#"
        const w = tools.write({path: "held.txt", content: "h"});
        const r = await tools.nap({});
        let x = 0;
        for (let i = 0; i < 4e6; i++) x += i % 7;
        await w;
        return [r.content, x];
    "#;
    let paused = build().execute_blocking(Program::new(source));
    assert_eq!((paused.status, seqs_of(&paused)), (RunStatus::Paused, vec![1]), "{:?}", paused.error);
    let engine = build();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stopped = rt.block_on(async {
        let run = engine.start_resume(&paused.run_id, &[(1, Decided::Allow)]).await.expect("claimed");
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        run.cancel();
        run.wait().await
    });
    assert_eq!(stopped.status, RunStatus::Paused, "{:?} {:?}", stopped.error, stopped.warnings);
    assert!(!ws.path().join("held.txt").exists(), "the held write never ran");
    let done = engine.resume_blocking(&paused.run_id, &[(1, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.value[0], "rested");
    assert_eq!(std::fs::read_to_string(ws.path().join("held.txt")).unwrap(), "h");
}

#[test]
fn a_runs_retention_leaves_other_workspaces_runs_in_a_shared_store_alone() {
    let shared = tempfile::tempdir().unwrap();
    let journals = shared.path().to_str().unwrap();
    let (d, f) = (crate::common::workspace(), crate::common::workspace());
    std::fs::write(d.path().join("p.js"), "await tools.write({path: 'd.txt', content: 'd'}); return 1;")
        .unwrap();
    let run = codemode(&["run", "p.js", "--approve", "pause", "--journal", journals, "--json"], "", d.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let run_id = stdout_json(&run)["run_id"].as_str().unwrap().to_owned();
    // Another workspace keeps nothing, and shares the store.
    std::fs::write(f.path().join("keep-nothing.toml"), "[journal]\nkeep_runs = 0\nkeep_days = 0\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let other = codemode(
        &["run", "-", "--journal", journals, "--config", "keep-nothing.toml"],
        "return 1;",
        f.path(),
    );
    assert_eq!(other.status.code(), Some(0), "{}", String::from_utf8_lossy(&other.stderr));
    assert!(
        shared.path().join(&run_id).join("journal.jsonl").exists(),
        "the other workspace's paused run is kept"
    );
    let resumed = codemode(&["resume", &run_id, "--allow", "1", "--journal", journals], "", d.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
}

/// A workspace whose MCP config file `name` holds server-everything (stdio)
/// as `everything`.
fn everything_workspace(name: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let everything = crate::mcp_support::node_server("server-everything");
    let config = json!({"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"]}}});
    std::fs::write(ws.path().join(name), config.to_string()).unwrap();
    ws
}

/// A paused call of an MCP server whose earlier calls the resume answers
/// from the journal: the server has not started in the resuming process, so
/// its start is gated (a trusted configuration allows it) and the allowed
/// call runs.
#[test]
fn a_paused_mcp_call_resumes_in_a_process_where_its_server_has_not_started() {
    let ws = everything_workspace("servers.json");
    // echo is read-only (runs under `ask`); toggle-subscriber-updates is not.
    std::fs::write(
        ws.path().join("prog.js"),
        "const a = await tools.call('mcp__everything__echo', {message: 'one'});\n\
         const b = await tools.call('mcp__everything__toggle-subscriber-updates', {});\n\
         return [a.content, typeof b.content];",
    )
    .unwrap();
    let args = ["--mcp-config", "servers.json", "--json"];
    let run = codemode(&[&["run", "prog.js", "--approve", "pause"][..], &args].concat(), "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let paused = stdout_json(&run);
    assert_eq!(paused["pending"][0]["seq"], 2, "{paused}");
    let run_id = paused["run_id"].as_str().unwrap();
    let resumed = codemode(&[&["resume", run_id, "--allow", "2"][..], &args].concat(), "", ws.path());
    let done = stdout_json(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{done:#}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["value"][0], "Echo: one");
    assert_eq!(done["calls"][1]["status"], "ok", "{done:#}");
    assert_eq!(done["calls"][1]["decision"], "approved", "{done:#}");
}

/// The first call of a server is a writer the approver pauses: the server
/// starts (a trusted configuration allows it), the call pauses like any
/// other, and a resume in another process starts the server and runs it.
#[test]
fn the_first_call_of_a_server_pauses_and_resumes() {
    let ws = everything_workspace("servers.json");
    std::fs::write(
        ws.path().join("prog.js"),
        "const b = await tools.call('mcp__everything__toggle-subscriber-updates', {});\n\
         return typeof b.content;",
    )
    .unwrap();
    let args = ["--mcp-config", "servers.json", "--json"];
    let run = codemode(&[&["run", "prog.js", "--approve", "pause"][..], &args].concat(), "", ws.path());
    let paused = stdout_json(&run);
    assert_eq!(run.status.code(), Some(4), "{paused:#}\n{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(paused["pending"][0]["seq"], 1, "{paused}");
    assert_eq!(paused["pending"][0]["tool"], "mcp__everything__toggle-subscriber-updates");
    let run_id = paused["run_id"].as_str().unwrap();
    let resumed = codemode(&[&["resume", run_id, "--allow", "1"][..], &args].concat(), "", ws.path());
    let done = stdout_json(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{done:#}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(done["calls"][0]["status"], "ok", "{done:#}");
    assert_eq!(done["calls"][0]["decision"], "approved", "{done:#}");
}

/// A workspace's own (untrusted) `.mcp.json`: the first run's approver
/// allowed the server's start and paused the writer. The resume (whose
/// approver is `pause`) runs the allowed call: `--allow` of a call of the
/// server covers the start it needs in the new process.
#[test]
fn a_resume_allows_the_start_an_allowed_call_of_an_untrusted_server_needs() {
    let ws = everything_workspace(".mcp.json");
    let approver = ws.path().join("approver.sh");
    std::fs::write(
        &approver,
        "#!/bin/sh\nif grep -q '\"tool\":\"mcp_connect__'; then echo '{\"decision\":\"allow\"}'; \
         else echo '{\"decision\":\"pause\"}'; fi\n",
    )
    .unwrap();
    std::fs::set_permissions(&approver, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        ws.path().join("prog.js"),
        "const a = await tools.call('mcp__everything__echo', {message: 'one'});\n\
         const b = await tools.call('mcp__everything__toggle-subscriber-updates', {});\n\
         return [a.content, typeof b.content];",
    )
    .unwrap();
    let approve = format!("cmd:{}", approver.display());
    let run = codemode(&["run", "prog.js", "--approve", &approve, "--json"], "", ws.path());
    let paused = stdout_json(&run);
    assert_eq!(run.status.code(), Some(4), "{paused:#}\n{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(paused["pending"][0]["seq"], 2, "{paused}");
    let run_id = paused["run_id"].as_str().unwrap();
    let resumed = codemode(&["resume", run_id, "--allow", "2", "--json"], "", ws.path());
    let done = stdout_json(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{done:#}\n{}", String::from_utf8_lossy(&resumed.stderr));
    let last = done["calls"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["status"], "ok", "{done:#}");
    assert!(last["note"].as_str().unwrap_or_default().contains("allowed by the resume"), "{done:#}");
}

/// The syscalls of `codemode ARGS` in `ws` (every thread, file
/// descriptors named by path), as `strace -f -y` writes them, in order;
/// and the process's exit code.
fn traced(args: &[&str], ws: &std::path::Path) -> (Vec<String>, Option<i32>) {
    let log = ws.join("strace.txt");
    let out = std::process::Command::new("strace")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args(["-f", "-y", "-qq", "-s", "256", "-e", "trace=fdatasync,fsync,write", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_codemode"))
        .args(args)
        .current_dir(ws)
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("strace runs (the tests need it: .ci/run installs it)");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    (text.lines().map(str::to_owned).collect(), out.status.code())
}

/// Index of the line where an fdatasync of the run's journal returned
/// (strace splits a call other threads interleave with into `<unfinished
/// ...>` and `<... fdatasync resumed>` lines).
fn journal_synced_at(lines: &[String]) -> Option<usize> {
    let mut waiting: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let pid = line.split_whitespace().next().unwrap_or("").to_owned();
        if line.contains("fdatasync(") && line.contains("journal.jsonl>") {
            if line.contains("<unfinished ...>") {
                waiting.push(pid);
            } else if line.ends_with("= 0") {
                return Some(i);
            }
        } else if line.contains("<... fdatasync resumed>") && waiting.contains(&pid) && line.ends_with("= 0")
        {
            return Some(i);
        }
    }
    None
}

#[test]
fn a_paused_run_is_synced_before_it_is_reported_and_an_ended_one_before_the_process_exits() {
    let ws = cli_workspace();
    // Paused: the journal's fdatasync returned before the receipt's first
    // bytes went to stdout (tools' own processes write to pipes of theirs).
    let (lines, code) =
        traced(&["run", "prog.js", "--approve", "pause", "--config", "policy.toml", "--json"], ws.path());
    assert_eq!(code, Some(4), "{}", lines.join("\n"));
    let synced = journal_synced_at(&lines).unwrap_or_else(|| panic!("no journal sync: {}", lines.join("\n")));
    let reported = lines
        .iter()
        .position(|l| l.contains(" write(1<") && l.contains("receipt_version"))
        .unwrap_or_else(|| panic!("no receipt on stdout: {}", lines.join("\n")));
    assert!(synced < reported, "synced at line {synced}, reported at line {reported}:\n{}", lines.join("\n"));

    // Ended: the receipt does not wait for the sync, but the process does
    // not exit before it (the log ends with the process).
    std::fs::write(ws.path().join("one.js"), "return 1;").unwrap();
    let (lines, code) = traced(&["run", "one.js", "--json"], ws.path());
    assert_eq!(code, Some(0), "{}", lines.join("\n"));
    assert!(journal_synced_at(&lines).is_some(), "no journal sync: {}", lines.join("\n"));
    let runs = crate::common::runs_dir(ws.path());
    let ended = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("journal.jsonl")).ok())
        .filter(|text| text.lines().last().is_some_and(|l| l.contains(r#""state":"completed""#)))
        .count();
    assert_eq!(ended, 1, "one journal ends `completed`");
}

/// A resume that is refused, or that stops while it replays before
/// anything new ran, leaves the paused run as it was: its journal still
/// resumes, and its saved receipt (every call up to the pause) is not
/// replaced by the refusal's or by one listing only the calls replayed.
/// A journal line that is not UTF-8 is unreadable (`not_resumable`, exit
/// 5). And `-q` still says a run paused and how to go on.
#[test]
fn a_refused_or_diverged_resume_keeps_the_paused_run_and_its_receipt() {
    let ws = cli_workspace();
    let run =
        codemode(&["run", "prog.js", "--approve", "pause", "--config", "policy.toml", "-q"], "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let quiet = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        quiet.starts_with("codemode: paused: run run-")
            && quiet.contains("waits for a decision on call 2")
            && quiet.contains("--allow SEQ")
            && quiet.contains("--config"),
        "{quiet}"
    );
    let run_id = quiet.split_whitespace().nth(3).unwrap().to_owned();
    let folder = crate::common::runs_dir(ws.path()).join(&run_id);
    let saved = std::fs::read_to_string(folder.join("receipt.json")).unwrap();
    assert!(saved.contains("\"status\": \"paused\"") && saved.contains("\"seq\": 2"), "{saved}");
    let journal = folder.join("journal.jsonl");
    let original = std::fs::read(&journal).unwrap();
    let resume = || codemode(&["resume", &run_id, "--allow", "2", "--config", "policy.toml"], "", ws.path());

    // The journaled first call names another command: the replay takes
    // another path at call 1, before anything new ran.
    let text = String::from_utf8(original.clone()).unwrap();
    let edited: String = text
        .lines()
        .map(|l| {
            if l.contains(r#""t":"call""#) && l.contains(r#""seq":1"#) {
                l.replace("count.sh", "other.sh")
            } else {
                l.to_owned()
            }
        })
        .map(|l| l + "\n")
        .collect();
    assert_ne!(edited, text);
    std::fs::write(&journal, &edited).unwrap();
    let diverged = resume();
    let stderr = String::from_utf8_lossy(&diverged.stderr);
    assert_eq!(diverged.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("before anything new ran"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(folder.join("receipt.json")).unwrap(),
        saved,
        "the saved receipt stays"
    );

    // A line that is not UTF-8: unreadable, final, and nothing changes.
    let mut damaged = original.clone();
    damaged.extend_from_slice(b"\xff\n");
    std::fs::write(&journal, &damaged).unwrap();
    let refused =
        codemode(&["resume", &run_id, "--allow", "2", "--config", "policy.toml", "--json"], "", ws.path());
    assert_eq!(refused.status.code(), Some(5), "{}", String::from_utf8_lossy(&refused.stderr));
    let error = &stdout_json(&refused)["error"];
    assert_eq!(error["kind"], "not_resumable", "{error}");
    assert!(error["message"].as_str().unwrap().contains("is not UTF-8"), "{error}");
    assert_eq!(
        std::fs::read_to_string(folder.join("receipt.json")).unwrap(),
        saved,
        "the saved receipt stays"
    );
    assert_eq!(std::fs::read(&journal).unwrap(), damaged, "the journal is left as it was");

    // Mended, the run resumes and ends, and its receipt is the new one.
    std::fs::write(&journal, &original).unwrap();
    let resumed = resume();
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let done = std::fs::read_to_string(folder.join("receipt.json")).unwrap();
    assert!(done.contains("\"status\": \"completed\""), "{done}");
}

/// A signal that comes while `codemode resume` reads a long journal (a
/// debug build takes about a second for 20,000 calls) cancels the resumed
/// run as soon as it is loaded, so the command says what became of the
/// run. The listener used to be set only once the journal was read, so
/// such a signal killed the process with nothing said. The signal is sent
/// once the process has the journal open, while it reads it.
#[cfg(unix)]
#[test]
fn a_signal_while_resume_reads_a_long_journal_is_answered() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "for (let i = 0; i < 3000; i++) await tools.read({path: 'a.txt', limit: 1});\n\
         await tools.write({path: 'late.txt', content: 'x'});\nreturn 'done';",
    )
    .unwrap();
    let out =
        codemode(&["run", "prog.js", "--approve", "pause", "--max-calls", "5000", "--json"], "", ws.path());
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let run_id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["run_id"].as_str().unwrap().to_owned();
    let journal = crate::common::runs_dir(ws.path()).join(&run_id).join("journal.jsonl");
    let journal = std::fs::canonicalize(journal).unwrap();

    let mut child =
        spawn(&["resume", &run_id, "--allow", "3001", "--max-calls", "5000", "-q"], ws.path(), &[]);
    drop(child.stdin.take());
    // Waits until the process has the journal open.
    let fds = format!("/proc/{}/fd", child.id());
    let opened = || {
        std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == journal))
    };
    let started = std::time::Instant::now();
    while !opened() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the resume never opened the journal"
        );
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    crate::common::send_signal("TERM", child.id());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "ended by the signal, not killed by it: {err}");
    assert!(err.contains("resume stopped"), "the command says what became of the run: {err}");
    assert!(!ws.path().join("late.txt").exists(), "nothing new ran");
    let listed = codemode(&["runs", "list", "--json"], "", ws.path());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("\"paused\""), "the run is still paused");
}

/// A run whose process died is `interrupted`: `approve` and `runs wait`
/// say that a resume recovers it (they used to call it a run moved from
/// an old folder, or say its receipt was with its dead process); with its
/// journal damaged, `approve` and `rollback` say it is unreadable, as
/// `resume` does (rollback used to say it could still go on).
#[cfg(unix)]
#[test]
fn an_interrupted_run_is_named_so_by_approve_wait_and_rollback() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "await tools.bash({command: 'touch started; sleep 30'}); return 1;",
    )
    .unwrap();
    let mut child = spawn(&["run", "prog.js", "--approve", "allow", "--json"], ws.path(), &[]);
    drop(child.stdin.take());
    crate::common::wait_until_exists(&ws.path().join("started"), "the command never started");
    child.kill().unwrap();
    child.wait().unwrap();
    let listed = codemode(&["runs", "list", "--json"], "", ws.path());
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let run =
        listed.as_array().unwrap().iter().find(|r| r["state"] == "interrupted").expect("listed interrupted");
    let run_id = run["run_id"].as_str().unwrap();

    let out = codemode(&["approve", run_id], "", ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains(&format!("`codemode resume {run_id}` recovers it")), "{err}");
    assert!(!err.contains(".codemode/runs"), "{err}");
    let out = codemode(&["runs", "wait", run_id], "", ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is interrupted") && err.contains("recovers it"), "{err}");
    // A decision for it is refused the same way, and the run is left as
    // it was (it used to be claimed and given back paused).
    let journal = crate::common::runs_dir(ws.path()).join(run_id).join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    let out = codemode(&["approve", run_id, "--allow", "1"], "", ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("recovers it"), "{err}");
    assert_eq!(std::fs::read(&journal).unwrap(), before, "the journal is untouched");

    std::fs::write(&journal, "garbage\n").unwrap();
    for args in [vec!["approve", run_id], vec!["approve", run_id, "--allow", "1"], vec!["rollback", run_id]] {
        let out = codemode(&args, "", ws.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {err}");
        assert!(err.contains("journal is unreadable"), "{args:?}: {err}");
        assert!(!err.contains("can still go on"), "{args:?}: {err}");
        assert_eq!(std::fs::read_to_string(&journal).unwrap(), "garbage\n", "{args:?}: untouched");
    }
    // `runs wait` says it cannot go on, rather than pointing to a resume.
    let out = codemode(&["runs", "wait", run_id], "", ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("journal is unreadable") && !err.contains("recovers it"), "{err}");
}
