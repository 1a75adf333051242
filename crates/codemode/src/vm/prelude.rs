//! The prelude (`js-prelude/prelude.js`) as QuickJS bytecode, loaded into
//! every VM from that bytecode.
//!
//! Compiling the prelude from source took about half of a VM's cold start
//! and, once per process, 5.5M instructions; loading bytecode skips the
//! parser. The bytecode is made at build time by `build.rs`, with rquickjs
//! of the same version, from the same source (`prelude_bytecode.rs`
//! compiles it in both places), and embedded in the binary: it is never
//! read from anywhere else. It is used only when this process's QuickJS
//! reports the version that wrote it; otherwise (or when the build
//! cross-compiled and embedded none) the source embedded beside it is
//! compiled once per process, into a `'static` buffer.

use std::sync::OnceLock;

use rquickjs::{Ctx, Function, qjs};

use super::prelude_bytecode::{checked, compile, quickjs_version};

/// The prelude's source, as build.rs compiled it (its copy of
/// `js-prelude/prelude.js`).
const PRELUDE: &str = include_str!(concat!(env!("OUT_DIR"), "/prelude.js"));
/// The bytecode build.rs compiled from [`PRELUDE`]; empty when it made
/// none (cross-compiling).
static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude.bytecode"));
/// The QuickJS version that wrote [`EMBEDDED`].
const EMBEDDED_BY: &str = include_str!(concat!(env!("OUT_DIR"), "/prelude.quickjs-version"));
/// The prelude's script name, as stack frames of its code show it
/// (`at settle (codemode:prelude:156:29)`): a frame naming it is
/// codemode's, not the program's.
pub const PRELUDE_NAME: &str = "codemode:prelude";

static COMPILED: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();

/// The prelude as the bytecode of a script whose value is the prelude
/// function: the embedded bytecode when this QuickJS wrote it, else
/// compiled on first use.
fn bytecode() -> Result<&'static [u8], String> {
    if embedded_usable() {
        return Ok(EMBEDDED);
    }
    COMPILED.get_or_init(|| compile(PRELUDE, PRELUDE_NAME)).as_ref().map(Vec::as_slice).map_err(Clone::clone)
}

/// Whether [`EMBEDDED`] is there and was written by this process's QuickJS.
fn embedded_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| !EMBEDDED.is_empty() && EMBEDDED_BY == quickjs_version())
}

/// Loads the prelude into `ctx` and returns the prelude function (which
/// takes the host binding and returns `[settle, finish]`).
pub(crate) fn load<'js>(ctx: &Ctx<'js>) -> Result<Function<'js>, String> {
    let bytes = bytecode()?;
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `bytes` is bytecode written by `JS_WriteObject` from the
    // embedded prelude source, by this QuickJS version (at build time, the
    // version checked, or in this process); it lives in a `'static`
    // buffer, as QuickJS's ROM-data read requires.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_bytecode_is_what_this_build_compiles_from_the_source() {
        // The build script ran on this machine (tests are not
        // cross-compiled): the bytecode must be there, and in use.
        assert!(!EMBEDDED.is_empty(), "build.rs embedded no prelude bytecode");
        assert_eq!(EMBEDDED_BY, quickjs_version());
        assert!(embedded_usable());
        // Stale bytecode (an old source, another QuickJS, another script
        // name) differs from what the source compiles to now.
        let fresh = compile(PRELUDE, PRELUDE_NAME).unwrap();
        assert!(EMBEDDED == fresh.as_slice(), "the embedded prelude bytecode is stale");
    }

    #[test]
    fn the_embedded_source_is_the_prelude_in_the_repository() {
        let repository = include_str!("../../../../js-prelude/prelude.js");
        assert_eq!(PRELUDE, repository, "build.rs compiled another prelude than js-prelude/prelude.js");
    }
}
