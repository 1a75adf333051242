//! A run's receipt as an MCP tool result (MCP 2025-11-25 server/tools,
//! "Tool Result"; docs/SERVE.md "Results").
//!
//! - `content`: one text block, the compact receipt rendering (status,
//!   value, logs, call summary, calls not ok, which calls ran when a run was
//!   cut, pending calls and how a person decides them, where the full
//!   receipt is), at most [`TEXT_BYTES`];
//! - `structuredContent`: [`structured`], matching [`output_schema`];
//! - `isError`: `true` when the program failed, timed out or was cancelled;
//!   never for a completed program, even one whose calls failed and were
//!   caught, nor for a paused one.

use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use codemode::{Receipt, receipt::RenderOptions, receipt::RunStatus};

/// Most bytes of the text block.
pub const TEXT_BYTES: usize = 8 << 10;

/// Pending calls listed in `structuredContent`, and bytes of each subject.
const PENDING_LISTED: usize = 20;
const SUBJECT_BYTES: usize = 2000;

/// The tool result of `receipt`, saved at `receipt_path`; a paused run's
/// text names `decide_command` (with `{run_id}` and `{seqs}`).
pub(crate) fn tool_result(
    receipt: &Receipt,
    receipt_path: Option<&str>,
    decide_command: &str,
) -> CallToolResult {
    let options = RenderOptions {
        max_bytes: TEXT_BYTES,
        include_value: true,
        receipt_path,
        decide_command: Some(decide_command),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(receipt.render(&options))]);
    result.structured_content = Some(structured(receipt, receipt_path));
    result.is_error =
        Some(matches!(receipt.status, RunStatus::Failed | RunStatus::TimedOut | RunStatus::Cancelled));
    result
}

/// `{status, run_id, value, value_truncated, error, calls, pending,
/// stopped?, receipt_path}`; see [`output_schema`].
pub(crate) fn structured(receipt: &Receipt, receipt_path: Option<&str>) -> Value {
    let mut calls: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    for call in &receipt.calls {
        let state = codemode::receipt::state_name(call);
        *calls.entry(&call.tool).or_default().entry(state.to_owned()).or_default() += 1;
    }
    let pending: Vec<Value> = receipt
        .pending
        .iter()
        .take(PENDING_LISTED)
        .map(|p| {
            let mut v = json!({"seq": p.seq, "tool": p.tool, "reason": p.reason});
            // Not in the output schema (whose items allow more properties):
            // the served list stays within its byte budget.
            if let Some(kind) = &p.kind {
                v["kind"] = json!(kind);
            }
            if let Some(subject) = &p.subject {
                if subject.len() <= SUBJECT_BYTES {
                    v["subject"] = json!(subject);
                } else {
                    v["subject_bytes"] = json!(subject.len());
                }
            }
            v
        })
        .collect();
    let mut out = json!({
        "status": receipt.status.as_str(),
        "run_id": receipt.run_id,
        "value": receipt.value,
        "value_truncated": receipt.value_truncated,
        "error": receipt.error.as_ref().map(codemode::receipt::RunError::brief),
        "calls": calls,
        "pending": pending,
        "receipt_path": receipt_path,
    });
    let (finished, running, never_started) = receipt.cut_calls();
    if receipt.status != RunStatus::Paused && !(running.is_empty() && never_started.is_empty()) {
        out["stopped"] = json!({"finished": finished, "running": running, "never_started": never_started});
    }
    out
}

/// The JSON Schema of `structuredContent` (the `outputSchema` of
/// `execute_tools`).
pub(crate) fn output_schema() -> Value {
    let seqs = json!({"type": "array", "items": {"type": "integer"}});
    json!({
        "type": "object",
        "properties": {
            "status": {"enum": ["completed", "failed", "timed_out", "cancelled", "paused", "running"]},
            "run_id": {"type": "string"},
            "value": {"description": "The program's return value (a string prefix of its JSON when value_truncated)."},
            "value_truncated": {
                "type": ["object", "null"],
                "properties": {
                    "original_bytes": {"type": "integer"},
                    "kept_bytes": {"type": "integer"},
                    "spill_path": {"type": ["string", "null"]}
                }
            },
            "error": {
                "type": ["object", "null"],
                "properties": {"kind": {"type": "string"}, "message": {"type": "string"}}
            },
            "calls": {
                "type": "object",
                "description": "Calls by tool, then by status: ok, failed, refused, in_flight (was running when the run stopped: may have partly run), never_started, pending (waiting for a person's decision): counts.",
                "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "pending": {
                "type": "array",
                "description": "Calls waiting for a person's decision (status paused).",
                "items": {
                    "type": "object",
                    "properties": {
                        "seq": {"type": "integer"},
                        "tool": {"type": "string"},
                        "reason": {"type": "string"},
                        "subject": {"type": "string"},
                        "subject_bytes": {"type": "integer"}
                    },
                    "required": ["seq", "tool"]
                }
            },
            "stopped": {
                "type": "object",
                "description": "When the run stopped with calls unfinished: which calls finished, which were running and may have partly run, which never started.",
                "properties": {"finished": seqs, "running": seqs, "never_started": seqs}
            },
            "receipt_path": {"type": ["string", "null"]}
        },
        "required": ["status", "run_id", "value", "error", "calls", "pending"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use codemode::{
        receipt::CallReceipt, receipt::CallStatus, receipt::Caller, receipt::Decision, receipt::ErrorKind,
        receipt::RunError,
    };

    fn receipt(status: RunStatus, calls: Vec<CallReceipt>) -> Receipt {
        let mut r: Receipt = serde_json::from_value(json!({
            "receipt_version": 1, "run_id": "run-1", "status": "completed", "value": 1,
            "value_truncated": null, "error": null, "logs": [], "logs_dropped": 0, "calls": [],
            "catalog_sha256": "x", "elapsed_ms": 1.0, "approval_wait_ms": 0.0
        }))
        .unwrap();
        r.status = status;
        r.calls = calls;
        r
    }

    fn call(seq: u64, tool: &str, status: CallStatus, never_started: bool) -> CallReceipt {
        serde_json::from_value(json!({
            "seq": seq, "tool": tool, "caller": "program", "decision": "auto",
            "status": status, "elapsed_ms": 0.0, "bytes": 0, "truncated": null, "error": null,
            "note": null, "never_started": never_started
        }))
        .unwrap()
    }

    #[test]
    fn a_completed_run_with_failed_calls_is_not_an_error() {
        let r = receipt(RunStatus::Completed, vec![call(1, "read", CallStatus::Failed, false)]);
        let result = tool_result(&r, None, "codemode approve {run_id} --allow {seqs}");
        assert_eq!(result.is_error, Some(false));
        let s = result.structured_content.unwrap();
        assert_eq!(s["calls"], json!({"read": {"failed": 1}}));
        assert!(s.get("stopped").is_none());
    }

    #[test]
    fn a_run_cut_by_its_deadline_says_which_calls_ran() {
        let mut r = receipt(
            RunStatus::TimedOut,
            vec![
                call(1, "bash", CallStatus::Ok, false),
                call(2, "bash", CallStatus::InFlight, false),
                call(3, "bash", CallStatus::InFlight, true),
            ],
        );
        r.error = Some(RunError::new(ErrorKind::Timeout, "the run passed its deadline"));
        let result = tool_result(&r, Some("/w/receipt.json"), "x");
        assert_eq!(result.is_error, Some(true));
        let s = result.structured_content.unwrap();
        assert_eq!(s["stopped"], json!({"finished": [1], "running": [2], "never_started": [3]}));
        let text = result.content[0].as_text().unwrap().text.clone();
        assert!(text.contains("running, may have partly run: 2; never started: 3"), "{text}");
        assert!(text.contains("full receipt: /w/receipt.json"), "{text}");
        let _ = (Caller::Program, Decision::Auto);
    }

    #[test]
    fn the_structured_content_matches_the_output_schema() {
        let r = receipt(RunStatus::Failed, vec![call(1, "x", CallStatus::Refused, false)]);
        let s = structured(&r, None);
        let validator = jsonschema::validator_for(&output_schema()).unwrap();
        assert!(validator.is_valid(&s), "{s}");
    }
}
