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
use crate::gate::compensation::Compensation;
use crate::journal::undo::{FileRestore, RestorePlan, Restored};
use crate::journal::undo::{FileUndo, RevertedRecord, UndoPlan};
use crate::journal::{RunState, StoreError, record};
use crate::receipt::{CallStatus, ErrorKind, Receipt, RunError};
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

/// A call of the run a rollback undid by the call the policy names for
/// it.
#[derive(Debug, Clone, Serialize)]
pub struct Compensated {
    /// The call's seq in the run.
    pub seq: u64,
    /// Its tool.
    pub tool: String,
    /// The compensating tool called.
    pub by: String,
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
    /// Calls undone by their compensating call (policy `compensate`).
    pub compensated: Vec<Compensated>,
    /// Files the rollback could not restore, and compensating calls that
    /// did not succeed (`call SEQ TOOL`), with why (the gate refused the
    /// call, a person declined it, or it failed).
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
    /// `options.force`; makes the compensating call the policy names for
    /// a tool (`[tools."NAME"] compensate`) for each of its calls that
    /// succeeded, in the same newest-first order; marks the calls undone
    /// in the run's journal. Other calls that may have changed something
    /// (bash, MCP tools without a compensation) are named in `not_undone`.
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
            Ok(Err(
                e @ StoreError::NotResumable { state: crate::journal::NotResumableState::Unknown, .. },
            )) => {
                let message =
                    super::resume::no_journal_here(&self.shared, run_id).unwrap_or_else(|| e.to_string());
                return Err(RunError::new(ErrorKind::NotResumable, message));
            }
            Ok(Err(e @ (StoreError::NotResumable { .. } | StoreError::Unreadable { .. }))) => {
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
        // A run that can still go on would replay against the restored
        // files (a resume, or a recovery on another replica at the same
        // time): it ends first.
        if matches!(stored.state, RunState::Paused | RunState::Interrupted) {
            // Unless no resume can read its journal: then it cannot go on,
            // and no plan can be made from it either.
            if let Err(why) = crate::journal::replay::Journal::parse(&stored.lines) {
                return Err(RunError::new(
                    ErrorKind::NotResumable,
                    format!(
                        "run `{run_id}` cannot be rolled back: its journal is unreadable ({why}); what the run \
                         did: `codemode runs show {run_id}`"
                    ),
                ));
            }
            return Err(RunError::new(
                ErrorKind::NotResumable,
                format!(
                    "run `{run_id}` is {} and can still go on; end it first (`codemode runs cancel {run_id}`, or resume it to its end), then roll it back",
                    stored.state
                ),
            ));
        }
        self.same_workspace(run_id, &stored.lines)?;
        let plan = UndoPlan::of(&stored.lines).map_err(|e| RunError::new(ErrorKind::Internal, e))?;
        let (mut report, comps) = self.report_of(run_id, &plan);
        let mut steps: Vec<Step<'_>> = plan
            .files
            .iter()
            .filter(|f| !f.seqs.iter().all(|s| plan.reverted.contains(s)) && f.not_undoable.is_none())
            .map(Step::File)
            .chain(comps.into_iter().map(Step::Compensate))
            .collect();
        if steps.is_empty() {
            report.nothing_left = true;
            return Ok(report);
        }
        // Newest first: files by their last change, compensations by their
        // call, in one order.
        steps.sort_by_key(|s| std::cmp::Reverse(s.seq()));
        let (restore, batch) = restore_batch(&steps, options.force)?;
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
        let undone = sort_outcomes(&mut report, &steps, &restore, &receipt);
        self.mark(run_id, &mut report, undone, &receipt).await;
        report.rollback_run_id = Some(receipt.run_id.clone());
        report.receipt = Some(receipt);
        Ok(report)
    }

    /// Refuses a run made in another workspace (a shared journal folder,
    /// PostgreSQL): its pre-images are of that workspace's files, and
    /// restoring them here would write one workspace's bytes into another
    /// and mark the run undone while its own files stay changed.
    fn same_workspace(&self, run_id: &str, lines: &[String]) -> Result<(), RunError> {
        let header =
            lines.first().and_then(|l| serde_json::from_str::<record::Header>(l).ok()).ok_or_else(|| {
                RunError::new(ErrorKind::Internal, format!("run `{run_id}`'s journal has no header"))
            })?;
        let here = self.shared.workspace.display().to_string();
        if header.workspace != here {
            return Err(RunError::new(
                ErrorKind::NotResumable,
                format!(
                    "run `{run_id}` was made in workspace {}, not {here}: its files are there; roll it back \
                     there (--workspace {})",
                    header.workspace, header.workspace
                ),
            ));
        }
        Ok(())
    }

    /// The report before anything runs (the calls not undone), and the
    /// compensating calls to make.
    fn report_of(&self, run_id: &str, plan: &UndoPlan) -> (RollbackReport, Vec<Comp>) {
        let catalog = self.shared.catalog.load();
        let tools = &self.shared.config.policy.tools;
        let mut not_undone = Vec::new();
        let mut comps = Vec::new();
        let kept: HashMap<u64, &FileUndo> =
            plan.files.iter().flat_map(|f| f.seqs.iter().map(move |s| (*s, f))).collect();
        for (seq, call) in &plan.calls {
            if plan.reverted.contains(seq) {
                continue;
            }
            let compensate = tools.get(&call.tool).and_then(|t| t.compensate.as_ref());
            let reason = match (call.tool.as_str(), compensate) {
                ("write" | "edit", _) => match kept.get(seq) {
                    Some(f) if f.first.seq == *seq => f.not_undoable.clone(),
                    _ => None,
                },
                (_, Some(c)) => match compensation_of(call, c) {
                    Ok(args) => {
                        comps.push(Comp { seq: *seq, tool: call.tool.clone(), by: c.tool.clone(), args });
                        None
                    }
                    Err(why) => Some(format!("its compensating call `{}` cannot be made: {why}", c.tool)),
                },
                ("bash", None) => Some("bash's changes are not undone".to_owned()),
                (tool, None) => match catalog.get(tool) {
                    Some(entry) if entry.spec.is_read_only() => None,
                    _ => Some(format!(
                        "not undone: the policy names no compensating call for it ([tools.\"{tool}\"] compensate)"
                    )),
                },
            };
            if let Some(reason) = reason {
                not_undone.push(NotUndone { seq: *seq, tool: call.tool.clone(), reason });
            }
        }
        let report = RollbackReport {
            run_id: run_id.to_owned(),
            rollback_run_id: None,
            restored: Vec::new(),
            removed: Vec::new(),
            as_before: Vec::new(),
            changed_since: Vec::new(),
            compensated: Vec::new(),
            failed: Vec::new(),
            not_undone,
            reverted: Vec::new(),
            nothing_left: false,
            warnings: Vec::new(),
            receipt: None,
        };
        (report, comps)
    }

    /// Marks the calls undone (`seqs`) in the run's journal.
    async fn mark(&self, run_id: &str, report: &mut RollbackReport, mut seqs: Vec<u64>, receipt: &Receipt) {
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

/// A compensating call to make.
pub(crate) struct Comp {
    seq: u64,
    tool: String,
    by: String,
    args: Value,
}

/// One call of a rollback.
enum Step<'a> {
    /// Restore a file.
    File(&'a FileUndo),
    /// Make a compensating call.
    Compensate(Comp),
}

impl Step<'_> {
    /// The seq of the run's call it undoes (a file's last).
    fn seq(&self) -> u64 {
        match self {
            Step::File(f) => f.seqs.iter().copied().max().unwrap_or_default(),
            Step::Compensate(c) => c.seq,
        }
    }
}

/// The arguments of the compensating call `c` for `call`.
fn compensation_of(call: &crate::journal::undo::RunCall, c: &Compensation) -> Result<Value, String> {
    let args = call.args.as_ref().ok_or("its arguments were journaled as a digest (over 4 KiB)")?;
    let result = call.result.as_ref().ok_or("it did not succeed")?;
    c.arguments(args, result)
}

/// Sorts each step by what happened to it; the run's calls undone.
fn sort_outcomes(
    report: &mut RollbackReport,
    steps: &[Step<'_>],
    plan: &RestorePlan,
    receipt: &Receipt,
) -> Vec<u64> {
    let outcomes = plan.outcomes.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut undone = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let call = receipt.calls.get(i);
        let why = || {
            call.filter(|c| c.status != CallStatus::Ok)
                .and_then(|c| c.error.clone())
                .unwrap_or_else(|| "the call did not run".to_owned())
        };
        match step {
            Step::File(file) => {
                let path = file.path.clone();
                let list = match outcomes.get(&path) {
                    Some(Restored::Written) => &mut report.restored,
                    Some(Restored::Removed) => &mut report.removed,
                    Some(Restored::AsBefore) => &mut report.as_before,
                    Some(Restored::ChangedSince) => {
                        report.changed_since.push(path);
                        continue;
                    }
                    None => {
                        report.failed.push((path, why()));
                        continue;
                    }
                };
                list.push(path);
                undone.extend(file.seqs.iter().copied());
            }
            Step::Compensate(c) if call.is_some_and(|r| r.status == CallStatus::Ok) => {
                report.compensated.push(Compensated { seq: c.seq, tool: c.tool.clone(), by: c.by.clone() });
                undone.push(c.seq);
            }
            Step::Compensate(c) => report.failed.push((format!("call {} {}", c.seq, c.tool), why())),
        }
    }
    undone
}

/// The plan and the batch of calls making `steps` (in order): a `write`
/// per file, the compensating calls.
fn restore_batch(steps: &[Step<'_>], force: bool) -> Result<(RestorePlan, Batch), RunError> {
    let mut plan = RestorePlan { force, ..RestorePlan::default() };
    let mut calls = Vec::new();
    for step in steps {
        let file = match step {
            Step::File(file) => file,
            Step::Compensate(c) => {
                let args = c.args.as_object().cloned().unwrap_or_default();
                calls.push(BatchCall::new(c.by.clone(), args));
                continue;
            }
        };
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
