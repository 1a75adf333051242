//! The gate's and the file tools' reading of a path argument
//! (crates/codemode/src/gate/primary.rs, crates/codemode/src/tools/workspace.rs
//! `beneath_rel`) and rule patterns on paths (crates/codemode/src/rule.rs,
//! gate/rules.rs, gate/protection.rs `names`), in a real workspace folder
//! holding `docs/`, `secrets/`, `link -> secrets` and `out -> ../outside`.
//!
//! Input: the first line is a rule pattern (`write(<line>)`), the rest the
//! path a program gives; `$WS` in either stands for the workspace's
//! absolute path.
//!
//! Properties: no panic; a path the tool takes is inside the workspace
//! (no `..`, not absolute) and taking it again gives it back (idempotent);
//! the gate's written spelling is the path the tool opens, and is itself
//! normalised (the gate reading it again gives it back); a rule's decision
//! is the same for the path and for its normalised spelling, and an allow
//! rule covers a call only where it would also deny it.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use codemode::fuzzing::{gate_path, names_protected, rule_covers, tool_path};
use codemode::policy::Rule;
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static Path {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let outer = std::env::temp_dir().join(format!("codemode-fuzz-path-{}", std::process::id()));
        let ws = outer.join("ws");
        std::fs::create_dir_all(ws.join("docs/sub")).expect("a workspace");
        std::fs::create_dir_all(ws.join("secrets")).expect("a folder");
        std::fs::create_dir_all(outer.join("outside")).expect("a folder");
        std::fs::write(ws.join("codemode.toml"), "").expect("a file");
        let _ = std::os::unix::fs::symlink("secrets", ws.join("link"));
        let _ = std::os::unix::fs::symlink("../outside", ws.join("out"));
        std::fs::canonicalize(&ws).expect("a canonical workspace")
    })
}

/// Whether `rel` (workspace-relative, `/` between components) is plainly
/// inside: no `..`, not absolute.
fn plainly_inside(rel: &str) -> bool {
    Path::new(rel).components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ws = workspace();
    let ws_text = ws.to_string_lossy();
    let text = text.replace("$WS", &ws_text);
    let (pattern, path) = text.split_once('\n').unwrap_or(("", text.as_str()));
    if path.contains('\0') {
        return;
    }

    let tool = tool_path(ws, path);
    let (written, resolved) = gate_path(ws, path);
    if let Ok(rel) = &tool {
        assert!(plainly_inside(rel), "{path:?}: the tool takes {rel:?}");
        assert!(ws.join(rel).starts_with(ws), "{path:?}: {rel:?} leaves the workspace");
        // A blank name (`./ ` is the file ` `) is refused as given alone:
        // the tool takes a blank path for a missing one.
        let again = if rel.is_empty() { "." } else { rel.as_str() };
        if !rel.trim().is_empty() {
            assert_eq!(tool_path(ws, again).as_ref(), Ok(rel), "{path:?}: not idempotent");
        }
        // The gate matches rules against the path the tool opens.
        let shown = if rel.is_empty() { "." } else { rel.as_str() };
        assert_eq!(written, shown, "{path:?}: the gate sees {written:?}, the tool opens {rel:?}");
    }
    for spelling in std::iter::once(&written).chain(resolved.as_ref()) {
        if !spelling.starts_with('/') {
            assert!(plainly_inside(spelling), "{path:?}: the gate spells it {spelling:?}");
        }
    }
    if !written.is_empty() {
        assert_eq!(gate_path(ws, &written).0, written, "{path:?}: the gate's spelling is not normalised");
    }

    if let Ok(rule) = Rule::parse(&format!("write({pattern})")) {
        let (allow, deny) = rule_covers(&rule, "write", path, Some(ws));
        assert!(!allow || deny, "{path:?}: `{rule}` allows without covering");
        if !written.is_empty() && resolved.is_none() {
            let (allow2, deny2) = rule_covers(&rule, "write", &written, Some(ws));
            assert_eq!((allow, deny), (allow2, deny2), "{path:?}: `{rule}` decides {written:?} otherwise");
        }
        let _ = names_protected(pattern, &written);
    }
});
