//! How a run ends: the deadline while an approval is pending, a stop
//! reported once, and decisions that say who decided (issue 15, items 5
//! and 7), through the real binary, a real `cmd:` approver and the terminal
//! prompt on a pseudo-terminal.

use std::path::{Path, PathBuf};
use std::process::Command;

use codemode::{
    Policy, Program, approval::AllowApprover, policy::Rule, policy::Rules, receipt::CallStatus,
    receipt::Decision, receipt::RunStatus,
};
use serde_json::Value;

use crate::cli::codemode;

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

/// A `cmd:` approver that notes it was asked (the file `asked` in `dir`),
/// then takes 4 s before it allows: longer than the runs' 1 s deadline.
fn slow_approver(dir: &Path) -> String {
    let asked = dir.join("asked");
    let path = script(
        dir,
        "slow-approver.sh",
        &format!("cat > /dev/null\ntouch '{}'\nsleep 4\necho '{{\"decision\": \"allow\"}}'", asked.display()),
    );
    format!("cmd:{}", path.display())
}

fn receipt_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[cfg(unix)]
#[test]
fn javascript_next_to_a_pending_approval_cannot_run_past_the_deadline() {
    let approvers = tempfile::tempdir().unwrap();
    let approver = slow_approver(approvers.path());
    // A busy loop next to the call, and code after an un-awaited call.
    let programs = [
        "let n = 0;\nawait Promise.all([tools.write({path: 'w.txt', content: 'x'}), (async () => { for (;;) n++; })()]);",
        "tools.write({path: 'w.txt', content: 'x'});\nlet n = 0;\nfor (;;) n++;",
    ];
    for program in programs {
        let ws = crate::common::workspace();
        let _ = std::fs::remove_file(approvers.path().join("asked"));
        let out =
            codemode(&["run", "-", "--json", "--deadline", "1", "--approve", &approver], program, ws.path());
        let r = receipt_of(&out);
        assert_eq!(r["status"], "timed_out", "{program}: {r}");
        assert_eq!(r["error"]["kind"], "timeout", "{r}");
        assert!(approvers.path().join("asked").exists(), "the approver was asked: {r}");
        // The run ended before the approval came: the call never ran.
        let call = &r["calls"][0];
        assert_eq!((&call["status"], &call["decision"]), (&"in_flight".into(), &"pending".into()), "{call}");
        assert_eq!(call["never_started"], true, "{call}");
        assert!(!ws.path().join("w.txt").exists(), "{program}: the write never ran");
    }
}

#[cfg(unix)]
#[test]
fn a_program_that_only_waits_for_its_approval_gets_it_past_the_deadline() {
    let approvers = tempfile::tempdir().unwrap();
    let approver = slow_approver(approvers.path());
    let ws = crate::common::workspace();
    let program = "await tools.write({path: 'w.txt', content: 'x'}); return 'wrote';";
    let out =
        codemode(&["run", "-", "--json", "--deadline", "1", "--approve", &approver], program, ws.path());
    let r = receipt_of(&out);
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["value"], "wrote");
    assert_eq!(r["calls"][0]["decision"], "approved");
    assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "x");
}

#[test]
fn the_call_budget_is_reported_once() {
    let ws = crate::common::workspace();
    // 1,010 calls against the default budget of 1,000: the calls past it
    // reject, and no one handles them.
    let program = "const ps = [];\nfor (let i = 0; i < 1010; i++) ps.push(tools.grep_files({pattern: 'zzz' + i}));\nawait Promise.all(ps);";
    let out = codemode(&["run", "-"], program, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("call budget exhausted").count(), 1, "{err}");
    assert!(!err.contains("unhandled promise rejection"), "{err}");
    assert!(err.contains("when it stopped:"), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("call ")), "no line per call: {err}");
    // The saved receipt has every call, and no rejection noise in its logs.
    let path = err.lines().find_map(|l| l.trim().strip_prefix("full receipt: ")).unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(saved["calls"].as_array().unwrap().len(), 1001);
    assert_eq!(saved["logs"], serde_json::json!([]), "{}", saved["logs"]);
}

#[test]
fn calls_cut_at_the_deadline_are_named_once() {
    let ws = crate::common::workspace();
    let engine = crate::common::engine_with(&ws, crate::common::deadline(300));
    let r = engine.execute_blocking(Program::new(
        "const ps = [];\nfor (let i = 0; i < 30; i++) ps.push(tools.sleep({ms: 60000}));\nawait Promise.all(ps);",
    ));
    assert_eq!(r.status, RunStatus::TimedOut);
    let text = r.render(&Default::default());
    assert!(text.contains("when it stopped:") && text.contains("never started: 17,"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("call ")), "no line per call: {text}");
}

#[test]
fn a_call_cut_at_the_deadline_after_its_approval_says_approved() {
    let ws = crate::common::workspace();
    let policy = Policy {
        rules: Rules { ask: vec![Rule::parse("sleep").unwrap()], ..Rules::default() },
        ..Policy::default()
    };
    let engine = crate::common::builder(&ws)
        .policy(policy)
        .approver(AllowApprover)
        .limits(crate::common::deadline(500))
        .build()
        .unwrap();
    let r = engine.execute_blocking(Program::new("await tools.sleep({ms: 60000});"));
    assert_eq!(r.status, RunStatus::TimedOut);
    let call = &r.calls[0];
    assert_eq!((call.status, call.decision), (CallStatus::InFlight, Decision::Approved), "{call:?}");
    assert!(!call.never_started, "it was running: {call:?}");
}

#[cfg(unix)]
#[test]
fn a_denial_typed_ahead_at_the_prompt_leaves_the_approved_writes_alone() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "await Promise.all([\n  tools.write({path: 'x.txt', content: 'x'}),\n  tools.write({path: 'y.txt', content: 'y'}),\n  tools.write({path: 'z.txt', content: 'z'}),\n]);\nreturn 'wrote';",
    )
    .unwrap();
    // Three answers typed at the first prompt: yes, yes, no.
    let out = Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args([driver, "y\ny\nn", env!("CARGO_BIN_EXE_codemode"), "run", "prog.js", "--json"])
        .current_dir(ws.path())
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .output()
        .unwrap();
    // The terminal ends lines with \r\n.
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let json = &shown[shown.find("{\n").unwrap_or_else(|| panic!("no receipt: {shown}"))..];
    let r: Value = serde_json::from_str(json.trim_end()).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(r["status"], "failed", "{r}");
    let calls = r["calls"].as_array().unwrap();
    let answered: Vec<(&str, &str)> =
        calls.iter().map(|c| (c["decision"].as_str().unwrap(), c["status"].as_str().unwrap())).collect();
    // Which call met which answer depends on the order the prompts came
    // in; each call keeps its own answer, and the approved ones ran.
    let mut sorted = answered.clone();
    sorted.sort();
    assert_eq!(sorted, [("approved", "ok"), ("approved", "ok"), ("denied", "refused")], "{r}");
    // Each approved write happened and the denied one did not: call N
    // writes the N-th file (calls are numbered in the order the program
    // made them). The files are new ones: the common workspace already
    // holds an a.txt.
    for call in calls {
        let seq = call["seq"].as_u64().unwrap() as usize;
        let name = ["x", "y", "z"][seq - 1];
        let written = std::fs::read_to_string(ws.path().join(format!("{name}.txt"))).ok();
        match call["decision"].as_str().unwrap() {
            "approved" => assert_eq!(written.as_deref(), Some(name), "call {seq}: {r}"),
            _ => assert_eq!(written, None, "call {seq} was denied: {r}"),
        }
    }
}

/// A policy file (in `dir`, outside the workspace) with two before-call
/// hooks on `write`: the first takes `secs` seconds in a process of its
/// own (a `sleep`, whose pid it writes to `dir/hook.pid`), the second
/// notes that it started (`dir/second-hook`); both pass the call on.
fn slow_write_hook(dir: &Path, secs: u32) -> PathBuf {
    let pid = dir.join("hook.pid");
    let first = script(
        dir,
        "slow-hook.sh",
        &format!("cat > /dev/null\nsleep {secs} &\necho $! > '{}'\nwait", pid.display()),
    );
    let started = dir.join("second-hook");
    let second =
        script(dir, "second-hook.sh", &format!("cat > /dev/null\ntouch '{}'\nexit 0", started.display()));
    let policy = dir.join("policy.toml");
    let hook = |path: &Path| {
        format!("[[hooks.before_call]]\nmatch = \"^write$\"\ncommand = [\"{}\"]\n", path.display())
    };
    std::fs::write(&policy, hook(&first) + &hook(&second)).unwrap();
    policy
}

/// Whether the process whose pid `file` holds has ended, waiting at most
/// 5 s (a bound).
fn ended_soon(file: &Path) -> bool {
    let pid = std::fs::read_to_string(file).unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        if stat.rsplit_once(')').is_none_or(|(_, rest)| rest.trim_start().starts_with('Z')) {
            return true;
        }
        if std::time::Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A direct call is the whole run: as in a program, the time a person
/// takes to approve it does not count against the deadline (it counted,
/// and an approval that came after the deadline left `codemode call`
/// waiting for good).
#[cfg(unix)]
#[test]
fn a_direct_call_gets_an_approval_that_outlasts_the_deadline() {
    let approvers = tempfile::tempdir().unwrap();
    let approver = slow_approver(approvers.path());
    let ws = crate::common::workspace();
    let args = r#"{"path": "w.txt", "content": "x"}"#;
    let mut child = crate::cli::spawn(
        &["call", "write", args, "--deadline", "1", "--approve", &approver],
        ws.path(),
        &[],
    );
    drop(child.stdin.take());
    let status = crate::cli::exited_within(&mut child, 60, "the direct call did not end");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "x");
}

/// Time a direct call spends elsewhere (here in a slow hook) counts: past
/// the deadline it ends with an error of kind `timeout`, its receipt
/// `in_flight`, and it is never put to the approver.
#[cfg(unix)]
#[test]
fn a_direct_call_past_its_deadline_in_its_hooks_ends_with_a_timeout() {
    let approvers = tempfile::tempdir().unwrap();
    let approver = slow_approver(approvers.path());
    let policy = slow_write_hook(approvers.path(), 30);
    let ws = crate::common::workspace();
    let args = r#"{"path": "w.txt", "content": "x"}"#;
    let policy = policy.to_str().unwrap();
    let mut child = crate::cli::spawn(
        &["call", "write", args, "--deadline", "1", "--approve", &approver, "--config", policy, "--receipt"],
        ws.path(),
        &[],
    );
    drop(child.stdin.take());
    let status = crate::cli::exited_within(&mut child, 60, "the direct call did not end");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let r = receipt_of(&out);
    assert_eq!(r["error"]["kind"], "timeout", "{r}");
    assert_eq!(
        (&r["call"]["status"], &r["call"]["decision"]),
        (&"in_flight".into(), &"pending".into()),
        "{r}"
    );
    // The call's hook ended with it, not left running after codemode.
    assert!(ended_soon(&approvers.path().join("hook.pid")), "the hook outlived its call");
    assert!(!approvers.path().join("second-hook").exists(), "a hook started after the deadline");
    assert!(!approvers.path().join("asked").exists(), "the approver was asked after the deadline");
    assert!(!ws.path().join("w.txt").exists());
}

/// A call whose approval would be asked after its run's deadline, while
/// the program is stuck in work QuickJS does not interrupt, is never put
/// to the approver, and its hooks stop: the run cannot let it run (it was
/// asked, and its next hook ran, until the overrun watch answered the
/// run, 10 s later).
#[cfg(unix)]
#[test]
fn a_call_of_a_stuck_program_is_not_put_to_its_approver_after_the_deadline() {
    let approvers = tempfile::tempdir().unwrap();
    let approver = slow_approver(approvers.path());
    let policy = slow_write_hook(approvers.path(), 3);
    let ws = crate::common::workspace();
    let hook_pid = approvers.path().join("hook.pid");
    std::fs::write(
        ws.path().join("late.js"),
        "tools.write({path: 'late.txt', content: 'late'});\nconst a = new Float64Array(1 << 20);\nfor (;;) a.sort();\n",
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let mut child = crate::cli::spawn(
        &["run", "late.js", "--approve", &approver, "--deadline", "1", "--config", policy, "--json"],
        ws.path(),
        &[],
    );
    drop(child.stdin.take());
    let status =
        crate::cli::exited_within(&mut child, 90, "the run was not answered at its deadline and a grace");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(ended_soon(&hook_pid), "the hook outlived its run");
    assert!(!approvers.path().join("second-hook").exists(), "a hook started after the deadline");
    assert!(!approvers.path().join("asked").exists(), "the approver was asked after the deadline");
    assert!(!ws.path().join("late.txt").exists());
}
