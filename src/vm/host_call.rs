//! The one host binding: the function behind `tools.call` (and console).
//!
//! The prelude receives it as an argument and never puts it on globalThis.
//! `host(0, name, argsJson)` starts a call through the dispatcher;
//! `host(1, level, text)` records a console line; `host(2, what)` reads the
//! journaled clock or seed. See js-prelude/prelude.js for the return
//! protocol. Also here: the accessors that make the typed arrays on first
//! use ([`lazy_typed_arrays`]).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use rquickjs::{Ctx, Function, Value};
use tokio::runtime::Handle;
use tokio::task::{AbortHandle, Id, JoinError, JoinSet};

use super::clock::RunClock;
use crate::engine::dispatch::{Begun, CallFuture, Completion, Dispatcher};
use crate::journal::replay::ReplayCall;
use crate::receipt::{Caller, Ledger};

/// The state the binding shares with the run loop. Lives on the VM thread.
pub(crate) struct HostState {
    pub ledger: RefCell<Ledger>,
    pub dispatcher: Dispatcher,
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
    /// Set once a resumed run went past its journal: a call was gated or
    /// started live. Until then, a resume that stops leaves the run paused.
    pub live: std::cell::Cell<bool>,
    /// Whether the program's first use of a typed array made them (`None`
    /// until then; `Some(false)` when they could not be installed, see
    /// [`lazy_typed_arrays`]).
    pub typed_arrays: std::cell::Cell<Option<bool>>,
}

/// Calls that did not answer at once: running on the tool runtime, or
/// waiting for a free slot.
pub(crate) struct InFlight {
    pub running: JoinSet<Completion>,
    /// The seq of each running task, and what aborts it.
    pub seq_of: HashMap<tokio::task::Id, (u64, AbortHandle)>,
    pub queued: VecDeque<(u64, CallFuture)>,
    pub max: usize,
    pub tools: Handle,
}

impl InFlight {
    pub(crate) fn new(max: usize, tools: Handle) -> Self {
        InFlight { running: JoinSet::new(), seq_of: HashMap::new(), queued: VecDeque::new(), max, tools }
    }

    /// Starts `future` on the tool runtime, or queues it when every slot is
    /// taken.
    pub(crate) fn start(&mut self, seq: u64, future: CallFuture) {
        if self.running.len() < self.max {
            let handle = self.running.spawn_on(future, &self.tools);
            self.seq_of.insert(handle.id(), (seq, handle));
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
                self.seq_of.remove(&id);
                c
            }
            Err(e) => {
                let seq = self.seq_of.remove(&e.id()).map_or(0, |(seq, _)| seq);
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
        self.seq_of.retain(|_, (seq, handle)| {
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
    let remaining = clock.remaining();
    let sleep = async {
        match remaining {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        joined = running.join_next_with_id() => joined,
        _ = clock.changed() => None,
        _ = sleep => None,
    }
}

/// Makes the binding function for one VM.
pub(crate) fn binding<'js>(ctx: &Ctx<'js>, state: Rc<HostState>) -> rquickjs::Result<Function<'js>> {
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              op: i32,
              a: rquickjs::String<'js>,
              b: rquickjs::String<'js>|
              -> rquickjs::Result<Value<'js>> {
            match op {
                // Checked before the name and arguments are read out of
                // the VM, so each call of a loop that catches the refusals
                // costs next to nothing until the interrupt check stops it.
                0 if let Some(why) = stopping(&state.clock) => Err(uncatchable(&ctx, why)),
                0 => call(&ctx, &state, &well_formed(&a)?, &b.to_string()?),
                1 => {
                    state.ledger.borrow_mut().log(&a.to_string()?, &b.to_string()?);
                    Ok(Value::new_undefined(ctx))
                }
                2 => nondeterministic(&ctx, &state, &a.to_string()?),
                _ => Err(rquickjs::Exception::throw_internal(&ctx, "unknown host operation")),
            }
        },
    )
}

/// The globals QuickJS's typed array intrinsic defines (a unit test checks
/// the list against QuickJS).
pub(crate) const TYPED_ARRAY_GLOBALS: [&str; 16] = [
    "ArrayBuffer",
    "SharedArrayBuffer",
    "Uint8ClampedArray",
    "Int8Array",
    "Uint8Array",
    "Int16Array",
    "Uint16Array",
    "Int32Array",
    "Uint32Array",
    "BigInt64Array",
    "BigUint64Array",
    "Float16Array",
    "Float32Array",
    "Float64Array",
    "DataView",
    "Atomics",
];

/// Makes the typed arrays (`ArrayBuffer`, the typed array constructors,
/// `DataView`, `Atomics`) on the program's first use: making them with the
/// context cost about a tenth of a VM's start (and 13 KiB of its memory),
/// and few programs use them. Until then each of their globals is an
/// accessor (configurable, not enumerable; one host function serves as
/// its getter and setter); the first read or write of any of them adds
/// QuickJS's typed array intrinsic, whose globals replace the accessors
/// with the usual data properties, so the program sees the same
/// constructors, prototypes and behaviour as with eager ones. A program
/// that froze or sealed globalThis first cannot have them installed: the
/// access throws a TypeError that says so.
pub(crate) fn lazy_typed_arrays<'js>(ctx: &Ctx<'js>, state: &Rc<HostState>) -> rquickjs::Result<()> {
    let global = ctx.globals();
    let raw_ctx = ctx.as_raw().as_ptr();
    for name in TYPED_ARRAY_GLOBALS {
        let state = state.clone();
        let accessor = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  value: rquickjs::function::Opt<Value<'js>>|
                  -> rquickjs::Result<Value<'js>> {
                typed_array_global(&ctx, &state, name, value.0)
            },
        )?;
        // SAFETY: `raw_ctx` is this live context; the atom is made from
        // `name`'s bytes and freed after use; JS_DefinePropertyGetSet takes
        // (and frees) one reference to the getter and one to the setter,
        // which the two JS_DupValue calls provide (`accessor` keeps its own).
        #[allow(unsafe_code)]
        let status = unsafe {
            let atom = rquickjs::qjs::JS_NewAtomLen(raw_ctx, name.as_ptr().cast(), name.len() as _);
            let f = accessor.as_raw();
            let status = rquickjs::qjs::JS_DefinePropertyGetSet(
                raw_ctx,
                global.as_raw(),
                atom,
                rquickjs::qjs::JS_DupValue(raw_ctx, f),
                rquickjs::qjs::JS_DupValue(raw_ctx, f),
                rquickjs::qjs::JS_PROP_CONFIGURABLE as _,
            );
            rquickjs::qjs::JS_FreeAtom(raw_ctx, atom);
            status
        };
        if status < 0 {
            return Err(rquickjs::Error::Exception);
        }
    }
    Ok(())
}

/// The accessor of typed array global `name`: a read (`value` `None`) or a
/// write of it, after the typed arrays were made.
fn typed_array_global<'js>(
    ctx: &Ctx<'js>,
    state: &HostState,
    name: &str,
    value: Option<Value<'js>>,
) -> rquickjs::Result<Value<'js>> {
    // Only the first access makes them. No program code runs while they
    // are made (see make_typed_arrays), so this accessor is not entered
    // again meanwhile; once made, an accessor the program kept calls
    // through to the global.
    let made = match state.typed_arrays.get() {
        Some(made) => made,
        None => {
            state.typed_arrays.set(Some(false));
            // An error here is the VM's own (out of memory, the run
            // stopping): it stays the program's error, uncatchable as it is.
            let made = make_typed_arrays(ctx, name)?;
            state.typed_arrays.set(Some(made));
            made
        }
    };
    if !made {
        return Err(rquickjs::Exception::throw_type(
            ctx,
            &format!(
                "{name} is not available: before the program first used a typed array, it froze, sealed or made \
                 globalThis non-extensible, made a typed array global unconfigurable, or replaced \
                 Array.prototype.toString with a getter (or deleted it)"
            ),
        ));
    }
    // The intrinsic defined the global as a data property.
    let global = ctx.globals();
    match value {
        None => global.get(name),
        Some(v) => {
            global.set(name, v)?;
            Ok(Value::new_undefined(ctx.clone()))
        }
    }
}

/// Whether QuickJS's typed array intrinsic can run without running any of
/// the program's code. It reads `Array.prototype.toString` (to share it
/// with the typed arrays' prototype); were that a getter (or missing, so
/// the read went on up a prototype chain the program may have made a
/// proxy), the program's code would run in the middle of the intrinsic
/// and could define `Atomics`, on which QuickJS aborts the process. Every
/// other read of the intrinsic is of properties it has just made.
fn no_code_runs_in_the_intrinsic(ctx: &Ctx<'_>) -> bool {
    let Ok(array) = rquickjs::Array::new(ctx.clone()) else { return false };
    // The real Array.prototype: a new array's prototype, whatever the
    // global `Array` now is.
    let Some(proto) = array.as_object().get_prototype() else { return false };
    // SAFETY: `proto` is a live object of this context, an ordinary array
    // object (reading its own property runs no code).
    #[allow(unsafe_code)]
    let flags = unsafe { own_property_flags(ctx.as_raw().as_ptr(), proto.as_raw(), "toString") };
    flags.is_some_and(|flags| flags & rquickjs::qjs::JS_PROP_TMASK as std::ffi::c_int == 0)
}

/// Makes the typed arrays: false (nothing made, nothing changed) when that
/// could run program code, that is unless `Array.prototype.toString` is a
/// data property, globalThis is extensible and every typed array global
/// (the accessors, or values the program put there) is configurable; else
/// deletes those globals and adds QuickJS's typed array intrinsic, whose
/// definitions then all succeed and whose reads all meet objects it has
/// just made. (QuickJS aborts the process if the intrinsic meets an
/// existing `Atomics`, or a `Uint8Array` it reads back that has its
/// methods already: program code running inside it could make either.)
///
/// # Errors
/// The intrinsic failed (out of memory): the VM's pending exception.
fn make_typed_arrays(ctx: &Ctx<'_>, name: &str) -> rquickjs::Result<bool> {
    let raw_ctx = ctx.as_raw().as_ptr();
    let global = ctx.globals();
    // SAFETY: `raw_ctx` is this live context and `global` its global
    // object, an ordinary object: JS_IsExtensible and JS_GetOwnProperty
    // run no code on it. Atoms are made from the names' bytes and freed
    // after use, as are the values JS_GetOwnProperty fills in.
    #[allow(unsafe_code)]
    let ready = unsafe {
        rquickjs::qjs::JS_IsExtensible(raw_ctx, global.as_raw()) == 1
            && TYPED_ARRAY_GLOBALS.iter().all(|n| {
                own_property_flags(raw_ctx, global.as_raw(), n)
                    .is_none_or(|flags| flags & rquickjs::qjs::JS_PROP_CONFIGURABLE as std::ffi::c_int != 0)
            })
    };
    if !ready || !no_code_runs_in_the_intrinsic(ctx) {
        return Ok(false);
    }
    for n in TYPED_ARRAY_GLOBALS {
        // SAFETY: as above; deleting a configurable own property of an
        // ordinary object runs no code.
        #[allow(unsafe_code)]
        unsafe {
            let atom = rquickjs::qjs::JS_NewAtomLen(raw_ctx, n.as_ptr().cast(), n.len() as _);
            rquickjs::qjs::JS_DeleteProperty(raw_ctx, global.as_raw(), atom, 0);
            rquickjs::qjs::JS_FreeAtom(raw_ctx, atom);
        }
    }
    // SAFETY: `ctx` is this VM's live context, used on the thread that
    // owns it; JS_AddIntrinsicTypedArrays only creates the typed array
    // classes, prototypes and globals in it (what `Context::custom` does
    // when asked for them). It runs at most once per context (the state of
    // typed_array_global), under the conditions checked above.
    #[allow(unsafe_code)]
    let status = unsafe { rquickjs::qjs::JS_AddIntrinsicTypedArrays(raw_ctx) };
    if status < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(global.contains_key(name).unwrap_or(false))
}

/// The flags of `obj`'s own property `name`, if it has one.
///
/// # Safety
/// `ctx` is a live context and `obj` an ordinary object of it (reading its
/// own property runs no code).
#[allow(unsafe_code)]
unsafe fn own_property_flags(
    ctx: *mut rquickjs::qjs::JSContext,
    obj: rquickjs::qjs::JSValue,
    name: &str,
) -> Option<std::ffi::c_int> {
    // SAFETY: per the function's contract; the atom and the descriptor's
    // values (one reference each) are freed here.
    unsafe {
        let atom = rquickjs::qjs::JS_NewAtomLen(ctx, name.as_ptr().cast(), name.len() as _);
        let mut desc = std::mem::MaybeUninit::<rquickjs::qjs::JSPropertyDescriptor>::uninit();
        let found = rquickjs::qjs::JS_GetOwnProperty(ctx, desc.as_mut_ptr(), obj, atom);
        rquickjs::qjs::JS_FreeAtom(ctx, atom);
        if found != 1 {
            return None;
        }
        let desc = desc.assume_init();
        rquickjs::qjs::JS_FreeValue(ctx, desc.value);
        rquickjs::qjs::JS_FreeValue(ctx, desc.getter);
        rquickjs::qjs::JS_FreeValue(ctx, desc.setter);
        Some(desc.flags)
    }
}

/// `s` as text, each lone surrogate replaced by U+FFFD, as
/// `String.prototype.toWellFormed` does. QuickJS hands a lone surrogate
/// out as its 3-byte generalized UTF-8 form (WTF-8), which is not UTF-8.
fn well_formed(s: &rquickjs::String<'_>) -> rquickjs::Result<String> {
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

fn call<'js>(ctx: &Ctx<'js>, state: &HostState, tool: &str, args_json: &str) -> rquickjs::Result<Value<'js>> {
    if state.exhausted.borrow().is_some() {
        // The run is over its budget: the program ends here.
        return Err(uncatchable(ctx, "the run is over its call budget and is stopping"));
    }
    if state.diverged.borrow().is_some() {
        return error_value(ctx, &stopping_refusal(tool));
    }
    let slot_free = state.calls.borrow().has_free_slot();
    let seq = state.ledger.borrow().calls_made() as u64 + 1;
    let mut journal = state.journal.borrow_mut();
    // On a resume: what the journal says of this call.
    let replayed = journal.as_mut().and_then(|j| j.replay.as_mut()).map(|r| {
        let answer = r.call(seq, tool, Caller::Program, args_json);
        (answer, r.caught_up())
    });
    let (begun, journaled, hold) = match replayed {
        None | Some((ReplayCall::Live, true)) => (
            state.dispatcher.begin(
                &mut state.ledger.borrow_mut(),
                tool,
                args_json,
                Caller::Program,
                slot_free,
            ),
            false,
            false,
        ),
        // Live calls made before the replay caught up start once it has
        // (not polled here: slot_free false).
        Some((ReplayCall::Live, false)) => {
            let begun = state.dispatcher.begin(
                &mut state.ledger.borrow_mut(),
                tool,
                args_json,
                Caller::Program,
                false,
            );
            (begun, false, true)
        }
        // A pending call with no decision: the gate decides again.
        Some((ReplayCall::Undecided, caught_up)) => {
            let begun = state.dispatcher.begin(
                &mut state.ledger.borrow_mut(),
                tool,
                args_json,
                Caller::Program,
                caught_up && slot_free,
            );
            (begun, true, !caught_up)
        }
        Some((ReplayCall::Diverged(message), _)) => {
            *state.diverged.borrow_mut() = Some(message);
            state.clock.halt();
            return error_value(ctx, &stopping_refusal(tool));
        }
        Some((ReplayCall::Inline(c), _)) => {
            let mut ledger = state.ledger.borrow_mut();
            ledger.open(tool, Caller::Program, c.end.decision, None);
            ledger.finish(seq, c.end.clone());
            drop(ledger);
            drop(journal);
            return settled_value(ctx, c);
        }
        Some((ReplayCall::InTurn { decision }, _)) => {
            state.ledger.borrow_mut().open(tool, Caller::Program, decision, None);
            return Ok(Value::new_number(ctx.clone(), seq as f64));
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
        Some((ReplayCall::Denied { reason, note }, caught_up)) => {
            let begun = state.dispatcher.begin_denied(
                &mut state.ledger.borrow_mut(),
                tool,
                Caller::Program,
                reason,
                note,
            );
            (begun, true, !caught_up)
        }
    };
    // Past the journal: something was gated, or a new call line is
    // written. A pending call held until the replay catches up is not yet.
    if !hold || !journaled {
        state.live.set(true);
    }
    if let Some(j) = journal.as_mut()
        && !journaled
    {
        j.log.line(|out| crate::journal::record::write_call(out, seq, tool, Caller::Program, args_json));
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
            state.clock.halt();
            completion
        }
    };
    if let Some(j) = journal.as_mut() {
        j.log.line(|out| {
            crate::journal::record::write_done(out, crate::journal::record::How::Inline, &settled)
        });
    }
    drop(journal);
    settled_value(ctx, settled)
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

/// What `tools.call` returns for a call that ended at once.
fn settled_value<'js>(ctx: &Ctx<'js>, settled: Completion) -> rquickjs::Result<Value<'js>> {
    if let Some(text) = settled.text {
        let pair = rquickjs::Array::new(ctx.clone())?;
        pair.set(0, rquickjs::String::from_str(ctx.clone(), &settled.payload)?)?;
        pair.set(1, rquickjs::String::from_str(ctx.clone(), &text)?)?;
        return Ok(pair.into_value());
    }
    if !settled.ok {
        return error_value(ctx, &settled.payload);
    }
    Ok(rquickjs::String::from_str(ctx.clone(), &settled.payload)?.into_value())
}

/// A refusal or failure for the prelude: `[errorJson]`.
fn error_value<'js>(ctx: &Ctx<'js>, payload: &str) -> rquickjs::Result<Value<'js>> {
    let one = rquickjs::Array::new(ctx.clone())?;
    one.set(0, rquickjs::String::from_str(ctx.clone(), payload)?)?;
    Ok(one.into_value())
}

#[cfg(test)]
mod tests {
    use super::wtf8_lossy;

    /// The globals made lazily are exactly those QuickJS's typed array
    /// intrinsic adds.
    #[test]
    fn every_typed_array_global_is_listed() {
        use rquickjs::context::intrinsic::{Eval, TypedArrays};
        let names = |with: bool| -> Vec<String> {
            let rt = rquickjs::Runtime::new().unwrap();
            let ctx = if with {
                rquickjs::Context::custom::<(Eval, TypedArrays)>(&rt).unwrap()
            } else {
                rquickjs::Context::custom::<(Eval,)>(&rt).unwrap()
            };
            ctx.with(|ctx| ctx.eval::<Vec<String>, _>("Object.getOwnPropertyNames(globalThis)").unwrap())
        };
        let without = names(false);
        let mut added: Vec<String> = names(true).into_iter().filter(|n| !without.contains(n)).collect();
        added.sort();
        let mut listed: Vec<String> = super::TYPED_ARRAY_GLOBALS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(listed, added);
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
