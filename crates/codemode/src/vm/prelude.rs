//! The prelude (`js-prelude/prelude.js`), compiled to QuickJS bytecode once
//! per process and loaded into every VM from that bytecode.
//!
//! Compiling the prelude from source took about half of a VM's cold start;
//! loading bytecode skips the parser. The bytecode is made in this process,
//! by this build of QuickJS, from source embedded in the binary, and is kept
//! in a `'static` buffer: it is never read from anywhere else.

use std::ffi::CString;
use std::sync::OnceLock;

use rquickjs::{Context, Ctx, Function, Runtime, Value, qjs};

/// The prelude's source, embedded at build time.
const PRELUDE: &str = include_str!("../../../../js-prelude/prelude.js");
/// The prelude's script name, as stack frames of its code show it
/// (`at settle (codemode:prelude:156:29)`): a frame naming it is
/// codemode's, not the program's.
pub const PRELUDE_NAME: &str = "codemode:prelude";

static BYTECODE: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();

/// The prelude as the bytecode of a script whose value is the prelude
/// function; compiled on first use. A script, not a module: a module
/// costs a VM a module record, its evaluation's promise and a wrapper
/// function, and it could be imported again by name.
fn bytecode() -> Result<&'static [u8], String> {
    BYTECODE
        .get_or_init(|| {
            let fail = |e: rquickjs::Error| format!("the prelude does not compile: {e}");
            let rt = Runtime::new().map_err(fail)?;
            let ctx = Context::full(&rt).map_err(fail)?;
            ctx.with(|ctx| {
                let source = CString::new(PRELUDE).map_err(|e| e.to_string())?;
                let name = CString::new(PRELUDE_NAME).expect("no NUL in the name");
                let raw = ctx.as_raw().as_ptr();
                // SAFETY: `raw` is this live context; the source and name are
                // NUL-terminated and outlive the call. The compiled function
                // is owned by `compiled` (freed when it drops).
                #[allow(unsafe_code)]
                let compiled = checked(&ctx, unsafe {
                    qjs::JS_Eval(
                        raw,
                        source.as_ptr(),
                        PRELUDE.len() as _,
                        name.as_ptr(),
                        (qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32,
                    )
                })?;
                // Without the source text (nothing reads it: the prelude's
                // functions need not print themselves), which makes every
                // VM's load of the bytecode smaller.
                let flags = qjs::JS_WRITE_OBJ_BYTECODE | qjs::JS_WRITE_OBJ_STRIP_SOURCE;
                let mut len = 0;
                // SAFETY: `compiled` is a live function bytecode value of
                // this context; QuickJS returns a buffer of `len` bytes it
                // allocated, copied out and freed here.
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
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// Loads the prelude into `ctx` and returns the prelude function (which
/// takes the host binding and returns `[settle, finish]`).
pub(crate) fn load<'js>(ctx: &Ctx<'js>) -> Result<Function<'js>, String> {
    let bytes = bytecode()?;
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `bytes` is bytecode written by `JS_WriteObject` above, by
    // this same QuickJS build in this process, from the embedded prelude
    // source; it lives in a `'static` buffer, as QuickJS's ROM-data read
    // requires.
    #[allow(unsafe_code)]
    let script = checked(ctx, unsafe {
        qjs::JS_ReadObject(
            raw,
            bytes.as_ptr(),
            bytes.len() as _,
            (qjs::JS_READ_OBJ_BYTECODE | qjs::JS_READ_OBJ_ROM_DATA) as i32,
        )
    })?;
    // SAFETY: `script` is the function bytecode just read; JS_EvalFunction
    // takes (frees) one reference, which the JS_DupValue provides.
    #[allow(unsafe_code)]
    let value = checked(ctx, unsafe { qjs::JS_EvalFunction(raw, qjs::JS_DupValue(raw, script.as_raw())) })?;
    value.into_function().ok_or_else(|| "the prelude's script did not evaluate to a function".to_owned())
}

/// `v` as an owned value, or the pending exception described.
fn checked<'js>(ctx: &Ctx<'js>, v: qjs::JSValue) -> Result<Value<'js>, String> {
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
