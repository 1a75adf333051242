//! What a run records as it goes, as events: [`RunRecorder`] is what the VM
//! reports them through, so that the journal's line formats, its buffer and
//! its writer task stay in the journal. [`RunLog`] is the recorder of a
//! journaled run; the engine hands one to the VM (`vm::journaling`).

use std::future::Future;
use std::pin::Pin;

use super::completion::Completion;
use super::record::{self, How, PausedRecord, PendingRecord};
use super::writer::RunLog;
use super::{RunState, StoreError};
use crate::receipt::Caller;

/// The events of a run that a resume needs to replay it, in the order they
/// happen (docs/JOURNAL.md has the line each one becomes). Made where the
/// run starts and sent to its VM thread, where every method is called; no
/// method waits.
pub(crate) trait RunRecorder: Send {
    /// The program made call `seq` of `tool` with `args_json` (its
    /// arguments as JSON text, written once by the VM).
    fn call_made(&mut self, seq: u64, tool: &str, caller: Caller, args_json: &str);
    /// A call ended (`how`: at once, settled in the program, or never
    /// settled because the run stopped first).
    fn call_ended(&mut self, how: How, completion: &Completion);
    /// The approver left a call for later: the run will pause on it.
    fn call_pending(&mut self, pending: &PendingRecord);
    /// A resume handed a journaled call's result to the program in a new
    /// position among the settles.
    fn result_settled(&mut self, seq: u64);
    /// The program read the clock (`Date.now()` and kin), in milliseconds
    /// since the Unix epoch.
    fn clock_read(&mut self, ms: f64);
    /// `Math.random`'s seed, chosen on first use.
    fn random_seed(&mut self, seed: [u32; 4]);
    /// A resume's replay caught up with the journal: what the resume
    /// decided is recorded now (a resume stopped before then decided
    /// nothing).
    fn caught_up(&mut self);
    /// The run paused (or stayed paused), with its times so far.
    fn paused(&mut self, record: &PausedRecord);
    /// The program waits on its calls: a good moment to pass on what is
    /// recorded so far, so a killed run's journal shows it.
    fn hand_over(&mut self);
    /// The run is over as `state`: records the rest and resolves when it
    /// is durable (`paused`) or written (a final state).
    ///
    /// # Errors
    /// The first store error of the run.
    fn finish(
        self: Box<Self>,
        state: RunState,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;
    /// Where the run's `write` and `edit` calls keep pre-images (`undo`):
    /// `None` when this recorder keeps none.
    fn undo_log(&self) -> Option<super::undo::UndoLog> {
        None
    }
}

impl RunRecorder for RunLog {
    fn call_made(&mut self, seq: u64, tool: &str, caller: Caller, args_json: &str) {
        self.line(|out| record::write_call(out, seq, tool, caller, args_json));
    }

    fn call_ended(&mut self, how: How, completion: &Completion) {
        self.line(|out| record::write_done(out, how, completion));
    }

    fn call_pending(&mut self, pending: &PendingRecord) {
        self.push(record::tagged_line("pending", pending));
    }

    fn result_settled(&mut self, seq: u64) {
        self.push(record::settle_line(seq));
    }

    fn clock_read(&mut self, ms: f64) {
        self.now(ms);
    }

    fn random_seed(&mut self, seed: [u32; 4]) {
        self.push(record::seed_line(seed));
    }

    fn caught_up(&mut self) {
        self.release_held();
    }

    fn paused(&mut self, record: &PausedRecord) {
        self.push(record::tagged_line("paused", record));
    }

    fn hand_over(&mut self) {
        RunLog::hand_over(self);
    }

    fn finish(
        self: Box<Self>,
        state: RunState,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>> {
        Box::pin(RunLog::finish(*self, state))
    }

    fn undo_log(&self) -> Option<super::undo::UndoLog> {
        Some(super::undo::UndoLog::new(self.side()))
    }
}
