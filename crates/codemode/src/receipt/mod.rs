//! Receipts: what a run returns in every outcome.
//!
//! The JSON shape is documented in `docs/RECEIPTS.md` and versioned by
//! [`RECEIPT_VERSION`]. A receipt never carries full payloads: results and
//! return values over their bounds are cut to a UTF-8-safe prefix and the
//! whole is written to a spill file first (see `spill`).

pub(crate) mod ledger;
pub(crate) mod render;
pub(crate) mod spill;

pub use ledger::CallEndObserver;
pub use render::{RenderOptions, state_name};

pub(crate) use ledger::Ledger;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the receipt JSON shape; bumped on any incompatible change.
pub const RECEIPT_VERSION: u32 = 1;

impl From<codemode_program::NormaliseError> for RunError {
    fn from(e: codemode_program::NormaliseError) -> Self {
        use codemode_program::NormaliseErrorKind as K;
        let kind = match e.kind {
            K::Syntax => ErrorKind::Syntax,
            K::Stack => ErrorKind::Stack,
            K::Limit => ErrorKind::Limit,
            _ => ErrorKind::Internal,
        };
        let mut run_error = RunError::new(kind, e.message);
        run_error.line = e.line;
        run_error.column = e.column;
        run_error
    }
}

/// The user's answer (MCP `ElicitResult.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationAction {
    /// The user accepted; form mode carries `content`.
    Accept,
    /// The user declined explicitly.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// The program's async body settled with a value.
    Completed,
    /// The program threw, failed to parse, ran out of memory or stack, or hit
    /// a limit; `error` says which.
    Failed,
    /// The run deadline passed (the clock does not run while an approval is
    /// pending).
    TimedOut,
    /// The run stopped on a call that needs a decision (pause approver).
    Paused,
    /// The host cancelled the run.
    Cancelled,
}

impl RunStatus {
    /// The `codemode` process exit code for this status (DESIGN.md §9):
    /// 0 completed, 1 failed, 3 timed out, 4 paused, 130 cancelled.
    pub fn exit_code(self) -> u8 {
        match self {
            RunStatus::Completed => 0,
            RunStatus::Failed => 1,
            RunStatus::TimedOut => 3,
            RunStatus::Paused => 4,
            RunStatus::Cancelled => 130,
        }
    }

    /// The lower-case name used in the receipt JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Paused => "paused",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// What kind of error ended a run (`error.kind` in the receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The program did not parse; no call ran.
    Syntax,
    /// The admission check refused the program before its first call: a
    /// tool it names literally is not in the catalog, or literal
    /// arguments do not fit the tool's input schema; the message lists
    /// each with its line and column. No call ran.
    Admission,
    /// The program threw (or rejected) and did not catch it.
    Exception,
    /// The run deadline passed.
    Timeout,
    /// The VM's memory limit was reached.
    Memory,
    /// The JS stack limit was reached (deep recursion).
    Stack,
    /// A run limit was reached: source size, calls per run, a program that
    /// waits on a promise nothing can settle, or a return value nested
    /// deeper than 127 levels of arrays and objects.
    Limit,
    /// The host cancelled the run.
    Cancelled,
    /// A fault of the engine itself; please report it.
    Internal,
    /// A resume found the program taking another path than its journal
    /// (a call other than the journaled one at its seq), or the program,
    /// catalog, policy or limits changed since the run paused; the message
    /// names both sides. When refused before replaying, the run stays
    /// paused.
    Divergence,
    /// The run id cannot be resumed: unknown, already ended, being resumed
    /// by another process, or interrupted. Final: asking again gives the
    /// same answer. `codemode resume` exits 5.
    NotResumable,
    /// The request itself was wrong (a resume deciding a call that is not
    /// pending); nothing ran. `codemode` exits 2.
    Invocation,
}

/// The error of a run that did not complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunError {
    /// Which kind of failure.
    pub kind: ErrorKind,
    /// A human-readable message, e.g. `TypeError: x is not a function`.
    pub message: String,
    /// 1-based line in the user's program source, when known.
    pub line: Option<u32>,
    /// 1-based column in the user's program source, when known.
    pub column: Option<u32>,
    /// The JS stack trace, when there is one.
    pub stack: Option<String>,
}

impl RunError {
    /// An error with no source position.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RunError { kind, message: message.into(), line: None, column: None, stack: None }
    }

    /// The error without its stack, for a short result (a batch line, a
    /// served answer): `{kind, message}`, with `line` and `column` when
    /// the position is known.
    pub fn brief(&self) -> serde_json::Value {
        let mut brief = serde_json::json!({"kind": self.kind, "message": self.message});
        if let Some(line) = self.line {
            brief["line"] = line.into();
        }
        if let Some(column) = self.column {
            brief["column"] = column.into();
        }
        brief
    }
}

/// How the gate decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Allowed without asking anyone.
    Auto,
    /// Allowed by an approver.
    Approved,
    /// Refused by an approver.
    Denied,
    /// Refused by policy before any approver was asked.
    Refused,
    /// Still waiting for its approver when the run ended (deadline,
    /// cancel): never allowed, never run. Its status is `in_flight`.
    Pending,
}

impl Decision {
    /// The lower-case name used in the receipt JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Auto => "auto",
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::Refused => "refused",
            Decision::Pending => "pending",
        }
    }
}

/// Where a call stands, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallStatus {
    /// The tool ran and returned a result.
    Ok,
    /// The tool ran (or started) and failed, or timed out.
    Failed,
    /// The call never ran: the gate refused it or an approver denied it.
    Refused,
    /// The call had not finished when the run ended; it was cancelled and may
    /// have partly run.
    InFlight,
}

impl CallStatus {
    /// The lower-case name used in the receipt JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Failed => "failed",
            CallStatus::Refused => "refused",
            CallStatus::InFlight => "in_flight",
        }
    }
}

/// Who made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Caller {
    /// A program, through `tools.call`.
    Program,
    /// A host or the CLI, outside any program.
    Direct,
}

impl Caller {
    /// The lower-case name used in the receipt JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Caller::Program => "program",
            Caller::Direct => "direct",
        }
    }
}

/// A result or value that is not whole: cut to its bound (the whole is in
/// `spill_path`), or cut by its tool (a window or page that ends before the
/// end, an output tail; `tool_cut` says what was kept and how to get the
/// rest). Every cut of a call's output sets the envelope's `truncated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Truncation {
    /// Size of the whole in bytes (UTF-8 text, or compact JSON); `None`
    /// (`null`) when a tool's cut does not know it (a page of search
    /// entries: the entries after it are counted, not measured).
    pub original_bytes: Option<u64>,
    /// Size of what was kept, in bytes.
    pub kept_bytes: u64,
    /// Absolute path of the file holding every byte, or `null` when writing
    /// it failed (the call's `note` says why) or when the tool cut its own
    /// output (`tool_cut`).
    pub spill_path: Option<String>,
    /// Set when the tool cut its own output: what was kept and how to get
    /// the rest, e.g. `"stdout: its last 16363 of 108894 bytes, from a line
    /// start; ..."`. Absent for a cut at the result bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_cut: Option<String>,
}

impl Truncation {
    /// A tool's cut of its own output: `kept_bytes` of `original_bytes`
    /// (`None` when unknown), `how` saying what was kept and how to get the
    /// rest.
    pub fn by_tool(original_bytes: Option<u64>, kept_bytes: u64, how: impl Into<String>) -> Self {
        Truncation { original_bytes, kept_bytes, spill_path: None, tool_cut: Some(how.into()) }
    }
}

/// One tool call of a run. Created when the call starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallReceipt {
    /// 1-based order in which the program made its calls.
    pub seq: u64,
    /// The tool name as called.
    pub tool: String,
    /// Who made the call.
    pub caller: Caller,
    /// How the gate decided.
    pub decision: Decision,
    /// How the call ended.
    pub status: CallStatus,
    /// Wall time from the call's start to its end (or to the end of the run,
    /// for calls left `in_flight`), in milliseconds with microsecond precision.
    pub elapsed_ms: f64,
    /// Size of the result in bytes (UTF-8 text, or compact JSON); 0 when no
    /// result came back.
    pub bytes: u64,
    /// Set when the result was over the per-call bound.
    pub truncated: Option<Truncation>,
    /// Why the call was refused or failed.
    pub error: Option<String>,
    /// Anything else worth knowing (a rewrite, a cancellation, a call the
    /// program never awaited).
    pub note: Option<String>,
    /// The questions the tool asked the user during the call (MCP
    /// elicitation), in the order asked. Absent from the JSON when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elicitations: Vec<ElicitationRecord>,
    /// `true` when one of those questions was declined or cancelled: the
    /// call may have ended `ok`, but the tool went on without the answer it
    /// asked for, so its result is not a success the user agreed to. Absent
    /// from the JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elicitation_declined: bool,
    /// `true` for a call left `in_flight` when the run ended that had not
    /// started: it was waiting for its approval or queued behind the
    /// in-flight limit, so it did nothing. A call left `in_flight` without
    /// it was running and may have partly run. Absent from the JSON when
    /// false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub never_started: bool,
    /// For a call under a tool's or MCP server's limits (`max_in_flight`,
    /// `rate`; docs/LIMITS.md): the time it waited for a slot before it
    /// started, in milliseconds with microsecond precision. Part of
    /// `elapsed_ms`, and not counted against the call's timeout, which
    /// starts when the call does. Absent from the JSON for a call under no
    /// such limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<f64>,
    /// How many times the tool was called: more than 1 when a `retry`
    /// policy made it again (docs/LIMITS.md, "Retries"). Absent from the
    /// JSON when 1 (or for a call that never ran).
    #[serde(default = "ledger::one", skip_serializing_if = "ledger::at_most_one")]
    pub attempts: u32,
    /// The last progress the tool reported during the call (an MCP
    /// server's `notifications/progress`), and how many it reported.
    /// Absent from the JSON when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<CallProgress>,
}

/// Progress a tool reported during a call: an MCP server's
/// `notifications/progress` (MCP "Progress"), as the server sent it. Each
/// one resets the call's timeout, up to its maximum total (docs/MCP.md,
/// "Progress"); the receipt keeps the last one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallProgress {
    /// How far the work is (the server's `progress`; increases with each
    /// notification, in whatever unit the server counts).
    pub progress: f64,
    /// Out of how much, when the server said (`total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// The server's `message`, when it sent one (cut to 1000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many progress notifications the call received in all.
    #[serde(default)]
    pub count: u64,
}

impl CallProgress {
    /// The longest message kept, in characters.
    pub const MAX_MESSAGE_CHARS: usize = 1000;

    /// One progress report (`count` 1): `progress` of `total`, with
    /// `message` cut to [`CallProgress::MAX_MESSAGE_CHARS`].
    pub fn new(progress: f64, total: Option<f64>, message: Option<String>) -> CallProgress {
        let message = message.map(|m| m.chars().take(Self::MAX_MESSAGE_CHARS).collect());
        CallProgress { progress, total, message, count: 1 }
    }
}

impl CallReceipt {
    /// Whether the call ended `ok` and no question it asked was declined
    /// or cancelled.
    pub fn is_success(&self) -> bool {
        self.status == CallStatus::Ok && !self.elicitation_declined
    }
}

/// One question a tool asked the user during a call (an MCP server's
/// elicitation, MCP 2025-11-25 client/elicitation), and how it was answered.
///
/// The accepted values are not recorded, only their keys: a person may type
/// personal data into a form, and receipts are saved and shown to the model.
/// A URL is recorded without its query and fragment (which may carry a
/// token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitationRecord {
    /// The MCP server that asked.
    pub server: String,
    /// Its message, cut to [`ElicitationRecord::MAX_MESSAGE_CHARS`]
    /// characters (server text, untrusted).
    pub message: String,
    /// `form` or `url`.
    pub mode: String,
    /// URL mode: the page the user was sent to, without query or fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Form mode: the names of the fields asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// `accept`, `decline` or `cancel`: what went back to the server.
    pub action: ElicitationAction,
    /// Form mode, accepted: the keys of the content sent (not its values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_keys: Vec<String>,
    /// Who answered: `allow`, `deny`, `pause`, `prompt`, `cmd:PROGRAM`, a
    /// host approver's name, or `codemode` (a question it could not pass
    /// on, an answer that did not match the form).
    pub answered_by: String,
    /// Why (a decline's cause, "accepted with the form's defaults").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Time spent waiting for the answer, in milliseconds (not counted
    /// against the run's deadline or the call's timeout).
    pub wait_ms: f64,
}

impl ElicitationRecord {
    /// The most characters of a server's message a record keeps.
    pub const MAX_MESSAGE_CHARS: usize = 500;

    /// Whether the question was declined or cancelled.
    pub fn declined(&self) -> bool {
        self.action != ElicitationAction::Accept
    }
}

/// A line the program logged through `console.*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LogEntry {
    /// `log`, `info`, `warn`, `error` or `debug`.
    pub level: String,
    /// The formatted arguments, separated by spaces.
    pub text: String,
}

/// A call waiting on a decision when a run paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call's sequence number.
    pub seq: u64,
    /// The tool name.
    pub tool: String,
    /// The arguments it runs with if allowed (after any hook rewrite).
    pub arguments: Value,
    /// Why it needs a decision (`writer under posture ask`, `ask rule
    /// bash(git push*)`).
    #[serde(default)]
    pub reason: String,
    /// What it acts on (bash's command, a file tool's path), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Absent for a call waiting for an approval; `unknown_outcome` for a
    /// call that was running when the run's process ended (a recovered
    /// run): `--allow` runs it again, `--deny` rejects it in the program
    /// with a ToolError of that kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// Everything a run did: its status, value, error, logs and every call.
///
/// Serialises to the JSON documented in `docs/RECEIPTS.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Receipt {
    /// Always [`RECEIPT_VERSION`].
    pub receipt_version: u32,
    /// Unique id of the run; also the name of its folder of spill files.
    pub run_id: String,
    /// How the run ended.
    pub status: RunStatus,
    /// The program's return value as JSON (`undefined` becomes `null`); a
    /// string prefix of the JSON text when over the return-value bound.
    pub value: Value,
    /// Set when `value` was cut to its bound.
    pub value_truncated: Option<Truncation>,
    /// Set unless the run completed.
    pub error: Option<RunError>,
    /// What the program logged, in order, within the log bound.
    pub logs: Vec<LogEntry>,
    /// How many log lines did not fit the log bound.
    pub logs_dropped: u64,
    /// Every call, in `seq` order.
    pub calls: Vec<CallReceipt>,
    /// Calls waiting on a decision; only present when the run paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingCall>,
    /// The catalog digest (DESIGN.md §6) of the tools the run could call.
    pub catalog_sha256: String,
    /// Wall time of the whole run, in milliseconds.
    pub elapsed_ms: f64,
    /// Time the run spent waiting on approvals (not counted against the
    /// deadline), in milliseconds.
    pub approval_wait_ms: f64,
    /// What the run could not keep or do as asked, one sentence each: a
    /// spill file or the receipt itself that could not be written, the bash
    /// sandbox off or weakened. Absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How the warning begins that a resume's receipt carries when the resume
/// stopped (cancelled, out of time, or on a replay that took another path)
/// while it replayed the journal, before anything new ran: the run is as
/// it was, still paused, and the receipt lists only the calls replayed
/// before the stop ([`Receipt::stopped_in_replay`]).
pub const STOPPED_IN_REPLAY: &str = "the resume stopped while replaying the journal, before anything new ran";

/// How that warning ends when the resume ran out of time while it
/// replayed ([`Receipt::out_of_time_in_replay`]).
pub const OUT_OF_TIME_IN_REPLAY: &str = "; resume it with a longer deadline: the replay needs more time";

impl Receipt {
    /// Whether this is the receipt of a resume that stopped while it
    /// replayed, before anything new ran ([`STOPPED_IN_REPLAY`]): the run
    /// is still paused, and its earlier receipt (every call up to the
    /// pause) is still the one that says what it did, so a host that
    /// saved that one keeps it.
    pub fn stopped_in_replay(&self) -> bool {
        self.status == RunStatus::Paused && self.warnings.iter().any(|w| w.starts_with(STOPPED_IN_REPLAY))
    }

    /// Whether this is the receipt of a resume that ran out of time while
    /// it replayed ([`Receipt::stopped_in_replay`], [`OUT_OF_TIME_IN_REPLAY`]):
    /// the same deadline would stop the next resume the same way.
    pub fn out_of_time_in_replay(&self) -> bool {
        self.status == RunStatus::Paused
            && self
                .warnings
                .iter()
                .any(|w| w.starts_with(STOPPED_IN_REPLAY) && w.ends_with(OUT_OF_TIME_IN_REPLAY))
    }

    /// The calls that did not end `ok`, and those that did but had a
    /// question they asked declined or cancelled
    /// ([`CallReceipt::elicitation_declined`]).
    pub fn problem_calls(&self) -> impl Iterator<Item = &CallReceipt> {
        self.calls.iter().filter(|c| !c.is_success())
    }

    /// Serialises the receipt as compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a receipt always serialises")
    }

    /// Serialises the receipt as indented JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a receipt always serialises")
    }
}

/// Rounds a duration to milliseconds with microsecond precision.
pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_names_are_the_json_names() {
        let json = |v: serde_json::Value| v.as_str().unwrap().to_owned();
        for s in [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::TimedOut,
            RunStatus::Paused,
            RunStatus::Cancelled,
        ] {
            assert_eq!(s.as_str(), json(serde_json::to_value(s).unwrap()));
        }
        for d in [Decision::Auto, Decision::Approved, Decision::Denied, Decision::Refused, Decision::Pending]
        {
            assert_eq!(d.as_str(), json(serde_json::to_value(d).unwrap()));
        }
        for s in [CallStatus::Ok, CallStatus::Failed, CallStatus::Refused, CallStatus::InFlight] {
            assert_eq!(s.as_str(), json(serde_json::to_value(s).unwrap()));
        }
        for c in [Caller::Program, Caller::Direct] {
            assert_eq!(c.as_str(), json(serde_json::to_value(c).unwrap()));
        }
    }
}
