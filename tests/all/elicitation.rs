//! Elicitation through the engine: a tool's question to the user (an MCP
//! server's elicitation, here asked by a native tool through
//! `ToolContext::elicitor`) reaches the run's approver, is answered by
//! each kind of approver, and is recorded in the receipt under the call;
//! a declined one never looks like success. The MCP client's side (turning
//! a server's `elicitation/create` into such a question) is tested with
//! the MCP client.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use codemode::journal::Decided;
use codemode::{
    Approver, Engine, Program, Receipt, Tool, ToolSpec, approval::AllowApprover, approval::Approval,
    approval::ApprovalFuture, approval::ApprovalRequest, approval::CommandApprover, approval::DenyApprover,
    approval::PauseApprover, batch::Batch, batch::BatchOptions, elicitation::Elicitation,
    elicitation::ElicitationAction, elicitation::ElicitationMode, elicitation::ElicitationReply,
    elicitation::ElicitationReplyFuture, elicitation::ElicitationRequest, receipt::CallReceipt,
    receipt::CallStatus, receipt::RunStatus, tool::ToolContext, tool::ToolError, tool::ToolFuture,
    tool::ToolOutput,
};
use serde_json::{Value, json};

/// The form of the conformance scenario elicitation-sep1034-client-defaults
/// (SEP-1034: a default of each type).
fn sep1034() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
                   "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": true}
    }, "required": []})
}

/// `ask {message, schema?, url?}`: asks its question through the call's
/// elicitor, as an MCP server's tool does, and returns the answer.
struct Ask;
impl Tool for Ask {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("ask", "Asks the user a question.", json!({"type": "object"}))
            .read_only(true)
            .timeout_ms(400)
    }
    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let Some(elicitor) = cx.elicitor else { return Err(ToolError::new("no elicitor")) };
            let mode = match args.get("url").and_then(Value::as_str) {
                Some(url) => ElicitationMode::Url { url: url.to_owned(), elicitation_id: "e-1".to_owned() },
                None => ElicitationMode::Form { requested_schema: args["schema"].clone() },
            };
            let message = args["message"].as_str().unwrap_or("Who are you?").to_owned();
            let answer = elicitor.elicit(Elicitation::new("people", message, mode)).await;
            Ok(ToolOutput::new(serde_json::to_value(answer).unwrap()))
        })
    }
}

fn engine(ws: &Path, approver: Arc<dyn Approver>) -> Engine {
    crate::common::engine_builder()
        .workspace(ws)
        .approver_arc(approver)
        .tool(Ask)
        .build()
        .expect("engine builds")
}

/// Runs one `ask` with `args` in a program; the receipt, and the call's
/// envelope (what the program got).
fn ask(approver: Arc<dyn Approver>, args: Value) -> (Receipt, Value) {
    let ws = crate::common::workspace();
    let receipt = engine(ws.path(), approver)
        .execute_blocking(Program::new(format!("return await tools.ask({args});")));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    let envelope = receipt.value.clone();
    (receipt, envelope)
}

fn form(schema: Value) -> Value {
    json!({"message": "Who are you?", "schema": schema})
}

fn only_call(receipt: &Receipt) -> &CallReceipt {
    assert_eq!(receipt.calls.len(), 1, "{:?}", receipt.calls);
    &receipt.calls[0]
}

#[test]
fn allow_accepts_the_forms_defaults_each_of_its_type() {
    let (receipt, envelope) = ask(Arc::new(AllowApprover), form(sep1034()));
    let answer = &envelope["content"];
    assert_eq!(answer["action"], "accept");
    assert_eq!(
        answer["content"],
        json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
    );
    assert!(answer["content"]["age"].is_i64(), "an integer stays an integer");
    let call = only_call(&receipt);
    assert!(call.is_success() && !call.elicitation_declined);
    let record = &call.elicitations[0];
    assert_eq!((record.server.as_str(), record.mode.as_str()), ("people", "form"));
    assert_eq!(record.action, ElicitationAction::Accept);
    assert_eq!(record.answered_by, "allow");
    assert_eq!(record.content_keys, ["name", "age", "score", "status", "verified"]);
    assert!(record.reason.as_deref().unwrap().contains("defaults"));
    // The values are not in the receipt, only their keys.
    assert!(!serde_json::to_string(call).unwrap().contains("John Doe"));
    // The program sees the record too.
    assert_eq!(envelope["metadata"]["elicitations"][0]["action"], "accept");
    let text = receipt.render(&Default::default());
    assert!(text.contains("calls: ask: 1 ok\n"), "{text}");
    assert!(
        text.contains(
            "call 1 ask: auto, ok\n  elicitation from `people`: \"Who are you?\" → accepted by allow"
        ),
        "{text}"
    );
}

#[test]
fn allow_declines_a_required_field_without_a_default_and_urls() {
    let schema =
        json!({"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]});
    let (receipt, envelope) = ask(Arc::new(AllowApprover), form(schema));
    assert_eq!(envelope["content"]["action"], "decline");
    let call = only_call(&receipt);
    assert!(call.elicitation_declined && !call.is_success());
    assert!(
        call.elicitations[0].reason.as_deref().unwrap().contains("required field `email` has no default")
    );

    let (receipt, envelope) =
        ask(Arc::new(AllowApprover), json!({"message": "Pay", "url": "https://pay.example/c?token=s3cret"}));
    assert_eq!(envelope["content"]["action"], "decline");
    let record = &only_call(&receipt).elicitations[0];
    assert_eq!(record.url.as_deref(), Some("https://pay.example/c"), "no query in the receipt");
    assert!(!receipt.to_json().contains("s3cret"));
}

#[test]
fn deny_and_pause_decline_and_the_call_is_never_a_plain_ok() {
    for (approver, by, why) in [
        (
            Arc::new(DenyApprover::with_reason(DenyApprover::EXPLICIT_REASON)) as Arc<dyn Approver>,
            "deny",
            "`deny`",
        ),
        (Arc::new(DenyApprover::new()), "deny", "without a terminal"),
        (Arc::new(PauseApprover), "pause", "cannot pause a run in the middle of a tool call"),
    ] {
        let (receipt, envelope) = ask(approver, form(sep1034()));
        assert_eq!(envelope["content"], json!({"action": "decline"}), "{by}");
        assert_eq!(envelope["metadata"]["elicitations"][0]["action"], "decline", "the program can tell");
        let call = only_call(&receipt);
        assert_eq!(call.status, CallStatus::Ok, "the tool did return");
        assert!(call.elicitation_declined, "{by}");
        assert_eq!(call.elicitations[0].answered_by, by);
        assert!(call.elicitations[0].reason.as_deref().unwrap().contains(why), "{:?}", call.elicitations);
        assert_eq!(receipt.problem_calls().count(), 1);
        let json: Value = serde_json::from_str(&receipt.to_json()).unwrap();
        assert_eq!(json["calls"][0]["elicitation_declined"], true);
        assert_eq!(json["calls"][0]["elicitations"][0]["action"], "decline");
        let text = receipt.render(&Default::default());
        assert!(text.contains("calls: ask: 1 ok (declined elicitation)\n"), "{text}");
        assert!(text.contains("call 1 ask: auto, ok, declined elicitation\n"), "{text}");
        assert!(text.contains(&format!("\"Who are you?\" → declined by {by}: ")), "{text}");
    }
}

#[test]
fn a_host_approver_without_elicit_declines() {
    struct Old;
    impl Approver for Old {
        fn decide(&self, _: ApprovalRequest) -> ApprovalFuture {
            Box::pin(std::future::ready(Ok(Approval::allow())))
        }
    }
    let (receipt, envelope) = ask(Arc::new(Old), form(sep1034()));
    assert_eq!(envelope["content"]["action"], "decline");
    let record = &only_call(&receipt).elicitations[0];
    assert_eq!(record.reason.as_deref(), Some(codemode::approval::NOT_ANSWERED_REASON));
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/approvers").join(name)
}

/// A `cmd:` approver answering `reply`; it saves the request it got to the
/// returned file.
fn command(dir: &Path, reply: &str) -> (Arc<dyn Approver>, PathBuf) {
    let (request, answer) = (dir.join("request.json"), dir.join("reply.json"));
    std::fs::write(&answer, reply).unwrap();
    let approver = CommandApprover::new(
        fixture("reply.sh").to_str().unwrap(),
        [request.to_str().unwrap(), answer.to_str().unwrap()],
    );
    (Arc::new(approver), request)
}

#[test]
fn a_command_approver_gets_json_of_kind_elicitation_and_its_answer_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (approver, request) = command(dir.path(), r#"{"action":"accept","content":{"age":41,"name":"Ada"}}"#);
    let (receipt, envelope) = ask(approver, form(sep1034()));
    assert_eq!(envelope["content"], json!({"action": "accept", "content": {"age": 41, "name": "Ada"}}));
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    assert_eq!(
        got,
        json!({"kind": "elicitation", "run_id": receipt.run_id, "seq": 1, "tool": "ask", "caller": "program",
               "server": "people", "message": "Who are you?", "mode": "form", "requested_schema": sep1034()})
    );
    let record = &only_call(&receipt).elicitations[0];
    assert_eq!(record.answered_by, format!("cmd:{}", fixture("reply.sh").display()));
    assert_eq!(record.content_keys, ["age", "name"]);

    for (reply, action, by, why) in [
        (r#"{"action":"decline","reason":"not now"}"#, "decline", "cmd:", "not now"),
        (r#"{"action":"cancel"}"#, "cancel", "cmd:", ""),
        ("sure, go ahead", "decline", "cmd:", "printed `sure, go ahead`, which is not"),
        (r#"{"decision":"allow"}"#, "decline", "cmd:", "with an approval's `decision`"),
        // An answer that does not fit the form is not sent.
        (r#"{"action":"accept","content":{"age":"old"}}"#, "decline", "codemode", "/age fails `type`"),
    ] {
        let (approver, _) = command(dir.path(), reply);
        let (receipt, envelope) = ask(approver, form(sep1034()));
        assert_eq!(envelope["content"], json!({"action": action}), "{reply}");
        let call = only_call(&receipt);
        assert!(call.elicitation_declined, "{reply}");
        let record = &call.elicitations[0];
        assert!(record.answered_by.starts_with(by), "{reply}: {record:?}");
        assert!(record.reason.as_deref().unwrap_or("").contains(why), "{reply}: {record:?}");
        assert!(!receipt.to_json().contains("\"old\""), "a refused value is not recorded");
    }
}

#[test]
fn a_command_approver_keeps_its_approval_json_with_a_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (approver, request) = command(dir.path(), r#"{"decision":"allow"}"#);
    let receipt = crate::common::engine_builder()
        .workspace(crate::common::workspace().path())
        .approver_arc(approver)
        .build()
        .unwrap()
        .execute_blocking(Program::new("await tools.write({path: 'a.txt', content: 'x'}); return 1;"));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    assert_eq!(got["kind"], "approval");
    assert_eq!(got["tool"], "write");
}

/// Answers elicitations after `wait`, counting them; pauses approvals.
struct Slow {
    wait: Duration,
    asked: Arc<AtomicUsize>,
}
impl Approver for Slow {
    fn decide(&self, _: ApprovalRequest) -> ApprovalFuture {
        Box::pin(std::future::ready(Ok(Approval::pause())))
    }
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let wait = self.wait;
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            let mut reply = codemode::approval::AllowApprover.elicit(request).await;
            reply.by = "slow host".into();
            reply
        })
    }
}

#[test]
fn the_wait_for_an_answer_counts_against_neither_the_calls_timeout_nor_the_deadline() {
    let ws = crate::common::workspace();
    let asked = Arc::new(AtomicUsize::new(0));
    let limits = crate::common::deadline(600);
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .limits(limits)
        .approver(Slow { wait: Duration::from_millis(1500), asked: asked.clone() })
        .tool(Ask)
        .build()
        .unwrap();
    // `ask` times out after 400 ms; the answer takes 1.5 s.
    let receipt =
        engine.execute_blocking(Program::new(format!("return await tools.ask({});", form(sep1034()))));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    let call = only_call(&receipt);
    assert!(call.is_success(), "{call:?}");
    assert!(call.elicitations[0].wait_ms >= 1500.0, "{:?}", call.elicitations[0]);
    // The run counts the wait from the moment nothing but the question
    // holds it (a moment after the question was put), so a little less.
    assert!(receipt.approval_wait_ms >= 1400.0, "the wait is approval time: {}", receipt.approval_wait_ms);
}

#[test]
fn direct_calls_and_batches_ask_too() {
    let ws = crate::common::workspace();
    let engine = engine(ws.path(), Arc::new(DenyApprover::new()));
    let outcome = engine.call_blocking("ask", &form(sep1034()));
    assert!(outcome.is_ok());
    assert!(outcome.call.elicitation_declined);
    assert_eq!(outcome.call.elicitations[0].answered_by, "deny");
    assert_eq!(outcome.envelope.unwrap()["metadata"]["elicitations"][0]["action"], "decline");

    let engine = self::engine(ws.path(), Arc::new(AllowApprover));
    let args = form(sep1034()).as_object().unwrap().clone();
    let receipt =
        engine.execute_batch_blocking(Batch::of_tool("ask", [args.clone(), args]), BatchOptions::default());
    assert_eq!(receipt.calls.len(), 2);
    for call in &receipt.calls {
        assert!(call.is_success());
        assert_eq!(call.elicitations[0].answered_by, "allow");
    }
    assert_eq!(receipt.value[1]["content"]["content"]["name"], "John Doe");
}

#[test]
fn a_resumed_run_does_not_ask_again_and_keeps_the_record() {
    let ws = crate::common::workspace();
    let asked = Arc::new(AtomicUsize::new(0));
    let make = || {
        crate::common::engine_builder()
            .workspace(ws.path())
            .approver(Slow { wait: Duration::ZERO, asked: asked.clone() })
            .tool(Ask)
            .build()
            .unwrap()
    };
    let program = format!(
        "const a = await tools.ask({}); await tools.write({{path: 'w.txt', content: a.content.content.name}}); return a.content;",
        form(sep1034())
    );
    let paused = make().execute_blocking(Program::new(program));
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(paused.calls[0].elicitations.len(), 1);

    let done = make().resume_blocking(&paused.run_id, &[(2, Decided::Allow)]);
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(asked.load(Ordering::SeqCst), 1, "the replayed call was answered from the journal");
    assert_eq!(done.value["content"]["name"], "John Doe");
    assert_eq!(done.calls[0].elicitations, paused.calls[0].elicitations, "the record survives the resume");
    assert_eq!(done.calls[0].elicitations[0].answered_by, "slow host");
    assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "John Doe");
}

// --- the terminal prompt, on a real pseudo-terminal -------------------------

/// Runs under a pseudo-terminal (started by
/// `the_terminal_prompt_asks_field_by_field`); does nothing otherwise.
#[test]
fn pty_child() {
    if std::env::var_os("CODEMODE_ELICITATION_PTY_CHILD").is_none() {
        return;
    }
    use std::io::IsTerminal as _;
    assert!(std::io::stdin().is_terminal() && std::io::stderr().is_terminal());
    let ws = crate::common::workspace();
    // The default approver on a terminal is the prompt.
    let schema = json!({"type": "object", "properties": {
        "age": {"type": "integer", "default": 30, "minimum": 0},
        "name": {"type": "string", "title": "Your name"},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    }, "required": ["name"]});
    let receipt =
        engine(ws.path(), codemode::approval::default_approver()).execute_blocking(Program::new(format!(
            "const a = await tools.ask({}); const b = await tools.ask({}); return [a.content, b.content];",
            json!({"message": "Who are you?\u{1b}[2J", "schema": schema}),
            json!({"message": "Open this", "url": "https://login.example/ok?code=1"}),
        )));
    println!("RECEIPT {}", receipt.to_json());
}

#[cfg(unix)]
#[test]
fn the_terminal_prompt_asks_field_by_field() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // age: a bad value, then Enter for the default; name: required, typed;
    // status: by number; then send; the URL: declined.
    let answers = ["-3", "", "Ada", "3", "y", "n"];
    let output = std::process::Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(fixture("drive_answers.py"))
        .arg("> ")
        .args(answers)
        .arg("--")
        .arg(&exe)
        .args(["elicitation::pty_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("CODEMODE_ELICITATION_PTY_CHILD", "1")
        .env("DRIVE_PROMPT_TIMEOUT", "120")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{:?}\n{text}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("MCP server `people` asks a question (elicitation) during call #1 `ask`"),
        "{text}"
    );
    assert!(text.contains(r"message: Who are you?\u001b[2J"), "the server's text is inert: {text}");
    assert!(text.contains("age [30] > "), "{text}");
    assert!(text.contains("minimum"), "{text}");
    assert!(text.contains("name (text, required): Your name"), "{text}");
    assert!(text.contains("1) active  2) inactive  3) pending"), "{text}");
    assert!(text.contains("domain: login.example"), "{text}");
    let json =
        text.lines().find_map(|l| l.trim().strip_prefix("RECEIPT ")).expect("the child printed its receipt");
    let receipt: Receipt = serde_json::from_str(json).unwrap();
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    assert_eq!(
        receipt.value[0],
        json!({"action": "accept", "content": {"age": 30, "name": "Ada", "status": "pending"}})
    );
    assert_eq!(receipt.value[1], json!({"action": "decline"}));
    assert_eq!(receipt.calls[0].elicitations[0].answered_by, "prompt");
    assert!(receipt.calls[1].elicitation_declined);
    assert_eq!(receipt.calls[1].elicitations[0].reason.as_deref(), Some("declined at the prompt"));
}

#[test]
fn an_elicitation_reply_has_a_constructor_per_refusal() {
    let r = ElicitationReply::cancel("host", "closed");
    assert_eq!(
        (r.answer.action, r.by.as_str(), r.reason.as_deref()),
        (ElicitationAction::Cancel, "host", Some("closed"))
    );
}
