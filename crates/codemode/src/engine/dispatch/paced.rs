//! A call under its tool's or MCP server's limits (engine/pacing.rs,
//! docs/LIMITS.md): it waits for its slots before anything of it runs (the
//! journal's `start` line included, so a crash while it waits leaves no
//! call of unknown outcome), its timeout starts when it starts, and a
//! failure its retry policy covers is made again after a backoff, the
//! slots given back meanwhile. The receipt records the wait (`queued_ms`,
//! all attempts' together) and the attempts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::finish::{Attempt, journal_done};
use super::recovery::safe_to_repeat;
use super::{CallFuture, Completion, Finisher};
use crate::catalog::{Entry, RetryHint, Tool, ToolContext, ToolFuture, ToolSource, ToolSpec};
use crate::engine::pacing::Pace;
use crate::tools::Abandon;
use crate::vm::clock::RunClock;

/// What makes the call's tool future again, for each attempt.
struct Remake {
    tool: Arc<dyn Tool>,
    args: Value,
    cx: ToolContext,
    abandon: Option<Abandon>,
}

impl Remake {
    fn make(&self) -> ToolFuture {
        Abandon::scope(&self.abandon, self.tool.call(self.args.clone(), self.cx.clone()))
    }
}

/// Notes on the run's clock that a call waits for the slots of its first
/// attempt, until dropped: a run that stops meanwhile records the call as
/// never started.
struct SlotWait<'a> {
    clock: &'a RunClock,
    seq: u64,
}

impl<'a> SlotWait<'a> {
    fn new(clock: &'a RunClock, seq: u64) -> Self {
        clock.waiting_for_slots(seq, true);
        SlotWait { clock, seq }
    }
}

impl Drop for SlotWait<'_> {
    fn drop(&mut self) {
        self.clock.waiting_for_slots(self.seq, false);
    }
}

/// The MCP server whose tool `spec` is, if any.
fn server_of(spec: &ToolSpec) -> Option<&str> {
    match &spec.source {
        ToolSource::Mcp { server } => Some(server),
        _ => None,
    }
}

impl Finisher {
    /// Whether a call of `entry`'s tool goes through limits (it is then
    /// not polled before it has its slots).
    pub(super) fn paced(&self, entry: &Entry) -> bool {
        self.shared.pacing.of(&entry.name, server_of(&entry.spec)).is_some()
    }

    /// Runs the call of `entry` with `args` and `cx`: under its limits
    /// when it has any, else as [`Finisher::run`]. `timeout` is each
    /// attempt's, from when it starts.
    pub(crate) fn run_entry(
        self,
        entry: &Entry,
        args: Value,
        mut cx: ToolContext,
        timeout: Duration,
    ) -> CallFuture {
        let abandon = Abandon::for_tool(&entry.spec);
        let Some(pace) = self.shared.pacing.of(&entry.name, server_of(&entry.spec)) else {
            // A tool that waits for its durable start itself starts now,
            // beside the journal's write of its start.
            if let Some(log) = abandon.as_ref().and(self.durable.clone())
                && entry.spec.waits_for_durable_start
            {
                let (gate, opens) = crate::catalog::DurableStart::new();
                cx.durable_start = Some(gate);
                let future = Abandon::scope(&abandon, entry.tool.call(args, cx));
                return self.run_beside_start(future, timeout, abandon, log, opens);
            }
            let future = Abandon::scope(&abandon, entry.tool.call(args, cx));
            return self.run(future, timeout, abandon);
        };
        let repeat_safe = safe_to_repeat(&self.shared, &entry.name, Some(&entry.spec));
        let call = Remake { tool: entry.tool.clone(), args, cx, abandon };
        Box::pin(self.run_paced(pace, call, timeout, repeat_safe))
    }

    /// The attempts of a paced call (see the module docs).
    async fn run_paced(
        mut self,
        pace: Pace,
        call: Remake,
        timeout: Duration,
        repeat_safe: bool,
    ) -> Completion {
        let waited = Instant::now();
        let first = SlotWait::new(&self.clock, self.seq);
        let acquired = pace.acquire().await;
        if self.clock.should_stop() {
            // The run ended while this call waited (the slot it got was
            // freed by the run's end cancelling a call): it never starts.
            // The run's end drops this future, and records it as never
            // started while `first` says it waits.
            drop(acquired);
            return std::future::pending::<Completion>().await;
        }
        drop(first);
        let mut slots = match acquired {
            Ok(slots) => slots,
            Err(e) => {
                let failed =
                    Attempt::Ended(Err(crate::catalog::ToolError::new(format!("not started: {e}"))), None);
                return self.complete(failed, timeout).await;
            }
        };
        let mut queued = waited.elapsed();
        let log = call.abandon.as_ref().and(self.durable.clone());
        if let Some(log) = &log
            && let Err(stopped) = self.journal_start(log).await
        {
            return *stopped;
        }
        let mut attempts = 1;
        let last = loop {
            let mut future = call.make();
            let attempt = self.attempt(&mut future, timeout, call.abandon.as_ref()).await;
            drop(future);
            drop(slots);
            let retry = match &attempt {
                Attempt::Ended(Err(e), _) => e.retry,
                _ => RetryHint::No,
            };
            let Some(wait) = pace.retry_wait(attempts, retry, repeat_safe) else {
                break attempt;
            };
            tokio::time::sleep(wait).await;
            let waited = Instant::now();
            let acquired = pace.acquire().await;
            queued += waited.elapsed();
            if self.clock.should_stop() {
                // The run was told to stop (its deadline, a cancel, a
                // limit) while this call waited to try again: it is not
                // tried again, even when the VM that would cut it does not
                // come back (engine/overrun_watch.rs).
                break attempt;
            }
            slots = match acquired {
                Ok(slots) => slots,
                Err(e) => {
                    let error = crate::catalog::ToolError::new(format!("not made again: {e}"));
                    break Attempt::Ended(Err(error), None);
                }
            };
            attempts += 1;
        };
        self.queued = Some(queued);
        self.attempts = attempts;
        let completion = self.complete(last, timeout).await;
        match log {
            Some(log) => journal_done(&log, completion).await,
            None => completion,
        }
    }
}
