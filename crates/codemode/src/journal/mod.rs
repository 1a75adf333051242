//! Durable runs: every run's journal, and where journals are kept.
//!
//! A run writes, as it goes, an append-only journal of JSON lines
//! (`record`): a header (program, catalog, policy and limits digests),
//! every value of the VM's clock and random seed the program read, and each
//! call's request, decision and result. Lines are buffered while the run
//! goes (`writer`) and made durable (fsync'd, or committed) before the run
//! reports `paused`; a run that ends has its journal written when it
//! reports its end, and durable soon after (the local store syncs it on its
//! own threads, and its drop waits for that). [`Engine::resume`](crate::Engine::resume)
//! replays a paused run from its journal in a fresh VM (`replay`):
//! journaled calls are answered from the journal, the decisions are
//! applied, and the run goes on. The format and guarantees are in
//! `docs/JOURNAL.md`.
//!
//! A person's decisions for a paused run's pending calls can be recorded
//! in its journal without running anything ([`record_decisions`],
//! `codemode approve`), for the next resume to apply.
//!
//! Journals live in a [`JournalStore`]: [`LocalStore`] (a folder per run,
//! the default) or the PostgreSQL store of the `codemode-journal-postgres`
//! crate (shared by many codemode processes); [`open_store`] makes a local
//! one from `--journal` or `[journal] url`. [`Runs`]
//! lists, shows and prunes a workspace's runs (journals and receipt
//! folders), by the [`Retention`] of `[journal]`.

pub(crate) mod approvals;
pub mod batch_queue;
mod cancel_marker;
pub(crate) mod completion;
mod credentials;
pub(crate) mod digest;
pub(crate) mod durable;
pub(crate) mod files_seen;
#[cfg(unix)]
pub(crate) mod folder_hold;
pub(crate) mod legacy;
pub(crate) mod local;
pub(crate) mod record;
pub(crate) mod recorder;
pub(crate) mod replay;
mod runs;
pub(crate) use runs::RECEIPT_FILE;
mod settings;
pub mod shared_limits;
mod syncer;
pub(crate) mod undo;
pub(crate) mod writer;

pub use approvals::{
    ApprovalListing, AwaitingCall, RecordedDecision, RecordedDecisions, approval_listing, pending_decisions,
    record_decisions,
};
/// Where run state lives by default: the user's state folder, a folder
/// per workspace.
pub use codemode_base::run_state;
pub use credentials::{MASKED, without_credentials};
#[cfg(unix)]
pub use folder_hold::RunFolderHold;
pub use legacy::{MovedRuns, move_legacy_runs};
pub use local::{LocalStore, state_line};
pub use replay::Decided;

/// Whether a resume could read the journal `lines` (a run's, as
/// [`JournalStore::load`] gives them): `Err` says why not (a damaged
/// line, no header), as the resume would.
///
/// # Errors
/// The journal cannot be resumed from: the reason, naming the line.
pub fn resumable_from(lines: &[String]) -> Result<(), String> {
    replay::Journal::parse(lines).map(|_| ())
}

/// Whether the journal `lines` end with a state line of their own saying
/// `interrupted`: a run moved from an old `.codemode/runs` folder, ended
/// for good, which no resume recovers (a run whose process died reads as
/// interrupted only to the store, which sees the journal is not held).
pub fn ended_interrupted(lines: &[String]) -> bool {
    local::written_state(lines) == Some(RunState::Interrupted)
}
pub use undo::{FILE_PREIMAGE_BYTES, RUN_PREIMAGE_BYTES, UndoLog};

/// Most bytes of one run's journal a store reads back (a local file, or a
/// run's rows in PostgreSQL): 1 GiB. A journal over it was not written by
/// codemode as it stands and is refused before it is read.
pub const MAX_JOURNAL_BYTES: u64 = local::MAX_JOURNAL_BYTES;

/// Most lines of one run's journal a store reads back: 8,000,000.
pub const MAX_JOURNAL_LINES: usize = replay::MAX_LINES;
pub use runs::{
    CallInfo, DecisionInfo, PendingInfo, ProgramInfo, PruneOptions, PruneReason, PruneReport, PrunedRun,
    RunDetails, RunListing, Runs,
};
pub use settings::{
    DEFAULT_KEEP_DAYS, DEFAULT_KEEP_RUNS, JournalSettings, JournalSpec, Retention, open_store,
};

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// The future a store's operation returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where a run stands, as its journal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunState {
    /// A process is running (or resuming) it now.
    Running,
    /// It stopped on calls that need a decision; `codemode resume` goes on.
    Paused,
    /// It ended: the program completed.
    Completed,
    /// It ended: the program failed (threw, hit a limit, diverged on replay).
    Failed,
    /// It ended: its deadline passed.
    TimedOut,
    /// It ended: the host cancelled it.
    Cancelled,
    /// The process running or resuming it ended without pausing or
    /// finishing it (killed, crashed); calls it had in flight may have
    /// partly run. `codemode resume` recovers it (docs/JOURNAL.md,
    /// "Recovery"), except a run moved from an old `.codemode/runs`
    /// folder, whose journal says `interrupted` for good.
    Interrupted,
}

impl RunState {
    /// The lower-case name used in journals and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::TimedOut => "timed_out",
            RunState::Cancelled => "cancelled",
            RunState::Interrupted => "interrupted",
        }
    }

    /// Parses [`RunState::as_str`]'s names.
    pub fn parse(name: &str) -> Option<RunState> {
        Some(match name {
            "running" => RunState::Running,
            "paused" => RunState::Paused,
            "completed" => RunState::Completed,
            "failed" => RunState::Failed,
            "timed_out" => RunState::TimedOut,
            "cancelled" => RunState::Cancelled,
            "interrupted" => RunState::Interrupted,
            _ => return None,
        })
    }

    /// The state a run that ended with `status` is in.
    pub fn of_status(status: crate::receipt::RunStatus) -> RunState {
        match status {
            crate::receipt::RunStatus::Completed => RunState::Completed,
            crate::receipt::RunStatus::Paused => RunState::Paused,
            crate::receipt::RunStatus::TimedOut => RunState::TimedOut,
            crate::receipt::RunStatus::Cancelled => RunState::Cancelled,
            _ => RunState::Failed,
        }
    }

    /// Whether the run has ended for good.
    pub fn is_final(self) -> bool {
        !matches!(self, RunState::Running | RunState::Paused)
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The run cannot be resumed: no journal has its id, it ended, or
    /// another process holds it now. Final: asking
    /// again gives the same answer (except `Busy`, which ends when the
    /// other resume does).
    #[error("{}", not_resumable_message(run_id, *state))]
    NotResumable {
        /// The id asked for.
        run_id: String,
        /// What the store knows of it.
        state: NotResumableState,
    },
    /// The run's journal is there but cannot be read as one (a line that
    /// is not UTF-8 text, a file over the bounds a journal is read within):
    /// final, as a damaged line is (docs/JOURNAL.md, "Errors"); `why` says
    /// what was wrong.
    #[error(
        "the journal of run `{run_id}` is unreadable ({why}): the run cannot be resumed, approved or rolled back; \
         start the program again"
    )]
    Unreadable {
        /// The id asked for.
        run_id: String,
        /// What is wrong with the journal.
        why: String,
    },
    /// The store failed (I/O, the database); the message says where.
    #[error("{0}")]
    Failed(String),
}

/// Why a run id cannot be resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotResumableState {
    /// No journal has this id.
    Unknown,
    /// Another process holds the run (it is resuming it, or still running
    /// it).
    Busy,
    /// The run is in this state, which is not `paused`.
    State(RunState),
}

fn not_resumable_message(run_id: &str, state: NotResumableState) -> String {
    match state {
        NotResumableState::Unknown => format!(
            "no run `{run_id}` in the journal store (unknown id: check `codemode runs list`, and the --journal/--workspace it ran with)"
        ),
        NotResumableState::Busy => format!(
            "run `{run_id}` is held by another process right now (being resumed, or still running); one run is resumed once at a time: if that process ends with the run paused again, resume it then"
        ),
        NotResumableState::State(RunState::Paused) => {
            format!("run `{run_id}` is paused but its journal could not be claimed")
        }
        NotResumableState::State(RunState::Running) => {
            format!(
                "run `{run_id}` is still running in another process; only a paused run, or one whose process died, can be resumed"
            )
        }
        NotResumableState::State(RunState::Interrupted) => format!(
            "run `{run_id}` was moved from an old .codemode/runs folder, whose runs come in as history, and cannot be resumed; start it again"
        ),
        NotResumableState::State(state) => format!(
            "run `{run_id}` already ended ({state}); only a paused run, or one whose process died, can be resumed (its receipt: `codemode runs show {run_id}`)"
        ),
    }
}

impl StoreError {
    pub(crate) fn failed(what: impl std::fmt::Display, e: impl std::fmt::Display) -> StoreError {
        StoreError::Failed(format!("{what}: {e}"))
    }
}

/// A run's journal as the store holds it.
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The run's id.
    pub run_id: String,
    /// Where it stands.
    pub state: RunState,
    /// Its journal lines, header first, in the order they were appended.
    pub lines: Vec<String>,
}

/// One run in a store's listing.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The run's id (ids sort by start time).
    pub run_id: String,
    /// Where it stands.
    pub state: RunState,
    /// When its journal last changed, seconds since the Unix epoch.
    pub updated_unix: u64,
}

/// The journal of one run, open for appending. Holds the run: while it
/// lives no other process can resume the run. Dropping it without
/// [`RunJournal::commit`] leaves the run `interrupted`.
pub trait RunJournal: Send {
    /// Appends `lines`: whole lines of text, each one JSON record ending in
    /// `\n`, in order. May buffer; nothing is durable until
    /// [`RunJournal::commit`].
    fn append(&mut self, lines: String) -> StoreFuture<'_, ()>;

    /// Makes every line appended so far durable (fsync'd, or committed in
    /// one transaction) and records `state`; a final state or `paused`
    /// lets the run go.
    fn commit(&mut self, state: RunState) -> StoreFuture<'_, ()>;

    /// Appends `tail` (whole lines as for [`RunJournal::append`], possibly
    /// none), records the run's end in final `state` and lets the run go.
    /// When it returns, every line appended so far and the state are
    /// written (a crash of this process loses none of them, and other
    /// processes read them); a store may make them durable against a crash
    /// of the machine after it returns, before the store is dropped (the
    /// local store does). Default: [`RunJournal::append`] (when there is a
    /// tail), then [`RunJournal::commit`].
    fn end(&mut self, tail: String, state: RunState) -> StoreFuture<'_, ()> {
        Box::pin(append_then_commit(self, tail, state))
    }

    /// Appends `lines` (as [`RunJournal::append`]) and makes them and every
    /// line appended before them durable (fsync'd, or committed waiting for
    /// the disk), leaving the run `running` and held: how a call that may
    /// change something records its start and its end (docs/JOURNAL.md,
    /// "Recovery"). Default: [`RunJournal::append`], then
    /// [`RunJournal::commit`] with `running` (a `state` line more).
    fn append_durable(&mut self, lines: String) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.append(lines).await?;
            self.commit(RunState::Running).await
        })
    }
}

/// Appends `tail` to `journal` (when there is one) and commits `state`:
/// [`RunJournal::end`]'s default, and how a pause is recorded.
pub(crate) async fn append_then_commit<J: RunJournal + ?Sized>(
    journal: &mut J,
    tail: String,
    state: RunState,
) -> Result<(), StoreError> {
    if !tail.is_empty() {
        journal.append(tail).await?;
    }
    journal.commit(state).await
}

/// Where journals are kept. Shared by every run of an engine, and (for a
/// database) by many processes: [`JournalStore::claim`] is how a store
/// makes sure one run is resumed once.
pub trait JournalStore: Send + Sync + 'static {
    /// What the store is, for messages: `local folder /state/runs`,
    /// `PostgreSQL db@host`.
    fn describe(&self) -> String;

    /// Whether the store's journals belong to one workspace (the default
    /// local folder inside it): a resume then refuses a journal whose
    /// header names another workspace (it was copied, moved or planted).
    /// Default: false (a shared store serves replicas whose workspace
    /// paths may differ).
    fn workspace_bound(&self) -> bool {
        false
    }

    /// The folder of this machine holding the store's journals, when it
    /// is one ([`LocalStore`]): an engine refuses one inside its workspace
    /// and hides it from tools and sandboxed commands. Default: `None` (a
    /// database).
    fn folder(&self) -> Option<&std::path::Path> {
        None
    }

    /// Starts the journal of a new run with its header line; the run is
    /// `running` and held by the returned journal.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when the store cannot be written, or a run of
    /// this id exists.
    fn create<'a>(&'a self, run_id: &'a str, header: String) -> StoreFuture<'a, Box<dyn RunJournal>>;

    /// Blocks until every journal the store is still writing or syncing
    /// after its run's receipt (see [`JournalStore::record_ended`],
    /// [`RunJournal::end`]) is written and durable. A process calls it
    /// before it exits when a clone of the store may outlive it (a thread
    /// holding the engine). Default: nothing to wait for.
    fn flush(&self) {}

    /// Blocks until what the store does for `run_id`'s journal after its
    /// receipt (writing it whole, or syncing it) is done (the local store
    /// waits for that journal only, not for other runs'), then says
    /// whether it failed: then the run has no durable journal,
    /// which a command reporting its run after this (`codemode run --json`,
    /// `codemode resume --json`) says on the receipt. Each failure is said once;
    /// the local store keeps the newest 64 that nobody asked for.
    /// Default: [`JournalStore::flush`], then `Ok(())` (a store that
    /// finishes its journals before the receipt has said so already).
    ///
    /// # Errors
    /// [`StoreError::Failed`] naming the journal and what failed.
    fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        let _ = run_id;
        self.flush();
        Ok(())
    }

    /// Whether a new run's journal is made only once the run needs it: when
    /// it first hands lines over (it waits on its calls, or has buffered
    /// 256 KiB) or pauses; a run that ends before that is recorded whole by
    /// [`JournalStore::record_ended`]. Default: false (the journal is made
    /// when the run starts). The local store says true.
    fn opens_late(&self) -> bool {
        false
    }

    /// Whether [`JournalStore::record_ended`] may run on the thread that
    /// ends the run (a VM thread, with a current-thread runtime of its
    /// own) instead of the engine's tool runtime: true for a store whose
    /// `record_ended` only checks and queues, and so takes no connection
    /// or I/O resource bound to a runtime. Only asked of a store that
    /// [opens late](JournalStore::opens_late). Default: false. The local
    /// store says true.
    fn records_ended_inline(&self) -> bool {
        false
    }

    /// Records the whole journal of a run that ended before its journal was
    /// made: `header` (one line, no newline), `lines` (whole lines, each
    /// ending in `\n`, possibly none) and the final `state`. Default:
    /// [`JournalStore::create`], then [`RunJournal::end`], before it
    /// returns. A store may record it after it returns, as long as it
    /// lists and reads its runs only once every run recorded so far is
    /// written, and it is durable once [`JournalStore::flush`] returns or
    /// the store is dropped (the local store writes it on its sync
    /// threads; a failure then is a warning in the log, `tracing`).
    ///
    /// # Errors
    /// As [`JournalStore::create`] and [`RunJournal::end`].
    fn record_ended<'a>(
        &'a self,
        run_id: &'a str,
        header: String,
        lines: String,
        state: RunState,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut journal = self.create(run_id, header).await?;
            journal.end(lines, state).await
        })
    }

    /// Takes a paused or interrupted run for resuming: atomically checks
    /// it is `paused`, or `running` with no process holding it (its process
    /// ended: a recovery, docs/JOURNAL.md), takes it, marks it `running`,
    /// and returns its lines and the journal to append to. Of two
    /// processes claiming one run at once, one gets it and the other
    /// [`StoreError::NotResumable`] with [`NotResumableState::Busy`].
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] for an unknown, held or ended run (or
    /// one moved in from an old `.codemode/runs` folder, which says
    /// `interrupted`); [`StoreError::Failed`] when the store fails.
    fn claim<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, (Vec<String>, Box<dyn RunJournal>)>;

    /// A run's state and lines, without holding it. A `running` run no
    /// process holds is reported `interrupted`.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with [`NotResumableState::Unknown`] for
    /// an unknown id; [`StoreError::Failed`] when the store fails.
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, StoredRun>;

    /// Every run the store holds, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when the store cannot be read.
    fn list(&self) -> StoreFuture<'_, Vec<RunSummary>>;

    /// Deletes a run's journal (and, for the local folder, its whole run
    /// folder: receipt and spill files). A run held by a process is not
    /// removed.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with `Busy` for a held run, `Unknown`
    /// for an unknown id; [`StoreError::Failed`] when the store fails.
    fn remove<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()>;

    /// Appends `line` (one JSON record, no newline) to the journal of run
    /// `run_id`, which must not be held by a process: how a rollback marks
    /// the calls of a run it undid (`{"t":"reverted"}`, docs/JOURNAL.md).
    /// Durable when it returns. Default: refused, saying the store cannot.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with `Unknown` for an unknown id or
    /// `Busy` for a held run; [`StoreError::Failed`] when the store fails.
    fn annotate<'a>(&'a self, run_id: &'a str, line: String) -> StoreFuture<'a, ()> {
        let _ = (run_id, line);
        Box::pin(async move {
            Err(StoreError::Failed(format!(
                "the journal store {} cannot mark a run's calls",
                self.describe()
            )))
        })
    }
    /// Asks the process running run `run_id` to cancel it: kept beside the
    /// run's journal (the local store: a `cancel` file in the run's folder,
    /// out of reach of programs; PostgreSQL: a row), where that process
    /// finds it with [`JournalStore::cancel_requests`] within a second. It
    /// stays until the run is removed: a paused run resumed later is
    /// cancelled at once. Default: refused, the store cannot carry one.
    ///
    /// # Errors
    /// [`StoreError::NotResumable`] with `Unknown` for an unknown id;
    /// [`StoreError::Failed`] when the store fails or cannot carry cancels.
    fn request_cancel<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        let _ = run_id;
        Box::pin(async move {
            Err(StoreError::Failed(format!("{} cannot carry a request to cancel a run", self.describe())))
        })
    }

    /// Of `run_ids` (runs this process runs now), those a cancel was
    /// requested for ([`JournalStore::request_cancel`]). One read for all of
    /// them: an engine asks every 300 ms while it runs journaled runs.
    /// Default: none.
    ///
    /// # Errors
    /// [`StoreError::Failed`] when the store cannot be read.
    fn cancel_requests<'a>(&'a self, run_ids: &'a [String]) -> StoreFuture<'a, Vec<String>> {
        let _ = run_ids;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The store's batches for many workers ([`batch_queue`]), when it
    /// can share them between processes on many machines. Default: `None`
    /// (the local store: a batch runs in one process there, its record a
    /// file, docs/BATCH.md).
    fn batch_queue(&self) -> Option<&dyn batch_queue::BatchQueue> {
        None
    }

    /// The store's keeping of limits shared by every process using it
    /// ([`shared_limits`]: `scope = "global"`), when it can. Default:
    /// `None` (the local store: an engine refuses a global limit then).
    fn shared_limits(&self) -> Option<&dyn shared_limits::SharedLimits> {
        None
    }
}
