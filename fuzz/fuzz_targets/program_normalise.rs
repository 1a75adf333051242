//! Program normalisation (crates/program): fences, TypeScript, `export
//! default`. The first byte picks the program's file name (its extension
//! says the language); the rest is the source.
#![no_main]

use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 4] = ["program.js", "program.ts", "program.mjs", "program"];

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let Ok(source) = std::str::from_utf8(rest) else { return };
    let name = NAMES[usize::from(first) % NAMES.len()];
    let _ = codemode::fuzzing::normalise_program(name, source);
});
