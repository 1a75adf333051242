//! `Vm`: one QuickJS runtime and context for one program.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use rquickjs::context::EvalOptions;
use rquickjs::{Context, Ctx, Function, Persistent, Promise, Runtime, Value, promise::PromiseState};
use serde_json::Value as Json;

use super::calls::CallHost;
use super::clock::RunClock;
use super::host_call::{self, HostState, InFlight};
use super::js_error::{self, Circumstances};
use crate::journal::completion::Completion;
use crate::receipt::CallEndObserver;
use crate::receipt::ledger::ReceiptParts;
use crate::receipt::spill::{self, SpillTarget};
use crate::receipt::{CallStatus, ErrorKind, Ledger, Receipt, RunError, RunStatus, Truncation, millis};
use codemode_base::limits::Limits;
use codemode_program::{self, PositionMap, Program};

/// One VM for one program: a QuickJS runtime and context with the prelude
/// loaded and the `tools.call` binding installed.
///
/// [`Engine::execute`](crate::Engine::execute) makes a fresh VM on a VM
/// thread for every program and drops it when the program ends. Hosts that
/// want to hold VMs themselves (a benchmark of resident memory, say) make one
/// with [`Engine::vm`](crate::Engine::vm) and drive
/// [`Vm::run`] on a tokio runtime with timers enabled (a current-thread
/// runtime is enough). A `Vm` is `!Send`: it stays on the thread that made
/// it. It runs one program only; globals never carry over to another.
pub struct Vm {
    // Field order is drop order: JS handles go before the context and runtime.
    settle: Option<Persistent<Function<'static>>>,
    finish: Option<Persistent<Function<'static>>>,
    /// The program's own promise (the async body's).
    program: Option<Persistent<Promise<'static>>>,
    /// The prelude's report of it (see `finish` in prelude.js).
    main: Option<Persistent<Promise<'static>>>,
    ctx: Context,
    _rt: Runtime,
    state: Rc<HostState>,
    limits: Limits,
    run_id: Arc<str>,
    /// The running program's name in stack traces.
    program_name: String,
    /// Where the script's positions come from in the user's program.
    positions: PositionMap,
    used: bool,
    /// Set once the program failed with calls put to an approver still
    /// running: the run waits for them (see [`Vm::cancel_unapproved`]).
    draining: bool,
}

/// The built-ins a program gets: the language (base objects, `Date`,
/// `eval`/`Function`, `RegExp`, `JSON`, `Proxy`, `Map`/`Set`, typed arrays,
/// `Promise`, `WeakRef`). Left out: `performance` (a clock a journal could
/// not replay, and not part of the language) and `DOMException` (a web API).
/// The typed arrays, `Map`/`Set`, `WeakRef` and `Date` are made on the
/// program's first use of one ([`super::late_builtins`]), not here: making
/// them took about a fifth of a VM's start and 13 KiB of its memory.
type Intrinsics = (
    rquickjs::context::intrinsic::Eval,
    rquickjs::context::intrinsic::RegExpCompiler,
    rquickjs::context::intrinsic::RegExp,
    rquickjs::context::intrinsic::Json,
    rquickjs::context::intrinsic::Proxy,
    rquickjs::context::intrinsic::Promise,
);

/// The note of a call put to an approver that ended after the program
/// failed (see `Vm::cancel_unapproved`).
const LET_FINISH: &str = "ended after the program failed: a call put to an approver gets its answer and, if allowed, runs to its end";

/// The note of such a call cut by the deadline.
const DRAIN_DEADLINE: &str =
    "cancelled at the run deadline, while it was let finish after the program failed";

/// The note of such a call cut by a cancel.
const DRAIN_CANCELLED: &str = "cancelled with the run, while it was let finish after the program failed";

/// What the engine gives a VM for one run.
pub(crate) struct VmSetup {
    /// The run's limits (memory, stack, calls in flight, logs, deadline).
    pub limits: Limits,
    /// The tool runtime, where calls that wait run.
    pub tools: tokio::runtime::Handle,
    /// Where the program's calls go: the engine's dispatcher.
    pub calls: Box<dyn CallHost>,
    /// Told as each call ends (server mode's progress).
    pub on_call_end: Option<CallEndObserver>,
}

/// Where the program stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MainState {
    Running,
    Returned,
    Failed,
}

/// How the waiting part of a run ended.
enum Ending {
    /// The program settled and no call is left.
    Settled,
    /// The deadline passed, the host cancelled, or a limit halted the run.
    Stopped,
    /// The program waits on something nothing can settle.
    Stuck,
    /// The VM failed while settling a call (e.g. out of memory).
    Broken(RunError),
    /// A call paused the run and no call is left running.
    Paused,
}

impl Vm {
    /// Makes a VM for run `run_id` timed by `clock`, whose calls go to
    /// `setup.calls`; with `journal`, the run keeps a journal (and, on a
    /// resume, replays one) and its calls may pause it.
    pub(crate) fn new(
        setup: VmSetup,
        clock: Arc<RunClock>,
        run_id: Arc<str>,
        journal: Option<super::journaling::Journaling>,
    ) -> Result<Vm, RunError> {
        let VmSetup { limits, tools, calls, on_call_end } = setup;
        let internal =
            |what: &str, e: rquickjs::Error| RunError::new(ErrorKind::Internal, format!("{what}: {e}"));
        let rt = Runtime::new().map_err(|e| internal("could not create the JS runtime", e))?;
        rt.set_memory_limit(limits.memory_bytes);
        rt.set_max_stack_size(limits.stack_bytes);
        let ctx =
            Context::custom::<Intrinsics>(&rt).map_err(|e| internal("could not create the JS context", e))?;
        let state = Rc::new(HostState {
            ledger: RefCell::new(Ledger::new(limits.log_lines, limits.log_bytes).observed(on_call_end)),
            dispatcher: calls,
            calls: RefCell::new(InFlight::new(limits.max_in_flight, tools)),
            exhausted: RefCell::new(None),
            closed: std::cell::Cell::new(false),
            unhandled: RefCell::new(Vec::new()),
            clock: clock.clone(),
            journal: RefCell::new(journal),
            pending: RefCell::new(Vec::new()),
            diverged: RefCell::new(None),
            held: RefCell::new(Vec::new()),
            live: std::cell::Cell::new(false),
            late_builtins: Default::default(),
            date_shim: RefCell::new(None),
            out_of_memory: std::cell::Cell::new(None),
        });
        let tracked = state.clone();
        rt.set_host_promise_rejection_tracker(Some(Box::new(move |ctx, promise, reason, handled| {
            track_rejection(&tracked, &ctx, promise, reason, handled);
        })));
        let hooks = ctx.with(|ctx| -> Result<_, String> {
            let prelude = super::prelude::load(&ctx)?;
            let host = host_call::binding(&ctx, state.clone()).map_err(|e| e.to_string())?;
            super::late_builtins::install(&ctx, &state).map_err(|e| describe_exception(&ctx, e))?;
            let hooks: rquickjs::Array = prelude.call((host,)).map_err(|e| describe_exception(&ctx, e))?;
            let settle: Function = hooks.get(0).map_err(|e| e.to_string())?;
            let finish: Function = hooks.get(1).map_err(|e| e.to_string())?;
            let install_date: Function = hooks.get(2).map_err(|e| e.to_string())?;
            Ok((
                Persistent::save(&ctx, settle),
                Persistent::save(&ctx, finish),
                Persistent::save(&ctx, install_date),
            ))
        });
        let (settle, finish, install_date) = hooks
            .map_err(|e| RunError::new(ErrorKind::Internal, format!("the prelude failed to load: {e}")))?;
        // The interrupt goes in after the prelude, so even a deadline that
        // has passed by now stops the program, not the engine's own setup.
        let stop = clock;
        rt.set_interrupt_handler(Some(Box::new(move || stop.should_stop())));
        *state.date_shim.borrow_mut() = Some(install_date);
        Ok(Vm {
            settle: Some(settle),
            finish: Some(finish),
            program: None,
            main: None,
            ctx,
            _rt: rt,
            state,
            limits,
            run_id,
            program_name: String::new(),
            positions: PositionMap::default(),
            used: false,
            draining: false,
        })
    }

    /// The id of the run this VM is for.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Runs `program` to its end and returns the receipt. Never fails: every
    /// outcome (including a second program in the same VM, which is
    /// refused) is a receipt.
    pub async fn run(&mut self, program: Program) -> Receipt {
        let receipt = self.run_program(program).await;
        self.close_journal(receipt).await
    }

    /// [`Vm::run`] up to the receipt, before the journal's end.
    async fn run_program(&mut self, program: Program) -> Receipt {
        if self.used {
            let e = RunError::new(
                ErrorKind::Internal,
                "this VM already ran a program; a VM runs one program only (make a new one)",
            );
            return self.finish(RunStatus::Failed, Json::Null, Some(e));
        }
        self.used = true;
        self.program_name = program.name().to_owned();
        let limits = self.limits.clone();
        if program.source().len() > limits.source_bytes {
            let e = RunError::new(
                ErrorKind::Limit,
                format!(
                    "the program is {} bytes, over the source limit of {} bytes ({})",
                    program.source().len(),
                    limits.source_bytes,
                    codemode_base::limit_settings::setting("source_bytes")
                ),
            );
            return self.finish(RunStatus::Failed, Json::Null, Some(e));
        }

        if let Some(at) = program.source().find('\0') {
            let before = &program.source()[..at];
            let mut e = RunError::new(
                ErrorKind::Syntax,
                "the program contains a NUL character; write it as \\0 inside strings",
            );
            e.line = Some(before.matches('\n').count() as u32 + 1);
            e.column = Some(before.rsplit('\n').next().unwrap_or("").chars().count() as u32 + 1);
            return self.finish(RunStatus::Failed, Json::Null, Some(e));
        }
        if let Err(e) = self.start(&program) {
            return self.finish_with_error(e);
        }
        let ending = self.drive().await;
        // From here on the program gets no more calls and no more log lines.
        self.state.closed.set(true);
        let main = self.main_outcome(program.name()).or_else(|| self.returned_before_stop());
        self.end(ending, main)
    }

    /// The receipt of a run whose waiting part ended with `ending`, the
    /// program's outcome being `main`.
    fn end(&mut self, ending: Ending, main: Option<Result<Json, RunError>>) -> Receipt {
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
    async fn close_journal(&mut self, mut receipt: Receipt) -> Receipt {
        let Some(mut journal) = self.state.journal.borrow_mut().take() else { return receipt };
        receipt.warnings.append(&mut journal.warnings);
        // A resume stopped (cancelled, out of time, or on a replay that
        // took another path) while it replayed, before anything new ran:
        // the run is as it was, still paused.
        let diverged = self.state.diverged.borrow().is_some();
        if let Some(replay) = journal.replay.as_ref()
            && !self.state.live.get()
            && (diverged || matches!(receipt.status, RunStatus::Cancelled | RunStatus::TimedOut))
        {
            let why = receipt.error.take().map_or_else(String::new, |e| format!(" ({})", e.message));
            let hint = if diverged {
                "; resume it where it first ran (the same program, time zone and tools), or start it again"
            } else {
                ""
            };
            receipt.warnings.push(format!(
                "the resume stopped while replaying the journal, before anything new ran{why}: the run is still paused{hint}"
            ));
            receipt.status = RunStatus::Paused;
            receipt.pending = replay.pending_calls();
            journal.log.push(crate::journal::record::tagged_line(
                "paused",
                &replay.paused().cloned().unwrap_or(crate::journal::record::PausedRecord {
                    at_unix_ms: 0,
                    elapsed_ms: 0.0,
                    approval_wait_ms: 0.0,
                    catalog_sha256: None,
                }),
            ));
        } else if receipt.status == RunStatus::Paused {
            let paused = crate::journal::record::PausedRecord {
                at_unix_ms: super::journaling::now_ms() as u64,
                elapsed_ms: receipt.elapsed_ms,
                approval_wait_ms: receipt.approval_wait_ms,
                catalog_sha256: Some(receipt.catalog_sha256.clone()),
            };
            journal.log.push(crate::journal::record::tagged_line("paused", &paused));
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

    /// Compiles and starts the program; the error is a syntax error (or an
    /// interrupt during its synchronous start).
    fn start(&mut self, program: &Program) -> Result<(), RunError> {
        let normalised = codemode_program::normalise(program)?;
        self.positions = normalised.positions;
        let wrapped = normalised.script;
        let name = program.name().to_owned();
        let finish = self.finish.clone().expect("the prelude is loaded");
        let main = self.ctx.with(|ctx| {
            let program = match ctx.eval_with_options::<Value, _>(wrapped, eval_options(&name, false)) {
                Ok(v) => v.into_promise().ok_or_else(|| {
                    RunError::new(
                        ErrorKind::Syntax,
                        "the program's braces do not balance: it closes the async function it runs in",
                    )
                })?,
                Err(_) => return Err(self.classify(ctx.catch(), &name, true)),
            };
            let finish =
                finish.restore(&ctx).map_err(|e| RunError::new(ErrorKind::Internal, e.to_string()))?;
            let saved = Persistent::save(&ctx, program.clone());
            match finish.call::<_, Promise>((program,)) {
                Ok(p) => Ok((saved, Persistent::save(&ctx, p))),
                Err(_) => Err(self.classify(ctx.catch(), &name, false)),
            }
        })?;
        self.program = Some(main.0);
        self.main = Some(main.1);
        Ok(())
    }

    /// Runs jobs and waits on calls until the program and its calls are done
    /// or the run must stop.
    async fn drive(&mut self) -> Ending {
        let clock = self.state.clock.clone();
        loop {
            if let Some(e) = self.run_jobs() {
                return Ending::Broken(e);
            }
            if clock.should_stop() {
                return Ending::Stopped;
            }
            let state = self.main_state();
            // A failed program ends now; calls it left running are
            // cancelled, except those put to an approver.
            if state == MainState::Failed && !self.draining && !self.cancel_unapproved() {
                return Ending::Settled;
            }
            // A resume hands back journaled results first, in the order the
            // program got them, then lets live ones go.
            match self.replay_step() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(ending) => return ending,
            }
            if self.state.calls.borrow().is_empty() {
                if self.pausing() {
                    return Ending::Paused;
                }
                return if state == MainState::Running { Ending::Stuck } else { Ending::Settled };
            }
            // Wait for a call to end, the deadline, a pause change or a cancel.
            // The join set is taken out of the RefCell for the wait; no JS
            // runs (so no call starts) until it is put back.
            if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                j.log.hand_over();
            }
            let mut running = std::mem::take(&mut self.state.calls.borrow_mut().running);
            let joined = host_call::next_ended(&mut running, &clock).await;
            self.state.calls.borrow_mut().running = running;
            let Some(joined) = joined else { continue };
            let mut completion =
                self.state.calls.borrow_mut().ended(joined, &self.state.ledger.borrow(), &clock);
            if completion.seq == 0 {
                continue;
            }
            if self.draining && completion.pause.take().is_some() {
                // The program failed: the run does not pause on it.
                completion.end.note =
                    Some("the approver left it for later, but the program had failed".into());
            }
            self.state.ledger.borrow_mut().finish(completion.seq, completion.end.clone());
            if let Some(pending) = completion.pause.take() {
                // The approver left the call for later: the run pauses.
                // Calls still running finish and are journaled first.
                if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                    j.log.push(crate::journal::record::tagged_line("pending", &*pending));
                }
                self.state.pending.borrow_mut().push(*pending);
                continue;
            }
            if self.pausing() {
                self.journal_unsettled(&completion);
                self.state.ledger.borrow_mut().annotate(
                    completion.seq,
                    "finished while the run was pausing: the program gets its result when the run is resumed",
                );
                continue;
            }
            if self.draining {
                // The program failed: it gets no more results.
                self.journal_unsettled(&completion);
                self.state.ledger.borrow_mut().annotate(completion.seq, LET_FINISH);
                continue;
            }
            if self.main_state() != MainState::Running {
                const NOT_AWAITED: &str = "finished after the program returned: it was not awaited";
                self.state.ledger.borrow_mut().annotate(completion.seq, NOT_AWAITED);
                // Journaled with the note, so a resumed receipt keeps it.
                completion.end.note = Some(match completion.end.note.take() {
                    Some(n) => format!("{n}; {NOT_AWAITED}"),
                    None => NOT_AWAITED.to_owned(),
                });
            }
            if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                j.log.line(|out| {
                    crate::journal::record::write_done(out, crate::journal::record::How::Settled, &completion)
                });
            }
            if let Err(e) = self.settle(completion) {
                return Ending::Broken(e);
            }
        }
    }

    /// The program failed: cancels the calls it left running or queued
    /// that were not put to an approver (auto ones, queued ones). A call
    /// waiting for its approval gets its answer and, if allowed, runs to
    /// its end, as does a call already allowed (within the deadline): a
    /// person's answer, even one typed ahead, is never lost or undone by
    /// a failure elsewhere in the program (a denial that rejected a
    /// `Promise.all`, say). Returns whether such calls are left to wait
    /// for; the run loop then records their ends without handing them to
    /// the program.
    fn cancel_unapproved(&mut self) -> bool {
        const NOTE: &str = "cancelled: the program failed before the call ended";
        let clock = &self.state.clock;
        // Read before the decisions: a call that leaves the wait is decided.
        let awaiting = clock.awaiting_approval();
        let ledger = self.state.ledger.borrow();
        let asked = |seq: u64| {
            awaiting.contains(&seq)
                || clock.decision_of(seq).unwrap_or_else(|| ledger.decision_of(seq))
                    == crate::receipt::Decision::Approved
        };
        let mut calls = self.state.calls.borrow_mut();
        let running: Vec<u64> = calls.seq_of.values().map(|(seq, _)| *seq).collect();
        let kept: Vec<u64> = running.into_iter().filter(|&seq| asked(seq)).collect();
        if kept.is_empty() {
            // The run ends now and cancels them all.
            return false;
        }
        let queued = calls.cancel_where(|seq| !kept.contains(&seq));
        drop(calls);
        drop(ledger);
        self.state.ledger.borrow_mut().abandon_in_flight_where(
            |seq| !kept.contains(&seq),
            NOTE,
            &awaiting,
            &queued,
            &clock.decisions(),
        );
        self.draining = true;
        true
    }

    /// Whether a call paused the run (it ends `paused` once no call is
    /// left).
    /// Journals `completion` as a call the program never got the result of.
    fn journal_unsettled(&self, completion: &Completion) {
        if let Some(j) = self.state.journal.borrow_mut().as_mut() {
            j.log.line(|out| {
                crate::journal::record::write_done(out, crate::journal::record::How::Unsettled, completion)
            });
        }
    }

    fn pausing(&self) -> bool {
        !self.state.pending.borrow().is_empty()
    }

    /// On a resume: hands the program the next journaled result, if one is
    /// due (`Ok(true)`: run its jobs and look again); once none is left,
    /// starts the live calls held until then and ends the replay
    /// (`Ok(false)`). A journaled result for a call the program has not
    /// made ends the run (`Err`).
    fn replay_step(&mut self) -> Result<bool, Ending> {
        use crate::journal::replay::NextSettle;
        let next = {
            let mut journal = self.state.journal.borrow_mut();
            let Some(replay) = journal.as_mut().and_then(|j| j.replay.as_mut()) else { return Ok(false) };
            replay.next_settle()
        };
        match next {
            NextSettle::Now { completion, new } => {
                if new && let Some(j) = self.state.journal.borrow_mut().as_mut() {
                    j.log.push(crate::journal::record::settle_line(completion.seq));
                }
                self.state.ledger.borrow_mut().finish(completion.seq, completion.end.clone());
                self.settle(completion).map_err(Ending::Broken)?;
                Ok(true)
            }
            NextSettle::Caught => {
                if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                    j.replay = None;
                    for line in std::mem::take(&mut j.decision_lines) {
                        j.log.push(line);
                    }
                    // Replaying did not count against the deadline: what
                    // the run had left at its pause starts now.
                    if let Some(left) = j.deadline_left {
                        self.state.clock.allow_from_now(left);
                    }
                }
                let held = std::mem::take(&mut *self.state.held.borrow_mut());
                if !held.is_empty() {
                    self.state.live.set(true);
                }
                let mut calls = self.state.calls.borrow_mut();
                for (seq, future) in held {
                    calls.start(seq, future);
                }
                Ok(false)
            }
            NextSettle::Diverged(message) => {
                *self.state.diverged.borrow_mut() = Some(message);
                self.state.clock.halt();
                Err(Ending::Stopped)
            }
        }
    }

    /// Runs pending jobs until none is left; an error that escapes a job
    /// (memory, an interrupt) is returned unless the clock explains it.
    fn run_jobs(&self) -> Option<RunError> {
        loop {
            match self._rt.execute_pending_job() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(job) => {
                    let file = self.program_name.clone();
                    return Some(job.0.with(|ctx| self.classify(ctx.catch(), &file, false)));
                }
            }
        }
    }

    /// Where the program stands: running, returned, or failed (threw, or
    /// returned a value that is not JSON).
    fn main_state(&self) -> MainState {
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
    fn main_outcome(&self, name: &str) -> Option<Result<Json, RunError>> {
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
    fn returned_before_stop(&self) -> Option<Result<Json, RunError>> {
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
    fn read_report(&self, report: &rquickjs::Object<'_>, name: &str) -> Result<Json, RunError> {
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
        };
        let when = Circumstances {
            compiling: false,
            stopping: stopping.as_ref(),
            memory_limit: self.limits.memory_bytes,
            positions: &self.positions,
        };
        Err(js_error::from_parts(thrown, name, when))
    }

    /// Hands a finished call's result to the program.
    fn settle(&self, completion: Completion) -> Result<(), RunError> {
        let Completion { seq, ok, payload, text, .. } = completion;
        let Some(settle) = &self.settle else { return Ok(()) };
        let clock = self.state.clock.clone();
        self.ctx.with(|ctx| {
            let f = settle
                .clone()
                .restore(&ctx)
                .map_err(|e| RunError::new(ErrorKind::Internal, e.to_string()))?;
            let result = (|| {
                let answer = super::host_call::answer_value(&ctx, ok, &payload, text.as_deref())?;
                f.call::<_, ()>((seq as f64, answer))
            })();
            match result {
                Ok(()) => Ok(()),
                Err(_) if clock.should_stop() => Ok(()),
                Err(_) => Err(self.classify(ctx.catch(), &self.program_name, false)),
            }
        })
    }

    /// Ends every call still running or queued; their receipts stay
    /// `in_flight` with `note`.
    fn cancel_calls(&self, note: &str) {
        let mut calls = self.state.calls.borrow_mut();
        // Read before the abort: aborted calls leave the approval wait.
        let awaiting = self.state.clock.awaiting_approval();
        let queued: Vec<u64> = calls.queued.iter().map(|(seq, _)| *seq).collect();
        calls.running.abort_all();
        calls.queued.clear();
        // Read after the abort: no decision comes after it.
        let decided = self.state.clock.decisions();
        self.state.ledger.borrow_mut().abandon_in_flight(note, &awaiting, &queued, &decided);
    }

    fn finish_with_error(&mut self, e: RunError) -> Receipt {
        self.finish_with(e, Json::Null)
    }

    /// Ends the run with `e`: calls still running are cancelled and left
    /// `in_flight` with a note saying why.
    fn finish_with(&mut self, e: RunError, value: Json) -> Receipt {
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
    fn stop_error(&self) -> Option<RunError> {
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
    fn classify(&self, exception: Value<'_>, file: &str, compiling: bool) -> RunError {
        let stopping = self.stop_error();
        let when = Circumstances {
            compiling,
            stopping: stopping.as_ref(),
            memory_limit: self.limits.memory_bytes,
            positions: &self.positions,
        };
        js_error::run_error(exception, file, when)
    }

    /// Builds the receipt; takes the ledger, so call once.
    fn finish(&mut self, status: RunStatus, value: Json, error: Option<RunError>) -> Receipt {
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
            let resumed_at = super::journaling::now_ms() - elapsed_ms;
            let gap = (resumed_at - before.at_unix_ms as f64).max(0.0);
            elapsed_ms += before.elapsed_ms + gap;
            approval_wait_ms += before.approval_wait_ms + gap;
        }
        ledger.into_receipt(ReceiptParts {
            run_id: self.run_id.to_string(),
            status,
            value: bounded.value,
            value_truncated,
            error,
            catalog_sha256: self.state.dispatcher.catalog_sha256(),
            elapsed_ms,
            approval_wait_ms,
            warnings: self.state.dispatcher.run_warnings(),
        })
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // JS handles must go before the runtime; running calls are aborted
        // when the join set drops with the state.
        self.settle.take();
        self.finish.take();
        self.program.take();
        self.main.take();
        self.state.unhandled.borrow_mut().clear();
        self.state.date_shim.borrow_mut().take();
        self.state.calls.borrow_mut().running.abort_all();
    }
}

/// Keeps the list of promises rejected with no handler: QuickJS calls this
/// with `handled` false when such a promise rejects, and again with `handled`
/// true if a handler is attached later. Rejections once the run is stopping
/// are not kept: they come of the stop (calls refused past the call
/// budget), which the run's error says.
fn track_rejection<'js>(
    state: &HostState,
    ctx: &Ctx<'js>,
    promise: Value<'js>,
    reason: Value<'js>,
    handled: bool,
) {
    const KEPT: usize = 16;
    if handled {
        let mut unhandled = state.unhandled.borrow_mut();
        unhandled.retain(|(p, _)| p.clone().restore(ctx).map_or(true, |p| p != promise));
        return;
    }
    // A rejection once the run is stopping (the call budget, the deadline,
    // a cancel) comes of the stop, which the run's error reports once.
    if state.unhandled.borrow().len() >= KEPT || state.closed.get() || state.clock.should_stop() {
        return;
    }
    // What was rejected: an error's name and message, else the value as
    // JSON (an object) or as String() gives it (42, true, null, 10), cut
    // at `SHOWN` bytes.
    const SHOWN: usize = 1000;
    let describe = |v: &Value<'js>| -> String {
        let text = if let Some(o) = v.as_object() {
            let field = |k: &str| o.get::<_, Option<String>>(k).ok().flatten();
            match (field("name"), field("message")) {
                (Some(n), Some(m)) => format!("{n}: {m}"),
                (_, Some(m)) => m,
                _ => ctx
                    .json_stringify(v.clone())
                    .ok()
                    .flatten()
                    .and_then(|s| s.to_string().ok())
                    .unwrap_or_else(|| "an object that is not JSON".to_owned()),
            }
        } else if let Some(s) = v.as_string() {
            s.to_string().unwrap_or_default()
        } else {
            v.get::<rquickjs::Coerced<String>>()
                .map(|c| if v.is_big_int() { format!("{}n", c.0) } else { c.0 })
                .unwrap_or_else(|_| "a value that is not an error".to_owned())
        };
        if text.len() <= SHOWN {
            return text;
        }
        let mut end = SHOWN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... [cut; {} bytes in all]", &text[..end], text.len())
    };
    // Describe first: reading `name` and `message` may run the program's
    // getters, which may reject other promises and call back here.
    let text = describe(&reason);
    state.unhandled.borrow_mut().push((rquickjs::Persistent::save(ctx, promise), text));
}

fn describe_exception(ctx: &Ctx<'_>, e: rquickjs::Error) -> String {
    if matches!(e, rquickjs::Error::Exception) {
        let exc = ctx.catch();
        if let Some(o) = exc.as_object() {
            let stack: Option<String> = o.get("stack").ok().flatten();
            let msg: Option<String> = o.get("message").ok().flatten();
            return format!("{} {}", msg.unwrap_or_default(), stack.unwrap_or_default());
        }
    }
    e.to_string()
}

fn eval_options(filename: &str, strict: bool) -> EvalOptions {
    let mut o = EvalOptions::default();
    o.strict = strict;
    o.filename = Some(filename.to_owned());
    o
}
