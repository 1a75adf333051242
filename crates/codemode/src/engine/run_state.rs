//! Where an engine keeps run state (journals, receipts, spill files,
//! recorded decisions), decided once when it is built: outside the
//! workspace, in a folder no tool and no sandboxed command can reach
//! (docs/SECURITY.md, "Run state").

use std::path::{Path, PathBuf};

use codemode_base::run_state;

use super::builder::BuildError;
use super::rewritable_links::Decisive;
use crate::journal::JournalStore;

/// The folders of an engine's run state.
#[derive(Debug, Clone)]
pub(super) struct RunStateFolders {
    /// `<spill_root>/<run_id>/` holds a run's spill files and receipt (and
    /// journal, with the default store).
    pub spill_root: PathBuf,
    /// Folders hidden from every tool and sandboxed command: the state
    /// folder (every workspace's runs) or the spill folder a host named,
    /// and a local journal store's folder.
    pub hidden: Vec<PathBuf>,
}

impl RunStateFolders {
    /// The spill root: `spill_dir` when given, else the workspace's folder
    /// under `state_dir` (default: the user's state folder); made when
    /// missing, private to the user.
    ///
    /// # Errors
    /// [`BuildError::RunState`] when a folder given is inside the
    /// workspace, or no state folder can be found.
    pub(super) fn settle(
        workspace: &Path,
        spill_dir: Option<PathBuf>,
        state_dir: Option<PathBuf>,
    ) -> Result<RunStateFolders, BuildError> {
        let (spill_root, hidden) = match (spill_dir, state_dir) {
            (Some(dir), _) => {
                let dir = absolute(&dir)?;
                refuse_inside(workspace, &dir, "EngineBuilder::spill_dir")?;
                (dir.clone(), dir)
            }
            (None, given) => {
                let given_dir = given.is_some();
                let (home, what, set) = match given {
                    Some(dir) => {
                        let dir = absolute(&dir)?;
                        refuse_inside(workspace, &dir, "EngineBuilder::state_dir")?;
                        (dir, "EngineBuilder::state_dir", "name a folder outside the workspace, such as")
                    }
                    // The user's own: may hold the workspace's parent
                    // (a workspace that is the home folder); hidden there.
                    None => {
                        let home =
                            run_state::state_home().map_err(|e| BuildError::RunState(e.to_string()))?;
                        (absolute(&home)?, "the state folder", "set XDG_STATE_HOME to")
                    }
                };
                let runs = run_state::runs_folder_in(&home, workspace);
                // The whole way to this workspace's runs, not only to the
                // home: a link a program planted beneath the home
                // (`workspaces/`) would lead there as well.
                let shown =
                    if given_dir { home.clone() } else { home.parent().unwrap_or(&home).to_path_buf() };
                let folder = Decisive { path: &runs, what, set, shown };
                super::rewritable_links::refuse(&[workspace], &[folder])?;
                (runs, home)
            }
        };
        // Not fatal: a folder that cannot be made fails each write to it
        // later, and the run says so (a receipt is never lost silently).
        if let Err(e) = make_private(&spill_root) {
            tracing::warn!("{e}");
        }
        let mut hidden = vec![hidden];
        // The same folder by its resolved path, when a link leads to it.
        if let Ok(real) = std::fs::canonicalize(&hidden[0])
            && real != hidden[0]
        {
            hidden.push(real);
        }
        Ok(RunStateFolders { spill_root, hidden })
    }

    /// Adds `store`'s folder (a local journal folder) to the hidden
    /// folders.
    ///
    /// # Errors
    /// [`BuildError::RunState`] when that folder is inside the workspace
    /// (a program could forge a paused run's decisions there), unless it
    /// is beneath a folder already hidden (the default store).
    pub(super) fn with_journal(
        mut self,
        workspace: &Path,
        store: Option<&dyn JournalStore>,
    ) -> Result<RunStateFolders, BuildError> {
        let Some(folder) = store.and_then(|s| s.folder()) else { return Ok(self) };
        let folder = absolute(folder)?;
        if self.hidden.iter().any(|h| folder.starts_with(h)) {
            return Ok(self);
        }
        refuse_inside(workspace, &folder, "the journal folder")?;
        // Made now, so that the sandbox can cover it (not fatal, as above).
        if let Err(e) = make_private(&folder) {
            tracing::warn!("{e}");
        }
        if let Ok(real) = std::fs::canonicalize(&folder)
            && real != folder
        {
            self.hidden.push(real);
        }
        self.hidden.push(folder);
        Ok(self)
    }
}

/// `dir` made absolute against the current directory, `.` and `..`
/// worked out: the sandbox mounts and pins by these paths, and a `..`
/// left in one would pin a folder above the workspace.
fn absolute(dir: &Path) -> Result<PathBuf, BuildError> {
    std::path::absolute(dir)
        .map(|dir| codemode_base::links::lexical(&dir))
        .map_err(|e| BuildError::RunState(format!("{}: {e}", dir.display())))
}

/// Refuses `dir` for run state when it is inside `workspace`, or reached
/// through a link inside it.
fn refuse_inside(workspace: &Path, dir: &Path, what: &str) -> Result<(), BuildError> {
    if !run_state::inside(dir, workspace) {
        let folder = Decisive {
            path: dir,
            what,
            set: "name a folder outside the workspace, such as",
            shown: dir.to_path_buf(),
        };
        return super::rewritable_links::refuse(&[workspace], &[folder]);
    }
    Err(BuildError::RunState(format!(
        "{what} {} is inside the workspace {}: a program could read run state there or forge a \
         paused run's decisions; use a folder outside the workspace (the default is the state \
         folder, $XDG_STATE_HOME/codemode)",
        dir.display(),
        workspace.display()
    )))
}

/// Makes `dir` and its missing parents, each private to the user (0700).
fn make_private(dir: &Path) -> Result<(), BuildError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| BuildError::RunState(format!("cannot make {}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_reached_through_a_link_inside_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, out) = (top.join("ws"), top.join("out"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(out.join("real")).unwrap();
        // Written outside, resolved outside, but through `ws/lnk` on the
        // way, which a program could point elsewhere.
        std::os::unix::fs::symlink(out.join("real"), ws.join("lnk")).unwrap();
        std::os::unix::fs::symlink(ws.join("lnk"), out.join("via")).unwrap();
        for (spill, state) in [(Some(out.join("via/spill")), None), (None, Some(out.join("via/state")))] {
            let err = RunStateFolders::settle(&ws, spill, state).unwrap_err().to_string();
            assert!(err.contains("reached through the symbolic link") && err.contains("ws/lnk"), "{err}");
        }
        // The same folder written without the link is accepted.
        let ok = RunStateFolders::settle(&ws, Some(out.join("real/spill")), None).unwrap();
        assert_eq!(ok.spill_root, out.join("real/spill"));
    }
}
