//! Tests of the `cmd:` approver: a program that decides, and its process group.

use super::*;

// --- cmd: ------------------------------------------------------------

async fn run_cmd(approver: CommandApprover) -> Result<Approval, ApproverError> {
    approver.decide(request()).await
}

#[tokio::test]
async fn cmd_allows() {
    let approval = run_cmd(CommandApprover::new(fixture("allow.sh"), NO_ARGS)).await.unwrap();
    assert_eq!(approval.decision, Answer::Allow);
    assert_eq!(approval.reason.as_deref(), Some("the fixture allows"));
}

#[tokio::test]
async fn cmd_denies_with_its_reason() {
    let approval = run_cmd(CommandApprover::new(fixture("deny.sh"), NO_ARGS)).await.unwrap();
    assert_eq!(approval, Approval::deny("not on a Friday"));
    // Without a reason, the denial names the program.
    let bare = CommandApprover::new("sh", ["-c", r#"echo '{"decision":"deny"}'"#]);
    assert_eq!(run_cmd(bare).await.unwrap(), Approval::deny("denied by approver command `sh`"));
}

#[tokio::test]
async fn cmd_crash_is_an_error_with_its_stderr() {
    let err = run_cmd(CommandApprover::new(fixture("crash.sh"), NO_ARGS)).await.unwrap_err().0;
    assert!(err.contains("crashed (exit code 3)"), "{err}");
    assert!(err.contains("boom: the approver broke"), "{err}");
    // Printing a valid answer does not redeem a non-zero exit.
    let err = run_cmd(CommandApprover::new("sh", ["-c", r#"echo '{"decision":"allow"}'; exit 1"#]))
        .await
        .unwrap_err()
        .0;
    assert!(err.contains("crashed (exit code 1)"), "{err}");
    let err = run_cmd(CommandApprover::new("sh", ["-c", "kill -9 $$"])).await.unwrap_err().0;
    assert!(err.contains("crashed (killed by SIGKILL)"), "{err}");
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[tokio::test]
async fn cmd_hang_times_out_and_the_group_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let approver = CommandApprover::new(fixture("hang.sh"), [pids.to_str().unwrap()])
        .with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = run_cmd(approver).await.unwrap_err().0;
    let elapsed = started.elapsed();
    assert!(err.contains("timed out after 300 ms"), "{err}");
    assert!(err.contains("hanging now"), "stderr is kept: {err}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");

    let text = std::fs::read_to_string(&pids).unwrap();
    let pids: Vec<i32> = text.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2, "{text}");
    // The program itself was reaped; its background child was killed
    // with the group (and is reaped by whoever inherited it).
    let give_up = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the timeout");
    }
}

#[tokio::test]
async fn cmd_abandoned_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let approver = CommandApprover::new(fixture("hang.sh"), [pids.to_str().unwrap()]);
    let decide = approver.decide(request());
    let waited = tokio::time::timeout(Duration::from_millis(300), decide).await;
    assert!(waited.is_err(), "the hang fixture answered");
    let text = std::fs::read_to_string(&pids).unwrap();
    let pids: Vec<i32> = text.split_whitespace().map(|p| p.parse().unwrap()).collect();
    let give_up = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the abandoned approval");
    }
}

#[tokio::test]
async fn cmd_garbage_is_an_error() {
    let err = run_cmd(CommandApprover::new(fixture("garbage.sh"), NO_ARGS)).await.unwrap_err().0;
    assert!(err.contains("printed `sure, go ahead`, which is not"), "{err}");
    for (script, says) in [
        ("true", "printed nothing"),
        (r#"echo '{"decision":"ask"}'"#, "unknown variant `ask`"),
        (r#"echo '{"reason":"x"}'"#, "missing field `decision`"),
        (r#"echo '{"decision":"allow","reason":7}'"#, "invalid type"),
    ] {
        let err = run_cmd(CommandApprover::new("sh", ["-c", script])).await.unwrap_err().0;
        assert!(err.contains(says), "{script}: {err}");
    }
    // Extra keys are ignored.
    let ok = CommandApprover::new("sh", ["-c", r#"echo '{"decision":"allow","by":"me"}'"#]);
    assert_eq!(run_cmd(ok).await.unwrap().decision, Answer::Allow);
}

#[tokio::test]
async fn cmd_output_is_bounded() {
    let started = Instant::now();
    let err = run_cmd(CommandApprover::new("cat", ["/dev/zero"])).await.unwrap_err().0;
    assert!(err.contains("more than 64 KiB on stdout"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    let noisy = "head -c 100000 /dev/zero | tr '\\0' e >&2; echo END >&2; exit 1";
    let err = run_cmd(CommandApprover::new("sh", ["-c", noisy])).await.unwrap_err().0;
    assert!(err.len() < CommandApprover::MAX_STDERR_BYTES + 200, "{}", err.len());
    assert!(err.contains("last bytes of its stderr"), "{err:.200}");
    assert!(err.ends_with("END"), "the end of stderr is kept");
}

#[tokio::test]
async fn cmd_missing_program_is_an_error() {
    let err = run_cmd(CommandApprover::new("/nonexistent/approver", NO_ARGS)).await.unwrap_err().0;
    assert!(err.contains("approver command `/nonexistent/approver` not found"), "{err}");
    let err = run_cmd(CommandApprover::new("codemode-no-such-approver", NO_ARGS)).await.unwrap_err().0;
    assert!(err.contains("not found"), "{err}");
}

#[tokio::test]
async fn cmd_program_gets_the_request_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.json");
    let approver = CommandApprover::new(fixture("record.sh"), [file.to_str().unwrap()]);
    assert_eq!(run_cmd(approver).await.unwrap().decision, Answer::Allow);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    let got: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        got,
        json!({
            "kind": "approval",
            "tool": "bash",
            "arguments": {"command": "rm -rf build"},
            "caller": "program",
            "run_id": "run-0001",
            "seq": 4,
            "subject": "rm -rf build",
            "reason": "writer under posture ask",
            "annotations": {"destructiveHint": true},
            "destructive": true,
        })
    );
    // How far an `a` may reach is not part of the JSON.
    let without_scope = ApprovalRequest { run_grant: None, ..request() };
    assert_eq!(serde_json::from_value::<ApprovalRequest>(got).unwrap(), without_scope);
}

#[tokio::test]
async fn cmd_program_need_not_read_a_large_request() {
    let approver = CommandApprover::new("sh", ["-c", r#"echo '{"decision":"allow"}'"#]);
    let mut req = request();
    req.arguments = json!({"content": "x".repeat(1 << 20)});
    assert_eq!(approver.decide(req).await.unwrap().decision, Answer::Allow);
}

#[tokio::test]
async fn cmd_leftover_background_process_does_not_hold_the_answer() {
    // The program answers and exits, leaving a child holding stdout.
    let script = r#"sleep 30 & echo '{"decision":"allow"}'"#;
    let started = Instant::now();
    let approval = run_cmd(CommandApprover::new("sh", ["-c", script])).await.unwrap();
    assert_eq!(approval.decision, Answer::Allow);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn cmd_parse_splits_on_whitespace() {
    let a = CommandApprover::parse("  /bin/approve  --fast\t'two words' ").unwrap();
    assert_eq!(a.program(), "/bin/approve");
    assert_eq!(a.args(), ["--fast", "'two", "words'"]);
    assert_eq!(a.timeout(), CommandApprover::DEFAULT_TIMEOUT);
    assert_eq!(CommandApprover::DEFAULT_TIMEOUT, Duration::from_secs(60));
    assert_eq!(a.with_timeout(Duration::from_millis(5)).timeout(), Duration::from_millis(5));
    assert!(CommandApprover::parse("   ").unwrap_err().contains("needs a program"));
}
