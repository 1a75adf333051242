//! Runs on disk: what `codemode runs list|show|prune` and the retention
//! at each run work on.
//!
//! A workspace's runs are the union of two places: the journals in the
//! [`JournalStore`] and the run folders under the receipts folder (the
//! workspace's folder in the state folder,
//! `<state>/workspaces/<name>-<16 hex>/runs/<run_id>/`, with
//! `receipt.json` and spill files; `codemode_base::run_state`). With the default store both are one folder; with `--journal
//! DIR` or a database they are two, and a run is listed once. Folders
//! without a journal (runs from before journals, runs with the journal
//! off, `codemode run --json`, which saves no receipt) are listed and
//! pruned too.
//!
//! Journal lines are read with [`record`]'s structs; a line that does not
//! parse is skipped here (showing a run never fails on one).
//!
//! This file holds [`Runs`] and its listing; `scan.rs` finds the runs,
//! `read.rs` reads journals and receipts for showing, `details.rs` shows
//! one run and `prune.rs` removes old ones.

mod details;
mod prune;
mod read;
mod scan;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::{JournalStore, LocalStore, NotResumableState, RunState, StoreError};
pub use details::{CallInfo, DecisionInfo, PendingInfo, ProgramInfo, RunDetails};
pub use prune::{PruneOptions, PruneReason, PruneReport, PrunedRun};
use read::{JournalRead, read_receipt_async};
use scan::Source;

/// The receipt's file name in a run folder.
pub(crate) const RECEIPT_FILE: &str = "receipt.json";

/// A workspace's runs: its journal store and its receipts folder.
#[derive(Clone)]
pub struct Runs {
    store: Arc<dyn JournalStore>,
    /// The receipts folder read as a local store: journals left there when
    /// `store` is elsewhere (written with another `--journal`) are seen,
    /// and removed only through the store's lock.
    local: LocalStore,
    receipts: PathBuf,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("store", &self.store.describe())
            .field("receipts", &self.receipts)
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// The runs of the canonical `workspace` as an engine without
    /// [`spill_dir`](crate::EngineBuilder::spill_dir) or
    /// [`state_dir`](crate::EngineBuilder::state_dir) keeps them: receipts
    /// in the workspace's folder in the user's state folder, journals in
    /// `store`; `None` (the journal off) reads that folder, which holds any
    /// journal written before.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when no state folder can be found (neither
    /// `XDG_STATE_HOME` nor `HOME` is set), or when the way to the runs
    /// folder meets a symbolic link inside the workspace: a program could
    /// have pointed it at runs of its own, as an engine refuses when built
    /// (docs/SECURITY.md, "Run state is outside the workspace").
    pub fn for_workspace(workspace: &Path, store: Option<Arc<dyn JournalStore>>) -> Result<Runs, StoreError> {
        let receipts = codemode_base::run_state::runs_folder(workspace)
            .map_err(|e| StoreError::Failed(e.to_string()))?;
        if let Some(link) = codemode_base::links::link_met_beneath(&receipts, workspace) {
            return Err(StoreError::Failed(format!(
                "the runs folder {} is reached through the symbolic link {}, which is inside the workspace \
                 {}: a program's bash command could have pointed it at runs of its own; set XDG_STATE_HOME \
                 to the real path of the state home, written without the link",
                receipts.display(),
                link.display(),
                workspace.display()
            )));
        }
        Ok(Runs::in_folder(store, receipts))
    }

    /// The runs whose receipts are under `receipts` (one folder per run)
    /// and whose journals are in `store`; `None` reads `receipts` as a
    /// local store bound to one workspace. What
    /// [`Engine::runs`](crate::Engine::runs) gives.
    pub fn in_folder(store: Option<Arc<dyn JournalStore>>, receipts: impl Into<PathBuf>) -> Runs {
        let receipts = receipts.into();
        let local = LocalStore::for_workspace(receipts.clone());
        let store = store.unwrap_or_else(|| Arc::new(local.clone()));
        Runs { store, local, receipts }
    }

    /// The runs of an engine whose spill files and receipts go to
    /// `receipts` ([`spill_dir`](crate::EngineBuilder::spill_dir)) and
    /// whose journals are in `store`.
    pub fn new(store: Arc<dyn JournalStore>, receipts: impl Into<PathBuf>) -> Runs {
        let receipts = receipts.into();
        Runs { store, local: LocalStore::new(receipts.clone()), receipts }
    }

    /// The journal store.
    pub fn store(&self) -> &Arc<dyn JournalStore> {
        &self.store
    }

    /// The folder holding one folder per run, with its receipt and spill
    /// files.
    pub fn receipts_folder(&self) -> &Path {
        &self.receipts
    }

    /// Every run, oldest first (by when it last changed, then by id).
    ///
    /// # Errors
    /// [`StoreError::Failed`] when the store or the receipts folder cannot
    /// be read.
    ///
    /// A run whose journal cannot be read (damaged: a line that is not
    /// UTF-8) is listed with the state `unreadable`; `show` says why.
    pub async fn list(&self) -> Result<Vec<RunListing>, StoreError> {
        let mut out = Vec::new();
        for found in self.scan().await? {
            let receipt = match (&found.journal, &found.receipt) {
                (None, Some(path)) => read_receipt_async(path.clone()).await,
                _ => None,
            };
            let mut listing = RunListing {
                state: found.state_of(receipt.as_ref()),
                journal: found.journal.is_some(),
                receipt: found.receipt.clone(),
                program: None,
                started_at: None,
                updated_unix: found.updated_ms / 1000,
                calls: None,
                pending: 0,
                run_id: found.run_id,
            };
            if found.journal.is_some() {
                match self.source(found.source).load(&listing.run_id).await {
                    Ok(stored) => {
                        let read = JournalRead::of(&stored.lines);
                        listing.state = stored.state.as_str().to_owned();
                        if let Some(why) = unreadable(&stored, &read) {
                            tracing::warn!("run {}: {why}", listing.run_id);
                            listing.state = UNREADABLE.to_owned();
                        }
                        listing.program = read.header.as_ref().map(|h| h.program.name.clone());
                        listing.started_at = read.header.as_ref().map(|h| h.started_at.clone());
                        listing.calls = Some(read.calls.len() as u64);
                        if stored.state == RunState::Paused {
                            listing.pending = read.open_pending().count() as u64;
                        }
                    }
                    // Removed meanwhile (another prune): not listed.
                    Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => continue,
                    // One damaged journal does not hide the other runs.
                    Err(e) => {
                        tracing::warn!("run {}: its journal cannot be read: {e}", listing.run_id);
                        listing.state = UNREADABLE.to_owned();
                    }
                }
            } else if let Some(receipt) = receipt {
                listing.calls = receipt.calls.as_ref().map(|c| c.len() as u64);
                if listing.state == "paused" {
                    listing.pending = receipt.pending.len() as u64;
                }
            }
            out.push(listing);
        }
        Ok(out)
    }

    fn source(&self, source: Source) -> &dyn JournalStore {
        match source {
            Source::Store => &*self.store,
            Source::Local => &self.local,
        }
    }

    /// Whether the store is the local folder at the receipts folder (the
    /// default): then it is read once.
    fn same_folder(&self) -> bool {
        self.store.describe() == self.local.describe()
    }

    /// Whether runs keep their journals in their folders here (the journal
    /// store is the local folder at the runs folder, the default), so a
    /// run's folder is made for its journal even when no receipt is saved.
    pub fn journals_in_run_folders(&self) -> bool {
        self.same_folder()
    }
}

/// The state [`Runs::list`] gives a run whose journal cannot be read.
pub const UNREADABLE: &str = "unreadable";

/// Why run `stored` (read as `read`) reads as [`UNREADABLE`], if it does:
/// a paused or interrupted run whose journal a resume could not read (a
/// damaged line), as the resume would say; or any run without its first
/// line (empty: its
/// process died as it made the file), whatever its state says, which is
/// no run to recover.
fn unreadable(stored: &crate::journal::StoredRun, read: &JournalRead) -> Option<String> {
    if read.header.is_none() {
        return Some(
            "its journal has no header (empty, or cut in its first line): it cannot be resumed".to_owned(),
        );
    }
    if matches!(stored.state, RunState::Paused | RunState::Interrupted)
        && let Err(why) = super::replay::Journal::parse(&stored.lines)
    {
        return Some(format!("its journal cannot be resumed: {why}"));
    }
    None
}

/// One run in [`Runs::list`].
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RunListing {
    /// The run's id.
    pub run_id: String,
    /// Its journal's state (`running`, `paused`, `completed`, `failed`,
    /// `timed_out`, `cancelled`, `interrupted`); without a journal, its
    /// receipt's `status`; with neither, `unknown`.
    pub state: String,
    /// Whether it has a journal (only a run with one can be resumed).
    pub journal: bool,
    /// Its saved receipt, when there is one.
    pub receipt: Option<PathBuf>,
    /// The program's name, from the journal.
    pub program: Option<String>,
    /// When it started (RFC 3339 UTC), from the journal.
    pub started_at: Option<String>,
    /// When it last changed, seconds since the Unix epoch.
    pub updated_unix: u64,
    /// How many calls it made, when known.
    pub calls: Option<u64>,
    /// How many calls wait for a decision (paused runs).
    pub pending: u64,
}

#[cfg(test)]
mod tests;
