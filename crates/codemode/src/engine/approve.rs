//! A person's decisions for a paused run, recorded without running
//! anything ([`Engine::record_decisions`], `codemode approve`), and the
//! resume that applies them and nothing else
//! ([`Engine::start_resume_recorded`]): in server mode the model asks for
//! the resume, a person decides.

use super::{Engine, Run, RunOptions};
use crate::journal::{AwaitingCall, Decided, RecordedDecisions};
use crate::receipt::{ErrorKind, Receipt, RunError};

impl Engine {
    /// Records a person's `decisions` (by the seq of each pending call, as
    /// the paused receipt's `pending` lists them) for paused run `run_id`
    /// in the engine's journal store, without running anything: the run
    /// is claimed as a resume claims it, one `approval` record is appended
    /// per decision, and the run is given back, still paused. The next
    /// resume ([`Engine::start_resume_recorded`], or any resume of the
    /// run) applies them. Meant for decisions a person made out of band
    /// (`codemode approve`): the receipt notes them as a person's.
    ///
    /// Returns which seqs were recorded and which pending calls still have
    /// no decision.
    ///
    /// # Errors
    /// A [`RunError`] of kind `not_resumable` (no journal store, unknown
    /// run, held by another process, ended, interrupted: the run is
    /// untouched), `invocation` (no decision, a seq twice, a seq that is
    /// not pending or already decided: nothing is recorded, the run stays
    /// paused) or `internal` (the store failed).
    pub async fn record_decisions(
        &self,
        run_id: &str,
        decisions: &[(u64, Decided)],
    ) -> Result<RecordedDecisions, RunError> {
        let store = self.store_for(run_id)?;
        let (id, decisions) = (run_id.to_owned(), decisions.to_vec());
        let done = self
            .shared
            .tools
            .spawn(async move { crate::journal::record_decisions(store.as_ref(), &id, &decisions).await })
            .await;
        done.unwrap_or_else(|e| {
            Err(RunError::new(ErrorKind::Internal, format!("the journal task failed: {e}")))
        })
    }

    /// The pending calls of paused run `run_id`, each with the decision a
    /// person recorded for it, if any; holds nothing (for showing a person
    /// what they are about to decide).
    ///
    /// # Errors
    /// As [`Engine::record_decisions`], without `invocation`: a run that is
    /// not paused (running, being resumed, ended) is `not_resumable`.
    pub async fn pending_decisions(&self, run_id: &str) -> Result<Vec<AwaitingCall>, RunError> {
        let store = self.store_for(run_id)?;
        let id = run_id.to_owned();
        let done = self
            .shared
            .tools
            .spawn(async move { crate::journal::pending_decisions(store.as_ref(), &id).await })
            .await;
        done.unwrap_or_else(|e| {
            Err(RunError::new(ErrorKind::Internal, format!("the journal task failed: {e}")))
        })
    }

    /// Resumes paused run `run_id` with the decisions a person recorded
    /// since its pause ([`Engine::record_decisions`]) and nothing else:
    /// [`Engine::start_resume_with`] with no decisions of its own. Pending
    /// calls with no recorded decision are gated again by the run's
    /// approver (`options`, else the engine's): with the `pause` approver
    /// a resume with nothing recorded ends `paused` again with the same
    /// pending calls, having run nothing new. Recorded decisions are
    /// consumed: the receipt shows them as `approved`/`denied` with a note
    /// that a person decided with `codemode approve`, and the journal's
    /// `decision` lines say `by: person`.
    ///
    /// This is the resume a server offers the model: the model names the
    /// run, a person decides its calls.
    ///
    /// # Errors
    /// The receipt of a refusal, as [`Engine::resume`].
    pub async fn start_resume_recorded(&self, run_id: &str, options: RunOptions) -> Result<Run, Receipt> {
        self.start_resume_with(run_id, &[], options).await
    }

    /// The engine's journal store, or the error saying there is none.
    fn store_for(&self, run_id: &str) -> Result<std::sync::Arc<dyn crate::journal::JournalStore>, RunError> {
        self.shared.journal.clone().ok_or_else(|| {
            RunError::new(
                ErrorKind::NotResumable,
                format!(
                    "run `{run_id}` cannot be decided: this engine keeps no journals (journaling is off)"
                ),
            )
        })
    }
}
