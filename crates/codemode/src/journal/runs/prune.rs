//! Removing the runs a [`Retention`] does not keep (`codemode runs prune`
//! and the pruning at each run).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::Runs;
use super::read::read_receipt_async;
use super::scan::{Found, run_names};
use crate::journal::record::Header;
use crate::journal::{NotResumableState, Retention, RunState, StoreError};
use codemode_base::time_text::basic_utc_unix;

/// How far after a prune's start a run's last change may be for the prune
/// to take it as made by a run going on meanwhile, in milliseconds: a
/// time further ahead is a clock that was set back (or a file's time set
/// by hand), not a run ending now, and must not keep the run forever.
const CHANGED_MEANWHILE_MS: u64 = 60_000;

impl Runs {
    /// Removes the runs `retention` does not keep (see [`Retention`] for
    /// the rules), or with `options.dry_run` only says which it would.
    /// Runs named in `options.keep` (the run just made), runs another
    /// process holds and runs newer than the oldest paused run (one
    /// `keep_days` still keeps) are never removed. A run that cannot be removed is
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
        let now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let max_age = retention.keep_days.saturating_mul(86_400);
        if let Some(runs) = self.within(retention, options, now_unix).await? {
            return Ok(PruneReport { dry_run: options.dry_run, kept: runs, ..PruneReport::default() });
        }
        let mut found = self.scan().await?;
        // Newest first.
        found.reverse();
        let mut report = PruneReport { dry_run: options.dry_run, ..PruneReport::default() };
        let kept_on_purpose = |run: &Found| options.keep.contains(&run.run_id);
        // While a run waits for a person (a paused run `keep_days` keeps),
        // every run after it is kept: the receipts of what ran since are
        // what the person reviews it by. Not a run whose journal no resume
        // can read (a damaged line): it waits for nobody.
        let mut oldest_paused = None;
        for run in found.iter().filter(|r| {
            r.journal == Some(RunState::Paused) && now_unix.saturating_sub(r.updated_ms / 1000) <= max_age
        }) {
            let resumable = match self.source(run.source).load(&run.run_id).await {
                Ok(stored) => crate::journal::replay::Journal::parse(&stored.lines).is_ok(),
                // Not read now (the store failed): it may well wait.
                Err(_) => true,
            };
            if resumable && oldest_paused.as_ref().is_none_or(|(oldest, _)| run.updated_ms < *oldest) {
                oldest_paused = Some((run.updated_ms, run.run_id.clone()));
            }
        }
        // The runs kept so far that count against keep_runs; the runs kept
        // on purpose (the run just made) are the newest, whatever the
        // clock says (and, being made, count before they are found).
        let found_kept = found.iter().filter(|r| kept_on_purpose(r)).map(|r| r.run_id.as_str());
        let mut counted = options.counted_ahead(found_kept);
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
            // Paused runs wait for a person, interrupted ones for their
            // recovery (a restarted batch recovers its lines' runs);
            // folders with neither journal nor receipt may be runs still
            // going in another process: none counts, and only age removes
            // them.
            let uncounted = matches!(run.journal, Some(RunState::Paused | RunState::Interrupted))
                || (run.journal.is_none() && run.receipt.is_none());
            // The same millisecond as the paused run counts as after it
            // (the clock cannot tell them apart); the paused run itself is
            // kept here too, as its age would keep it.
            if let Some((paused, paused_id)) = &oldest_paused
                && run.updated_ms >= *paused
            {
                report.kept += 1;
                counted += u64::from(!uncounted);
                if run.run_id != *paused_id && !uncounted && counted > retention.keep_runs {
                    report.kept_for_paused += 1;
                    report.paused_run.get_or_insert_with(|| paused_id.clone());
                }
                continue;
            }
            let why = if age_secs > max_age {
                PruneReason::Age
            } else if !uncounted && counted >= retention.keep_runs && !changed_meanwhile(&run, now_ms) {
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

    /// How many runs there are when, from the run folders' names alone,
    /// none can be due: the store is the receipts folder (so every run has
    /// a folder there), there are at most `keep_runs + slack` of them, and
    /// every one's id says it started less than `keep_days` ago (a run
    /// changes after it starts, never before). `None` when the names do
    /// not settle it (a name that is not a run id [`new_run_id`] made, an
    /// old one, too many): then every run is read.
    ///
    /// With `slack` 0 this removes nothing [`Runs::prune`] would have
    /// removed: a run goes for its count only behind `keep_runs` counted
    /// runs, and for its age only past `keep_days` since it last changed.
    ///
    /// [`new_run_id`]: crate::Engine::new_run_id
    async fn within(
        &self,
        retention: Retention,
        options: &PruneOptions,
        now_unix: u64,
    ) -> Result<Option<usize>, StoreError> {
        if !self.same_folder() {
            return Ok(None);
        }
        let folder = self.receipts.clone();
        let names = tokio::task::spawn_blocking(move || run_names(&folder))
            .await
            .map_err(|e| StoreError::failed("the runs folder task", e))?;
        let Some(names) = names else { return Ok(None) };
        // A run being made whose folder is not there yet is one more.
        let coming = options.being_made().filter(|id| !names.iter().any(|n| n == id)).count();
        if (names.len() + coming) as u64 > retention.keep_runs.saturating_add(options.slack) {
            return Ok(None);
        }
        let max_age = retention.keep_days.saturating_mul(86_400);
        let recent = |name: &String| {
            let started = name.strip_prefix("run-").and_then(|rest| rest.get(..16)).and_then(basic_utc_unix);
            started.is_some_and(|started| now_unix.saturating_sub(started) <= max_age)
        };
        Ok(names.iter().all(recent).then_some(names.len()))
    }

    /// Whether `run`'s journal header names `workspace` (a journal that
    /// cannot be read is not this workspace's to remove).
    async fn made_in(&self, run: &Found, workspace: &Path) -> bool {
        let Ok(stored) = self.source(run.source).load(&run.run_id).await else { return false };
        let Some(first) = stored.lines.first() else { return false };
        serde_json::from_str::<Header>(first).is_ok_and(|h| Path::new(&h.workspace) == workspace)
    }

    /// Removes one run: its journal (for the local folder, its whole
    /// folder) and its folder under the receipts folder.
    /// Whether this call removed anything: `false` when another process
    /// (a prune at the same time) had already removed all of it.
    async fn remove(&self, run: &Found) -> Result<bool, StoreError> {
        // A folder the process that made the run still holds (it will
        // still write its receipt, or its journal after the run:
        // `Engine::hold_run_folder`) is busy; one this prune holds can be
        // held by no such process until it is gone.
        let folder = self.receipts.join(&run.run_id);
        let _removing = match crate::journal::folder_hold::try_exclusive(&folder) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => {
                return Err(StoreError::NotResumable {
                    run_id: run.run_id.clone(),
                    state: NotResumableState::Busy,
                });
            }
            // Gone, or not a folder: as before.
            Err(_) => None,
        };
        let mut removed_any = false;
        if run.journal.is_some() {
            match self.source(run.source).remove(&run.run_id).await {
                Ok(()) => removed_any = true,
                Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => {}
                Err(e) => return Err(e),
            }
        }
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
}

/// Whether `run` changed after a prune that started at `now_ms` did, by
/// less than [`CHANGED_MEANWHILE_MS`]: a run that ended in another process
/// while this prune went. Such a run is not removed for its count (it
/// counts, and the next prune sees it whole): two runs at once, each
/// keeping only its own, would otherwise remove each other's, and a burst
/// of them could leave none.
fn changed_meanwhile(run: &Found, now_ms: u64) -> bool {
    // (Times are to the millisecond: one in the prune's own millisecond
    // counts as before it, or a run just ended in this process would too.)
    (now_ms + 1..now_ms.saturating_add(CHANGED_MEANWHILE_MS)).contains(&run.updated_ms)
}

/// How [`Runs::prune`] goes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Say what would be removed, remove nothing. Default: false.
    pub dry_run: bool,
    /// Run ids never removed (the run just made), counted as the newest
    /// runs against `keep_runs` when found. Default: none.
    pub keep: Vec<String>,
    /// Whether the runs in `keep` are being made while the prune goes on
    /// (`codemode run` prunes while its run runs) and will have a folder
    /// or a journal: each then counts against `keep_runs` whether it is
    /// found yet or not. Leave it false for a run that keeps no trace
    /// (journal off and no receipt saved), which would otherwise take the
    /// place of a run kept. A run being made whose journal then cannot be
    /// written (a full disk) has taken one all the same. Default: false.
    pub being_made: bool,
    /// The time ages are measured from. Default: now.
    pub now: Option<SystemTime>,
    /// Only runs made in this workspace (their journal's header names it;
    /// a folder without a journal is this workspace's own): the automatic
    /// pruning at each run, so one workspace's retention never removes
    /// another's runs from a shared store. Default: every run.
    pub workspace: Option<PathBuf>,
    /// How many runs past `keep_runs` may stay until the next prune that
    /// finds more: while the run folders number at most `keep_runs +
    /// slack` and none is older than `keep_days`, the prune reads no
    /// journal and removes nothing; once past, it prunes down to
    /// `keep_runs`. The pruning at each run uses a tenth of
    /// `keep_runs`, so it reads every run's state once in that many runs
    /// instead of after each. Default: 0 (exactly `keep_runs`).
    pub slack: u64,
}

impl PruneOptions {
    /// Options that keep the run `run_id`.
    pub fn keeping(run_id: impl Into<String>) -> PruneOptions {
        PruneOptions { keep: vec![run_id.into()], ..PruneOptions::default() }
    }

    /// Options that keep the run `run_id`, which is being made while the
    /// prune goes on ([`PruneOptions::being_made`]).
    pub fn keeping_run_being_made(run_id: impl Into<String>) -> PruneOptions {
        PruneOptions { being_made: true, ..PruneOptions::keeping(run_id) }
    }

    /// The runs of [`PruneOptions::keep`] being made, each once (none
    /// unless [`PruneOptions::being_made`]; ids that cannot name a run
    /// left out).
    fn being_made(&self) -> impl Iterator<Item = &str> {
        let mut ids: Vec<&str> = if self.being_made {
            self.keep.iter().map(String::as_str).filter(|id| is_run_id(id)).collect()
        } else {
            Vec::new()
        };
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
    }

    /// How many runs count against `keep_runs` before any other: those of
    /// `found_kept` (the kept runs found), and the runs being made not
    /// among them.
    fn counted_ahead<'a>(&'a self, found_kept: impl Iterator<Item = &'a str>) -> u64 {
        let mut ids: Vec<&str> = found_kept.chain(self.being_made()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len() as u64
    }

    /// These options, removing nothing.
    pub fn dry_run(mut self, on: bool) -> PruneOptions {
        self.dry_run = on;
        self
    }

    /// These options, letting `slack` runs past `keep_runs` gather
    /// ([`PruneOptions::slack`]).
    pub fn slack(mut self, slack: u64) -> PruneOptions {
        self.slack = slack;
        self
    }

    /// These options, with ages measured from `now` (a run changed after
    /// it is left alone, and counts).
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
    /// Its state, as in [`RunListing::state`](super::RunListing::state).
    pub state: String,
    /// Seconds since it last changed.
    pub age_secs: u64,
    /// Why.
    pub why: PruneReason,
}

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
    /// Runs past `keep_runs` kept only because they came after a paused
    /// run still waiting for a person ([`PruneReport::paused_run`]): the
    /// receipts of what ran since are what the person reviews it by.
    pub kept_for_paused: usize,
    /// The oldest paused run that kept [`PruneReport::kept_for_paused`]
    /// runs, when it kept any.
    pub paused_run: Option<String>,
}

/// Whether `id` could name a run (what a run folder's name must be).
fn is_run_id(id: &str) -> bool {
    crate::journal::local::check_run_id(id).is_ok()
}
