//! The ledger: one run's receipt while the run is going on.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{
    CallReceipt, CallStatus, Caller, Decision, LogEntry, Receipt, RunError, RunStatus, Truncation, millis,
    spill::{cut_owned, cut_text, utf8_prefix},
};

/// How a finished call ended: what [`Ledger::finish`] writes into the
/// call's receipt, and the `end` object of the journal's `done` line
/// (docs/JOURNAL.md), one type for both. The journal's fast writer
/// (`journal::record::write_done`) writes the same fields by hand; a test
/// there reads every status and decision back into this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CallEnd {
    pub status: CallStatus,
    /// How the gate decided, which its later steps may only settle at the
    /// end.
    pub decision: Decision,
    /// Wall time of the call, measured where it ran; in JSON
    /// `elapsed_ms`, milliseconds with microsecond precision.
    #[serde(rename = "elapsed_ms", with = "elapsed_ms")]
    pub elapsed: std::time::Duration,
    /// Bytes of the result.
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The questions the tool asked the user during the call, so a resumed
    /// run's receipt still has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elicitations: Vec<super::ElicitationRecord>,
    /// The time the call waited for a slot of a tool's or server's limits
    /// (docs/LIMITS.md); `None` for a call under no such limit. In JSON
    /// `queued_ms`, absent when `None`.
    #[serde(rename = "queued_ms", default, skip_serializing_if = "Option::is_none", with = "queued_ms")]
    pub queued: Option<std::time::Duration>,
    /// How many times the tool was called (retries, docs/LIMITS.md);
    /// absent from the JSON when 1 or fewer.
    #[serde(default = "one", skip_serializing_if = "at_most_one")]
    pub attempts: u32,
    /// The last progress the tool reported, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<super::CallProgress>,
}

/// The `attempts` of a call end without one: 1.
pub(crate) fn one() -> u32 {
    1
}

/// Whether `attempts` is left out of the JSON.
pub(crate) fn at_most_one(attempts: &u32) -> bool {
    *attempts <= 1
}

/// A duration as milliseconds with microsecond precision (a JSON number).
mod elapsed_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_micros() as f64 / 1000.0)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        // Microseconds, rounded: the text has three decimals.
        Ok(Duration::from_micros((ms.max(0.0) * 1000.0).round() as u64))
    }
}

/// An optional duration as milliseconds with microsecond precision.
mod queued_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::elapsed_ms::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let ms = Option::<f64>::deserialize(d)?;
        Ok(ms.map(|ms| Duration::from_micros((ms.max(0.0) * 1000.0).round() as u64)))
    }
}

/// Records calls and logs of one run, within the log bound.
#[derive(Debug)]
pub(crate) struct Ledger {
    calls: Vec<CallReceipt>,
    started: Vec<Instant>,
    logs: Vec<LogEntry>,
    log_bytes: usize,
    logs_dropped: u64,
    /// The calls (by seq) already ended `in_flight` by an abandon.
    abandoned: Vec<u64>,
    max_log_lines: usize,
    max_log_bytes: usize,
    /// Told of each call as it ends ([`RunOptions::on_call_end`](crate::engine::RunOptions::on_call_end)).
    on_call_end: Observer,
    /// Told of each call as it opens ([`CallOpenObserver`]).
    on_call_open: OpenObserver,
}

/// The optional [`CallOpenObserver`] of a ledger.
#[derive(Default)]
struct OpenObserver(Option<CallOpenObserver>);

impl std::fmt::Debug for OpenObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "OpenObserver(Some)" } else { "OpenObserver(None)" })
    }
}

/// The optional [`CallEndObserver`] of a ledger.
#[derive(Default)]
struct Observer(Option<CallEndObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Observer(Some)" } else { "Observer(None)" })
    }
}

/// A function told of each call of a run as its receipt opens, with its
/// `seq` and the gate's decision so far (a traced run's record of when
/// each call started: telemetry/mod.rs).
pub(crate) type CallOpenObserver = std::sync::Arc<dyn Fn(u64, Decision) + Send + Sync>;

/// A function told of each call of a run as it ends, with its receipt.
pub type CallEndObserver = std::sync::Arc<dyn Fn(&CallReceipt) + Send + Sync>;

impl Ledger {
    pub(crate) fn new(max_log_lines: usize, max_log_bytes: usize) -> Self {
        Ledger {
            calls: Vec::new(),
            started: Vec::new(),
            logs: Vec::new(),
            log_bytes: 0,
            logs_dropped: 0,
            abandoned: Vec::new(),
            max_log_lines,
            max_log_bytes,
            on_call_end: Observer(None),
            on_call_open: OpenObserver(None),
        }
    }

    /// This ledger tells `observer` of each call as it opens.
    pub(crate) fn on_open(self, observer: Option<CallOpenObserver>) -> Self {
        Ledger { on_call_open: OpenObserver(observer), ..self }
    }

    /// This ledger tells `observer` of each call as it ends.
    pub(crate) fn observed(self, observer: Option<CallEndObserver>) -> Self {
        Ledger { on_call_end: Observer(observer), ..self }
    }

    /// How many calls the run has made so far (refused ones included).
    pub(crate) fn calls_made(&self) -> usize {
        self.calls.len()
    }

    /// Opens the receipt of a call the gate has decided; returns its seq.
    /// A refused call is closed at once with `error`. The name and the
    /// error are cut to [`TEXT_BYTES`](super::spill::TEXT_BYTES) each, so
    /// a call's entry stays small whatever the program passed.
    pub(crate) fn open(
        &mut self,
        tool: &str,
        caller: Caller,
        decision: Decision,
        error: Option<String>,
    ) -> u64 {
        let seq = self.calls.len() as u64 + 1;
        let status = match decision {
            Decision::Refused | Decision::Denied => CallStatus::Refused,
            Decision::Auto | Decision::Approved | Decision::Pending => CallStatus::InFlight,
        };
        self.calls.push(CallReceipt {
            seq,
            tool: cut_text(tool).into_owned(),
            caller,
            decision,
            status,
            elapsed_ms: 0.0,
            bytes: 0,
            truncated: None,
            error: error.map(cut_owned),
            note: None,
            elicitations: Vec::new(),
            elicitation_declined: false,
            never_started: false,
            queued_ms: None,
            attempts: 1,
            progress: None,
        });
        self.started.push(Instant::now());
        if let Some(observer) = &self.on_call_open.0 {
            observer(seq, decision);
        }
        seq
    }

    /// Closes the receipt of call `seq`; its error and note are cut to
    /// [`TEXT_BYTES`](super::spill::TEXT_BYTES) each.
    pub(crate) fn finish(&mut self, seq: u64, end: CallEnd) {
        let i = (seq - 1) as usize;
        let call = &mut self.calls[i];
        call.elapsed_ms = millis(end.elapsed);
        call.status = end.status;
        call.decision = end.decision;
        call.bytes = end.bytes;
        call.truncated = end.truncated;
        call.error = end.error.map(cut_owned);
        if end.note.is_some() {
            call.note = end.note.map(cut_owned);
        }
        call.elicitation_declined = end.elicitations.iter().any(super::ElicitationRecord::declined);
        call.elicitations = end.elicitations;
        call.queued_ms = end.queued.map(millis);
        call.attempts = end.attempts;
        call.progress = end.progress;
        if let Some(observer) = &self.on_call_end.0 {
            observer(call);
        }
    }

    /// Adds a note to call `seq`, keeping any note it has.
    pub(crate) fn annotate(&mut self, seq: u64, note: &str) {
        let call = &mut self.calls[(seq - 1) as usize];
        call.note = Some(match call.note.take() {
            Some(old) => format!("{old}; {note}"),
            None => note.to_owned(),
        });
    }

    /// How the gate decided call `seq` (so far, for a call still running).
    pub(crate) fn decision_of(&self, seq: u64) -> Decision {
        self.calls[(seq - 1) as usize].decision
    }

    /// The tool name of call `seq`.
    pub(crate) fn tool_of(&self, seq: u64) -> &str {
        &self.calls[(seq - 1) as usize].tool
    }

    /// Records one console line; lines past the bound are counted in
    /// `logs_dropped`, and a line that only partly fits is cut.
    pub(crate) fn log(&mut self, level: &str, text: &str) {
        let room = self.max_log_bytes.saturating_sub(self.log_bytes);
        if self.logs.len() >= self.max_log_lines || room == 0 {
            self.logs_dropped += 1;
            return;
        }
        let text = if text.len() <= room {
            text.to_owned()
        } else {
            // The line is cut at the byte bound, marker included.
            let cut = format!(" [cut at the log bound; {} bytes in all]", text.len());
            let mut kept = utf8_prefix(text, room.saturating_sub(cut.len())).to_owned();
            kept.push_str(&cut);
            kept
        };
        self.log_bytes += text.len();
        self.logs.push(LogEntry { level: level.to_owned(), text });
    }

    /// Ends every call still in flight with `note`, leaving it `in_flight`;
    /// the calls in `awaiting` (by seq) were still waiting for their
    /// approval: their decision becomes `pending`.
    /// The calls in `queued` were waiting for a free in-flight slot: they
    /// never started. `decided` holds the decisions the gate made for
    /// calls it decided only after they started (hooks, approvals): such a
    /// call takes its decision from there, or, with none, it is `pending`
    /// and never ran (its gate had not decided). So a call's decision
    /// always says who decided.
    pub(crate) fn abandon_in_flight(
        &mut self,
        note: &str,
        awaiting: &[u64],
        queued: &[u64],
        decided: &[(u64, Decision)],
    ) {
        self.abandon_in_flight_where(|_| true, note, awaiting, queued, decided);
    }

    /// [`Ledger::abandon_in_flight`] for the calls (by seq) `pick` picks;
    /// a call already abandoned is left as it is.
    pub(crate) fn abandon_in_flight_where(
        &mut self,
        pick: impl Fn(u64) -> bool,
        note: &str,
        awaiting: &[u64],
        queued: &[u64],
        decided: &[(u64, Decision)],
    ) {
        for (i, call) in self.calls.iter_mut().enumerate() {
            if call.status == CallStatus::InFlight && pick(call.seq) && !self.abandoned.contains(&call.seq) {
                self.abandoned.push(call.seq);
                call.elapsed_ms = millis(self.started[i].elapsed());
                let gate_decided = decided.iter().rev().find(|(s, _)| *s == call.seq).map(|(_, d)| *d);
                // A call decided while the run stopped (after `awaiting`
                // was read) takes its decision: it may have started.
                let queued_note = || {
                    format!(
                        "queued behind an in-flight limit or a rate (the run's, its tool's or its server's); \
                         it never started; {note}"
                    )
                };
                let note = if let Some(decision) = gate_decided {
                    call.decision = decision;
                    // Decided, but still waiting for its tool's or server's slots.
                    if queued.contains(&call.seq) {
                        call.never_started = true;
                        queued_note()
                    } else {
                        note.to_owned()
                    }
                } else if awaiting.contains(&call.seq) {
                    call.decision = Decision::Pending;
                    call.never_started = true;
                    format!("waiting for its approval; it never ran; {note}")
                } else if queued.contains(&call.seq) {
                    call.never_started = true;
                    queued_note()
                } else if call.decision == Decision::Pending {
                    call.never_started = true;
                    format!("nobody had decided it yet; it never ran; {note}")
                } else {
                    note.to_owned()
                };
                call.note = Some(match call.note.take() {
                    Some(old) => format!("{old}; {note}"),
                    None => note,
                });
            }
        }
    }

    /// The call receipts, for a direct call that has no run receipt.
    pub(crate) fn into_calls(self) -> Vec<CallReceipt> {
        self.calls
    }

    /// The finished receipt.
    pub(crate) fn into_receipt(self, parts: ReceiptParts) -> Receipt {
        Receipt {
            receipt_version: super::RECEIPT_VERSION,
            run_id: parts.run_id,
            status: parts.status,
            value: parts.value,
            value_truncated: parts.value_truncated,
            error: parts.error,
            logs: self.logs,
            logs_dropped: self.logs_dropped,
            calls: self.calls,
            pending: Vec::new(),
            catalog_sha256: parts.catalog_sha256,
            elapsed_ms: parts.elapsed_ms,
            approval_wait_ms: parts.approval_wait_ms,
            warnings: parts.warnings,
        }
    }
}

/// The run-level fields of a receipt, for [`Ledger::into_receipt`].
#[derive(Debug)]
pub(crate) struct ReceiptParts {
    pub run_id: String,
    pub status: RunStatus,
    pub value: serde_json::Value,
    pub value_truncated: Option<Truncation>,
    pub error: Option<RunError>,
    pub catalog_sha256: String,
    pub elapsed_ms: f64,
    pub approval_wait_ms: f64,
    /// What the run could not keep or do as asked (spill files not
    /// written, the sandbox off).
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abandoned_call_keeps_the_decision_of_whoever_decided_it() {
        let mut ledger = Ledger::new(10, 1000);
        // 1: approved and running; 2: waiting for its approval; 3: in the
        // gate's hooks; 4: auto and running.
        for decision in [Decision::Pending, Decision::Pending, Decision::Pending, Decision::Auto] {
            ledger.open("write", Caller::Program, decision, None);
        }
        let decided = [(1, Decision::Approved)];
        // Call 1 left the wait after `awaiting` was read: its decision wins.
        ledger.abandon_in_flight("cut", &[1, 2], &[], &decided);
        ledger.abandon_in_flight("again", &[], &[], &decided);
        let calls = ledger.into_calls();
        let seen: Vec<(Decision, bool)> = calls.iter().map(|c| (c.decision, c.never_started)).collect();
        assert_eq!(
            seen,
            [
                (Decision::Approved, false),
                (Decision::Pending, true),
                (Decision::Pending, true),
                (Decision::Auto, false)
            ]
        );
        assert!(calls.iter().all(|c| c.status == CallStatus::InFlight));
        assert_eq!(calls[3].note.as_deref(), Some("cut"), "abandoned once");
    }
}
