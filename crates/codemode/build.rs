//! Compiles the prelude (`js-prelude/prelude.js`) to QuickJS bytecode, which
//! `src/vm/prelude.rs` embeds: a process then loads the prelude without
//! parsing it (compiling it took about 5.5M instructions, a third of a
//! `codemode run` of `return 1`; docs/PERFORMANCE.md).
//!
//! The bytecode is made here, with rquickjs of the same version as the
//! engine's (one entry in Cargo.lock; no feature of rquickjs-sys changes
//! the bytecode format), from the source the binary also embeds: this
//! script copies the source it compiled next to the bytecode and the
//! engine embeds that copy. It records the QuickJS version that wrote the
//! bytecode; the engine uses the bytecode only when its own QuickJS says
//! the same version, else it compiles the source once per process, as it
//! did before. When cross-compiling (the host's QuickJS is not the
//! target's build) nothing is embedded and the engine compiles at run time.

#[allow(dead_code)]
#[path = "src/vm/prelude_bytecode.rs"]
mod prelude_bytecode;

use std::path::PathBuf;

/// The prelude's script name; `vm::prelude::PRELUDE_NAME` (a test checks
/// the two agree through the embedded bytecode).
const PRELUDE_NAME: &str = "codemode:prelude";

fn main() {
    let source_path = "../../js-prelude/prelude.js";
    println!("cargo::rerun-if-changed={source_path}");
    println!("cargo::rerun-if-changed=src/vm/prelude_bytecode.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = std::fs::read_to_string(source_path).expect("js-prelude/prelude.js is readable");
    let same_machine = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    let (bytecode, version) = if same_machine {
        let bytes = prelude_bytecode::compile(&source, PRELUDE_NAME).unwrap_or_else(|e| panic!("{e}"));
        (bytes, prelude_bytecode::quickjs_version())
    } else {
        (Vec::new(), String::new())
    };
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(out.join(name), bytes).unwrap_or_else(|e| panic!("writing {name} in OUT_DIR: {e}"))
    };
    write("prelude.js", source.as_bytes());
    write("prelude.bytecode", &bytecode);
    write("prelude.quickjs-version", version.as_bytes());
}
