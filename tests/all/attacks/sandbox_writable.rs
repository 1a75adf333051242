//! Issue 35: `[sandbox] writable = [".git"]` also makes a worktree's git
//! folders writable, and those are named by the `.git` file the workspace
//! holds. A hostile checkout's `.git` saying `gitdir: ~/.cache/codemode/
//! mcp-schemas` would have turned the user's own grant into a writable
//! MCP schema cache: a command could plant `readOnlyHint` on a server's
//! tool for every later run. Defence (docs/SECURITY.md, "The bash
//! sandbox"): the folders a `.git` file names are checked as any folder
//! outside the workspace, and one that holds or lies in what decides calls
//! (run state, the trust record, login tokens, the schema cache, the
//! policy and MCP files) is refused when the engine is built.

use codemode::Policy;
use codemode::config::{ConfigFile, SandboxConfig};

#[test]
fn a_git_file_naming_the_schema_cache_does_not_make_it_writable() {
    let Some(cache) = codemode::mcp::default_cache_dir() else { return };
    std::fs::create_dir_all(&cache).unwrap();
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join(".git"), format!("gitdir: {}\n", cache.display())).unwrap();
    let config = ConfigFile {
        sandbox: SandboxConfig { writable: vec![".git".into()], ..SandboxConfig::default() },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    let built = crate::common::builder(&ws).config(config).build();
    let err = built.expect_err("the engine refuses the writable entry").to_string();
    assert!(err.contains("`.git`") && err.contains("the MCP schema cache"), "{err}");
}

/// The fourth review of issue 36 (predating it): under the `read-only`
/// profile with `writable = ["out/build"]`, `out` (the folder on the way)
/// was pinned with a writable bind, so a command changed the mode and
/// times of `out/file` (a setuid bit on a root-owned file when codemode
/// runs as root); Landlock still kept its contents. A pin now keeps what
/// the folder it lies in is: read-only here.
#[test]
fn a_pin_in_a_read_only_workspace_stays_read_only() {
    let ws = crate::common::workspace();
    std::fs::create_dir_all(ws.path().join("out/build")).unwrap();
    std::fs::write(ws.path().join("out/file"), "x").unwrap();
    let config = ConfigFile {
        sandbox: SandboxConfig {
            settings: codemode::sandbox::SandboxSettings {
                profile: codemode::sandbox::SandboxProfile::ReadOnly,
                ..Default::default()
            },
            writable: vec!["out/build".into()],
            ..SandboxConfig::default()
        },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    let engine = crate::common::builder(&ws).config(config).build().unwrap();
    let r = engine.execute_blocking(codemode::Program::new(
        "const b = await tools.bash({command: 'chmod 4777 out/file 2>&1; touch out/build/ok && echo built'}); \
         return b.content.stdout;",
    ));
    assert_eq!(r.status, codemode::receipt::RunStatus::Completed, "{:?}", r.error);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(ws.path().join("out/file")).unwrap().permissions().mode() & 0o7777;
    assert_ne!(mode, 0o4777, "a command changed a file's mode in a read-only workspace: {}", r.value);
    assert!(
        r.value.as_str().unwrap_or_default().ends_with("built\n"),
        "the writable folder stays writable: {}",
        r.value
    );
}
