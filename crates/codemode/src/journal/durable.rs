//! Durable starts and ends of calls that may change something: a call of
//! a tool that is not read-only (a write, bash, an MCP tool without
//! `readOnlyHint`) has a `start` line made durable before the tool starts,
//! and its `done` line made durable before the program gets its result
//! (docs/JOURNAL.md, "Recovery"). So a run whose process dies can be
//! recovered: a call with a `done` is answered from the journal, one with
//! a `start` and no `done` has an unknown outcome, and one with neither
//! never started.
//!
//! The lines go to the run's writer task (`writer.rs`), which appends what
//! is queued at once in one append and one sync (group commit): calls
//! started in the same turn of the program share a sync. Read-only calls
//! never come here.

use tokio::sync::oneshot;

use super::completion::Completion;
use super::record::{self, How};
use super::writer::{Msg, ToWriter};
use super::{RunState, StoreError};

/// Answered when the lines it was sent with are durable (or could not be
/// made so).
pub(crate) type Ticket = oneshot::Sender<Result<(), StoreError>>;

/// A run's journal as the tool runtime reaches it: sends lines to be made
/// durable to the run's writer task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct DurableLog {
    tx: ToWriter,
}

impl std::fmt::Debug for DurableLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DurableLog")
    }
}

impl DurableLog {
    pub(super) fn new(tx: ToWriter) -> DurableLog {
        DurableLog { tx }
    }

    /// Appends call `seq`'s `start` line and waits until it (and every
    /// line before it) is durable.
    ///
    /// # Errors
    /// The store's error, or the writer having stopped (the run ended).
    pub(crate) async fn start(&self, seq: u64) -> Result<(), StoreError> {
        self.durable(format!("{}\n", record::start_line(seq))).await
    }

    /// Appends the `done` line of `completion` (a result not yet handed to
    /// the program: `unsettled`; the VM writes a `settle` line when it
    /// hands it over) and waits until it is durable.
    ///
    /// # Errors
    /// As [`DurableLog::start`].
    pub(crate) async fn done(&self, completion: &Completion) -> Result<(), StoreError> {
        let mut line = String::with_capacity(completion.payload.len() + 200);
        record::write_done(&mut line, How::Unsettled, completion);
        line.push('\n');
        self.durable(line).await
    }

    /// Test hook, in debug builds only: with
    /// `CODEMODE_TEST_HOLD_STARTED=TOOL:MS` in the environment, a call of
    /// TOOL waits MS milliseconds between its durable start and the tool's
    /// run, so a test can kill the process there (a `write` is over too
    /// fast to be killed in flight otherwise). Nothing in release builds.
    pub(crate) async fn test_hold(&self, tool: &str) {
        #[cfg(debug_assertions)]
        if let Ok(spec) = std::env::var("CODEMODE_TEST_HOLD_STARTED")
            && let Some((name, ms)) = spec.split_once(':')
            && name == tool
            && let Ok(ms) = ms.parse::<u64>()
        {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        #[cfg(not(debug_assertions))]
        let _ = tool;
    }

    /// Ends the run's journal with `state` (a final one, or `paused` for a
    /// resume stopped in its replay), after the lines `tail` (each ending
    /// in a newline), from off its VM thread, for a run the host answered
    /// without its VM
    /// (engine/overrun_watch.rs). What the VM thread still buffers (the
    /// lines since the program last waited on a call) is not written, and
    /// the VM's own end, if it comes, finds the journal ended. Returns
    /// `false` when the journal had ended already (the VM's end came
    /// first).
    ///
    /// # Errors
    /// The store's error ending it, or an earlier one of the run's.
    pub(crate) async fn end_without_vm(&self, state: RunState, tail: String) -> Result<bool, StoreError> {
        let (done, answer) = oneshot::channel();
        if self.tx.send(Msg::Commit(tail, state, done)).is_err() {
            return Ok(false);
        }
        match answer.await {
            Ok(result) => result.map(|()| true),
            Err(_) => Ok(false),
        }
    }

    async fn durable(&self, text: String) -> Result<(), StoreError> {
        let (ticket, answer) = oneshot::channel();
        let stopped = || StoreError::Failed("the journal writer stopped".into());
        self.tx.send(Msg::Durable(text, vec![ticket])).map_err(|_| stopped())?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}
