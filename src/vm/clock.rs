//! The run clock: deadline, pauses and cancellation of one run.

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
    /// paused. Read by the interrupt handler without locking.
    expires_ns: AtomicU64,
    cancelled: AtomicBool,
    halted: AtomicBool,
    pauses: Mutex<Pauses>,
    changed: Notify,
    /// Calls waiting for their approval now (by seq).
    awaiting: Mutex<Vec<u64>>,
}

#[derive(Debug, Default)]
struct Pauses {
    depth: u32,
    since: Option<Instant>,
    total: Duration,
}

impl RunClock {
    pub(crate) fn new(deadline: Duration) -> Self {
        RunClock {
            start: Instant::now(),
            deadline_ns: AtomicU64::new(nanos(deadline)),
            expires_ns: AtomicU64::new(nanos(deadline)),
            cancelled: AtomicBool::new(false),
            halted: AtomicBool::new(false),
            pauses: Mutex::new(Pauses::default()),
            changed: Notify::new(),
            awaiting: Mutex::new(Vec::new()),
        }
    }

    /// Whether the run is past its deadline or cancelled. Cheap: called by the
    /// JS interrupt handler.
    pub(crate) fn should_stop(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.halted.load(Ordering::Relaxed) || self.expired()
    }

    /// Stops the run from the inside (a run limit was reached).
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
    }

    /// Whether the run is past its deadline (never while paused).
    pub(crate) fn expired(&self) -> bool {
        nanos(self.start.elapsed()) >= self.expires_ns.load(Ordering::Relaxed)
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Cancels the run; the VM stops at its next check.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// Time left before the deadline, or `None` while paused.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        let expires = self.expires_ns.load(Ordering::Relaxed);
        if expires == u64::MAX {
            return None;
        }
        Some(Duration::from_nanos(expires.saturating_sub(nanos(self.start.elapsed()))))
    }

    /// Resolves when the clock is paused, resumed or cancelled.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Stops the deadline clock until every pause is released. Pauses nest.
    pub(crate) fn pause(&self) {
        let mut p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        if p.depth == 0 {
            p.since = Some(Instant::now());
            self.expires_ns.store(u64::MAX, Ordering::Relaxed);
        }
        p.depth += 1;
        drop(p);
        self.changed.notify_one();
    }

    /// Releases one pause; the last one restarts the clock where it stopped.
    pub(crate) fn resume(&self) {
        let mut p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        if p.depth == 0 {
            return;
        }
        p.depth -= 1;
        if p.depth == 0 {
            if let Some(since) = p.since.take() {
                p.total += since.elapsed();
            }
            let deadline = Duration::from_nanos(self.deadline_ns.load(Ordering::Relaxed));
            self.expires_ns.store(nanos(deadline + p.total), Ordering::Relaxed);
        }
        drop(p);
        self.changed.notify_one();
    }

    /// Moves the deadline so that `left` of active time remains from now
    /// (a resume, once its replay has caught up).
    pub(crate) fn allow_from_now(&self, left: Duration) {
        let p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        let paused = p.total + p.since.map_or(Duration::ZERO, |s| s.elapsed());
        let active = self.start.elapsed().saturating_sub(paused);
        let deadline = active + left;
        self.deadline_ns.store(nanos(deadline), Ordering::Relaxed);
        if p.depth == 0 {
            self.expires_ns.store(nanos(deadline + p.total), Ordering::Relaxed);
        }
        drop(p);
        self.changed.notify_one();
    }

    /// Total time spent paused so far.
    pub(crate) fn paused_total(&self) -> Duration {
        let p = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        p.total + p.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Wall time since the run started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

impl crate::gate::later::ApprovalClock for RunClock {
    fn pause(&self) {
        RunClock::pause(self);
    }

    fn resume(&self) {
        RunClock::resume(self);
    }

    fn awaiting(&self, seq: u64, waiting: bool) {
        let mut awaiting = self.awaiting.lock().unwrap_or_else(|p| p.into_inner());
        if waiting {
            awaiting.push(seq);
        } else {
            awaiting.retain(|&s| s != seq);
        }
    }
}

impl RunClock {
    /// The calls waiting for their approval now, by seq.
    pub(crate) fn awaiting_approval(&self) -> Vec<u64> {
        self.awaiting.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn cancel_stops() {
        let clock = RunClock::new(Duration::from_secs(60));
        assert!(!clock.should_stop());
        clock.cancel();
        assert!(clock.should_stop() && clock.is_cancelled());
    }
}
