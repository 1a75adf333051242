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
        let path = real.clone().unwrap_or_else(|| resolved(&lexical));
        // Where the entry leads, not how it is written: a link in the
        // workspace (a checkout's `build -> /`) or `..` leads outside, and
        // is checked as a folder outside (attack test: `review_35.rs`).
        let inside = path.starts_with(workspace);
        let named_inside = inside || lexical.starts_with(workspace);
        if named_inside && let Some(p) = protections.iter().find(|p| p.path == path || p.path == lexical) {
            out.lifted.push(p.path.clone());
            if lexical == workspace.join(".git") {
                // Named by a file the workspace holds (and bash may
                // rewrite): each folder it names is checked as any folder
                // outside, and only a worktree's own are made writable.
                let named = crate::gate::git_metadata::repository_git_dirs(workspace);
                for dir in named.iter().filter(|d| !d.starts_with(workspace)) {
                    outside_allowed(entry, dir, workspace, protections, hidden, write_workspace)?;
                }
                for dir in worktree_git_dirs(entry, workspace)? {
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
/// over after the writable folders, so they stay as they are.) Also
/// checks the command cache folder.
///
/// # Errors
/// Why `real` (as `entry` names it) is refused, and what to name instead.
pub(super) fn outside_allowed(
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
    // Protections first: they say what each is (the login tokens' folder
    // is hidden too, and is not run state).
    let decisive = protections
        .iter()
        .map(|p| (p.path.clone(), p.what.clone()))
        .chain(hidden.iter().map(|h| (h.clone(), "codemode's run state".to_owned())))
        .chain(schema_cache)
        // As written and as resolved: one that does not exist yet (the
        // trust record's folder before anything was trusted) is known by
        // the path written, and a link on its way (`~/.config` a link to
        // a dotfiles folder) would hide it from a writable folder named
        // by its real path.
        .flat_map(|(path, what)| [(resolved(&path), what.clone()), (path, what)])
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

/// `path` with links resolved as far as it exists: the canonical form
/// of its deepest existing folder, joined with the rest as written.
fn resolved(path: &Path) -> PathBuf {
    for base in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(base) {
            let rest = path.strip_prefix(base).unwrap_or(Path::new(""));
            return if rest.as_os_str().is_empty() { real } else { real.join(rest) };
        }
    }
    path.to_path_buf()
}

/// The git folders outside the workspace that its `.git` file names (a
/// linked worktree's `<common>/worktrees/NAME` and the repository's
/// common folder `<common>`): `writable = [".git"]` makes them writable
/// too, so `git commit` works in a worktree. A `.git` folder in an
/// ancestor of the workspace (a workspace inside a repository's work
/// tree) is that folder.
///
/// Bash may rewrite the `.git` file (the entry lifts it) and the
/// worktree folder's `commondir` (it is made writable), so neither is
/// taken at its word: the worktree folder must lie in a `worktrees`
/// folder and name this `.git` back in its `gitdir` file, and the common
/// folder must be the one holding that `worktrees` folder, as `git
/// worktree add` leaves them. A program can forge that only inside a
/// folder it may already write (attack test: `review_35.rs`).
///
/// # Errors
/// A `.git` that is a link leading outside the workspace, or a `.git`
/// file naming something else.
fn worktree_git_dirs(entry: &str, workspace: &Path) -> Result<Vec<PathBuf>, String> {
    let Some(dot_git) = workspace.ancestors().map(|a| a.join(".git")).find(|p| p.symlink_metadata().is_ok())
    else {
        return Ok(Vec::new());
    };
    let meta = dot_git.symlink_metadata().map_err(|e| e.to_string())?;
    if meta.is_dir() {
        let outside = !dot_git.starts_with(workspace);
        return Ok(std::fs::canonicalize(&dot_git).ok().filter(|_| outside).into_iter().collect());
    }
    let refuse = |why: &str| {
        format!(
            "`sandbox.writable` entry `{entry}`: {} {why}, so the git folders it names are not made writable; \
             name the folders in `writable` instead, or remove the entry",
            dot_git.display()
        )
    };
    if !meta.is_file() {
        // A link to a git folder of the workspace (`.git -> gitdata`)
        // needs nothing outside it.
        if std::fs::canonicalize(&dot_git).is_ok_and(|real| real.starts_with(workspace)) {
            return Ok(Vec::new());
        }
        return Err(refuse("is a link, not the `.git` file of a git worktree"));
    }
    let first_line = |file: &Path| -> Option<String> {
        let text = codemode_base::config_file::read_config(file).ok()?;
        Some(text.lines().next()?.trim().to_owned())
    };
    let named = first_line(&dot_git)
        .and_then(|l| l.strip_prefix("gitdir:").map(|n| n.trim().to_owned()))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| refuse("has no `gitdir:` line"))?;
    let base = dot_git.parent().unwrap_or(workspace);
    let gitdir =
        std::fs::canonicalize(base.join(named)).map_err(|_| refuse("names a folder that does not exist"))?;
    let common = gitdir
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "worktrees"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| refuse("names a folder that is not in a repository's `worktrees` folder"))?;
    let back = first_line(&gitdir.join("gitdir")).and_then(|b| std::fs::canonicalize(gitdir.join(b)).ok());
    if back.as_deref() != std::fs::canonicalize(&dot_git).ok().as_deref() {
        return Err(refuse("names a worktree folder whose `gitdir` file does not name this `.git` back"));
    }
    let named_common =
        first_line(&gitdir.join("commondir")).and_then(|c| std::fs::canonicalize(gitdir.join(c)).ok());
    let is_repository =
        common.join("HEAD").is_file() && common.join("objects").is_dir() && common.join("refs").is_dir();
    if named_common.as_deref() != Some(common.as_path()) || !is_repository {
        return Err(refuse("names a worktree folder whose `commondir` is not the repository holding it"));
    }
    Ok([gitdir, common].into_iter().filter(|d| !d.starts_with(workspace) && d.is_dir()).collect())
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
    // Made by codemode, so no link on the way below `base`: a link there
    // was planted (by a command whose writable folder holds `base`), and
    // binding its target would make another folder writable (attack test:
    // `review_35.rs`).
    let real = std::fs::canonicalize(&folder).ok()?;
    let expected = std::fs::canonicalize(&base).ok()?.join("codemode").join("commands").join(&digest[..16]);
    if real != expected {
        tracing::warn!("no cache folder for commands: {} leads to {}", folder.display(), real.display());
        return None;
    }
    Some(real)
}
