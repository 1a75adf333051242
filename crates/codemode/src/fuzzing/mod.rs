//! Entry points for the fuzz targets in `fuzz/` (see `docs/FUZZING.md`).
//!
//! Not part of the supported API: these functions reach crate-private
//! parsers so a fuzzer can drive them with arbitrary input. Each returns
//! what the parser made (or its error message) and must never panic.
//! Entry points for one area of input live in a file of their own here
//! (`fuzzing/<area>.rs`), re-exported from this module.

use serde_json::Value;

mod config;
mod gate;
pub use config::*;
pub use gate::*;

/// Normalises a program's `source` as the engine does before running it
/// (fences stripped, TypeScript lowered, `export default` unwrapped), and
/// looks up where an error on its first line would be reported.
/// `name` is the program's file name (its extension may say TypeScript).
///
/// # Errors
/// The error's kind (`Syntax`, `Limit`, ...) and message.
pub fn normalise_program(name: &str, source: &str) -> Result<String, String> {
    let program = crate::Program::named(name, source);
    codemode_program::normalise(&program)
        .map(|n| {
            // Where an error thrown on the program's first line would be
            // reported: the user's text is parsed again (throw_site.rs).
            let _ = n.positions.thrown_at(1, 1);
            n.script
        })
        .map_err(|e| format!("{:?}: {}", e.kind, e.message))
}

/// Parses JSON text written by JavaScript's `JSON.stringify`, as the bridge
/// from the VM to Rust does (tool call arguments, a program's return value).
///
/// # Errors
/// The message the engine would give.
pub fn parse_js_json(text: &str) -> Result<Value, String> {
    codemode_base::json_text::parse(text).map_err(|e| e.to_string())
}

/// Converts the JSON of an MCP `CallToolResult` into a tool's output as
/// the MCP client does, validating `structuredContent` against
/// `output_schema` when it is given and compiles. Returns
/// `{content, metadata}`.
///
/// # Errors
/// The conversion's error message.
#[cfg(unix)]
pub fn mcp_call_result(result: Value, output_schema: Option<&Value>) -> Result<Value, String> {
    let validator = output_schema.and_then(|s| jsonschema::validator_for(s).ok());
    crate::mcp::content::to_output("fuzz", "fuzz_tool", result, validator.as_ref())
        .map(|out| serde_json::json!({"content": out.content, "metadata": out.metadata}))
        .map_err(|e| e.to_string())
}

#[cfg(unix)]
mod mcp_client;
#[cfg(unix)]
pub use mcp_client::*;

#[cfg(all(unix, feature = "oauth"))]
mod oauth;
#[cfg(all(unix, feature = "oauth"))]
pub use oauth::*;
mod search;
pub use search::*;

mod journal;
pub use journal::*;
