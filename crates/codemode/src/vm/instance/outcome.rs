//! How a run ends: the program's outcome read from the VM, the error it
//! ended with, and the receipt built from them (and the journal closed).

use rquickjs::{Value, promise::PromiseState};
use serde_json::Value as Json;

use crate::journal::record::PausedRecord;
use crate::receipt::ledger::ReceiptParts;
use crate::receipt::spill::{self, SpillTarget};
use crate::receipt::{CallStatus, ErrorKind, Ledger, Receipt, RunError, RunStatus, Truncation, millis};
use crate::vm::host_call;
use crate::vm::js_error::{self, Circumstances};

use super::{DRAIN_CANCELLED, DRAIN_DEADLINE, Ending, MainState, Vm};

impl Vm {
    /// The receipt of a run whose waiting part ended with `ending`, the
    /// program's outcome being `main`.
    pub(super) fn end(&mut self, ending: Ending, main: Option<Result<Json, RunError>>) -> Receipt {
        // A resume that ends before it handed back every journaled result:
        // those calls ran (before the pause), so their receipts say how
        // they ended, not that they were cut.
        let undelivered =
            self.state.journal.borrow().as_ref().and_then(|j| j.replay.as_ref()).map(|r| r.undelivered());
        for c in undelivered.into_iter().flatten() {
            let mut ledger = self.state.ledger.borrow_mut();
            ledger.finish(c.seq, c.end);
            ledger.annotate(c.seq, "ran before the pause; the run ended before the program got its result");
        }
        match ending {
            Ending::Paused => {
                let mut receipt = self.finish(RunStatus::Paused, Json::Null, None);
                receipt.pending = self
                    .state
                    .pending
                    .borrow()
                    .iter()
                    .map(crate::journal::record::PendingRecord::to_pending_call)
                    .collect();
                receipt.pending.sort_by_key(|p| p.seq);
                // A call paused for its decision did nothing yet
                // (RECEIPTS.md: `never_started`).
                for call in &mut receipt.calls {
                    if call.status == CallStatus::InFlight
                        && receipt.pending.iter().any(|p| p.seq == call.seq)
                    {
                        call.never_started = true;
                    }
                }
                receipt
            }
            Ending::Settled | Ending::Stuck if main.is_none() => {
                let e = RunError::new(
                    ErrorKind::Limit,
                    "the program is waiting on a promise that nothing can settle (no tool call is running)",
                );
                self.finish(RunStatus::Failed, Json::Null, Some(e))
            }
            Ending::Settled | Ending::Stuck => match main.expect("checked above") {
                Ok(value) => self.finish(RunStatus::Completed, value, None),
                Err(e) => self.finish_with_error(e),
            },
            Ending::Broken(e) => {
                // A value the program returned before the failure is kept
                // (as below).
                let value = match main {
                    Some(Ok(v)) if self.state.out_of_memory.get().is_none() => v,
                    _ => Json::Null,
                };
                self.finish_with(e, value)
            }
            // The program had failed, and the deadline (or a cancel) came
            // while calls put to an approver were finishing: the run
            // failed, as the program did.
            Ending::Stopped if self.draining && matches!(main, Some(Err(_))) => {
                let e = main.and_then(Result::err).expect("checked above");
                let note = match self.stop_error() {
                    Some(stop) if stop.kind == ErrorKind::Timeout => DRAIN_DEADLINE,
                    _ => DRAIN_CANCELLED,
                };
                self.cancel_calls(note);
                self.finish(RunStatus::Failed, Json::Null, Some(e))
            }
            Ending::Stopped => {
                let error =
                    self.stop_error().unwrap_or_else(|| RunError::new(ErrorKind::Internal, "stopped"));
                // A value the program returned before the stop is kept
                // (not one it made after running out of memory, with a
                // built-in perhaps half made).
                let value = match main {
                    Some(Ok(v)) if self.state.out_of_memory.get().is_none() => v,
                    _ => Json::Null,
                };
                self.finish_with(error, value)
            }
        }
    }

    /// Writes the end of the run into its journal and makes the journal
    /// durable before the receipt leaves. A journal that cannot be made
    /// durable is said in the receipt: a warning for a run that ended; for
    /// a run that paused, the run fails (it could never be resumed).
    pub(super) async fn close_journal(&mut self, mut receipt: Receipt) -> Receipt {
        let Some(mut journal) = self.state.journal.borrow_mut().take() else { return receipt };
        receipt.warnings.append(&mut journal.warnings);
        // A resume stopped (cancelled, out of time, or on a replay that
        // took another path) while it replayed, before anything new ran:
        // the run is as it was, still paused.
        let diverged = self.state.diverged.borrow().is_some();
        if let Some(replay) = journal.replay.as_ref()
            && !self.state.clock.is_live()
            && (diverged || matches!(receipt.status, RunStatus::Cancelled | RunStatus::TimedOut))
        {
            if journal.recovering {
                // A recovery (its process had died; it never paused here):
                // the run stays interrupted, its journal left as the claim
                // found it, uncommitted, for a recovery again.
                stopped_in_replay(&mut receipt, None, diverged);
                return receipt;
            }
            stopped_in_replay(&mut receipt, Some(replay.pending_calls()), diverged);
            journal.log.paused(&paused_again(replay));
        } else if receipt.status == RunStatus::Paused {
            // What the files the run named hold now: a resume compares
            // them (journal/files_seen.rs).
            let (files, changed_files, over) = self.state.dispatcher.files_at_pause();
            receipt.warnings.extend(over);
            let paused = PausedRecord {
                at_unix_ms: crate::vm::journaling::now_ms() as u64,
                elapsed_ms: receipt.elapsed_ms,
                approval_wait_ms: receipt.approval_wait_ms,
                catalog_sha256: Some(receipt.catalog_sha256.clone()),
                catalog_servers: Some(self.state.dispatcher.catalog_servers()),
                files,
                changed_files,
            };
            journal.log.paused(&paused);
        }
        let state = crate::journal::RunState::of_status(receipt.status);
        if let Err(e) = journal.log.finish(state).await {
            if receipt.status == RunStatus::Paused {
                receipt.status = RunStatus::Failed;
                receipt.error = Some(RunError::new(
                    ErrorKind::Internal,
                    format!(
                        "the run paused, but its journal could not be made durable, so it could never be resumed: {e}"
                    ),
                ));
            } else {
                receipt.warnings.push(format!("the run's journal could not be written: {e}"));
            }
        }
        receipt
    }

    /// Where the program stands: running, returned, or failed (threw, or
    /// returned a value that is not JSON).
    pub(super) fn main_state(&self) -> MainState {
        let Some(main) = &self.main else { return MainState::Failed };
        self.ctx.with(|ctx| {
            let Ok(p) = main.clone().restore(&ctx) else { return MainState::Failed };
            match p.state() {
                PromiseState::Pending => MainState::Running,
                PromiseState::Rejected => MainState::Failed,
                PromiseState::Resolved => match p.result::<rquickjs::Object>() {
                    Some(Ok(report)) if report.contains_key("json").unwrap_or(false) => MainState::Returned,
                    _ => MainState::Failed,
                },
            }
        })
    }

    /// The program's result once its promise settled: the value as JSON, or
    /// the error it rejected with. The prelude's `finish` already turned the
    /// outcome into a plain report, so no program code runs here.
    pub(super) fn main_outcome(&self, name: &str) -> Option<Result<Json, RunError>> {
        let main = self.main.as_ref()?;
        self.ctx.with(|ctx| {
            let p = main.clone().restore(&ctx).ok()?;
            match p.state() {
                PromiseState::Pending => None,
                PromiseState::Resolved => {
                    let report: rquickjs::Object = p.result()?.ok()?;
                    Some(self.read_report(&report, name))
                }
                PromiseState::Rejected => {
                    // Only the engine rejects `finish` (an interrupt, memory).
                    let _ = p.result::<Value>();
                    Some(Err(self.classify(ctx.catch(), name, false)))
                }
            }
        })
    }

    /// The value of a program that returned but was stopped (by a runaway
    /// callback, say) before the prelude made its report. Best effort: the
    /// run is stopping, so serialising can be interrupted, which gives none.
    pub(super) fn returned_before_stop(&self) -> Option<Result<Json, RunError>> {
        let program = self.program.as_ref()?;
        self.ctx.with(|ctx| {
            let p = program.clone().restore(&ctx).ok()?;
            if p.state() != PromiseState::Resolved {
                return None;
            }
            let value: Value = p.result()?.ok()?;
            let text = ctx.json_stringify(value).ok()?;
            let _ = ctx.catch();
            match text {
                None => Some(Ok(Json::Null)),
                Some(t) => codemode_base::json_text::parse(&host_call::well_formed(&t).ok()?).ok().map(Ok),
            }
        })
    }

    /// Reads the prelude's report object (see `finish` in prelude.js).
    pub(super) fn read_report(&self, report: &rquickjs::Object<'_>, name: &str) -> Result<Json, RunError> {
        // Lone surrogates become U+FFFD here, as for every text the host
        // reads out of the VM.
        let text = |key: &str| {
            let s = report.get::<_, Option<rquickjs::String>>(key).ok().flatten()?;
            host_call::well_formed(&s).ok()
        };
        if report.contains_key("json").unwrap_or(false) {
            return match text("json") {
                None => Ok(Json::Null),
                Some(json) => codemode_base::json_text::parse(&json).map_err(|e| {
                    // Too deep is the program's value; anything else is ours.
                    let kind = match e {
                        codemode_base::json_text::JsonTextError::TooDeep { .. } => ErrorKind::Limit,
                        codemode_base::json_text::JsonTextError::Invalid(_) => ErrorKind::Internal,
                    };
                    RunError::new(kind, format!("the return value: {e}"))
                }),
            };
        }
        if let Some(failed) = text("failed") {
            return Err(RunError::new(ErrorKind::Exception, failed));
        }
        let stopping = self.stop_error();
        let thrown = js_error::Thrown {
            name: text("name"),
            message: text("message"),
            stack: text("stack"),
            null: text("thrown").as_deref() == Some("null"),
            tool: text("tool"),
        };
        let recent = self.state.recent.borrow();
        let when = Circumstances {
            compiling: false,
            stopping: stopping.as_ref(),
            memory_limit: self.limits.memory_bytes,
            positions: &self.positions,
            recent: Some(&recent),
        };
        Err(js_error::from_parts(thrown, name, when))
    }

    pub(super) fn finish_with_error(&mut self, e: RunError) -> Receipt {
        self.finish_with(e, Json::Null)
    }

    /// Ends the run with `e`: calls still running are cancelled and left
    /// `in_flight` with a note saying why.
    pub(super) fn finish_with(&mut self, e: RunError, value: Json) -> Receipt {
        let (status, note) = match e.kind {
            ErrorKind::Timeout => (RunStatus::TimedOut, "cancelled at the run deadline"),
            ErrorKind::Cancelled => (RunStatus::Cancelled, "cancelled with the run"),
            ErrorKind::Limit => (RunStatus::Failed, "cancelled: the run hit a limit"),
            _ => (RunStatus::Failed, "cancelled: the program failed before the call ended"),
        };
        self.cancel_calls(note);
        self.finish(status, value, Some(e))
    }

    /// Why the run is being stopped from outside the program, if it is.
    pub(super) fn stop_error(&self) -> Option<RunError> {
        let clock = &self.state.clock;
        if clock.is_cancelled() {
            return Some(RunError::new(ErrorKind::Cancelled, "the run was cancelled"));
        }
        if let Some(reason) = self.state.exhausted.borrow().clone() {
            return Some(RunError::new(ErrorKind::Limit, reason));
        }
        if let Some(message) = self.state.diverged.borrow().clone() {
            return Some(RunError::new(ErrorKind::Divergence, message));
        }
        if clock.expired() {
            return Some(RunError::new(
                ErrorKind::Timeout,
                format!(
                    "the run passed its deadline of {} ms ({})",
                    self.limits.deadline.as_millis(),
                    codemode_base::limit_settings::setting("deadline")
                ),
            ));
        }
        // Last: a deadline that interrupted the making of a built-in (which
        // ends it as if memory ran out) is the run's timeout.
        let what = self.state.out_of_memory.get()?;
        Some(js_error::memory_error(what, self.limits.memory_bytes))
    }

    /// A thrown value as a `RunError`, with the stop reason when the run is
    /// being stopped.
    pub(super) fn classify(&self, exception: Value<'_>, file: &str, compiling: bool) -> RunError {
        let stopping = self.stop_error();
        let recent = self.state.recent.borrow();
        let when = Circumstances {
            compiling,
            stopping: stopping.as_ref(),
            memory_limit: self.limits.memory_bytes,
            positions: &self.positions,
            recent: Some(&recent),
        };
        js_error::run_error(exception, file, when)
    }

    /// Builds the receipt; takes the ledger, so call once.
    pub(super) fn finish(&mut self, status: RunStatus, value: Json, error: Option<RunError>) -> Receipt {
        // Rejections nothing handled would otherwise leave no trace.
        for (_, reason) in self.state.unhandled.borrow_mut().drain(..) {
            self.state.ledger.borrow_mut().log("error", &format!("unhandled promise rejection: {reason}"));
        }
        let limits = &self.limits;
        let bounded = spill::bound(
            value,
            limits.value_bytes,
            SpillTarget { area: self.state.dispatcher.spill_area(), stem: "value" },
        );
        let value_truncated: Option<Truncation> = bounded.truncated;
        // An uncaught message over the text bound is kept whole in a spill
        // file (`error.txt`); the receipt keeps its prefix.
        let error = error.map(|mut e| {
            let target = SpillTarget { area: self.state.dispatcher.spill_area(), stem: "error" };
            e.message = spill::cut_spilled(std::mem::take(&mut e.message), target);
            e.stack = e.stack.map(spill::cut_owned);
            e
        });
        let ledger = std::mem::replace(&mut *self.state.ledger.borrow_mut(), Ledger::new(0, 0));
        let clock = &self.state.clock;
        // A resumed run's times cover the whole run: before the pause, the
        // pause itself (waiting on a decision), and now.
        let (mut elapsed_ms, mut approval_wait_ms) = (millis(clock.elapsed()), millis(clock.paused_total()));
        if let Some(before) = self.state.journal.borrow().as_ref().and_then(|j| j.before.as_ref()) {
            let resumed_at = crate::vm::journaling::now_ms() - elapsed_ms;
            let gap = (resumed_at - before.at_unix_ms as f64).max(0.0);
            elapsed_ms += before.elapsed_ms + gap;
            approval_wait_ms += before.approval_wait_ms + gap;
        }
        let mut receipt = ledger.into_receipt(ReceiptParts {
            run_id: self.run_id.to_string(),
            status,
            value: bounded.value,
            value_truncated,
            error,
            catalog_sha256: self.state.dispatcher.catalog_sha256(),
            elapsed_ms,
            approval_wait_ms,
            warnings: self.state.dispatcher.run_warnings(),
        });
        receipt.warnings.extend(not_awaited_warning(&receipt.calls));
        receipt
    }
}

/// The warning of a run whose program returned while calls it made were
/// still running: it never awaited them, so it did not use their results
/// (`return tools.read({path}).content` is `undefined`).
fn not_awaited_warning(calls: &[crate::receipt::CallReceipt]) -> Option<String> {
    let late: Vec<String> = calls
        .iter()
        .filter(|c| c.note.as_deref().is_some_and(|n| n.contains(super::NOT_AWAITED)))
        .map(|c| format!("{} (call {})", c.tool, c.seq))
        .collect();
    let first = calls.iter().find(|c| c.note.as_deref().is_some_and(|n| n.contains(super::NOT_AWAITED)))?;
    let shown = match late.len() {
        1..=3 => late.join(", "),
        n => format!("{} and {} more", late[..3].join(", "), n - 3),
    };
    Some(format!(
        "the program returned before {shown} ended: a call gives a promise, and the program did not \
         await it, so it never used the result (`tools.{}(...).content` is undefined); write \
         `(await tools.{}(...)).content`",
        first.tool, first.tool
    ))
}

/// Makes `receipt`, of a resume stopped while it replayed (cancelled, out
/// of time, or `diverged`: the replay took another path), before anything
/// new ran, say that the run is as it was, with why it stopped: paused on
/// `pending` (`Some`), or, for a recovery of a run whose process died
/// (`None`), interrupted, for a recovery again. Its VM's end and the
/// overrun watch's answer both say it so.
pub(crate) fn stopped_in_replay(
    receipt: &mut Receipt,
    pending: Option<Vec<crate::receipt::PendingCall>>,
    diverged: bool,
) {
    let why = receipt.error.as_ref().map_or_else(String::new, |e| format!(" ({})", e.message));
    let (verb, still) = match pending {
        Some(_) => ("resume", "paused"),
        None => ("recover", "interrupted (`codemode resume` recovers it)"),
    };
    let hint = if diverged {
        format!("; {verb} it where it first ran (the same program, time zone and tools), or start it again")
    } else if receipt.status == RunStatus::TimedOut {
        // OUT_OF_TIME_IN_REPLAY for a resume (`Receipt::out_of_time_in_replay`).
        format!("; {verb} it with a longer deadline: the replay needs more time")
    } else {
        String::new()
    };
    receipt
        .warnings
        .push(format!("{}{why}: the run is still {still}{hint}", crate::receipt::STOPPED_IN_REPLAY));
    if let Some(pending) = pending {
        receipt.error = None;
        receipt.status = RunStatus::Paused;
        receipt.pending = pending;
    }
}

/// The `paused` record a resume stopped in its replay writes again: the
/// one of the pause it resumed.
pub(crate) fn paused_again(replay: &crate::journal::replay::Replay) -> PausedRecord {
    replay.paused().cloned().unwrap_or(PausedRecord {
        at_unix_ms: 0,
        elapsed_ms: 0.0,
        approval_wait_ms: 0.0,
        catalog_sha256: None,
        catalog_servers: None,
        files: Default::default(),
        changed_files: Vec::new(),
    })
}
