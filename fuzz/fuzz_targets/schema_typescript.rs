//! The JSON Schema to TypeScript renderer (crates/codemode/src/catalog/typescript): a tool's
//! input schema, or `[inputSchema, outputSchema]`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let (input, output) = match value {
        Value::Array(mut pair) if pair.len() == 2 => {
            let output = pair.pop();
            (pair.pop().unwrap_or_default(), output)
        }
        input => (input, None),
    };
    let mut native = codemode::ToolSpec::new("fuzz_tool", "A tool under fuzzing.", input);
    native.output_schema = output;
    // The same schemas as an MCP server's tool (declared in a namespace).
    let mcp = native.clone().source(codemode::tool::ToolSource::Mcp { server: "fuzz".into() });
    let _ = codemode::tool::declarations([&native, &mcp]);
    let _ = codemode::tool::declarations_with([&native], &codemode::tool::DeclarationOptions::new().preamble(false));
});
