//! Traces of runs and calls, for a host that exports them (OpenTelemetry:
//! the `codemode-otel` crate; the CLI turns it on from the standard
//! `OTEL_EXPORTER_OTLP_*` variables, docs/TELEMETRY.md).
//!
//! The engine knows nothing of any tracing library. A run is traced when
//! the engine has a [`TraceSink`] ([`EngineBuilder::trace_sink`]) or the
//! run was started inside a trace ([`RunOptions::trace_parent`]): it then
//! has a [`TraceContext`] of its own (a child of the parent, else a new
//! trace), each call's span id is derived from it
//! ([`TraceContext::call_span_id`]), a call to an MCP server carries the
//! call's `traceparent` (in `_meta`, SEP-414, and over HTTP as a header),
//! and at the run's end the sink gets a [`FinishedRun`]: the receipt and,
//! per call, what the receipt does not hold (when it started, the gate
//! step that decided it, how long its hooks and approval took). An
//! untraced run records nothing and pays one branch per call.
//!
//! [`EngineBuilder::trace_sink`]: crate::EngineBuilder::trace_sink
//! [`RunOptions::trace_parent`]: crate::run::RunOptions::trace_parent

mod trace_context;

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub use trace_context::TraceContext;

use crate::receipt::Receipt;

/// Takes each traced run when it ends: exports it, counts it.
///
/// Called on the run's VM thread after its receipt is made, before the
/// receipt goes back: keep it short and never block on the network (queue
/// the spans, as a batch exporter does).
pub trait TraceSink: Send + Sync {
    /// A traced run ended (completed, failed, paused or cancelled); a
    /// resumed run ends again as a new span of the same run id.
    fn run_ended(&self, run: &FinishedRun<'_>);
}

/// A traced run at its end.
#[derive(Debug)]
pub struct FinishedRun<'a> {
    /// The run's span (its trace id, its span id).
    pub context: TraceContext,
    /// The span the run was started under, when it was
    /// ([`RunOptions::trace_parent`](crate::run::RunOptions::trace_parent)).
    pub parent: Option<TraceContext>,
    /// When this process started the run (a resumed run: when it resumed).
    pub started: SystemTime,
    /// The run's receipt.
    pub receipt: &'a Receipt,
    /// Per call, in `seq` order, what the receipt does not hold.
    pub calls: &'a [CallTiming],
}

/// What a call's span needs beyond its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTiming {
    /// The call's `seq` in the receipt.
    pub seq: u64,
    /// The call's span id ([`TraceContext::call_span_id`] of the run's).
    pub span_id: [u8; 8],
    /// When the gate opened the call's receipt.
    pub started: SystemTime,
    /// The gate step that decided the call, by its name in
    /// docs/POLICY.md (`rules`, `protected_paths`, `approval`, ...);
    /// `posture` for a call allowed by the posture with nothing else to
    /// ask, `resume` for a call decided when its run was resumed.
    pub decided_by: &'static str,
    /// How long the gate's later steps (hooks, then an approval) took,
    /// for a call that went through them.
    pub later_steps: Option<Duration>,
}

/// One traced run's record while it runs: the calls' start times and
/// deciding steps (the dispatcher writes them from the VM thread and the
/// tool runtime).
#[derive(Debug)]
pub(crate) struct RunTrace {
    pub(crate) context: TraceContext,
    pub(crate) parent: Option<TraceContext>,
    pub(crate) started: SystemTime,
    calls: Mutex<Vec<CallTiming>>,
}

impl RunTrace {
    /// The record of a run started now, under `parent` when given.
    pub(crate) fn new(parent: Option<TraceContext>) -> RunTrace {
        // Whoever exports traces decides what is exported: a parent's
        // sampled flag does not turn a run's spans off (a client could
        // hide its runs from the operator's traces), and the run's calls
        // pass the trace on as sampled.
        let context = match parent {
            Some(parent) => TraceContext { sampled: true, ..parent.child() },
            None => TraceContext::root(),
        };
        RunTrace { context, parent, started: SystemTime::now(), calls: Mutex::new(Vec::new()) }
    }

    /// The context of call `seq`: the trace's, with the call's span id.
    pub(crate) fn call_context(&self, seq: u64) -> TraceContext {
        self.context.with_span(self.context.call_span_id(seq))
    }

    /// Call `seq` was opened now with `decision` so far (the dispatcher
    /// names the deciding step where it knows more, with
    /// [`RunTrace::decided`]).
    pub(crate) fn opened(&self, seq: u64, decision: crate::receipt::Decision) {
        use crate::receipt::Decision;
        let decided_by = match decision {
            Decision::Auto => "posture",
            Decision::Pending => "approval",
            Decision::Refused => "refused",
            Decision::Approved | Decision::Denied => "resume",
        };
        let timing = CallTiming {
            seq,
            span_id: self.context.call_span_id(seq),
            started: SystemTime::now(),
            decided_by,
            later_steps: None,
        };
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.push(timing);
    }

    /// The gate step `step` decided call `seq` (after `took` in the later
    /// steps, when they ran).
    pub(crate) fn decided(&self, seq: u64, step: &'static str, took: Option<Duration>) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(call) = calls.iter_mut().rev().find(|c| c.seq == seq) {
            call.decided_by = step;
            if took.is_some() {
                call.later_steps = took;
            }
        }
    }

    /// Hands the finished run to `sink`.
    pub(crate) fn finish(&self, sink: &dyn TraceSink, receipt: &Receipt) {
        let mut calls = std::mem::take(&mut *self.calls.lock().unwrap_or_else(|p| p.into_inner()));
        calls.sort_by_key(|c| c.seq);
        sink.run_ended(&FinishedRun {
            context: self.context,
            parent: self.parent,
            started: self.started,
            receipt,
            calls: &calls,
        });
    }
}
