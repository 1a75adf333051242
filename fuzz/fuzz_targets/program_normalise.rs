//! Program normalisation (crates/program): fences, TypeScript, `export
//! default`. The first byte picks the program's file name (its extension
//! says the language); the rest is the source, at most the engine's
//! source limit (64 KiB), as the engine refuses longer ones before this.
//!
//! Properties: no panic and no `internal` error; a normalised program is
//! the wrapper around the user's code; and, through libFuzzer's `-timeout`
//! and `-rss_limit_mb` (fuzz/smoke.sh), every input ends in bounded time
//! and memory: the bound on the TypeScript parser's backtracking
//! (crates/program/src/speculation.rs) must hold for every text, not only
//! for the families it was measured on. `-timeout=10` is generous: a text
//! within the bound parses in tens of milliseconds.
#![no_main]

use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 4] = ["program.js", "program.ts", "program.mjs", "program"];

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let Ok(source) = std::str::from_utf8(rest) else { return };
    if source.len() > 64 << 10 {
        return;
    }
    let name = NAMES[usize::from(first) % NAMES.len()];
    match codemode::fuzzing::normalise_program(name, source) {
        Ok(script) => {
            assert!(script.starts_with("(async () => {"), "{script:.80}");
            assert!(script.ends_with("\n})()"), "{script:.80}");
        }
        Err(e) => assert!(!e.starts_with("Internal"), "{e}"),
    }
});
