//! Undoing a run (docs/JOURNAL.md, "Undo (rollback)"): every file the
//! run's `write` and `edit` calls changed or made goes back to its bytes
//! before the run, newest change first, from the pre-images in the run's
//! journal (journal/undo.rs). The rollback is a run of its own: a batch of
//! `write` calls, one per file, gated like any `write` (rules, posture,
//! approver), whose tool restores the file instead of writing `content`
//! (tools/restore.rs). The original run's journal is then marked with the
//! calls undone (`{"t":"reverted"}`).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{BatchOptions, Engine, RunOptions};
use crate::journal::undo::{FileUndo, RevertedRecord, UndoPlan};
use crate::journal::{RunState, StoreError, record};
use crate::receipt::{CallStatus, ErrorKind, Receipt, RunError};
use crate::tools::restore::{FileRestore, RestorePlan, Restored};
use codemode_program::{Batch, BatchCall};

/// How a rollback runs.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RollbackOptions {
    /// Restore files changed since the run too (`--force`). Default:
    /// false (they are left alone and named).
    pub force: bool,
    /// The rollback's own run's options (its approver).
    pub run: RunOptions,
}

impl RollbackOptions {
    /// The defaults: files changed since the run are left alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets whether files changed since the run are restored anyway.
    pub fn force(mut self, on: bool) -> Self {
        self.force = on;
        self
    }

    /// Sets the rollback run's options (its approver).
    pub fn run(mut self, run: RunOptions) -> Self {
        self.run = run;
        self
    }
}

/// A call of the run a rollback does not undo, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotUndone {
    /// The call's seq in the run.
    pub seq: u64,
    /// Its tool.
    pub tool: String,
    /// Why it is not undone.
    pub reason: String,
}

/// What a rollback did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RollbackReport {
    /// The run rolled back.
    pub run_id: String,
    /// The rollback's own run (its receipt), when it made any call.
    pub rollback_run_id: Option<String>,
    /// Files put back to their bytes before the run (workspace-relative).
    pub restored: Vec<String>,
    /// Files the run made, removed.
    pub removed: Vec<String>,
    /// Files that already held their bytes from before the run.
    pub as_before: Vec<String>,
    /// Files changed since the run, left alone (`--force` restores them).
    pub changed_since: Vec<String>,
    /// Files the rollback could not restore (the gate refused the call, or
    /// it failed), with why.
    pub failed: Vec<(String, String)>,
    /// Calls of the run not undone, with why.
    pub not_undone: Vec<NotUndone>,
    /// The run's calls this rollback marked undone.
    pub reverted: Vec<u64>,
    /// Nothing was left to undo (an earlier rollback undid it all, or the
    /// run changed no file).
    pub nothing_left: bool,
    /// Problems that did not stop the rollback (the run could not be
    /// marked).
    pub warnings: Vec<String>,
    /// The rollback run's receipt, when it made any call.
    #[serde(skip)]
    pub receipt: Option<Receipt>,
}

impl Engine {
    /// Rolls back run `run_id`: restores, newest change first, every file
    /// its `write` and `edit` calls changed or made (made files removed),
    /// each through the gate as a `write` of its path; leaves alone (and
    /// names) a file whose bytes are not what the run left, unless
    /// `options.force`; marks the calls undone in the run's journal.
    /// bash and MCP calls are not undone (named in `not_undone`).
    ///
    /// # Errors
    /// `invocation` when journaling is off; `not_resumable` for an unknown
    /// run or one still running in another process; `internal` for a
    /// journal that cannot be read.
    pub async fn rollback(&self, run_id: &str, options: RollbackOptions) -> Result<RollbackReport, RunError> {
        let Some(store) = self.shared.journal.clone() else {
            return Err(RunError::new(
                ErrorKind::Invocation,
                "journaling is off (--journal off or [journal] url = \"off\"): runs keep no pre-images, so none \
                 can be rolled back",
            ));
        };
        let id = run_id.to_owned();
        let loaded = self.shared.tools.spawn(async move { store.load(&id).await }).await;
        let stored = match loaded {
            Ok(Ok(stored)) => stored,
            Ok(Err(e @ StoreError::NotResumable { .. })) => {
                return Err(RunError::new(ErrorKind::NotResumable, e.to_string()));
            }
            Ok(Err(e)) => return Err(RunError::new(ErrorKind::Internal, e.to_string())),
            Err(e) => {
                return Err(RunError::new(ErrorKind::Internal, format!("the journal task failed: {e}")));
            }
        };
        if stored.state == RunState::Running {
            return Err(RunError::new(
                ErrorKind::NotResumable,
                format!("run `{run_id}` is still running in another process; roll it back once it has ended"),
            ));
        }
        let plan = UndoPlan::of(&stored.lines).map_err(|e| RunError::new(ErrorKind::Internal, e))?;
        let mut report = self.report_of(run_id, &plan);
        let files: Vec<&FileUndo> = plan
            .files
            .iter()
            .filter(|f| !f.seqs.iter().all(|s| plan.reverted.contains(s)) && f.not_undoable.is_none())
            .collect();
        if files.is_empty() {
            report.nothing_left = true;
            return Ok(report);
        }
        let (restore, batch) = restore_batch(&files, options.force)?;
        let restore = Arc::new(restore);
        let receipt = self
            .start_batch_restoring(
                batch,
                BatchOptions::new().concurrency(1),
                options.run,
                Some(restore.clone()),
            )
            .wait()
            .await;
        self.sort_outcomes(&mut report, &files, &restore, &receipt);
        self.mark(run_id, &mut report, &files, &receipt).await;
        report.rollback_run_id = Some(receipt.run_id.clone());
        report.receipt = Some(receipt);
        Ok(report)
    }

    /// The report before anything runs: the calls not undone.
    fn report_of(&self, run_id: &str, plan: &UndoPlan) -> RollbackReport {
        let catalog = self.shared.catalog.load();
        let mut not_undone = Vec::new();
        let kept: HashMap<u64, &FileUndo> =
            plan.files.iter().flat_map(|f| f.seqs.iter().map(move |s| (*s, f))).collect();
        for (seq, call) in &plan.calls {
            if plan.reverted.contains(seq) {
                continue;
            }
            let reason = match call.tool.as_str() {
                "write" | "edit" => match kept.get(seq) {
                    Some(f) if f.first.seq == *seq => f.not_undoable.clone(),
                    _ => None,
                },
                "bash" => Some("bash's changes are not undone".to_owned()),
                tool => match catalog.get(tool) {
                    Some(entry) if entry.spec.is_read_only() => None,
                    _ => Some("not undone: a rollback restores files only".to_owned()),
                },
            };
            if let Some(reason) = reason {
                not_undone.push(NotUndone { seq: *seq, tool: call.tool.clone(), reason });
            }
        }
        RollbackReport {
            run_id: run_id.to_owned(),
            rollback_run_id: None,
            restored: Vec::new(),
            removed: Vec::new(),
            as_before: Vec::new(),
            changed_since: Vec::new(),
            failed: Vec::new(),
            not_undone,
            reverted: Vec::new(),
            nothing_left: false,
            warnings: Vec::new(),
            receipt: None,
        }
    }

    /// Sorts each file by what happened to it.
    fn sort_outcomes(
        &self,
        report: &mut RollbackReport,
        files: &[&FileUndo],
        plan: &RestorePlan,
        receipt: &Receipt,
    ) {
        let outcomes = plan.outcomes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (i, file) in files.iter().enumerate() {
            let path = file.path.clone();
            match outcomes.get(&path) {
                Some(Restored::Written) => report.restored.push(path),
                Some(Restored::Removed) => report.removed.push(path),
                Some(Restored::AsBefore) => report.as_before.push(path),
                Some(Restored::ChangedSince) => report.changed_since.push(path),
                None => {
                    let why = receipt
                        .calls
                        .get(i)
                        .filter(|c| c.status != CallStatus::Ok)
                        .and_then(|c| c.error.clone())
                        .unwrap_or_else(|| "the call did not run".to_owned());
                    report.failed.push((path, why));
                }
            }
        }
    }

    /// Marks the files' calls undone in the run's journal.
    async fn mark(&self, run_id: &str, report: &mut RollbackReport, files: &[&FileUndo], receipt: &Receipt) {
        let done: Vec<&str> = report
            .restored
            .iter()
            .chain(&report.removed)
            .chain(&report.as_before)
            .map(String::as_str)
            .collect();
        let mut seqs: Vec<u64> = files
            .iter()
            .filter(|f| done.contains(&f.path.as_str()))
            .flat_map(|f| f.seqs.iter().copied())
            .collect();
        seqs.sort_unstable();
        if seqs.is_empty() {
            return;
        }
        let at = super::rfc3339_utc(std::time::SystemTime::now());
        let line = record::tagged_line(
            "reverted",
            &RevertedRecord { seqs: seqs.clone(), by: receipt.run_id.clone(), at },
        );
        let Some(store) = self.shared.journal.clone() else { return };
        let id = run_id.to_owned();
        let marked = self.shared.tools.spawn(async move { store.annotate(&id, line).await }).await;
        match marked {
            Ok(Ok(())) => report.reverted = seqs,
            Ok(Err(e)) => report.warnings.push(format!("the run's journal could not be marked: {e}")),
            Err(e) => report.warnings.push(format!("the run's journal could not be marked: {e}")),
        }
    }
}

/// The plan and the batch of `write` calls restoring `files` (in order).
fn restore_batch(files: &[&FileUndo], force: bool) -> Result<(RestorePlan, Batch), RunError> {
    let mut plan = RestorePlan { force, ..RestorePlan::default() };
    let mut calls = Vec::new();
    for file in files {
        let bytes = file.first.decoded().map_err(|e| RunError::new(ErrorKind::Internal, e))?;
        // What the person approving the call sees as its content.
        let content = match (&bytes, file.first.existed) {
            (None, _) => format!("(rollback: removes `{}`, which the run made)", file.path),
            (Some(b), _) => match std::str::from_utf8(b) {
                Ok(text) => text.to_owned(),
                Err(_) => format!("(rollback: restores {} bytes that are not text)", b.len()),
            },
        };
        let mut args = Map::new();
        args.insert("path".into(), Value::String(file.path.clone()));
        args.insert("content".into(), Value::String(content));
        calls.push(BatchCall::new("write", args));
        plan.files
            .insert(file.path.clone(), FileRestore { bytes, mode: file.first.mode, left: file.left.clone() });
    }
    Ok((plan, Batch::new(calls)))
}
