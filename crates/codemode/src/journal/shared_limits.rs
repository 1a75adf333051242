//! Limits on calls kept in a journal store, so that they hold across every
//! process sharing it (`scope = "global"`, docs/LIMITS.md): the slots of a
//! `max_in_flight` and the spacing of a `rate`, per tool or MCP server.
//! The engine's pacing (engine/pacing.rs) takes them after its own
//! per-process ones.

use std::time::Duration;

use super::StoreFuture;

/// A slot of a shared `max_in_flight`, held until dropped, or until the
/// process holding it ends (the store frees it then).
pub trait SharedSlot: Send + Sync {}

/// What a store offers to keep limits for many processes
/// ([`JournalStore::shared_limits`](super::JournalStore::shared_limits)).
pub trait SharedLimits: Send + Sync {
    /// Takes a free one of the `max` slots named `key`: `None` when every
    /// one is held now (the caller waits and asks again). Never more than
    /// `max` are held at once across the processes sharing the store.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn try_slot<'a>(&'a self, key: &'a str, max: usize) -> StoreFuture<'a, Option<Box<dyn SharedSlot>>>;

    /// Reserves the next start of a call named `key`, starts being spaced
    /// at least `interval` apart across every process (GCRA with a burst
    /// of one): how long from now until the reserved start (zero when it is
    /// now).
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn next_start<'a>(&'a self, key: &'a str, interval: Duration) -> StoreFuture<'a, Duration>;
}
