//! Turning a `tools/call` result into a [`ToolOutput`] (DESIGN.md §3).
//!
//! - `isError: true` is a failure: [`McpError::ToolFailed`] with the text of
//!   the result's blocks.
//! - `structuredContent`, when present, is the content; it is validated
//!   against the tool's `outputSchema` when the tool gave one (MCP
//!   specification 2025-06-18, "Structured Content": clients SHOULD
//!   validate); a mismatch is [`McpError::InvalidOutput`]. The result's
//!   other content blocks are kept next to it, in `metadata.blocks` (a
//!   text block as its text, a string, never parsed; other blocks as they
//!   are), except a text block that only repeats `structuredContent` (as
//!   JSON, or one of its string fields: the copy the specification asks
//!   servers to add for older clients).
//! - Otherwise the content blocks. **When text becomes a value**: exactly
//!   when the result has no `structuredContent` and its one content block
//!   is a text block whose text is a JSON object or array (it starts with
//!   `{` or `[` and parses); then the content is that value. Any other text
//!   stays a string: scalars (`12`, `true`, `null`, `"x"`), text that does
//!   not parse, text next to `structuredContent` or among several blocks.
//!   No block is `null`; several blocks are an array holding a text
//!   block's text and any other block itself (`{type, mimeType, ...}`) for
//!   images, audio, resources and resource links.
//! - Bounded: a binary payload (`data` of an image or audio block, `blob` of
//!   an embedded resource) over [`MAX_BINARY_CHARS`] is dropped and replaced
//!   by `"omittedChars": N`; `metadata.blocks` holds at most [`BLOCKS_BYTES`]
//!   of JSON (a text cut to a prefix, later blocks dropped) and `_meta` at
//!   most [`META_BYTES`] (else `{"omittedBytes": N}`), each cut said in the
//!   envelope's `truncated`. The engine's per-call bound (and spill)
//!   applies to the content afterwards.
//! - `metadata` is `{"server", "tool"}` plus the result's `_meta` when it has
//!   one.

use serde_json::{Map, Value, json};

use super::McpError;
use crate::catalog::ToolOutput;

/// What a program finds in an MCP tool result's `content`, in one sentence
/// for a model (`execute_tools`' description): [`to_output`]'s rule. Change
/// it with the rule.
pub const CONTENT_RULE: &str = "An MCP tool's `content` is its structuredContent when it gives one (an object, \
its output_schema in tools.search), else its one text block: a value when it is a JSON object or array, else a \
string (several blocks: an array).";

/// Longest base64 payload kept in an image, audio or blob block (characters).
pub const MAX_BINARY_CHARS: usize = 1 << 20;

/// Most bytes of `metadata.blocks` (compact JSON).
pub const BLOCKS_BYTES: usize = 16 << 10;

/// Most bytes of a result's `_meta` kept in `metadata._meta` (compact JSON).
pub const META_BYTES: usize = 4 << 10;

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
    let mut cuts = Vec::new();
    if let Some(meta) = result.remove("_meta") {
        let bytes = meta.to_string().len();
        metadata["_meta"] = if bytes <= META_BYTES {
            meta
        } else {
            cuts.push(format!("metadata._meta: {bytes} bytes, over {META_BYTES}, left out"));
            json!({ "omittedBytes": bytes })
        };
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
            blocks.into_iter().map(block_value).filter(|block| !repeats(block, &structured)).collect();
        if !blocks.is_empty() {
            let (kept, cut) = bound_blocks(blocks);
            metadata["blocks"] = Value::Array(kept);
            cuts.extend(cut);
        }
        return Ok(with_cuts(ToolOutput::with_metadata(structured, metadata), cuts));
    }
    let content = match blocks.len() {
        0 => Value::Null,
        1 => match block_value(blocks.into_iter().next().expect("one block")) {
            Value::String(text) => json_container(text),
            other => other,
        },
        _ => Value::Array(blocks.into_iter().map(block_value).collect()),
    };
    Ok(with_cuts(ToolOutput::with_metadata(content, metadata), cuts))
}

/// `text` parsed when it is a JSON object or array, else the string.
fn json_container(text: String) -> Value {
    match text.trim_start().as_bytes().first() {
        Some(b'{' | b'[') => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        _ => Value::String(text),
    }
}

/// Whether `block` only repeats `structured`: the same JSON, or the text
/// of one of its string fields.
fn repeats(block: &Value, structured: &Value) -> bool {
    match block {
        Value::String(text) => {
            serde_json::from_str::<Value>(text).is_ok_and(|v| v == *structured)
                || structured.as_object().is_some_and(|o| o.values().any(|v| v.as_str() == Some(text)))
        }
        other => other == structured,
    }
}

/// `blocks` within [`BLOCKS_BYTES`] of JSON: whole blocks while they fit,
/// then, when the first that does not is a text, a prefix of it filling
/// what is left; the rest left out. Also what was cut, if anything.
fn bound_blocks(blocks: Vec<Value>) -> (Vec<Value>, Option<String>) {
    let count = blocks.len();
    let (mut used, mut whole, mut cut, mut kept) = (2usize, 2usize, false, Vec::new());
    for block in blocks {
        let size = block.to_string().len() + 1;
        whole += size;
        if !cut && used + size <= BLOCKS_BYTES {
            used += size;
            kept.push(block);
            continue;
        }
        if !cut && let Value::String(text) = &block {
            let prefix = json_prefix(text, BLOCKS_BYTES - used - 1);
            if !prefix.is_empty() {
                kept.push(Value::String(prefix));
            }
        }
        cut = true;
    }
    let how = cut.then(|| {
        format!(
            "metadata.blocks: the result's other content blocks are {whole} bytes of JSON, over {} KiB: \
             {} of {count} kept, the last kept text possibly a prefix",
            BLOCKS_BYTES >> 10,
            kept.len()
        )
    });
    (kept, how)
}

/// The longest prefix of `text` (at a character boundary) whose JSON
/// string fits in `room` bytes.
fn json_prefix(text: &str, room: usize) -> String {
    let mut max = room.saturating_sub(2);
    loop {
        let prefix = crate::receipt::spill::utf8_prefix(text, max);
        let json = Value::String(prefix.to_owned()).to_string().len();
        if json <= room || prefix.is_empty() {
            return prefix.to_owned();
        }
        // Escapes made it longer: shrink in proportion.
        max = prefix.len() * room / json;
    }
}

/// `out` with `cuts` said in its `truncated` (kept and whole sizes are the
/// content's: the content itself is whole).
fn with_cuts(out: ToolOutput, cuts: Vec<String>) -> ToolOutput {
    if cuts.is_empty() {
        return out;
    }
    let bytes = match &out.content {
        Value::String(s) => s.len(),
        v => v.to_string().len(),
    } as u64;
    let how = format!("{}; the content is whole", cuts.join("; "));
    out.cut(Some(crate::receipt::Truncation::by_tool(Some(bytes), bytes, how)))
}

/// A text block's text, or the block itself, bounded.
fn block_value(block: Value) -> Value {
    let Value::Object(mut block) = block else { return block };
    if block.get("type").and_then(Value::as_str) == Some("text")
        && let Some(Value::String(text)) = block.remove("text")
    {
        return Value::String(text);
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
        assert_eq!(many.content[0], json!("12"));
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
    fn text_becomes_a_value_only_when_it_is_the_one_block_and_an_object_or_array() {
        let one = |text: &str| out(json!({"content": [{"type": "text", "text": text}]})).unwrap().content;
        assert_eq!(one(" [1, 2]"), json!([1, 2]));
        assert_eq!(one("{\"a\": 1}"), json!({"a": 1}));
        for scalar in ["12", "true", "null", "\"x\"", "{not json", "[1,"] {
            assert_eq!(one(scalar), json!(scalar), "{scalar}");
        }
        let two = out(json!({"content": [{"type": "text", "text": "[1]"}, {"type": "text", "text": "{}"}]}));
        assert_eq!(two.unwrap().content, json!(["[1]", "{}"]));
        let next_to =
            out(json!({"structuredContent": {"n": 1}, "content": [{"type": "text", "text": "[1, 2]"}]}));
        assert_eq!(next_to.unwrap().metadata.unwrap()["blocks"], json!(["[1, 2]"]));
    }

    #[test]
    fn blocks_are_bounded_and_a_copy_of_a_structured_field_is_dropped() {
        // server-filesystem's shape: the file's text in both places.
        let text = format!("[{}1]", "1,".repeat(100_000));
        let copy =
            out(json!({"structuredContent": {"content": text}, "content": [{"type": "text", "text": text}]}));
        let copy = copy.unwrap();
        assert!(copy.metadata.as_ref().unwrap().get("blocks").is_none(), "{:?}", copy.metadata);
        assert_eq!(copy.truncated, None);
        let big =
            out(json!({"structuredContent": {"n": 1}, "_meta": {"k": "m".repeat(META_BYTES)}, "content": [
                {"type": "text", "text": "a caption"},
                {"type": "text", "text": "\n".repeat(BLOCKS_BYTES)},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"}
            ]}))
            .unwrap();
        let meta = big.metadata.unwrap();
        let blocks = meta["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        assert_eq!(blocks[0], "a caption");
        assert!(meta["blocks"].to_string().len() <= BLOCKS_BYTES);
        assert!(meta["blocks"].to_string().len() > BLOCKS_BYTES - 8);
        assert_eq!(meta["_meta"]["omittedBytes"].as_u64().unwrap() as usize, META_BYTES + 8);
        let cut = big.truncated.unwrap();
        let how = cut.tool_cut.unwrap();
        assert!(how.contains("metadata._meta") && how.contains("2 of 3 kept"), "{how}");
        assert_eq!((cut.original_bytes, cut.kept_bytes), (Some(7), 7));
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
