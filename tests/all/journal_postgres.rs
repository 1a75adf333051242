//! The PostgreSQL journal store against a real server: the URL is in
//! `CODEMODE_TEST_POSTGRES_URL` (`.ci/run` starts a server and sets it;
//! `bash .ci/run postgres` does only that). Each test works in a schema of
//! its own, so tests do not see each other's runs. Without the variable
//! the tests fail under CI and say loudly that they were skipped
//! elsewhere.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codemode::journal::{JournalStore, NotResumableState, RunState, StoreError};
use codemode_journal_postgres::PostgresStore;

const URL_VAR: &str = "CODEMODE_TEST_POSTGRES_URL";

/// The test database, in a fresh schema.
pub(crate) struct Db {
    /// A URL whose connections use the test's schema.
    pub(crate) url: String,
    admin: tokio_postgres::Client,
    schema: String,
}

/// The test database for `test`, or `None` when none is configured (a
/// failure under CI).
pub(crate) async fn database(test: &str) -> Option<Db> {
    let base = match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => url,
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{URL_VAR} is not set under CI: .ci/run starts PostgreSQL and sets it"
            );
            // Straight to the terminal, past the test harness' capture.
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED journal_postgres::{test}: {URL_VAR} is not set; `bash .ci/run postgres` starts a server and prints it ***\n"
            );
            return None;
        }
    };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let schema = format!("cm_{test}_{}_{nanos}", std::process::id());
    let (admin, connection) =
        tokio_postgres::connect(&base, tokio_postgres::NoTls).await.expect("the test database");
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).await.unwrap();
    admin.batch_execute(&format!("SET search_path = {schema}")).await.unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    Some(Db { url, admin, schema })
}

impl Db {
    fn store(&self) -> PostgresStore {
        PostgresStore::new(&self.url).expect("a store")
    }

    /// The line numbers run `run_id` has, in order.
    async fn numbers(&self, run_id: &str) -> Vec<i64> {
        self.admin
            .query("SELECT n FROM codemode_journal WHERE run_id = $1 ORDER BY n", &[&run_id])
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// The server process of the session holding `run_id`'s lock.
    async fn holder_pid(&self, run_id: &str) -> Option<i32> {
        self.admin
            .query_opt(
                "SELECT l.pid FROM pg_locks l, codemode_runs r
                 WHERE r.run_id = $1 AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                   AND l.classid = ((r.lock_key >> 32) & 4294967295)::oid
                   AND l.objid = (r.lock_key & 4294967295)::oid",
                &[&run_id],
            )
            .await
            .unwrap()
            .map(|r| r.get(0))
    }

    pub(crate) async fn drop_schema(self) {
        let _ = self.admin.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema)).await;
    }
}

fn header(run_id: &str) -> String {
    format!("{{\"t\":\"header\",\"run_id\":\"{run_id}\"}}")
}

fn lines(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{{\"t\":\"call\",\"seq\":{i}}}")).collect()
}

/// `lines(range)` as the text an append takes.
fn text(range: std::ops::Range<usize>) -> String {
    lines(range).iter().map(|l| format!("{l}\n")).collect()
}

fn state_of(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["t"] == "state").then(|| v["state"].as_str().unwrap().to_owned())
}

/// Why `result` was refused (it must be).
fn refused<T>(result: Result<T, StoreError>) -> NotResumableState {
    match result {
        Err(StoreError::NotResumable { state, .. }) => state,
        Err(other) => panic!("expected NotResumable, got {other:?}"),
        Ok(_) => panic!("expected NotResumable, got Ok"),
    }
}

/// The error `result` must be.
fn error<T>(result: Result<T, StoreError>) -> StoreError {
    match result {
        Err(e) => e,
        Ok(_) => panic!("expected an error, got Ok"),
    }
}

/// A run paused by `store`, with a header and `n` lines.
async fn paused_run(store: &PostgresStore, run_id: &str, n: usize) {
    let mut journal = store.create(run_id, header(run_id)).await.unwrap();
    journal.append(text(0..n)).await.unwrap();
    journal.commit(RunState::Paused).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_append_commit_load_round_trip() {
    let Some(db) = database("round_trip").await else { return };
    let store = db.store();
    assert!(store.describe().starts_with("PostgreSQL "), "{}", store.describe());
    let mut journal = store.create("run-a", header("run-a")).await.unwrap();
    journal.append(text(0..3)).await.unwrap();
    journal.append(String::new()).await.unwrap();
    journal.append(text(3..5)).await.unwrap();
    // Appended, not committed: still running, and held.
    let run = store.load("run-a").await.unwrap();
    assert_eq!(run.state, RunState::Running);
    journal.commit(RunState::Paused).await.unwrap();
    drop(journal);

    let run = store.load("run-a").await.unwrap();
    assert_eq!(run.state, RunState::Paused);
    assert_eq!(run.lines.len(), 1 + 5 + 1);
    assert_eq!(run.lines[0], header("run-a"));
    assert_eq!(run.lines[1..6], lines(0..5)[..]);
    assert_eq!(state_of(&run.lines[6]).as_deref(), Some("paused"));
    assert_eq!(db.numbers("run-a").await, (0..7).collect::<Vec<i64>>());

    // A second store (another process) reads the same.
    let other = db.store().load("run-a").await.unwrap();
    assert_eq!(other.lines, run.lines);

    let err = store.create("run-a", header("run-a")).await.err().expect("a second create fails");
    assert!(
        matches!(&err, StoreError::Failed(m) if m.contains("run `run-a`") && m.contains("exists")),
        "{err:?}"
    );
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_is_oldest_first_with_states() {
    let Some(db) = database("list").await else { return };
    let store = db.store();
    assert!(store.list().await.unwrap().is_empty());
    paused_run(&store, "run-1", 1).await;
    let mut done = store.create("run-2", header("run-2")).await.unwrap();
    done.commit(RunState::Completed).await.unwrap();
    let live = store.create("run-3", header("run-3")).await.unwrap();
    let dropped = store.create("run-4", header("run-4")).await.unwrap();
    drop(dropped);
    wait_for_state(&store, "run-4", RunState::Interrupted).await;

    let list = db.store().list().await.unwrap();
    let seen: Vec<(&str, RunState)> = list.iter().map(|r| (r.run_id.as_str(), r.state)).collect();
    assert_eq!(
        seen,
        [
            ("run-1", RunState::Paused),
            ("run-2", RunState::Completed),
            ("run-3", RunState::Running),
            ("run-4", RunState::Interrupted)
        ]
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(list.iter().all(|r| r.updated_unix + 60 > now && r.updated_unix <= now + 60), "{list:?}");
    drop(live);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_deletes_a_run_and_refuses_a_held_one() {
    let Some(db) = database("remove").await else { return };
    let store = db.store();
    paused_run(&store, "run-gone", 2).await;
    store.remove("run-gone").await.unwrap();
    assert_eq!(refused(store.load("run-gone").await), NotResumableState::Unknown);
    assert!(db.numbers("run-gone").await.is_empty());
    assert_eq!(refused(store.remove("run-gone").await), NotResumableState::Unknown);
    assert_eq!(refused(store.remove("../etc").await), NotResumableState::Unknown);

    // Held by a live journal, here or in another process: not removed.
    let journal = store.create("run-held", header("run-held")).await.unwrap();
    assert_eq!(refused(store.remove("run-held").await), NotResumableState::Busy);
    assert_eq!(refused(db.store().remove("run-held").await), NotResumableState::Busy);
    drop(journal);
    // Dropped without a commit: interrupted, and removable.
    wait_for_state(&store, "run-held", RunState::Interrupted).await;
    db.store().remove("run-held").await.unwrap();
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_is_claimed_by_another_store_and_goes_on() {
    let Some(db) = database("claim").await else { return };
    let first = db.store();
    paused_run(&first, "run-p", 3).await;
    let before = first.load("run-p").await.unwrap().lines;

    let second = db.store();
    let (got, mut journal) = second.claim("run-p").await.unwrap();
    assert_eq!(got, before);
    // Held by the claim: running for everyone, and not claimable.
    assert_eq!(first.load("run-p").await.unwrap().state, RunState::Running);
    assert_eq!(refused(first.claim("run-p").await), NotResumableState::Busy);
    journal.append(text(3..5)).await.unwrap();
    journal.commit(RunState::Paused).await.unwrap();

    // Paused again: claimable again, from the first store this time.
    let (got, mut journal) = first.claim("run-p").await.unwrap();
    journal.append(text(5..6)).await.unwrap();
    journal.commit(RunState::Completed).await.unwrap();
    drop(journal);

    let run = second.load("run-p").await.unwrap();
    assert_eq!(run.state, RunState::Completed);
    assert_eq!(run.lines[..got.len()], got[..]);
    let states: Vec<String> = run.lines.iter().filter_map(|l| state_of(l)).collect();
    assert_eq!(states, ["paused", "running", "paused", "running", "completed"]);
    // Numbering went on across claims: 1 header, 6 lines, 5 states.
    assert_eq!(db.numbers("run-p").await, (0..12).collect::<Vec<i64>>());
    assert_eq!(refused(second.claim("run-p").await), NotResumableState::State(RunState::Completed));
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_over_the_bound_is_refused_before_its_rows_are_read() {
    // Rows written to the table by something other than codemode: 1,100
    // lines of 1 MB (stored compressed, a few KB), 1.1 GB to read back.
    let Some(db) = database("over_bound").await else { return };
    let store = db.store();
    paused_run(&store, "run-big", 2).await;
    db.admin
        .execute(
            "INSERT INTO codemode_journal (run_id, n, line)
             SELECT 'run-big', 1000 + i, repeat('x', 1000000) FROM generate_series(1, 1100) AS i",
            &[],
        )
        .await
        .unwrap();
    for result in [store.load("run-big").await.map(|_| ()), store.claim("run-big").await.map(|_| ())] {
        let message = error(result).to_string();
        assert!(message.contains("1101 lines") || message.contains("lines and 1049 MiB"), "{message}");
        assert!(message.contains("1024 MiB a journal is read with"), "{message}");
    }
    // Still paused and whole: nothing was taken.
    db.admin
        .execute("DELETE FROM codemode_journal WHERE run_id = 'run-big' AND n >= 1000", &[])
        .await
        .unwrap();
    assert_eq!(store.load("run-big").await.unwrap().state, RunState::Paused);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_claims_of_one_run_one_wins() {
    let Some(db) = database("double_claim").await else { return };
    let (a, b) = (db.store(), db.store());
    // Both stores connected and migrated first, so the claims race for real.
    a.list().await.unwrap();
    b.list().await.unwrap();
    for round in 0..10 {
        let run_id = format!("run-race-{round}");
        paused_run(&a, &run_id, 1).await;
        let (ra, rb) = tokio::join!(a.claim(&run_id), b.claim(&run_id));
        let (winner, loser) = match (ra, rb) {
            (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
            (Ok(_), Ok(_)) => panic!("round {round}: both claims won"),
            (Err(x), Err(y)) => panic!("round {round}: both claims lost: {x:?} {y:?}"),
        };
        assert_eq!(refused::<()>(Err(loser)), NotResumableState::Busy, "round {round}");
        let (_, mut journal) = winner;
        journal.commit(RunState::Completed).await.unwrap();
    }
    // Two tasks of one store (one process) claiming at once: one wins too.
    paused_run(&a, "run-same", 1).await;
    let (r1, r2) = tokio::join!(a.claim("run-same"), a.claim("run-same"));
    assert!(r1.is_ok() != r2.is_ok(), "exactly one claim wins");
    assert_eq!(if r1.is_err() { refused(r1) } else { refused(r2) }, NotResumableState::Busy);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_unknown_ended_and_interrupted_runs() {
    let Some(db) = database("claim_refused").await else { return };
    let store = db.store();
    assert_eq!(refused(store.claim("run-nobody").await), NotResumableState::Unknown);
    assert_eq!(refused(store.claim("").await), NotResumableState::Unknown);
    assert_eq!(refused(store.load("run-nobody").await), NotResumableState::Unknown);

    for state in [RunState::Completed, RunState::Failed, RunState::TimedOut, RunState::Cancelled] {
        let run_id = format!("run-{state}").replace('_', "-");
        let mut journal = store.create(&run_id, header(&run_id)).await.unwrap();
        journal.commit(state).await.unwrap();
        drop(journal);
        assert_eq!(refused(db.store().claim(&run_id).await), NotResumableState::State(state));
    }

    // Running and held: busy. Its journal dropped without a commit (the
    // process gave up on it): interrupted, and recovered by a claim; of
    // two claims, one.
    let journal = store.create("run-dropped", header("run-dropped")).await.unwrap();
    assert_eq!(refused(db.store().claim("run-dropped").await), NotResumableState::Busy);
    drop(journal);
    wait_for_state(&store, "run-dropped", RunState::Interrupted).await;
    let (a, b) = (db.store(), db.store());
    let (first, second) = tokio::join!(a.claim("run-dropped"), b.claim("run-dropped"));
    assert_eq!(u8::from(first.is_ok()) + u8::from(second.is_ok()), 1, "one claim wins");
    let loser = if first.is_ok() { second.map(|_| ()) } else { first.map(|_| ()) };
    assert_eq!(refused(loser), NotResumableState::Busy);
    db.drop_schema().await;
}

/// Polls `load` until the run reads `state` (a dropped journal lets its
/// run go on a task).
async fn wait_for_state(store: &PostgresStore, run_id: &str, state: RunState) {
    let start = Instant::now();
    loop {
        let now = store.load(run_id).await.unwrap().state;
        if now == state {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "run {run_id} stayed {now}, expected {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Not a test on its own: the process `a_killed_holder_frees_its_run`
/// starts and kills. Creates the run named in the environment, says
/// `HELD`, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper process for a_killed_holder_frees_its_run"]
async fn holder_process() {
    let (Ok(url), Ok(run_id)) =
        (std::env::var("CODEMODE_TEST_HOLDER_URL"), std::env::var("CODEMODE_TEST_HOLDER_RUN"))
    else {
        return;
    };
    let store = PostgresStore::new(&url).unwrap();
    let mut journal = store.create(&run_id, header(&run_id)).await.unwrap();
    journal.append(text(0..2)).await.unwrap();
    journal.commit(RunState::Running).await.unwrap();
    println!("HELD");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_frees_its_run() {
    let Some(db) = database("killed_holder").await else { return };
    let store = db.store();
    store.list().await.unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["journal_postgres::holder_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("CODEMODE_TEST_HOLDER_URL", &db.url)
        .env("CODEMODE_TEST_HOLDER_RUN", "run-killed")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let held = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l.trim_end().ends_with("HELD"))
    });
    let held = tokio::time::timeout(Duration::from_secs(30), held).await;
    if !matches!(held, Ok(Ok(true))) {
        let _ = child.kill();
        panic!("the holder process did not hold the run");
    }
    // Alive: the run is running and busy.
    assert_eq!(store.load("run-killed").await.unwrap().state, RunState::Running);
    assert_eq!(refused(store.claim("run-killed").await), NotResumableState::Busy);

    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    // The server notices the closed connection and frees the lock.
    wait_for_state(&store, "run-killed", RunState::Interrupted).await;
    let run = store.load("run-killed").await.unwrap();
    assert_eq!(run.lines.len(), 1 + 2 + 1, "what it committed is there");
    // Any process takes it over (docs/JOURNAL.md, "Recovery"), once.
    let (lines, journal) = store.claim("run-killed").await.unwrap();
    assert_eq!(lines.len(), 1 + 2 + 1);
    assert_eq!(refused(db.store().claim("run-killed").await), NotResumableState::Busy);
    drop(journal);
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_connection_drops_takes_its_runs_again() {
    let Some(db) = database("cut_holder").await else { return };
    let store = db.store();
    let other = db.store();
    let mut journal = store.create("run-cut", header("run-cut")).await.unwrap();
    assert_eq!(other.load("run-cut").await.unwrap().state, RunState::Running);
    // End the holding session, as a cut network or a server restart would.
    let pid = db.holder_pid("run-cut").await.expect("a session holds the run");
    db.admin.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    // The holder connects again and takes its run again.
    let start = Instant::now();
    loop {
        match db.holder_pid("run-cut").await {
            Some(now) if now != pid => break,
            _ => {}
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the run was not held again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(other.load("run-cut").await.unwrap().state, RunState::Running);
    assert_eq!(refused(other.claim("run-cut").await), NotResumableState::Busy);
    journal.append(text(0..1)).await.unwrap();
    journal.commit(RunState::Paused).await.unwrap();
    drop(journal);
    let (_, mut journal) = other.claim("run-cut").await.unwrap();
    journal.commit(RunState::Completed).await.unwrap();
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_when_stores_start_together() {
    let Some(db) = database("migrations").await else { return };
    let stores: Vec<PostgresStore> = (0..4).map(|_| db.store()).collect();
    let results = futures::future::join_all(stores.iter().map(|s| s.list())).await;
    for r in results {
        assert!(r.unwrap().is_empty());
    }
    let versions: Vec<i32> = db
        .admin
        .query("SELECT version FROM codemode_schema ORDER BY version", &[])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2, 3]);
    // Again, from a new store: nothing to do.
    db.store().list().await.unwrap();

    // A database a newer codemode migrated is refused.
    db.admin.batch_execute("INSERT INTO codemode_schema (version) VALUES (99)").await.unwrap();
    let err = db.store().list().await.unwrap_err().to_string();
    assert!(err.contains("schema version 99, newer than this codemode knows (3)"), "{err}");
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_where_and_never_the_password() {
    let Some(db) = database("errors").await else { return };
    // The right server, a wrong password.
    let url = db.url.replacen("codemode_test:codemode_test@", "codemode_test:hunter2-secret@", 1);
    if url != db.url {
        let err = PostgresStore::new(&url).unwrap().list().await.unwrap_err().to_string();
        assert!(err.contains("PostgreSQL codemode_test@") && err.contains("cannot connect"), "{err}");
        assert!(err.contains("password authentication failed"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
    // No server there.
    let err = error(
        PostgresStore::new("postgres://u:hunter2-secret@127.0.0.1:1/nowhere").unwrap().claim("run-x").await,
    )
    .to_string();
    assert!(err.starts_with("PostgreSQL nowhere@127.0.0.1:1: cannot connect"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    db.drop_schema().await;
}

/// The store's connections for `app` and whether each uses TLS.
async fn tls_of(db: &Db, app: &str) -> Vec<bool> {
    db.admin
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_verify_the_server() {
    let Some(db) = database("tls").await else { return };
    let ca = match std::env::var("CODEMODE_TEST_POSTGRES_CA") {
        Ok(ca) if !ca.is_empty() => ca,
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CODEMODE_TEST_POSTGRES_CA is not set under CI: .ci/run sets it"
            );
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED journal_postgres::tls: CODEMODE_TEST_POSTGRES_CA is not set (`bash .ci/run postgres`) ***\n"
            );
            return;
        }
    };
    let app = format!("codemode-tls-{}", db.schema);
    let url = |params: &str| format!("{}&application_name={app}&{params}", db.url);

    // Verified against the test CA, by IP address and by name.
    let store = PostgresStore::new(&url(&format!("sslmode=verify-full&sslrootcert={ca}"))).unwrap();
    paused_run(&store, "run-tls", 1).await;
    let by_name = url(&format!("sslmode=require&sslrootcert={ca}")).replacen("@127.0.0.1:", "@localhost:", 1);
    let (_, mut journal) = PostgresStore::new(&by_name).unwrap().claim("run-tls").await.unwrap();
    let sessions = tls_of(&db, &app).await;
    assert!(!sessions.is_empty() && sessions.iter().all(|tls| *tls), "{sessions:?}");
    journal.commit(RunState::Completed).await.unwrap();
    drop((journal, store));

    // The system's roots do not know the test CA: refused, saying why.
    let err = error(PostgresStore::new(&url("sslmode=verify-full")).unwrap().list().await).to_string();
    assert!(err.contains("cannot connect") && err.to_lowercase().contains("certificate"), "{err}");

    // sslmode=disable: no TLS.
    let app_plain = format!("{app}-plain");
    let plain =
        PostgresStore::new(&format!("{}&application_name={app_plain}&sslmode=disable", db.url)).unwrap();
    assert_eq!(plain.load("run-tls").await.unwrap().state, RunState::Completed);
    let sessions = tls_of(&db, &app_plain).await;
    assert!(!sessions.is_empty() && sessions.iter().all(|tls| !*tls), "{sessions:?}");
    db.drop_schema().await;
}

// ---------------------------------------------------------------------------
// Engines sharing the store, as replicas would: a run paused on one is
// resumed on another, and two resumes at once are serialized.

mod engines {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use codemode::journal::Decided;
    use codemode::run::RunOptions;
    use codemode::{
        Engine, Program, Tool, ToolSpec, approval::PauseApprover, receipt::CallStatus, receipt::Decision,
        receipt::ErrorKind, receipt::RunStatus, tool::ToolContext, tool::ToolFuture, tool::ToolOutput,
    };
    use serde_json::{Value, json};

    /// `slow_write {ms}`: a writer (it needs an approval) that waits `ms`
    /// and counts its calls.
    struct SlowWrite(Arc<AtomicUsize>);
    impl Tool for SlowWrite {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new("slow_write", "Writes slowly.", json!({"type": "object"}))
        }
        fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                Ok(ToolOutput::new(json!({"n": n})))
            })
        }
    }

    /// A replica: its own workspace and its own store over the shared
    /// database.
    fn replica(url: &str, counter: &Arc<AtomicUsize>) -> (Engine, tempfile::TempDir) {
        let ws = crate::common::workspace();
        let store = codemode_journal_postgres::PostgresStore::new(url).unwrap();
        let engine = crate::common::engine_builder()
            .workspace(ws.path())
            .approver(PauseApprover)
            .journal(Arc::new(store))
            .tool(SlowWrite(counter.clone()))
            .build()
            .unwrap();
        (engine, ws)
    }

    const PROGRAM: &str = r#"
        const r = await tools.read({path: "a.txt"});
        const w = await tools.slow_write({ms: MS, text: r.content});
        return {n: w.content.n, luck: Math.random() < 2};
    "#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_paused_on_one_replica_resumes_on_another() {
        let Some(db) = super::database("engine_resume").await else { return };
        let counter = Arc::new(AtomicUsize::new(0));
        let (one, _ws1) = replica(&db.url, &counter);
        let (two, _ws2) = replica(&db.url, &counter);
        let paused = one.execute(Program::new(PROGRAM.replace("MS", "0"))).await;
        assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
        assert_eq!(paused.pending[0].seq, 2);
        drop(one); // the first replica goes away
        // Replicas here are two workspaces: the resume says it may go on
        // in another.
        let options = RunOptions::default().any_workspace();
        let done = two
            .start_resume_with(&paused.run_id, &[(2, Decided::Allow)], options)
            .await
            .unwrap()
            .wait()
            .await;
        assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
        assert_eq!(done.value["n"], 1);
        assert_eq!(counter.load(Ordering::SeqCst), 1, "the write ran once");
        let calls: Vec<(Decision, CallStatus)> = done.calls.iter().map(|c| (c.decision, c.status)).collect();
        assert_eq!(calls, [(Decision::Auto, CallStatus::Ok), (Decision::Approved, CallStatus::Ok)]);
        let again = two.resume(&paused.run_id, &[(2, Decided::Allow)]).await;
        assert_eq!(again.error.unwrap().kind, ErrorKind::NotResumable);
        db.drop_schema().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_replicas_resuming_one_run_at_once_the_database_lets_one() {
        let Some(db) = super::database("engine_double").await else { return };
        let counter = Arc::new(AtomicUsize::new(0));
        let (one, _ws1) = replica(&db.url, &counter);
        let (two, _ws2) = replica(&db.url, &counter);
        let paused = one.execute(Program::new(PROGRAM.replace("MS", "800"))).await;
        assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
        let decisions = [(2, Decided::Allow)];
        let (a, b) =
            tokio::join!(one.resume(&paused.run_id, &decisions), two.resume(&paused.run_id, &decisions));
        let (winner, loser) = if a.status == RunStatus::Completed { (a, b) } else { (b, a) };
        assert_eq!(winner.status, RunStatus::Completed, "{:?}", winner.error);
        let e = loser.error.expect("the other resume is refused");
        assert_eq!(e.kind, ErrorKind::NotResumable, "{}", e.message);
        // Usually the loser finds the run held; on a loaded machine the
        // winner may have ended before the loser claimed, and the loser
        // then finds it ended: either way it ran once.
        assert!(
            e.message.contains("held by another process") || e.message.contains("completed"),
            "{}",
            e.message
        );
        assert_eq!(counter.load(Ordering::SeqCst), 1, "the write ran once");
        db.drop_schema().await;
    }
}

/// The CLI with `--journal postgres://...`: paused in one process and
/// workspace, resumed in another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_pauses_into_postgres_and_another_process_resumes() {
    let Some(db) = database("cli").await else { return };
    let (first, second) = (crate::common::workspace(), crate::common::workspace());
    for ws in [&first, &second] {
        std::fs::write(
            ws.path().join("p.js"),
            "await tools.write({path: 'pg.txt', content: 'pg'}); return 7;",
        )
        .unwrap();
    }
    let url = db.url.clone();
    let run = crate::cli::codemode(
        &["run", "p.js", "--approve", "pause", "--journal", &url, "--json"],
        "",
        first.path(),
    );
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let paused: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let run_id = paused["run_id"].as_str().unwrap();
    assert!(!crate::common::runs_dir(first.path()).join(run_id).join("journal.jsonl").exists());
    let resumed = crate::cli::codemode(
        &["resume", run_id, "--allow", "1", "--journal", &url, "--json"],
        "",
        second.path(),
    );
    // Made in another workspace: refused, and still paused.
    assert_eq!(resumed.status.code(), Some(1), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(!second.path().join("pg.txt").exists());
    let resumed = crate::cli::codemode(
        &["resume", run_id, "--allow", "1", "--any-workspace", "--journal", &url, "--json"],
        "",
        second.path(),
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let done: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(done["value"], 7);
    assert_eq!(std::fs::read_to_string(second.path().join("pg.txt")).unwrap(), "pg");
    let listed = crate::cli::codemode(&["runs", "list", "--journal", &url], "", second.path());
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(run_id),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    db.drop_schema().await;
}

impl Db {
    /// Run `run_id`'s journal lines, in order, each ending in a newline.
    pub(crate) async fn journal_text(&self, run_id: &str) -> String {
        let rows = self
            .admin
            .query("SELECT line FROM codemode_journal WHERE run_id = $1 ORDER BY n", &[&run_id])
            .await
            .unwrap();
        rows.into_iter().map(|r| r.get::<_, String>(0) + "\n").collect()
    }

    /// The ids of the runs in the test's schema, oldest first.
    pub(crate) async fn run_ids(&self) -> Vec<String> {
        let rows = self
            .admin
            .query("SELECT run_id FROM codemode_runs ORDER BY run_id", &[])
            .await
            .unwrap_or_default();
        rows.into_iter().map(|r| r.get(0)).collect()
    }
}
