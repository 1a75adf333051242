//! Tests of the built-in approvers.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::json;

use super::command::*;
use super::prompt::*;
use super::text::*;
use super::*;
use crate::catalog::Annotations;
use crate::gate::approval::{ApproverError, RunGrantScope};
use crate::receipt::Caller;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

const NO_ARGS: [&str; 0] = [];

fn request() -> ApprovalRequest {
    ApprovalRequest {
        tool: "bash".to_owned(),
        arguments: json!({"command": "rm -rf build"}),
        caller: Caller::Program,
        run_id: "run-0001".to_owned(),
        seq: 4,
        reason: "writer under posture ask".to_owned(),
        subject: Some("rm -rf build".to_owned()),
        annotations: Annotations { destructive: Some(true), ..Annotations::default() },
        destructive: true,
        run_grant: Some(RunGrantScope::now(&crate::gate::RunChanges::default())),
        batch: None,
    }
}

fn fixture(name: &str) -> String {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tests/fixtures/approvers")
        .join(name);
    path.to_str().unwrap().to_owned()
}

/// A writer the test can read back after the approver had it.
#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// A prompt reading `input`, and what it wrote.
pub(crate) fn prompt(input: &str) -> (PromptApprover, Shared) {
    let out = Shared::default();
    let approver = PromptApprover::with_io(
        Box::new(std::io::Cursor::new(input.as_bytes().to_vec())),
        Box::new(out.clone()),
    );
    (approver, out)
}

async fn prompt_answer(input: &str) -> (Result<Approval, ApproverError>, String) {
    let (approver, out) = prompt(input);
    let result = approver.decide(request()).await;
    (result, out.text())
}

mod command;
mod prompt;

// --- deny, allow -----------------------------------------------------

#[tokio::test]
async fn deny_denies_with_the_no_terminal_reason() {
    let approval = DenyApprover::new().decide(request()).await.unwrap();
    assert_eq!(approval, Approval::deny(DenyApprover::NO_TERMINAL_REASON));
    assert_eq!(
        DenyApprover::NO_TERMINAL_REASON,
        "no approver: codemode ran without a terminal to ask on (stderr is not a terminal, or there is no \
         controlling terminal); give `--approve allow` (or `--approve cmd:PATH`) or an allow rule"
    );
    assert_eq!(DenyApprover::default(), DenyApprover::new());
    let custom = DenyApprover::with_reason("nope").decide(request()).await.unwrap();
    assert_eq!(custom, Approval::deny("nope"));
}

#[tokio::test]
async fn allow_allows() {
    let approval = AllowApprover.decide(request()).await.unwrap();
    assert_eq!(approval.decision, Answer::Allow);
    assert_eq!(approval.reason.as_deref(), Some(AllowApprover::REASON));
}

// --- default ---------------------------------------------------------

#[test]
fn the_default_prompts_only_with_a_terminal_to_ask_on() {
    assert!(prompts_by_default(true, || true));
    assert!(!prompts_by_default(false, || panic!("not tried when stderr is no terminal")));
    assert!(!prompts_by_default(true, || false));
}

#[tokio::test]
async fn the_default_denies_without_a_terminal() {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() && terminal::open().is_ok() {
        eprintln!("skipped: the tests run on a terminal, so the default is the prompt");
        return;
    }
    let approval = default_approver().decide(request()).await.unwrap();
    assert_eq!(approval, Approval::deny(DenyApprover::NO_TERMINAL_REASON));
}

// --- a real terminal -------------------------------------------------

/// Runs in a child process under a pseudo-terminal (started by
/// `a_real_terminal_prompt_is_answered`); does nothing otherwise.
#[tokio::test]
async fn pty_child() {
    let Ok(expected) = std::env::var("CODEMODE_APPROVERS_PTY_CHILD") else { return };
    use std::io::IsTerminal as _;
    assert!(std::io::stdin().is_terminal() && std::io::stderr().is_terminal());
    let approval = default_approver().decide(request()).await.unwrap();
    println!("decision: {:?}", approval.decision);
    assert_eq!(format!("{:?}", approval.decision), expected);
}

#[test]
fn a_real_terminal_prompt_is_answered() {
    let python = std::process::Command::new("python3").arg("--version").output();
    if !python.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (answer, expected) in [("y", "Allow"), ("n", "Deny")] {
        let output = std::process::Command::new("python3")
            .arg(fixture("drive_prompt.py"))
            .arg(answer)
            .arg(&exe)
            .args(["gate::approvers::tests::pty_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("CODEMODE_APPROVERS_PTY_CHILD", expected)
            .env("DRIVE_PROMPT_TIMEOUT", "60")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{answer}: {:?}\n{text}\n{stderr}", output.status);
        assert!(text.contains("approve? [y/N/a] "), "{text}");
        // bash is destructive by its annotations, which says nothing of
        // the command shown: no label.
        assert!(!text.contains("[DESTRUCTIVE]"), "{text}");
        assert!(text.contains("command: rm -rf build"), "{text}");
        assert!(text.contains(&format!("decision: {expected}")), "{text}");
        assert!(text.contains("1 passed"), "{text}");
    }
}

// --- specs -----------------------------------------------------------

#[tokio::test]
async fn specs_pick_approvers() {
    let deny = approver_from_spec("deny").unwrap().decide(request()).await.unwrap();
    assert_eq!(deny, Approval::deny(DenyApprover::EXPLICIT_REASON));
    let allow = approver_from_spec(" allow ").unwrap().decide(request()).await.unwrap();
    assert_eq!(allow.decision, Answer::Allow);
    match terminal::open() {
        Ok(_) => assert!(approver_from_spec("prompt").is_ok()),
        Err(_) => {
            let e = approver_from_spec("prompt").err().unwrap();
            assert!(e.contains("/dev/tty") && e.contains("pause"), "{e}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.json");
    let spec = format!("cmd:{} {}", fixture("record.sh"), file.display());
    let recorded = approver_from_spec(&spec).unwrap().decide(request()).await.unwrap();
    assert_eq!(recorded.decision, Answer::Allow);
    assert!(file.exists(), "the argument reached the program");
    let spec = format!("cmd:  {}", fixture("deny.sh"));
    let denied = approver_from_spec(&spec).unwrap().decide(request()).await.unwrap();
    assert_eq!(denied.decision, Answer::Deny);
}

#[test]
fn bad_specs_are_clear_errors() {
    let err = |spec: &str| approver_from_spec(spec).err().expect(spec);
    assert_eq!(err("x"), "unknown approver `x`: use deny, allow, prompt, pause or cmd:PROGRAM");
    assert_eq!(err("Prompt"), "unknown approver `Prompt`: use deny, allow, prompt, pause or cmd:PROGRAM");
    assert_eq!(
        err("cmd /bin/x"),
        "unknown approver `cmd /bin/x`: use deny, allow, prompt, pause or cmd:PROGRAM"
    );
    assert!(err("").contains("no approver given"));
    assert!(err("cmd:").contains("`cmd:` needs a program"));
    assert!(err("cmd:   ").contains("`cmd:` needs a program"));
}

#[tokio::test]
async fn pause_answers_pause_and_a_command_may_answer_pause() {
    let paused = approver_from_spec("pause").unwrap().decide(request()).await.unwrap();
    assert_eq!(paused.decision, Answer::Pause);
    let reply: Reply = serde_json::from_str(r#"{"decision": "pause", "reason": "ask the owner"}"#).unwrap();
    assert_eq!(reply.decision, Answer::Pause);
}
