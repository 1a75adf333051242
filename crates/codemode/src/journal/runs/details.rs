//! One run in detail (`codemode runs show`): from its journal when it has
//! one, else from its receipt.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::read::{JournalRead, ReceiptRead, read_receipt_async};
use super::scan::Source;
use super::{RECEIPT_FILE, Runs};
use crate::journal::{NotResumableState, RunState, StoreError, StoredRun};
use crate::receipt::{CallStatus, Caller, Decision};

impl Runs {
    /// What is known of run `run_id`: from its journal when it has one,
    /// else from its receipt.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with [`NotResumableState::Unknown`]
    /// when neither the store nor the receipts folder has the id (the same
    /// error `resume` gives); [`StoreError::Failed`] when they cannot be
    /// read.
    pub async fn show(&self, run_id: &str) -> Result<RunDetails, StoreError> {
        crate::journal::local::check_run_id(run_id)?;
        let folder = self.receipts.join(run_id);
        let folder_meta = folder.symlink_metadata().ok().filter(|m| m.is_dir());
        let receipt_path = folder.join(RECEIPT_FILE);
        let receipt_path = (folder_meta.is_some() && receipt_path.is_file()).then_some(receipt_path);
        let stored = self.load_journal(run_id).await?;
        let mut details = RunDetails::unknown(
            run_id,
            stored.as_ref().map(|(_, store)| store.clone()),
            receipt_path.clone(),
            folder_meta.is_some().then(|| folder.clone()),
        );
        if let Some((stored, _)) = stored {
            details.fill_from_journal(stored);
            return Ok(details);
        }
        if folder_meta.is_none() {
            return Err(StoreError::NotResumable {
                run_id: run_id.to_owned(),
                state: NotResumableState::Unknown,
            });
        }
        let receipt = match &receipt_path {
            Some(path) => read_receipt_async(path.clone()).await,
            None => None,
        };
        if let Some(receipt) = receipt {
            details.fill_from_receipt(receipt);
        }
        Ok(details)
    }

    /// The journal of `run_id` and the store it was found in (described):
    /// the store's, else one left in the receipts folder when that is
    /// another place; `None` when neither has it.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when a store cannot be read.
    async fn load_journal(&self, run_id: &str) -> Result<Option<(StoredRun, String)>, StoreError> {
        for source in [Source::Store, Source::Local] {
            if source == Source::Local && self.same_folder() {
                break;
            }
            match self.source(source).load(run_id).await {
                Ok(found) => return Ok(Some((found, self.source(source).describe()))),
                Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

impl RunDetails {
    /// Details of `run_id` that say nothing yet: state `unknown`, with
    /// where its journal (a store's description), receipt and folder are.
    fn unknown(
        run_id: &str,
        journal: Option<String>,
        receipt: Option<PathBuf>,
        folder: Option<PathBuf>,
    ) -> RunDetails {
        RunDetails {
            run_id: run_id.to_owned(),
            unreadable: None,
            state: "unknown".to_owned(),
            journal,
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
            receipt,
            folder,
        }
    }

    /// Fills in what the journal `stored` says: its state, header, calls,
    /// and (a paused run only) the pending calls with their recorded
    /// decisions.
    fn fill_from_journal(&mut self, stored: StoredRun) {
        let read = JournalRead::of(&stored.lines);
        self.state = stored.state.as_str().to_owned();
        // A journal no resume can read: said so, with why, as `list` says
        // `unreadable`; nothing waits for a decision then.
        self.unreadable = super::unreadable(&stored, &read);
        if self.unreadable.is_some() {
            self.state = super::UNREADABLE.to_owned();
        }
        // Only a paused run waits for decisions: an interrupted or
        // ended one lists none (nothing can decide them).
        let open: Vec<PendingInfo> = if stored.state == RunState::Paused && self.unreadable.is_none() {
            read.open_pending().cloned().collect()
        } else {
            Vec::new()
        };
        if let Some(h) = read.header {
            self.program =
                Some(ProgramInfo { name: h.program.name, sha256: h.program.sha256, path: h.program.path });
            self.started_at = Some(h.started_at);
            self.workspace = Some(h.workspace);
            self.codemode_version = Some(h.codemode_version);
            self.catalog_sha256 = Some(h.catalog_sha256);
            self.policy_sha256 = Some(h.policy_sha256);
        }
        self.calls = read.calls.into_values().collect();
        // Calls a rollback undid (journal/undo.rs).
        for line in stored.lines.iter().filter(|l| super::super::record::kind(l) == Some("reverted")) {
            if let Ok(r) = serde_json::from_str::<super::super::undo::RevertedRecord>(line) {
                for call in self.calls.iter_mut().filter(|c| r.seqs.contains(&c.seq)) {
                    call.reverted_by = Some(r.by.clone());
                }
            }
        }
        self.recorded =
            read.approvals.values().filter(|a| open.iter().any(|p| p.seq == a.seq)).cloned().collect();
        self.pending = open;
        self.decisions = read.decisions;
    }

    /// Fills in what a run's receipt says (a run without a journal): its
    /// status, catalog digest, calls and pending calls.
    fn fill_from_receipt(&mut self, receipt: ReceiptRead) {
        self.state = receipt.status.unwrap_or_else(|| "unknown".to_owned());
        self.catalog_sha256 = receipt.catalog_sha256;
        self.calls = receipt.calls.unwrap_or_default();
        self.pending = receipt
            .pending
            .into_iter()
            .map(|p| PendingInfo {
                seq: p.seq,
                tool: p.tool,
                arguments: p.arguments,
                reason: None,
                subject: None,
                kind: None,
            })
            .collect();
    }
}

/// One run in detail ([`Runs::show`]).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RunDetails {
    /// The run's id.
    pub run_id: String,
    /// Why its journal cannot be resumed, when `state` is `unreadable`
    /// (a damaged line, named; no header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    /// As in [`RunListing::state`](super::RunListing::state).
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
    /// The rollback run that undid it (`codemode rollback`), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_by: Option<String>,
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
    /// Absent for an approval; `unknown_outcome` for a call that was
    /// running when the run's process ended (a recovered run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
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
