//! The trust record, `trusted.json` (crates/codemode/src/trust.rs): read
//! from the user's config folder by every run that finds a workspace
//! `codemode.toml` or `.mcp.json`, and rewritten by `codemode trust`.
//!
//! Input: the record file's bytes, written to a scratch config folder.
//!
//! Properties: no panic; a record that cannot be read is an error, never
//! "nothing trusted"; a record that reads keeps its entries through
//! trusting one more file (the rewrite loses nothing), and the file just
//! trusted is then trusted; a corrupt record is refused by `trust` too
//! (never overwritten).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use codemode::trust::{ReadFile, TrustState, TrustStore};
use libfuzzer_sys::fuzz_target;

/// A scratch folder: `config/` for the record, `ws/codemode.toml` to trust.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("codemode-fuzz-trust-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("config")).expect("a config folder");
        std::fs::create_dir_all(dir.join("ws")).expect("a workspace");
        std::fs::write(dir.join("ws/codemode.toml"), "mode = \"plan\"\n").expect("a file");
        std::fs::canonicalize(&dir).expect("a canonical folder")
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    let record = dir.join("config/trusted.json");
    std::fs::write(&record, data).expect("the record is written");
    let store = TrustStore::in_dir(dir.join("config"));
    let file = ReadFile::read_in(&dir.join("ws"), &dir.join("ws/codemode.toml")).expect("the file reads");

    let before = store.list();
    let state = store.state_of(&file);
    match &before {
        Err(_) => {
            assert!(state.is_err(), "an unreadable record answered {state:?}");
            assert!(store.trust(&file, &[]).is_err(), "a corrupt record was overwritten");
            assert_eq!(std::fs::read(&record).expect("the record"), data, "the record changed");
        }
        Ok(entries) => {
            let (path, _) = store.trust(&file, &[]).expect("a readable record takes one more file");
            let after = store.list().expect("the rewritten record reads");
            for (p, entry) in entries.iter().filter(|(p, _)| *p != path) {
                assert!(after.iter().any(|(q, e)| q == p && e == entry), "{p:?} was lost on rewrite");
            }
            assert_eq!(store.state_of(&file).expect("the state"), TrustState::Trusted);
        }
    }
});
