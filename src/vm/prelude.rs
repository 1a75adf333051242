//! The prelude (`js-prelude/prelude.js`), compiled to QuickJS bytecode once
//! per process and loaded into every VM from that bytecode.
//!
//! Compiling the prelude from source took about half of a VM's cold start;
//! loading bytecode skips the parser. The bytecode is made in this process,
//! by this build of QuickJS, from source embedded in the binary, and is kept
//! in a `'static` buffer: it is never read from anywhere else.

use std::sync::OnceLock;

use rquickjs::module::WriteOptions;
use rquickjs::{Context, Ctx, Function, Module, Runtime};

/// The prelude's source, embedded at build time.
const PRELUDE: &str = include_str!("../../js-prelude/prelude.js");
/// The prelude's module name, as stack frames of its code show it
/// (`at settle (codemode:prelude:156:29)`): a frame naming it is
/// codemode's, not the program's.
pub const PRELUDE_NAME: &str = "codemode:prelude";

static BYTECODE: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();

/// The prelude as module bytecode whose default export is the prelude
/// function; compiled on first use.
fn bytecode() -> Result<&'static [u8], String> {
    BYTECODE
        .get_or_init(|| {
            let fail = |e: rquickjs::Error| format!("the prelude does not compile: {e}");
            let rt = Runtime::new().map_err(fail)?;
            let ctx = Context::full(&rt).map_err(fail)?;
            ctx.with(|ctx| {
                // The module can be reached again with `import("codemode:prelude")`;
                // the guard makes a second load throw instead of running.
                let source = format!(
                    "let loaded = false;\nexport default function (host) {{\n  if (loaded) throw new TypeError(\"the prelude is already loaded\");\n  loaded = true;\n  return ({PRELUDE})(host);\n}}\n"
                );
                let module = Module::declare(ctx.clone(), PRELUDE_NAME, source)
                    .map_err(|e| describe(&ctx, e))?;
                // Without the source text (nothing reads it: the prelude's
                // functions need not print themselves), which makes every
                // VM's load of the bytecode smaller.
                let options = WriteOptions { strip_source: true, ..WriteOptions::default() };
                module.write(options).map_err(|e| describe(&ctx, e))
            })
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// Loads the prelude into `ctx` and returns the prelude function (which
/// takes the host binding and returns `settle`).
pub(crate) fn load<'js>(ctx: &Ctx<'js>) -> Result<Function<'js>, String> {
    let bytes = bytecode()?;
    // SAFETY: `bytes` is bytecode written by `Module::write` above, by this
    // same QuickJS build in this process, from the embedded prelude source;
    // it lives in a `'static` buffer, as QuickJS's ROM-data read requires.
    #[allow(unsafe_code)]
    let module = unsafe { Module::load(ctx.clone(), bytes) }.map_err(|e| describe(ctx, e))?;
    let (module, promise) = module.eval().map_err(|e| describe(ctx, e))?;
    promise.finish::<()>().map_err(|e| describe(ctx, e))?;
    module.get("default").map_err(|e| describe(ctx, e))
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
