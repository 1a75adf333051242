//! [`Syncer`]: the fsyncs of ended runs' journals, and the whole journals
//! of runs that ended before theirs was made, off the run's path.
//!
//! A run that ended has its journal written (its last `state` line is in
//! the file, other processes read it) when its receipt comes back; the
//! fsync that makes it durable against a crash of the machine is done here,
//! by a few threads of the store, so the receipt does not wait for the disk
//! and runs that end together share the filesystem's journal commit. A run
//! that ended without ever waiting on a call has no journal file yet: its
//! folder and journal are made, written and fsync'd here
//! ([`Syncer::push_new`]). The syncer's drop waits for every queued job
//! (docs/JOURNAL.md, "Guarantees"). A paused run does not come here: its
//! journal is synced before the pause is reported.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Threads fsyncing at once, at most: concurrent fsyncs on one filesystem
/// share its journal commits, and a few are enough to keep up with runs
/// that end by the thousand.
const MAX_THREADS: usize = 4;

/// Stack of a sync thread, in bytes: it only calls `fdatasync`.
const THREAD_STACK: usize = 64 * 1024;

/// Failures kept for [`Syncer::take_failure`], at most: the newest; a
/// process that never asks (a server, whose answers went before) keeps no
/// more than these.
const MAX_FAILURES: usize = 64;

/// Queues journals to fsync or to write whole, and does it on its own threads (started on
/// first use, up to [`MAX_THREADS`]). Dropping it waits until every queued
/// job is done.
pub(crate) struct Syncer {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Inner {
    state: Mutex<State>,
    /// Signalled when a file is queued or the syncer closes.
    work: Condvar,
    /// Signalled when a job is done.
    done: Condvar,
}

/// What a sync thread does.
enum Job {
    /// Fsync the journal file at the path.
    Sync(File, PathBuf),
    /// Make, write and fsync the journal of a run that ended before it
    /// was made.
    Write(NewJournal),
    /// Wait for the sender to send or go, then succeed (tests only: a job
    /// that takes as long as a test wants).
    #[cfg(test)]
    Held(PathBuf, std::sync::mpsc::Receiver<()>),
}

impl Job {
    /// The journal the job is for.
    fn path(&self) -> &Path {
        match self {
            Job::Sync(_, path) => path,
            Job::Write(journal) => &journal.path,
            #[cfg(test)]
            Job::Held(path, _) => path,
        }
    }
}

/// The whole journal of a run that ended before its file was made.
pub(crate) struct NewJournal {
    /// The journal file to make (`<root>/<run_id>/journal.jsonl`).
    pub(crate) path: PathBuf,
    /// What its folder must resolve inside ([`LocalStore`](super::LocalStore)'s
    /// confinement).
    pub(crate) confine: Option<PathBuf>,
    /// Every line, the final `state` line last.
    pub(crate) text: String,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Jobs queued or being done.
    pending: usize,
    /// [`Job::Write`]s queued or being done.
    writes: usize,
    /// The journals of the jobs being done (one entry per job).
    doing: Vec<PathBuf>,
    /// Threads started, and how many of them wait for work.
    threads: usize,
    idle: usize,
    closing: bool,
    /// Jobs done so far, syncs and writes (for tests).
    synced: u64,
    /// The journals whose job failed, with what failed, oldest first (at
    /// most [`MAX_FAILURES`]).
    failures: VecDeque<(PathBuf, String)>,
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
    /// already been returned) and kept for [`Syncer::take_failure`].
    pub(crate) fn push(&self, file: File, path: PathBuf) {
        self.push_job(Job::Sync(file, path));
    }

    /// Queues the whole journal of a run that ended before its file was
    /// made, to be made (its folder too), written and fsync'd; returns at
    /// once. A failure is logged (the run's receipt has already been
    /// returned) and kept for [`Syncer::take_failure`].
    /// [`Syncer::wait_written`] waits for it.
    pub(crate) fn push_new(&self, journal: NewJournal) {
        self.push_job(Job::Write(journal));
    }

    fn push_job(&self, job: Job) {
        let mut state = self.lock();
        if matches!(job, Job::Write(_)) {
            state.writes += 1;
        }
        state.queue.push_back(job);
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
                    // No thread to do it: do it here rather than never.
                    let job = state.queue.pop_back().expect("just queued");
                    state.doing.push(job.path().to_owned());
                    drop(state);
                    tracing::warn!("no journal sync thread ({e}); writing the journal in place");
                    do_job(&self.inner, job);
                    return;
                }
                Err(_) => {}
            }
        }
        drop(state);
        self.inner.work.notify_one();
    }

    /// Waits until every journal queued with [`Syncer::push_new`] so far
    /// is written (or has failed): what lists or reads runs waits for it,
    /// so this process sees the runs it ended.
    pub(crate) fn wait_written(&self) {
        let mut state = self.lock();
        while state.writes > 0 {
            state = self.inner.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until every job queued so far is done: every journal
    /// written and synced.
    pub(crate) fn wait(&self) {
        let mut state = self.lock();
        while state.pending > 0 {
            state = self.inner.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until no job for the journal at `path` is queued or being
    /// done: that journal written and synced (or failed), whatever else
    /// is still queued.
    pub(crate) fn wait_for(&self, path: &Path) {
        let mut state = self.lock();
        while state.doing.iter().any(|p| p == path) || state.queue.iter().any(|j| j.path() == path) {
            state = self.inner.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// What failed for the journal at `path`, when a job of it failed
    /// (and was not asked about before); the failure is forgotten then.
    /// Asked after [`Syncer::wait_for`] (or [`Syncer::wait`]).
    pub(crate) fn take_failure(&self, path: &Path) -> Option<String> {
        let mut state = self.lock();
        let at = state.failures.iter().position(|(p, _)| p == path)?;
        state.failures.remove(at).map(|(_, why)| why)
    }

    /// Jobs done so far.
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
        if let Some(job) = state.queue.pop_front() {
            state.doing.push(job.path().to_owned());
            drop(state);
            do_job(inner, job);
            state = lock();
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

/// Does `job` (dequeued, its path pushed on [`State::doing`]) and counts
/// it done.
fn do_job(inner: &Inner, job: Job) {
    let wrote = matches!(job, Job::Write(_));
    let doing = job.path().to_owned();
    let failed = match job {
        Job::Sync(file, path) => {
            file.sync_data().err().map(|e| (format!("cannot sync the journal {}: {e}", path.display()), path))
        }
        Job::Write(journal) => write_new(&journal)
            .err()
            .map(|e| (format!("cannot write the journal {}: {e}", journal.path.display()), journal.path)),
        #[cfg(test)]
        Job::Held(_, released) => {
            let _ = released.recv();
            None
        }
    };
    if let Some((why, _)) = &failed {
        tracing::warn!("{why}");
    }
    let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((why, path)) = failed {
        if state.failures.len() == MAX_FAILURES {
            state.failures.pop_front();
        }
        state.failures.push_back((path, why));
    }
    if let Some(at) = state.doing.iter().position(|p| *p == doing) {
        state.doing.swap_remove(at);
    }
    state.pending -= 1;
    state.synced += 1;
    if wrote {
        state.writes -= 1;
    }
    inner.done.notify_all();
}

/// Makes the run's folder (0700, confined as the store's are) and its
/// journal file (0600, new), writes every line and fsyncs the file.
fn write_new(journal: &NewJournal) -> std::io::Result<()> {
    let dir = journal.path.parent().expect("a run folder");
    crate::receipt::spill::make_run_dir(dir, journal.confine.as_deref())?;
    let mut options = std::fs::OpenOptions::new();
    options.create_new(true).write(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&journal.path)?;
    file.write_all(journal.text.as_bytes())?;
    file.sync_data()
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

    #[test]
    fn new_journals_are_written_whole_before_wait_written_returns() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let syncer = Syncer::default();
        for i in 0..30 {
            let path = dir.path().join(format!("run-{i}")).join("journal.jsonl");
            syncer.push_new(NewJournal { path, confine: None, text: format!("header {i}\nstate\n") });
        }
        syncer.wait_written();
        for i in 0..30 {
            let path = dir.path().join(format!("run-{i}")).join("journal.jsonl");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("header {i}\nstate\n"));
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // One that cannot be made (its run already has a journal) is
        // logged, and does not hold the wait.
        let taken = dir.path().join("run-0").join("journal.jsonl");
        syncer.push_new(NewJournal { path: taken.clone(), confine: None, text: "other\n".into() });
        syncer.wait_written();
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "header 0\nstate\n");
        assert_eq!(syncer.lock().writes, 0);
    }

    #[test]
    fn waiting_for_one_journal_does_not_wait_for_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = Arc::new(Syncer::default());
        let (release, held) = std::sync::mpsc::channel();
        let slow = dir.path().join("run-slow").join("journal.jsonl");
        syncer.push_job(Job::Held(slow.clone(), held));
        let mine = dir.path().join("run-mine").join("journal.jsonl");
        syncer.push_new(NewJournal { path: mine.clone(), confine: None, text: "mine\n".into() });
        // Returns with the slow job still held (`wait` would hang here).
        syncer.wait_for(&mine);
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine\n");
        assert_eq!(syncer.lock().pending, 1, "the slow job is still going");
        // Waiting for the slow one waits until it is done.
        let waiter = {
            let syncer = syncer.clone();
            std::thread::spawn(move || {
                syncer.wait_for(&slow);
                syncer.lock().pending
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "wait_for returned while the job was held");
        release.send(()).unwrap();
        assert_eq!(waiter.join().unwrap(), 0);
    }

    #[test]
    fn a_failed_journal_is_said_once_to_who_asks_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = Syncer::default();
        let written = dir.path().join("run-a").join("journal.jsonl");
        syncer.push_new(NewJournal { path: written.clone(), confine: None, text: "a\n".into() });
        // Its run folder's place is a file: the folder cannot be made.
        std::fs::write(dir.path().join("run-b"), "not a folder").unwrap();
        let refused = dir.path().join("run-b").join("journal.jsonl");
        syncer.push_new(NewJournal { path: refused.clone(), confine: None, text: "b\n".into() });
        syncer.wait();
        assert_eq!(syncer.take_failure(&written), None);
        let why = syncer.take_failure(&refused).expect("the failure is kept");
        assert!(why.starts_with("cannot write the journal ") && why.contains("run-b"), "{why}");
        assert_eq!(syncer.take_failure(&refused), None, "and said once");
        // A process that never asks keeps the newest MAX_FAILURES only.
        for i in 0..MAX_FAILURES + 5 {
            let path = dir.path().join("run-b").join(format!("{i}"));
            syncer.push_new(NewJournal { path, confine: None, text: String::new() });
        }
        syncer.wait();
        assert_eq!(syncer.lock().failures.len(), MAX_FAILURES);
        // (The first to fail went first; with several threads, that need
        // not be the first queued.)
        let kept = (0..MAX_FAILURES + 5)
            .filter(|i| syncer.take_failure(&dir.path().join("run-b").join(format!("{i}"))).is_some())
            .count();
        assert_eq!(kept, MAX_FAILURES);
    }
}
