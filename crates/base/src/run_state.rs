//! Where run state lives by default: journals, receipts, spill files and
//! recorded decisions are kept in the user's state folder, outside every
//! workspace, in a folder per workspace:
//!
//! ```text
//! $XDG_STATE_HOME/codemode/                      (else ~/.local/state/codemode/)
//!   workspaces/<name>-<16 hex>/runs/<run_id>/    journal.jsonl, receipt.json, spill files
//! ```
//!
//! `<name>` is the workspace folder's own name (for people reading the
//! folder), `<16 hex>` the first 16 hex digits of the SHA-256 of its
//! canonical path (what tells two `app` folders apart). No tool and no
//! sandboxed command reaches this folder (docs/SECURITY.md): a program
//! cannot read another run's receipts or forge a paused run's decisions.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// The folder under the state home that holds codemode's state.
pub const STATE_DIR_NAME: &str = "codemode";

/// Why no state folder could be found: neither `XDG_STATE_HOME` nor `HOME`
/// is an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoStateHome;

impl std::fmt::Display for NoStateHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "no state folder for run state: neither XDG_STATE_HOME nor HOME is an absolute path; \
             set one of them, or name a journal folder outside the workspace",
        )
    }
}

impl std::error::Error for NoStateHome {}

/// codemode's state folder: `$XDG_STATE_HOME/codemode` when
/// `XDG_STATE_HOME` is an absolute path (the XDG rule: a relative one is
/// ignored), else `$HOME/.local/state/codemode`.
///
/// # Errors
/// [`NoStateHome`] when neither variable is an absolute path.
pub fn state_home() -> Result<PathBuf, NoStateHome> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("state")))
        .ok_or(NoStateHome)?;
    Ok(base.join(STATE_DIR_NAME))
}

/// The name of `workspace`'s folder under `<state home>/workspaces/`:
/// `<its own name>-<first 16 hex digits of the SHA-256 of its path>`.
/// `workspace` should be canonical, so that one folder has one key.
pub fn workspace_key(workspace: &Path) -> String {
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
        .take(48)
        .collect();
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", name.trim_start_matches('.'))
}

/// The folder holding one folder per run of `workspace` under the state
/// folder `home`: `<home>/workspaces/<workspace_key>/runs`.
pub fn runs_folder_in(home: &Path, workspace: &Path) -> PathBuf {
    home.join("workspaces").join(workspace_key(workspace)).join("runs")
}

/// [`runs_folder_in`] the user's [`state_home`].
///
/// # Errors
/// [`NoStateHome`] as [`state_home`].
pub fn runs_folder(workspace: &Path) -> Result<PathBuf, NoStateHome> {
    Ok(runs_folder_in(&state_home()?, workspace))
}

/// Whether `dir` (absolute) is inside `workspace` (canonical), as written
/// (`.` and `..` worked out) or as resolved through the symbolic links of
/// the part of it that exists: a folder there is refused for run state, as
/// a program could read or change it.
pub fn inside(dir: &Path, workspace: &Path) -> bool {
    let lexical = crate::links::lexical(dir);
    if lexical.starts_with(workspace) {
        return true;
    }
    // The longest part that exists, resolved, with the rest appended.
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let resolved = rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
            return resolved.starts_with(workspace);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_is_keyed_by_its_name_and_path() {
        let a = workspace_key(Path::new("/home/me/app"));
        let b = workspace_key(Path::new("/srv/app"));
        assert!(a.starts_with("app-") && b.starts_with("app-"), "{a} {b}");
        assert_eq!(a.len(), "app-".len() + 16);
        assert_ne!(a, b, "two folders of one name have two keys");
        assert_eq!(a, workspace_key(Path::new("/home/me/app")), "stable");
        assert!(workspace_key(Path::new("/")).starts_with("root-"));
        assert!(workspace_key(Path::new("/x/.hidden dir")).starts_with("hidden_dir-"));
        assert_eq!(
            runs_folder_in(Path::new("/st/codemode"), Path::new("/srv/app")),
            Path::new("/st/codemode/workspaces").join(b).join("runs")
        );
    }

    #[test]
    fn folders_inside_a_workspace_are_seen_as_written_and_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), root.join("link")).unwrap();
        assert!(inside(&ws.join("sub/.codemode/j"), &ws));
        assert!(inside(&root.join("other/../ws/j"), &ws));
        assert!(inside(&root.join("link/not/yet"), &ws), "through a link");
        assert!(!inside(&root.join("elsewhere/j"), &ws));
        assert!(!inside(&root, &ws), "a folder holding the workspace is not inside it");
    }
}
