//! What holds a run the host told to stop, not QuickJS: a run still going
//! [`OVERRUN_GRACE`] after its deadline passed, or after it was cancelled,
//! is answered without its VM.
//!
//! QuickJS stops a program at its next interrupt check, every 10,000
//! branches and calls. Between two checks a loop of slow built-ins (a sort
//! of a large typed array, `indexOf` in a long string, `JSON.stringify` of
//! a large value) can run for minutes or hours, and the VM cannot be made
//! to look sooner. So the host does not wait on it: while an engine runs
//! programs, one task per engine looks every [`POLL`] at the runs told to
//! stop. One told a poll ago or more holds its VM thread (the VM pool
//! sends new runs elsewhere while it can); one told [`OVERRUN_GRACE`] ago
//! is answered (status `timed_out` or `cancelled`, no calls listed: they
//! are in its journal) and its calls still running on the tool runtime are
//! aborted, as the VM's own end would. Its journal is ended with the
//! receipt's state before the receipt goes out, so a process that exits
//! on it (`codemode run`) leaves a run that ended, not one to recover
//! into the same stuck loop. The VM is left to reach its next
//! check on its own thread; a call it makes meanwhile is refused, the run
//! being past its deadline or cancelled, and its own receipt goes nowhere.
//! docs/SECURITY.md, "The deadline holds for the host, not for QuickJS".

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::journal::RunState;
use crate::journal::durable::DurableLog;
use crate::receipt::{ErrorKind, Receipt, RunError, RunStatus};
use crate::vm::clock::{Halt, Overdue, RunClock};

use super::Shared;

/// How long past its deadline a run may go on before the host answers
/// without it: long enough for a run told to stop to end its calls (a
/// bash command's kill grace is 2 s) and write its journal.
pub const OVERRUN_GRACE: Duration = Duration::from_secs(10);

/// How often the watch looks at the runs going.
const POLL: Duration = Duration::from_secs(1);

/// How long the watch waits for a run's journal to end before it sends
/// the run's receipt anyway (with a warning that says so).
const JOURNAL_END_WAIT: Duration = Duration::from_secs(5);

/// Where a run's receipt goes: to whoever answers first, the run's VM or
/// the watch. Shared by the run's job and (weakly) the watch.
pub(crate) type ReceiptSlot = Arc<Answer>;

/// A run's answer, and the VM thread it holds while it goes on unanswered
/// by its VM.
pub(crate) struct Answer(Mutex<AnswerState>);

struct AnswerState {
    sender: Option<oneshot::Sender<Receipt>>,
    /// The run's journal, which the watch ends when it answers.
    journal: Option<JournalEnd>,
    /// The stalled count of the VM thread running the run, once it runs.
    thread: Option<Arc<AtomicUsize>>,
    /// Whether the run counts in `thread`'s stalled count: told to stop
    /// and still going there.
    stalls: bool,
    /// Whether the run's VM has ended (it no longer holds its thread).
    ended: bool,
}

impl Answer {
    /// An answer not given yet, to go to `sender`; `journal`: the run's
    /// journal, if it keeps one.
    pub(crate) fn new(sender: oneshot::Sender<Receipt>, journal: Option<JournalEnd>) -> ReceiptSlot {
        Arc::new(Answer(Mutex::new(AnswerState {
            sender: Some(sender),
            journal,
            thread: None,
            stalls: false,
            ended: false,
        })))
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
        state.ended = true;
        state.journal = None;
        if let Some(tx) = state.sender.take() {
            let _ = tx.send(receipt);
        }
        unstall(&mut state);
    }

    /// The watch's answer: `make`'s receipt (given whether the run has
    /// started on a VM thread), to send once the run's journal is ended,
    /// unless the VM answered first (`None`). The VM's answer is not sent
    /// after it.
    fn answer_without_vm(&self, make: impl FnOnce(bool) -> Receipt, clock: &RunClock) -> Option<Unsent> {
        let mut state = self.state();
        let tx = state.sender.take()?;
        let receipt = make(state.thread.is_some());
        stall(&mut state);
        Some(Unsent { tx, receipt, journal: state.journal.take(), live: clock.is_live() })
    }

    /// Counts the run, told to stop and still going, in its thread's
    /// stalled count (once): new runs go elsewhere while another thread
    /// is free.
    fn hold_thread(&self) {
        stall(&mut self.state());
    }
}

impl Drop for Answer {
    /// A run whose job ended without sending its receipt (its task
    /// panicked) no longer holds its thread either.
    fn drop(&mut self) {
        unstall(self.0.get_mut().unwrap_or_else(PoisonError::into_inner));
    }
}

/// A run's journal as the watch ends it: its writer, and for a resume,
/// what its VM would leave had it stopped in the replay.
pub(crate) struct JournalEnd {
    pub log: DurableLog,
    pub resumed: Option<Replaying>,
}

/// What a resume stopped in its replay, before anything new ran, leaves.
pub(crate) enum Replaying {
    /// A paused run: still paused.
    Paused(StillPaused),
    /// A recovery (its process had died): still interrupted, its journal
    /// not committed.
    Interrupted,
}

impl JournalEnd {
    /// The end of the journal of a run journaled by `journaling`, if it
    /// has a writer to reach.
    pub(crate) fn of(journaling: &crate::vm::journaling::Journaling) -> Option<JournalEnd> {
        let resumed = journaling.replay.as_ref().map(|replay| match journaling.recovering {
            true => Replaying::Interrupted,
            false => Replaying::Paused(StillPaused {
                paused_line: crate::journal::record::tagged_line("paused", &crate::vm::paused_again(replay)),
                pending: replay.pending_calls(),
            }),
        });
        Some(JournalEnd { log: journaling.durable.clone()?, resumed })
    }
}

/// What a resume stopped in its replay, before anything new ran, leaves:
/// the run still paused, as its VM's own stop there does.
pub(crate) struct StillPaused {
    /// The `paused` line written again (no newline).
    pub paused_line: String,
    /// Its pending calls, for the receipt.
    pub pending: Vec<crate::receipt::PendingCall>,
}

/// The watch's answer for a run, before it goes.
struct Unsent {
    tx: oneshot::Sender<Receipt>,
    receipt: Receipt,
    journal: Option<JournalEnd>,
    /// Whether a resumed run had gone past its journal when answered.
    live: bool,
}

impl Unsent {
    /// Ends the run's journal with the receipt's state (a resume still in
    /// its replay: paused, as it was, and the receipt says so), waiting at
    /// most [`JOURNAL_END_WAIT`]; a journal that could not be ended is
    /// named in the receipt's warnings.
    async fn end_journal(&mut self) {
        let Some(JournalEnd { log, resumed }) = self.journal.take() else { return };
        let (state, tail) = match resumed {
            Some(Replaying::Paused(StillPaused { paused_line, pending })) if !self.live => {
                crate::vm::stopped_in_replay(&mut self.receipt, Some(pending), false);
                (RunState::Paused, paused_line + "\n")
            }
            Some(Replaying::Interrupted) if !self.live => {
                crate::vm::stopped_in_replay(&mut self.receipt, None, false);
                return;
            }
            _ => (RunState::of_status(self.receipt.status), String::new()),
        };
        let problem = match tokio::time::timeout(JOURNAL_END_WAIT, log.end_without_vm(state, tail)).await {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("its store did not answer within {} s", JOURNAL_END_WAIT.as_secs()),
        };
        self.receipt.warnings.push(format!(
            "the run's journal could not be ended as {} ({problem}): it may read as interrupted, and \
             `codemode resume` would run the program again",
            state.as_str()
        ));
    }

    /// Sends the receipt.
    fn send(self) {
        let _ = self.tx.send(self.receipt);
    }
}

/// Takes the run out of its thread's stalled count, if [`stall`] put it
/// there.
fn unstall(state: &mut AnswerState) {
    if std::mem::take(&mut state.stalls)
        && let Some(thread) = &state.thread
    {
        thread.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts the run in its thread's stalled count (once), when it has a
/// thread and its VM has not ended.
fn stall(state: &mut AnswerState) {
    if !state.stalls
        && !state.ended
        && let Some(thread) = &state.thread
    {
        thread.fetch_add(1, Ordering::Relaxed);
        state.stalls = true;
    }
}

/// The runs an engine runs now.
#[derive(Default)]
pub(crate) struct OverrunWatch {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// By a key of the watch's own (a library host may give two runs one
    /// id).
    runs: HashMap<u64, Entry>,
    next_key: u64,
}

/// One watched run. The watch holds neither its clock nor its answer: a
/// run whose VM thread dropped them is not kept alive by it.
struct Entry {
    run_id: Arc<str>,
    clock: Weak<RunClock>,
    answer: Weak<Answer>,
}

/// Keeps a run watched while alive (held by the run's job on its VM
/// thread).
pub(crate) struct Watched {
    watch: Arc<OverrunWatch>,
    key: u64,
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut held = self.watch.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.runs.remove(&self.key);
    }
}

impl OverrunWatch {
    /// Starts the poll of `shared`'s watch on its tool runtime, for as
    /// long as the engine lives. Called once, when the engine is built:
    /// then the tool runtime's threads are starting anyway, whereas a
    /// task handed to them from a run's start wakes one in the middle of
    /// it (about 0.35 ms of a `codemode run`, measured).
    pub(crate) fn start(shared: &Arc<Shared>) {
        shared.tools.spawn(poll(shared.overrun_watch.clone(), Arc::downgrade(shared)));
    }

    /// Watches run `run_id` (timed by `clock`, answered through `slot`)
    /// until the guard drops.
    pub(crate) fn watch(
        self: &Arc<Self>,
        run_id: &Arc<str>,
        clock: &Arc<RunClock>,
        slot: &ReceiptSlot,
    ) -> Watched {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let key = held.next_key;
        held.next_key += 1;
        let entry =
            Entry { run_id: run_id.clone(), clock: Arc::downgrade(clock), answer: Arc::downgrade(slot) };
        held.runs.insert(key, entry);
        Watched { watch: self.clone(), key }
    }
}

/// A watched run told to stop, as a poll found it.
struct ToldToStop {
    run_id: Arc<str>,
    clock: Arc<RunClock>,
    answer: ReceiptSlot,
    /// How long ago, and why.
    overdue: (Duration, Overdue),
}

/// Every [`POLL`]: a watched run told to stop (past its deadline,
/// cancelled, or stopped by itself) at least a poll ago holds its VM thread (new runs go
/// elsewhere); one told [`OVERRUN_GRACE`] ago is answered without its VM
/// and its calls still running are aborted. Ends when the engine is gone.
async fn poll(watch: Arc<OverrunWatch>, shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(POLL).await;
        if shared.strong_count() == 0 {
            return;
        }
        let told_to_stop: Vec<ToldToStop> = {
            let held = watch.held.lock().unwrap_or_else(PoisonError::into_inner);
            held.runs
                .values()
                .filter_map(|e| {
                    let clock = e.clock.upgrade()?;
                    let overdue = clock.overdue().filter(|(over, _)| *over >= POLL)?;
                    Some(ToldToStop { run_id: e.run_id.clone(), clock, answer: e.answer.upgrade()?, overdue })
                })
                .collect()
        };
        if told_to_stop.is_empty() {
            continue;
        }
        let Some(shared) = shared.upgrade() else { return };
        for ToldToStop { run_id, clock, answer, overdue: (over, why) } in told_to_stop {
            if over < OVERRUN_GRACE {
                answer.hold_thread();
                continue;
            }
            if let Some(mut unsent) = answer.answer_without_vm(
                |started| left_behind(&shared, &run_id, &clock, (over, why), started),
                &clock,
            ) {
                // Its calls end now, as the VM's end would end them: a
                // call whose approval comes later, or a command still
                // running, does not act after the run was answered.
                clock.abort_running_calls();
                tracing::info!(
                    "run {run_id}: {:.1} s after it was told to stop, still in JavaScript QuickJS does not \
                     interrupt; answered without its VM",
                    over.as_secs_f64()
                );
                tokio::spawn(async move {
                    unsent.end_journal().await;
                    unsent.send();
                });
            }
        }
    }
}

/// The receipt of run `run_id`, told to stop (`why`) `over` ago, that the
/// host answers without waiting on its VM; `started`: the run started on a
/// VM thread (else it waited for one held by other such programs).
fn left_behind(
    shared: &Shared,
    run_id: &str,
    clock: &RunClock,
    (over, why): (Duration, Overdue),
    started: bool,
) -> Receipt {
    let told = match why {
        Overdue::Deadline => format!(
            "the run passed its deadline of {} ms ({})",
            shared.limits.deadline.as_millis(),
            codemode_base::limit_settings::setting("deadline")
        ),
        Overdue::Cancelled => "the run was cancelled".to_owned(),
        Overdue::Halted(Halt::Limit) => "the run reached a run limit (such as --max-calls)".to_owned(),
        Overdue::Halted(Halt::Divergence) => "the run's replay took another path than its journal".to_owned(),
        Overdue::Halted(Halt::Memory) => "the run ran out of memory".to_owned(),
    };
    let message = if started {
        let advice = match why {
            Overdue::Deadline => {
                " If it was this program, do less work between tool calls, or raise the deadline"
            }
            Overdue::Cancelled | Overdue::Halted(_) => "",
        };
        format!(
            "{told} and had not stopped {:.0} s later: its VM thread was inside work QuickJS does not interrupt \
             (a loop of slow built-ins, such as sorting a large typed array, in this program or in another on \
             the same thread), so it was ended without its VM, and its calls still running were ended. Its \
             calls are not listed here (`codemode runs show {run_id}` lists those its journal holds).{advice}",
            over.as_secs_f64()
        )
    } else {
        format!(
            "{told} before it started: it waited for a VM thread held by a program told to stop that QuickJS \
             had not interrupted yet (a loop of slow built-ins). Nothing of it ran, nor will"
        )
    };
    let (kind, status) = match why {
        Overdue::Deadline => (ErrorKind::Timeout, RunStatus::TimedOut),
        Overdue::Cancelled => (ErrorKind::Cancelled, RunStatus::Cancelled),
        Overdue::Halted(Halt::Limit) => (ErrorKind::Limit, RunStatus::Failed),
        Overdue::Halted(Halt::Divergence) => (ErrorKind::Divergence, RunStatus::Failed),
        Overdue::Halted(Halt::Memory) => (ErrorKind::Memory, RunStatus::Failed),
    };
    let mut receipt = super::early_receipt(shared, run_id, clock, RunError::new(kind, message));
    receipt.status = status;
    receipt.approval_wait_ms = crate::receipt::millis(clock.paused_total());
    receipt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::ledger::ReceiptParts;
    use crate::receipt::{Ledger, RunStatus};

    fn clock() -> RunClock {
        RunClock::new(Duration::from_secs(1))
    }

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
        let answer = Answer::new(tx, None);
        answer.started_on(Some(thread.clone()));
        assert_eq!(thread.load(Ordering::Relaxed), 0, "a run going is not stalled");
        answer
            .answer_without_vm(
                |started| {
                    assert!(started, "told the run started");
                    receipt(RunStatus::TimedOut)
                },
                &clock(),
            )
            .expect("the watch answers")
            .send();
        assert_eq!(thread.load(Ordering::Relaxed), 1);
        assert!(
            answer.answer_without_vm(|_| receipt(RunStatus::TimedOut), &clock()).is_none(),
            "answered once"
        );
        assert_eq!(thread.load(Ordering::Relaxed), 1, "counted once");
        answer.send(receipt(RunStatus::Completed));
        assert_eq!(thread.load(Ordering::Relaxed), 0, "the VM ended: the thread is free");
        assert_eq!(rx.try_recv().unwrap().status, RunStatus::TimedOut, "the first answer is the one sent");
    }

    #[test]
    fn a_run_answered_before_its_thread_took_it_holds_the_thread_once_it_starts() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = oneshot::channel();
        let answer = Answer::new(tx, None);
        assert!(
            answer
                .answer_without_vm(
                    |started| {
                        assert!(!started, "told the run never started");
                        receipt(RunStatus::TimedOut)
                    },
                    &clock(),
                )
                .is_some()
        );
        assert_eq!(thread.load(Ordering::Relaxed), 0, "no thread yet");
        answer.started_on(Some(thread.clone()));
        assert_eq!(thread.load(Ordering::Relaxed), 1);
        answer.send(receipt(RunStatus::TimedOut));
        assert_eq!(thread.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_run_whose_vm_ended_is_not_counted_as_holding_its_thread_after() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = oneshot::channel();
        let answer = Answer::new(tx, None);
        answer.started_on(Some(thread.clone()));
        answer.send(receipt(RunStatus::TimedOut));
        // A poll that found the run told to stop just before it ended.
        answer.hold_thread();
        assert_eq!(thread.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_run_whose_job_ended_without_its_receipt_no_longer_holds_its_thread() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = oneshot::channel();
        let answer = Answer::new(tx, None);
        answer.started_on(Some(thread.clone()));
        assert!(answer.answer_without_vm(|_| receipt(RunStatus::TimedOut), &clock()).is_some());
        assert_eq!(thread.load(Ordering::Relaxed), 1);
        // The run's task panicked: its answer is dropped, never sent.
        drop(answer);
        assert_eq!(thread.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_run_its_vm_answered_is_not_answered_again_and_holds_nothing() {
        let thread = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = oneshot::channel();
        let answer = Answer::new(tx, None);
        answer.started_on(Some(thread.clone()));
        answer.send(receipt(RunStatus::Completed));
        assert!(answer.answer_without_vm(|_| receipt(RunStatus::TimedOut), &clock()).is_none());
        assert_eq!(thread.load(Ordering::Relaxed), 0);
        assert_eq!(rx.try_recv().unwrap().status, RunStatus::Completed);
    }
}
