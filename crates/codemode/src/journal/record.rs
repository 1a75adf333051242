//! The journal's records: one JSON object per line, `t` naming the kind
//! (docs/JOURNAL.md lists them). Every line starts with `{"t":"<kind>"`,
//! so a reader knows the kind before parsing the rest.
//!
//! The lines written for every call (`call`, `done`) are built by hand from
//! text the run already has (the arguments' JSON as the program made it,
//! the result's JSON as the program got it), so journaling a call costs a
//! copy, not a parse; results are embedded as written, byte for byte, so a
//! replay hands the program exactly what it got.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::completion::Completion;
use crate::receipt::ledger::CallEnd;
use crate::receipt::{CallStatus, Caller, Decision};

/// The version of the journal format; a journal of another version is
/// refused on resume.
pub const JOURNAL_VERSION: u32 = 1;

/// The first line of every journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Header {
    pub t: String,
    pub journal_version: u32,
    pub run_id: String,
    /// RFC 3339 UTC, to the second.
    pub started_at: String,
    /// Milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    pub codemode_version: String,
    /// The workspace the run started in (informational).
    pub workspace: String,
    pub program: ProgramRecord,
    pub catalog_sha256: String,
    /// The MCP servers whose tools the catalog held when the run started
    /// (a resume leaves out of its own digest the servers listed since).
    /// Absent in journals written before it was kept: the whole catalog
    /// is compared then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_servers: Option<Vec<String>>,
    pub policy_sha256: String,
    /// The canonical policy the digest is over (to say what changed).
    pub policy: serde_json::Value,
    /// The limits, as a JSON object of numbers.
    pub limits: serde_json::Value,
}

/// The program a journal is of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProgramRecord {
    /// Its name in stack traces (a `.ts` name makes it TypeScript).
    pub name: String,
    /// SHA-256 of its source, lower-case hex.
    pub sha256: String,
    /// The source itself: a resume re-runs exactly this.
    pub source: String,
    /// The file it was read from, when it was (a resume refuses to go on
    /// when that file has changed since).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The program's input (`Program::with_input`, a batch line), when it
    /// had one: a resume hands the program this value again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
}

/// How a call's result reached the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum How {
    /// Returned from `tools.call` itself (refused, or answered at once).
    Inline,
    /// Settled later, in this position among the settles.
    Settled,
    /// Finished after the run began to pause: never handed to the program.
    Unsettled,
}

/// `{"t":"call"}`: the program asked for a call.
#[derive(Debug, Deserialize)]
pub(crate) struct CallRecord {
    pub seq: u64,
    pub tool: String,
    pub caller: Caller,
    /// The arguments' JSON text as the program made it (`null` when it
    /// was not JSON: the call was refused for it).
    pub args: Box<RawValue>,
    /// The arguments' text when it was not JSON.
    #[serde(default)]
    pub args_text: Option<String>,
    /// SHA-256 (hex) of the arguments' text when it was over
    /// [`CALL_TEXT_BYTES`]: the line then holds this digest and
    /// `args_bytes` instead of the text, so the journal grows per call,
    /// not per payload.
    #[serde(default)]
    pub args_sha256: Option<String>,
    /// The arguments' size in bytes, with `args_sha256`.
    #[serde(default)]
    pub args_bytes: Option<u64>,
    /// SHA-256 (hex) of the tool name when it was over [`CALL_TEXT_BYTES`]
    /// (`tool` then holds a cut prefix).
    #[serde(default)]
    pub tool_sha256: Option<String>,
}

/// Arguments' text or tool names longer than this (bytes) are journaled as
/// a SHA-256 digest and a size: enough to tell whether a resumed program
/// made the same call, and a refused 1 MiB argument costs one short line.
/// A paused call's arguments are kept whole in its `pending` line (they
/// are what a person decides on).
pub(crate) const CALL_TEXT_BYTES: usize = 4 << 10;

impl CallRecord {
    /// Whether the program asked for the same call: same tool, caller and
    /// arguments' text.
    pub(crate) fn same(&self, tool: &str, caller: Caller, args_json: &str) -> bool {
        let same_tool = match &self.tool_sha256 {
            Some(digest) => *digest == super::digest::sha256_hex(tool.as_bytes()),
            None => self.tool == tool,
        };
        same_tool
            && self.caller == caller
            && match (&self.args_sha256, &self.args_text) {
                (Some(digest), _) => *digest == super::digest::sha256_hex(args_json.as_bytes()),
                (None, Some(text)) => text == args_json,
                (None, None) => self.args.get() == args_json,
            }
    }

    /// The arguments as the program wrote them, or, for arguments
    /// journaled as a digest, their size and digest.
    pub(crate) fn args_shown(&self) -> std::borrow::Cow<'_, str> {
        match (&self.args_sha256, &self.args_text) {
            (Some(digest), _) => std::borrow::Cow::Owned(format!(
                "arguments of {} bytes (sha256 {digest})",
                self.args_bytes.unwrap_or_default()
            )),
            (None, Some(text)) => std::borrow::Cow::Borrowed(text),
            (None, None) => std::borrow::Cow::Borrowed(self.args.get()),
        }
    }
}

/// `{"t":"done"}`: a call ended.
#[derive(Debug, Deserialize)]
pub(crate) struct DoneRecord {
    pub seq: u64,
    pub how: How,
    pub ok: bool,
    pub end: CallEnd,
    /// The envelope or error JSON the program got, as written.
    pub payload: Box<RawValue>,
    /// Text content, passed apart from the envelope.
    #[serde(default)]
    pub text: Option<String>,
}

impl DoneRecord {
    /// The completion to hand the program again.
    pub(crate) fn completion(&self) -> Completion {
        Completion {
            seq: self.seq,
            end: self.end.clone(),
            ok: self.ok,
            payload: self.payload.get().to_owned(),
            text: self.text.clone(),
            pause: None,
            journaled: false,
        }
    }
}

/// `{"t":"pending"}`: a call that needs a decision; the run paused on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PendingRecord {
    pub seq: u64,
    pub tool: String,
    /// The arguments the call runs with when allowed (after any hook
    /// rewrite).
    pub args: serde_json::Value,
    /// Why it needs a decision.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Notes from the gate so far (hook rewrites).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The object the decision binds to, for a call that acts on a path:
    /// an allow on resume runs the call only while its path still resolves
    /// to it. Absent in older journals and for calls without a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<BoundObject>,
    /// Why it waits: absent for an approval (the approver paused it),
    /// [`UNKNOWN_OUTCOME`] for a call in flight when the run's process
    /// ended (a recovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Not journaled: why the file `bound` names is not what it was at
    /// the pause, found when the resume started, before any call ran
    /// (`journal::files_seen::bound_changed`); an allow then refuses
    /// the call.
    #[serde(skip)]
    pub changed_since_pause: Option<String>,
}

/// What a call's path resolved to when a person was asked about it: an
/// approval holds for this object alone (docs/SECURITY.md, "A decision
/// binds to what the person saw").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BoundObject {
    /// The path the call acts on, links followed through the deepest
    /// existing folder, relative to the workspace when inside it, else
    /// absolute (lossy UTF-8 for other bytes).
    pub path: String,
    /// The deepest folder on the way that existed, canonical: the one the
    /// call's file is in, or the one its missing folders are made in.
    pub folder: String,
    /// That folder's device and inode numbers (Unix), so a folder renamed
    /// into its place is told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<(u64, u64)>,
    /// What the file at `path` was when the run paused on the call, as
    /// [`crate::trust::pin_digest`] gives it (the SHA-256 of its bytes,
    /// `missing`, `link:<target>`, `not a file`): an allow on resume runs
    /// the call only while it is still that, since the run made the call
    /// from what it read before the pause. Absent while a run is live
    /// (the same run checks the path, not the bytes) and in journals of
    /// earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl PendingRecord {
    /// The entry of a paused receipt's `pending`.
    pub(crate) fn to_pending_call(&self) -> crate::receipt::PendingCall {
        crate::receipt::PendingCall {
            seq: self.seq,
            tool: self.tool.clone(),
            arguments: self.args.clone(),
            reason: self.reason.clone(),
            subject: self.subject.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// `{"t":"decision"}`: a pending call decided on resume.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DecisionRecord {
    pub seq: u64,
    pub allow: bool,
    #[serde(default)]
    pub reason: Option<String>,
    pub at: String,
    /// Who decided, when not the resume's caller: `person` for a decision
    /// recorded with `codemode approve` ([`ApprovalRecord`]). Absent in
    /// older journals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// What an [`ApprovalRecord`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalDecision {
    Allow,
    Deny,
}

/// `{"t":"approval"}`: a person's decision for a pending call of a paused
/// run, recorded with `codemode approve` without running anything; the
/// next resume applies it (and writes its `decision` line). It stands
/// until then: a `decision`, a `done` or a new `pending` line for the same
/// seq closes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApprovalRecord {
    pub seq: u64,
    pub decision: ApprovalDecision,
    /// Why, as the person said: for a denial shown to the program and in
    /// the receipt's error; for an allow in the receipt's note of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided: `person`.
    pub by: String,
    /// When (RFC 3339 UTC).
    pub at: String,
}

/// The `by` of a decision a person recorded with `codemode approve`.
pub(crate) const BY_PERSON: &str = "person";

/// `{"t":"now"}`: `n` reads of the clock in a row gave `v` (milliseconds
/// since the Unix epoch).
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct NowRecord {
    pub v: f64,
    pub n: u64,
}

/// `{"t":"seed"}`: the seed of `Math.random`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct SeedRecord {
    pub v: [u32; 4],
}

/// `{"t":"settle"}`: a result journaled `unsettled` was handed to the
/// program (on a resume), in this position among the settles.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct SettleRecord {
    pub seq: u64,
}

/// `{"t":"paused"}`: the run paused; times so far.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PausedRecord {
    /// Milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// Wall time of the run so far, pauses included, in ms.
    pub elapsed_ms: f64,
    /// Time spent waiting on approvals so far (pauses included), in ms.
    pub approval_wait_ms: f64,
    /// The digest of the catalog when the run paused (it grows when an MCP
    /// server is first listed during the run); a resume compares its own
    /// catalog with it. Absent in journals written before it was kept (the
    /// header's digest is compared then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_sha256: Option<String>,
    /// The MCP servers whose tools the catalog held when the run paused
    /// (as the header's `catalog_servers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_servers: Option<Vec<String>>,
    /// The files the run's calls named by path so far (relative to the
    /// workspace when inside it), each with what it held at the pause
    /// (`journal::files_seen`): a resume refuses a call that would change
    /// one changed since. Absent in older journals.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<String, String>,
    /// Files a resume found changed since an earlier pause: still refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_files: Vec<String>,
}

/// The kind of a journal line: the text of its `t`.
pub(crate) fn kind(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("{\"t\":\"")?;
    rest.split('"').next()
}

/// Appends `value` to `out` as a JSON string.
fn push_json_string(out: &mut String, value: &str) {
    // Most strings (tool names, notes) need no escape: copied as they are.
    if !value.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(value.len() + 2);
        out.push('"');
        out.push_str(value);
        out.push('"');
        return;
    }
    // Writing to a String cannot fail.
    let _ = serde_json::to_writer(string_writer(out), value);
}

/// A `std::io::Write` over a `String`, for serde_json, which writes UTF-8.
fn string_writer(out: &mut String) -> impl std::io::Write + '_ {
    struct W<'a>(&'a mut String);
    impl std::io::Write for W<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            // serde_json writes whole UTF-8 sequences of a &str it escapes.
            match std::str::from_utf8(buf) {
                Ok(s) => {
                    self.0.push_str(s);
                    Ok(buf.len())
                }
                Err(_) => Err(std::io::Error::other("not UTF-8")),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    W(out)
}

fn caller_name(caller: Caller) -> &'static str {
    match caller {
        Caller::Program => "program",
        Caller::Direct => "direct",
    }
}

/// `{"t":"call"}` for call `seq`; `args_json` is the program's JSON text.
#[cfg(test)]
pub(crate) fn call_line(seq: u64, tool: &str, caller: Caller, args_json: &str) -> String {
    let mut line = String::new();
    write_call(&mut line, seq, tool, caller, args_json);
    line
}

/// Appends `{"t":"call"}` for call `seq` to `out`. `args_json` is what the
/// prelude made with `JSON.stringify` (always JSON) and goes in as it is;
/// any other text is written as a string (`args_text`).
pub(crate) fn write_call(out: &mut String, seq: u64, tool: &str, caller: Caller, args_json: &str) {
    out.push_str("{\"t\":\"call\",\"seq\":");
    push_u64(out, seq);
    out.push_str(",\"tool\":");
    if tool.len() > CALL_TEXT_BYTES {
        push_json_string(out, crate::receipt::spill::utf8_prefix(tool, CALL_TEXT_BYTES));
        out.push_str(",\"tool_sha256\":\"");
        out.push_str(&super::digest::sha256_hex(tool.as_bytes()));
        out.push('"');
    } else {
        push_json_string(out, tool);
    }
    out.push_str(",\"caller\":\"");
    out.push_str(caller_name(caller));
    if args_json.len() > CALL_TEXT_BYTES {
        out.push_str("\",\"args\":null,\"args_bytes\":");
        push_u64(out, args_json.len() as u64);
        out.push_str(",\"args_sha256\":\"");
        out.push_str(&super::digest::sha256_hex(args_json.as_bytes()));
        out.push('"');
    } else if looks_like_json(args_json) {
        out.push_str("\",\"args\":");
        out.push_str(args_json);
    } else {
        out.push_str("\",\"args\":null,\"args_text\":");
        push_json_string(out, args_json);
    }
    out.push('}');
}

/// Appends `n` in decimal (a journal line is written for every call:
/// `write!` cost a call more than the rest of its line).
fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Whether `text` is JSON as `JSON.stringify` writes it: one value, no
/// line breaks. An object or array is trusted to be what the prelude made
/// (checking costs a parse per call); anything else is checked.
fn looks_like_json(text: &str) -> bool {
    let (first, last) = (text.as_bytes().first(), text.as_bytes().last());
    let bracketed = matches!((first, last), (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']')));
    !text.contains('\n') && (bracketed || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
}

/// `{"t":"done"}` for `completion`.
#[cfg(test)]
pub(crate) fn done_line(how: How, completion: &Completion) -> String {
    let mut line = String::new();
    write_done(&mut line, how, completion);
    line
}

/// Appends `{"t":"done"}` for `completion` to `out`.
pub(crate) fn write_done(out: &mut String, how: How, completion: &Completion) {
    let end = &completion.end;
    out.push_str("{\"t\":\"done\",\"seq\":");
    push_u64(out, completion.seq);
    out.push_str(match how {
        How::Inline => ",\"how\":\"inline\",\"ok\":",
        How::Settled => ",\"how\":\"settled\",\"ok\":",
        How::Unsettled => ",\"how\":\"unsettled\",\"ok\":",
    });
    out.push_str(if completion.ok { "true" } else { "false" });
    out.push_str(",\"end\":{\"status\":\"");
    out.push_str(status_name(end.status));
    out.push_str("\",\"decision\":\"");
    out.push_str(decision_name(end.decision));
    out.push_str("\",\"elapsed_ms\":");
    // Milliseconds with microsecond precision, as the receipt has them,
    // written from integers (cheaper than formatting a float).
    let micros = end
        .elapsed
        .as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(end.elapsed.subsec_micros()));
    push_u64(out, micros / 1000);
    let frac = micros % 1000;
    out.push('.');
    for digit in [frac / 100, frac / 10 % 10, frac % 10] {
        out.push(char::from(b'0' + digit as u8));
    }
    out.push_str(",\"bytes\":");
    push_u64(out, end.bytes);
    if let Some(t) = &end.truncated {
        out.push_str(",\"truncated\":");
        out.push_str(&serde_json::to_string(t).expect("a truncation serialises"));
    }
    if let Some(e) = &end.error {
        out.push_str(",\"error\":");
        push_json_string(out, e);
    }
    if let Some(n) = &end.note {
        out.push_str(",\"note\":");
        push_json_string(out, n);
    }
    if !end.elicitations.is_empty() {
        out.push_str(",\"elicitations\":");
        out.push_str(&serde_json::to_string(&end.elicitations).expect("records serialise"));
    }
    if let Some(queued) = end.queued {
        out.push_str(",\"queued_ms\":");
        out.push_str(&serde_json::to_string(&crate::receipt::millis(queued)).expect("a number serialises"));
    }
    if end.attempts > 1 {
        out.push_str(",\"attempts\":");
        push_u64(out, u64::from(end.attempts));
    }
    if let Some(p) = &end.progress {
        out.push_str(",\"progress\":");
        out.push_str(&serde_json::to_string(p).expect("a progress record serialises"));
    }
    out.push_str("},\"payload\":");
    out.push_str(&completion.payload);
    if let Some(text) = &completion.text {
        out.push_str(",\"text\":");
        push_json_string(out, text);
    }
    out.push('}');
}

fn status_name(status: CallStatus) -> &'static str {
    match status {
        CallStatus::Ok => "ok",
        CallStatus::Failed => "failed",
        CallStatus::Refused => "refused",
        CallStatus::InFlight => "in_flight",
    }
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Auto => "auto",
        Decision::Approved => "approved",
        Decision::Denied => "denied",
        Decision::Refused => "refused",
        Decision::Pending => "pending",
    }
}

/// The `resumed` line: a resume took the run on at `at` (RFC 3339, UTC).
pub(crate) fn resumed_line(at: &str) -> String {
    format!("{{\"t\":\"resumed\",\"at\":\"{at}\"}}")
}

/// `{"t":"start"}`: call `seq`, which may change something, starts now
/// (made durable before it does).
pub(crate) fn start_line(seq: u64) -> String {
    format!("{{\"t\":\"start\",\"seq\":{seq}}}")
}

/// `{"t":"start"}`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct StartRecord {
    pub seq: u64,
}

/// The `kind` of a `pending` line for a call whose outcome is unknown: it
/// was started (its `start` line is in the journal) when the run's process
/// ended, and no `done` line followed.
pub(crate) const UNKNOWN_OUTCOME: &str = "unknown_outcome";

/// `{"t":"settle"}`.
pub(crate) fn settle_line(seq: u64) -> String {
    format!("{{\"t\":\"settle\",\"seq\":{seq}}}")
}

/// `{"t":"now"}`.
pub(crate) fn now_line(value: f64, count: u64) -> String {
    format!("{{\"t\":\"now\",\"v\":{value},\"n\":{count}}}")
}

/// `{"t":"seed"}`.
pub(crate) fn seed_line(seed: [u32; 4]) -> String {
    format!("{{\"t\":\"seed\",\"v\":[{},{},{},{}]}}", seed[0], seed[1], seed[2], seed[3])
}

/// A record with serde fields after its `t`.
pub(crate) fn tagged_line(kind: &str, record: &impl Serialize) -> String {
    let body = serde_json::to_string(record).expect("journal records serialise");
    let rest = body.strip_prefix('{').unwrap_or(&body);
    if rest == "}" { format!("{{\"t\":\"{kind}\"}}") } else { format!("{{\"t\":\"{kind}\",{rest}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn completion(text: Option<&str>) -> Completion {
        Completion {
            seq: 3,
            end: CallEnd {
                status: CallStatus::Ok,
                decision: Decision::Approved,
                elapsed: Duration::from_micros(1500),
                bytes: 12,
                truncated: None,
                error: None,
                note: Some("approved: yes".into()),
                elicitations: Vec::new(),
                queued: None,
                attempts: 1,
                progress: None,
            },
            ok: true,
            payload: r#"{"content":{"b":1,"a":[2]},"metadata":null,"truncated":null}"#.into(),
            text: text.map(str::to_owned),
            pause: None,
            journaled: false,
        }
    }

    #[test]
    fn a_done_line_gives_back_the_payload_byte_for_byte() {
        for text in [None, Some("line\n\"quoted\"\u{2028}")] {
            let c = completion(text);
            let line = done_line(How::Settled, &c);
            assert_eq!(kind(&line), Some("done"));
            assert!(!line.contains('\n'), "one line: {line}");
            let back: DoneRecord = serde_json::from_str(&line).unwrap();
            let again = back.completion();
            // Key order kept (b before a): the program sees what it saw.
            assert_eq!(again.payload, c.payload);
            assert_eq!(again.text, c.text);
            assert_eq!(again.end.decision, Decision::Approved);
            assert_eq!(again.end.elapsed, Duration::from_micros(1500));
            assert_eq!(back.how, How::Settled);
        }
    }

    /// The fast writer and the serde type agree on every status, every
    /// decision and every optional field: what is written is read back
    /// whole, and serde's own writing of the record reads the same.
    #[test]
    fn every_status_decision_and_field_of_a_call_end_round_trips() {
        use crate::receipt::{ElicitationAction, ElicitationRecord, Truncation};
        let statuses = [CallStatus::Ok, CallStatus::Failed, CallStatus::Refused, CallStatus::InFlight];
        let decisions =
            [Decision::Auto, Decision::Approved, Decision::Denied, Decision::Refused, Decision::Pending];
        let full = CallEnd {
            status: CallStatus::Ok,
            decision: Decision::Auto,
            elapsed: Duration::from_micros(62_000_005),
            bytes: u64::MAX,
            truncated: Some(Truncation {
                original_bytes: Some(300_000),
                kept_bytes: 102_400,
                spill_path: Some("/ws/.codemode/runs/r/call-1.json".into()),
                tool_cut: Some("stdout: its last 10 bytes".into()),
            }),
            error: Some("failed: \"quoted\"\nand\u{2028}more".into()),
            note: Some("approved: yes".into()),
            elicitations: vec![ElicitationRecord {
                server: "s".into(),
                message: "Which one?".into(),
                mode: "form".into(),
                url: Some("https://example.test/page".into()),
                fields: vec!["name".into()],
                action: ElicitationAction::Accept,
                content_keys: vec!["name".into()],
                answered_by: "allow".into(),
                reason: Some("defaults".into()),
                wait_ms: 1.5,
            }],
            queued: Some(std::time::Duration::from_micros(2_500)),
            attempts: 3,
            progress: Some(crate::receipt::CallProgress::new(3.0, Some(8.0), Some("step \"3\"".into()))),
        };
        let bare = CallEnd {
            truncated: None,
            error: None,
            note: None,
            elicitations: Vec::new(),
            queued: None,
            attempts: 1,
            progress: None,
            ..full.clone()
        };
        for (status, decision) in statuses.iter().flat_map(|s| decisions.iter().map(move |d| (*s, *d))) {
            for base in [&full, &bare] {
                let end = CallEnd { status, decision, ..base.clone() };
                let mut c = completion(Some("text"));
                c.end = end.clone();
                let line = done_line(How::Unsettled, &c);
                let back: DoneRecord = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
                assert_eq!(back.end, end, "{line}");
                assert_eq!((back.seq, back.ok, back.how), (c.seq, c.ok, How::Unsettled));
                // serde writes the same record the fast writer does.
                let by_serde: serde_json::Value = serde_json::to_value(&end).unwrap();
                let by_hand: serde_json::Value =
                    serde_json::from_str::<serde_json::Value>(&line).unwrap()["end"].clone();
                assert_eq!(by_serde, by_hand, "{line}");
            }
        }
    }

    #[test]
    fn a_done_line_writes_its_numbers_exactly() {
        let mut c = completion(None);
        for (micros, shown) in [(0, "0.000"), (1500, "1.500"), (62_000_005, "62000.005"), (999, "0.999")] {
            c.end.elapsed = Duration::from_micros(micros);
            c.seq = u64::MAX;
            c.end.bytes = 1_234_567;
            let line = done_line(How::Inline, &c);
            let expected = format!(
                r#"{{"t":"done","seq":18446744073709551615,"how":"inline","ok":true,"end":{{"status":"ok","decision":"approved","elapsed_ms":{shown},"bytes":1234567,"note":"approved: yes"}},"payload":{}}}"#,
                c.payload
            );
            assert_eq!(line, expected);
        }
        let line = call_line(12, "read", Caller::Program, r#"{"path":"a"}"#);
        assert_eq!(line, r#"{"t":"call","seq":12,"tool":"read","caller":"program","args":{"path":"a"}}"#);
    }

    #[test]
    fn a_call_line_keeps_the_arguments_text() {
        let line = call_line(7, "mcp__x__y\"z", Caller::Program, r#"{"z":1,"a":"\n"}"#);
        let back: CallRecord = serde_json::from_str(&line).unwrap();
        assert_eq!((back.seq, back.tool.as_str(), back.caller), (7, "mcp__x__y\"z", Caller::Program));
        assert_eq!(back.args.get(), r#"{"z":1,"a":"\n"}"#);
        assert!(back.same("mcp__x__y\"z", Caller::Program, r#"{"z":1,"a":"\n"}"#));
        assert!(!back.same("mcp__x__y\"z", Caller::Program, r#"{"a":"\n","z":1}"#));
        let bad = call_line(1, "read", Caller::Program, "{not json");
        let back: CallRecord = serde_json::from_str(&bad).unwrap();
        assert!(back.same("read", Caller::Program, "{not json"));
    }

    #[test]
    fn long_arguments_and_names_are_journaled_as_a_digest_that_replay_still_compares() {
        let args = format!(r#"{{"q":"{}"}}"#, "x".repeat(1 << 20));
        let name = "n".repeat(500_000);
        let line = call_line(2, &name, Caller::Program, &args);
        assert!(line.len() < 3 * CALL_TEXT_BYTES, "a call line of {} bytes", line.len());
        let back: CallRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back.args_bytes, Some(args.len() as u64));
        assert!(back.same(&name, Caller::Program, &args));
        let other = format!(r#"{{"q":"{}y"}}"#, "x".repeat(1 << 20));
        assert!(!back.same(&name, Caller::Program, &other));
        assert!(!back.same(&format!("{name}m"), Caller::Program, &args));
        assert!(back.args_shown().contains(&format!("{} bytes", args.len())));
    }

    #[test]
    fn status_and_decision_names_are_the_receipts() {
        for s in [CallStatus::Ok, CallStatus::Failed, CallStatus::Refused, CallStatus::InFlight] {
            assert_eq!(serde_json::to_value(s).unwrap(), status_name(s));
        }
        for d in [Decision::Auto, Decision::Approved, Decision::Denied, Decision::Refused, Decision::Pending]
        {
            assert_eq!(serde_json::to_value(d).unwrap(), decision_name(d));
        }
    }

    #[test]
    fn tagged_lines_start_with_their_kind() {
        let p = PausedRecord {
            at_unix_ms: 5,
            elapsed_ms: 1.5,
            approval_wait_ms: 0.0,
            catalog_sha256: None,
            catalog_servers: None,
            files: Default::default(),
            changed_files: Vec::new(),
        };
        let line = tagged_line("paused", &p);
        assert_eq!(kind(&line), Some("paused"));
        let back: PausedRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back.at_unix_ms, 5);
        assert_eq!(kind(&now_line(1.0, 2)), Some("now"));
        assert_eq!(kind(&seed_line([1, 2, 3, 4])), Some("seed"));
        assert_eq!(kind(&settle_line(1)), Some("settle"));
    }
}
