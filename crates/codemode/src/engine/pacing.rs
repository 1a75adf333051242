//! Limits per tool and per MCP server (docs/LIMITS.md, "Limits per server
//! and per tool"): the engine's slots (`max_in_flight`), start spacing
//! (`rate`) and retry policies, shared by every run of the engine.
//!
//! A call of a tool under limits first takes its slots: the tool's
//! (`[tools.NAME]` in the policy), then its MCP server's (the server's
//! entry in the MCP configuration), then waits for its turn by each
//! `rate`, in that order; always the same order, so two calls never hold
//! what the other waits for. Only then does it start, and its timeout
//! with it; the wait is the call's `queued_ms`. A retry gives its slots
//! back while it waits between attempts.
//!
//! The rate is a spacing of starts (GCRA with a burst of one): each start
//! is at least `1 / rate` after the one before, so any one-second window
//! holds at most `rate + 1` starts. A call dropped while it waits for its
//! turn (the run's deadline) leaves its turn unused. Hand-written rather
//! than `governor`: it is a dozen lines on tokio's clock, which the
//! engine's tool runtime drives.
//!
//! Limits are per engine (per process), unless their `scope` is
//! `"global"`: then a call also takes a slot of the limit kept in the
//! journal store ([`SharedLimits`], PostgreSQL), polling for a free one,
//! and reserves its turn there, so `max_in_flight` and `rate` hold across
//! every process sharing the store (batch workers, replicas). An engine
//! whose store cannot keep them refuses a global limit when it is built.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_base::pacing::{CallLimits, RetryPolicy};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::journal::JournalStore;
use crate::journal::shared_limits::{SharedLimits, SharedSlot};

/// The first and the longest wait between two tries for a slot of a
/// global limit held elsewhere.
const SHARED_POLL: (Duration, Duration) = (Duration::from_millis(2), Duration::from_millis(20));

/// The limits of every tool and server that has some, by name.
#[derive(Default)]
pub(crate) struct Pacing {
    /// By catalog tool name (`[tools.NAME]`).
    tools: HashMap<String, Arc<Limiter>>,
    /// By MCP server name.
    servers: HashMap<String, Arc<Limiter>>,
}

impl Pacing {
    /// The limiters of `tools` (catalog name, its `[tools.NAME]` limits)
    /// and `servers` (server name, its entry's limits); empty limits are
    /// left out. Global limits are kept in `store`.
    ///
    /// # Errors
    /// A global limit when `store` cannot keep shared limits (none, or
    /// the local store): the message names the tool or server.
    pub(crate) fn new<'a>(
        tools: impl IntoIterator<Item = (&'a str, &'a CallLimits)>,
        servers: impl IntoIterator<Item = (&'a str, CallLimits)>,
        store: Option<&Arc<dyn JournalStore>>,
    ) -> Result<Pacing, String> {
        let shared = store.filter(|s| s.shared_limits().is_some());
        let keep = |kind: &str,
                    name: &str,
                    limits: &CallLimits|
         -> Result<Option<(String, Arc<Limiter>)>, String> {
            if limits.is_empty() {
                return Ok(None);
            }
            let global = match (limits.global, shared) {
                (false, _) => None,
                (true, Some(store)) => Some(Global {
                    store: store.clone(),
                    key: format!("{kind}:{name}"),
                    released: Arc::default(),
                }),
                (true, None) => {
                    let place = if kind == "tool" {
                        format!("[tools.{name}]")
                    } else {
                        format!("MCP server `{name}`")
                    };
                    return Err(format!(
                        "{place} has `scope = \"global\"`: its limits are kept in the PostgreSQL journal store, \
                         shared by every process using it, and this engine's journal is {}; give --journal \
                         postgres://... (or [journal] url), or remove `scope` to keep the limits per process",
                        store.map_or_else(|| "off".to_owned(), |s| s.describe())
                    ));
                }
            };
            Ok(Some((name.to_owned(), Arc::new(Limiter::new(limits, global)))))
        };
        let mut pacing = Pacing::default();
        for (name, limits) in tools {
            pacing.tools.extend(keep("tool", name, limits)?);
        }
        for (name, limits) in servers {
            pacing.servers.extend(keep("server", name, &limits)?);
        }
        Ok(pacing)
    }

    /// The limits a call of `tool` (of MCP `server`, when it is one's)
    /// goes through, or `None` when neither has any.
    pub(crate) fn of(&self, tool: &str, server: Option<&str>) -> Option<Pace> {
        let tool = self.tools.get(tool).cloned();
        let server = server.and_then(|s| self.servers.get(s)).cloned();
        if tool.is_none() && server.is_none() {
            return None;
        }
        // The tool's own retry policy wins over its server's.
        let retry = tool.as_ref().and_then(|t| t.retry).or_else(|| server.as_ref().and_then(|s| s.retry));
        Some(Pace { tool, server, retry })
    }
}

/// One tool's or server's limits.
struct Limiter {
    /// Slots for calls at once (`max_in_flight`), and how many.
    slots: Option<(Arc<Semaphore>, usize)>,
    /// Starts spaced by `rate`.
    spacing: Option<Spacing>,
    retry: Option<RetryPolicy>,
    /// Where a global limit is kept, and its name there.
    global: Option<Global>,
}

/// A global limit: kept in `store` under `key` (`tool:NAME`,
/// `server:NAME`).
struct Global {
    store: Arc<dyn JournalStore>,
    key: String,
    /// When this process last let a slot of it go.
    released: Arc<Mutex<Option<Instant>>>,
}

/// A slot of a global limit a call holds; notes when it is let go.
struct GlobalSlot {
    _slot: Box<dyn SharedSlot>,
    released: Arc<Mutex<Option<Instant>>>,
}

impl Drop for GlobalSlot {
    fn drop(&mut self) {
        *self.released.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }
}

impl Global {
    fn shared(&self) -> &dyn SharedLimits {
        self.store.shared_limits().expect("checked by Pacing::new")
    }
}

/// What a call holds of one limiter while it runs: the global slot first,
/// so it is let go (and noted) before this process's own slot frees the
/// next local waiter.
type Held = (Option<GlobalSlot>, Option<OwnedSemaphorePermit>);

impl Limiter {
    fn new(limits: &CallLimits, global: Option<Global>) -> Limiter {
        Limiter {
            slots: limits.max_in_flight.map(|n| (Arc::new(Semaphore::new(n)), n)),
            spacing: limits.rate.map(|r| Spacing { interval: r.interval(), next: Mutex::new(None) }),
            retry: limits.retry,
            global,
        }
    }

    /// Waits for a slot, when there are slots: this process's, then (for
    /// a global limit) one of the store's.
    async fn slot(&self) -> Result<Held, String> {
        let Some((semaphore, max)) = &self.slots else { return Ok((None, None)) };
        // Never closed: a closed semaphore gives no slot, and no wait.
        let local = semaphore.clone().acquire_owned().await.ok();
        let Some(global) = &self.global else { return Ok((None, local)) };
        // Fair to other processes: a slot this process let go is not taken
        // again by it before the others, asking at most every
        // `SHARED_POLL.1`, had their turn to ask (else one busy process
        // keeps a cap of one to itself).
        let polite = *global.released.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = polite.map(|t| t + SHARED_POLL.1).filter(|at| *at > Instant::now()) {
            tokio::time::sleep_until(at + SHARED_POLL.0.mul_f64(fastrand::f64())).await;
        }
        let mut pause = SHARED_POLL.0;
        loop {
            match global.shared().try_slot(&global.key, *max).await {
                Ok(Some(slot)) => {
                    let slot = GlobalSlot { _slot: slot, released: global.released.clone() };
                    return Ok((Some(slot), local));
                }
                Ok(None) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(SHARED_POLL.1);
                }
                Err(e) => return Err(format!("the global limit of `{}`: {e}", global.key)),
            }
        }
    }

    /// Waits for this limiter's turn to start a call, when it has a rate:
    /// this process's spacing, or the store's for a global limit.
    async fn turn(&self) -> Result<(), String> {
        let Some(spacing) = &self.spacing else { return Ok(()) };
        let Some(global) = &self.global else {
            spacing.wait().await;
            return Ok(());
        };
        let wait = global
            .shared()
            .next_start(&global.key, spacing.interval)
            .await
            .map_err(|e| format!("the global rate of `{}`: {e}", global.key))?;
        tokio::time::sleep(wait).await;
        Ok(())
    }
}

/// Starts spaced `interval` apart: the next free start time.
struct Spacing {
    interval: Duration,
    next: Mutex<Option<Instant>>,
}

impl Spacing {
    /// Takes the next start time (now, or the next free one) and waits
    /// for it.
    async fn wait(&self) {
        let at = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let at = next.map_or(now, |n| n.max(now));
            *next = Some(at + self.interval);
            at
        };
        tokio::time::sleep_until(at).await;
    }
}

/// The limits one call goes through: its tool's, its server's, and the
/// retry policy that applies (the tool's, else the server's).
#[derive(Clone)]
pub(crate) struct Pace {
    tool: Option<Arc<Limiter>>,
    server: Option<Arc<Limiter>>,
    pub(crate) retry: Option<RetryPolicy>,
}

/// The slots a running call holds; dropped when the attempt ends.
pub(crate) struct Slots {
    _held: [Held; 2],
}

impl Pace {
    /// Waits until the call may start (slots first, then turns; see the
    /// module docs) and returns the slots it holds while it runs.
    ///
    /// # Errors
    /// The journal store failed while keeping a global limit: the call is
    /// not made.
    pub(crate) async fn acquire(&self) -> Result<Slots, String> {
        let tool = match &self.tool {
            Some(t) => t.slot().await?,
            None => (None, None),
        };
        let server = match &self.server {
            Some(s) => s.slot().await?,
            None => (None, None),
        };
        for limiter in [&self.tool, &self.server].into_iter().flatten() {
            limiter.turn().await?;
        }
        Ok(Slots { _held: [tool, server] })
    }

    /// The wait before attempt `attempt + 1` of a call whose attempt
    /// `attempt` failed with `retry`, or `None` when it is not made again:
    /// no retry policy, no attempts left, a failure that is not
    /// retryable, or a transport failure of a tool not `repeat_safe`.
    pub(crate) fn retry_wait(
        &self,
        attempt: u32,
        retry: crate::catalog::RetryHint,
        repeat_safe: bool,
    ) -> Option<Duration> {
        use crate::catalog::RetryHint;
        let policy = self.retry?;
        let after = match retry {
            _ if attempt >= policy.attempts => return None,
            RetryHint::Server { after } => after,
            RetryHint::Transport if repeat_safe => None,
            _ => return None,
        };
        Some(policy.delay(attempt, after, fastrand::f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::RetryHint;
    use codemode_base::pacing::{parse_rate, parse_retry};
    use serde_json::json;

    fn limits(max: Option<usize>, rate: Option<f64>, retry: Option<serde_json::Value>) -> CallLimits {
        CallLimits::new(
            max,
            rate.map(|r| parse_rate(&json!(r)).unwrap()),
            retry.and_then(|r| parse_retry(&r).unwrap()),
        )
    }

    #[tokio::test]
    async fn starts_are_spaced_by_the_rate_and_slots_bound_calls_at_once() {
        let tool = limits(Some(2), Some(20.0), None);
        let pacing = Pacing::new([("t", &tool)], [], None).unwrap();
        let pace = pacing.of("t", None).unwrap();
        let t0 = Instant::now();
        let a = pace.acquire().await.unwrap();
        let b = pace.acquire().await.unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(50), "the second start waits 1/rate");
        let third = tokio::spawn({
            let pace = pace.clone();
            async move {
                let _slots = pace.acquire().await.unwrap();
                Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!third.is_finished(), "two slots are held");
        let freed = Instant::now();
        drop(a);
        let started = third.await.unwrap();
        assert!(started >= freed, "it starts once a slot frees");
        drop(b);
    }

    #[test]
    fn no_limits_no_pace_and_the_tools_retry_wins_over_its_servers() {
        let none = CallLimits::default();
        let server = limits(None, None, Some(json!({"attempts": 2})));
        let tool = limits(None, None, Some(json!({"attempts": 5})));
        let pacing = Pacing::new([("quiet", &none), ("t", &tool)], [("s", server)], None).unwrap();
        assert!(pacing.of("quiet", None).is_none());
        assert!(pacing.of("other", Some("nope")).is_none());
        assert_eq!(pacing.of("other", Some("s")).unwrap().retry.unwrap().attempts, 2);
        assert_eq!(pacing.of("t", Some("s")).unwrap().retry.unwrap().attempts, 5);
    }

    #[test]
    fn a_global_limit_needs_a_store_that_keeps_shared_limits() {
        let global = limits(Some(2), None, None).with_global(true);
        let e = Pacing::new([], [("fx", global.clone())], None).err().unwrap();
        assert!(
            e.contains("MCP server `fx` has `scope = \"global\"`") && e.contains("journal is off"),
            "{e}"
        );
        let folder = tempfile::tempdir().unwrap();
        let local: Arc<dyn JournalStore> = Arc::new(crate::journal::LocalStore::new(folder.path()));
        let e = Pacing::new([("t", &global)], [], Some(&local)).err().unwrap();
        assert!(e.contains("[tools.t]") && e.contains("local folder"), "{e}");
        assert!(Pacing::new([("t", &limits(Some(2), None, None))], [], Some(&local)).is_ok());
        assert_eq!(codemode_base::pacing::parse_scope(&json!("global")), Ok(true));
        let e = codemode_base::pacing::parse_scope(&json!("cluster")).unwrap_err();
        assert!(e.contains("\"process\"") && e.contains("\"global\""), "{e}");
    }

    #[test]
    fn what_is_retried() {
        let tool = limits(None, None, Some(json!({"attempts": 3, "base_delay_ms": 10, "jitter": false})));
        let pacing = Pacing::new([("t", &tool)], [], None).unwrap();
        let pace = pacing.of("t", None).unwrap();
        let server = RetryHint::Server { after: Some(Duration::from_millis(70)) };
        assert_eq!(pace.retry_wait(1, server, false), Some(Duration::from_millis(70)));
        assert_eq!(
            pace.retry_wait(2, RetryHint::Server { after: None }, false),
            Some(Duration::from_millis(20))
        );
        assert_eq!(pace.retry_wait(3, server, true), None, "no attempts left");
        assert_eq!(pace.retry_wait(1, RetryHint::Transport, true), Some(Duration::from_millis(10)));
        assert_eq!(pace.retry_wait(1, RetryHint::Transport, false), None, "not safe to repeat");
        assert_eq!(pace.retry_wait(1, RetryHint::No, true), None);
    }
}
