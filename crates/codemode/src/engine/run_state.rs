//! Where an engine keeps run state (journals, receipts, spill files,
//! recorded decisions), decided once when it is built: outside the
//! workspace, in a folder no tool and no sandboxed command can reach
//! (docs/SECURITY.md, "Run state").

use std::path::{Path, PathBuf};

use codemode_base::run_state;

use super::builder::BuildError;
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
                let home = match given {
                    Some(dir) => {
                        let dir = absolute(&dir)?;
                        refuse_inside(workspace, &dir, "EngineBuilder::state_dir")?;
                        dir
                    }
                    // The user's own: may hold the workspace's parent
                    // (a workspace that is the home folder); hidden there.
                    None => run_state::state_home().map_err(|e| BuildError::RunState(e.to_string()))?,
                };
                (run_state::runs_folder_in(&home, workspace), home)
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

/// `dir` made absolute against the current directory.
fn absolute(dir: &Path) -> Result<PathBuf, BuildError> {
    std::path::absolute(dir).map_err(|e| BuildError::RunState(format!("{}: {e}", dir.display())))
}

/// Refuses `dir` for run state when it is inside `workspace`.
fn refuse_inside(workspace: &Path, dir: &Path, what: &str) -> Result<(), BuildError> {
    if !run_state::inside(dir, workspace) {
        return Ok(());
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
