//! Approvals: who decides a call the policy does not decide by itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};
use crate::catalog::Annotations;
use crate::receipt::Caller;

/// What an approver is asked. Serialised as the JSON a `cmd:` approver gets
/// on stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The tool name.
    pub tool: String,
    /// The arguments, after any hook rewrite.
    pub arguments: Value,
    /// Who made the call.
    pub caller: Caller,
    /// The run the call belongs to.
    pub run_id: String,
    /// The call's sequence number in the run.
    pub seq: u64,
    /// Why the gate asks (e.g. `writer under posture ask`, `ask rule bash(git push*)`).
    pub reason: String,
    /// What the call acts on, as the tool will see it: `bash`'s command, a
    /// file tool's path (resolved inside the workspace), or for
    /// `mcp_connect__<server>` what starting the server runs (its command
    /// line or URL, secrets as `${VAR}`; see
    /// [`ServerConfig::launch_line`](crate::mcp::ServerConfig::launch_line)).
    /// Show it first and whole: it is what the approver decides about.
    #[serde(default)]
    pub subject: Option<String>,
    /// The tool's annotations (`destructiveHint` labels a destructive call).
    pub annotations: Annotations,
    /// Whether the tool says it may destroy data.
    pub destructive: bool,
    /// How far an answer that allows for the rest of the run (the prompt's
    /// `a`) may reach from this call: `None` when an ask rule or a hook's
    /// `ask` sends the call to a person (such a call is asked every time,
    /// and its `a` allows it alone). Not part of the JSON a `cmd:` approver
    /// gets.
    #[serde(skip)]
    pub run_grant: Option<RunGrantScope>,
    /// The batch the run is a line of (`codemode batch --program`), as
    /// [`BatchApprover`](super::BatchApprover) marks it: an answer for the
    /// rest of the run (the prompt's `a`) then reaches every run of the
    /// batch, for a tool that starts no programs ([`RunGrant`](super::RunGrant)).
    /// Default: `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}

/// The calls of one run that may have changed files (every call the gate
/// let run whose tool is not read-only by its annotations), in the order
/// it let them run, as tool and subject. A prompt's `a` for a tool that
/// starts programs (`bash`, `mcp_connect__<server>`) holds only while the
/// run has made no such call but the granted one: what a program writes
/// must not change what an allowed command runs. Nothing is noted until
/// the run's first question to an approver (only calls after a question
/// can end its grant), so runs that ask nobody pay one atomic load per
/// call.
#[derive(Clone, Default)]
pub struct RunChanges(Arc<(AtomicBool, Mutex<Vec<ChangingCall>>)>);

/// A call that may have changed files: its tool and subject.
type ChangingCall = (String, Option<String>);

impl RunChanges {
    /// Notes that a call of `tool` on `subject` that may change files runs.
    pub(crate) fn record(&self, tool: &str, subject: Option<&str>) {
        if !self.watching() {
            return;
        }
        let mut calls = self.0.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.push((tool.to_owned(), subject.map(str::to_owned)));
    }

    /// Whether calls are noted: once an approver was asked in this run.
    pub(crate) fn watching(&self) -> bool {
        self.0.0.load(Ordering::Acquire)
    }

    /// How many calls have been noted.
    pub(crate) fn len(&self) -> usize {
        self.0.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether every call noted from position `from` on is a call of
    /// `tool` on `subject`.
    pub(crate) fn only_since(&self, from: usize, tool: &str, subject: Option<&str>) -> bool {
        let calls = self.0.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.iter().skip(from).all(|(t, s)| t == tool && s.as_deref() == subject)
    }
}

impl std::fmt::Debug for RunChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RunChanges").field(&self.len()).finish()
    }
}

impl PartialEq for RunChanges {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What a run grant made on a call may cover: the run's changes, and how
/// many had been noted when the call was asked about.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunGrantScope {
    /// The run's calls that may have changed files.
    pub changes: RunChanges,
    /// How many of them came before the call was asked about.
    pub seen: usize,
}

impl RunGrantScope {
    /// The scope of a call asked about now in a run with `changes`.
    pub fn now(changes: &RunChanges) -> RunGrantScope {
        changes.0.0.store(true, Ordering::Release);
        RunGrantScope { changes: changes.clone(), seen: changes.len() }
    }
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Answer {
    /// Run the call (receipt decision `approved`).
    Allow,
    /// Do not run it (decision `denied`; the program gets a catchable
    /// `ToolError` of kind `denied`).
    Deny,
    /// Decide later: the run ends `paused` with the call pending, its
    /// journal kept, and `codemode resume RUN_ID --allow SEQ | --deny SEQ`
    /// goes on (docs/JOURNAL.md). Where a run cannot pause (a direct call,
    /// a batch), the call is refused.
    Pause,
}

/// An approver's answer with its optional reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Approval {
    /// Allow or deny.
    pub decision: Answer,
    /// Why, shown in the receipt's note (allow) or error (deny).
    #[serde(default)]
    pub reason: Option<String>,
}

impl Approval {
    /// Allow, with no reason.
    pub fn allow() -> Approval {
        Approval { decision: Answer::Allow, reason: None }
    }

    /// Deny with `reason`.
    pub fn deny(reason: impl Into<String>) -> Approval {
        Approval { decision: Answer::Deny, reason: Some(reason.into()) }
    }

    /// Pause the run on this call, with no reason.
    pub fn pause() -> Approval {
        Approval { decision: Answer::Pause, reason: None }
    }

    /// This answer with `reason` (the receipt's note for an allow, its
    /// error for a deny).
    pub fn with_reason(self, reason: impl Into<String>) -> Approval {
        Approval { reason: Some(reason.into()), ..self }
    }
}

/// An approver that could not answer (it crashed, hung, or answered
/// nonsense); the call is refused (decision `refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ApproverError(pub String);

/// The future an approver returns.
pub type ApprovalFuture = Pin<Box<dyn Future<Output = Result<Approval, ApproverError>> + Send + 'static>>;

/// Decides calls that need an approval. While it decides, the program that
/// made the call waits on it; the run's deadline clock stops while the run
/// waits on nothing but people (JavaScript and other calls that run
/// meanwhile count against the deadline); other calls keep running.
pub trait Approver: Send + Sync + 'static {
    /// Answers one request.
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture;

    /// Answers a question an MCP server asks the user during one of its
    /// tool calls (an elicitation; MCP 2025-11-25 client/elicitation). While
    /// it answers, the call's timeout is paused, and the run's deadline
    /// clock stops as for an approval. The engine checks an accepted form's
    /// content against the requested schema (a mismatch is declined) and
    /// records the question and the reply in the receipt under the call.
    ///
    /// Default: decline, with [`NOT_ANSWERED_REASON`](super::elicitation::NOT_ANSWERED_REASON),
    /// so an approver written before elicitations existed answers no
    /// question by accident.
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        let _ = request;
        let reply = ElicitationReply::decline("approver", super::elicitation::NOT_ANSWERED_REASON);
        Box::pin(std::future::ready(reply))
    }

    /// Files this approver runs or reads (a command approver's program and
    /// the arguments that name files), absolute. The engine protects them,
    /// and the folders holding them, from writer tools (docs/SECURITY.md),
    /// so a program cannot rewrite the approver that decides its calls.
    /// Default: none.
    fn named_files(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }
}
