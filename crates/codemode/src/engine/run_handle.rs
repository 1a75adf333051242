//! A run in progress and what a host holds of it: the options it started
//! with, its handle, a canceller and a guard that stops its clock.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::gate::Approver;
use crate::receipt::{ErrorKind, Receipt, RunError};
use crate::vm::clock::RunClock;

use super::{Shared, early_receipt};

/// Settings for one run that differ from the engine's.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Decides this run's approvals and answers the questions its MCP
    /// servers ask (elicitations), instead of the engine's approver.
    /// Default: `None`, the engine's.
    pub approver: Option<Arc<dyn Approver>>,
    /// Told of each call as it ends, with its receipt (on the run's VM
    /// thread, or the tool runtime for a batch: keep it short, never
    /// block). A server mode sends progress notifications from it.
    /// Default: `None`.
    pub on_call_end: Option<crate::receipt::CallEndObserver>,
    /// The run's id, made beforehand with [`crate::Engine::new_run_id`], so
    /// a host can record it (a batch's record of its lines) before the
    /// run's first call. A run whose id is not of that form fails at once
    /// (kind `invocation`); the journal store refuses a second journal of
    /// an id it holds, so never give one id to two runs. Default: `None`,
    /// a new id.
    pub run_id: Option<String>,
    /// The span this run is part of (a request's `traceparent`): the run
    /// is traced, its span a child of this one, and the calls it makes to
    /// MCP servers carry the trace on. Default: `None`, a new trace when
    /// the engine has a [`TraceSink`](crate::telemetry::TraceSink), else
    /// none.
    pub trace_parent: Option<crate::telemetry::TraceContext>,
    /// For a resume: go on with a run whose journal names another
    /// workspace than the engine's (a shared journal store, a folder
    /// outside the workspace or PostgreSQL, holds several workspaces'
    /// runs). Default: `false`, such a resume is refused (kind
    /// `divergence`, the run left as it was), since the calls a person
    /// approved for that workspace would act on this one's files, and
    /// the run's pre-images would be split between the two. Batch workers
    /// set it: their runs are not bound to a path (docs/BATCH.md).
    pub any_workspace: bool,
}

impl RunOptions {
    /// Options whose run asks `approver`.
    pub fn with_approver(approver: Arc<dyn Approver>) -> Self {
        RunOptions { approver: Some(approver), ..RunOptions::default() }
    }

    /// These options, with `observer` told of each call as it ends.
    pub fn on_call_end(self, observer: crate::receipt::CallEndObserver) -> Self {
        RunOptions { on_call_end: Some(observer), ..self }
    }

    /// These options, for a run whose id is `run_id` (made with
    /// [`crate::Engine::new_run_id`]).
    pub fn run_id(self, run_id: impl Into<String>) -> Self {
        RunOptions { run_id: Some(run_id.into()), ..self }
    }

    /// These options, for a resume that may go on with a run made in
    /// another workspace ([`RunOptions::any_workspace`]).
    pub fn any_workspace(self) -> Self {
        RunOptions { any_workspace: true, ..self }
    }

    /// These options, for a run inside the trace of `parent` (a
    /// `traceparent` the host received; `None` leaves them as they are).
    pub fn trace_parent(self, parent: Option<crate::telemetry::TraceContext>) -> Self {
        RunOptions { trace_parent: parent.or(self.trace_parent), ..self }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("approver", &self.approver.is_some())
            .field("on_call_end", &self.on_call_end.is_some())
            .field("run_id", &self.run_id)
            .field("trace_parent", &self.trace_parent.map(|t| t.traceparent()))
            .field("any_workspace", &self.any_workspace)
            .finish()
    }
}

/// A run in progress. Dropping it does not stop the run; call
/// [`Run::cancel`] for that.
pub struct Run {
    pub(super) run_id: Arc<str>,
    pub(super) clock: Arc<RunClock>,
    pub(super) receipt: oneshot::Receiver<Receipt>,
    pub(super) shared: Arc<Shared>,
}

impl Run {
    /// The run's id, as in its receipt.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A handle that cancels this run; cheap to clone and send.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.clock.clone())
    }

    /// Cancels the run: JavaScript stops at its next interrupt check, running
    /// calls are cancelled, and the receipt says `cancelled`.
    pub fn cancel(&self) {
        self.clock.cancel();
    }

    /// Stops the run's deadline clock until the guard is dropped, whatever
    /// the run does meanwhile (an approval wait stops it only while the run
    /// waits on nothing else: see [`Limits::deadline`](crate::Limits)).
    /// Pauses nest.
    pub fn pause_clock(&self) -> ClockPause {
        self.clock.pause();
        ClockPause(self.clock.clone())
    }

    /// Waits for the receipt.
    pub async fn wait(self) -> Receipt {
        let Run { run_id, clock, receipt, shared } = self;
        receipt.await.unwrap_or_else(|_| lost(&shared, &run_id, &clock))
    }

    /// Waits for the receipt, blocking this thread (not for async code).
    pub fn wait_blocking(self) -> Receipt {
        let Run { run_id, clock, receipt, shared } = self;
        receipt.blocking_recv().unwrap_or_else(|_| lost(&shared, &run_id, &clock))
    }
}

/// Cancels a run from anywhere (a signal handler, another task).
#[derive(Clone)]
pub struct Canceller(pub(super) Arc<RunClock>);

impl Canceller {
    /// Cancels the run.
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

/// Keeps a run's deadline clock stopped while alive.
pub struct ClockPause(Arc<RunClock>);

impl Drop for ClockPause {
    fn drop(&mut self) {
        self.0.resume();
    }
}

/// The receipt of a run whose VM thread stopped before sending one.
pub(super) fn lost(shared: &Shared, run_id: &str, clock: &RunClock) -> Receipt {
    let e = RunError::new(ErrorKind::Internal, "the VM thread stopped before the run ended; this is a bug");
    early_receipt(shared, run_id, clock, e)
}
