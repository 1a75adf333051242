//! Direct calls through the library: the same gate and the same results as
//! a program's calls.

use codemode::{Limits, Program, receipt::CallStatus, receipt::Caller, receipt::Decision};
use serde_json::json;

use crate::common::{engine_with, workspace};

#[test]
fn a_direct_call_returns_what_the_same_call_returns_in_a_program() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    for (tool, args) in [
        ("read", json!({"path": "a.txt", "offset": 2})),
        ("file_search", json!({"query": "guide"})),
        ("echo", json!({"nested": {"list": [1, 2]}})),
        ("blob", json!({"bytes": 30})),
    ] {
        let direct = engine.call_blocking(tool, &args);
        assert!(direct.is_ok(), "{tool}: {:?}", direct.error);
        assert_eq!(direct.call.caller, Caller::Direct);
        assert_eq!(direct.call.decision, Decision::Auto);
        let program =
            engine.execute_blocking(Program::new(format!("return await tools.call('{tool}', {args});")));
        assert_eq!(direct.envelope.as_ref(), Some(&program.value), "{tool}");
        assert_eq!(direct.call.bytes, program.calls[0].bytes, "{tool}");
    }
}

#[test]
fn direct_calls_are_refused_and_fail_like_program_calls() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let unknown = engine.call_blocking("raed", &json!({}));
    assert_eq!(unknown.call.status, CallStatus::Refused);
    assert_eq!(unknown.error.as_ref().unwrap()["kind"], "refused");
    assert!(unknown.error.as_ref().unwrap()["message"].as_str().unwrap().contains("`read`"));

    let invalid = engine.call_blocking("read", &json!({"path": 3}));
    assert_eq!(invalid.call.decision, Decision::Refused);

    let failed = engine.call_blocking("read", &json!({"path": "../outside"}));
    assert_eq!(failed.call.status, CallStatus::Failed);
    assert_eq!(failed.error.as_ref().unwrap()["kind"], "failed");

    let slow = engine.call_blocking("sleep", &json!({"ms": 5}));
    assert!(slow.is_ok());
    assert_eq!(slow.envelope.unwrap()["content"], json!({"slept": 5}));

    let panics = engine.call_blocking("panic", &json!({"later": true}));
    assert_eq!(panics.call.status, CallStatus::Failed);
}

#[test]
fn direct_only_tools_pass_the_direct_only_step_when_called_directly() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    // `agent` is not registered, so it is refused as unknown, not as
    // direct-only: the direct-only step does not apply to direct callers.
    let r = engine.call_blocking("agent", &json!({}));
    let message = r.error.unwrap()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("unknown tool"), "{message}");
}
