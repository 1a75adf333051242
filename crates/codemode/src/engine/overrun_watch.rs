//! The deadline held by the host, not by QuickJS: a run still going
//! [`OVERRUN_GRACE`] after its deadline is answered without its VM.
//!
//! QuickJS stops a program at its next interrupt check, every 10,000
//! branches and calls. Between two checks a loop of slow built-ins (a sort
//! of a large typed array, `indexOf` in a long string, `JSON.stringify` of
//! a large value) can run for minutes or hours, and the VM cannot be made
//! to look sooner. So the host does not wait on it: while an engine runs
//! programs, one task per engine looks every [`POLL`] for a run past its
//! deadline by [`OVERRUN_GRACE`] that has not sent its receipt, and sends
//! one for it instead (status `timed_out`, error kind `timeout`, no calls
//! listed: they are in its journal). The VM is left to reach its next
//! check on its own thread; any tool call it makes meanwhile is refused,
//! its deadline having passed, and its own receipt goes nowhere.
//! docs/SECURITY.md, "The deadline holds for the host, not for QuickJS".

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::receipt::{ErrorKind, Receipt, RunError, RunStatus};
use crate::vm::clock::RunClock;

use super::Shared;

/// How long past its deadline a run may go on before the host answers
/// without it: long enough for a run told to stop to end its calls (a
/// bash command's kill grace is 2 s) and write its journal.
pub const OVERRUN_GRACE: Duration = Duration::from_secs(10);

/// How often the watch looks at the runs going.
const POLL: Duration = Duration::from_secs(1);

/// Where a run's receipt goes: to whoever answers first, the run's VM or
/// the watch. Shared by the run's job and (weakly) the watch.
pub(crate) type ReceiptSlot = Arc<Answer>;

/// A run's answer, and the VM thread it holds while it goes on unanswered
/// by its VM.
pub(crate) struct Answer(Mutex<AnswerState>);

struct AnswerState {
    sender: Option<oneshot::Sender<Receipt>>,
    /// The stalled count of the VM thread running the run, once it runs.
    thread: Option<Arc<AtomicUsize>>,
    /// Whether the run counts in `thread`'s stalled count: answered by the
    /// watch while it runs there.
    stalls: bool,
}

impl Answer {
    /// An answer not given yet, to go to `sender`.
    pub(crate) fn new(sender: oneshot::Sender<Receipt>) -> ReceiptSlot {
        Arc::new(Answer(Mutex::new(AnswerState { sender: Some(sender), thread: None, stalls: false })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AnswerState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run starts on this VM thread: while it goes on after the watch
    /// answered it (now, or later), the thread takes no new runs while
    /// another can.
    pub(crate) fn started_here(&self) {
        self.started_on(crate::vm::pool::stalled_here());
    }

    /// [`Answer::started_here`] on the thread whose stalled count is
    /// `thread`.
    fn started_on(&self, thread: Option<Arc<AtomicUsize>>) {
        let mut state = self.state();
        state.thread = thread;
        if state.sender.is_none() {
            stall(&mut state);
        }
    }

    /// Sends the VM's `receipt`, unless the watch answered first; either
    /// way the run no longer holds its thread.
    pub(crate) fn send(&self, receipt: Receipt) {
        let mut state = self.state();
        if let Some(tx) = state.sender.take() {
            let _ = tx.send(receipt);
        }
        if std::mem::take(&mut state.stalls)
            && let Some(thread) = &state.thread
        {
            thread.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The watch's answer: `make`'s receipt (given whether the run has
    /// started on a VM thread), unless the VM answered first. Returns
    /// whether it was sent.
    fn answer_without_vm(&self, make: impl FnOnce(bool) -> Receipt) -> bool {
        let mut state = self.state();
        let Some(tx) = state.sender.take() else { return false };
        let _ = tx.send(make(state.thread.is_some()));
        if state.thread.is_some() {
            stall(&mut state);
        }
        true
    }
}

/// Counts the run in its thread's stalled count (once).
fn stall(state: &mut AnswerState) {
    if !state.stalls
        && let Some(thread) = &state.thread
    {
        thread.fetch_add(1, Ordering::Relaxed);
        state.stalls = true;
    }
}

/// The runs an engine runs now, by id, and whether its poll is going.
#[derive(Default)]
pub(crate) struct OverrunWatch {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    runs: HashMap<Arc<str>, (Weak<RunClock>, Weak<Answer>)>,
    polling: bool,
}

/// Keeps a run watched while alive (held by the run's job on its VM
/// thread).
pub(crate) struct Watched {
    watch: Arc<OverrunWatch>,
    run_id: Arc<str>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut held = self.watch.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.runs.remove(&self.run_id);
    }
}

impl OverrunWatch {
    /// Watches run `run_id` (timed by `clock`, answered through `slot`)
    /// until the guard drops, starting the poll on the engine's tool
    /// runtime when it is not going. The watch holds neither the clock nor the slot: a run whose
    /// VM thread dropped them is not kept alive by it.
    pub(crate) fn watch(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        run_id: &Arc<str>,
        clock: &Arc<RunClock>,
        slot: &ReceiptSlot,
    ) -> Watched {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.runs.insert(run_id.clone(), (Arc::downgrade(clock), Arc::downgrade(slot)));
        if !held.polling {
            held.polling = true;
            shared.tools.spawn(poll(self.clone(), Arc::downgrade(shared)));
        }
        Watched { watch: self.clone(), run_id: run_id.clone() }
    }
}

/// Every [`POLL`], answers the watched runs past their deadline by
/// [`OVERRUN_GRACE`]; ends when no run is watched (the next watched run
/// starts it again) or the engine is gone.
async fn poll(watch: Arc<OverrunWatch>, shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(POLL).await;
        let overdue: Vec<(Arc<str>, Arc<RunClock>, ReceiptSlot)> = {
            let mut held = watch.held.lock().unwrap_or_else(PoisonError::into_inner);
            if held.runs.is_empty() {
                held.polling = false;
                return;
            }
            held.runs
                .iter()
                .filter_map(|(id, (clock, slot))| {
                    let clock = clock.upgrade()?;
                    let over = clock.overdue()?;
                    (over >= OVERRUN_GRACE).then(|| Some((id.clone(), clock, slot.upgrade()?))).flatten()
                })
                .collect()
        };
        let Some(shared) = shared.upgrade() else {
            watch.held.lock().unwrap_or_else(PoisonError::into_inner).polling = false;
            return;
        };
        for (run_id, clock, slot) in overdue {
            let over = clock.overdue().unwrap_or(OVERRUN_GRACE);
            if slot.answer_without_vm(|started| left_behind(&shared, &run_id, &clock, over, started)) {
                tracing::info!(
                    "run {run_id}: {:.1} s past its deadline and still in JavaScript QuickJS does not \
                     interrupt; answered without its VM",
                    over.as_secs_f64()
                );
            }
        }
    }
}

/// The receipt of run `run_id`, `over` past its deadline, that the host
/// answers without waiting on its VM; `started`: the run started on a VM
/// thread (else it waited for one held by other such programs).
fn left_behind(shared: &Shared, run_id: &str, clock: &RunClock, over: Duration, started: bool) -> Receipt {
    let deadline = format!(
        "the run passed its deadline of {} ms ({})",
        shared.limits.deadline.as_millis(),
        codemode_base::limit_settings::setting("deadline")
    );
    let message = if started {
        format!(
            "{deadline} and had not stopped {:.0} s later, inside work QuickJS does not interrupt (a loop of \
             slow built-ins, such as sorting a large typed array): it was ended without its VM. Its calls are not \
             listed here (`codemode runs show {run_id}` lists those its journal holds). Do less work between tool \
             calls, or raise the deadline",
            over.as_secs_f64()
        )
    } else {
        format!(
            "{deadline} before it started: it waited for a VM thread, and every one was held by programs past \
             their own deadlines that QuickJS had not interrupted yet (loops of slow built-ins). Nothing of it \
             ran; run it again"
        )
    };
    let mut receipt = super::early_receipt(shared, run_id, clock, RunError::new(ErrorKind::Timeout, message));
    receipt.status = RunStatus::TimedOut;
    receipt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::ledger::ReceiptParts;
    use crate::receipt::{Ledger, RunStatus};

    fn receipt(status: RunStatus) -> Receipt {
        Ledger::new(0, 0).into_receipt(ReceiptParts {
            run_id: "run-x".to_owned(),
            status,
            value: serde_json::Value::Null,
            value_truncated: None,
            error: None,
            catalog_sha256: String::new(),
            elapsed_ms: 0.0,
            approval_wait_ms: 0.0,
            warnings: Vec::new(),
        })
    }

    #[test]
    fn a_run_answered_by_the_watch_holds_its_thread_until_its_vm_ends() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = oneshot::channel();
        let answer = Answer::new(tx);
        answer.started_on(Some(thread.clone()));
        assert_eq!(thread.load(Ordering::Relaxed), 0, "a run going is not stalled");
        assert!(answer.answer_without_vm(|started| {
            assert!(started, "told the run started");
            receipt(RunStatus::TimedOut)
        }));
        assert_eq!(thread.load(Ordering::Relaxed), 1);
        assert!(!answer.answer_without_vm(|_| receipt(RunStatus::TimedOut)), "answered once");
        assert_eq!(thread.load(Ordering::Relaxed), 1, "counted once");
        answer.send(receipt(RunStatus::Completed));
        assert_eq!(thread.load(Ordering::Relaxed), 0, "the VM ended: the thread is free");
        assert_eq!(rx.try_recv().unwrap().status, RunStatus::TimedOut, "the first answer is the one sent");
    }

    #[test]
    fn a_run_answered_before_its_thread_took_it_holds_the_thread_once_it_starts() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = oneshot::channel();
        let answer = Answer::new(tx);
        assert!(answer.answer_without_vm(|started| {
            assert!(!started, "told the run never started");
            receipt(RunStatus::TimedOut)
        }));
        assert_eq!(thread.load(Ordering::Relaxed), 0, "no thread yet");
        answer.started_on(Some(thread.clone()));
        assert_eq!(thread.load(Ordering::Relaxed), 1);
        answer.send(receipt(RunStatus::TimedOut));
        assert_eq!(thread.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_run_its_vm_answered_is_not_answered_again_and_holds_nothing() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = oneshot::channel();
        let answer = Answer::new(tx);
        answer.started_on(Some(thread.clone()));
        answer.send(receipt(RunStatus::Completed));
        assert!(!answer.answer_without_vm(|_| receipt(RunStatus::TimedOut)));
        assert_eq!(thread.load(Ordering::Relaxed), 0);
        assert_eq!(rx.try_recv().unwrap().status, RunStatus::Completed);
    }
}
