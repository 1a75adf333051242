//! Batches kept in a journal store, so that any number of worker processes
//! on any machines sharing the store run one batch between them
//! (`codemode batch submit`, `batch work`, `batch results`; docs/BATCH.md,
//! "Many workers").
//!
//! A batch is one program and its input lines. Each line is run once, as
//! its own run, by the worker that claimed it; a worker's claims last as
//! long as the worker does (the PostgreSQL store ties them to a lock the
//! database frees when the worker's session ends), so the lines of a
//! worker that died are claimed again by another, which recovers their
//! runs under the recovery rules of runs (docs/JOURNAL.md, "Recovery").
//!
//! The store's side is [`BatchQueue`] (what a store that can share batches
//! offers, [`JournalStore::batch_queue`](super::JournalStore::batch_queue))
//! and [`BatchWorker`] (one worker's claims); what runs a line is the
//! caller's.

use super::StoreFuture;

/// A batch to submit: its program and its input lines.
#[derive(Debug, Clone)]
pub struct NewBatch {
    /// 1 to 100 letters, digits, `.`, `_` or `-`, not starting with `.`.
    pub batch_id: String,
    /// The program's name (its file name: `.ts` makes it TypeScript).
    pub program_name: String,
    /// The program's source text.
    pub program_source: String,
    /// What the batch is of, for people (JSON text: where the program and
    /// input were read from and their SHA-256); kept as given.
    pub about: String,
    /// The input lines: (line number in the input, 1-based; the line's
    /// JSON value as text), in input order.
    pub lines: Vec<(u64, String)>,
}

/// A submitted batch and where its lines stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchInfo {
    /// The batch's id.
    pub batch_id: String,
    /// [`NewBatch::program_name`] as submitted.
    pub program_name: String,
    /// [`NewBatch::program_source`] as submitted.
    pub program_source: String,
    /// [`NewBatch::about`] as submitted.
    pub about: String,
    /// Seconds since the Unix epoch.
    pub created_unix: i64,
    /// How many lines the batch has.
    pub lines: u64,
    /// Lines no worker claimed yet.
    pub pending: u64,
    /// Lines claimed by a worker that is alive.
    pub running: u64,
    /// Lines claimed by a worker that is gone: the next claim takes them.
    pub orphaned: u64,
    /// Lines whose run paused, waiting on a person.
    pub paused: u64,
    /// Lines whose run completed.
    pub completed: u64,
    /// Lines whose run ended any other way (`failed`, `timed_out`,
    /// `cancelled`, `not_resumed`).
    pub failed: u64,
}

impl BatchInfo {
    /// Whether no line is left to run or running: each ended or paused.
    pub fn finished(&self) -> bool {
        self.pending + self.running + self.orphaned == 0
    }
}

/// A line a worker claimed: it is this worker's to run until it ends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedLine {
    /// The line number in the input (1-based).
    pub line: u64,
    /// The line's JSON value, as text.
    pub input: String,
    /// The line's run: fixed by its first claim, durable before the run
    /// starts, so whoever claims the line again finds the run.
    pub run_id: String,
    /// How many times the line was claimed, this claim included: more than
    /// one when a worker died holding it (its run may exist: interrupted,
    /// ended, or paused).
    pub claims: u32,
}

/// A line as it stands in the store: what `batch results` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineResult {
    /// The line number in the input (1-based).
    pub line: u64,
    /// The line's JSON value, as text.
    pub input: String,
    /// `pending`, `claimed`, `paused` or `ended`.
    pub state: String,
    /// The line's run, once claimed.
    pub run_id: Option<String>,
    /// The run's status, once it paused or ended.
    pub status: Option<String>,
    /// The line's output (JSON text: what the worker printed for it), once
    /// it paused or ended.
    pub output: Option<String>,
}

/// Batches a journal store keeps for many workers.
pub trait BatchQueue: Send + Sync {
    /// Stores a new batch with every line `pending`, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when a batch of
    /// this id exists or the store fails.
    fn submit(&self, batch: NewBatch) -> StoreFuture<'_, ()>;

    /// The batch and the counts of its lines.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) for an unknown
    /// batch (the message says so) or when the store fails.
    fn batch<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, BatchInfo>;

    /// Up to `limit` lines after line `after`, in line order: those in
    /// `state` (`pending`, `claimed`, `paused`, `ended`), or all.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn lines<'a>(
        &'a self,
        batch_id: &'a str,
        after: u64,
        limit: u32,
        state: Option<&'a str>,
    ) -> StoreFuture<'a, Vec<LineResult>>;

    /// Whether a line of the batch is still to run or running (`pending` or
    /// `claimed`): a cheap check, on the index of open lines.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn unfinished<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, bool>;

    /// Puts every line that ended other than `completed` (`failed`,
    /// `timed_out`, `cancelled`) back to `pending`, each to get a new run
    /// when claimed (the ended run stays, with its receipt): the numbers
    /// of those lines.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn retry_failed<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, Vec<u64>>;

    /// Joins batch `batch_id` as a worker: from now until the worker is
    /// dropped (or its process ends) the lines it claims are its own.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) for an unknown
    /// batch or when the store fails.
    fn join<'a>(&'a self, batch_id: &'a str) -> StoreFuture<'a, Box<dyn BatchWorker>>;
}

/// One worker of a batch ([`BatchQueue::join`]).
pub trait BatchWorker: Send + Sync {
    /// Claims up to `max` lines, lowest first: lines no worker claimed, and
    /// lines claimed by workers that are gone. Of two workers claiming at
    /// once each gets other lines. A line claimed the first time gets its
    /// run id here; the claim is durable when this returns.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn claim(&self, max: u32) -> StoreFuture<'_, Vec<ClaimedLine>>;

    /// Claims paused line `line` (its pending calls decided, so it can be
    /// resumed): `false` when it is not paused any more (another worker
    /// took it).
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the store
    /// fails.
    fn claim_paused(&self, line: u64) -> StoreFuture<'_, bool>;

    /// Records how this worker's line `line` ended, with its `output`
    /// (JSON text), durably. A `status` of `paused` (its run waits on a
    /// person), `running` (its run is held by another process) or
    /// `not_resumed` (its run could not be resumed) leaves the line
    /// `paused`: not final, taken up again by a later worker
    /// ([`BatchWorker::claim_paused`]); any other status ends it.
    ///
    /// # Errors
    /// [`StoreError::Failed`](super::StoreError::Failed) when the line is
    /// no longer this worker's (it was taken over while this worker's
    /// session to the store was cut) or the store fails.
    fn end<'a>(&'a self, line: u64, run_id: &'a str, status: &'a str, output: String) -> StoreFuture<'a, ()>;
}
