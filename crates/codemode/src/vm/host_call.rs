//! The one host binding: the function behind `tools.call` (and console).
//!
//! The prelude receives it as an argument and never puts it on globalThis.
//! `host(0, name, argsJson)` starts a call through the dispatcher;
//! `host(1, level, text)` records a console line; `host(2, what)` reads the
//! journaled clock or seed. See js-prelude/prelude.js for the return
//! protocol.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use rquickjs::{Ctx, Function, Value};
use tokio::runtime::Handle;
use tokio::task::{AbortHandle, Id, JoinError, JoinSet};

use super::calls::{Begun, CallFuture, CallHost};
use super::clock::RunClock;
use crate::journal::completion::Completion;
use crate::journal::record::How;
use crate::journal::replay::ReplayCall;
use crate::receipt::{Caller, Ledger};

/// The state the binding shares with the run loop. Lives on the VM thread.
pub(crate) struct HostState {
    pub ledger: RefCell<Ledger>,
    /// Where the program's calls go (the engine's dispatcher).
    pub dispatcher: Box<dyn CallHost>,
    pub calls: RefCell<InFlight>,
    /// Set when a run limit was reached inside a call; ends the run.
    pub exhausted: RefCell<Option<String>>,
    /// Set when the run is over: any JS that still runs (while the engine
    /// reads the outcome) can make no call and log nothing.
    pub closed: std::cell::Cell<bool>,
    /// Promises rejected with no handler (yet), with a description of the
    /// reason; reported in the logs when the run ends. Cleared before the
    /// runtime is dropped.
    pub unhandled: RefCell<Vec<(rquickjs::Persistent<Value<'static>>, String)>>,
    pub clock: Arc<RunClock>,
    /// The run's journal, unless journaling is off (docs/JOURNAL.md).
    pub journal: RefCell<Option<super::journaling::Journaling>>,
    /// The calls the run paused on. Once there is one, results of calls
    /// still running are journaled but no longer handed to the program,
    /// and the run ends `paused` when none is left.
    pub pending: RefCell<Vec<crate::journal::record::PendingRecord>>,
    /// Set when a replay found the program on another path; ends the run.
    pub diverged: RefCell<Option<String>>,
    /// Live calls a replay started before it caught up with the journal:
    /// they start once every journaled result is handed back, so nothing
    /// runs if the replay diverges before.
    pub held: RefCell<Vec<(u64, CallFuture)>>,
    /// For each group of [`super::late_builtins::GROUPS`], whether the
    /// program's first use of one of its globals made them (`None` until
    /// then; `Some(false)` when they could not be installed).
    pub late_builtins: [std::cell::Cell<Option<bool>>; 4],
    /// The prelude's `installDate`, which the first use of `Date` calls
    /// once QuickJS's Date is made (cleared before the runtime goes).
    pub date_shim: RefCell<Option<rquickjs::Persistent<Function<'static>>>>,
    /// Set (to the group, as "a Map or Set") when making a late built-in
    /// group ran out of memory, which may have left it half made: the run
    /// ends as kind `memory` whatever the program does next (it may still
    /// catch QuickJS's `null` when not even an error object could be
    /// made), and it makes no more calls.
    pub out_of_memory: std::cell::Cell<Option<&'static str>>,
    /// The last results the program got, for the hints of a run that
    /// fails on a result's shape.
    pub recent: RefCell<super::recent::Recent>,
}

/// Calls that did not answer at once: running on the tool runtime, or
/// waiting for a free slot.
pub(crate) struct InFlight {
    pub running: JoinSet<Completion>,
    /// The seq of each running task, and what aborts it; shared with the
    /// run's clock, so the overrun watch can abort them.
    pub seq_of: super::clock::RunningCalls,
    pub queued: VecDeque<(u64, CallFuture)>,
    pub max: usize,
    pub tools: Handle,
}

impl InFlight {
    /// Calls run on `tools`, `max` at once, their tasks listed in
    /// `seq_of` (the run clock's [`RunClock::running_calls`], or a map of
    /// their own).
    pub(crate) fn new(max: usize, tools: Handle, seq_of: super::clock::RunningCalls) -> Self {
        InFlight { running: JoinSet::new(), seq_of, queued: VecDeque::new(), max, tools }
    }

    /// The seqs of the calls running on the tool runtime.
    pub(crate) fn running_seqs(&self) -> Vec<u64> {
        self.running().values().map(|(seq, _)| *seq).collect()
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<Id, (u64, AbortHandle)>> {
        self.seq_of.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts `future` on the tool runtime, or queues it when every slot is
    /// taken.
    pub(crate) fn start(&mut self, seq: u64, future: CallFuture) {
        if self.running.len() < self.max {
            let handle = self.running.spawn_on(future, &self.tools);
            self.running().insert(handle.id(), (seq, handle));
        } else {
            self.queued.push_back((seq, future));
        }
    }

    /// Starts queued calls while slots are free.
    pub(crate) fn fill(&mut self) {
        while self.running.len() < self.max {
            let Some((seq, future)) = self.queued.pop_front() else { break };
            self.start(seq, future);
        }
    }

    /// Whether a new call may start now (the in-flight limit is not reached
    /// and nothing is waiting before it).
    pub(crate) fn has_free_slot(&self) -> bool {
        self.running.len() < self.max && self.queued.is_empty()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty() && self.queued.is_empty()
    }

    /// The completion of a call that ended on the tool runtime (`joined`
    /// from the join set; a task that panicked becomes a failed call of the
    /// tool `ledger` names, with the decision the gate made, as `clock`
    /// knows it), after which queued calls take the freed slot. A
    /// completion with seq 0 belongs to no call (or to a call cancelled
    /// with [`InFlight::cancel_where`]) and is to be ignored.
    pub(crate) fn ended(
        &mut self,
        joined: Result<(Id, Completion), JoinError>,
        ledger: &Ledger,
        clock: &RunClock,
    ) -> Completion {
        let completion = match joined {
            Ok((id, c)) => {
                // A call the overrun watch aborted after it ended is read
                // as it ended.
                self.running().remove(&id);
                c
            }
            Err(e) => {
                let seq = self.running().remove(&e.id()).map_or(0, |(seq, _)| seq);
                let tool = if seq > 0 { ledger.tool_of(seq).to_owned() } else { String::new() };
                let decision = clock.decision_of(seq).unwrap_or_else(|| {
                    if seq > 0 { ledger.decision_of(seq) } else { crate::receipt::Decision::Auto }
                });
                Completion::panicked(seq, &tool, decision)
            }
        };
        self.fill();
        completion
    }

    /// Cancels the running calls whose seq `cancel` picks, and every queued
    /// call; returns the seqs of the queued ones. The cancelled tasks leave
    /// the join set as completions of seq 0.
    pub(crate) fn cancel_where(&mut self, cancel: impl Fn(u64) -> bool) -> Vec<u64> {
        self.running().retain(|_, (seq, handle)| {
            if cancel(*seq) {
                handle.abort();
                false
            } else {
                true
            }
        });
        self.queued.drain(..).map(|(seq, _)| seq).collect()
    }
}

/// Waits for the next call in `running` to end, or for the run to have to
/// look at its clock again: `None` when the deadline passes, or the clock
/// stops, starts again or is cancelled. While it waits the run loop is
/// idle, so the clock stops if every call in `running` waits on a person
/// (vm/clock.rs).
pub(crate) async fn next_ended(
    running: &mut JoinSet<Completion>,
    clock: &RunClock,
) -> Option<Result<(Id, Completion), JoinError>> {
    let _idle = super::clock::Idle::on(clock, running.len());
    tokio::select! {
        biased;
        joined = running.join_next_with_id() => joined,
        () = clock.deadline_or_change() => None,
    }
}

/// Makes the binding function for one VM.
pub(crate) fn binding<'js>(ctx: &Ctx<'js>, state: Rc<HostState>) -> rquickjs::Result<Function<'js>> {
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              op: i32,
              a: rquickjs::String<'js>,
              b: Value<'js>|
              -> rquickjs::Result<Value<'js>> {
            fn text<'a, 'js>(
                ctx: &Ctx<'js>,
                b: &'a Value<'js>,
            ) -> rquickjs::Result<&'a rquickjs::String<'js>> {
                b.as_string()
                    .ok_or_else(|| rquickjs::Exception::throw_internal(ctx, "the host expected text"))
            }
            match op {
                // Checked before the name and arguments are read out of
                // the VM, so each call of a loop that catches the refusals
                // costs next to nothing until the interrupt check stops it.
                0 if let Some(why) = stopping(&state.clock) => Err(uncatchable(&ctx, why)),
                // The arguments as JSON text, or as the value itself, which
                // is written here when that runs no code (else `undefined`
                // back: the prelude serialises them).
                0 if !b.is_string() => match super::args_json::write(&ctx, &b) {
                    Some(json) => call(&ctx, &state, &well_formed(&a)?, &json),
                    None => Ok(Value::new_undefined(ctx)),
                },
                0 => call(&ctx, &state, &well_formed(&a)?, &text(&ctx, &b)?.to_string()?),
                1 => {
                    state.ledger.borrow_mut().log(&a.to_string()?, &well_formed(text(&ctx, &b)?)?);
                    Ok(Value::new_undefined(ctx))
                }
                2 => nondeterministic(&ctx, &state, &a.to_string()?),
                _ => Err(rquickjs::Exception::throw_internal(&ctx, "unknown host operation")),
            }
        },
    )
}

/// `s` as text, each lone surrogate replaced by U+FFFD, as
/// `String.prototype.toWellFormed` does. QuickJS hands a lone surrogate
/// out as its 3-byte generalized UTF-8 form (WTF-8), which is not UTF-8.
pub(super) fn well_formed(s: &rquickjs::String<'_>) -> rquickjs::Result<String> {
    match s.to_string() {
        Err(rquickjs::Error::Utf8(_)) => {}
        other => return other,
    }
    let ctx = s.ctx().as_raw().as_ptr();
    let mut len = 0usize;
    // SAFETY: `s` is a live string of this context; the C string QuickJS
    // returns is `len` bytes long and stays valid until it is freed below.
    #[allow(unsafe_code)]
    unsafe {
        let ptr = rquickjs::qjs::JS_ToCStringLen(ctx, &mut len, s.as_raw());
        if ptr.is_null() {
            return Err(rquickjs::Error::Exception);
        }
        let text = wtf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len));
        rquickjs::qjs::JS_FreeCString(ctx, ptr);
        Ok(text)
    }
}

/// Decodes WTF-8 `bytes`, each encoded lone surrogate (`ED A0..BF 80..BF`)
/// becoming one U+FFFD (any other invalid sequence, which QuickJS does not
/// make, becomes U+FFFD per the UTF-8 decoder's error length).
fn wtf8_lossy(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(rest) => {
                out.push_str(rest);
                return out;
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{FFFD}');
                let surrogate = rest.len() >= 3
                    && rest[0] == 0xED
                    && (0xA0..=0xBF).contains(&rest[1])
                    && (0x80..=0xBF).contains(&rest[2]);
                let skip = if surrogate { 3 } else { e.error_len().unwrap_or(rest.len()) };
                bytes = &rest[skip..];
            }
        }
    }
}

/// `host(2, "now")`: the clock for `Date`; `host(2, "seed")`: the seed of
/// `Math.random` as `"a,b,c,d"`. Journaled, and replayed on a resume.
fn nondeterministic<'js>(ctx: &Ctx<'js>, state: &HostState, what: &str) -> rquickjs::Result<Value<'js>> {
    let mut journal = state.journal.borrow_mut();
    match what {
        "now" => {
            let v = match journal.as_mut() {
                Some(j) => j.now(),
                None => super::journaling::now_ms(),
            };
            Ok(Value::new_number(ctx.clone(), v))
        }
        "seed" => {
            let seed = match journal.as_mut() {
                Some(j) => j.seed(),
                None => super::journaling::new_seed(),
            };
            let text = format!("{},{},{},{}", seed[0], seed[1], seed[2], seed[3]);
            Ok(rquickjs::String::from_str(ctx.clone(), &text)?.into_value())
        }
        _ => Err(rquickjs::Exception::throw_internal(ctx, "unknown host value")),
    }
}

/// `host(0, tool, argsJson)`: one `tools.call` of the program. Answers a
/// settled call's value, or the seq of a call left running (or held, or
/// answered in its turn); throws uncatchably when the run is stopping.
fn call<'js>(ctx: &Ctx<'js>, state: &HostState, tool: &str, args_json: &str) -> rquickjs::Result<Value<'js>> {
    if let Some(answer) = refused_while_stopping(ctx, state, tool) {
        return answer;
    }
    let slot_free = state.calls.borrow().has_free_slot();
    let seq = state.ledger.borrow().calls_made() as u64 + 1;
    let mut journal = state.journal.borrow_mut();
    // On a resume: what the journal says of this call.
    let replayed = journal.as_mut().and_then(|j| j.replay.as_mut()).map(|r| {
        let answer = r.call(seq, tool, Caller::Program, args_json);
        (answer, r.caught_up())
    });
    let (begun, journaled, hold) = match start_call(state, seq, tool, args_json, slot_free, replayed) {
        Start::Begun { begun, journaled, hold } => (begun, journaled, hold),
        Start::Diverged => return error_value(ctx, &stopping_refusal(tool)),
        Start::Inline(c) => {
            drop(journal);
            return settled_value(ctx, state, c);
        }
        Start::InTurn => return Ok(Value::new_number(ctx.clone(), seq as f64)),
    };
    // Past the journal: something was gated, or a new call line is
    // written. A pending call held until the replay catches up is not yet.
    if !hold || !journaled {
        state.clock.go_live();
    }
    if let Some(j) = journal.as_mut() {
        if !journaled {
            j.log.call_made(seq, tool, Caller::Program, args_json);
        }
        // Its start will be made durable with every line before it.
        if state.dispatcher.take_durable_begun() {
            j.log.hand_over();
        }
    }
    let settled = match begun {
        Begun::Running { seq, future } if hold => {
            state.held.borrow_mut().push((seq, future));
            return Ok(Value::new_number(ctx.clone(), seq as f64));
        }
        Begun::Running { seq, future } => {
            state.calls.borrow_mut().start(seq, future);
            return Ok(Value::new_number(ctx.clone(), seq as f64));
        }
        Begun::Settled(c) => c,
        Begun::Exhausted { completion, reason } => {
            *state.exhausted.borrow_mut() = Some(reason);
            state.clock.halt(super::clock::Halt::Limit);
            completion
        }
    };
    if let Some(j) = journal.as_mut() {
        j.log.call_ended(How::Inline, &settled);
    }
    drop(journal);
    settled_value(ctx, state, settled)
}

/// The answer to a call made while the run is stopping, if it is: an
/// uncatchable error when it ran out of memory or over its call budget, a
/// refusal when a replay diverged.
fn refused_while_stopping<'js>(
    ctx: &Ctx<'js>,
    state: &HostState,
    tool: &str,
) -> Option<rquickjs::Result<Value<'js>>> {
    if state.out_of_memory.get().is_some() {
        // A built-in may be half made: nothing the program does now may
        // reach a tool.
        return Some(Err(uncatchable(ctx, "the run ran out of memory and is stopping")));
    }
    if state.exhausted.borrow().is_some() {
        // The run is over its budget: the program ends here.
        return Some(Err(uncatchable(ctx, "the run is over its call budget and is stopping")));
    }
    if state.diverged.borrow().is_some() {
        return Some(error_value(ctx, &stopping_refusal(tool)));
    }
    None
}

/// How a program's call starts.
enum Start {
    /// The dispatcher began it. `journaled`: the journal already holds its
    /// call line; `hold`: it waits until the replay catches up.
    Begun { begun: Begun, journaled: bool, hold: bool },
    /// The replay found another call here: the run stops (the call is
    /// refused).
    Diverged,
    /// Answered from the journal at once (opened and finished in the ledger).
    Inline(Completion),
    /// Answered from the journal in its turn (opened in the ledger).
    InTurn,
}

/// Starts call `seq` of `tool` as `replayed` (what a replay's journal says
/// of it, and whether the replay has caught up) or, with no replay, live.
fn start_call(
    state: &HostState,
    seq: u64,
    tool: &str,
    args_json: &str,
    slot_free: bool,
    replayed: Option<(ReplayCall, bool)>,
) -> Start {
    let begin = |slot_free: bool| {
        state.dispatcher.begin(&mut state.ledger.borrow_mut(), tool, args_json, Caller::Program, slot_free)
    };
    let (begun, journaled, hold) = match replayed {
        None | Some((ReplayCall::Live, true)) => (begin(slot_free), false, false),
        // Live calls made before the replay caught up start once it has
        // (not polled here: slot_free false).
        Some((ReplayCall::Live, false)) => (begin(false), false, true),
        // A pending call with no decision: the gate decides again.
        Some((ReplayCall::Undecided, caught_up)) => (begin(caught_up && slot_free), true, !caught_up),
        Some((ReplayCall::Diverged(message), _)) => {
            *state.diverged.borrow_mut() = Some(message);
            state.clock.halt(super::clock::Halt::Divergence);
            return Start::Diverged;
        }
        Some((ReplayCall::Inline(c), _)) => {
            let mut ledger = state.ledger.borrow_mut();
            ledger.open(tool, Caller::Program, c.end.decision, None);
            ledger.finish(seq, c.end.clone());
            return Start::Inline(c);
        }
        Some((ReplayCall::InTurn { decision }, _)) => {
            state.ledger.borrow_mut().open(tool, Caller::Program, decision, None);
            return Start::InTurn;
        }
        Some((ReplayCall::Allowed { pending, note }, caught_up)) => {
            let begun = state.dispatcher.begin_allowed(
                &mut state.ledger.borrow_mut(),
                &pending,
                Caller::Program,
                note,
            );
            (begun, true, !caught_up)
        }
        Some((ReplayCall::Denied { reason, note, kind }, caught_up)) => {
            let begun = state.dispatcher.begin_denied(
                &mut state.ledger.borrow_mut(),
                tool,
                Caller::Program,
                reason,
                note,
                kind,
            );
            (begun, true, !caught_up)
        }
        // Running when the run's process ended (a recovery).
        Some((ReplayCall::Unknown, caught_up)) => {
            let begun = state.dispatcher.begin_unknown(
                &mut state.ledger.borrow_mut(),
                tool,
                args_json,
                Caller::Program,
                caught_up && slot_free,
            );
            (begun, true, !caught_up)
        }
    };
    Start::Begun { begun, journaled, hold }
}

/// Why the run is stopping from outside the program, when it is: its
/// deadline passed (never while an approval is pending), or it was
/// cancelled.
fn stopping(clock: &RunClock) -> Option<&'static str> {
    if clock.is_cancelled() {
        Some("the run was cancelled and is stopping")
    } else if clock.expired() {
        Some("the run passed its deadline and is stopping")
    } else {
        None
    }
}

/// What a call made while the run stops on its deadline, a cancel or its
/// call budget gets: an error the program cannot catch (QuickJS's own kind
/// for an interrupt), so a loop that catches every refusal and does slow
/// work between calls (an 8 MiB `JSON.stringify` per iteration) ends at
/// this call rather than at QuickJS's next interrupt check, which comes
/// only every 10,000 branches. The call is not made and not recorded; the
/// engine reads the run's end from the clock, as for an interrupt.
fn uncatchable(ctx: &Ctx<'_>, why: &str) -> rquickjs::Error {
    let error =
        match rquickjs::Exception::from_message(ctx.clone(), &format!("{why}; this call was not made")) {
            Ok(e) => e.into_value(),
            Err(e) => return e,
        };
    throw_uncatchable(ctx, error)
}

/// Throws `error` (an object) as an error no `catch` or `finally` of the
/// program handles.
pub(super) fn throw_uncatchable<'js>(ctx: &Ctx<'js>, error: Value<'js>) -> rquickjs::Error {
    let raw = error.as_raw();
    let thrown = ctx.throw(error);
    // SAFETY: `raw` is the error object just thrown, kept alive by the
    // context's current exception; JS_SetUncatchableError only sets a flag
    // on that object (QuickJS does the same for its own interrupts).
    #[allow(unsafe_code)]
    unsafe {
        rquickjs::qjs::JS_SetUncatchableError(ctx.as_raw().as_ptr(), raw);
    }
    thrown
}

/// The refusal of a call made while the run stops on a divergence.
fn stopping_refusal(tool: &str) -> String {
    serde_json::json!({
        "kind": "refused",
        "message": "the run is stopping: its replay took another path than the journal",
        "tool": crate::receipt::spill::cut_text(tool),
        "seq": null,
    })
    .to_string()
}

/// What `tools.call` returns for a call that ended at once: its answer
/// ([`answer_value`]).
fn settled_value<'js>(
    ctx: &Ctx<'js>,
    state: &HostState,
    settled: Completion,
) -> rquickjs::Result<Value<'js>> {
    let value = answer_value(ctx, settled.ok, &settled.payload, settled.text.as_deref())?;
    keep_result(state, settled);
    Ok(value)
}

/// Keeps the result of a call that succeeded, once the program has it
/// ([`super::recent`]): its text is moved, not copied.
pub(crate) fn keep_result(state: &HostState, settled: Completion) {
    let Completion { seq, ok, payload, text, .. } = settled;
    let ledger = state.ledger.borrow();
    if !ok || seq == 0 || seq > ledger.calls_made() as u64 {
        return;
    }
    state.recent.borrow_mut().keep(seq, ledger.tool_of(seq), payload, text.is_some());
}

/// The start and end of the envelope of a call that returned JSON content
/// with no metadata and nothing cut, as the engine writes it
/// (`Finisher::succeeded`): the content's JSON goes between them.
const BARE_HEAD: &str = "{\"content\":";
const BARE_TAIL: &str = ",\"metadata\":null,\"truncated\":null}";

/// The content's JSON text of an envelope (`payload`) with no metadata and
/// nothing cut; `None` for any other envelope.
///
/// Exact for every envelope the engine writes: it ends with
/// `,"metadata":M,"truncated":T}` for JSON values `M` and `T`, and a JSON
/// value's text ends in `null` only when it is `null` (objects end in `}`,
/// arrays in `]`, strings in `"`), so an envelope that ends with
/// [`BARE_TAIL`] has both null, and what lies between the head and the
/// tail is the content's JSON text.
pub(crate) fn bare_content(payload: &str) -> Option<&str> {
    payload.strip_prefix(BARE_HEAD)?.strip_suffix(BARE_TAIL)
}

/// A call's answer as the prelude takes it (`js-prelude/prelude.js`, from
/// `tools.call` for a call that ended at once, and from `settle` for one
/// that ended later):
/// - `"..."`: it succeeded with JSON content, no metadata and nothing
///   cut: the content's JSON (the prelude makes `{content, metadata:
///   null, truncated: null}`; JSON.parse of the whole envelope cost a
///   call about a quarter of its time);
/// - `[envelope, true]`: it succeeded otherwise: the whole envelope's JSON;
/// - `[rest, text]`: it succeeded with text content: `{metadata,
///   truncated}` JSON and the text;
/// - `[error]`: it was refused or failed: the error's JSON.
///
/// The journal keeps the whole envelope (`payload`) either way.
pub(crate) fn answer_value<'js>(
    ctx: &Ctx<'js>,
    ok: bool,
    payload: &str,
    text: Option<&str>,
) -> rquickjs::Result<Value<'js>> {
    let string = |s: &str| Ok(rquickjs::String::from_str(ctx.clone(), s)?.into_value());
    if !ok {
        return error_value(ctx, payload);
    }
    if let Some(text) = text {
        return own_array(ctx, [string(payload)?, string(text)?]);
    }
    if let Some(content) = bare_content(payload) {
        return string(content);
    }
    own_array(ctx, [string(payload)?, Value::new_bool(ctx.clone(), true)])
}

/// A refusal or failure for the prelude: `[errorJson]`.
fn error_value<'js>(ctx: &Ctx<'js>, payload: &str) -> rquickjs::Result<Value<'js>> {
    own_array(ctx, [rquickjs::String::from_str(ctx.clone(), payload)?.into_value()])
}

/// An array of `items` whose elements are defined as its own properties:
/// setting them would run a setter a program defined on
/// `Array.prototype` (for "0" or "1"), and the prelude would read what the
/// setter chose.
fn own_array<'js, const N: usize>(ctx: &Ctx<'js>, items: [Value<'js>; N]) -> rquickjs::Result<Value<'js>> {
    use rquickjs::object::Property;
    let array = rquickjs::Array::new(ctx.clone())?;
    for (i, item) in items.into_iter().enumerate() {
        array.as_object().prop(i as u32, Property::from(item).writable().enumerable().configurable())?;
    }
    Ok(array.into_value())
}

#[cfg(test)]
mod tests {
    use super::{bare_content, wtf8_lossy};

    #[test]
    fn only_an_envelope_without_metadata_or_cut_is_bare() {
        let bare = r#"{"content":{"a":1,"metadata":null,"truncated":null},"metadata":null,"truncated":null}"#;
        assert_eq!(bare_content(bare), Some(r#"{"a":1,"metadata":null,"truncated":null}"#));
        assert_eq!(bare_content(r#"{"content":null,"metadata":null,"truncated":null}"#), Some("null"));
        assert_eq!(bare_content(r#"{"content":[1],"metadata":{"m":null},"truncated":null}"#), None);
        assert_eq!(
            bare_content(r#"{"content":"x","metadata":null,"truncated":{"bytes":9,"note":null}}"#),
            None
        );
        assert_eq!(bare_content(r#"{"metadata":null,"truncated":null}"#), None);
        assert_eq!(bare_content(""), None);
    }

    #[test]
    fn lone_surrogates_become_one_replacement_character_each() {
        assert_eq!(wtf8_lossy(b"plain"), "plain");
        assert_eq!(wtf8_lossy(b"a\xED\xA0\x80b"), "a\u{FFFD}b");
        assert_eq!(wtf8_lossy(b"\xED\xBF\xBF\xED\xA0\x80"), "\u{FFFD}\u{FFFD}");
        assert_eq!(wtf8_lossy("é\u{1F600}".as_bytes()), "é\u{1F600}");
        assert_eq!(wtf8_lossy(b"x\xFFy"), "x\u{FFFD}y");
        assert_eq!(wtf8_lossy(b"x\xED"), "x\u{FFFD}");
    }
}
