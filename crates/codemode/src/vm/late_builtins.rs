//! Built-ins made on a program's first use of one: the typed arrays,
//! `Map`/`Set`/`WeakMap`/`WeakSet`, `WeakRef`/`FinalizationRegistry`, and
//! `Date` (with the prelude's journaled clock around it).
//!
//! Making them with every context cost about a fifth of a VM's start
//! (typed arrays 182k instructions, Map and Set 52k, Date and its shim
//! about 75k, WeakRef 10k) and 13 KiB of its memory, and many programs use
//! none of them. Their globals are
//! accessors until first used ([`install`]); the first use of any global
//! of a group adds QuickJS's intrinsic for that group, under conditions
//! that keep program code out of it (QuickJS aborts the process on what
//! such code could leave behind in the typed arrays': docs/SECURITY.md).

use std::ffi::c_int;
use std::rc::Rc;

use rquickjs::{Ctx, Function, Value, qjs};

use super::host_call::HostState;

/// A group of globals one QuickJS intrinsic defines.
pub(crate) struct LateBuiltins {
    /// The group in a message: "before the program first used {what}".
    what: &'static str,
    /// Its globals in a message: "made {one_global} unconfigurable".
    one_global: &'static str,
    /// Its globals (a unit test checks each list against QuickJS).
    pub(crate) globals: &'static [&'static str],
    /// QuickJS's intrinsic that makes them.
    add: unsafe extern "C" fn(*mut qjs::JSContext) -> c_int,
    /// Whether the intrinsic reads `Array.prototype.toString` (see
    /// [`no_code_runs_in_the_intrinsic`]).
    reads_array_to_string: bool,
    /// Whether the prelude's `installDate` wraps what the intrinsic made
    /// (QuickJS's `Date`, whose clock must come from the host).
    date_shim: bool,
}

/// The groups, in the order of [`HostState::late_builtins`].
pub(crate) const GROUPS: [LateBuiltins; 4] = [
    LateBuiltins {
        what: "a typed array",
        one_global: "a typed array global",
        globals: &[
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
        ],
        add: qjs::JS_AddIntrinsicTypedArrays,
        reads_array_to_string: true,
        date_shim: false,
    },
    LateBuiltins {
        what: "a Map or Set",
        one_global: "Map, Set, WeakMap or WeakSet",
        globals: &["Map", "Set", "WeakMap", "WeakSet"],
        add: qjs::JS_AddIntrinsicMapSet,
        reads_array_to_string: false,
        date_shim: false,
    },
    LateBuiltins {
        what: "a WeakRef or FinalizationRegistry",
        one_global: "WeakRef or FinalizationRegistry",
        globals: &["WeakRef", "FinalizationRegistry"],
        add: qjs::JS_AddIntrinsicWeakRef,
        reads_array_to_string: false,
        date_shim: false,
    },
    LateBuiltins {
        what: "Date",
        one_global: "Date",
        globals: &["Date"],
        add: qjs::JS_AddIntrinsicDate,
        reads_array_to_string: false,
        date_shim: true,
    },
];

/// Makes each group's globals accessors until first used: until then each
/// is configurable, not enumerable, and one host function serves as its
/// getter and setter; the first read or write of any global of a group
/// adds QuickJS's intrinsic for it, whose globals replace the accessors
/// with the usual data properties, so the program sees the same
/// constructors, prototypes and behaviour as with eager ones. A program
/// that froze or sealed globalThis first cannot have them installed: the
/// access throws a TypeError that says so.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, state: &Rc<HostState>) -> rquickjs::Result<()> {
    let global = ctx.globals();
    let raw_ctx = ctx.as_raw().as_ptr();
    for (group, builtins) in GROUPS.iter().enumerate() {
        for &name in builtins.globals {
            let state = state.clone();
            let accessor = Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>,
                      value: rquickjs::function::Opt<Value<'js>>|
                      -> rquickjs::Result<Value<'js>> {
                    late_global(&ctx, &state, group, name, value.0)
                },
            )?;
            // SAFETY: `raw_ctx` is this live context; JS_DefinePropertyGetSet
            // takes (and frees) one reference to the getter and one to the
            // setter, which the two JS_DupValue calls provide (`accessor`
            // keeps its own).
            #[allow(unsafe_code)]
            let status = with_atom(raw_ctx, name, |atom| unsafe {
                let f = accessor.as_raw();
                qjs::JS_DefinePropertyGetSet(
                    raw_ctx,
                    global.as_raw(),
                    atom,
                    qjs::JS_DupValue(raw_ctx, f),
                    qjs::JS_DupValue(raw_ctx, f),
                    qjs::JS_PROP_CONFIGURABLE as _,
                )
            });
            if status < 0 {
                return Err(rquickjs::Error::Exception);
            }
        }
    }
    Ok(())
}

/// The accessor of global `name` of group `group`: a read (`value` `None`)
/// or a write of it, after the group was made.
fn late_global<'js>(
    ctx: &Ctx<'js>,
    state: &HostState,
    group: usize,
    name: &str,
    value: Option<Value<'js>>,
) -> rquickjs::Result<Value<'js>> {
    // Only the first access makes them. No program code runs while they
    // are made (see make_group), so this accessor is not entered again
    // meanwhile; once made, an accessor the program kept calls through to
    // the global.
    let builtins = &GROUPS[group];
    let cell = &state.late_builtins[group];
    let made = match cell.get() {
        Some(made) => made,
        None => {
            cell.set(Some(false));
            // An error here is the VM's own (out of memory): the group may
            // be half made, so the program must not go on with it.
            let made = make_group(ctx, builtins, name).map_err(|_| fatal(ctx, state, builtins.what))?;
            if made && builtins.date_shim {
                // The prelude's installDate reads only what the intrinsic
                // has just made (its descriptors have no prototype) and
                // defines the global `Date` again; if it fails, QuickJS's
                // own Date, whose clock is not journaled, must not stay.
                let install = state.date_shim.borrow().as_ref().and_then(|f| f.clone().restore(ctx).ok());
                if install.is_none_or(|f| f.call::<_, ()>(()).is_err()) {
                    let _ = ctx.globals().remove("Date");
                    return Err(fatal(ctx, state, builtins.what));
                }
            }
            cell.set(Some(made));
            made
        }
    };
    if !made {
        let to_string = if builtins.reads_array_to_string {
            ", or replaced Array.prototype.toString with a getter (or deleted it)"
        } else {
            ""
        };
        return Err(rquickjs::Exception::throw_type(
            ctx,
            &format!(
                "{name} is not available: before the program first used {}, it froze, sealed or made globalThis \
                 non-extensible, made {} unconfigurable{to_string}",
                builtins.what, builtins.one_global
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

/// Ends the program: making a group failed (out of memory) and may have
/// left it half made. The pending error (QuickJS's out-of-memory error, or
/// one made here) is thrown again as uncatchable, so no handler of the
/// program runs with the half-made group. If not even an error object can
/// be made, the pending `null` stays catchable (QuickJS's own), so the run
/// is also stopped from the host: it ends as kind `memory` at the next
/// interrupt check or when its jobs run out, whatever a handler does
/// meanwhile, and it makes no call ([`HostState::out_of_memory`]).
fn fatal(ctx: &Ctx<'_>, state: &HostState, what: &'static str) -> rquickjs::Error {
    state.out_of_memory.set(Some(what));
    state.clock.halt(super::clock::Halt::Memory);
    let pending = ctx.catch();
    let error = if pending.is_object() {
        pending
    } else {
        match rquickjs::Exception::from_message(
            ctx.clone(),
            &format!("out of memory while making {what} on its first use"),
        ) {
            Ok(e) => e.into_value(),
            Err(e) => return e,
        }
    };
    super::host_call::throw_uncatchable(ctx, error)
}

/// Whether QuickJS's typed array intrinsic can run without running any of
/// the program's code. It reads `Array.prototype.toString` (to share it
/// with the typed arrays' prototype); were that a getter (or missing, so
/// the read went on up a prototype chain the program may have made a
/// proxy), the program's code would run in the middle of the intrinsic
/// and could define `Atomics`, on which QuickJS aborts the process. Every
/// other read of the intrinsic is of properties it has just made. (The
/// other groups' intrinsics read nothing a program can reach.)
///
/// # Errors
/// The VM ran out of memory making the array it reads the prototype of.
fn no_code_runs_in_the_intrinsic(ctx: &Ctx<'_>) -> rquickjs::Result<bool> {
    let array = rquickjs::Array::new(ctx.clone())?;
    // The real Array.prototype: a new array's prototype, whatever the
    // global `Array` now is.
    let Some(proto) = array.as_object().get_prototype() else { return Ok(false) };
    // SAFETY: `proto` is a live object of this context, an ordinary array
    // object (reading its own property runs no code).
    #[allow(unsafe_code)]
    let flags = unsafe { own_property_flags(ctx.as_raw().as_ptr(), proto.as_raw(), "toString") };
    Ok(flags.is_some_and(|flags| flags & qjs::JS_PROP_TMASK as std::ffi::c_int == 0))
}

/// Makes a group: false (nothing made, nothing changed) when that could
/// run program code or fail half-way, that is unless globalThis is
/// extensible, every global of the group (the accessors, or values the
/// program put there) is configurable, and (for the typed arrays)
/// `Array.prototype.toString` is a data property; else deletes those
/// globals and adds QuickJS's intrinsic, whose definitions then all
/// succeed and whose reads all meet objects it has just made. (QuickJS
/// aborts the process if the typed arrays' intrinsic meets an existing
/// `Atomics`, or a `Uint8Array` it reads back that has its methods
/// already: program code running inside it could make either.)
///
/// # Errors
/// The intrinsic failed (out of memory): the VM's pending exception.
fn make_group(ctx: &Ctx<'_>, builtins: &LateBuiltins, name: &str) -> rquickjs::Result<bool> {
    let raw_ctx = ctx.as_raw().as_ptr();
    let global = ctx.globals();
    // SAFETY: `raw_ctx` is this live context and `global` its global
    // object, an ordinary object: JS_IsExtensible and reading its own
    // properties run no code on it.
    #[allow(unsafe_code)]
    let ready = unsafe {
        qjs::JS_IsExtensible(raw_ctx, global.as_raw()) == 1
            && builtins.globals.iter().all(|n| {
                own_property_flags(raw_ctx, global.as_raw(), n)
                    .is_none_or(|flags| flags & qjs::JS_PROP_CONFIGURABLE as std::ffi::c_int != 0)
            })
    };
    if !ready || (builtins.reads_array_to_string && !no_code_runs_in_the_intrinsic(ctx)?) {
        return Ok(false);
    }
    for n in builtins.globals {
        // SAFETY: as above; deleting a configurable own property of an
        // ordinary object runs no code.
        #[allow(unsafe_code)]
        with_atom(raw_ctx, n, |atom| unsafe { qjs::JS_DeleteProperty(raw_ctx, global.as_raw(), atom, 0) });
    }
    // SAFETY: `ctx` is this VM's live context, used on the thread that
    // owns it; the intrinsic only creates the group's classes, prototypes
    // and globals in it (what `Context::custom` does when asked for them).
    // It runs at most once per context and group (the state of
    // late_global), under the conditions checked above.
    #[allow(unsafe_code)]
    let status = unsafe { (builtins.add)(raw_ctx) };
    if status < 0 {
        return Err(rquickjs::Error::Exception);
    }
    global.contains_key(name)
}

/// The flags of `obj`'s own property `name`, if it has one.
///
/// # Safety
/// `ctx` is a live context and `obj` an ordinary object of it (reading its
/// own property runs no code).
#[allow(unsafe_code)]
unsafe fn own_property_flags(
    ctx: *mut qjs::JSContext,
    obj: qjs::JSValue,
    name: &str,
) -> Option<std::ffi::c_int> {
    // SAFETY: per the function's contract; the value handed out is freed.
    with_atom(ctx, name, |atom| unsafe {
        let (flags, value) = super::args_json::own_property(ctx, obj, atom)?;
        if let Some(value) = value {
            qjs::JS_FreeValue(ctx, value);
        }
        Some(flags)
    })
}

/// Runs `f` with an atom made from `name`, freed after.
fn with_atom<T>(ctx: *mut qjs::JSContext, name: &str, f: impl FnOnce(qjs::JSAtom) -> T) -> T {
    // SAFETY: callers pass a live context; the atom made from `name`'s
    // bytes is freed once `f` is done with it.
    #[allow(unsafe_code)]
    unsafe {
        let atom = qjs::JS_NewAtomLen(ctx, name.as_ptr().cast(), name.len() as _);
        let out = f(atom);
        qjs::JS_FreeAtom(ctx, atom);
        out
    }
}

#[cfg(test)]
mod tests {
    /// The globals made late are exactly those each QuickJS intrinsic adds.
    #[test]
    fn every_late_global_is_listed() {
        use rquickjs::context::intrinsic::{Eval, MapSet, TypedArrays, WeakRef};
        fn names<I: rquickjs::context::Intrinsic>() -> Vec<String> {
            let rt = rquickjs::Runtime::new().unwrap();
            let ctx = rquickjs::Context::custom::<I>(&rt).unwrap();
            ctx.with(|ctx| ctx.eval::<Vec<String>, _>("Object.getOwnPropertyNames(globalThis)").unwrap())
        }
        let without = names::<(Eval,)>();
        let added = |with: Vec<String>| -> Vec<String> {
            let mut added: Vec<String> = with.into_iter().filter(|n| !without.contains(n)).collect();
            added.sort();
            added
        };
        let listed = |group: usize| -> Vec<String> {
            let mut listed: Vec<String> =
                super::GROUPS[group].globals.iter().map(|s| s.to_string()).collect();
            listed.sort();
            listed
        };
        assert_eq!(listed(0), added(names::<(Eval, TypedArrays)>()));
        assert_eq!(listed(1), added(names::<(Eval, MapSet)>()));
        assert_eq!(listed(2), added(names::<(Eval, WeakRef)>()));
        assert_eq!(listed(3), added(names::<(Eval, rquickjs::context::intrinsic::Date)>()));
    }
}
