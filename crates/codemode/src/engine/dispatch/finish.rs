//! Finishing a call: its result bounded, spilled when over its bound, and
//! turned into the completion the program gets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::catalog::{ToolError, ToolOutput};
use crate::engine::Shared;
use crate::receipt::spill::{self, Measured, SpillArea, SpillTarget};
use crate::receipt::{CallStatus, Decision, Truncation, ledger::CallEnd};
use crate::tools::Abandon;

use super::gate_steps::{ABANDON_GRACE, error_payload};
use super::{CallFuture, Completion, Envelope, EnvelopeRest};

/// Turns a tool's result into a completion: bounds it, spills it, builds the
/// envelope.
#[derive(Clone)]
pub(crate) struct Finisher {
    pub(crate) shared: Arc<Shared>,
    /// The run's approver (the dispatcher's).
    pub(crate) approver: Arc<dyn crate::gate::Approver>,
    pub(crate) spill: Arc<SpillArea>,
    pub(crate) tool: Arc<str>,
    pub(crate) seq: u64,
    pub(crate) started: Instant,
    /// How the gate decided (auto, or approved by the later steps).
    pub(crate) decision: Decision,
    /// Notes from the gate (hook rewrites, approvals).
    pub(crate) notes: Option<String>,
    /// The questions the tool asks during the call (elicitor.rs).
    pub(crate) questions: Arc<crate::engine::elicitor::CallQuestions>,
    /// The run's journal, when it keeps one: a tool that may change
    /// something starts once its start is durable ([`Finisher::run`]).
    pub(crate) durable: Option<crate::journal::durable::DurableLog>,
    /// Where the run's file tools keep pre-images, when it keeps them.
    pub(crate) undo: Option<Arc<crate::journal::UndoLog>>,
    /// A rollback's plan, for its `write` calls (tools/restore.rs).
    pub(crate) restore: Option<Arc<crate::journal::undo::RestorePlan>>,
    /// The run's trace record, when it is traced (telemetry/mod.rs).
    pub(crate) trace: Option<Arc<crate::telemetry::RunTrace>>,
    /// The time the call waited for the slots of its limits (paced.rs);
    /// `None` for a call under none.
    pub(crate) queued: Option<Duration>,
    /// How many times the tool was called (retries, paced.rs).
    pub(crate) attempts: u32,
    /// The run's clock: a call waiting for its slots is noted there
    /// (paced.rs).
    pub(crate) clock: Arc<crate::vm::clock::RunClock>,
}

/// How one attempt of a call ended.
// Made and taken apart at once, never stored: boxing the result would
// only add an allocation to every call.
#[allow(clippy::large_enum_variant)]
pub(super) enum Attempt {
    /// The tool answered; with a note when it finished as its timeout
    /// passed (it was committing its change).
    Ended(Result<ToolOutput, ToolError>, Option<&'static str>),
    /// Its timeout passed.
    TimedOut,
}

/// `completion` once its `done` line is durable (marked journaled); a
/// store's failure is logged, and the run's end reports it.
pub(super) async fn journal_done(
    log: &crate::journal::durable::DurableLog,
    mut completion: Completion,
) -> Completion {
    match log.done(&completion).await {
        Ok(()) => completion.journaled = true,
        Err(e) => tracing::warn!("call {}: its end could not be journaled: {e}", completion.seq),
    }
    completion
}

/// A result over the per-call bound, or a tool's error text over
/// [`spill::TEXT_BYTES`], waiting to be spilled.
pub(crate) struct Over {
    text: String,
    ext: &'static str,
    metadata: Option<Value>,
    /// The tool's own cut, if any (kept in the truncation's `tool_cut`).
    tool_cut: Option<Truncation>,
    /// The text is the tool's error, and this the call's kind (`failed`,
    /// `timeout`): the call fails with it, cut.
    failed: Option<&'static str>,
}

/// What finishing a result needs next.
pub(crate) enum Finished {
    Done(Completion),
    NeedsSpill(Over),
}

impl Finisher {
    /// The rest of a call: the tool's future under its timeout (counted from
    /// the first poll on the tool runtime), then the completion.
    ///
    /// `future` must have been made under `abandon`'s scope
    /// ([`Abandon::scope`]; `None` for read-only tools, which commit
    /// nothing): a tool whose work has a commit point is told
    /// at the timeout and waited for (at most [`ABANDON_GRACE`]), so a
    /// change it committed as the timeout passed is reported as done, not
    /// as timed out.
    ///
    /// A tool that may change something (`abandon` is set) in a journaled
    /// run (`durable` is set) starts only once its `start` line is
    /// durable, and its completion comes back once its `done` line is
    /// (durable.rs).
    pub(crate) fn run(
        self,
        future: crate::catalog::ToolFuture,
        timeout: Duration,
        abandon: Option<Abandon>,
    ) -> CallFuture {
        let Some(log) = abandon.as_ref().and(self.durable.clone()) else {
            return self.run_tool(future, timeout, abandon);
        };
        Box::pin(async move {
            if let Err(stopped) = self.journal_start(&log).await {
                return *stopped;
            }
            let completion = self.run_tool(future, timeout, abandon).await;
            journal_done(&log, completion).await
        })
    }

    /// [`Finisher::run`] for a tool that waits for its durable start
    /// itself (`ToolSpec::waits_for_durable_start`; `future` was made with
    /// the gate `opens` opens): the tool runs from now, beside the journal
    /// making its `start` line durable, and `opens` tells it when that is
    /// done (after the test hold, if any) or failed. A call whose start
    /// could not be made durable ends as not started, whatever the tool
    /// returned (it started nothing: it waits for the gate first).
    pub(crate) fn run_beside_start(
        self,
        mut future: crate::catalog::ToolFuture,
        timeout: Duration,
        abandon: Option<Abandon>,
        log: crate::journal::durable::DurableLog,
        opens: crate::catalog::DurableStartSender,
    ) -> CallFuture {
        Box::pin(async move {
            let start = async {
                let started = self.journal_start(&log).await;
                opens.send(started.is_ok());
                started
            };
            let (started, attempt) =
                tokio::join!(start, self.attempt(&mut future, timeout, abandon.as_ref()));
            if let Err(stopped) = started {
                return *stopped;
            }
            let completion = self.complete(attempt, timeout).await;
            journal_done(&log, completion).await
        })
    }

    /// Makes the call's `start` line durable (then the test hold, if any).
    ///
    /// # Errors
    /// The completion of a call not started because the journal could not
    /// record its start.
    pub(super) async fn journal_start(
        &self,
        log: &crate::journal::durable::DurableLog,
    ) -> Result<(), Box<Completion>> {
        if let Err(e) = log.start(self.seq).await {
            return Err(Box::new(self.failed(
                "failed",
                format!("the call was not started: the journal could not record its start ({e})"),
            )));
        }
        log.test_hold(&self.tool).await;
        Ok(())
    }

    /// [`Finisher::run`] without the journal's part.
    fn run_tool(
        self,
        mut future: crate::catalog::ToolFuture,
        timeout: Duration,
        abandon: Option<Abandon>,
    ) -> CallFuture {
        Box::pin(async move {
            let attempt = self.attempt(&mut future, timeout, abandon.as_ref()).await;
            self.complete(attempt, timeout).await
        })
    }

    /// Runs `future` under `timeout` (counted from now). The time the tool
    /// waits on answers to its questions does not count.
    pub(super) async fn attempt(
        &self,
        future: &mut crate::catalog::ToolFuture,
        timeout: Duration,
        abandon: Option<&Abandon>,
    ) -> Attempt {
        match self.questions.timeout(timeout, &mut *future).await {
            Ok(result) => Attempt::Ended(result, None),
            Err(_) if let Some(abandon) = abandon.filter(|a| a.watched()) => {
                abandon.signal();
                match tokio::time::timeout(ABANDON_GRACE, future).await {
                    // It was committing as the timeout passed: done.
                    Ok(Ok(out)) => Attempt::Ended(
                        Ok(out),
                        Some("finished as its timeout passed (it was already committing its change)"),
                    ),
                    // It gave up at its commit point, or never came back.
                    _ => Attempt::TimedOut,
                }
            }
            Err(_) => Attempt::TimedOut,
        }
    }

    /// The completion of the call's last attempt.
    pub(super) async fn complete(self, attempt: Attempt, timeout: Duration) -> Completion {
        let (result, finisher) = match attempt {
            Attempt::TimedOut => return self.timed_out(timeout),
            Attempt::Ended(result, None) => (result, self),
            Attempt::Ended(result, Some(late)) => {
                let notes = Some(match &self.notes {
                    Some(n) => format!("{n}; {late}"),
                    None => late.to_owned(),
                });
                (result, Finisher { notes, ..self })
            }
        };
        match finisher.finish(result) {
            Finished::Done(c) => c,
            Finished::NeedsSpill(over) => finisher.spill_later(over).await,
        }
    }

    /// The completion of a call cut by its per-call timeout.
    fn timed_out(&self, timeout: Duration) -> Completion {
        self.failed(
            "timeout",
            format!(
                "timed out after {} ms (the per-tool timeout: [tools.NAME] timeout_ms or the MCP server's \
                 timeout_ms when set, else {})",
                timeout.as_millis(),
                codemode_base::limit_settings::setting("tool_timeout")
            ),
        )
    }

    /// Measures a result; a result that fits becomes its completion at once.
    pub(super) fn finish(&self, result: Result<ToolOutput, ToolError>) -> Finished {
        let mut out = match result {
            Ok(out) => out,
            // Error text over its bound is spilled whole, off this thread.
            Err(e) if e.message.len() > spill::TEXT_BYTES => {
                let kind = e.kind();
                return Finished::NeedsSpill(Over {
                    text: e.message,
                    ext: "txt",
                    metadata: None,
                    tool_cut: None,
                    failed: Some(kind),
                });
            }
            Err(e) => return Finished::Done(self.failed(e.kind(), e.message)),
        };
        out.metadata = crate::engine::elicitor::with_elicitations(out.metadata, &self.questions.records());
        match spill::measure(out.content, self.shared.limits.result_bytes) {
            Measured::Fits { value, bytes, json } => {
                Finished::Done(self.succeeded(value, json, bytes, out.metadata, out.truncated, None))
            }
            Measured::Over { text, ext } => Finished::NeedsSpill(Over {
                text,
                ext,
                metadata: out.metadata,
                tool_cut: out.truncated,
                failed: None,
            }),
        }
    }

    /// Writes the spill file on a blocking thread, then completes.
    pub(super) fn spill_later(self, over: Over) -> CallFuture {
        Box::pin(async move {
            let me = self.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(kind) = over.failed {
                    let stem = format!("call-{}-error", me.seq);
                    let target = SpillTarget { area: &me.spill, stem: &stem };
                    return me.failed(kind, spill::cut_spilled(over.text, target));
                }
                let stem = format!("call-{}", me.seq);
                let target = SpillTarget { area: &me.spill, stem: &stem };
                let b = spill::spill(over.text, over.ext, me.shared.limits.result_bytes, target);
                // Cut twice (by the tool, then at the bound): both are said.
                let truncated = b.truncated.map(|mut t| {
                    t.tool_cut = over.tool_cut.and_then(|c| c.tool_cut);
                    t
                });
                me.succeeded(b.value, None, b.bytes, over.metadata, truncated, b.spill_error)
            })
            .await
            .unwrap_or_else(|_| self.failed("failed", "writing the spill file panicked".into()))
        })
    }

    /// The completion of a call that returned `value` (already bounded);
    /// `json` is its compact JSON when already made.
    fn succeeded(
        &self,
        value: Value,
        json: Option<String>,
        bytes: u64,
        metadata: Option<Value>,
        truncated: Option<Truncation>,
        note: Option<String>,
    ) -> Completion {
        let (payload, text) = match value {
            Value::String(text) => {
                let rest = EnvelopeRest { metadata: &metadata, truncated: &truncated };
                (serde_json::to_string(&rest).expect("JSON values serialise"), Some(text))
            }
            content => {
                let payload = match json {
                    Some(json) => {
                        // `null` (the usual case) without a string made for it.
                        let meta = metadata.as_ref().map(|m| m.to_string());
                        let cut = truncated
                            .as_ref()
                            .map(|t| serde_json::to_string(t).expect("JSON values serialise"));
                        let (meta, cut) =
                            (meta.as_deref().unwrap_or("null"), cut.as_deref().unwrap_or("null"));
                        let mut p = String::with_capacity(json.len() + meta.len() + cut.len() + 40);
                        p.push_str("{\"content\":");
                        p.push_str(&json);
                        p.push_str(",\"metadata\":");
                        p.push_str(meta);
                        p.push_str(",\"truncated\":");
                        p.push_str(cut);
                        p.push('}');
                        p
                    }
                    None => serde_json::to_string(&Envelope {
                        content: &content,
                        metadata: &metadata,
                        truncated: &truncated,
                    })
                    .expect("JSON values serialise"),
                };
                (payload, None)
            }
        };
        let note = match (self.notes.clone(), note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        // A change whose pre-image was not kept (journal/undo.rs).
        let note = match (note, self.undo.as_ref().and_then(|u| u.note(self.seq))) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Completion {
            seq: self.seq,
            end: CallEnd {
                status: CallStatus::Ok,
                decision: self.decision,
                elapsed: self.started.elapsed(),
                bytes,
                truncated,
                error: None,
                note,
                elicitations: self.questions.records(),
                queued: self.queued,
                attempts: self.attempts,
                progress: self.questions.progress(),
            },
            ok: true,
            payload,
            text,
            pause: None,
            journaled: false,
        }
    }

    /// The completion of a call the approver paused: it did not run; the
    /// run pauses on it.
    pub(crate) fn paused(&self, pending: crate::journal::record::PendingRecord) -> Completion {
        Completion {
            seq: self.seq,
            end: CallEnd {
                status: CallStatus::InFlight,
                decision: Decision::Pending,
                elapsed: self.started.elapsed(),
                bytes: 0,
                truncated: None,
                error: None,
                note: Some("waiting for a decision: the run paused on it (codemode resume)".to_owned()),
                elicitations: Vec::new(),
                queued: self.queued,
                attempts: self.attempts,
                progress: None,
            },
            ok: false,
            payload: error_payload("paused", "the run paused on this call", &self.tool, self.seq),
            text: None,
            pause: Some(Box::new(pending)),
            journaled: false,
        }
    }

    /// The completion of a call the later gate steps refused or denied.
    pub(crate) fn refused(&self, decision: Decision, kind: &str, reason: String) -> Completion {
        let reason = spill::cut_owned(reason);
        Completion {
            seq: self.seq,
            end: CallEnd {
                status: CallStatus::Refused,
                decision,
                elapsed: self.started.elapsed(),
                bytes: 0,
                truncated: None,
                error: Some(reason.clone()),
                note: self.notes.clone(),
                elicitations: self.questions.records(),
                queued: self.queued,
                attempts: self.attempts,
                progress: self.questions.progress(),
            },
            ok: false,
            payload: error_payload(kind, &reason, &self.tool, self.seq),
            text: None,
            pause: None,
            journaled: false,
        }
    }

    /// The completion of a call that failed with `message` (cut to
    /// [`spill::TEXT_BYTES`] if longer; [`Finisher::finish`] spills a
    /// tool's long error text first).
    pub(crate) fn failed(&self, kind: &str, message: String) -> Completion {
        let message = spill::cut_owned(message);
        Completion {
            seq: self.seq,
            end: CallEnd {
                status: CallStatus::Failed,
                decision: self.decision,
                elapsed: self.started.elapsed(),
                bytes: 0,
                truncated: None,
                error: Some(if kind == "failed" { message.clone() } else { format!("{kind}: {message}") }),
                note: self.notes.clone(),
                elicitations: self.questions.records(),
                queued: self.queued,
                attempts: self.attempts,
                progress: self.questions.progress(),
            },
            ok: false,
            payload: error_payload(kind, &message, &self.tool, self.seq),
            text: None,
            pause: None,
            journaled: false,
        }
    }
}
