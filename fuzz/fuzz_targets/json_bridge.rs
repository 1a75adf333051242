//! The JSON bridge between the VM and Rust (crates/codemode/src/vm, crates/base/src/json_text.rs), both
//! ways through a real VM. The input is JSON text for JavaScript's
//! `JSON.parse` (which takes nesting deeper than serde_json does); the
//! program passes the value to a native tool as an argument (VM -> Rust),
//! the tool returns it (Rust -> VM), and the program returns both.
//!
//! Properties: the run never fails with kind `internal`, and when it
//! completes the value came back equal (floats to 1e-12 relative: the two
//! sides round decimal text separately).
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use codemode::{Engine, receipt::ErrorKind, Limits, Policy, Program, receipt::RunStatus, Tool, tool::ToolContext, tool::ToolFuture, tool::ToolOutput, ToolSpec};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// `echo`: returns its arguments object as content.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Returns its arguments.", json!({"type": "object"})).read_only(true)
    }

    fn call(&self, args: Value, _cx: ToolContext) -> ToolFuture {
        Box::pin(std::future::ready(Ok(ToolOutput::new(args))))
    }
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<(Engine, std::path::PathBuf)> = OnceLock::new();
    &ENGINE
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("codemode-fuzz-bridge-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temporary workspace");
            let mut limits = Limits::default();
            limits.deadline = Duration::from_secs(5);
            limits.value_bytes = 64 << 20;
            limits.result_bytes = 64 << 20;
            let engine = Engine::builder()
                .workspace(&dir)
                .native_tools(false)
                .limits(limits)
                .policy(Policy::full_access())
                .tool(Echo)
                .build()
                .expect("the engine builds");
            (engine, dir)
        })
        .0
}

/// Equal as JSON, floats to a relative 1e-12.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The input as a JS string literal (JSON string syntax is JS's).
    let literal = serde_json::to_string(text).expect("a string serialises");
    let source = format!(
        "const v = JSON.parse({literal});\nconst r = await tools.call('echo', {{v}});\nreturn {{v, back: r.content.v}};"
    );
    let receipt = engine().execute_blocking(Program::named("bridge.js", source));
    match receipt.status {
        RunStatus::Completed => {
            let v = &receipt.value["v"];
            let back = &receipt.value["back"];
            assert!(same(v, back), "the value changed on its way: {v} became {back}");
        }
        _ => {
            let error = receipt.error.as_ref().expect("a run that did not complete has an error");
            assert_ne!(error.kind, ErrorKind::Internal, "kind internal: {}", error.message);
        }
    }
});
