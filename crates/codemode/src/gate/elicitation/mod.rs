//! Elicitations at the approver: a question an MCP server asks the user
//! during one of its tool calls ([`Elicitation`]), as the run's approver
//! gets it ([`ElicitationRequest`], through
//! [`Approver::elicit`](super::Approver::elicit)) and answers it
//! ([`ElicitationReply`]).
//!
//! How each built-in approver answers (docs/MCP.md, "Elicitation: questions
//! for the user"):
//!
//! - `allow` accepts a form with its defaults ([`form::defaults`]); a
//!   required field without a default, and every URL, is declined;
//! - `deny` declines;
//! - `pause` declines: a run cannot pause in the middle of a tool call;
//! - `prompt` asks on the terminal, field by field ([`prompt`]);
//! - `cmd:PROGRAM` gets the request as JSON with `"kind": "elicitation"`
//!   and prints `{"action": "accept"|"decline"|"cancel", "content"?: {...},
//!   "reason"?: "..."}` ([`reply`]).
//!
//! An approver without an `elicit` of its own (a host's) declines.

pub(crate) mod form;
pub(super) mod prompt;
pub(crate) mod reply;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::catalog::{Elicitation, ElicitationAnswer};
use crate::receipt::Caller;

/// What an approver is asked for an elicitation. Serialised (flat, after
/// `"kind": "elicitation"`) as the JSON a `cmd:` approver gets on stdin:
///
/// ```json
/// {"kind": "elicitation", "run_id": "…", "seq": 3, "tool": "mcp__x__y",
///  "caller": "program", "server": "x", "message": "…",
///  "mode": "form", "requested_schema": {"type": "object", "properties": {…}}}
/// ```
///
/// (URL mode: `"mode": "url", "url": "…", "elicitation_id": "…"`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The run the call belongs to.
    pub run_id: String,
    /// The sequence number of the call that asks.
    pub seq: u64,
    /// The tool of that call.
    pub tool: String,
    /// Who made the call.
    pub caller: Caller,
    /// The question: server, message (untrusted text) and mode.
    #[serde(flatten)]
    pub elicitation: Elicitation,
}

/// An approver's answer to an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitationReply {
    /// What goes back to the server (accept with content, decline, cancel).
    pub answer: ElicitationAnswer,
    /// Who answered, for the receipt: `allow`, `deny`, `pause`, `prompt`,
    /// `cmd:PROGRAM`, or a host's name for its approver.
    pub by: String,
    /// Why, for the receipt (a decline's cause, "the form's defaults").
    #[serde(default)]
    pub reason: Option<String>,
}

impl ElicitationReply {
    /// `answer`, given by `by` (see [`ElicitationReply::by`]), because of
    /// `reason`.
    pub fn new(answer: ElicitationAnswer, by: impl Into<String>, reason: Option<String>) -> ElicitationReply {
        ElicitationReply { answer, by: by.into(), reason }
    }

    /// A decline by `by`, because of `reason`.
    pub fn decline(by: impl Into<String>, reason: impl Into<String>) -> ElicitationReply {
        ElicitationReply { answer: ElicitationAnswer::decline(), by: by.into(), reason: Some(reason.into()) }
    }

    /// A cancel by `by`, because of `reason`.
    pub fn cancel(by: impl Into<String>, reason: impl Into<String>) -> ElicitationReply {
        ElicitationReply { answer: ElicitationAnswer::cancel(), by: by.into(), reason: Some(reason.into()) }
    }
}

/// The future [`Approver::elicit`](super::Approver::elicit) returns.
pub type ElicitationReplyFuture = Pin<Box<dyn Future<Output = ElicitationReply> + Send + 'static>>;

/// The reason of the default [`Approver::elicit`](super::Approver::elicit).
pub const NOT_ANSWERED_REASON: &str =
    "this approver does not answer elicitations (it has no `elicit`); the question was declined";

/// The reply of the `allow` approver to `request`: a form accepted with its
/// defaults, or a decline saying why it cannot be.
pub(crate) fn allow_reply(request: &ElicitationRequest) -> ElicitationReply {
    const BY: &str = "allow";
    match &request.elicitation.mode {
        crate::catalog::ElicitationMode::Form { requested_schema } => {
            match form::fields(requested_schema).and_then(|f| form::defaults(&f)) {
                Ok(content) => ElicitationReply {
                    answer: ElicitationAnswer {
                        action: crate::catalog::ElicitationAction::Accept,
                        content: Some(content),
                    },
                    by: BY.to_owned(),
                    reason: Some("accepted with the form's defaults by the `allow` approver".to_owned()),
                },
                Err(why) => ElicitationReply::decline(
                    BY,
                    format!("the `allow` approver accepts a form only with its defaults, and {why}"),
                ),
            }
        }
        crate::catalog::ElicitationMode::Url { .. } => ElicitationReply::decline(
            BY,
            "the `allow` approver cannot open a URL for the user; use --approve prompt or cmd:PROGRAM",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ElicitationAction, ElicitationMode};
    use serde_json::json;

    pub(crate) fn request(mode: ElicitationMode) -> ElicitationRequest {
        ElicitationRequest {
            run_id: "run-1".into(),
            seq: 3,
            tool: "mcp__x__ask".into(),
            caller: Caller::Program,
            elicitation: Elicitation { server: "x".into(), message: "Who are you?".into(), mode },
        }
    }

    #[test]
    fn the_request_serialises_flat() {
        let r = request(ElicitationMode::Form { requested_schema: json!({"type": "object"}) });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"run_id": "run-1", "seq": 3, "tool": "mcp__x__ask", "caller": "program", "server": "x",
                   "message": "Who are you?", "mode": "form", "requested_schema": {"type": "object"}})
        );
        assert_eq!(serde_json::from_value::<ElicitationRequest>(v).unwrap(), r);
    }

    #[test]
    fn allow_accepts_defaults_and_declines_urls_and_unfillable_forms() {
        let form = ElicitationMode::Form {
            requested_schema: json!({"type": "object", "properties": {"n": {"type": "integer", "default": 2}}}),
        };
        let reply = allow_reply(&request(form));
        assert_eq!(reply.answer.action, ElicitationAction::Accept);
        assert_eq!(reply.answer.content.unwrap()["n"], 2);
        let required = ElicitationMode::Form {
            requested_schema: json!({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}),
        };
        let reply = allow_reply(&request(required));
        assert_eq!(reply.answer.action, ElicitationAction::Decline);
        assert!(reply.reason.unwrap().contains("required field `k` has no default"));
        let url = ElicitationMode::Url { url: "https://example.com/a".into(), elicitation_id: "e1".into() };
        let reply = allow_reply(&request(url));
        assert_eq!(reply.answer.action, ElicitationAction::Decline);
        assert!(reply.reason.unwrap().contains("cannot open a URL"));
    }
}
