//! The repository's git metadata, wherever it lives (docs/SECURITY.md,
//! "Protected paths"). A line in a git folder's `config` (`core.fsmonitor`,
//! `core.hooksPath`) or a file under its `hooks/` runs on the next `git
//! status`, in the sandbox under an allow rule and outside it when the
//! person runs git. The folder is not always `<workspace>/.git`: `git init
//! --separate-git-dir=gitdata` leaves a `.git` *file* saying `gitdir:
//! gitdata`, `.git` may be a link to another folder, and a linked
//! worktree's git folder names the main one in its `commondir` file.
//!
//! Two defences, one per moment:
//!
//! - When the engine is built, [`workspace_git_dirs`] follows what git
//!   would follow from the workspace (the nearest `.git` at or above it,
//!   a `gitdir:` line, a link, `commondir`, and `GIT_DIR` /
//!   `GIT_COMMON_DIR` in codemode's environment) and returns the git
//!   folders inside the workspace; they are protected like `.git/`, for
//!   writer tools and in the bash sandbox (read-only bind mounts).
//! - For each call of a writer tool, [`git_folder_of`] looks at the
//!   folders the call's path lies in: one named `.git` (a nested
//!   repository's, folder or file) or one git would take for a git folder
//!   (a `HEAD` file beside `objects/` and `refs/`, or beside a `commondir`
//!   file) is protected whatever its name, so a nested repository's
//!   separate git folder is covered too, without a walk of the workspace.

use std::path::{Path, PathBuf};

use super::protection::Protection;

/// What a protection of the workspace's own git folder is called.
const WORKSPACE_GIT_DIR: &str = "the repository's git folder (where the workspace's `.git` points)";

/// The git folders the workspace uses that lie inside it, canonical, with
/// what each is: the folder a `.git` file's `gitdir:` line or a `.git`
/// link names, its `commondir`, and `GIT_DIR` / `GIT_COMMON_DIR` when set.
/// `<workspace>/.git` itself is protected elsewhere (and also when it is
/// missing, so it cannot be made). A git folder outside the workspace is
/// left out: no tool writes outside the workspace and the sandbox keeps
/// everything outside it read-only. A git folder that is the workspace or
/// holds it is left out too (it would protect everything).
///
/// Reads at most two small files (`.git`, `commondir`), each bounded and
/// never blocking (`codemode_base::config_file`); a file it cannot read
/// names nothing.
pub(crate) fn workspace_git_dirs(workspace: &Path) -> Vec<Protection> {
    let mut out: Vec<Protection> = Vec::new();
    for dir in repository_git_dirs(workspace) {
        if dir.starts_with(workspace) && dir != workspace && !out.iter().any(|p| p.path == dir) {
            out.push(Protection { path: dir, what: WORKSPACE_GIT_DIR.to_owned(), missing_for: None });
        }
    }
    out
}

/// Every git folder the workspace uses, canonical, inside it or not (see
/// [`workspace_git_dirs`]): the nearest `.git`'s folder, `GIT_DIR` and
/// `GIT_COMMON_DIR`, and their `commondir`s. Their `config` files are
/// where [`super::git_includes`] looks for includes.
pub(crate) fn repository_git_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dot_git) =
        workspace.ancestors().map(|a| a.join(".git")).find(|p| p.symlink_metadata().is_ok())
        && let Some(dir) = git_dir_of(&dot_git)
    {
        dirs.push(dir);
    }
    for var in ["GIT_DIR", "GIT_COMMON_DIR"] {
        if let Some(dir) = std::env::var_os(var).and_then(|d| std::fs::canonicalize(d).ok()) {
            dirs.push(dir);
        }
    }
    let commons: Vec<PathBuf> = dirs.iter().filter_map(|d| common_dir(d)).collect();
    dirs.extend(commons);
    dirs
}

/// The git folder a `.git` entry stands for, canonical: a folder (or a
/// link to one) is itself; a file holds `gitdir: <path>`, relative to the
/// file's folder or absolute.
fn git_dir_of(dot_git: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(dot_git).ok()?;
    if real.is_dir() {
        return Some(real);
    }
    let text = codemode_base::config_file::read_config(&real).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    if named.is_empty() {
        return None;
    }
    std::fs::canonicalize(dot_git.parent()?.join(named)).ok().filter(|d| d.is_dir())
}

/// The common folder a linked worktree's git folder `dir` names in its
/// `commondir` file (relative to `dir`, or absolute), canonical.
fn common_dir(dir: &Path) -> Option<PathBuf> {
    let file = dir.join("commondir");
    file.symlink_metadata().ok()?;
    let text = codemode_base::config_file::read_config(&file).ok()?;
    let named = text.lines().next()?.trim();
    if named.is_empty() {
        return None;
    }
    std::fs::canonicalize(dir.join(named)).ok().filter(|d| d.is_dir())
}

/// The git folder that `path` (absolute) lies in, beneath `workspace`
/// (canonical), if any: the outermost folder on its way named `.git` (a
/// nested repository's, whether a folder or a `.git` file), or that git
/// would take for a git folder ([`looks_like_git_dir`]). The workspace
/// itself is not looked at. Costs a few `stat`s per folder of the path.
pub(crate) fn git_folder_of(workspace: &Path, path: &Path) -> Option<Protection> {
    let rel = path.strip_prefix(workspace).ok()?;
    let mut folder = workspace.to_path_buf();
    for part in rel.components() {
        folder.push(part);
        if part.as_os_str() == ".git" {
            return Some(Protection {
                path: folder,
                what: "a nested repository's .git folder".to_owned(),
                missing_for: None,
            });
        }
        if looks_like_git_dir(&folder) {
            return Some(Protection {
                path: folder,
                what: "a repository's git folder (a `HEAD` file beside `objects/` and `refs/`)".to_owned(),
                missing_for: None,
            });
        }
    }
    None
}

/// Whether git would take `folder` for a git folder: a `HEAD` file, and
/// `objects/` and `refs/` folders or a `commondir` file (a linked
/// worktree's).
fn looks_like_git_dir(folder: &Path) -> bool {
    folder.join("HEAD").is_file()
        && ((folder.join("objects").is_dir() && folder.join("refs").is_dir())
            || folder.join("commondir").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    fn git_dir(at: &Path) {
        std::fs::create_dir_all(at.join("objects")).unwrap();
        std::fs::create_dir_all(at.join("refs")).unwrap();
        std::fs::write(at.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    fn paths(found: &[Protection]) -> Vec<PathBuf> {
        found.iter().map(|p| p.path.clone()).collect()
    }

    #[test]
    fn a_git_file_a_link_and_a_worktrees_common_folder_are_followed() {
        let (_d, ws) = workspace();
        assert!(workspace_git_dirs(&ws).is_empty(), "no repository, nothing more");
        git_dir(&ws.join("gitdata"));
        std::fs::write(ws.join(".git"), "gitdir: gitdata\n").unwrap();
        assert_eq!(paths(&workspace_git_dirs(&ws)), [ws.join("gitdata")]);
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", ws.join("gitdata").display())).unwrap();
        assert_eq!(paths(&workspace_git_dirs(&ws)), [ws.join("gitdata")], "absolute too");
        // A linked worktree: its git folder names the common one.
        let wt = ws.join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join("commondir"), "../..\n").unwrap();
        std::fs::write(ws.join(".git"), "gitdir: main/.git/worktrees/wt\n").unwrap();
        assert_eq!(paths(&workspace_git_dirs(&ws)), [wt.clone(), ws.join("main/.git")]);
        // A link.
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::os::unix::fs::symlink("gitdata", ws.join(".git")).unwrap();
        assert_eq!(paths(&workspace_git_dirs(&ws)), [ws.join("gitdata")]);
    }

    #[test]
    fn git_folders_outside_the_workspace_or_holding_it_are_left_out() {
        let (_d, root) = workspace();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        git_dir(&root.join("elsewhere"));
        std::fs::write(ws.join(".git"), "gitdir: ../elsewhere\n").unwrap();
        assert!(workspace_git_dirs(&ws).is_empty());
        std::fs::write(ws.join(".git"), "gitdir: .\n").unwrap();
        assert!(workspace_git_dirs(&ws).is_empty(), "the workspace itself is not protected whole");
        std::fs::write(ws.join(".git"), "not a git file\n").unwrap();
        assert!(workspace_git_dirs(&ws).is_empty());
    }

    #[test]
    fn a_path_inside_any_git_folder_is_found_whatever_its_name() {
        let (_d, ws) = workspace();
        git_dir(&ws.join("vendor/lib-git"));
        let found = git_folder_of(&ws, &ws.join("vendor/lib-git/config")).unwrap();
        assert_eq!(found.path, ws.join("vendor/lib-git"));
        let nested = git_folder_of(&ws, &ws.join("vendor/lib/.git")).unwrap();
        assert_eq!(nested.path, ws.join("vendor/lib/.git"), "a nested `.git`, file or folder");
        assert!(git_folder_of(&ws, &ws.join("vendor/lib-git")).is_some(), "the folder itself too");
        assert!(git_folder_of(&ws, &ws.join("vendor/other/config")).is_none());
    }
}
