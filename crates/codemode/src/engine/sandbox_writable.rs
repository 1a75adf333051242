//! `[sandbox] writable` as it applies (docs/SECURITY.md, "The bash
//! sandbox"), settled once when the engine is built: each entry is a
//! protected path in the workspace to lift for bash, or a folder (outside
//! the workspace, or inside it under the `read-only` profile) the sandbox
//! binds writable; an entry that cannot apply is refused, naming it. Only
//! a trusted or named policy gets here with entries (an untrusted file's
//! are dropped: `config/grants.rs`). Also the per-workspace folder for
//! commands' caches (`XDG_CACHE_HOME` and kin).

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use crate::gate::protection::Protection;

/// What `[sandbox] writable` comes to.
#[derive(Debug, Default)]
pub(super) struct SandboxWritable {
    /// Protected paths in the workspace bash may change (canonical, or
    /// absolute beneath the workspace when missing).
    pub lifted: Vec<PathBuf>,
    /// Folders the sandbox binds writable (canonical, existing).
    pub folders: Vec<PathBuf>,
}

/// Settles `entries` (as written: relative to the canonical `workspace`,
/// absolute, or `~/...`) against the engine's `protections` and `hidden`
/// folders; `write_workspace` says whether the profile already lets bash
/// write the workspace.
///
/// # Errors
/// The first entry that cannot apply, named, with why and what to write
/// instead: a path that does not exist, one inside the workspace that is
/// neither protected nor needed (workspace-write), one outside that holds
/// or lies in what decides calls (run state, the trust record, MCP login
/// tokens, the MCP schema cache, the policy and MCP files) or holds the
/// workspace.
pub(super) fn settle(
    workspace: &Path,
    entries: &[String],
    protections: &[Protection],
    hidden: &[PathBuf],
    write_workspace: bool,
) -> Result<SandboxWritable, String> {
    let mut out = SandboxWritable::default();
    for entry in entries {
        let lexical = expand(workspace, entry)?;
        let real = std::fs::canonicalize(&lexical).ok();
        let path = real.clone().unwrap_or_else(|| lexical.clone());
        let inside = lexical.starts_with(workspace) || path.starts_with(workspace);
        if inside && let Some(p) = protections.iter().find(|p| p.path == path || p.path == lexical) {
            out.lifted.push(p.path.clone());
            if lexical == workspace.join(".git") {
                // Named by a file the workspace holds (and bash may
                // rewrite): checked as any folder outside.
                for dir in worktree_git_dirs(workspace) {
                    outside_allowed(entry, &dir, workspace, protections, hidden, write_workspace)?;
                    out.folders.push(dir);
                }
            }
            continue;
        }
        let Some(real) = real else {
            return Err(format!(
                "`sandbox.writable` entry `{entry}`: {} does not exist; make it first, or remove the entry",
                lexical.display()
            ));
        };
        if inside && write_workspace {
            return Err(format!(
                "`sandbox.writable` entry `{entry}` is in the workspace, which bash already writes under the \
                 workspace-write profile; `writable` names a protected path to lift (`.git`, a hook's file) or \
                 a folder outside the workspace: remove the entry"
            ));
        }
        if !inside {
            outside_allowed(entry, &real, workspace, protections, hidden, write_workspace)?;
        }
        if !out.folders.contains(&real) {
            out.folders.push(real);
        }
    }
    Ok(out)
}

/// `entry` as a path: `~` and `~/...` from `$HOME`, a relative path
/// beneath `workspace`.
fn expand(workspace: &Path, entry: &str) -> Result<PathBuf, String> {
    let home = || {
        std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()).ok_or_else(|| {
            format!("`sandbox.writable` entry `{entry}` starts with `~`, and HOME is not set: write the path whole")
        })
    };
    Ok(match entry.strip_prefix('~') {
        Some("") => home()?,
        Some(rest) if rest.starts_with('/') => home()?.join(&rest[1..]),
        _ => workspace.join(entry),
    })
}

/// Refuses a folder outside the workspace that is the root, holds or
/// lies in a hidden folder or a protected path outside the workspace
/// (what decides calls) or the MCP schema cache's default folder, or holds
/// the workspace under the `read-only` profile. (Under `workspace-write`
/// a folder holding the workspace is allowed: `/tmp` with a workspace in
/// it. The workspace's protected paths and hidden folders are mounted
/// over after the writable folders, so they stay as they are.)
fn outside_allowed(
    entry: &str,
    real: &Path,
    workspace: &Path,
    protections: &[Protection],
    hidden: &[PathBuf],
    write_workspace: bool,
) -> Result<(), String> {
    let refuse = |why: String| {
        Err(format!(
            "`sandbox.writable` entry `{entry}` ({}) {why}; name a folder beside it instead{}",
            real.display(),
            if real.ends_with(".cache") {
                " (commands get a cache folder of their own: XDG_CACHE_HOME, npm_config_cache, PIP_CACHE_DIR)"
            } else {
                ""
            }
        ))
    };
    if real.parent().is_none() {
        return refuse("is the root folder".to_owned());
    }
    if workspace.starts_with(real) && !write_workspace {
        return refuse("holds the workspace, which the read-only profile keeps read-only".to_owned());
    }
    let schema_cache = crate::mcp::default_cache_dir()
        .map(|d| (std::fs::canonicalize(&d).unwrap_or(d), "the MCP schema cache".to_owned()));
    let decisive = hidden
        .iter()
        .map(|h| (h.clone(), "codemode's run state".to_owned()))
        .chain(protections.iter().map(|p| (p.path.clone(), p.what.clone())))
        .chain(schema_cache)
        .filter(|(path, _)| !path.starts_with(workspace));
    for (path, what) in decisive {
        if path.starts_with(real) {
            return refuse(format!("holds {what} ({}), which a command must not change", path.display()));
        }
        if real.starts_with(&path) {
            return refuse(format!("is inside {what} ({}), which a command must not change", path.display()));
        }
    }
    Ok(())
}

/// The git folders outside the workspace that its `.git` file names (a
/// worktree's `.git/worktrees/NAME` and the repository's common folder):
/// `writable = [".git"]` makes them writable too, so `git commit` works
/// in a worktree.
fn worktree_git_dirs(workspace: &Path) -> Vec<PathBuf> {
    let dot_git = workspace.join(".git");
    if dot_git.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    crate::gate::git_metadata::repository_git_dirs(workspace)
        .into_iter()
        .filter(|d| !d.starts_with(workspace) && d.is_dir())
        .collect()
}

/// The folder where commands keep caches between runs in `workspace`:
/// `$XDG_CACHE_HOME/codemode/commands/<workspace digest>` (else under
/// `$HOME/.cache`), made when missing (mode 0700). It decides nothing:
/// no policy, journal, trust record or schema is read from it. `None`
/// when neither variable gives a folder or it cannot be made.
pub(super) fn command_cache(workspace: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .filter(|p| p.is_absolute())?;
    let digest = crate::journal::digest::sha256_hex(workspace.as_os_str().as_encoded_bytes());
    let folder = base.join("codemode").join("commands").join(&digest[..16]);
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&folder)
        .map_err(|e| tracing::warn!("no cache folder for commands ({}): {e}", folder.display()));
    if made.is_err() || folder.starts_with(workspace) {
        return None;
    }
    std::fs::canonicalize(&folder).ok()
}
