//! MCP content conversion (crates/codemode/src/mcp/content.rs): a `CallToolResult` as JSON,
//! or `[result, outputSchema]`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let _ = match value {
        Value::Array(mut pair) if pair.len() == 2 => {
            let schema = pair.pop();
            let result = pair.pop().unwrap_or_default();
            codemode::fuzzing::mcp_call_result(result, schema.as_ref())
        }
        result => codemode::fuzzing::mcp_call_result(result, None),
    };
});
