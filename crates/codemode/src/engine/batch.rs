//! Running a batch (DESIGN.md §7): tool calls without a program, through
//! the same dispatcher, gate, bounds, deadline and receipt as a program's.
//!
//! One task on the tool runtime drives the batch: it starts calls in input
//! order (so the receipt's `seq` follows the input) while fewer than the
//! concurrency bound are in flight, waits on the running ones, the deadline
//! and cancellation exactly as a program's run loop does
//! (`vm::host_call::next_ended`), and reports each item as it finishes.
//! Calls are made with caller `program`: `execute_tools` is the program
//! entry point, and a batch is a program with the JavaScript left out, so
//! a tool that refuses program callers refuses batch items too.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::dispatch::{Begun, Completion, Dispatcher};
use super::run_handle::lost;
use super::{Canceller, Engine, Shared, early_receipt, run_id};
use crate::receipt::ledger::ReceiptParts;
use crate::receipt::spill::{self, SpillTarget};
use crate::receipt::{CallStatus, Caller, Decision, ErrorKind, Ledger, Receipt, RunError, RunStatus, millis};
use crate::vm::clock::RunClock;
use crate::vm::host_call::{InFlight, next_ended};
use codemode_program::{Batch, BatchCall, ExecuteInput};

/// How a batch runs: `BatchOptions::new().concurrency(4).fail_fast(true)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOptions {
    /// Calls in flight at once, at least 1; an item starts when a running
    /// one ends. Default: `None`, the engine's [`Limits::max_in_flight`]
    /// (16).
    ///
    /// [`Limits::max_in_flight`]: crate::Limits::max_in_flight
    pub concurrency: Option<usize>,
    /// When an item does not succeed (failed, refused or denied), start no
    /// further items; calls already running finish, and the rest are
    /// reported `not_started`. Default: `false` (every item runs).
    pub fail_fast: bool,
}

impl BatchOptions {
    /// The defaults: the engine's in-flight limit, every item runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the calls in flight at once (`None`: the engine's limit).
    pub fn concurrency(mut self, n: impl Into<Option<usize>>) -> Self {
        self.concurrency = n.into();
        self
    }

    /// Sets whether the first item that does not succeed stops the rest.
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }
}

/// Where a batch item stands when it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemStatus {
    /// The tool ran and returned a result.
    Ok,
    /// The tool ran (or started) and failed, or timed out.
    Failed,
    /// The gate refused the call or an approver denied it.
    Refused,
    /// The call was running when the run ended (deadline, cancel); it was
    /// cancelled and may have partly run.
    InFlight,
    /// The call never started: fail-fast stopped the batch, or the run
    /// ended first. It has no receipt entry.
    NotStarted,
}

impl From<CallStatus> for ItemStatus {
    fn from(status: CallStatus) -> Self {
        match status {
            CallStatus::Ok => ItemStatus::Ok,
            CallStatus::Failed => ItemStatus::Failed,
            CallStatus::Refused => ItemStatus::Refused,
            CallStatus::InFlight => ItemStatus::InFlight,
        }
    }
}

/// One finished (or abandoned) item of a batch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BatchItem {
    /// 0-based position in the batch.
    pub index: usize,
    /// The tool called.
    pub tool: String,
    /// The call's `seq` in the receipt; `None` when it never started.
    pub seq: Option<u64>,
    /// How it ended.
    pub status: ItemStatus,
    /// How the gate decided; `None` when it never started.
    pub decision: Option<Decision>,
    /// `Ok({content, metadata, truncated})`, the envelope a program's call
    /// resolves to, or `Err({kind, message, tool, seq})`, the error it
    /// rejects with (`kind` as a program's `ToolError.kind`, plus
    /// `not_started`).
    pub result: Result<Value, Value>,
}

impl BatchItem {
    /// Whether the tool ran and returned a result.
    pub fn is_ok(&self) -> bool {
        self.status == ItemStatus::Ok
    }

    /// The item as one JSON object (its [`Serialize`] form): `{index, tool,
    /// seq, status, decision}` then the envelope's `content`, `metadata`
    /// and `truncated`, or `error`. This is the line `codemode batch`
    /// prints.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("JSON values serialise")
    }

    /// The item's element in the receipt's value: the envelope, or
    /// `{"error": {kind, message, tool, seq}}`.
    fn value(&self) -> Value {
        match &self.result {
            Ok(envelope) => envelope.clone(),
            Err(error) => json!({ "error": error }),
        }
    }
}

impl Serialize for BatchItem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Item<'a> {
            index: usize,
            // Bounded like every name echoed back (docs/RECEIPTS.md "Bounds").
            tool: std::borrow::Cow<'a, str>,
            seq: Option<u64>,
            status: ItemStatus,
            decision: Option<Decision>,
            #[serde(flatten)]
            result: Outcome<'a>,
        }
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Outcome<'a> {
            Envelope(&'a serde_json::Map<String, Value>),
            Content { content: &'a Value },
            Error { error: &'a Value },
        }
        let result = match &self.result {
            Ok(Value::Object(envelope)) => Outcome::Envelope(envelope),
            Ok(content) => Outcome::Content { content },
            Err(error) => Outcome::Error { error },
        };
        Item {
            index: self.index,
            tool: crate::receipt::spill::cut_text(&self.tool),
            seq: self.seq,
            status: self.status,
            decision: self.decision,
            result,
        }
        .serialize(serializer)
    }
}

/// A batch in progress: its items as they finish, then its receipt.
/// Dropping it does not stop the batch; call [`BatchRun::cancel`] for that.
pub struct BatchRun {
    run_id: Arc<str>,
    clock: Arc<RunClock>,
    items: mpsc::UnboundedReceiver<BatchItem>,
    receipt: oneshot::Receiver<Receipt>,
    shared: Arc<Shared>,
}

impl BatchRun {
    /// The run's id, as in its receipt.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A handle that cancels this batch; cheap to clone and send.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.clock.clone())
    }

    /// Cancels the batch: no further item starts, running calls are
    /// cancelled (reported `in_flight`), and the receipt says `cancelled`.
    pub fn cancel(&self) {
        self.clock.cancel();
    }

    /// The next item to finish, in finishing order; items left running or
    /// not started when the run ends come last, in input order. `None`
    /// once every item was reported (a batch refused as a whole, for being
    /// over the call budget, reports none).
    pub async fn next_item(&mut self) -> Option<BatchItem> {
        self.items.recv().await
    }

    /// Waits for the receipt (items not yet taken are dropped).
    pub async fn wait(self) -> Receipt {
        let BatchRun { run_id, clock, receipt, shared, .. } = self;
        receipt.await.unwrap_or_else(|_| lost(&shared, &run_id, &clock))
    }

    /// [`BatchRun::wait`], blocking this thread (not for async code).
    pub fn wait_blocking(self) -> Receipt {
        let BatchRun { run_id, clock, receipt, shared, .. } = self;
        receipt.blocking_recv().unwrap_or_else(|_| lost(&shared, &run_id, &clock))
    }
}

impl Engine {
    /// Starts `batch` on the tool runtime and returns a handle that yields
    /// its items as they finish, then its receipt.
    ///
    /// Every call goes through the gate (caller `program`), the per-call
    /// bounds and spillover, and the run's deadline, like a program's call;
    /// a batch longer than [`Limits::max_calls`] is refused whole (status
    /// `failed`, kind `limit`, no call made). The receipt's calls are in
    /// input order; its value is the list of item results in input order
    /// (the envelope, or `{"error": {...}}`), bounded like any value.
    ///
    /// [`Limits::max_calls`]: crate::Limits::max_calls
    pub fn start_batch(&self, batch: Batch, options: BatchOptions) -> BatchRun {
        self.start_batch_with(batch, options, super::RunOptions::default())
    }

    /// [`Engine::start_batch`] with `run` options for this batch only (its
    /// own approver).
    pub fn start_batch_with(&self, batch: Batch, options: BatchOptions, run: super::RunOptions) -> BatchRun {
        self.start_batch_restoring(batch, options, run, None)
    }

    /// [`Engine::start_batch_with`] whose `write` calls restore files by
    /// `plan` when given (a rollback: rollback.rs).
    pub(crate) fn start_batch_restoring(
        &self,
        batch: Batch,
        options: BatchOptions,
        run: super::RunOptions,
        plan: Option<Arc<crate::journal::undo::RestorePlan>>,
    ) -> BatchRun {
        let run_id: Arc<str> = Arc::from(run_id::new_run_id());
        let clock = Arc::new(RunClock::new(self.shared.limits.deadline));
        let (items_tx, items) = mpsc::unbounded_channel();
        let (tx, receipt) = oneshot::channel();
        let driver = Driver {
            dispatcher: Dispatcher::new(self.shared.clone(), run_id.clone(), clock.clone())
                .with_approver(run.approver)
                .restoring(plan),
            on_call_end: run.on_call_end,
            shared: self.shared.clone(),
            run_id: run_id.clone(),
            clock: clock.clone(),
            items: items_tx,
        };
        self.shared.tools.spawn(async move {
            let _ = tx.send(driver.run(batch, options).await);
        });
        BatchRun { run_id, clock, items, receipt, shared: self.shared.clone() }
    }

    /// Runs `batch` to its end with `options` and returns the receipt; see
    /// [`Engine::start_batch`].
    pub async fn execute_batch(&self, batch: Batch, options: BatchOptions) -> Receipt {
        self.start_batch(batch, options).wait().await
    }

    /// [`Engine::execute_batch`], blocking this thread (not for async code).
    pub fn execute_batch_blocking(&self, batch: Batch, options: BatchOptions) -> Receipt {
        self.start_batch(batch, options).wait_blocking()
    }

    /// Runs `execute_tools`' input: `{"code": ...}` as a program,
    /// `{"batch": ...}` as a batch with default options. Malformed input
    /// gives a `failed` receipt with error kind `syntax` whose message names
    /// the field (`batch[3].arguments: must be an object, got a string`);
    /// no call is made.
    pub async fn execute_tools(&self, input: &Value) -> Receipt {
        match ExecuteInput::from_value(input) {
            Ok(ExecuteInput::Program(program)) => self.execute(program).await,
            Ok(ExecuteInput::Batch(batch)) => self.execute_batch(batch, BatchOptions::default()).await,
            Err(e) => self.refused_input(e),
        }
    }

    /// [`Engine::execute_tools`], blocking this thread (not for async code).
    pub fn execute_tools_blocking(&self, input: &Value) -> Receipt {
        match ExecuteInput::from_value(input) {
            Ok(ExecuteInput::Program(program)) => self.execute_blocking(program),
            Ok(ExecuteInput::Batch(batch)) => self.execute_batch_blocking(batch, BatchOptions::default()),
            Err(e) => self.refused_input(e),
        }
    }

    fn refused_input(&self, e: codemode_program::BatchError) -> Receipt {
        let run_id = run_id::new_run_id();
        let clock = RunClock::new(self.shared.limits.deadline);
        let error = RunError::new(ErrorKind::Syntax, format!("execute_tools input: {e}"));
        early_receipt(&self.shared, &run_id, &clock, error)
    }
}

/// Why items stopped starting.
enum Stop {
    /// Fail-fast: item `index` did not succeed.
    FailFast(usize),
    /// The call budget (kind `limit`).
    Exhausted(String),
}

/// The state of one batch run.
struct Driver {
    dispatcher: Dispatcher,
    shared: Arc<Shared>,
    run_id: Arc<str>,
    clock: Arc<RunClock>,
    items: mpsc::UnboundedSender<BatchItem>,
    on_call_end: Option<crate::receipt::CallEndObserver>,
}

/// Items started in a row before the driver yields its runtime thread.
const YIELD_EVERY: usize = 256;

/// Where a batch run is.
struct Progress {
    ledger: Ledger,
    calls_in: InFlight,
    /// The item index of each call in flight, by seq.
    index_of: HashMap<u64, usize>,
    /// Each item's value (the receipt's result), `null` until it ends.
    values: Vec<Value>,
    /// The index of the next item to start.
    next: usize,
    stop: Option<Stop>,
}

impl Driver {
    async fn run(mut self, batch: Batch, options: BatchOptions) -> Receipt {
        let calls = batch.calls();
        let n = calls.len();
        if let Err(error) = self.within_budget(n) {
            return early_receipt(&self.shared, &self.run_id, &self.clock, error);
        }
        let max = options.concurrency.unwrap_or(self.shared.limits.max_in_flight).max(1);
        let mut progress = Progress {
            ledger: Ledger::new(0, 0).observed(self.on_call_end.take()),
            calls_in: InFlight::new(max, self.shared.tools.clone(), Default::default()),
            index_of: HashMap::new(),
            values: vec![Value::Null; n],
            next: 0,
            stop: None,
        };
        self.drive(calls, &options, &mut progress).await;

        // The end: a stop from outside leaves running calls in flight.
        let ended = self.stop_error();
        if let Some((_, note)) = &ended {
            self.abandon_in_flight(calls, &mut progress, note);
        }
        self.report_not_started(calls, &mut progress, ended.as_ref().map(|(e, _)| e));
        let (status, error) = match (ended, progress.stop) {
            (Some((e, _)), _) => {
                let status =
                    if e.kind == ErrorKind::Cancelled { RunStatus::Cancelled } else { RunStatus::TimedOut };
                (status, Some(e))
            }
            (None, Some(Stop::Exhausted(reason))) => {
                (RunStatus::Failed, Some(RunError::new(ErrorKind::Limit, reason)))
            }
            (None, _) => (RunStatus::Completed, None),
        };
        self.receipt(progress.ledger, status, Value::Array(progress.values), error).await
    }

    /// Whether a batch of `n` calls fits the call budget; the run's error
    /// (kind `limit`) when it does not, before any call is made.
    fn within_budget(&self, n: usize) -> Result<(), RunError> {
        let max_calls = self.shared.limits.max_calls;
        if n > max_calls {
            return Err(RunError::new(
                ErrorKind::Limit,
                format!(
                    "the batch has {n} calls, over the call budget of {max_calls} per run; \
                     split it or raise the limit ({}); no call was made",
                    codemode_base::limit_settings::setting("max_calls")
                ),
            ));
        }
        Ok(())
    }

    /// Starts items while slots are free and reports calls as they end,
    /// until none is in flight or the run must stop.
    async fn drive(&self, calls: &[BatchCall], options: &BatchOptions, p: &mut Progress) {
        loop {
            self.start_items(calls, options, p).await;
            if p.calls_in.is_empty() || self.clock.should_stop() {
                break;
            }
            let Some(joined) = next_ended(&mut p.calls_in.running, &self.clock).await else { continue };
            let completion = p.calls_in.ended(joined, &p.ledger, &self.clock);
            let Some(index) = p.index_of.remove(&completion.seq) else { continue };
            p.ledger.finish(completion.seq, completion.end.clone());
            if !self.report(index, &calls[index].tool, &completion, &mut p.values)
                && options.fail_fast
                && p.stop.is_none()
            {
                p.stop = Some(Stop::FailFast(index));
            }
        }
    }

    /// Starts the next items, in order, while nothing stopped them and a
    /// slot is free; yields the runtime thread every [`YIELD_EVERY`] items.
    async fn start_items(&self, calls: &[BatchCall], options: &BatchOptions, p: &mut Progress) {
        let mut in_a_row = 0;
        while p.stop.is_none()
            && p.next < calls.len()
            && p.calls_in.has_free_slot()
            && !self.clock.should_stop()
        {
            let next = p.next;
            let call = &calls[next];
            let args = Value::Object(call.arguments.clone());
            match self.dispatcher.begin_value(&mut p.ledger, &call.tool, args, Caller::Program, true) {
                Begun::Settled(c) => {
                    if !self.report(next, &call.tool, &c, &mut p.values) && options.fail_fast {
                        p.stop = Some(Stop::FailFast(next));
                    }
                }
                Begun::Running { seq, future } => {
                    p.index_of.insert(seq, next);
                    p.calls_in.start(seq, future);
                }
                Begun::Exhausted { completion, reason } => {
                    self.report(next, &call.tool, &completion, &mut p.values);
                    p.stop = Some(Stop::Exhausted(reason));
                }
            }
            p.next += 1;
            in_a_row += 1;
            if in_a_row >= YIELD_EVERY {
                in_a_row = 0;
                tokio::task::yield_now().await;
            }
        }
    }

    /// The run was stopped from outside (`note` says how): aborts the
    /// running calls, marks every call in flight in the ledger, and reports
    /// their items `in_flight` with a `cancelled` error, in index order.
    fn abandon_in_flight(&self, calls: &[BatchCall], p: &mut Progress, note: &str) {
        let awaiting = self.clock.awaiting_approval();
        let mut queued: Vec<u64> = p.calls_in.queued.iter().map(|(seq, _)| *seq).collect();
        // Calls waiting for their tool's or server's slots have not started either.
        queued.extend(self.clock.slot_waits());
        p.calls_in.running.abort_all();
        p.ledger.abandon_in_flight(note, &awaiting, &queued, &self.clock.decisions());
        let mut left: Vec<(u64, usize)> = p.index_of.drain().collect();
        left.sort_by_key(|&(_, index)| index);
        for (seq, index) in left {
            let tool = &calls[index].tool;
            let decision = p.ledger.decision_of(seq);
            let error = json!({"kind": "cancelled", "message": note, "tool": tool, "seq": seq});
            self.send(
                BatchItem {
                    index,
                    tool: tool.clone(),
                    seq: Some(seq),
                    status: ItemStatus::InFlight,
                    decision: Some(decision),
                    result: Err(error),
                },
                &mut p.values,
            );
        }
    }

    /// Reports the items never started `not_started`, with why: the run's
    /// `ended` error, fail-fast, or the call budget.
    fn report_not_started(&self, calls: &[BatchCall], p: &mut Progress, ended: Option<&RunError>) {
        let not_started = match (&p.stop, ended) {
            (_, Some(e)) => format!("not started: {}", e.message),
            (Some(Stop::FailFast(i)), None) => {
                format!("not started: the item at index {i} did not succeed and the batch is fail-fast")
            }
            (Some(Stop::Exhausted(reason)), None) => format!("not started: {reason}"),
            (None, None) => String::new(),
        };
        for (index, call) in calls.iter().enumerate().skip(p.next) {
            let error =
                json!({"kind": "not_started", "message": not_started, "tool": call.tool, "seq": null});
            self.send(
                BatchItem {
                    index,
                    tool: call.tool.clone(),
                    seq: None,
                    status: ItemStatus::NotStarted,
                    decision: None,
                    result: Err(error),
                },
                &mut p.values,
            );
        }
    }

    /// Reports the item of a finished call; returns whether it succeeded.
    fn report(&self, index: usize, tool: &str, c: &Completion, values: &mut [Value]) -> bool {
        let item = BatchItem {
            index,
            tool: tool.to_owned(),
            seq: Some(c.seq),
            status: c.end.status.into(),
            decision: Some(c.end.decision),
            result: if c.ok {
                Ok(c.envelope())
            } else {
                Err(serde_json::from_str(&c.payload).unwrap_or(Value::Null))
            },
        };
        let ok = item.is_ok();
        self.send(item, values);
        ok
    }

    /// Keeps the item's value for the receipt and hands the item to the
    /// host (which may have stopped listening).
    fn send(&self, item: BatchItem, values: &mut [Value]) {
        values[item.index] = item.value();
        let _ = self.items.send(item);
    }

    /// Why the run stopped from outside, with the note for calls left
    /// running.
    fn stop_error(&self) -> Option<(RunError, &'static str)> {
        if self.clock.is_cancelled() {
            return Some((
                RunError::new(ErrorKind::Cancelled, "the run was cancelled"),
                "cancelled with the run",
            ));
        }
        self.clock.expired().then(|| {
            let message = format!(
                "the run passed its deadline of {} ms ({})",
                self.shared.limits.deadline.as_millis(),
                codemode_base::limit_settings::setting("deadline")
            );
            (RunError::new(ErrorKind::Timeout, message), "cancelled at the run deadline")
        })
    }

    /// The receipt; the value is bounded (and spilled) off the runtime's
    /// worker threads.
    async fn receipt(
        self,
        ledger: Ledger,
        status: RunStatus,
        value: Value,
        error: Option<RunError>,
    ) -> Receipt {
        let Driver { dispatcher, shared, run_id, clock, .. } = self;
        let id = run_id.to_string();
        tokio::task::spawn_blocking(move || {
            let bounded = spill::bound(
                value,
                shared.limits.value_bytes,
                SpillTarget { area: dispatcher.spill_area(), stem: "value" },
            );
            ledger.into_receipt(ReceiptParts {
                run_id: run_id.to_string(),
                status,
                value: bounded.value,
                value_truncated: bounded.truncated,
                error,
                catalog_sha256: shared.catalog.load().digest().to_owned(),
                elapsed_ms: millis(clock.elapsed()),
                approval_wait_ms: millis(clock.paused_total()),
                warnings: crate::engine::run_warnings(&shared, dispatcher.spill_area().failures()),
            })
        })
        .await
        .unwrap_or_else(|_| {
            let e = RunError::new(ErrorKind::Internal, "building the batch receipt panicked; this is a bug");
            Ledger::new(0, 0).into_receipt(ReceiptParts {
                run_id: id,
                status: RunStatus::Failed,
                value: Value::Null,
                value_truncated: None,
                error: Some(e),
                catalog_sha256: String::new(),
                elapsed_ms: 0.0,
                approval_wait_ms: 0.0,
                warnings: Vec::new(),
            })
        })
    }
}
