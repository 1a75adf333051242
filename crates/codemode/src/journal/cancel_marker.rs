//! The local store's cancel requests: a file named [`MARKER`] in the run's
//! folder (next to its journal, in the state folder: out of reach of
//! programs, whose tools and sandboxed commands cannot see it). The process
//! running the run looks for it every 300 ms (engine/cancel_watch.rs): one
//! `stat` per run it runs.

use std::path::Path;

use super::{NotResumableState, StoreError};

/// The cancel request's file name in a run's folder.
pub const MARKER: &str = "cancel";

/// Records a cancel request for the run whose journal is at `journal`.
///
/// # Errors
/// `NotResumable` with `Unknown` when the run has no journal there; `Failed`
/// when the file cannot be made.
pub(super) fn request(journal: &Path) -> Result<(), StoreError> {
    let dir = journal.parent().expect("a run folder");
    if !journal.exists() {
        let run_id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        return Err(StoreError::NotResumable { run_id, state: NotResumableState::Unknown });
    }
    let marker = dir.join(MARKER);
    std::fs::write(&marker, b"")
        .map_err(|e| StoreError::failed(format!("cannot write {}", marker.display()), e))
}

/// Of `run_ids`, those whose folder under `root` holds a cancel request.
pub(super) fn requested(root: &Path, run_ids: Vec<String>) -> Vec<String> {
    run_ids
        .into_iter()
        .filter(|id| super::local::check_run_id(id).is_ok() && root.join(id).join(MARKER).exists())
        .collect()
}
