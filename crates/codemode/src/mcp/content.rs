//! Turning a `tools/call` result into a [`ToolOutput`] (DESIGN.md §3).
//!
//! - `isError: true` is a failure: [`McpError::ToolFailed`] with the text of
//!   the result's blocks.
//! - `structuredContent`, when present, is the content; it is validated
//!   against the tool's `outputSchema` when the tool gave one (MCP
//!   specification 2025-06-18, "Structured Content": clients SHOULD
//!   validate); a mismatch is [`McpError::InvalidOutput`]. The result's
//!   content blocks are kept next to it, in `metadata.blocks` (each as
//!   below: a text block's text, parsed as JSON when it parses, or the
//!   block itself), except a text block that only repeats
//!   `structuredContent` as JSON (the copy the specification asks servers
//!   to add for older clients); nothing else is dropped.
//! - Otherwise the content blocks: one text block is its text parsed as JSON
//!   when it parses, else the string; no block is `null`; several blocks are
//!   an array holding, per block, the same for text and the block itself
//!   (`{type, mimeType, ...}`) for images, audio, resources and resource
//!   links.
//! - Bounded: a binary payload (`data` of an image or audio block, `blob` of
//!   an embedded resource) over [`MAX_BINARY_CHARS`] is dropped and replaced
//!   by `"omittedChars": N`. The engine's per-call bound (and spill) applies
//!   to the whole result afterwards.
//! - `metadata` is `{"server", "tool"}` plus the result's `_meta` when it has
//!   one.

use serde_json::{Map, Value, json};

use super::McpError;
use crate::catalog::ToolOutput;

/// What a program finds in an MCP tool result's `content`, in one sentence
/// for a model (`execute_tools`' description): [`to_output`]'s rule. Change
/// it with the rule.
pub const CONTENT_RULE: &str = "An MCP tool's `content` is its structuredContent when it gives one (an object, \
its output_schema in tools.search), else its text, parsed as JSON when it is JSON (several blocks: an array).";

/// Longest base64 payload kept in an image, audio or blob block (characters).
pub const MAX_BINARY_CHARS: usize = 1 << 20;

/// Converts the JSON of a `CallToolResult` (see the module docs).
pub(crate) fn to_output(
    server: &str,
    tool: &str,
    result: Value,
    output_schema: Option<&jsonschema::Validator>,
) -> Result<ToolOutput, McpError> {
    let Value::Object(mut result) = result else {
        return Err(McpError::Protocol {
            server: server.into(),
            method: "tools/call".into(),
            message: "the result is not an object".into(),
        });
    };
    let blocks = match result.remove("content") {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let mut metadata = json!({"server": server, "tool": tool});
    if let Some(meta) = result.remove("_meta") {
        metadata["_meta"] = meta;
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text: Vec<&str> = blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
        let message = if text.is_empty() {
            "the tool reported an error without text".to_owned()
        } else {
            text.join("\n")
        };
        return Err(McpError::ToolFailed { server: server.into(), tool: tool.into(), message });
    }
    if let Some(structured) = result.remove("structuredContent").filter(|v| !v.is_null()) {
        if let Some(validator) = output_schema
            && let Some(error) = validator.iter_errors(&structured).next()
        {
            let at = error.instance_path().to_string();
            let message = if at.is_empty() { error.to_string() } else { format!("at {at}: {error}") };
            return Err(McpError::InvalidOutput { server: server.into(), tool: tool.into(), message });
        }
        let blocks: Vec<Value> =
            blocks.into_iter().map(block_value).filter(|block| *block != structured).collect();
        if !blocks.is_empty() {
            metadata["blocks"] = Value::Array(blocks);
        }
        return Ok(ToolOutput::with_metadata(structured, metadata));
    }
    let content = match blocks.len() {
        0 => Value::Null,
        1 => block_value(blocks.into_iter().next().expect("one block")),
        _ => Value::Array(blocks.into_iter().map(block_value).collect()),
    };
    Ok(ToolOutput::with_metadata(content, metadata))
}

/// A text block's text (parsed as JSON when it parses), or the block itself,
/// bounded.
fn block_value(block: Value) -> Value {
    let Value::Object(mut block) = block else { return block };
    if block.get("type").and_then(Value::as_str) == Some("text")
        && let Some(Value::String(text)) = block.remove("text")
    {
        return serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    bound_binary(&mut block, "data");
    if let Some(Value::Object(resource)) = block.get_mut("resource") {
        bound_binary(resource, "blob");
    }
    Value::Object(block)
}

fn bound_binary(object: &mut Map<String, Value>, key: &str) {
    let len = match object.get(key) {
        Some(Value::String(s)) if s.len() > MAX_BINARY_CHARS => s.len(),
        _ => return,
    };
    object.remove(key);
    object.insert("omittedChars".into(), json!(len));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(result: Value) -> Result<ToolOutput, McpError> {
        to_output("s", "t", result, None)
    }

    #[test]
    fn text_json_and_blocks() {
        assert_eq!(
            out(json!({"content": [{"type": "text", "text": "{\"a\":1}"}]})).unwrap().content,
            json!({"a": 1})
        );
        assert_eq!(out(json!({"content": [{"type": "text", "text": "hi"}]})).unwrap().content, json!("hi"));
        assert_eq!(out(json!({"content": []})).unwrap().content, Value::Null);
        let many = out(json!({"content": [
            {"type": "text", "text": "12"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "u", "blob": "x".repeat(MAX_BINARY_CHARS + 1)}}
        ], "_meta": {"k": 1}}))
        .unwrap();
        assert_eq!(many.content[0], json!(12));
        assert_eq!(many.content[1], json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}));
        assert_eq!(many.content[2]["resource"], json!({"uri": "u", "omittedChars": MAX_BINARY_CHARS + 1}));
        assert_eq!(many.metadata, Some(json!({"server": "s", "tool": "t", "_meta": {"k": 1}})));
    }

    #[test]
    fn errors_and_structured_content() {
        let err = out(json!({"content": [{"type": "text", "text": "nope"}], "isError": true})).unwrap_err();
        assert!(matches!(err, McpError::ToolFailed { ref message, .. } if message == "nope"), "{err}");
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let ok = to_output("s", "t", json!({"content": [], "structuredContent": {"n": 1}}), Some(&validator));
        assert_eq!(ok.unwrap().content, json!({"n": 1}));
        let bad =
            to_output("s", "t", json!({"structuredContent": {"n": "x"}}), Some(&validator)).unwrap_err();
        assert!(
            matches!(bad, McpError::InvalidOutput { ref message, .. } if message.contains("/n")),
            "{bad}"
        );
        assert!(matches!(out(json!([])), Err(McpError::Protocol { .. })));
    }

    #[test]
    fn blocks_next_to_structured_content_are_kept() {
        let both = out(json!({"structuredContent": {"n": 1}, "content": [
            {"type": "text", "text": "{\"n\": 1}"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "text", "text": "a caption"}
        ]}))
        .unwrap();
        assert_eq!(both.content, json!({"n": 1}));
        assert_eq!(
            both.metadata.unwrap()["blocks"],
            json!([{"type": "image", "data": "aGk=", "mimeType": "image/png"}, "a caption"])
        );
        let only_copy =
            out(json!({"structuredContent": {"n": 1}, "content": [{"type": "text", "text": "{\"n\":1}"}]}))
                .unwrap();
        assert_eq!(only_copy.metadata, Some(json!({"server": "s", "tool": "t"})));
    }
}
