//! The calls a VM makes: the one trait through which a program's
//! `tools.call` leaves the VM. The engine's dispatcher implements it (gate,
//! catalog, tools, receipts); the VM knows nothing of policy, only what a
//! call's start gave ([`Begun`]) and how it ended
//! ([`Completion`](crate::journal::completion::Completion)).

use std::future::Future;
use std::pin::Pin;

use crate::journal::completion::Completion;
use crate::journal::record::PendingRecord;
use crate::receipt::spill::SpillArea;
use crate::receipt::{Caller, Ledger};

/// A call still running; resolves to its completion. Run it on the tool
/// runtime.
pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Completion> + Send + 'static>>;

/// What `begin` did with a call.
pub(crate) enum Begun {
    /// The call ended at once (refused, or the tool answered without
    /// waiting); the ledger is already updated.
    Settled(Completion),
    /// The call is running; poll the future on the tool runtime and apply its
    /// completion to the ledger.
    Running { seq: u64, future: CallFuture },
    /// The call was refused and the run must end (error kind `limit`).
    Exhausted { completion: Completion, reason: String },
}

/// What a pause records of the files a run's calls named
/// (journal/files_seen.rs): each with what it holds now, those a resume
/// found changed since an earlier pause, and a warning for the receipt
/// when more were named than are recorded.
pub(crate) type FilesAtPause = (std::collections::BTreeMap<String, String>, Vec<String>, Option<String>);

/// Where a VM's calls go. Each `begin` opens the call's entry in `ledger`
/// (its receipt) and either settles it at once or hands back a future.
pub(crate) trait CallHost {
    /// Gates and starts one call of `tool` with `args_json` (a JSON text).
    /// With `slot_free` false (the run's in-flight limit is reached) the
    /// tool is not polled yet: the call comes back `Running`.
    fn begin(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun;

    /// Starts a paused call a person allowed (on a resume), without asking
    /// again.
    fn begin_allowed(
        &self,
        ledger: &mut Ledger,
        pending: &PendingRecord,
        caller: Caller,
        note: String,
    ) -> Begun;

    /// Settles a paused call a person denied (on a resume), with a
    /// ToolError of `kind` (`denied`, or `unknown_outcome`).
    fn begin_denied(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        caller: Caller,
        reason: String,
        note: Option<String>,
        kind: &str,
    ) -> Begun;

    /// Starts a call of a recovered run that was running when the run's
    /// process ended: again when repeating it is safe, else paused for a
    /// person (kind `unknown_outcome`).
    fn begin_unknown(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun;

    /// Whether the call just begun may change something (its `start` line
    /// must follow its `call` line: the VM hands its lines over first).
    fn take_durable_begun(&self) -> bool {
        false
    }

    /// Where the run's spill files go (results and values over their
    /// bounds).
    fn spill_area(&self) -> &SpillArea;

    /// The catalog's digest now, for the receipt (lower-case hex SHA-256).
    fn catalog_sha256(&self) -> String;

    /// The MCP servers whose tools are in the catalog now (journaled with
    /// a pause: `PausedRecord::catalog_servers`).
    fn catalog_servers(&self) -> Vec<String>;

    /// What a pause records of the files the run's calls named
    /// ([`FilesAtPause`]). Empty for a run that keeps no journal.
    fn files_at_pause(&self) -> FilesAtPause {
        Default::default()
    }

    /// The run's warnings for its receipt (spill files that could not be
    /// written, an unconfined bash).
    fn run_warnings(&self) -> Vec<String>;

    /// The admission check, before the program's first call: `None` when
    /// the program may run, else the run's error (kind `admission`) for
    /// the calls it names literally that the gate would refuse.
    fn admit(&self, uses: &[codemode_program::ToolUse]) -> Option<crate::receipt::RunError>;

    /// Starts, before the program's first call, the MCP servers its calls
    /// `uses` name whose start the gate would allow without asking
    /// (engine/prestart.rs); returns at once.
    fn prestart(&self, uses: &[codemode_program::ToolUse]);
}
