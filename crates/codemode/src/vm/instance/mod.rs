//! `Vm`: one QuickJS runtime and context for one program.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use rquickjs::context::EvalOptions;
use rquickjs::{Context, Ctx, Function, Persistent, Promise, Runtime, Value};
use serde_json::Value as Json;

use super::blank::Blank;
use super::calls::CallHost;
use super::clock::RunClock;
use super::host_call::{self, HostState, InFlight};
use crate::journal::completion::Completion;
use crate::journal::record::How;
use crate::receipt::CallEndObserver;
use crate::receipt::{ErrorKind, Ledger, Receipt, RunError, RunStatus};
use codemode_base::limits::Limits;
use codemode_program::{self, PositionMap, Program};

mod outcome;
pub(crate) use outcome::{paused_again, stopped_in_replay};

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

/// The note of a call put to an approver that ended after the program
/// failed (see `Vm::cancel_unapproved`).
const LET_FINISH: &str = "ended after the program failed: a call put to an approver gets its answer and, if allowed, runs to its end";

/// The note of such a call cut by the deadline.
const DRAIN_DEADLINE: &str =
    "cancelled at the run deadline, while it was let finish after the program failed";

/// The note of such a call cut by a cancel.
const DRAIN_CANCELLED: &str = "cancelled with the run, while it was let finish after the program failed";

/// The note of a call that ended after the program returned.
const NOT_AWAITED: &str = "finished after the program returned: it was not awaited";

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
    /// Told of each call as its receipt opens (a traced run's record).
    pub on_call_open: Option<crate::receipt::ledger::CallOpenObserver>,
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
        let VmSetup { limits, tools, calls, on_call_end, on_call_open } = setup;
        // The runtime, context and prelude: this thread's spare when it
        // has one (`blank.rs`), else made now.
        let Blank { prelude, ctx, rt } = Blank::take_or_make()?;
        rt.set_memory_limit(limits.memory_bytes);
        rt.set_max_stack_size(limits.stack_bytes);
        let state = Rc::new(HostState {
            ledger: RefCell::new(
                Ledger::new(limits.log_lines, limits.log_bytes).observed(on_call_end).on_open(on_call_open),
            ),
            dispatcher: calls,
            calls: RefCell::new(InFlight::new(limits.max_in_flight, tools, clock.running_calls())),
            exhausted: RefCell::new(None),
            closed: std::cell::Cell::new(false),
            unhandled: RefCell::new(Vec::new()),
            clock: clock.clone(),
            journal: RefCell::new(journal),
            pending: RefCell::new(Vec::new()),
            diverged: RefCell::new(None),
            held: RefCell::new(Vec::new()),
            late_builtins: Default::default(),
            date_shim: RefCell::new(None),
            out_of_memory: std::cell::Cell::new(None),
            recent: Default::default(),
        });
        let tracked = state.clone();
        rt.set_host_promise_rejection_tracker(Some(Box::new(move |ctx, promise, reason, handled| {
            track_rejection(&tracked, &ctx, promise, reason, handled);
        })));
        let hooks = ctx.with(|ctx| -> Result<_, String> {
            let prelude = prelude.restore(&ctx).map_err(|e| e.to_string())?;
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
        if let Some(e) = over_source_limit(&program, &self.limits) {
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
        // A run told to stop before its program starts (it waited for a
        // VM thread held by a program QuickJS had not interrupted yet:
        // engine/overrun_watch.rs) does not start it: its first interrupt
        // check would come only 10,000 branches in.
        if let Some(e) = self.stop_error() {
            return self.finish_with_error(e);
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

    /// Compiles and starts the program; the error is a syntax error (or an
    /// interrupt during its synchronous start).
    fn start(&mut self, program: &Program) -> Result<(), RunError> {
        let normalised = codemode_program::normalise(program)?;
        // A resume replays a run that was admitted when it started.
        let resuming = self.state.journal.borrow().as_ref().is_some_and(|j| j.replay.is_some());
        if !resuming {
            if let Some(refused) = self.state.dispatcher.admit(&normalised.tool_uses) {
                return Err(refused);
            }
            self.state.dispatcher.prestart(&normalised.tool_uses);
        }
        self.positions = normalised.positions;
        let wrapped = normalised.script;
        let name = program.name().to_owned();
        let finish = self.finish.clone().expect("the prelude is loaded");
        let input = input_json(program)?;
        let main = self.ctx.with(|ctx| {
            if let Some(text) = input {
                // The program's `input` (a batch line): parsed in this VM,
                // so it shares nothing with another run.
                let value = ctx.json_parse(text).map_err(|e| {
                    RunError::new(ErrorKind::Internal, format!("the program's input could not be made: {e}"))
                })?;
                ctx.globals()
                    .set("input", value)
                    .map_err(|e| RunError::new(ErrorKind::Internal, format!("cannot set `input`: {e}")))?;
            }
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
                    j.log.call_pending(&pending);
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
                self.state.ledger.borrow_mut().annotate(completion.seq, NOT_AWAITED);
                // Journaled with the note, so a resumed receipt keeps it.
                completion.end.note = Some(match completion.end.note.take() {
                    Some(n) => format!("{n}; {NOT_AWAITED}"),
                    None => NOT_AWAITED.to_owned(),
                });
            }
            if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                if completion.journaled {
                    // Its `done` is durable already: where the program
                    // got it is what is left to say.
                    j.log.result_settled(completion.seq);
                } else {
                    j.log.call_ended(How::Settled, &completion);
                }
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
        // A call whose approver answered is kept even before the gate
        // records its decision (the call's task runs on another thread).
        let put_to_approver = clock.put_to_approver();
        let ledger = self.state.ledger.borrow();
        let asked = |seq: u64| {
            put_to_approver.contains(&seq)
                || clock.decision_of(seq).unwrap_or_else(|| ledger.decision_of(seq))
                    == crate::receipt::Decision::Approved
        };
        let mut calls = self.state.calls.borrow_mut();
        let running = calls.running_seqs();
        let kept: Vec<u64> = running.into_iter().filter(|&seq| asked(seq)).collect();
        if kept.is_empty() {
            // The run ends now and cancels them all.
            return false;
        }
        let slot_waits = clock.slot_waits();
        let mut queued = calls.cancel_where(|seq| !kept.contains(&seq));
        queued.extend(slot_waits);
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

    /// Journals `completion` as a call the program never got the result of.
    fn journal_unsettled(&self, completion: &Completion) {
        if completion.journaled {
            // Its `done` line (`unsettled`) is in the journal already.
            return;
        }
        if let Some(j) = self.state.journal.borrow_mut().as_mut() {
            j.log.call_ended(How::Unsettled, completion);
        }
    }

    /// Whether a call paused the run (it ends `paused` once no call is
    /// left).
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
                    j.log.result_settled(completion.seq);
                }
                self.state.ledger.borrow_mut().finish(completion.seq, completion.end.clone());
                self.settle(*completion).map_err(Ending::Broken)?;
                Ok(true)
            }
            NextSettle::Caught => {
                if let Some(j) = self.state.journal.borrow_mut().as_mut() {
                    j.replay = None;
                    j.log.caught_up();
                    // Replaying did not count against the deadline: what
                    // the run had left at its pause starts now.
                    if let Some(left) = j.deadline_left {
                        self.state.clock.allow_from_now(left);
                    }
                }
                let held = std::mem::take(&mut *self.state.held.borrow_mut());
                if !held.is_empty() {
                    self.state.clock.go_live();
                }
                let mut calls = self.state.calls.borrow_mut();
                for (seq, future) in held {
                    calls.start(seq, future);
                }
                Ok(false)
            }
            NextSettle::Diverged(message) => {
                *self.state.diverged.borrow_mut() = Some(message);
                self.state.clock.halt(crate::vm::clock::Halt::Divergence);
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

    /// Hands a finished call's result to the program.
    fn settle(&self, completion: Completion) -> Result<(), RunError> {
        let Some(settle) = &self.settle else { return Ok(()) };
        let (seq, ok) = (completion.seq, completion.ok);
        let clock = self.state.clock.clone();
        self.ctx.with(|ctx| {
            let f = settle
                .clone()
                .restore(&ctx)
                .map_err(|e| RunError::new(ErrorKind::Internal, e.to_string()))?;
            let result = (|| {
                let answer = super::host_call::answer_value(
                    &ctx,
                    ok,
                    &completion.payload,
                    completion.text.as_deref(),
                )?;
                f.call::<_, ()>((seq as f64, answer))
            })();
            super::host_call::keep_result(&self.state, completion);
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
        let mut queued: Vec<u64> = calls.queued.iter().map(|(seq, _)| *seq).collect();
        // Calls waiting for their tool's or server's slots have not started either.
        queued.extend(self.state.clock.slot_waits());
        calls.running.abort_all();
        calls.queued.clear();
        // Read after the abort: no decision comes after it.
        let decided = self.state.clock.decisions();
        self.state.ledger.borrow_mut().abandon_in_flight(note, &awaiting, &queued, &decided);
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

/// The compact JSON text of `program`'s input, when it has one; an error
/// of kind `limit` when it is over [`codemode_program::MAX_INPUT_BYTES`].
fn input_json(program: &Program) -> Result<Option<String>, RunError> {
    let Some(input) = program.input() else { return Ok(None) };
    let text = serde_json::to_string(input).expect("JSON values serialise");
    if text.len() > codemode_program::MAX_INPUT_BYTES {
        return Err(RunError::new(
            ErrorKind::Limit,
            format!(
                "the program's input is {} bytes of JSON, over the most a program takes ({} bytes); keep \
                 large data in files the program reads, and give their paths as input",
                text.len(),
                codemode_program::MAX_INPUT_BYTES
            ),
        ));
    }
    Ok(Some(text))
}

fn eval_options(filename: &str, strict: bool) -> EvalOptions {
    let mut o = EvalOptions::default();
    o.strict = strict;
    o.filename = Some(filename.to_owned());
    o
}

/// The error of a program over the source limit of `limits` (kind
/// `limit`), if it is.
pub(crate) fn over_source_limit(program: &Program, limits: &Limits) -> Option<RunError> {
    (program.source().len() > limits.source_bytes).then(|| {
        RunError::new(
            ErrorKind::Limit,
            format!(
                "the program is {} bytes, over the source limit of {} bytes ({})",
                program.source().len(),
                limits.source_bytes,
                codemode_base::limit_settings::setting("source_bytes")
            ),
        )
    })
}
