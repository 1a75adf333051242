//! Stopping servers nobody uses ([`PoolOptions::idle_stop`]): each tool
//! call holds a [`InUse`] mark on its server while it runs; a sweep, started
//! with the pool's first server, stops every running server with no call
//! in flight and none ended for the idle time. A stopped server is
//! `NotStarted` again, so its next call starts it (asking the connect check
//! again) without counting a failure.
//!
//! [`PoolOptions::idle_stop`]: super::PoolOptions::idle_stop

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::{Inner, McpPool, ServerState, Slot, State};

/// How a server is used: calls in flight, and when it was last used (a
/// call's end, or its start).
#[derive(Debug)]
pub(crate) struct Usage {
    calls: usize,
    last: Instant,
}

impl Default for Usage {
    fn default() -> Self {
        Usage { calls: 0, last: Instant::now() }
    }
}

/// A tool call's mark on its server: taken before the call looks for the
/// connection (so a sweep never stops a server a call is about to use),
/// given back when the call ends.
pub(crate) struct InUse(Arc<Slot>);

impl InUse {
    pub(crate) fn new(slot: &Arc<Slot>) -> InUse {
        slot.usage.lock().expect("usage lock").calls += 1;
        InUse(slot.clone())
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut usage = self.0.usage.lock().expect("usage lock");
        usage.calls -= 1;
        usage.last = Instant::now();
    }
}

/// Notes that `slot`'s server just started: its idle time counts from now.
pub(super) fn started(slot: &Slot) {
    slot.usage.lock().expect("usage lock").last = Instant::now();
}

/// How often the sweep looks for idle servers: a quarter of the idle time,
/// within 50 ms and 30 s.
fn period(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
}

impl McpPool {
    /// Starts the idle sweep once, when [`PoolOptions::idle_stop`] is set;
    /// it ends with the pool (it holds it weakly) or at its shutdown.
    ///
    /// [`PoolOptions::idle_stop`]: super::PoolOptions::idle_stop
    pub(super) fn sweep_idle(&self) {
        let Some(idle) = self.inner.options.idle_stop else { return };
        if self.inner.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool: Weak<Inner> = self.downgrade();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period(idle)).await;
                let Some(pool) = McpPool::upgrade(&pool) else { return };
                if pool.inner.shut.load(Ordering::Acquire) {
                    return;
                }
                pool.stop_idle(idle).await;
            }
        });
    }

    /// Stops every running server with no call in flight and none for
    /// `idle`; a server being started (its state locked) is left alone.
    /// Returns how many were stopped.
    pub(crate) async fn stop_idle(&self, idle: Duration) -> usize {
        let mut stopped = 0;
        for slot in self.inner.slots.values() {
            let Ok(mut state) = slot.state.try_lock() else { continue };
            let unused = {
                let usage = slot.usage.lock().expect("usage lock");
                usage.calls == 0 && usage.last.elapsed() >= idle
            };
            if !unused || !matches!(*state, State::Up(_)) {
                continue;
            }
            let State::Up(connection) = std::mem::replace(&mut *state, State::Idle) else { continue };
            *slot.status.lock().expect("status lock") = ServerState::NotStarted;
            drop(state);
            tracing::debug!(server = %slot.config.name, "stopping an MCP server idle for {idle:?}");
            connection.stop().await;
            stopped += 1;
        }
        stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_looks_four_times_per_idle_time_within_bounds() {
        assert_eq!(period(Duration::from_secs(60)), Duration::from_secs(15));
        assert_eq!(period(Duration::from_millis(10)), Duration::from_millis(50));
        assert_eq!(period(Duration::from_secs(3600)), Duration::from_secs(30));
    }
}
