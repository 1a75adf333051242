//! Questions a tool asks the user while it runs: MCP elicitation
//! (specification 2025-11-25, client/elicitation: a server's
//! `elicitation/create` request; 2026-07-28: an `elicitation/create` entry
//! of an `input_required` result's `inputRequests`).
//!
//! The MCP client (src/mcp) turns each such request into an
//! [`Elicitation`] and asks the call's [`Elicitor`]
//! ([`ToolContext::elicitor`](super::ToolContext::elicitor)); the engine's
//! elicitor routes it to the run's approver and records the question and its
//! answer in the receipt under the call that caused it. Without an elicitor
//! every question is declined.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One question from an MCP server, asked during one of its tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Elicitation {
    /// The MCP server asking (its name in the MCP configuration).
    pub server: String,
    /// The message for the user, as the server wrote it (untrusted text).
    pub message: String,
    /// What the server wants back.
    #[serde(flatten)]
    pub mode: ElicitationMode,
}

impl Elicitation {
    /// A question from `server` with `message`, of `mode`.
    pub fn new(server: impl Into<String>, message: impl Into<String>, mode: ElicitationMode) -> Elicitation {
        Elicitation { server: server.into(), message: message.into(), mode }
    }
}

/// The two kinds of elicitation (MCP 2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ElicitationMode {
    /// Form mode: the answer is an object matching `requested_schema`, a
    /// restricted JSON Schema (a flat object of string, number, integer,
    /// boolean and enum properties, each may carry a `default`).
    Form {
        /// The schema the content must match.
        requested_schema: Value,
    },
    /// URL mode: the user is sent to `url` (outside the client); the answer
    /// carries no content.
    Url {
        /// The page to open.
        url: String,
        /// The server's id for this elicitation.
        elicitation_id: String,
    },
}

pub use crate::receipt::ElicitationAction;

/// The answer sent back to the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitationAnswer {
    /// Accept, decline or cancel.
    pub action: ElicitationAction,
    /// Form mode, accepted: the values, matching the requested schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
}

impl ElicitationAnswer {
    /// An answer of `action`, with `content` (form mode, accepted: the
    /// values, matching the requested schema; else `None`).
    pub fn new(action: ElicitationAction, content: Option<Map<String, Value>>) -> ElicitationAnswer {
        ElicitationAnswer { action, content }
    }

    /// A decline with no content.
    pub fn decline() -> ElicitationAnswer {
        ElicitationAnswer { action: ElicitationAction::Decline, content: None }
    }

    /// A cancel with no content.
    pub fn cancel() -> ElicitationAnswer {
        ElicitationAnswer { action: ElicitationAction::Cancel, content: None }
    }
}

/// The future an [`Elicitor`] returns.
pub type ElicitationFuture = Pin<Box<dyn Future<Output = ElicitationAnswer> + Send + 'static>>;

/// Answers the questions a tool asks during one call, and hears the
/// progress it reports. The engine gives each call one
/// ([`ToolContext::elicitor`](super::ToolContext::elicitor)) that asks the
/// run's approver and records the exchange in the receipt under the call.
pub trait Elicitor: Send + Sync + 'static {
    /// Asks the user `question`; resolves with the answer (decline or cancel
    /// when nobody can answer).
    fn elicit(&self, question: Elicitation) -> ElicitationFuture;

    /// The tool reports `progress` (an MCP server's
    /// `notifications/progress`): the engine's elicitor resets the call's
    /// timeout and keeps the last report for the receipt. Default: ignored.
    fn progress(&self, progress: CallProgress) {
        let _ = progress;
    }
}

pub use crate::receipt::CallProgress;
