//! The store's tables, made and upgraded by the crate itself: on its first
//! connection each store brings the schema to [`VERSION`], in one
//! transaction under a transaction-level advisory lock, so processes that
//! start at once migrate one after the other (the later ones find the work
//! done). A database at a newer version than this code knows is refused.
//!
//! Tables are made in the connection's current schema (its `search_path`;
//! `?options=-c%20search_path%3Dname` in the URL picks another).

use tokio_postgres::Client;

/// The schema version this code reads and writes.
pub(crate) const VERSION: i32 = 3;

/// Each version's SQL, in order; a version's SQL never changes once
/// released (a change is a new version).
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE codemode_runs (
         run_id text PRIMARY KEY,
         state text NOT NULL CHECK (state IN
             ('running', 'paused', 'completed', 'failed', 'timed_out', 'cancelled', 'interrupted')),
         lock_key bigint NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now(),
         updated_at timestamptz NOT NULL DEFAULT now()
     );
     CREATE INDEX codemode_runs_created_at ON codemode_runs (created_at, run_id);
     CREATE TABLE codemode_journal (
         run_id text NOT NULL REFERENCES codemode_runs (run_id) ON DELETE CASCADE,
         n bigint NOT NULL,
         line text NOT NULL,
         PRIMARY KEY (run_id, n)
     );",
    ),
    // Cancel requests from other processes (`codemode runs cancel`).
    (
        2,
        "CREATE TABLE codemode_cancels (
         run_id text PRIMARY KEY REFERENCES codemode_runs (run_id) ON DELETE CASCADE,
         requested_at timestamptz NOT NULL DEFAULT now()
     );",
    ),
    // Batches shared by many workers (`batches`, docs/BATCH.md "Many
    // workers"): a row per batch, a row per input line; and the next free
    // start of each global `rate` (`limits`). A line `claimed`
    // is its worker's while that worker's advisory lock (`worker_key`) is
    // held; the partial index keeps the claim's scan to the lines left.
    (
        3,
        "CREATE TABLE codemode_batches (
         batch_id text PRIMARY KEY,
         program_name text NOT NULL,
         program_source text NOT NULL,
         about text NOT NULL,
         lines bigint NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now()
     );
     CREATE TABLE codemode_batch_lines (
         batch_id text NOT NULL REFERENCES codemode_batches (batch_id) ON DELETE CASCADE,
         line bigint NOT NULL,
         input text NOT NULL,
         state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed', 'paused', 'ended')),
         worker_key bigint,
         claims integer NOT NULL DEFAULT 0,
         run_id text,
         status text,
         output text,
         updated_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (batch_id, line)
     );
     CREATE INDEX codemode_batch_lines_open ON codemode_batch_lines (batch_id, line)
         WHERE state IN ('pending', 'claimed');
     CREATE TABLE codemode_rates (
         key text PRIMARY KEY,
         next_at timestamptz NOT NULL
     );",
    ),
];

/// The version table, made with the first migration.
const VERSION_TABLE: &str = "CREATE TABLE codemode_schema (
     version integer PRIMARY KEY,
     applied_at timestamptz NOT NULL DEFAULT now()
 )";

/// Why the schema could not be brought up to date.
pub(super) enum Error {
    /// The database refused (what was being done, and its error).
    Db(&'static str, tokio_postgres::Error),
    /// The tables are at a version this code does not know.
    TooNew { found: i32, known: i32 },
}

/// The transaction-level advisory lock migrations take.
fn migration_key() -> i64 {
    super::key_of("codemode-schema")
}

/// Brings the tables to [`VERSION`] (no change when they are there).
pub(super) async fn migrate(client: &mut Client) -> Result<(), Error> {
    let db = |what: &'static str| move |e| Error::Db(what, e);
    let tx = client.transaction().await.map_err(db("cannot start the schema check"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&migration_key()])
        .await
        .map_err(db("cannot take the schema migration lock"))?;
    // Looked up rather than `CREATE TABLE IF NOT EXISTS`: a role that may
    // use the tables but not create any (no CREATE on the schema) passes.
    let exists: bool = tx
        .query_one("SELECT to_regclass('codemode_schema') IS NOT NULL", &[])
        .await
        .map_err(db("cannot read the schema version"))?
        .get(0);
    let found: i32 = if exists {
        tx.query_one("SELECT coalesce(max(version), 0) FROM codemode_schema", &[])
            .await
            .map_err(db("cannot read the schema version"))?
            .get(0)
    } else {
        0
    };
    if found > VERSION {
        return Err(Error::TooNew { found, known: VERSION });
    }
    if found == VERSION {
        return tx.commit().await.map_err(db("cannot end the schema check"));
    }
    if !exists {
        tx.batch_execute(VERSION_TABLE).await.map_err(db("cannot create the journal tables"))?;
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.batch_execute(sql).await.map_err(db("cannot create the journal tables"))?;
        tx.execute("INSERT INTO codemode_schema (version) VALUES ($1)", &[version])
            .await
            .map_err(db("cannot record the schema version"))?;
    }
    tx.commit().await.map_err(db("cannot commit the journal tables"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_up_to_the_version() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, (1..=VERSION).collect::<Vec<_>>());
    }
}
