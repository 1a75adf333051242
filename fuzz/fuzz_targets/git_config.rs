//! Git's configuration as the gate reads it for `include.path` and `includeIf.<condition>.path`
//! (crates/codemode/src/gate/git_includes.rs): `.git/config` is in the workspace, so a program's
//! earlier write (or the repository it cloned) made it.
//!
//! Input: bytes, as text (lossy UTF-8): one configuration file.
//!
//! Property: no panic; every path found is the value of a `path` key in an `include` or
//! `includeIf` section, so it cannot be longer than the text; the parse is linear (libFuzzer's
//! timeout).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for path in codemode::fuzzing::git_include_paths(&text) {
        assert!(path.len() <= text.len(), "a path longer than its file: {path:?}");
    }
});
