//! Runs on disk: what `codemode runs list|show|prune` and the retention
//! after each run work on.
//!
//! A workspace's runs are the union of two places: the journals in the
//! [`JournalStore`] and the run folders under the receipts folder
//! (`<workspace>/.codemode/runs/<run_id>/`, with `receipt.json` and spill
//! files). With the default store both are one folder; with `--journal
//! DIR` or a database they are two, and a run is listed once. Folders
//! without a journal (runs from before journals, runs with the journal
//! off, `codemode run --json`, which saves no receipt) are listed and
//! pruned too.
//!
//! Journal lines are read with [`record`]'s structs; a line that does not
//! parse is skipped here (showing a run never fails on one).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::{
    self, ApprovalDecision, ApprovalRecord, CallRecord, DecisionRecord, DoneRecord, Header, PendingRecord,
};
use super::{JournalStore, LocalStore, NotResumableState, Retention, RunState, StoreError};
use crate::receipt::{CallStatus, Caller, Decision};

/// The receipt's file name in a run folder.
const RECEIPT_FILE: &str = "receipt.json";

/// A workspace's runs: its journal store and its receipts folder.
#[derive(Clone)]
pub struct Runs {
    store: Arc<dyn JournalStore>,
    /// The receipts folder read as a local store: journals left there when
    /// `store` is elsewhere (written with another `--journal`) are seen,
    /// and removed only through the store's lock.
    local: LocalStore,
    receipts: PathBuf,
    /// The workspace, when the receipts folder is the default one inside
    /// it: no symbolic link may be on the way (a `.codemode` link would
    /// make `prune` remove folders elsewhere).
    confine: Option<PathBuf>,
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
    /// The runs of the canonical `workspace`, whose receipts are in
    /// `<workspace>/.codemode/runs` (an engine without
    /// [`spill_dir`](crate::EngineBuilder::spill_dir)), and whose journals
    /// are in `store`; `None` (the journal off) reads the default local
    /// folder, which holds any journal written before.
    pub fn for_workspace(workspace: &Path, store: Option<Arc<dyn JournalStore>>) -> Runs {
        let receipts = workspace.join(codemode_base::HIDDEN_NAME).join("runs");
        let local = LocalStore::confined(receipts.clone(), Some(workspace.to_path_buf()));
        let store = store.unwrap_or_else(|| Arc::new(local.clone()));
        Runs { store, local, receipts, confine: Some(workspace.to_path_buf()) }
    }

    /// The runs of an engine whose spill files and receipts go to
    /// `receipts` ([`spill_dir`](crate::EngineBuilder::spill_dir)) and
    /// whose journals are in `store`.
    pub fn new(store: Arc<dyn JournalStore>, receipts: impl Into<PathBuf>) -> Runs {
        let receipts = receipts.into();
        Runs { store, local: LocalStore::new(receipts.clone()), receipts, confine: None }
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
    /// be read, or a symbolic link is on the way to the default folder.
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

    /// What is known of run `run_id`: from its journal when it has one,
    /// else from its receipt.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with [`NotResumableState::Unknown`]
    /// when neither the store nor the receipts folder has the id (the same
    /// error `resume` gives); [`StoreError::Failed`] when they cannot be
    /// read.
    pub async fn show(&self, run_id: &str) -> Result<RunDetails, StoreError> {
        let unknown =
            || StoreError::NotResumable { run_id: run_id.to_owned(), state: NotResumableState::Unknown };
        super::local::check_run_id(run_id)?;
        self.check_links()?;
        let folder = self.receipts.join(run_id);
        let folder_meta = folder.symlink_metadata().ok().filter(|m| m.is_dir());
        let receipt_path = folder.join(RECEIPT_FILE);
        let receipt_path = (folder_meta.is_some() && receipt_path.is_file()).then_some(receipt_path);
        let mut stored = None;
        for source in [Source::Store, Source::Local] {
            if source == Source::Local && self.same_folder() {
                break;
            }
            match self.source(source).load(run_id).await {
                Ok(found) => {
                    stored = Some((found, self.source(source).describe()));
                    break;
                }
                Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let mut details = RunDetails {
            run_id: run_id.to_owned(),
            state: "unknown".to_owned(),
            journal: stored.as_ref().map(|(_, store)| store.clone()),
            program: None,
            started_at: None,
            workspace: None,
            codemode_version: None,
            catalog_sha256: None,
            policy_sha256: None,
            calls: Vec::new(),
            pending: Vec::new(),
            decisions: Vec::new(),
            recorded: Vec::new(),
            receipt: receipt_path.clone(),
            folder: folder_meta.is_some().then(|| folder.clone()),
        };
        if let Some((stored, _)) = stored {
            let read = JournalRead::of(&stored.lines);
            details.state = stored.state.as_str().to_owned();
            // Only a paused run waits for decisions: an interrupted or
            // ended one lists none (nothing can decide them).
            let open: Vec<PendingInfo> = if stored.state == RunState::Paused {
                read.open_pending().cloned().collect()
            } else {
                Vec::new()
            };
            if let Some(h) = read.header {
                details.program = Some(ProgramInfo {
                    name: h.program.name,
                    sha256: h.program.sha256,
                    path: h.program.path,
                });
                details.started_at = Some(h.started_at);
                details.workspace = Some(h.workspace);
                details.codemode_version = Some(h.codemode_version);
                details.catalog_sha256 = Some(h.catalog_sha256);
                details.policy_sha256 = Some(h.policy_sha256);
            }
            details.calls = read.calls.into_values().collect();
            details.recorded =
                read.approvals.values().filter(|a| open.iter().any(|p| p.seq == a.seq)).cloned().collect();
            details.pending = open;
            details.decisions = read.decisions;
            return Ok(details);
        }
        if folder_meta.is_none() {
            return Err(unknown());
        }
        let receipt = match &receipt_path {
            Some(path) => read_receipt_async(path.clone()).await,
            None => None,
        };
        if let Some(receipt) = receipt {
            details.state = receipt.status.unwrap_or_else(|| "unknown".to_owned());
            details.catalog_sha256 = receipt.catalog_sha256;
            details.calls = receipt.calls.unwrap_or_default();
            details.pending = receipt
                .pending
                .into_iter()
                .map(|p| PendingInfo {
                    seq: p.seq,
                    tool: p.tool,
                    arguments: p.arguments,
                    reason: None,
                    subject: None,
                })
                .collect();
        }
        Ok(details)
    }

    /// Removes the runs `retention` does not keep (see [`Retention`] for
    /// the rules), or with `options.dry_run` only says which it would.
    /// Runs named in `options.keep` (the run just made) and runs another
    /// process holds are never removed. A run that cannot be removed is
    /// reported in [`PruneReport::failures`] and the others go on.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when the runs cannot be listed.
    pub async fn prune(
        &self,
        retention: Retention,
        options: &PruneOptions,
    ) -> Result<PruneReport, StoreError> {
        let now = options.now.unwrap_or_else(SystemTime::now);
        let now_unix = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let max_age = retention.keep_days.saturating_mul(86_400);
        let mut found = self.scan().await?;
        // Newest first.
        found.reverse();
        let mut report = PruneReport { dry_run: options.dry_run, ..PruneReport::default() };
        let kept_on_purpose = |run: &Found| options.keep.contains(&run.run_id);
        // The runs kept so far that count against keep_runs; the runs kept
        // on purpose (the run just made) are the newest, whatever the
        // clock says.
        let mut counted = found.iter().filter(|r| kept_on_purpose(r)).count() as u64;
        for run in found {
            let age_secs = now_unix.saturating_sub(run.updated_ms / 1000);
            if kept_on_purpose(&run) {
                report.kept += 1;
                continue;
            }
            if run.journal == Some(RunState::Running) {
                report.kept += 1;
                report.busy.push(run.run_id);
                continue;
            }
            // Paused runs wait for a person; folders with neither journal
            // nor receipt may be runs still going in another process:
            // neither counts, and only age removes them.
            let uncounted =
                run.journal == Some(RunState::Paused) || (run.journal.is_none() && run.receipt.is_none());
            let why = if age_secs > max_age {
                PruneReason::Age
            } else if !uncounted && counted >= retention.keep_runs {
                PruneReason::Count
            } else {
                report.kept += 1;
                counted += u64::from(!uncounted);
                continue;
            };
            if let Some(workspace) = &options.workspace
                && run.journal.is_some()
                && !self.made_in(&run, workspace).await
            {
                report.kept += 1;
                continue;
            }
            let receipt = match (&run.journal, &run.receipt) {
                (None, Some(path)) => read_receipt_async(path.clone()).await,
                _ => None,
            };
            let state = run.state_of(receipt.as_ref());
            if !options.dry_run {
                match self.remove(&run).await {
                    Ok(true) => {}
                    // Another process (a prune at the same time) removed
                    // it first: its report counts it, this one does not.
                    Ok(false) => continue,
                    Err(StoreError::NotResumable { state: NotResumableState::Busy, .. }) => {
                        report.kept += 1;
                        report.busy.push(run.run_id);
                        continue;
                    }
                    Err(e) => {
                        report.kept += 1;
                        report.failures.push(format!("{}: {e}", run.run_id));
                        continue;
                    }
                }
            }
            report.removed.push(PrunedRun { run_id: run.run_id, state, age_secs, why });
        }
        Ok(report)
    }

    /// Removes one run: its journal (for the local folder, its whole
    /// folder) and its folder under the receipts folder.
    /// Whether `run`'s journal header names `workspace` (a journal that
    /// cannot be read is not this workspace's to remove).
    async fn made_in(&self, run: &Found, workspace: &Path) -> bool {
        let Ok(stored) = self.source(run.source).load(&run.run_id).await else { return false };
        let Some(first) = stored.lines.first() else { return false };
        serde_json::from_str::<Header>(first).is_ok_and(|h| Path::new(&h.workspace) == workspace)
    }

    /// Whether this call removed anything: `false` when another process
    /// (a prune at the same time) had already removed all of it.
    async fn remove(&self, run: &Found) -> Result<bool, StoreError> {
        let mut removed_any = false;
        if run.journal.is_some() {
            match self.source(run.source).remove(&run.run_id).await {
                Ok(()) => removed_any = true,
                Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let folder = self.receipts.join(&run.run_id);
        match folder.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {
                let shown = folder.display().to_string();
                let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&folder))
                    .await
                    .map_err(|e| StoreError::failed(&shown, e))?;
                match removed {
                    Ok(()) => Ok(true),
                    // Another process pruning at the same time got there
                    // first.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(removed_any),
                    Err(e) => Err(StoreError::failed(format!("cannot remove {shown}"), e)),
                }
            }
            _ => Ok(removed_any),
        }
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

    /// Refuses a symbolic link between the workspace and the default
    /// receipts folder.
    fn check_links(&self) -> Result<(), StoreError> {
        let Some(workspace) = &self.confine else { return Ok(()) };
        let link = codemode_base::links::link_below(&self.receipts, workspace);
        match link {
            Some(link) => Err(StoreError::Failed(format!(
                "{} is a symbolic link; runs are not read or removed through links",
                link.display()
            ))),
            None => Ok(()),
        }
    }

    /// Every run, oldest first: the store's journals and the receipts
    /// folder's run folders, once each.
    async fn scan(&self) -> Result<Vec<Found>, StoreError> {
        self.check_links()?;
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
            });
        }
        for folder in folders {
            match runs.get_mut(&folder.run_id) {
                Some(run) => {
                    run.updated_ms = run.updated_ms.max(folder.updated_ms);
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
enum Source {
    /// The engine's store.
    Store,
    /// The receipts folder, when the store is elsewhere.
    Local,
}

/// One run found on disk or in the store.
#[derive(Debug)]
struct Found {
    run_id: String,
    /// Its state, when it has a journal.
    journal: Option<RunState>,
    /// Where its journal is.
    source: Source,
    receipt: Option<PathBuf>,
    /// When it last changed: the newest of its journal, its receipt (or,
    /// with neither, its folder), milliseconds since the Unix epoch (the
    /// store's times are to the second; files give finer ones, which order
    /// runs of one second).
    updated_ms: u64,
}

impl Found {
    /// Its state: its journal's, else `receipt`'s status, else `unknown`.
    fn state_of(&self, receipt: Option<&ReceiptRead>) -> String {
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
        if super::local::check_run_id(&run_id).is_err() {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if !meta.is_dir() {
            continue;
        }
        let receipt = entry.path().join(RECEIPT_FILE);
        let receipt_meta = receipt.symlink_metadata().ok().filter(|m| m.is_file());
        let journal_meta =
            entry.path().join(super::local::JOURNAL_FILE).symlink_metadata().ok().filter(|m| m.is_file());
        let updated_ms = match (&receipt_meta, &journal_meta) {
            (None, None) => unix(meta.modified()),
            (r, j) => unix_of(r.as_ref()).max(unix_of(j.as_ref())),
        };
        out.push(Found {
            run_id,
            journal: None,
            source: Source::Store,
            receipt: receipt_meta.map(|_| receipt),
            updated_ms,
        });
    }
    Ok(out)
}

fn unix_of(meta: Option<&std::fs::Metadata>) -> u64 {
    meta.and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// The parts of a receipt `runs` shows, read loosely (any receipt
/// version; a field that is missing or of another shape is left out).
#[derive(Debug, Default, Deserialize)]
struct ReceiptRead {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    catalog_sha256: Option<String>,
    #[serde(default)]
    calls: Option<Vec<CallInfo>>,
    #[serde(default)]
    pending: Vec<ReceiptPending>,
}

#[derive(Debug, Deserialize)]
struct ReceiptPending {
    seq: u64,
    tool: String,
    #[serde(default)]
    arguments: Value,
}

/// [`read_receipt`] off the async threads.
async fn read_receipt_async(path: PathBuf) -> Option<ReceiptRead> {
    tokio::task::spawn_blocking(move || read_receipt(&path)).await.ok().flatten()
}

/// The receipt at `path`, when it reads as one (at most 64 MiB).
fn read_receipt(path: &Path) -> Option<ReceiptRead> {
    const MAX: u64 = 64 << 20;
    let meta = path.symlink_metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// A journal's lines, read for showing.
#[derive(Default)]
struct JournalRead {
    header: Option<Header>,
    /// Every call, by seq.
    calls: BTreeMap<u64, CallInfo>,
    /// Every `pending` line, by seq (the last one of a seq wins).
    pending: BTreeMap<u64, PendingInfo>,
    decisions: Vec<DecisionInfo>,
    /// `approval` lines no later `decision`, `done` or `pending` line of
    /// their call closed, by seq (the first of a seq stands).
    approvals: BTreeMap<u64, DecisionInfo>,
}

impl JournalRead {
    fn of(lines: &[String]) -> JournalRead {
        let mut read = JournalRead::default();
        for (i, line) in lines.iter().enumerate() {
            match record::kind(line) {
                Some("call") => {
                    if let Ok(c) = serde_json::from_str::<CallRecord>(line) {
                        read.calls.insert(
                            c.seq,
                            CallInfo {
                                seq: c.seq,
                                tool: c.tool,
                                caller: Some(c.caller),
                                decision: None,
                                status: None,
                                error: None,
                                note: None,
                            },
                        );
                    }
                }
                Some("done") => {
                    if let Ok(d) = serde_json::from_str::<DoneRecord>(line) {
                        read.approvals.remove(&d.seq);
                        if let Some(call) = read.calls.get_mut(&d.seq) {
                            call.decision = Some(d.end.decision);
                            call.status = Some(d.end.status);
                            call.error = d.end.error;
                            call.note = d.end.note;
                        }
                    }
                }
                Some("pending") => {
                    if let Ok(p) = serde_json::from_str::<PendingRecord>(line) {
                        read.approvals.remove(&p.seq);
                        read.pending.insert(
                            p.seq,
                            PendingInfo {
                                seq: p.seq,
                                tool: p.tool,
                                arguments: p.args,
                                reason: Some(p.reason),
                                subject: p.subject,
                            },
                        );
                    }
                }
                Some("decision") => {
                    if let Ok(d) = serde_json::from_str::<DecisionRecord>(line) {
                        read.approvals.remove(&d.seq);
                        read.decisions.push(DecisionInfo {
                            seq: d.seq,
                            allow: d.allow,
                            reason: d.reason,
                            at: d.at,
                        });
                    }
                }
                Some("approval") => {
                    if let Ok(a) = serde_json::from_str::<ApprovalRecord>(line) {
                        read.approvals.entry(a.seq).or_insert(DecisionInfo {
                            seq: a.seq,
                            allow: a.decision == ApprovalDecision::Allow,
                            reason: a.reason,
                            at: a.at,
                        });
                    }
                }
                // The first line is the header, whatever its `t`.
                _ if i == 0 => read.header = serde_json::from_str::<Header>(line).ok(),
                _ => {}
            }
        }
        read
    }

    /// The pending calls no decision and no result has closed.
    fn open_pending(&self) -> impl Iterator<Item = &PendingInfo> {
        self.pending.values().filter(|p| {
            !self.decisions.iter().any(|d| d.seq == p.seq)
                && self.calls.get(&p.seq).is_none_or(|c| c.status.is_none())
        })
    }
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

/// One run in detail ([`Runs::show`]).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RunDetails {
    /// The run's id.
    pub run_id: String,
    /// As in [`RunListing::state`].
    pub state: String,
    /// The store holding its journal, when it has one.
    pub journal: Option<String>,
    /// The program, from the journal.
    pub program: Option<ProgramInfo>,
    /// When it started (RFC 3339 UTC).
    pub started_at: Option<String>,
    /// The workspace it started in.
    pub workspace: Option<String>,
    /// The codemode version that started it.
    pub codemode_version: Option<String>,
    /// The catalog's digest.
    pub catalog_sha256: Option<String>,
    /// The policy's digest.
    pub policy_sha256: Option<String>,
    /// Every call, in seq order.
    pub calls: Vec<CallInfo>,
    /// The calls waiting for a decision.
    pub pending: Vec<PendingInfo>,
    /// Decisions given on resumes, in order.
    pub decisions: Vec<DecisionInfo>,
    /// Decisions a person recorded with `codemode approve` for the pending
    /// calls, not yet applied by a resume, by seq.
    pub recorded: Vec<DecisionInfo>,
    /// Its saved receipt, when there is one.
    pub receipt: Option<PathBuf>,
    /// Its folder of receipt and spill files, when there is one.
    pub folder: Option<PathBuf>,
}

/// The program of a run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ProgramInfo {
    /// Its name (a file name, or `stdin.js`).
    pub name: String,
    /// SHA-256 of its source, lower-case hex.
    pub sha256: String,
    /// The file it was read from, when it was.
    pub path: Option<String>,
}

/// One call of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallInfo {
    /// Its seq.
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// Who made it.
    #[serde(default)]
    pub caller: Option<Caller>,
    /// How the gate decided; none yet when it has no result.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// How it ended; none when it has no result (pending, or in flight
    /// when the process ended).
    #[serde(default)]
    pub status: Option<CallStatus>,
    /// Why it was refused or failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Anything else the receipt would say.
    #[serde(default)]
    pub note: Option<String>,
}

/// A call waiting for a decision.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PendingInfo {
    /// Its seq (what `--allow`/`--deny` name).
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// The arguments it runs with when allowed.
    pub arguments: Value,
    /// Why it needs a decision (from the journal).
    pub reason: Option<String>,
    /// What it acts on (a path, a command), when known.
    pub subject: Option<String>,
}

/// A decision given on a resume.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct DecisionInfo {
    /// The call's seq.
    pub seq: u64,
    /// Allowed or denied.
    pub allow: bool,
    /// Why, when given.
    pub reason: Option<String>,
    /// When (RFC 3339 UTC).
    pub at: String,
}

/// How [`Runs::prune`] goes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Say what would be removed, remove nothing. Default: false.
    pub dry_run: bool,
    /// Run ids never removed (the run just made). Default: none.
    pub keep: Vec<String>,
    /// The time ages are measured from. Default: now.
    pub now: Option<SystemTime>,
    /// Only runs made in this workspace (their journal's header names it;
    /// a folder without a journal is this workspace's own): the automatic
    /// pruning after a run, so one workspace's retention never removes
    /// another's runs from a shared store. Default: every run.
    pub workspace: Option<PathBuf>,
}

impl PruneOptions {
    /// Options that keep the run `run_id`.
    pub fn keeping(run_id: impl Into<String>) -> PruneOptions {
        PruneOptions { keep: vec![run_id.into()], ..PruneOptions::default() }
    }

    /// These options, removing nothing.
    pub fn dry_run(mut self, on: bool) -> PruneOptions {
        self.dry_run = on;
        self
    }

    /// These options, with ages measured from `now`.
    pub fn at(mut self, now: SystemTime) -> PruneOptions {
        self.now = Some(now);
        self
    }
}

/// Why a run was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PruneReason {
    /// It is older than `keep_days`.
    Age,
    /// It is not among the `keep_runs` newest.
    Count,
}

/// A run [`Runs::prune`] removed (or, in a dry run, would remove).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PrunedRun {
    /// The run's id.
    pub run_id: String,
    /// Its state, as in [`RunListing::state`].
    pub state: String,
    /// Seconds since it last changed.
    pub age_secs: u64,
    /// Why.
    pub why: PruneReason,
}

/// The state [`Runs::list`] gives a run whose journal cannot be read.
pub const UNREADABLE: &str = "unreadable";

/// What [`Runs::prune`] did.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct PruneReport {
    /// Whether nothing was removed on purpose.
    pub dry_run: bool,
    /// The runs removed (or that would be), newest first.
    pub removed: Vec<PrunedRun>,
    /// How many runs are kept.
    pub kept: usize,
    /// Runs kept because another process holds them.
    pub busy: Vec<String>,
    /// Runs that could not be removed, each `run_id: why`.
    pub failures: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn header(run_id: &str, name: &str) -> String {
        serde_json::json!({
            "t": "header", "journal_version": 1, "run_id": run_id,
            "started_at": "2026-01-02T03:04:05Z", "started_unix_ms": 1, "codemode_version": "0.1.0",
            "workspace": "/ws",
            "program": {"name": name, "sha256": "ab", "source": "return 1;", "path": "/ws/p.js"},
            "catalog_sha256": "cat", "policy_sha256": "pol", "policy": {}, "limits": {},
        })
        .to_string()
    }

    const CALL_1: &str = r#"{"t":"call","seq":1,"tool":"read","caller":"program","args":{"path":"a.txt"}}"#;
    const DONE_1: &str = r#"{"t":"done","seq":1,"how":"inline","ok":true,"end":{"status":"ok","decision":"auto","elapsed_ms":1.0,"bytes":3},"payload":{}}"#;
    const CALL_2: &str =
        r#"{"t":"call","seq":2,"tool":"write","caller":"program","args":{"path":"b.txt","content":"x"}}"#;
    const PENDING_2: &str = r#"{"t":"pending","seq":2,"tool":"write","args":{"path":"b.txt","content":"x"},"reason":"posture ask: write changes files"}"#;

    /// A store with one paused run (a read done, a write pending) and one
    /// completed run, and the workspace it is in.
    async fn two_runs() -> (tempfile::TempDir, Runs) {
        let ws = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(ws.path()).unwrap();
        let runs = Runs::for_workspace(&real, None);
        let store = runs.store().clone();
        let mut j = store.create("run-a", header("run-a", "p.js")).await.unwrap();
        j.append(format!("{CALL_1}\n{DONE_1}\n{CALL_2}\n{PENDING_2}\n")).await.unwrap();
        j.commit(RunState::Paused).await.unwrap();
        drop(j);
        let mut j = store.create("run-b", header("run-b", "q.js")).await.unwrap();
        j.append(format!("{CALL_1}\n{DONE_1}\n")).await.unwrap();
        j.commit(RunState::Completed).await.unwrap();
        drop(j);
        (ws, runs)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_journal_shows_its_program_calls_and_pending_calls() {
        let (_ws, runs) = two_runs().await;
        let d = runs.show("run-a").await.unwrap();
        assert_eq!(d.state, "paused");
        let program = d.program.unwrap();
        assert_eq!(
            (program.name.as_str(), program.sha256.as_str(), program.path.as_deref()),
            ("p.js", "ab", Some("/ws/p.js"))
        );
        assert_eq!((d.catalog_sha256.as_deref(), d.policy_sha256.as_deref()), (Some("cat"), Some("pol")));
        assert_eq!(d.calls.len(), 2);
        assert_eq!((d.calls[0].status, d.calls[0].decision), (Some(CallStatus::Ok), Some(Decision::Auto)));
        assert_eq!(d.calls[1].status, None);
        assert_eq!(d.pending.len(), 1);
        assert_eq!(d.pending[0].arguments["path"], "b.txt");
        assert!(d.pending[0].reason.as_deref().unwrap().contains("posture ask"));
        assert!(d.receipt.is_none());

        let list = runs.list().await.unwrap();
        let shown: Vec<_> =
            list.iter().map(|l| (l.run_id.as_str(), l.state.as_str(), l.calls, l.pending)).collect();
        assert!(shown.contains(&("run-a", "paused", Some(2), 1)), "{shown:?}");
        assert!(shown.contains(&("run-b", "completed", Some(1), 0)), "{shown:?}");
        assert_eq!(list[0].program.as_deref().map(|p| p.ends_with(".js")), Some(true));

        let e = runs.show("run-nope").await.unwrap_err();
        assert!(matches!(e, StoreError::NotResumable { state: NotResumableState::Unknown, .. }), "{e}");
        let e = runs.show("../etc").await.unwrap_err();
        assert!(matches!(e, StoreError::NotResumable { state: NotResumableState::Unknown, .. }), "{e}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_decision_closes_a_pending_call() {
        let read = JournalRead::of(&[
            header("r", "p.js"),
            CALL_2.into(),
            PENDING_2.into(),
            r#"{"t":"decision","seq":2,"allow":true,"at":"2026-01-02T03:04:05Z"}"#.into(),
            "not json".into(),
        ]);
        assert_eq!(read.open_pending().count(), 0);
        assert_eq!(read.decisions.len(), 1);
        assert!(read.header.is_some());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn prune_keeps_paused_runs_past_the_count_until_their_age() {
        let (_ws, runs) = two_runs().await;
        let keep_one = Retention { keep_runs: 0, keep_days: 7 };
        let report = runs.prune(keep_one, &PruneOptions::default().dry_run(true)).await.unwrap();
        let removed: Vec<_> = report.removed.iter().map(|r| (r.run_id.as_str(), r.why)).collect();
        assert_eq!(removed, [("run-b", PruneReason::Count)]);
        assert_eq!(runs.list().await.unwrap().len(), 2, "a dry run removes nothing");

        let later = SystemTime::now() + Duration::from_secs(8 * 86_400);
        let report = runs.prune(keep_one, &PruneOptions::keeping("run-b").at(later)).await.unwrap();
        let removed: Vec<_> = report.removed.iter().map(|r| (r.run_id.as_str(), r.why)).collect();
        assert_eq!(removed, [("run-a", PruneReason::Age)]);
        assert_eq!(report.kept, 1);
        let left: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| l.run_id).collect();
        assert_eq!(left, ["run-b"]);
        assert!(!runs.receipts_folder().join("run-a").exists());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_held_run_is_not_pruned() {
        let (_ws, runs) = two_runs().await;
        let held = runs.store().create("run-c", header("run-c", "r.js")).await.unwrap();
        let later = SystemTime::now() + Duration::from_secs(30 * 86_400);
        let report = runs
            .prune(Retention { keep_runs: 0, keep_days: 0 }, &PruneOptions::default().at(later))
            .await
            .unwrap();
        assert_eq!(report.busy, ["run-c"]);
        assert_eq!(report.removed.len(), 2);
        drop(held);
        let left: Vec<_> = runs.list().await.unwrap().into_iter().map(|l| (l.run_id, l.state)).collect();
        assert_eq!(left, [("run-c".to_owned(), "interrupted".to_owned())]);
    }

    /// A journal cut by a crash inside a character loses only its cut
    /// line; a journal damaged in a complete line is listed as unreadable
    /// and the other runs are still listed.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_damaged_journal_does_not_hide_the_other_runs() {
        let (_ws, runs) = two_runs().await;
        let mut j = runs.store().create("run-c", header("run-c", "é.js")).await.unwrap();
        j.append(format!("{CALL_1}\n")).await.unwrap();
        j.commit(RunState::Paused).await.unwrap();
        drop(j);
        let journal = |id: &str| runs.receipts_folder().join(id).join(super::super::local::JOURNAL_FILE);
        // run-c: a line with "✓" appended and cut inside it, no newline.
        let mut bytes = std::fs::read(journal("run-c")).unwrap();
        bytes.extend_from_slice(&"{\"t\":\"call\",\"x\":\"✓".as_bytes()[..18]);
        std::fs::write(journal("run-c"), &bytes).unwrap();
        // run-b: a complete line made invalid.
        let mut bytes = std::fs::read(journal("run-b")).unwrap();
        let at = bytes.iter().position(|&b| b == b'\n').unwrap() + 5;
        bytes[at] = 0xff;
        std::fs::write(journal("run-b"), &bytes).unwrap();

        let list = runs.list().await.unwrap();
        let shown: Vec<_> = list.iter().map(|l| (l.run_id.as_str(), l.state.as_str(), l.calls)).collect();
        assert!(shown.contains(&("run-a", "paused", Some(2))), "{shown:?}");
        assert!(shown.contains(&("run-b", UNREADABLE, None)), "{shown:?}");
        assert!(shown.contains(&("run-c", "paused", Some(1))), "{shown:?}");
        let e = runs.show("run-b").await.unwrap_err();
        assert!(e.to_string().contains("line 2 is not UTF-8"), "{e}");
        assert_eq!(runs.show("run-c").await.unwrap().calls.len(), 1);
    }

    /// Two processes pruning the same folder at once (two `codemode run`s
    /// ending together) each find runs the other is removing: neither may
    /// call that a failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_prunes_at_once_report_no_failures() {
        let ws = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(ws.path()).unwrap();
        let runs = Runs::for_workspace(&real, None);
        for i in 0..300 {
            let id = format!("run-{i:03}");
            let mut j = runs.store().create(&id, header(&id, "p.js")).await.unwrap();
            j.append(format!("{CALL_1}\n{DONE_1}\n")).await.unwrap();
            j.commit(RunState::Completed).await.unwrap();
            let receipts = runs.receipts_folder().join(&id);
            std::fs::create_dir_all(&receipts).unwrap();
            std::fs::write(receipts.join("spill-1.json"), "{}").unwrap();
        }
        let none = Retention { keep_runs: 0, keep_days: 7 };
        let (a, b, c) = (
            Runs::for_workspace(&real, None),
            Runs::for_workspace(&real, None),
            Runs::for_workspace(&real, None),
        );
        let options = PruneOptions::default();
        let (ra, rb, rc) = tokio::join!(
            tokio::spawn(async move { a.prune(none, &PruneOptions::default()).await }),
            tokio::spawn(async move { b.prune(none, &PruneOptions::default()).await }),
            c.prune(none, &options),
        );
        let mut removed = Vec::new();
        for report in [ra.unwrap().unwrap(), rb.unwrap().unwrap(), rc.unwrap()] {
            assert_eq!(report.failures, Vec::<String>::new());
            // (A run another prune was removing may be missing from a scan.)
            assert!(report.removed.len() + report.kept <= 300);
            removed.extend(report.removed.into_iter().map(|r| r.run_id));
        }
        // Every run was removed by one of them. (Rarely by two: both
        // `remove_dir_all`s of one folder can succeed, so a run may be in
        // two reports.)
        removed.sort();
        removed.dedup();
        assert_eq!(removed.len(), 300);
        assert_eq!(runs.list().await.unwrap().len(), 0);
    }

    #[cfg(unix)]
    #[tokio::test(flavor = "multi_thread")]
    async fn a_linked_codemode_folder_is_neither_read_nor_pruned() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join("runs/run-precious")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), ws.join(".codemode")).unwrap();
        let runs = Runs::for_workspace(&ws, None);
        let e =
            runs.prune(Retention { keep_runs: 0, keep_days: 0 }, &PruneOptions::default()).await.unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(elsewhere.path().join("runs/run-precious").exists());
    }
}
