//! Direct calls: one tool call from a host or the CLI, outside any program,
//! through the same dispatcher and gate as a program's calls (caller
//! `direct`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Shared;
use super::dispatch::{Begun, Completion, Dispatcher};
use crate::receipt::{CallReceipt, CallStatus, Caller, Ledger};
use crate::vm::clock::{Idle, RunClock};

/// How a direct call ended: its receipt, and the envelope or the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallOutcome {
    /// The id under which the call ran (its spill files go to this folder).
    pub run_id: String,
    /// The call's receipt, as a program's call would have it (caller
    /// `direct`, seq 1).
    pub call: CallReceipt,
    /// `{content, metadata, truncated}` when the call succeeded.
    pub envelope: Option<Value>,
    /// `{kind, message, tool, seq}` when it was refused or failed; `kind` is
    /// what a program's `ToolError.kind` would be.
    pub error: Option<Value>,
}

impl CallOutcome {
    /// Whether the tool ran and returned a result.
    pub fn is_ok(&self) -> bool {
        self.call.status == CallStatus::Ok
    }

    /// Why the call did not succeed, when it did not: the call's error,
    /// else the `message` of [`CallOutcome::error`] (a call cut at its
    /// deadline has only the latter).
    pub fn error_message(&self) -> Option<&str> {
        self.call.error.as_deref().or_else(|| self.error.as_ref()?.get("message")?.as_str())
    }

    /// The `kind` of [`CallOutcome::error`] (`denied`, `refused`, `failed`,
    /// `timeout`, `cancelled`: what a program's ToolError says), when the
    /// call did not succeed.
    pub fn error_kind(&self) -> Option<&str> {
        self.error.as_ref()?.get("kind")?.as_str()
    }
}

/// Runs one call of `tool` with `args` by `caller` (outside any program) to
/// its end.
pub(crate) async fn call(
    shared: Arc<Shared>,
    run_id: Arc<str>,
    tool: &str,
    args: &Value,
    caller: Caller,
) -> CallOutcome {
    let mut ledger = Ledger::new(0, 0);
    let clock = Arc::new(RunClock::new(shared.limits.deadline));
    let dispatcher = Dispatcher::new(shared.clone(), run_id.clone(), clock.clone());
    let args_json = serde_json::to_string(args).expect("JSON values serialise");
    let completion = match dispatcher.begin(&mut ledger, tool, &args_json, caller, true) {
        Begun::Settled(c) => c,
        Begun::Exhausted { completion, .. } => completion,
        Begun::Running { seq, future } => {
            // Dropping this call (a host's timeout, Ctrl-C in the CLI)
            // cancels the tool, as a run's deadline does.
            let mut task = shared.tools.spawn(future);
            let _cancel_on_drop = AbortOnDrop(task.abort_handle());
            let Some(joined) = within_deadline(&mut task, &clock).await else {
                return past_deadline(&shared, run_id, ledger, &clock, task, tool, seq).await;
            };
            let completion = match joined {
                Ok(c) => c,
                Err(_) => {
                    let decision = clock.decision_of(seq).unwrap_or(ledger.decision_of(seq));
                    Completion::panicked(seq, tool, decision)
                }
            };
            ledger.finish(seq, completion.end.clone());
            completion
        }
    };
    let envelope = completion.ok.then(|| completion.envelope());
    let error = (!completion.ok).then(|| serde_json::from_str(&completion.payload).unwrap_or(Value::Null));
    let call = ledger.into_calls().pop().expect("a direct call has a receipt");
    CallOutcome { run_id: run_id.to_string(), call, envelope, error }
}

/// Waits for the call's `task` while the run's deadline allows: the call
/// is the whole run, so, as a program's run loop does (vm/clock.rs), the
/// clock stops while the call waits on a person alone (its approval, a
/// question its tool asks). `None` once the run is past its deadline (or
/// cancelled): the gate does not put a call of such a run to an approver
/// or let it run after an answer (gate/approval_wait.rs), so waiting on
/// would wait for good.
async fn within_deadline(
    task: &mut tokio::task::JoinHandle<Completion>,
    clock: &RunClock,
) -> Option<Result<Completion, tokio::task::JoinError>> {
    loop {
        let _idle = Idle::on(clock, 1);
        tokio::select! {
            biased;
            joined = &mut *task => return Some(joined),
            () = clock.deadline_or_change() => {}
        }
        drop(_idle);
        if clock.should_stop() {
            return None;
        }
    }
}

/// How long a direct call ended at its deadline waits for its task to be
/// dropped (its hooks' and commands' processes ended with it) before it
/// answers anyway.
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The outcome of a direct call ended at its run's deadline: its task
/// aborted and waited for (at most [`ABORT_WAIT`]: dropping the call ends
/// the processes of its hooks and its command, which a process that exits
/// at once would leave running), its receipt `in_flight` (its decision
/// `pending` when it was still waiting for its approval), its error of
/// kind `timeout`.
async fn past_deadline(
    shared: &Shared,
    run_id: Arc<str>,
    mut ledger: Ledger,
    clock: &RunClock,
    task: tokio::task::JoinHandle<Completion>,
    tool: &str,
    seq: u64,
) -> CallOutcome {
    // Read before the abort: an aborted call leaves its approval wait.
    let awaiting = clock.awaiting_approval();
    let queued = clock.slot_waits();
    task.abort();
    let _ = tokio::time::timeout(ABORT_WAIT, task).await;
    let message = format!(
        "the call passed the deadline of {} ms ({}) and was ended (time spent waiting on a person does not \
         count)",
        shared.limits.deadline.as_millis(),
        codemode_base::limit_settings::setting("deadline")
    );
    ledger.abandon_in_flight(&message, &awaiting, &queued, &clock.decisions());
    let call = ledger.into_calls().pop().expect("a direct call has a receipt");
    let error = serde_json::json!({"kind": "timeout", "message": message, "tool": tool, "seq": seq});
    CallOutcome { run_id: run_id.to_string(), call, envelope: None, error: Some(error) }
}

/// Aborts a task when dropped (a no-op once the task has finished).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
