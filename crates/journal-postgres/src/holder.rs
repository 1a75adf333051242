//! Who holds a run: one connection per store on which this process takes a
//! session-level advisory lock (`pg_try_advisory_lock`) for every run it
//! runs, resumes or removes. The database frees a session's locks when the
//! session ends, so a process that dies (killed, crashed, cut off) lets its
//! runs go without anyone cleaning up, and other processes see them as
//! interrupted and may recover them (a takeover, docs/JOURNAL.md
//! "Recovery").
//!
//! Advisory locks are re-entrant within a session, so the holder also keeps
//! the set of run ids this store holds: a second claim of a run from this
//! same process is refused here, before the database would grant it again.
//!
//! If the connection ends while the process lives (a restart of the
//! server, a network cut), the locks go with it; the holder connects again
//! at once and takes them again. Until then other processes read those
//! runs as interrupted (and could remove them: a later commit then fails
//! rather than write to a run that is gone; or recover them: a later
//! append then fails on the line numbers the recovery wrote, but calls
//! started meanwhile ran in both, which docs/JOURNAL.md says).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use tokio_postgres::types::Type;
use tokio_postgres::{Client, Config};

use super::pg_message;
use super::tls::{self, Tls};
use codemode::journal::StoreError;

/// Session settings for the holder's connection: the server notices a
/// vanished client (its machine lost, its network cut) within about a
/// minute instead of the operating system's two hours, and never ends the
/// session for being idle. Applied one by one; a server that refuses one
/// (an older version, a managed service) keeps its own.
const SESSION_SETTINGS: &[&str] = &[
    "SET tcp_keepalives_idle = 30",
    "SET tcp_keepalives_interval = 10",
    "SET tcp_keepalives_count = 3",
    "SET idle_session_timeout = 0",
];

pub(super) struct Holder {
    config: Config,
    tls: Tls,
    place: String,
    /// The holding session; `None` until first use.
    conn: tokio::sync::Mutex<Option<Client>>,
    held: Mutex<Held>,
    /// Itself, for the connection's end to reconnect.
    me: Weak<Holder>,
}

#[derive(Default)]
struct Held {
    /// Run ids this store holds or is taking.
    runs: HashSet<String>,
    /// Keys locked on the current session, with how many times.
    locked: HashMap<i64, u32>,
    /// Keys to unlock on the current session (holds dropped without an
    /// awaited release).
    release: Vec<i64>,
}

impl Holder {
    pub(super) fn new(config: Config, tls: Tls, place: String) -> Arc<Holder> {
        Arc::new_cyclic(|me| Holder {
            config,
            tls,
            place,
            conn: tokio::sync::Mutex::new(None),
            held: Mutex::new(Held::default()),
            me: me.clone(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, what: impl std::fmt::Display, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Failed(format!("PostgreSQL {}: {what}: {}", self.place, pg_message(e)))
    }

    /// Takes run `run_id` (lock `key`) for this process: `None` when
    /// another process, or another task of this one, holds it.
    pub(super) async fn hold(self: &Arc<Self>, run_id: &str, key: i64) -> Result<Option<Hold>, StoreError> {
        if !self.held().runs.insert(run_id.to_owned()) {
            return Ok(None);
        }
        let got = self.try_lock(key).await;
        if !matches!(got, Ok(true)) {
            self.held().runs.remove(run_id);
        }
        Ok(got?.then(|| Hold { holder: self.clone(), run_id: run_id.to_owned(), key, released: false }))
    }

    /// Takes the first of `keys` no session holds (each key a slot of a
    /// shared limit) as hold `name#key`: `None` when every one is held.
    /// Keys this session holds already are left out (advisory locks are
    /// re-entrant within a session, so asking again would succeed).
    pub(super) async fn hold_any(
        self: &Arc<Self>,
        name: &str,
        keys: &[i64],
    ) -> Result<Option<Hold>, StoreError> {
        let mut slot = self.conn.lock().await;
        let client = self.ready(&mut slot).await?;
        let free: Vec<i64> = {
            let held = self.held();
            keys.iter().copied().filter(|k| !held.locked.contains_key(k)).collect()
        };
        if free.is_empty() {
            return Ok(None);
        }
        // A filter over a function scan, pulled one row at a time by the
        // LIMIT: the locks are tried in order until one is granted.
        let got: Option<i64> = client
            .query_typed(
                "SELECT k FROM unnest($1::bigint[]) AS k WHERE pg_try_advisory_lock(k) LIMIT 1",
                &[(&free, Type::INT8_ARRAY)],
            )
            .await
            .map_err(|e| self.fail("cannot take a slot of a shared limit", &e))?
            .first()
            .map(|r| r.get(0));
        let Some(key) = got else { return Ok(None) };
        let run_id = format!("{name}#{key}");
        {
            let mut held = self.held();
            *held.locked.entry(key).or_default() += 1;
            held.runs.insert(run_id.clone());
        }
        Ok(Some(Hold { holder: self.clone(), run_id, key, released: false }))
    }

    async fn try_lock(&self, key: i64) -> Result<bool, StoreError> {
        let mut slot = self.conn.lock().await;
        let client = self.ready(&mut slot).await?;
        let got: bool = client
            .query_typed_one("SELECT pg_try_advisory_lock($1)", &[(&key, Type::INT8)])
            .await
            .map_err(|e| self.fail("cannot take a run's lock", &e))?
            .get(0);
        if got {
            *self.held().locked.entry(key).or_default() += 1;
        }
        Ok(got)
    }

    /// The holding session, connected (again) if need be, with the locks it
    /// lost taken again and the releases owed done.
    async fn ready<'a>(&self, slot: &'a mut Option<Client>) -> Result<&'a Client, StoreError> {
        if slot.as_ref().is_none_or(Client::is_closed) {
            let me = self.me.clone();
            let client = tls::connect(&self.config, &self.tls, "codemode journal holder", move || {
                if let Some(holder) = me.upgrade() {
                    holder.lost();
                }
            })
            .await
            .map_err(|e| self.fail("cannot connect", &e))?;
            for setting in SESSION_SETTINGS {
                if let Err(e) = client.batch_execute(setting).await {
                    tracing::debug!("PostgreSQL {}: `{setting}` refused: {}", self.place, pg_message(&e));
                }
            }
            // The old session's locks and owed releases went with it.
            let relock: Vec<(i64, u32)> = {
                let mut held = self.held();
                held.release.clear();
                held.locked.iter().map(|(k, n)| (*k, *n)).collect()
            };
            for (key, times) in relock {
                for _ in 0..times {
                    let got = client
                        .query_typed_one("SELECT pg_try_advisory_lock($1)", &[(&key, Type::INT8)])
                        .await
                        .map(|r| r.get::<_, bool>(0));
                    if !matches!(got, Ok(true)) {
                        tracing::warn!(
                            "PostgreSQL {}: a run's lock could not be taken again after the connection was lost; other processes may see the run as interrupted",
                            self.place
                        );
                        let mut held = self.held();
                        if let Some(n) = held.locked.get_mut(&key) {
                            *n -= 1;
                            if *n == 0 {
                                held.locked.remove(&key);
                            }
                        }
                    }
                }
            }
            *slot = Some(client);
        }
        let client = slot.as_ref().expect("connected");
        let owed = std::mem::take(&mut self.held().release);
        for key in owed {
            unlock(client, key, &self.place).await;
        }
        Ok(client)
    }

    /// The holding connection ended: if it held runs, connect again now so
    /// they are held again as soon as the server is back.
    fn lost(self: Arc<Self>) {
        if self.held().locked.is_empty() {
            return;
        }
        tracing::warn!(
            "PostgreSQL {}: lost the connection holding this process's runs; connecting again (meanwhile other processes see them as interrupted)",
            self.place
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut slot = self.conn.lock().await;
                if let Err(e) = self.ready(&mut slot).await {
                    tracing::warn!("{e}");
                }
            });
        }
    }

    /// Forgets `run_id`'s hold and owes its unlock.
    fn forget(&self, run_id: &str, key: i64) {
        let mut held = self.held();
        held.runs.remove(run_id);
        if let Some(n) = held.locked.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                held.locked.remove(&key);
            }
            held.release.push(key);
        }
    }

    /// Does the unlocks owed, if the session is still there (if it is not,
    /// its locks are gone already).
    async fn flush(&self) {
        let slot = self.conn.lock().await;
        let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) else {
            self.held().release.clear();
            return;
        };
        let owed = std::mem::take(&mut self.held().release);
        for key in owed {
            unlock(client, key, &self.place).await;
        }
    }
}

async fn unlock(client: &Client, key: i64, place: &str) {
    if let Err(e) = client.query_typed("SELECT pg_advisory_unlock($1)", &[(&key, Type::INT8)]).await {
        // The session is likely gone, and its locks with it.
        tracing::debug!("PostgreSQL {place}: cannot unlock a run: {}", pg_message(&e));
    }
}

/// A run held by this process; let go by [`Hold::release`] or when dropped.
pub(super) struct Hold {
    holder: Arc<Holder>,
    run_id: String,
    key: i64,
    released: bool,
}

impl Hold {
    /// Lets the run go and waits until the database has.
    pub(super) async fn release(mut self) {
        self.released = true;
        self.holder.forget(&self.run_id, self.key);
        self.holder.flush().await;
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.holder.forget(&self.run_id, self.key);
        // Unlocked by a task now when there is a runtime; otherwise by the
        // holder's next use.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let holder = self.holder.clone();
            runtime.spawn(async move { holder.flush().await });
        }
    }
}
