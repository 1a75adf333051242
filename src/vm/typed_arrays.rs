//! Typed arrays made on a program's first use of one.
//!
//! Making `ArrayBuffer`, the typed array constructors, `DataView` and
//! `Atomics` with every context cost about a tenth of a VM's start and
//! 13 KiB of its memory, and few programs use them. Their globals are
//! accessors until first used ([`install`]); the first use adds QuickJS's
//! typed array intrinsic, under conditions that keep program code out of
//! it (QuickJS aborts the process on what such code could leave behind:
//! docs/SECURITY.md).

use std::rc::Rc;

use rquickjs::{Ctx, Function, Value, qjs};

use super::host_call::HostState;

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
pub(crate) fn install<'js>(ctx: &Ctx<'js>, state: &Rc<HostState>) -> rquickjs::Result<()> {
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
        // SAFETY: `raw_ctx` is this live context; JS_DefinePropertyGetSet
        // takes (and frees) one reference to the getter and one to the
        // setter, which the two JS_DupValue calls provide (`accessor` keeps
        // its own).
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
    flags.is_some_and(|flags| flags & qjs::JS_PROP_TMASK as std::ffi::c_int == 0)
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
    // object, an ordinary object: JS_IsExtensible and reading its own
    // properties run no code on it.
    #[allow(unsafe_code)]
    let ready = unsafe {
        qjs::JS_IsExtensible(raw_ctx, global.as_raw()) == 1
            && TYPED_ARRAY_GLOBALS.iter().all(|n| {
                own_property_flags(raw_ctx, global.as_raw(), n)
                    .is_none_or(|flags| flags & qjs::JS_PROP_CONFIGURABLE as std::ffi::c_int != 0)
            })
    };
    if !ready || !no_code_runs_in_the_intrinsic(ctx) {
        return Ok(false);
    }
    for n in TYPED_ARRAY_GLOBALS {
        // SAFETY: as above; deleting a configurable own property of an
        // ordinary object runs no code.
        #[allow(unsafe_code)]
        with_atom(raw_ctx, n, |atom| unsafe { qjs::JS_DeleteProperty(raw_ctx, global.as_raw(), atom, 0) });
    }
    // SAFETY: `ctx` is this VM's live context, used on the thread that
    // owns it; JS_AddIntrinsicTypedArrays only creates the typed array
    // classes, prototypes and globals in it (what `Context::custom` does
    // when asked for them). It runs at most once per context (the state of
    // typed_array_global), under the conditions checked above.
    #[allow(unsafe_code)]
    let status = unsafe { qjs::JS_AddIntrinsicTypedArrays(raw_ctx) };
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
    ctx: *mut qjs::JSContext,
    obj: qjs::JSValue,
    name: &str,
) -> Option<std::ffi::c_int> {
    let mut desc = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
    // SAFETY: per the function's contract.
    let found =
        with_atom(ctx, name, |atom| unsafe { qjs::JS_GetOwnProperty(ctx, desc.as_mut_ptr(), obj, atom) });
    if found != 1 {
        return None;
    }
    // SAFETY: JS_GetOwnProperty filled the descriptor in (it returned 1);
    // its values hold one reference each, freed here.
    unsafe {
        let desc = desc.assume_init();
        qjs::JS_FreeValue(ctx, desc.value);
        qjs::JS_FreeValue(ctx, desc.getter);
        qjs::JS_FreeValue(ctx, desc.setter);
        Some(desc.flags)
    }
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
}
