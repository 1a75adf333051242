//! [`Syncer`]: the fsyncs of ended runs' journals, off the run's path.
//!
//! A run that ended has its journal written (its last `state` line is in
//! the file, other processes read it) when its receipt comes back; the
//! fsync that makes it durable against a crash of the machine is done here,
//! by a few threads of the store, so the receipt does not wait for the disk
//! and runs that end together share the filesystem's journal commit. The
//! syncer's drop waits for every queued fsync (docs/JOURNAL.md,
//! "Guarantees"). A paused run does not come here: its journal is synced
//! before the pause is reported.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Threads fsyncing at once, at most: concurrent fsyncs on one filesystem
/// share its journal commits, and a few are enough to keep up with runs
/// that end by the thousand.
const MAX_THREADS: usize = 4;

/// Stack of a sync thread, in bytes: it only calls `fdatasync`.
const THREAD_STACK: usize = 64 * 1024;

/// Queues files to fsync and fsyncs them on its own threads (started on
/// first use, up to [`MAX_THREADS`]). Dropping it waits until every queued
/// file is synced.
pub(crate) struct Syncer {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Inner {
    state: Mutex<State>,
    /// Signalled when a file is queued or the syncer closes.
    work: Condvar,
    /// Signalled when a file has been synced.
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(File, PathBuf)>,
    /// Files queued or being synced.
    pending: usize,
    /// Threads started, and how many of them wait for work.
    threads: usize,
    idle: usize,
    closing: bool,
    /// Files synced so far (for tests).
    synced: u64,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer").field("pending", &self.lock().pending).finish_non_exhaustive()
    }
}

impl Default for Syncer {
    fn default() -> Self {
        Syncer {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                done: Condvar::new(),
            }),
            threads: Mutex::new(Vec::new()),
        }
    }
}

impl Syncer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `file` (the journal at `path`, for messages) to be fsync'd;
    /// returns at once. A failed fsync is logged (the run's receipt has
    /// already been returned).
    pub(crate) fn push(&self, file: File, path: PathBuf) {
        let mut state = self.lock();
        state.queue.push_back((file, path));
        state.pending += 1;
        if state.idle == 0 && state.threads < MAX_THREADS {
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("codemode-journal-sync".into())
                .stack_size(THREAD_STACK)
                .spawn(move || sync_thread(&inner));
            match spawned {
                Ok(handle) => {
                    state.threads += 1;
                    self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(handle);
                }
                Err(e) if state.threads == 0 => {
                    // No thread to do it: sync here rather than never.
                    let (file, path) = state.queue.pop_back().expect("just queued");
                    state.pending -= 1;
                    drop(state);
                    tracing::warn!("no journal sync thread ({e}); syncing {} in place", path.display());
                    sync_one(&file, &path);
                    self.lock().synced += 1;
                    return;
                }
                Err(_) => {}
            }
        }
        drop(state);
        self.inner.work.notify_one();
    }

    /// Waits until every file queued so far is synced.
    #[cfg(test)]
    pub(crate) fn wait(&self) {
        let mut state = self.lock();
        while state.pending > 0 {
            state = self.inner.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Files synced so far.
    #[cfg(test)]
    pub(crate) fn synced(&self) -> u64 {
        self.lock().synced
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.lock().closing = true;
        self.inner.work.notify_all();
        // Each thread syncs what is queued before it ends.
        for handle in self.threads.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = handle.join();
        }
    }
}

fn sync_thread(inner: &Inner) {
    let lock = || inner.state.lock().unwrap_or_else(|e| e.into_inner());
    let mut state = lock();
    loop {
        if let Some((file, path)) = state.queue.pop_front() {
            drop(state);
            sync_one(&file, &path);
            drop(file);
            state = lock();
            state.pending -= 1;
            state.synced += 1;
            inner.done.notify_all();
            continue;
        }
        if state.closing {
            return;
        }
        state.idle += 1;
        state = inner.work.wait(state).unwrap_or_else(|e| e.into_inner());
        state.idle -= 1;
    }
}

fn sync_one(file: &File, path: &std::path::Path) {
    if let Err(e) = file.sync_data() {
        tracing::warn!("cannot sync the journal {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_waits_for_every_queued_file() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = Arc::new(Syncer::default());
        for i in 0..50 {
            let path = dir.path().join(format!("{i}.txt"));
            std::fs::write(&path, "x\n").unwrap();
            syncer.push(File::open(&path).unwrap(), path);
        }
        syncer.wait();
        assert_eq!(syncer.synced(), 50);
        assert!(syncer.lock().threads <= MAX_THREADS);
        // And drop, with files still queued, syncs them before it returns.
        let syncer = Syncer::default();
        let counter = syncer.inner.clone();
        for i in 0..20 {
            let path = dir.path().join(format!("{i}.txt"));
            syncer.push(File::open(&path).unwrap(), path);
        }
        drop(syncer);
        let state = counter.state.lock().unwrap();
        assert_eq!((state.synced, state.pending), (20, 0));
    }
}
