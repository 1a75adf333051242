//! Compiling the prelude's source to QuickJS bytecode: shared by the build
//! script (`build.rs`, which embeds the bytecode in the binary) and by
//! `vm::prelude` (which compiles it in the process when the embedded
//! bytecode cannot be used, and whose test checks the embedded bytecode
//! is what this source compiles to). It uses nothing but rquickjs.

use std::ffi::CString;

use rquickjs::{Context, Ctx, Runtime, Value, qjs};

/// The bytecode of `source`, compiled as a script named `name` whose value
/// is the prelude function, without its source text (nothing reads it: the
/// prelude's functions need not print themselves; it makes every VM's
/// load of the bytecode smaller). A script, not a module: a module costs a
/// VM a module record, its evaluation's promise and a wrapper function,
/// and it could be imported again by name.
pub(crate) fn compile(source: &str, name: &str) -> Result<Vec<u8>, String> {
    let fail = |e: rquickjs::Error| format!("the prelude does not compile: {e}");
    let rt = Runtime::new().map_err(fail)?;
    let ctx = Context::full(&rt).map_err(fail)?;
    ctx.with(|ctx| {
        let text = CString::new(source).map_err(|e| e.to_string())?;
        let name = CString::new(name).map_err(|e| e.to_string())?;
        let raw = ctx.as_raw().as_ptr();
        // SAFETY: `raw` is this live context; the source and name are
        // NUL-terminated and outlive the call. The compiled function is
        // owned by `compiled` (freed when it drops).
        #[allow(unsafe_code)]
        let compiled = checked(&ctx, unsafe {
            qjs::JS_Eval(
                raw,
                text.as_ptr(),
                source.len() as _,
                name.as_ptr(),
                (qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32,
            )
        })?;
        let flags = qjs::JS_WRITE_OBJ_BYTECODE | qjs::JS_WRITE_OBJ_STRIP_SOURCE;
        let mut len = 0;
        // SAFETY: `compiled` is a live function bytecode value of this
        // context; QuickJS returns a buffer of `len` bytes it allocated,
        // copied out and freed here.
        #[allow(unsafe_code)]
        unsafe {
            let buf = qjs::JS_WriteObject(raw, &mut len, compiled.as_raw(), flags as i32);
            if buf.is_null() {
                return Err(describe(&ctx, rquickjs::Error::Exception));
            }
            let bytes = std::slice::from_raw_parts(buf, len as usize).to_vec();
            qjs::js_free(raw, buf.cast());
            Ok(bytes)
        }
    })
}

/// The version of the QuickJS library this code is linked with
/// (`JS_GetVersion`, e.g. `0.16.2`): bytecode is read only by the QuickJS
/// version that wrote it.
pub(crate) fn quickjs_version() -> String {
    // SAFETY: `JS_GetVersion` returns a static NUL-terminated string.
    #[allow(unsafe_code)]
    unsafe {
        std::ffi::CStr::from_ptr(qjs::JS_GetVersion()).to_string_lossy().into_owned()
    }
}

/// `v` as an owned value, or the pending exception described.
pub(crate) fn checked<'js>(ctx: &Ctx<'js>, v: qjs::JSValue) -> Result<Value<'js>, String> {
    // SAFETY: `v` was just returned by QuickJS for this context with one
    // reference, which the `Value` takes over (an exception value holds
    // none).
    #[allow(unsafe_code)]
    unsafe {
        if qjs::JS_VALUE_GET_TAG(v) == qjs::JS_TAG_EXCEPTION {
            return Err(describe(ctx, rquickjs::Error::Exception));
        }
        Ok(Value::from_raw(ctx.clone(), v))
    }
}

/// `e`, or for a JavaScript exception its message and stack.
fn describe(ctx: &Ctx<'_>, e: rquickjs::Error) -> String {
    if !matches!(e, rquickjs::Error::Exception) {
        return e.to_string();
    }
    let exc = ctx.catch();
    let field = |name: &str| exc.as_object().and_then(|o| o.get::<_, Option<String>>(name).ok().flatten());
    format!("{} {}", field("message").unwrap_or_default(), field("stack").unwrap_or_default())
        .trim()
        .to_owned()
}
