//! codemode's PostgreSQL journal store.
//!
//! [`PostgresStore`]: journals in a PostgreSQL database, shared by every
//! codemode process that points at it, so a run paused on one machine can
//! be resumed on another.
//!
//! Tables (`schema`): `codemode_runs` (a row per run: its state),
//! `codemode_journal` (a row per journal line, numbered from 0),
//! `codemode_cancels` (cancels asked from other processes), and the batches
//! many workers share (`batches`: `codemode_batches`,
//! `codemode_batch_lines`). A run is
//! held by the process running or resuming it through a session-level
//! advisory lock on a hash of its id, taken on one connection per store
//! (`holder`): the database frees it when that connection ends, however
//! the process ended, so a run left `running` whose lock nobody holds was
//! interrupted. Claims are serialized by that lock and by the state column
//! (a claim moves `paused` to `running` in one transaction). The store
//! connects on first use, from inside the tool runtime, never at build
//! time. The guarantees and their limits are in `docs/JOURNAL.md`
//! ("PostgreSQL store").

mod annotate;
mod batches;
mod cancels;
mod holder;
mod limits;
mod schema;
mod tls;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore, SemaphorePermit};
use tokio_postgres::config::Host;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Config};

use codemode::journal::{
    JournalSpec, JournalStore, MAX_JOURNAL_BYTES, MAX_JOURNAL_LINES, NotResumableState, RunJournal, RunState,
    RunSummary, StoreError, StoreFuture, StoredRun, state_line, without_credentials,
};
use holder::{Hold, Holder};

/// The store `spec` names (`--journal`, `[journal] url`): a
/// `postgres://`/`postgresql://` URL or libpq's `key=value` form
/// ([`JournalSpec::parse`]) opens a [`PostgresStore`] (parsed
/// only, nothing connected yet); every other spec (`off`, a folder) is
/// [`codemode::journal::open_store`]'s, with its rules.
///
/// # Errors
/// [`StoreError::Failed`] for a spec [`PostgresStore::new`] refuses (the
/// message names it with its credentials masked,
/// [`without_credentials`]), and every error of
/// [`codemode::journal::open_store`].
pub fn open_store(spec: &str, workspace: &Path) -> Result<Option<Arc<dyn JournalStore>>, StoreError> {
    match JournalSpec::parse(spec).map_err(StoreError::Failed)? {
        JournalSpec::Postgres(url) => {
            let store = PostgresStore::new(&url)
                .map_err(|e| StoreError::Failed(format!("the journal {}: {e}", without_credentials(&url))))?;
            Ok(Some(Arc::new(store)))
        }
        _ => codemode::journal::open_store(spec, workspace),
    }
}

/// Connections a store opens at most for its queries (the holder's
/// connection is one more).
const MAX_CONNECTIONS: usize = 8;

/// How long connecting may take when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Journals in a PostgreSQL database: `postgres://user:password@host/db`.
///
/// Cheap to clone (clones share connections and the runs they hold). The
/// URL is parsed by [`PostgresStore::new`]; the database is first reached
/// (and its tables made or upgraded) by the first operation.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    tls: tls::Tls,
    /// `db@host:port`, for messages (never the password).
    place: String,
    /// Connections for queries, idle ones kept for the next.
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
    /// Set once the schema is known to be current.
    schema: OnceCell<()>,
    holder: Arc<Holder>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("place", &self.inner.place).finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// A store for the database at `url`, in the URL form
    /// (`postgres://user:password@host:port/db?sslmode=require`) or libpq's
    /// `key=value` form. Only parses: nothing is connected until the
    /// first operation.
    ///
    /// TLS: `sslmode=disable` and `prefer` (the default) connect without
    /// TLS; `require`, `verify-ca` and `verify-full` connect over TLS and
    /// verify the server's certificate and host name against the system's
    /// roots, or the CA file `sslrootcert` names (URL form only). Default
    /// `connect_timeout`: 10 s.
    ///
    /// # Errors
    /// [`StoreError::Failed`] for a URL that does not parse, names no
    /// host, or asks for TLS settings this store cannot honour.
    pub fn new(url: &str) -> Result<PostgresStore, StoreError> {
        let parsed = tls::parse(url)?;
        let mut config = parsed.config;
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            return Err(StoreError::Failed(
                "invalid PostgreSQL URL: it names no host (for a Unix socket: `?host=/var/run/postgresql`)"
                    .into(),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let place = place(&config);
        let inner = Inner {
            tls: parsed.tls.clone(),
            place: place.clone(),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(MAX_CONNECTIONS),
            schema: OnceCell::new(),
            holder: Holder::new(config.clone(), parsed.tls.clone(), place),
            config,
        };
        Ok(PostgresStore { inner: Arc::new(inner) })
    }
}

/// `db@host:port` (hosts joined with `,`).
fn place(config: &Config) -> String {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| match h {
            Host::Tcp(name) if name.contains(':') => format!("[{name}]:{}", port(i)),
            Host::Tcp(name) => format!("{name}:{}", port(i)),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    if hosts.is_empty() {
        hosts = config.get_hostaddrs().iter().enumerate().map(|(i, a)| format!("{a}:{}", port(i))).collect();
    }
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("{db}@{}", hosts.join(","))
}

/// A database error as one line: the server's message (and detail), or
/// the client's error and its causes.
pub(crate) fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_owned();
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Where a run's advisory lock lives: a 64-bit hash of its id (with a
/// codemode prefix, so other users of advisory locks are unlikely to
/// collide).
pub(crate) fn lock_key(run_id: &str) -> i64 {
    key_of(&format!("codemode-run:{run_id}"))
}

/// The first 8 bytes of a SHA-256 of `text`.
fn key_of(text: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(text.as_bytes());
    i64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The same rule as the local store's, so a run id means the same thing in
/// both stores.
fn check_run_id(run_id: &str) -> Result<(), StoreError> {
    let ok = !run_id.is_empty()
        && run_id.len() <= 128
        && !run_id.starts_with('.')
        && run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok { Ok(()) } else { Err(not_resumable(run_id, NotResumableState::Unknown)) }
}

fn not_resumable(run_id: &str, state: NotResumableState) -> StoreError {
    StoreError::NotResumable { run_id: run_id.to_owned(), state }
}

/// A connection borrowed from the store; back to the idle list when
/// dropped after [`Conn::done`] (a connection dropped mid-operation, or
/// closed, is not reused).
struct Conn<'a> {
    client: Option<Client>,
    inner: &'a Inner,
    clean: bool,
    _permit: SemaphorePermit<'a>,
}

impl Conn<'_> {
    fn done(mut self) {
        self.clean = true;
    }
}

impl std::ops::Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a connection")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a connection")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && self.clean
            && !client.is_closed()
        {
            self.inner.idle.lock().unwrap_or_else(|e| e.into_inner()).push(client);
        }
    }
}

impl Inner {
    fn fail(&self, what: impl std::fmt::Display, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Failed(format!("PostgreSQL {}: {what}: {}", self.place, pg_message(e)))
    }

    /// A connection for queries, with the schema current.
    async fn conn(&self) -> Result<Conn<'_>, StoreError> {
        let permit =
            self.permits.acquire().await.map_err(|_| {
                StoreError::Failed(format!("PostgreSQL {}: the store was closed", self.place))
            })?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|c| !c.is_closed());
            idle.pop()
        };
        let client = match reused {
            Some(c) => c,
            None => tls::connect(&self.config, &self.tls, "codemode", || {})
                .await
                .map_err(|e| self.fail("cannot connect", &e))?,
        };
        let mut conn = Conn { client: Some(client), inner: self, clean: false, _permit: permit };
        self.schema
            .get_or_try_init(|| async {
                schema::migrate(&mut conn).await.map_err(|e| match e {
                    schema::Error::Db(what, e) => self.fail(what, &e),
                    schema::Error::TooNew { found, known } => StoreError::Failed(format!(
                        "PostgreSQL {}: the journal tables are at schema version {found}, newer than this codemode knows ({known}); upgrade codemode",
                        self.place
                    )),
                })
            })
            .await?;
        Ok(conn)
    }

    /// Whether a run of this id exists.
    async fn exists(&self, run_id: &str) -> Result<bool, StoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt("SELECT 1 FROM codemode_runs WHERE run_id = $1", &[&run_id])
            .await
            .map_err(|e| self.fail(format_args!("cannot read run `{run_id}`"), &e))?;
        conn.done();
        Ok(row.is_some())
    }

    async fn create(
        self: Arc<Self>,
        run_id: &str,
        header: String,
    ) -> Result<Box<dyn RunJournal>, StoreError> {
        check_run_id(run_id)?;
        let key = lock_key(run_id);
        let exists = || {
            StoreError::Failed(format!("PostgreSQL {}: cannot create run `{run_id}`: it exists", self.place))
        };
        // Held first, so no process can take the new run for interrupted
        // between its insert and the lock.
        let Some(hold) = self.holder.hold(run_id, key).await? else { return Err(exists()) };
        let created = async {
            let conn = self.conn().await?;
            let fail = |e| self.fail(format_args!("cannot create run `{run_id}`"), &e);
            // Not durable before the run's first commit, like an append.
            conn.batch_execute(RELAXED).await.map_err(fail)?;
            let created = conn
                .execute_typed(
                    "WITH run AS (
                         INSERT INTO codemode_runs (run_id, state, lock_key) VALUES ($1, 'running', $2)
                         ON CONFLICT (run_id) DO NOTHING RETURNING run_id)
                     INSERT INTO codemode_journal (run_id, n, line) SELECT run_id, 0, $3 FROM run",
                    &[(&run_id, Type::TEXT), (&key, Type::INT8), (&header, Type::TEXT)],
                )
                .await
                .map_err(fail)?;
            conn.batch_execute("COMMIT").await.map_err(fail)?;
            conn.done();
            if created == 0 { Err(exists()) } else { Ok(()) }
        }
        .await;
        if let Err(e) = created {
            hold.release().await;
            return Err(e);
        }
        Ok(Box::new(PgJournal { inner: self.clone(), run_id: run_id.to_owned(), next: 1, hold: Some(hold) }))
    }

    async fn claim(self: Arc<Self>, run_id: &str) -> Result<(Vec<String>, Box<dyn RunJournal>), StoreError> {
        check_run_id(run_id)?;
        if !self.exists(run_id).await? {
            return Err(not_resumable(run_id, NotResumableState::Unknown));
        }
        let Some(hold) = self.holder.hold(run_id, lock_key(run_id)).await? else {
            return Err(not_resumable(run_id, NotResumableState::Busy));
        };
        match self.take(run_id).await {
            Ok((lines, next)) => {
                let journal =
                    PgJournal { inner: self.clone(), run_id: run_id.to_owned(), next, hold: Some(hold) };
                Ok((lines, Box::new(journal)))
            }
            Err(e) => {
                hold.release().await;
                Err(e)
            }
        }
    }

    /// With the run held (nobody else holds it now, so its state says the
    /// rest): moves it from `paused` to `running` with its state line, in
    /// one transaction; its lines before that, and the next line's number.
    async fn take(&self, run_id: &str) -> Result<(Vec<String>, i64), StoreError> {
        let mut conn = self.conn().await?;
        let fail = |e: tokio_postgres::Error| self.fail(format_args!("cannot claim run `{run_id}`"), &e);
        let tx = conn.transaction().await.map_err(fail)?;
        let row = tx
            .query_opt("SELECT state FROM codemode_runs WHERE run_id = $1 FOR UPDATE", &[&run_id])
            .await
            .map_err(fail)?;
        let refused = match row {
            None => Some(NotResumableState::Unknown),
            Some(row) => match self.state(run_id, row.get(0))? {
                // Running, and its lock was free: its holder is gone, and
                // the run is recovered (docs/JOURNAL.md, "Recovery").
                RunState::Paused | RunState::Running => None,
                other => Some(NotResumableState::State(other)),
            },
        };
        if let Some(state) = refused {
            tx.rollback().await.map_err(fail)?;
            conn.done();
            return Err(not_resumable(run_id, state));
        }
        self.check_size(&tx, run_id).await?;
        let rows = tx
            .query("SELECT n, line FROM codemode_journal WHERE run_id = $1 ORDER BY n", &[&run_id])
            .await
            .map_err(fail)?;
        let next = rows.last().map_or(0, |r| r.get::<_, i64>(0) + 1);
        let lines: Vec<String> = rows.into_iter().map(|r| r.get(1)).collect();
        tx.execute(
            "INSERT INTO codemode_journal (run_id, n, line) VALUES ($1, $2, $3)",
            &[&run_id, &next, &state_line(RunState::Running)],
        )
        .await
        .map_err(fail)?;
        tx.execute(
            "UPDATE codemode_runs SET state = 'running', updated_at = now() WHERE run_id = $1",
            &[&run_id],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        conn.done();
        Ok((lines, next + 1))
    }

    /// Refuses a run whose rows are more than a journal may hold
    /// ([`MAX_JOURNAL_LINES`] lines, [`MAX_JOURNAL_BYTES`] bytes) before they
    /// are read: rows written to the table by something other than codemode
    /// would otherwise be read whole into memory.
    async fn check_size(&self, tx: &tokio_postgres::Transaction<'_>, run_id: &str) -> Result<(), StoreError> {
        let row = tx
            .query_one(
                "SELECT count(*), coalesce(sum(octet_length(line)), 0)::bigint FROM codemode_journal WHERE run_id = $1",
                &[&run_id],
            )
            .await
            .map_err(|e| self.fail(format_args!("cannot read run `{run_id}`"), &e))?;
        let (lines, bytes): (i64, i64) = (row.get(0), row.get(1));
        if lines as u64 > MAX_JOURNAL_LINES as u64 || bytes as u64 > MAX_JOURNAL_BYTES {
            return Err(StoreError::Failed(format!(
                "PostgreSQL {}: run `{run_id}`'s journal has {lines} lines and {} MiB, over the {MAX_JOURNAL_LINES} \
                 lines and {} MiB a journal is read with; it was not written by codemode as it is: delete the run's rows \
                 (in codemode_runs and codemode_journal) and start the program again",
                self.place,
                bytes >> 20,
                MAX_JOURNAL_BYTES >> 20
            )));
        }
        Ok(())
    }

    fn state(&self, run_id: &str, name: &str) -> Result<RunState, StoreError> {
        RunState::parse(name).ok_or_else(|| {
            StoreError::Failed(format!(
                "PostgreSQL {}: run `{run_id}` has an unknown state `{name}`",
                self.place
            ))
        })
    }

    async fn load(&self, run_id: &str) -> Result<StoredRun, StoreError> {
        check_run_id(run_id)?;
        let (classid, objid) = split_key(lock_key(run_id));
        let mut conn = self.conn().await?;
        let fail = |e: tokio_postgres::Error| self.fail(format_args!("cannot read run `{run_id}`"), &e);
        // One snapshot for the state and the lines.
        let tx = conn
            .build_transaction()
            .read_only(true)
            .isolation_level(REPEATABLE_READ)
            .start()
            .await
            .map_err(fail)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT r.state, EXISTS (SELECT 1 {HELD_LOCKS} AND l.classid = $2 AND l.objid = $3)
                     FROM codemode_runs r WHERE r.run_id = $1"
                ),
                &[&run_id, &classid, &objid],
            )
            .await
            .map_err(fail)?;
        let Some(row) = row else { return Err(not_resumable(run_id, NotResumableState::Unknown)) };
        let mut state = self.state(run_id, row.get(0))?;
        if state == RunState::Running && !row.get::<_, bool>(1) {
            state = RunState::Interrupted;
        }
        self.check_size(&tx, run_id).await?;
        let lines = tx
            .query("SELECT line FROM codemode_journal WHERE run_id = $1 ORDER BY n", &[&run_id])
            .await
            .map_err(fail)?
            .into_iter()
            .map(|r| r.get(0))
            .collect();
        tx.commit().await.map_err(fail)?;
        conn.done();
        Ok(StoredRun { run_id: run_id.to_owned(), state, lines })
    }

    async fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        let conn = self.conn().await?;
        let fail = |e: tokio_postgres::Error| self.fail("cannot list runs", &e);
        let held: std::collections::HashSet<(u32, u32)> = conn
            .query(&format!("SELECT l.classid, l.objid {HELD_LOCKS}"), &[])
            .await
            .map_err(fail)?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let rows = conn
            .query(
                "SELECT run_id, state, lock_key, extract(epoch FROM updated_at)::bigint FROM codemode_runs
                 ORDER BY created_at, run_id",
                &[],
            )
            .await
            .map_err(fail)?;
        conn.done();
        let mut runs = Vec::with_capacity(rows.len());
        for row in rows {
            let run_id: String = row.get(0);
            let mut state = self.state(&run_id, row.get(1))?;
            if state == RunState::Running && !held.contains(&split_key(row.get(2))) {
                state = RunState::Interrupted;
            }
            let updated_unix = u64::try_from(row.get::<_, i64>(3)).unwrap_or(0);
            runs.push(RunSummary { run_id, state, updated_unix });
        }
        Ok(runs)
    }

    async fn remove(&self, run_id: &str) -> Result<(), StoreError> {
        check_run_id(run_id)?;
        if !self.exists(run_id).await? {
            return Err(not_resumable(run_id, NotResumableState::Unknown));
        }
        // Held while the rows go, so no process claims the run meanwhile.
        let Some(hold) = self.holder.hold(run_id, lock_key(run_id)).await? else {
            return Err(not_resumable(run_id, NotResumableState::Busy));
        };
        let removed = async {
            let conn = self.conn().await?;
            let removed = conn
                .execute("DELETE FROM codemode_runs WHERE run_id = $1", &[&run_id])
                .await
                .map_err(|e| self.fail(format_args!("cannot remove run `{run_id}`"), &e))?;
            conn.done();
            Ok(removed)
        }
        .await;
        hold.release().await;
        match removed? {
            0 => Err(not_resumable(run_id, NotResumableState::Unknown)),
            _ => Ok(()),
        }
    }
}

/// Opens a transaction whose commit does not wait for the write-ahead log
/// to reach the disk (`COMMIT` ends it).
const RELAXED: &str = "BEGIN; SET LOCAL synchronous_commit = off";

const REPEATABLE_READ: tokio_postgres::IsolationLevel = tokio_postgres::IsolationLevel::RepeatableRead;

/// The advisory locks granted in this database on 64-bit keys
/// (`objsubid` 1; `classid` and `objid` are the key's high and low 32
/// bits).
const HELD_LOCKS: &str = "FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// A 64-bit advisory lock key as `pg_locks` shows it: (classid, objid),
/// the high and low 32 bits.
fn split_key(key: i64) -> (u32, u32) {
    let k = key as u64;
    ((k >> 32) as u32, k as u32)
}

impl JournalStore for PostgresStore {
    fn describe(&self) -> String {
        format!("PostgreSQL {}", self.inner.place)
    }

    fn batch_queue(&self) -> Option<&dyn codemode::journal::batch_queue::BatchQueue> {
        Some(self)
    }

    fn shared_limits(&self) -> Option<&dyn codemode::journal::shared_limits::SharedLimits> {
        Some(self)
    }

    fn create<'a>(&'a self, run_id: &'a str, header: String) -> StoreFuture<'a, Box<dyn RunJournal>> {
        Box::pin(self.inner.clone().create(run_id, header))
    }

    fn claim<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, (Vec<String>, Box<dyn RunJournal>)> {
        Box::pin(self.inner.clone().claim(run_id))
    }

    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, StoredRun> {
        Box::pin(self.inner.load(run_id))
    }

    fn list(&self) -> StoreFuture<'_, Vec<RunSummary>> {
        Box::pin(self.inner.list())
    }

    fn remove<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.inner.remove(run_id))
    }
    fn request_cancel<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.inner.request_cancel(run_id))
    }

    fn cancel_requests<'a>(&'a self, run_ids: &'a [String]) -> StoreFuture<'a, Vec<String>> {
        Box::pin(self.inner.cancel_requests(run_ids))
    }

    fn annotate<'a>(&'a self, run_id: &'a str, line: String) -> StoreFuture<'a, ()> {
        Box::pin(self.inner.annotate(run_id, line))
    }
}

/// A run's journal in the database, held by this process until it commits
/// `paused` or a final state, or is dropped.
struct PgJournal {
    inner: Arc<Inner>,
    run_id: String,
    /// The number of the next line.
    next: i64,
    hold: Option<Hold>,
}

impl PgJournal {
    /// Appends `lines`; with `durable`, the commit waits for the disk
    /// (and takes every earlier append with it).
    async fn append_lines(&mut self, lines: Vec<String>, durable: bool) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let count = lines.len() as i64;
        let conn = self.inner.conn().await?;
        let fail = |e| self.inner.fail(format_args!("cannot append to run `{}`", self.run_id), &e);
        // Committed without waiting for the disk (an append need not be
        // durable until the run's commit, whose flush of the write-ahead
        // log takes every earlier append with it). One statement (typed: no
        // round trip to prepare it): the lines, numbered on from `next`,
        // and the run's `updated_at`.
        conn.batch_execute(if durable { "BEGIN" } else { RELAXED }).await.map_err(fail)?;
        conn.execute_typed(
            "WITH lines AS (
                 INSERT INTO codemode_journal (run_id, n, line)
                 SELECT $1, $2 + t.i - 1, t.line FROM unnest($3::text[]) WITH ORDINALITY AS t(line, i))
             UPDATE codemode_runs SET updated_at = now() WHERE run_id = $1",
            &[(&self.run_id, Type::TEXT), (&self.next, Type::INT8), (&lines, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(fail)?;
        conn.batch_execute("COMMIT").await.map_err(fail)?;
        conn.done();
        self.next += count;
        Ok(())
    }

    async fn commit_state(&mut self, state: RunState) -> Result<(), StoreError> {
        let conn = self.inner.conn().await?;
        // One statement, so one transaction: the state line goes in only
        // if the run is still ours (`running`) and still there.
        let committed = conn
            .execute_typed(
                "WITH run AS (
                     UPDATE codemode_runs SET state = $2, updated_at = now()
                     WHERE run_id = $1 AND state = 'running' RETURNING run_id)
                 INSERT INTO codemode_journal (run_id, n, line) SELECT run_id, $3, $4 FROM run",
                &[
                    (&self.run_id, Type::TEXT),
                    (&state.as_str(), Type::TEXT),
                    (&self.next, Type::INT8),
                    (&state_line(state), Type::TEXT),
                ],
            )
            .await
            .map_err(|e| self.inner.fail(format_args!("cannot commit run `{}`", self.run_id), &e))?;
        conn.done();
        if committed == 0 {
            return Err(StoreError::Failed(format!(
                "PostgreSQL {}: cannot commit run `{}`: it is no longer running in the store (removed while it ran?)",
                self.inner.place, self.run_id
            )));
        }
        self.next += 1;
        if state != RunState::Running
            && let Some(hold) = self.hold.take()
        {
            hold.release().await;
        }
        Ok(())
    }
}

impl RunJournal for PgJournal {
    fn append(&mut self, text: String) -> StoreFuture<'_, ()> {
        let lines = text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
        Box::pin(self.append_lines(lines, false))
    }

    fn append_durable(&mut self, text: String) -> StoreFuture<'_, ()> {
        let lines = text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
        Box::pin(self.append_lines(lines, true))
    }

    fn commit(&mut self, state: RunState) -> StoreFuture<'_, ()> {
        Box::pin(self.commit_state(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_host_is_refused_without_its_password() {
        let e = open_store("postgresql://me:s3cret@/runs", Path::new("/ws")).err().unwrap();
        let shown = e.to_string();
        assert!(shown.contains("PostgreSQL") && !shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn folders_and_off_are_the_engine_store_s() {
        assert!(open_store("off", Path::new("/ws")).unwrap().is_none());
        let e = open_store("journals", Path::new("/ws")).err().unwrap().to_string();
        assert!(e.contains("is inside the workspace"), "{e}");
    }

    #[test]
    fn a_store_says_where_it_is_and_never_the_password() {
        let store = PostgresStore::new("postgres://u:s3cret@db.example:6543/app").unwrap();
        assert_eq!(store.describe(), "PostgreSQL app@db.example:6543");
        assert!(!format!("{store:?}").contains("s3cret"));
        let store = PostgresStore::new("host=h1,h2 port=5433 user=me").unwrap();
        assert_eq!(store.describe(), "PostgreSQL me@h1:5433,h2:5433");
        let store = PostgresStore::new("postgresql://u@localhost/app?host=/var/run/postgresql").unwrap();
        assert_eq!(store.describe(), "PostgreSQL app@localhost:5432,/var/run/postgresql");
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        let err = PostgresStore::new("postgres://u:s3cret@h/db?bogus=1").unwrap_err().to_string();
        assert!(err.starts_with("invalid PostgreSQL URL: ") && err.contains("bogus"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        let err = PostgresStore::new("postgres:///db").unwrap_err().to_string();
        assert!(err.contains("names no host"), "{err}");
        let err = PostgresStore::new("postgres://h/db?channel_binding=require").unwrap_err().to_string();
        assert!(err.contains("channel_binding=require is not supported"), "{err}");
    }

    #[test]
    fn lock_keys_split_as_pg_locks_shows_them() {
        assert_eq!(split_key(-1), (u32::MAX, u32::MAX));
        assert_eq!(split_key(0x0000_0001_0000_0002), (1, 2));
        assert_ne!(lock_key("run-a"), lock_key("run-b"));
        assert_eq!(lock_key("run-a"), lock_key("run-a"));
    }

    #[test]
    fn run_ids_follow_the_local_store_rule() {
        assert!(check_run_id("run-20261201T101010Z-0a1b2c3d").is_ok());
        for bad in ["", "../x", ".hidden", "a/b", "a b"] {
            assert!(check_run_id(bad).is_err(), "{bad}");
        }
    }
}
