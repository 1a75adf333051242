//! The parts of `codemode.toml` the `policy` target only parses: what an
//! untrusted workspace file keeps (crates/codemode/src/config/grants.rs,
//! `without_grants`), the digest a paused run's journal records
//! (config/digest.rs), the files its hooks name (`command_pins`, through
//! crates/base/src/command_files/), `[limits]` (crates/base/src/limit_settings.rs)
//! and `[journal] url` (crates/codemode/src/journal/settings.rs,
//! credentials.rs).
//!
//! Input: `codemode.toml` text.
//!
//! Properties: no panic; dropping the grants is idempotent (a second pass
//! drops nothing and changes nothing) and leaves no grant (no allow rule,
//! no hook, posture at most `ask`, no limit above the default, sandbox
//! neither off nor networked); the digest of a file is the digest of its
//! copy, and dropping nothing keeps the digest; hooks name at most
//! `MAX_COMMAND_FILES` files each.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use codemode::config::ConfigFile;
use codemode::fuzzing::{MAX_COMMAND_FILES, config_digest};
use codemode::policy::Posture;
use codemode::sandbox::SandboxProfile;
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static PathBuf {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let ws = std::env::temp_dir().join(format!("codemode-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("hooks")).expect("a workspace");
        std::fs::write(ws.join("hooks/guard.py"), "print()\n").expect("a file");
        std::fs::canonicalize(&ws).expect("a canonical workspace")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(file) = ConfigFile::from_toml(text, None) else { return };

    let digest = config_digest(&file);
    assert_eq!(config_digest(&file.clone()), digest, "the digest is not a function of the file");

    let (kept, dropped) = file.clone().without_grants();
    let (again, dropped_again) = kept.clone().without_grants();
    assert!(dropped_again.is_empty(), "a second pass drops {dropped_again:?}");
    assert_eq!(again, kept, "a second pass changes the file");
    assert!(kept.policy.rules.allow.is_empty() && kept.policy.hooks.is_empty());
    assert!(kept.policy.posture <= Posture::Ask);
    assert!(kept.sandbox.settings.profile != SandboxProfile::Off && !kept.sandbox.settings.network);
    assert!(kept.sandbox.writable.is_empty());
    assert!(kept.limits.without_raises(&codemode::Limits::default()).1.is_empty());
    if dropped.is_empty() {
        assert_eq!(config_digest(&kept), digest, "nothing dropped, yet the digest changed");
    }

    let mut limits = codemode::Limits::default();
    file.limits.apply(&mut limits);

    if let Some(url) = &file.journal.url
        && let Ok(spec) = codemode::journal::JournalSpec::parse(url)
    {
        let _ = spec.shown();
    }

    let pins = file.command_pins(workspace());
    assert!(pins.files.len() <= file.policy.hooks.len() * MAX_COMMAND_FILES);
});
