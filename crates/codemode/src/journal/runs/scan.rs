//! Finding a workspace's runs: the store's journals, the journals left in
//! the receipts folder and the run folders there, once each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::read::ReceiptRead;
use super::{RECEIPT_FILE, Runs};
use crate::journal::{JournalStore, RunState, StoreError};

impl Runs {
    /// Every run, oldest first: the store's journals and the receipts
    /// folder's run folders, once each.
    pub(super) async fn scan(&self) -> Result<Vec<Found>, StoreError> {
        let journals = self.store.list().await?;
        let left_here = if self.same_folder() { Vec::new() } else { self.local.list().await? };
        let receipts = self.receipts.clone();
        let folders = tokio::task::spawn_blocking(move || run_folders(&receipts))
            .await
            .map_err(|e| StoreError::failed("the runs folder task", e))??;
        let mut runs: BTreeMap<String, Found> = BTreeMap::new();
        let listed = journals.into_iter().map(|s| (s, Source::Store));
        for (summary, source) in listed.chain(left_here.into_iter().map(|s| (s, Source::Local))) {
            runs.entry(summary.run_id.clone()).or_insert(Found {
                run_id: summary.run_id,
                journal: Some(summary.state),
                source,
                receipt: None,
                updated_ms: summary.updated_unix.saturating_mul(1000),
                bare: false,
            });
        }
        for folder in folders {
            match runs.get_mut(&folder.run_id) {
                Some(run) => {
                    // A bare folder's own time moves when anything in it
                    // does (another prune removing it, say): not the run's.
                    if !folder.bare {
                        run.updated_ms = run.updated_ms.max(folder.updated_ms);
                    }
                    run.receipt = folder.receipt;
                }
                // Only folders named like run ids: anything else a person
                // put there is not codemode's to remove.
                None if folder.run_id.starts_with("run-") => {
                    runs.insert(folder.run_id.clone(), folder);
                }
                None => {}
            }
        }
        let mut runs: Vec<Found> = runs.into_values().collect();
        runs.sort_by(|a, b| a.updated_ms.cmp(&b.updated_ms).then_with(|| a.run_id.cmp(&b.run_id)));
        Ok(runs)
    }
}

/// Which store holds a run's journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The engine's store.
    Store,
    /// The receipts folder, when the store is elsewhere.
    Local,
}

/// One run found on disk or in the store.
#[derive(Debug)]
pub(super) struct Found {
    pub(super) run_id: String,
    /// Its state, when it has a journal.
    pub(super) journal: Option<RunState>,
    /// Where its journal is.
    pub(super) source: Source,
    pub(super) receipt: Option<PathBuf>,
    /// When it last changed: the newest of its journal, its receipt (or,
    /// with neither, its folder), milliseconds since the Unix epoch (the
    /// store's times are to the second; files give finer ones, which order
    /// runs of one second).
    pub(super) updated_ms: u64,
    /// Its folder holds neither its journal nor its receipt: `updated_ms`
    /// is the folder's own time.
    pub(super) bare: bool,
}

impl Found {
    /// Its state: its journal's, else `receipt`'s status, else `unknown`.
    pub(super) fn state_of(&self, receipt: Option<&ReceiptRead>) -> String {
        match (self.journal, receipt.and_then(|r| r.status.as_ref())) {
            (Some(state), _) => state.as_str().to_owned(),
            (None, Some(status)) => status.clone(),
            (None, None) => "unknown".to_owned(),
        }
    }
}

/// The run folders under `root` (none when it does not exist), with their
/// receipt and when they last changed. Links are not followed.
fn run_folders(root: &Path) -> Result<Vec<Found>, StoreError> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::failed(format!("cannot list {}", root.display()), e)),
    };
    let unix = |t: std::io::Result<SystemTime>| {
        t.ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_millis() as u64)
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(run_id) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if crate::journal::local::check_run_id(&run_id).is_err() {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if !meta.is_dir() {
            continue;
        }
        let receipt = entry.path().join(RECEIPT_FILE);
        let receipt_meta = receipt.symlink_metadata().ok().filter(|m| m.is_file());
        let journal_meta = entry
            .path()
            .join(crate::journal::local::JOURNAL_FILE)
            .symlink_metadata()
            .ok()
            .filter(|m| m.is_file());
        let updated_ms = match (&receipt_meta, &journal_meta) {
            (None, None) => unix(meta.modified()),
            (r, j) => unix_of(r.as_ref()).max(unix_of(j.as_ref())),
        };
        out.push(Found {
            run_id,
            journal: None,
            source: Source::Store,
            bare: receipt_meta.is_none() && journal_meta.is_none(),
            receipt: receipt_meta.map(|_| receipt),
            updated_ms,
        });
    }
    Ok(out)
}

/// The names of the entries under `root` that could be runs' folders
/// (names a run id may have; nothing else is looked at, not even what
/// kind of entry each is): none when `root` does not exist, `None` when
/// it cannot be listed.
pub(super) fn run_names(root: &Path) -> Option<Vec<String>> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let mut names = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { return None };
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if crate::journal::local::check_run_id(&name).is_ok() {
            names.push(name);
        }
    }
    Some(names)
}

fn unix_of(meta: Option<&std::fs::Metadata>) -> u64 {
    meta.and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}
