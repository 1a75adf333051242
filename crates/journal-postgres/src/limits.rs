//! Limits shared by every process using the store
//! ([`codemode::journal::shared_limits`], `scope = "global"`).
//!
//! A `max_in_flight` of N is N session-level advisory locks (keys hashed
//! from the limit's name and the slot's number), taken on the store's
//! holder connection: the database frees a slot when its process's session
//! ends, however it ended. A `rate` is a row of `codemode_rates` holding
//! the next free start: each call reserves one in a single statement
//! (the row's lock orders them), then waits for it.

use std::time::Duration;

use codemode::journal::StoreFuture;
use codemode::journal::shared_limits::{SharedLimits, SharedSlot};
use tokio_postgres::types::Type;

use super::holder::Hold;
use super::{PostgresStore, RELAXED, key_of};

/// A held slot: its advisory lock, let go when dropped.
struct Slot {
    _hold: Hold,
}

impl SharedSlot for Slot {}

impl SharedLimits for PostgresStore {
    fn try_slot<'a>(&'a self, key: &'a str, max: usize) -> StoreFuture<'a, Option<Box<dyn SharedSlot>>> {
        Box::pin(async move {
            let keys: Vec<i64> = (0..max).map(|i| key_of(&format!("codemode-slot:{key}:{i}"))).collect();
            let name = format!("slot:{key}");
            let hold = self.inner.holder.hold_any(&name, &keys).await?;
            Ok(hold.map(|h| Box::new(Slot { _hold: h }) as Box<dyn SharedSlot>))
        })
    }

    fn next_start<'a>(&'a self, key: &'a str, interval: Duration) -> StoreFuture<'a, Duration> {
        Box::pin(async move {
            let inner = &self.inner;
            // The row is of this name and this spacing: a changed `rate`
            // starts afresh rather than behind turns reserved at the old one.
            let key = &format!("{key}/{}us", interval.as_micros());
            let conn = inner.conn().await?;
            let fail = |e| inner.fail(format_args!("cannot take a turn of the shared rate `{key}`"), &e);
            // Not durable: a turn lost with the server is a turn not taken.
            conn.batch_execute(RELAXED).await.map_err(fail)?;
            let seconds = interval.as_secs_f64();
            let wait: f64 = conn
                .query_typed_one(
                    "INSERT INTO codemode_rates AS r (key, next_at)
                     VALUES ($1, clock_timestamp() + $2 * interval '1 second')
                     ON CONFLICT (key) DO UPDATE
                     SET next_at = greatest(r.next_at, clock_timestamp()) + $2 * interval '1 second'
                     RETURNING extract(epoch FROM (r.next_at - $2 * interval '1 second' - clock_timestamp()))::float8",
                    &[(&key, Type::TEXT), (&seconds, Type::FLOAT8)],
                )
                .await
                .map_err(fail)?
                .get(0);
            conn.batch_execute("COMMIT").await.map_err(fail)?;
            conn.done();
            Ok(Duration::from_secs_f64(wait.max(0.0)))
        })
    }
}
