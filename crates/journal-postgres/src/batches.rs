//! Batches shared by many workers ([`codemode::journal::batch_queue`]):
//! `codemode_batches` (a row per batch: its program) and
//! `codemode_batch_lines` (a row per input line: `pending`, `claimed`,
//! `paused` or `ended`, with its run and output).
//!
//! A worker takes a session-level advisory lock of its own (on the store's
//! holder connection, as a run is held) and claims lines with `FOR UPDATE
//! SKIP LOCKED`, writing its lock's key into them. A line is its worker's
//! while the database shows that lock held (`pg_locks`): when the worker's
//! session ends (killed, crashed, cut off) the lock goes, and the next
//! claim of any worker takes its lines as it takes pending ones. The locks
//! are read once per claim, so a line is taken from a gone worker only if
//! it was claimed before the claim began (`updated_at`, set at the
//! update): a worker that joined and claimed it meanwhile, after the read,
//! keeps it. Claims,
//! ends and the line's run id are committed durably before the work they
//! stand for goes on.

use std::sync::Arc;

use codemode::journal::batch_queue::{BatchInfo, BatchQueue, BatchWorker, ClaimedLine, LineResult, NewBatch};
use codemode::journal::{StoreError, StoreFuture};
use tokio_postgres::types::Type;

use super::holder::Hold;
use super::{Inner, PostgresStore, key_of};

/// Lines inserted per statement when a batch is submitted.
const SUBMIT_CHUNK: usize = 5_000;

/// The advisory-lock keys held now in this database (a bigint key shows as
/// its high half in `classid`, its low half in `objid`, `objsubid` 1: the
/// PostgreSQL manual, "pg_locks").
const LIVE_KEYS: &str = "SELECT (classid::bigint << 32) | objid::bigint AS key FROM pg_locks
     WHERE locktype = 'advisory' AND objsubid = 1 AND granted
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

fn unknown(batch_id: &str) -> StoreError {
    StoreError::Failed(format!(
        "no batch `{batch_id}` in the store (check the id, and give the --journal it was submitted to)"
    ))
}

impl Inner {
    async fn submit(&self, batch: NewBatch) -> Result<(), StoreError> {
        let id = batch.batch_id.as_str();
        let mut conn = self.conn().await?;
        let fail = |e: tokio_postgres::Error| self.fail(format_args!("cannot submit batch `{id}`"), &e);
        let tx = conn.transaction().await.map_err(fail)?;
        let made = tx
            .execute(
                "INSERT INTO codemode_batches (batch_id, program_name, program_source, about, lines)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (batch_id) DO NOTHING",
                &[&id, &batch.program_name, &batch.program_source, &batch.about, &(batch.lines.len() as i64)],
            )
            .await
            .map_err(fail)?;
        if made == 0 {
            return Err(StoreError::Failed(format!(
                "PostgreSQL {}: a batch `{id}` exists; give another --batch-id (or none, for a new id)",
                self.place
            )));
        }
        let insert = tx
            .prepare_typed(
                "INSERT INTO codemode_batch_lines (batch_id, line, input)
                 SELECT $1, line, input FROM unnest($2::bigint[], $3::text[]) AS t (line, input)",
                &[Type::TEXT, Type::INT8_ARRAY, Type::TEXT_ARRAY],
            )
            .await
            .map_err(fail)?;
        for chunk in batch.lines.chunks(SUBMIT_CHUNK) {
            let numbers: Vec<i64> = chunk.iter().map(|(n, _)| *n as i64).collect();
            let inputs: Vec<&str> = chunk.iter().map(|(_, v)| v.as_str()).collect();
            tx.execute(&insert, &[&id, &numbers, &inputs]).await.map_err(fail)?;
        }
        tx.commit().await.map_err(fail)?;
        conn.done();
        Ok(())
    }

    async fn batch(&self, batch_id: &str) -> Result<BatchInfo, StoreError> {
        let conn = self.conn().await?;
        let fail = |e| self.fail(format_args!("cannot read batch `{batch_id}`"), &e);
        let Some(row) = conn
            .query_opt(
                "SELECT program_name, program_source, about, lines, extract(epoch FROM created_at)::bigint
                 FROM codemode_batches WHERE batch_id = $1",
                &[&batch_id],
            )
            .await
            .map_err(fail)?
        else {
            conn.done();
            return Err(unknown(batch_id));
        };
        let counts = conn
            .query_one(
                &format!(
                    "WITH live AS MATERIALIZED ({LIVE_KEYS})
                     SELECT count(*) FILTER (WHERE state = 'pending'),
                            count(*) FILTER (WHERE state = 'claimed' AND worker_key IN (SELECT key FROM live)),
                            count(*) FILTER (WHERE state = 'claimed' AND worker_key NOT IN (SELECT key FROM live)),
                            count(*) FILTER (WHERE state = 'paused'),
                            count(*) FILTER (WHERE state = 'ended' AND status = 'completed'),
                            count(*) FILTER (WHERE state = 'ended' AND status <> 'completed')
                     FROM codemode_batch_lines WHERE batch_id = $1"
                ),
                &[&batch_id],
            )
            .await
            .map_err(fail)?;
        conn.done();
        let n = |i: usize| counts.get::<_, i64>(i) as u64;
        Ok(BatchInfo {
            batch_id: batch_id.to_owned(),
            program_name: row.get(0),
            program_source: row.get(1),
            about: row.get(2),
            lines: row.get::<_, i64>(3) as u64,
            created_unix: row.get(4),
            pending: n(0),
            running: n(1),
            orphaned: n(2),
            paused: n(3),
            completed: n(4),
            failed: n(5),
        })
    }

    async fn retry_failed(&self, batch_id: &str) -> Result<Vec<u64>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "UPDATE codemode_batch_lines
                 SET state = 'pending', run_id = NULL, status = NULL, output = NULL, worker_key = NULL,
                     claims = 0, updated_at = clock_timestamp()
                 WHERE batch_id = $1 AND state = 'ended' AND status <> 'completed'
                 RETURNING line",
                &[&batch_id],
            )
            .await
            .map_err(|e| {
                self.fail(format_args!("cannot put the failed lines of batch `{batch_id}` back"), &e)
            })?;
        conn.done();
        let mut lines: Vec<u64> = rows.into_iter().map(|r| r.get::<_, i64>(0) as u64).collect();
        lines.sort_unstable();
        Ok(lines)
    }

    async fn unfinished(&self, batch_id: &str) -> Result<bool, StoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT 1 FROM codemode_batch_lines
                 WHERE batch_id = $1 AND state IN ('pending', 'claimed') LIMIT 1",
                &[&batch_id],
            )
            .await
            .map_err(|e| self.fail(format_args!("cannot read batch `{batch_id}`"), &e))?;
        conn.done();
        Ok(row.is_some())
    }

    async fn lines(
        &self,
        batch_id: &str,
        after: u64,
        limit: u32,
        state: Option<&str>,
    ) -> Result<Vec<LineResult>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT line, input, state, run_id, status, output FROM codemode_batch_lines
                 WHERE batch_id = $1 AND line > $2 AND ($4::text IS NULL OR state = $4)
                 ORDER BY line LIMIT $3",
                &[&batch_id, &(after as i64), &i64::from(limit), &state],
            )
            .await
            .map_err(|e| self.fail(format_args!("cannot read the lines of batch `{batch_id}`"), &e))?;
        conn.done();
        Ok(rows
            .into_iter()
            .map(|r| LineResult {
                line: r.get::<_, i64>(0) as u64,
                input: r.get(1),
                state: r.get(2),
                run_id: r.get(3),
                status: r.get(4),
                output: r.get(5),
            })
            .collect())
    }
}

impl BatchQueue for PostgresStore {
    fn submit(&self, batch: NewBatch) -> StoreFuture<'_, ()> {
        Box::pin(self.inner.submit(batch))
    }

    fn batch<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, BatchInfo> {
        Box::pin(self.inner.batch(batch_id))
    }

    fn lines<'a>(
        &'a self,
        batch_id: &'a str,
        after: u64,
        limit: u32,
        state: Option<&'a str>,
    ) -> StoreFuture<'a, Vec<LineResult>> {
        Box::pin(self.inner.lines(batch_id, after, limit, state))
    }

    fn retry_failed<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(async move {
            self.inner.batch(batch_id).await?;
            self.inner.retry_failed(batch_id).await
        })
    }

    fn unfinished<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.inner.unfinished(batch_id))
    }

    fn join<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, Box<dyn BatchWorker>> {
        Box::pin(async move {
            // Known first, so a mistyped id is an error, not an idle worker.
            self.inner.batch(batch_id).await?;
            let name = format!("batch-worker:{batch_id}:{}", codemode::Engine::new_run_id());
            let key = key_of(&name);
            let Some(hold) = self.inner.holder.hold(&name, key).await? else {
                return Err(StoreError::Failed(format!(
                    "PostgreSQL {}: cannot take this worker's lock (it is held)",
                    self.inner.place
                )));
            };
            let worker =
                PgWorker { inner: self.inner.clone(), batch_id: batch_id.to_owned(), key, _hold: hold };
            Ok(Box::new(worker) as Box<dyn BatchWorker>)
        })
    }
}

/// A worker's claims: its lock is held as long as this lives.
struct PgWorker {
    inner: Arc<Inner>,
    batch_id: String,
    key: i64,
    _hold: Hold,
}

impl PgWorker {
    async fn claim(&self, max: u32) -> Result<Vec<ClaimedLine>, StoreError> {
        let id = self.batch_id.as_str();
        let conn = self.inner.conn().await?;
        // The run id has the form of `Engine::new_run_id`.
        let rows = conn
            .query(
                &format!(
                    "WITH live AS MATERIALIZED ({LIVE_KEYS}),
                     picked AS (
                         SELECT line FROM codemode_batch_lines
                         WHERE batch_id = $1 AND (state = 'pending'
                             OR (state = 'claimed' AND worker_key NOT IN (SELECT key FROM live)
                                 AND updated_at < statement_timestamp()))
                         ORDER BY line LIMIT $3 FOR UPDATE SKIP LOCKED)
                     UPDATE codemode_batch_lines l
                     SET state = 'claimed', worker_key = $2, claims = l.claims + 1, updated_at = clock_timestamp(),
                         run_id = coalesce(l.run_id, 'run-'
                             || to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISS\"Z\"')
                             || '-' || substr(md5(random()::text || l.line::text), 1, 8))
                     FROM picked WHERE l.batch_id = $1 AND l.line = picked.line
                     RETURNING l.line, l.input, l.run_id, l.claims"
                ),
                &[&id, &self.key, &i64::from(max)],
            )
            .await
            .map_err(|e| self.inner.fail(format_args!("cannot claim lines of batch `{id}`"), &e))?;
        conn.done();
        let mut lines: Vec<ClaimedLine> = rows
            .into_iter()
            .map(|r| ClaimedLine {
                line: r.get::<_, i64>(0) as u64,
                input: r.get(1),
                run_id: r.get(2),
                claims: r.get::<_, i32>(3) as u32,
            })
            .collect();
        lines.sort_by_key(|l| l.line);
        Ok(lines)
    }

    async fn claim_paused(&self, line: u64) -> Result<bool, StoreError> {
        let id = self.batch_id.as_str();
        let conn = self.inner.conn().await?;
        let n = conn
            .execute(
                "UPDATE codemode_batch_lines SET state = 'claimed', worker_key = $3, claims = claims + 1,
                     updated_at = clock_timestamp()
                 WHERE batch_id = $1 AND line = $2 AND state = 'paused'",
                &[&id, &(line as i64), &self.key],
            )
            .await
            .map_err(|e| self.inner.fail(format_args!("cannot claim line {line} of batch `{id}`"), &e))?;
        conn.done();
        Ok(n == 1)
    }

    async fn end(&self, line: u64, run_id: &str, status: &str, output: String) -> Result<(), StoreError> {
        let id = self.batch_id.as_str();
        let conn = self.inner.conn().await?;
        let n = conn
            .execute(
                "UPDATE codemode_batch_lines
                 SET state = CASE WHEN $4 IN ('paused', 'running', 'not_resumed') THEN 'paused' ELSE 'ended' END,
                     run_id = $3, status = $4, output = $5, updated_at = now()
                 WHERE batch_id = $1 AND line = $2 AND state = 'claimed' AND worker_key = $6",
                &[&id, &(line as i64), &run_id, &status, &output, &self.key],
            )
            .await
            .map_err(|e| self.inner.fail(format_args!("cannot record line {line} of batch `{id}`"), &e))?;
        conn.done();
        if n == 0 {
            return Err(StoreError::Failed(format!(
                "PostgreSQL {}: line {line} of batch `{id}` is no longer this worker's (its session to the \
                 database was cut and another worker took the line over); its run {run_id} is the one to look at",
                self.inner.place
            )));
        }
        Ok(())
    }
}

impl BatchWorker for PgWorker {
    fn claim(&self, max: u32) -> StoreFuture<'_, Vec<ClaimedLine>> {
        Box::pin(PgWorker::claim(self, max))
    }

    fn claim_paused(&self, line: u64) -> StoreFuture<'_, bool> {
        Box::pin(PgWorker::claim_paused(self, line))
    }

    fn end<'a>(&'a self, line: u64, run_id: &'a str, status: &'a str, output: String) -> StoreFuture<'a, ()> {
        Box::pin(PgWorker::end(self, line, run_id, status, output))
    }
}
