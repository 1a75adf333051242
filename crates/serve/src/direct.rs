//! The answer to a direct call of a native tool (`--direct-tools`;
//! docs/SERVE.md, "Direct tools").
//!
//! A direct call runs as a batch of one call (or the equivalent program),
//! whose receipt value is `[envelope]`. That value is bounded like any
//! run's value (`Limits::value_bytes`, 16 KiB), far below the per-call
//! result bound (100 KiB), so a larger envelope is read back whole from
//! the value's spill file. The answer is then the envelope, never a cut
//! prefix of its JSON:
//!
//! - first text block: the content (a string as it is, else compact JSON);
//! - second text block, when the envelope has metadata or was cut:
//!   `{"metadata": ..., "truncated": ...}` as compact JSON, so a caller
//!   finds `next_offset` and tells a cut page from the end.

use std::io::Read;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use codemode::Receipt;

use super::handler::content_text;

/// Most bytes read back from a value's spill file: one envelope is at most
/// the result bound of its content (escaped) plus its bounded metadata,
/// well under this.
const MAX_SPILLED_VALUE: u64 = 4 << 20;

/// The result of the one call of a direct call's run: the envelope
/// `{content, metadata, truncated}` or `{"error": {...}}`; `Null` when the
/// run made no call. `Err` says why a value over its bound could not be
/// read back whole.
pub(crate) fn item(receipt: &Receipt) -> Result<Value, String> {
    let value = match &receipt.value_truncated {
        None => receipt.value.clone(),
        Some(cut) => {
            let path = cut.spill_path.as_deref().ok_or_else(|| {
                format!(
                    "the tool's result ({} bytes) is over the run's value bound and its spill file \
                     could not be written (see the receipt's warnings); call it from execute_tools \
                     and return a smaller part",
                    cut.original_bytes.unwrap_or_default()
                )
            })?;
            read_spilled(path)?
        }
    };
    Ok(value.as_array().and_then(|items| items.first()).cloned().unwrap_or(Value::Null))
}

/// The value spilled at `path`, parsed.
fn read_spilled(path: &str) -> Result<Value, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("reading the tool's result from {path}: {e}"))?;
    let mut text = String::new();
    file.take(MAX_SPILLED_VALUE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the tool's result from {path}: {e}"))?;
    if text.len() as u64 > MAX_SPILLED_VALUE {
        return Err(format!("the tool's result in {path} is over {MAX_SPILLED_VALUE} bytes"));
    }
    serde_json::from_str(&text).map_err(|e| format!("the tool's result in {path} is not JSON: {e}"))
}

/// The answer to a call that ran and returned `envelope` (see the module
/// docs); `None` when `envelope` is not one (no `content` key).
pub(crate) fn success(envelope: &Value) -> Option<CallToolResult> {
    let content = envelope.get("content")?;
    let mut blocks = vec![ContentBlock::text(content_text(content))];
    let metadata = envelope.get("metadata").cloned().unwrap_or(Value::Null);
    let truncated = envelope.get("truncated").cloned().unwrap_or(Value::Null);
    if !metadata.is_null() || !truncated.is_null() {
        blocks.push(ContentBlock::text(json!({"metadata": metadata, "truncated": truncated}).to_string()));
    }
    Some(CallToolResult::success(blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_cuts_come_in_a_second_block() {
        let plain = success(&json!({"content": "hi", "metadata": null, "truncated": null})).unwrap();
        assert_eq!(plain.content.len(), 1);
        let paged =
            success(&json!({"content": [1], "metadata": {"next_offset": 3}, "truncated": null})).unwrap();
        assert_eq!(paged.content[0].as_text().unwrap().text, "[1]");
        let meta: Value = serde_json::from_str(&paged.content[1].as_text().unwrap().text).unwrap();
        assert_eq!(meta["metadata"]["next_offset"], 3);
        assert!(success(&json!({"error": {"kind": "failed"}})).is_none());
        assert!(success(&Value::Null).is_none());
    }
}
