//! The run clock: deadline, pauses and cancellation of one run.
//!
//! The deadline counts the run's active time. The clock stops only while
//! the run does nothing but wait on people: the run loop is idle (no
//! JavaScript runs) and every call still running waits for its approval
//! or for an answer to a question its tool asked (an elicitation). So
//! JavaScript that runs while an approval is pending (a busy loop next to
//! the call, code after an un-awaited call) and other calls that keep
//! running count against the deadline; a program that only waits for its
//! approval does not. A host may also stop the clock outright
//! ([`RunClock::pause`], `Run::pause_clock`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Shared between the VM (which checks it from the interrupt handler and
/// waits on it) and the host (which pauses or cancels).
#[derive(Debug)]
pub(crate) struct RunClock {
    start: Instant,
    /// The deadline as nanoseconds of active time since `start` (see
    /// [`RunClock::allow_from_now`]).
    deadline_ns: AtomicU64,
    /// Nanoseconds after `start` at which the run expires; `u64::MAX` while
    /// stopped. Read by the interrupt handler without locking.
    expires_ns: AtomicU64,
    cancelled: AtomicBool,
    /// Nanoseconds after `start` of the first cancel; `u64::MAX` before.
    cancelled_ns: AtomicU64,
    halted: AtomicBool,
    /// Nanoseconds after `start` of the first halt; `u64::MAX` before.
    halted_ns: AtomicU64,
    /// Why the first halt came (a [`Halt`] as a number).
    halted_why: std::sync::atomic::AtomicU8,
    pauses: Mutex<Pauses>,
    changed: Notify,
    /// How the gate decided the calls that went through its later steps
    /// (hooks, approval) and were let run, by seq: the run loop learns a
    /// call's decision only when the call ends, so a run that stops
    /// meanwhile reads it here.
    decided: Mutex<Vec<(u64, crate::receipt::Decision)>>,
    /// The calls waiting for the slots of their tool's or server's limits
    /// before their first attempt, by seq: a run that stops meanwhile
    /// records them as never started.
    waiting_for_slots: Mutex<Vec<u64>>,
    /// The run's calls running on the tool runtime (the VM's
    /// `InFlight`): what the overrun watch aborts when it answers the run
    /// without its VM (engine/overrun_watch.rs).
    running_calls: RunningCalls,
    /// Set once a resumed run went past its journal: a call was gated or
    /// started live. Until then, a resume that stops (by its VM, or
    /// answered without it by the overrun watch) leaves the run paused.
    live: AtomicBool,
}

/// The calls of a run running on the tool runtime, by task: the call's seq
/// and what aborts it. Shared by the VM's `InFlight` and the run's clock.
pub(crate) type RunningCalls =
    std::sync::Arc<Mutex<std::collections::HashMap<tokio::task::Id, (u64, tokio::task::AbortHandle)>>>;

/// Why a run was told to stop ([`RunClock::overdue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overdue {
    Deadline,
    Cancelled,
    /// The run stopped itself ([`RunClock::halt`]), for this reason.
    Halted(Halt),
}

/// Why a run stopped itself ([`RunClock::halt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Halt {
    /// A run limit was reached (`--max-calls`).
    Limit = 0,
    /// A resume's replay took another path.
    Divergence = 1,
    /// Making a built-in ran out of memory.
    Memory = 2,
}

/// What stops the clock, and the time it spent stopped.
#[derive(Debug, Default)]
struct Pauses {
    /// Pauses held by the host ([`RunClock::pause`]); they nest.
    held: u32,
    /// Calls waiting for their approval now, by seq.
    approvals: Vec<u64>,
    /// Calls whose approver answered (allowed or denied), by seq: told
    /// before their wait ended, under the same lock, so a call put to an
    /// approver is always in one list or the other.
    answered: Vec<u64>,
    /// Calls whose tool waits for an answer to a question now, by seq (a
    /// seq once per question).
    questions: Vec<u64>,
    /// While the run loop waits on calls: how many are running. `None`
    /// while JavaScript or the run loop itself works.
    idle_on: Option<usize>,
    since: Option<Instant>,
    total: Duration,
}

impl Pauses {
    /// Whether the clock is stopped: held by the host, or the run loop is
    /// idle and every running call waits on a person.
    fn stopped(&self) -> bool {
        if self.held > 0 {
            return true;
        }
        let Some(running) = self.idle_on else { return false };
        let mut waiting: Vec<u64> = self.approvals.iter().chain(&self.questions).copied().collect();
        waiting.sort_unstable();
        waiting.dedup();
        !waiting.is_empty() && waiting.len() >= running
    }
}

impl RunClock {
    pub(crate) fn new(deadline: Duration) -> Self {
        RunClock {
            start: Instant::now(),
            deadline_ns: AtomicU64::new(nanos(deadline)),
            expires_ns: AtomicU64::new(nanos(deadline)),
            cancelled: AtomicBool::new(false),
            cancelled_ns: AtomicU64::new(u64::MAX),
            halted: AtomicBool::new(false),
            halted_ns: AtomicU64::new(u64::MAX),
            halted_why: std::sync::atomic::AtomicU8::new(Halt::Limit as u8),
            pauses: Mutex::new(Pauses::default()),
            changed: Notify::new(),
            decided: Mutex::new(Vec::new()),
            waiting_for_slots: Mutex::new(Vec::new()),
            running_calls: RunningCalls::default(),
            live: AtomicBool::new(false),
        }
    }

    /// Marks a resumed run as past its journal ([`RunClock::is_live`]).
    pub(crate) fn go_live(&self) {
        self.live.store(true, Ordering::Relaxed);
    }

    /// Whether a resumed run went past its journal: a call was gated or
    /// started live (a new run's value means nothing).
    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }

    /// Whether the run is past its deadline or cancelled. Cheap: called by the
    /// JS interrupt handler.
    pub(crate) fn should_stop(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.halted.load(Ordering::Relaxed) || self.expired()
    }

    /// Stops the run from the inside (a run limit was reached).
    pub(crate) fn halt(&self, why: Halt) {
        let now = nanos(self.start.elapsed());
        if self.halted_ns.compare_exchange(u64::MAX, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.halted_why.store(why as u8, Ordering::Relaxed);
        }
        self.halted.store(true, Ordering::Relaxed);
    }

    /// Whether the run is past its deadline (never while stopped).
    pub(crate) fn expired(&self) -> bool {
        nanos(self.start.elapsed()) >= self.expires_ns.load(Ordering::Relaxed)
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Cancels the run; the VM stops at its next check.
    pub(crate) fn cancel(&self) {
        let now = nanos(self.start.elapsed());
        let _ = self.cancelled_ns.compare_exchange(u64::MAX, now, Ordering::Relaxed, Ordering::Relaxed);
        self.cancelled.store(true, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// The run's calls running on the tool runtime ([`RunningCalls`]).
    pub(crate) fn running_calls(&self) -> RunningCalls {
        self.running_calls.clone()
    }

    /// Aborts every call of the run running on the tool runtime (their
    /// tasks end as if cancelled by the run: the VM, if it comes back,
    /// reads them as calls it cancelled).
    pub(crate) fn abort_running_calls(&self) {
        let mut running = self.running_calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, (_, handle)) in running.drain() {
            handle.abort();
        }
    }

    /// Time left before the deadline, or `None` while stopped.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        let expires = self.expires_ns.load(Ordering::Relaxed);
        if expires == u64::MAX {
            return None;
        }
        Some(Duration::from_nanos(expires.saturating_sub(nanos(self.start.elapsed()))))
    }

    /// How long ago the run was told to stop, and why: past its deadline
    /// (while the clock runs), cancelled, or halted by a run limit,
    /// whichever came first; `None` while none.
    pub(crate) fn overdue(&self) -> Option<(Duration, Overdue)> {
        let now = nanos(self.start.elapsed());
        let (since, why) = [
            (self.cancelled_ns.load(Ordering::Relaxed), Overdue::Cancelled),
            (self.halted_ns.load(Ordering::Relaxed), Overdue::Halted(self.halted_why())),
            (self.expires_ns.load(Ordering::Relaxed), Overdue::Deadline),
        ]
        .into_iter()
        .min_by_key(|(since, _)| *since)
        .unwrap_or((u64::MAX, Overdue::Deadline));
        (since != u64::MAX && now > since).then(|| (Duration::from_nanos(now - since), why))
    }

    /// Why the run stopped itself, once it has.
    fn halted_why(&self) -> Halt {
        match self.halted_why.load(Ordering::Relaxed) {
            1 => Halt::Divergence,
            2 => Halt::Memory,
            _ => Halt::Limit,
        }
    }

    /// Resolves when the clock stops, starts again or is cancelled.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Resolves when the time left now ([`RunClock::remaining`]) has
    /// passed or the clock [`changed`](RunClock::changed): then look at
    /// [`RunClock::should_stop`] again.
    pub(crate) async fn deadline_or_change(&self) {
        let remaining = self.remaining();
        let sleep = async {
            match remaining {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.changed() => {}
            () = sleep => {}
        }
    }

    /// Changes what stops the clock with `change`, then stops or starts the
    /// clock to match and, if it did and `wake`, wakes the run loop.
    fn update(&self, wake: bool, change: impl FnOnce(&mut Pauses)) {
        let mut p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        let was = p.since.is_some();
        change(&mut p);
        let now = p.stopped();
        if now && !was {
            p.since = Some(Instant::now());
            self.expires_ns.store(u64::MAX, Ordering::Relaxed);
        } else if !now && was {
            if let Some(since) = p.since.take() {
                p.total += since.elapsed();
            }
            let deadline = Duration::from_nanos(self.deadline_ns.load(Ordering::Relaxed));
            self.expires_ns.store(nanos(deadline + p.total), Ordering::Relaxed);
        }
        drop(p);
        if wake && now != was {
            self.changed.notify_one();
        }
    }

    /// Stops the deadline clock until every such pause is released,
    /// whatever the run does meanwhile (a host's pause). Pauses nest.
    pub(crate) fn pause(&self) {
        self.update(true, |p| p.held += 1);
    }

    /// Releases one [`RunClock::pause`].
    pub(crate) fn resume(&self) {
        self.update(true, |p| p.held = p.held.saturating_sub(1));
    }

    /// Call `seq` starts (`true`) or stops (`false`) waiting for an answer
    /// to a question its tool asked (an elicitation).
    pub(crate) fn asking(&self, seq: u64, asking: bool) {
        self.update(true, |p| {
            if asking {
                p.questions.push(seq);
            } else if let Some(i) = p.questions.iter().position(|&s| s == seq) {
                p.questions.swap_remove(i);
            }
        });
    }

    /// The run loop waits on `running` calls (`Some`) or works (`None`):
    /// see the module's doc for when the clock stops. The run loop is not
    /// woken by its own change.
    fn set_idle(&self, running: Option<usize>) {
        self.update(false, |p| p.idle_on = running);
    }

    /// Moves the deadline so that `left` of active time remains from now
    /// (a resume, once its replay has caught up).
    pub(crate) fn allow_from_now(&self, left: Duration) {
        let p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        let paused = p.total + p.since.map_or(Duration::ZERO, |s| s.elapsed());
        let active = self.start.elapsed().saturating_sub(paused);
        let deadline = active + left;
        self.deadline_ns.store(nanos(deadline), Ordering::Relaxed);
        if p.since.is_none() {
            self.expires_ns.store(nanos(deadline + p.total), Ordering::Relaxed);
        }
        drop(p);
        self.changed.notify_one();
    }

    /// Total time the clock was stopped so far.
    pub(crate) fn paused_total(&self) -> Duration {
        let p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        p.total + p.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Wall time since the run started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The calls waiting for their approval now, by seq.
    pub(crate) fn awaiting_approval(&self) -> Vec<u64> {
        self.pauses.lock().unwrap_or_else(|p| p.into_inner()).approvals.clone()
    }

    /// The calls put to an approver: waiting for their approval now, or
    /// answered (see [`RunClock::awaiting_approval`]), by seq. One read
    /// under one lock: a call that leaves the wait is answered first.
    pub(crate) fn put_to_approver(&self) -> Vec<u64> {
        let p = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
        p.approvals.iter().chain(&p.answered).copied().collect()
    }

    /// The gate's later steps let call `seq` run with `decision` (`auto`
    /// or `approved`).
    pub(crate) fn decided(&self, seq: u64, decision: crate::receipt::Decision) {
        self.decided.lock().unwrap_or_else(|p| p.into_inner()).push((seq, decision));
    }

    /// The decisions of [`RunClock::decided`], by seq.
    pub(crate) fn decisions(&self) -> Vec<(u64, crate::receipt::Decision)> {
        self.decided.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Call `seq` waits (`true`) or no longer waits for the slots of its
    /// limits before its first attempt.
    pub(crate) fn waiting_for_slots(&self, seq: u64, waiting: bool) {
        let mut list = self.waiting_for_slots.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|&s| s != seq);
        if waiting {
            list.push(seq);
        }
    }

    /// The calls of [`RunClock::waiting_for_slots`] waiting now, by seq.
    pub(crate) fn slot_waits(&self) -> Vec<u64> {
        self.waiting_for_slots.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The decision [`RunClock::decided`] recorded last for call `seq`.
    pub(crate) fn decision_of(&self, seq: u64) -> Option<crate::receipt::Decision> {
        let decided = self.decided.lock().unwrap_or_else(|p| p.into_inner());
        decided.iter().rev().find(|(s, _)| *s == seq).map(|(_, d)| *d)
    }
}

impl crate::gate::later::ApprovalClock for RunClock {
    fn awaiting(&self, seq: u64, waiting: bool) {
        self.update(true, |p| {
            if waiting {
                p.approvals.push(seq);
            } else {
                p.approvals.retain(|&s| s != seq);
            }
        });
    }

    fn answered(&self, seq: u64) {
        let mut p = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
        p.answered.push(seq);
    }

    fn told_to_stop(&self) -> bool {
        self.should_stop()
    }

    fn time_left(&self) -> Option<Duration> {
        self.remaining()
    }
}

/// Marks the run loop idle, waiting on calls, while alive.
pub(crate) struct Idle<'a>(&'a RunClock);

impl<'a> Idle<'a> {
    /// The run loop waits on `running` calls until the guard drops.
    pub(crate) fn on(clock: &'a RunClock, running: usize) -> Self {
        clock.set_idle(Some(running));
        Idle(clock)
    }
}

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        self.0.set_idle(None);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::later::ApprovalClock as _;

    #[test]
    fn a_run_is_overdue_from_its_deadline_or_its_cancel_whichever_came_first() {
        let clock = RunClock::new(Duration::from_millis(30));
        assert_eq!(clock.overdue(), None);
        clock.cancel();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(clock.overdue(), Some((_, Overdue::Cancelled))), "{:?}", clock.overdue());
        let late = RunClock::new(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(10));
        late.cancel();
        let (over, why) = late.overdue().unwrap();
        assert_eq!(why, Overdue::Deadline);
        assert!(over >= Duration::from_millis(9), "{over:?}");
        // Stopped by itself, with why.
        let halted = RunClock::new(Duration::from_secs(60));
        halted.halt(Halt::Memory);
        halted.halt(Halt::Limit);
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            matches!(halted.overdue(), Some((_, Overdue::Halted(Halt::Memory)))),
            "the first halt says why"
        );
        // Not while the clock is stopped (a wait on people alone).
        let paused = RunClock::new(Duration::from_millis(1));
        paused.pause();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(paused.overdue(), None);
    }

    #[test]
    fn pauses_stop_the_clock_and_nest() {
        let clock = RunClock::new(Duration::from_millis(20));
        clock.pause();
        clock.pause();
        std::thread::sleep(Duration::from_millis(30));
        assert!(!clock.expired());
        assert_eq!(clock.remaining(), None);
        clock.resume();
        assert!(!clock.expired(), "still paused once");
        clock.resume();
        assert!(!clock.expired(), "the paused time does not count");
        assert!(clock.paused_total() >= Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(25));
        assert!(clock.expired());
    }

    #[test]
    fn an_approval_stops_the_clock_only_while_the_run_waits_on_people_alone() {
        let clock = RunClock::new(Duration::from_secs(60));
        clock.awaiting(1, true);
        assert!(clock.remaining().is_some(), "JavaScript runs: the clock runs");
        {
            let _idle = Idle::on(&clock, 2);
            assert!(clock.remaining().is_some(), "another call runs: the clock runs");
            clock.asking(2, true);
            assert_eq!(clock.remaining(), None, "both calls wait on a person");
            clock.asking(2, false);
            assert!(clock.remaining().is_some());
        }
        {
            let _idle = Idle::on(&clock, 1);
            assert_eq!(clock.remaining(), None, "the run waits only on the approval");
        }
        assert!(clock.remaining().is_some(), "the run loop works again: the clock runs");
        let _idle = Idle::on(&clock, 1);
        clock.awaiting(1, false);
        assert!(clock.remaining().is_some(), "the approval came: the clock runs");
        assert_eq!(clock.awaiting_approval(), Vec::<u64>::new());
    }

    #[test]
    fn a_call_put_to_an_approver_stays_so_once_answered() {
        let clock = RunClock::new(Duration::from_secs(60));
        clock.awaiting(1, true);
        clock.awaiting(2, true);
        assert_eq!(clock.put_to_approver(), [1, 2]);
        clock.answered(1);
        clock.awaiting(1, false);
        // Call 2's wait ended without an answer (its approval was dropped).
        clock.awaiting(2, false);
        assert_eq!(clock.awaiting_approval(), Vec::<u64>::new());
        assert_eq!(clock.put_to_approver(), [1], "answered, its decision not recorded yet");
    }

    #[test]
    fn cancel_stops() {
        let clock = RunClock::new(Duration::from_secs(60));
        assert!(!clock.should_stop());
        clock.cancel();
        assert!(clock.should_stop() && clock.is_cancelled());
    }
}
