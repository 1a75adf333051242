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
