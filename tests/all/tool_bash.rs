//! The `bash` tool with real processes: output, exit codes, the workspace as
//! working directory, the environment filter, the output tail bound,
//! timeouts, background children and cancellation.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use codemode::{
    Engine, Limits, Program, receipt::CallStatus, receipt::Decision, receipt::RunStatus, run::CallOutcome,
};
use serde_json::{Value, json};

use crate::common::{deadline, engine_with, workspace};

/// A variable set on the test process that the command must not see.
pub(crate) const SECRET: &str = "CODEMODE_TEST_BASH_SECRET_TOKEN";
/// One with a locale-like name, which an `LC_` prefix rule would pass.
pub(crate) const LC_SECRET: &str = "LC_CODEMODE_TEST_SECRET";

pub(crate) fn engine(ws: &tempfile::TempDir) -> Engine {
    static SET: Once = Once::new();
    SET.call_once(|| {
        // SAFETY: set once, before any engine of this module starts a
        // process; std serialises its own environment access, and nothing
        // in this test binary reads the environment through libc directly.
        unsafe {
            std::env::set_var(SECRET, "hunter2");
            std::env::set_var(LC_SECRET, "hunter3");
        }
    });
    engine_with(ws, Limits::default())
}

pub(crate) fn bash(engine: &Engine, args: Value) -> CallOutcome {
    engine.call_blocking("bash", &args)
}

/// The envelope of a successful call.
pub(crate) fn ok(outcome: &CallOutcome) -> &Value {
    assert!(outcome.is_ok(), "{:?}", outcome.error);
    outcome.envelope.as_ref().unwrap()
}

/// A `sleep` argument no other process has: 1000 seconds and a fraction
/// unique to this test process and call, so `/proc/*/cmdline` finds exactly
/// the processes a test started.
fn marker() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("1000.{}{:03}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// Whether `pid` is a live process (not gone, not a zombie waiting to be
/// reaped: tests must not depend on who reaps orphans).
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name, which is in parentheses.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X' | 'x'))
}

/// Live processes whose command line contains `marker`.
fn running_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(marker) && running(pid) {
            found.push(pid);
        }
    }
    found
}

/// Polls (killing is asynchronous) until no process of `pids` or with
/// `marker` in its command line runs; panics after 5 s.
fn assert_all_gone(pids: &[i32], marker: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<i32> =
            pids.iter().copied().filter(|p| running(*p)).chain(running_with(marker)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "still running: {alive:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(ws: &tempfile::TempDir, name: &str) -> Option<i32> {
    std::fs::read_to_string(ws.path().join(name)).ok()?.trim().parse().ok()
}

#[test]
fn a_command_returns_its_stdout_and_exit_code() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(&engine, json!({"command": "echo hello; printf world", "description": "greet"}));
    let env = ok(&out);
    assert_eq!(env["content"], json!({"exit_code": 0, "stdout": "hello\nworld", "stderr": ""}));
    let meta = &env["metadata"];
    assert_eq!(meta["stdout_bytes"], json!(11));
    assert_eq!(meta["stderr_bytes"], json!(0));
    assert_eq!(meta["stdout_truncated"], json!(false));
    assert_eq!(meta["stderr_truncated"], json!(false));
    assert!(meta["elapsed_ms"].is_u64());
    assert_eq!(env["truncated"], json!(null));
    assert_eq!(out.call.status, CallStatus::Ok);
}

#[test]
fn a_non_zero_exit_is_a_result_with_stderr() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(&engine, json!({"command": "echo partial; echo 'no such thing' >&2; exit 3"}));
    let env = ok(&out);
    assert_eq!(env["content"], json!({"exit_code": 3, "stdout": "partial\n", "stderr": "no such thing\n"}));
    assert_eq!(env["metadata"]["stderr_bytes"], json!(14));

    let killed = bash(&engine, json!({"command": "kill -9 $$"}));
    assert_eq!(ok(&killed)["content"]["exit_code"], json!(null));
    assert_eq!(ok(&killed)["content"]["signal"], json!("SIGKILL"));
}

/// A shell ended by any signal is reported as that signal, as without the
/// sandbox: the launcher ends by the same signal at its default action
/// (the Rust runtime's SIGSEGV and SIGBUS handlers and its ignored SIGPIPE
/// made these exit codes 139 and 0).
#[test]
fn a_shell_ended_by_a_signal_is_reported_by_that_signal() {
    let ws = workspace();
    let engine = engine(&ws);
    for signal in ["SEGV", "BUS", "PIPE", "TERM", "USR1", "ABRT"] {
        let out = bash(&engine, json!({"command": format!("kill -{signal} $$")}));
        assert_eq!(ok(&out)["content"]["signal"], json!(format!("SIG{signal}")), "{signal}");
        assert_eq!(ok(&out)["content"]["exit_code"], json!(null), "{signal}");
    }
    // A real-time signal has a number only (nix's wait refused its status);
    // glibc's own 32 and 33 are at their default too (its posix_spawn left
    // them ignored).
    for signal in ["32", "33", "34", "64"] {
        let out = bash(&engine, json!({"command": format!("kill -{signal} $$")}));
        assert_eq!(ok(&out)["content"]["signal"], json!(signal));
    }
    // An orphan of the command (init reaps it) ended by one does not cut
    // the shell short.
    let command = "( sh -c 'sleep 0.2; kill -RTMIN $$' & ); sleep 1; echo still-running; exit 7";
    let out = bash(&engine, json!({"command": command}));
    assert_eq!(ok(&out)["content"]["exit_code"], json!(7));
    assert_eq!(ok(&out)["content"]["stdout"], json!("still-running\n"));
}

/// A shell stopped under ptrace (init its tracer) has not ended: the call
/// waits for it (here until its timeout) instead of reporting the stop's
/// signal as an exit code.
#[test]
fn a_shell_stopped_under_ptrace_has_not_ended() {
    let ws = workspace();
    let engine = engine(&ws);
    let command = "exec python3 -c 'import ctypes, os, signal; ctypes.CDLL(None).ptrace(0, 0, 0, 0); \
                   os.kill(os.getpid(), signal.SIGUSR1)'";
    let out = bash(&engine, json!({"command": command, "timeout": 1}));
    let error = out.error.expect("the call times out");
    assert_eq!(error["kind"], json!("timeout"), "{error}");
}

/// A command gets SIGPIPE at its default action, as from a terminal: the
/// writer of a closed pipe ends by it (exit status 141), not with EPIPE.
#[test]
fn a_writer_to_a_closed_pipe_ends_by_sigpipe() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(&engine, json!({"command": "yes | head -1 > /dev/null; echo ${PIPESTATUS[0]}"}));
    assert_eq!(ok(&out)["content"]["stdout"], json!("141\n"));
}

#[test]
fn stdin_is_empty() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(&engine, json!({"command": "cat; echo done", "timeout": 10}));
    assert_eq!(ok(&out)["content"]["stdout"], json!("done\n"));
}

#[test]
fn the_command_runs_in_the_workspace() {
    let ws = workspace();
    let engine = engine(&ws);
    let out =
        bash(&engine, json!({"command": "pwd; echo made > created.txt; head -1 docs/guide.md; pwd -P"}));
    let root = engine.workspace().display().to_string();
    assert_eq!(ok(&out)["content"]["stdout"], json!(format!("{root}\n# Guide\n{root}\n")));
    assert_eq!(std::fs::read_to_string(ws.path().join("created.txt")).unwrap(), "made\n");
}

#[test]
fn the_description_is_never_executed() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(&engine, json!({"command": "echo ok", "description": "$(touch pwned) `touch pwned`"}));
    assert_eq!(ok(&out)["content"]["stdout"], json!("ok\n"));
    assert!(!ws.path().join("pwned").exists());
}

#[test]
fn fifty_megabytes_of_output_come_back_as_a_bounded_tail() {
    let ws = workspace();
    let engine = engine(&ws);
    let out = bash(
        &engine,
        json!({"command": "head -c 50000000 /dev/zero | tr '\\0' x; echo end >&2", "timeout": 120}),
    );
    let env = ok(&out);
    let stdout = env["content"]["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 16 * 1024, "{} bytes kept", stdout.len());
    assert_eq!(stdout.len(), 16 * 1024);
    assert!(stdout.bytes().all(|b| b == b'x'));
    assert_eq!(env["content"]["stderr"], json!("end\n"));
    assert_eq!(env["metadata"]["stdout_bytes"], json!(50_000_000));
    assert_eq!(env["metadata"]["stdout_truncated"], json!(true));
    assert_eq!(env["metadata"]["stderr_truncated"], json!(false));
    // The tails fit the per-call bound: nothing was spilled, and the cut
    // (one 50 MB line: its end, mid-line) is said where programs look.
    assert_eq!(env["truncated"]["spill_path"], json!(null));
    assert_eq!(env["truncated"]["original_bytes"], json!(50_000_004));
    let how = env["truncated"]["tool_cut"].as_str().unwrap();
    assert!(how.starts_with("stdout: its last 16384 of 50000000 bytes, from mid-line"), "{how}");
}

#[test]
fn a_timeout_kills_the_command_and_fails_the_call() {
    let ws = workspace();
    let engine = engine(&ws);
    let started = Instant::now();
    let out = bash(&engine, json!({"command": "echo started; sleep 30", "timeout": 0.3}));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(out.call.status, CallStatus::Failed);
    let error = out.error.unwrap();
    assert_eq!(error["kind"], json!("timeout"));
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("timed out after 0.3 s"), "{message}");
    assert!(message.contains("started"), "the output tail is in the message: {message}");
}

#[test]
fn a_timeout_leaves_no_background_child_behind() {
    let ws = workspace();
    let engine = engine(&ws);
    let m = marker();
    let out = bash(&engine, json!({"command": format!("sleep {m} & echo $!; sleep {m}"), "timeout": 0.5}));
    let error = out.error.expect("the call times out");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("timed out after 0.5 s"), "{message}");
    // The pid is the PID namespace's, not the host's: the marker finds the
    // process from the host.
    let _started: i32 = message
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("the background pid is in the output tail: {message}"));
    assert_all_gone(&[], &m);
}

#[test]
fn a_background_child_holding_stdout_does_not_hang_the_call_and_is_killed() {
    let ws = workspace();
    let engine = engine(&ws);
    let m = marker();
    let started = Instant::now();
    let out = bash(&engine, json!({"command": format!("sleep {m} & echo $!"), "timeout": 60}));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let env = ok(&out);
    assert_eq!(env["content"]["exit_code"], json!(0));
    // A pid of the sandbox's PID namespace: the marker finds the process.
    let _started: i32 = env["content"]["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert_all_gone(&[], &m);
}

/// What a sandboxed command leaves running (here in a session of its own,
/// its output elsewhere, so nothing ties it to the call) is killed and
/// reaped before the call returns, not after: init ends the rest of its
/// PID namespace before it reports the shell's status, although the
/// namespace itself is torn down after the launcher has answered.
#[test]
fn a_sandboxed_command_s_leftovers_are_gone_when_its_call_returns() {
    let ws = workspace();
    let engine = engine(&ws);
    for _ in 0..5 {
        let m = marker();
        let command =
            format!("setsid sleep {m} > /dev/null 2>&1 < /dev/null & sleep {m} > /dev/null 2>&1 & true");
        let out = bash(&engine, json!({"command": command, "timeout": 60}));
        assert_eq!(ok(&out)["content"]["exit_code"], json!(0));
        assert_eq!(running_with(&m), Vec::<i32>::new(), "still running when the call returned");
    }
}

#[test]
fn a_sandboxed_command_s_tmpdir_is_gone_when_its_call_returns() {
    // The reap of the sandbox's init goes on after the call returns; the
    // private TMPDIR, with what the command left in it, may not wait for
    // it (a CLI that ends right after its last call would leave it behind).
    // Forty calls: the reap usually wins the race, not every time. Every
    // other one leaves its folder empty (removed with one `rmdir`).
    let ws = workspace();
    let engine = engine(&ws);
    for i in 0..40 {
        let command = if i % 2 == 0 {
            "mkdir \"$TMPDIR/d\" && echo left > \"$TMPDIR/d/f\" && printf %s \"$TMPDIR\""
        } else {
            "printf %s \"$TMPDIR\""
        };
        let out = bash(&engine, json!({"command": command}));
        assert_eq!(ok(&out)["content"]["exit_code"], json!(0), "{}", ok(&out));
        let tmpdir = ok(&out)["content"]["stdout"].as_str().unwrap().to_owned();
        assert!(tmpdir.contains("codemode-bash-"), "{tmpdir}");
        assert!(!std::path::Path::new(&tmpdir).exists(), "still there when the call returned: {tmpdir}");
    }
}

#[test]
fn the_run_deadline_cancels_the_call_and_kills_its_processes() {
    let ws = workspace();
    let engine = engine_with(&ws, deadline(300));
    let m = marker();
    let started = Instant::now();
    let r = engine.execute_blocking(Program::new(format!(
        "await tools.bash({{command: 'sleep {m} & echo $! > bg.pid; echo $$ > fg.pid; exec sleep {m}'}}); \
         return 'finished';"
    )));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(r.status, RunStatus::TimedOut, "{:?}", r.error);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].status, CallStatus::InFlight);
    // The pids are the sandbox's PID namespace's: the marker finds the
    // processes from the host.
    assert!(["fg.pid", "bg.pid"].iter().all(|f| read_pid(&ws, f).is_some()), "both started");
    assert_all_gone(&[], &m);
}

#[test]
fn a_direct_call_and_a_program_call_give_the_same_envelope() {
    let ws = workspace();
    let engine = engine(&ws);
    let args = json!({"command": "echo out; echo err >&2; ls docs; exit 2", "description": "mixed"});
    let direct = bash(&engine, args.clone());
    let r = engine.execute_blocking(Program::new(format!("return await tools.bash({args});")));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let strip = |mut v: Value| {
        v["metadata"].as_object_mut().unwrap().remove("elapsed_ms").expect("elapsed_ms is reported");
        v
    };
    assert_eq!(strip(ok(&direct).clone()), strip(r.value.clone()));
    assert_eq!(r.value["content"]["exit_code"], json!(2));
    assert_eq!(direct.call.bytes, r.calls[0].bytes);
}

#[test]
fn out_of_range_timeouts_and_unknown_fields_are_refused() {
    let ws = workspace();
    let engine = engine(&ws);
    for args in [
        json!({"command": "echo hi", "timeout": 601}),
        json!({"command": "echo hi", "timeout": 0}),
        json!({"command": "echo hi", "timeout_ms": 600001}),
        json!({"command": "echo hi", "timeout_ms": 0}),
        json!({"command": "echo hi", "timeout": "5"}),
        json!({"command": "echo hi", "cwd": "/"}),
        json!({"command": ""}),
        json!({}),
    ] {
        let out = bash(&engine, args.clone());
        assert_eq!(out.call.decision, Decision::Refused, "{args}");
        assert_eq!(out.error.unwrap()["kind"], json!("refused"), "{args}");
    }
}

#[test]
fn the_timeout_is_in_seconds_and_its_end_is_kind_timeout_through_the_binary() {
    // issue 32, item 10: `timeout` is in seconds, as `--deadline` and every
    // other time a user sets, and a command cut by it is a `timeout`.
    let ws = workspace();
    let program = r#"
        const kinds = [];
        for (const args of [{command: "sleep 30", timeout: 0.3}, {command: "sleep 30", timeout_ms: 300}]) {
            try { await tools.bash(args); } catch (e) { kinds.push(e.kind, e.message.split(" and ")[0]); }
        }
        try { await tools.bash({command: "echo hi", timeout: 30000}); } catch (e) { kinds.push(e.kind, e.message); }
        return kinds;
    "#;
    let started = Instant::now();
    let out = crate::cli::codemode(&["run", "-", "--json", "--approve", "allow"], program, ws.path());
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let v = &receipt["value"];
    assert_eq!(v[0], "timeout", "{v}");
    assert_eq!(v[1], "bash (call 1): the command timed out after 0.3 s", "{v}");
    assert_eq!(v[2], "timeout", "{v}");
    assert_eq!(v[3], "bash (call 2): the command timed out after 0.3 s", "{v}");
    // Milliseconds in `timeout` (the old unit) are refused, naming the unit.
    assert_eq!(v[4], "refused", "{v}");
    let refusal = v[5].as_str().unwrap();
    assert!(refusal.contains("/timeout: 30000 is greater than the maximum of 600"), "{refusal}");
    let calls = receipt["calls"].as_array().unwrap();
    assert!(calls[0]["error"].as_str().unwrap().starts_with("timeout: "), "{receipt}");
}
