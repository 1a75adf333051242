//! Cancels from another process (`codemode runs cancel`, a replica's
//! `{"cancel": RUN_ID}`): while an engine runs journaled runs, one task per
//! engine asks its journal store every [`POLL`] which of them a cancel was
//! requested for ([`JournalStore::cancel_requests`]: one read for all of
//! them), and cancels those as [`Run::cancel`](super::Run::cancel) does.
//! docs/JOURNAL.md, "Waiting and cancelling".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::journal::JournalStore;
use crate::vm::clock::RunClock;

/// How often an engine holding runs asks its store for cancel requests:
/// a cancel is noticed within this, plus the store's read.
pub(crate) const POLL: Duration = Duration::from_millis(300);

/// The journaled runs an engine runs now, by id, and whether its poll is
/// going.
#[derive(Default)]
pub(crate) struct CancelWatch {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    runs: HashMap<Arc<str>, Weak<RunClock>>,
    polling: bool,
}

/// Keeps a run watched while alive.
pub(crate) struct Watched {
    watch: Arc<CancelWatch>,
    run_id: Arc<str>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut held = self.watch.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.runs.remove(&self.run_id);
    }
}

impl CancelWatch {
    /// Watches run `run_id` (cancelled through `clock`) for cancel requests
    /// in `store` until the guard drops, starting the poll on `tools` when
    /// it is not going.
    pub(crate) fn watch(
        self: &Arc<Self>,
        store: &Arc<dyn JournalStore>,
        tools: &Handle,
        run_id: &Arc<str>,
        clock: &Arc<RunClock>,
    ) -> Watched {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.runs.insert(run_id.clone(), Arc::downgrade(clock));
        if !held.polling {
            held.polling = true;
            tools.spawn(poll(self.clone(), store.clone()));
        }
        Watched { watch: self.clone(), run_id: run_id.clone() }
    }
}

/// Every [`POLL`], cancels the watched runs `store` has a cancel request
/// for; ends when no run is watched (the next watched run starts it again).
async fn poll(watch: Arc<CancelWatch>, store: Arc<dyn JournalStore>) {
    loop {
        tokio::time::sleep(POLL).await;
        let ids: Vec<String> = {
            let mut held = watch.held.lock().unwrap_or_else(PoisonError::into_inner);
            if held.runs.is_empty() {
                held.polling = false;
                return;
            }
            held.runs.keys().map(|id| id.to_string()).collect()
        };
        let asked = match store.cancel_requests(&ids).await {
            Ok(asked) => asked,
            Err(e) => {
                tracing::warn!("could not read cancel requests from {}: {e}", store.describe());
                continue;
            }
        };
        let held = watch.held.lock().unwrap_or_else(PoisonError::into_inner);
        for id in asked {
            if let Some(clock) = held.runs.get(id.as_str()).and_then(Weak::upgrade) {
                tracing::info!("run {id}: cancelled at the request of another process");
                clock.cancel();
            }
        }
    }
}
