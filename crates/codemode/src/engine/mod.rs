//! `Engine` and `EngineBuilder`: the catalog, limits, workspace, VM threads
//! and tool runtime that every run shares.

mod approve;
mod batch;
mod builder;
mod cancel_watch;
mod check_program;
mod confinement;
mod connect_first;
mod direct;
mod discover;
pub(crate) mod dispatch;
pub(crate) mod elicitor;
mod execute_tools;
mod mcp_link;
mod overrun_watch;
pub(crate) mod pacing;
mod prestart;
mod resume;
mod rewritable_links;
mod rollback;
mod run_handle;
mod run_id;
mod run_state;
mod sandbox_writable;
pub(crate) use codemode_base::time_text::rfc3339_utc;

pub use batch::{BatchItem, BatchOptions, BatchRun, ItemStatus};
pub use builder::{BuildError, EngineBuilder};
pub use overrun_watch::OVERRUN_GRACE;
pub use rollback::{Compensated, NotUndone, RollbackOptions, RollbackReport};
pub use run_handle::{Canceller, ClockPause, Run, RunOptions};

pub use direct::CallOutcome;
pub use execute_tools::{EXECUTE_TOOLS, ToolsShown};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::catalog::cell::CatalogCell;
use crate::catalog::tool_search::Discovery;
use crate::catalog::{Loading, ToolSpec};
use crate::gate::posture_epoch::PostureCell;
use crate::gate::{Approver, Policy, Posture};
use crate::receipt::ledger::ReceiptParts;
use crate::receipt::{Caller, ErrorKind, Ledger, Receipt, RunError, RunStatus};
use crate::vm::clock::RunClock;
use crate::vm::pool::VmPool;
use crate::vm::{Limits, Vm};
use codemode_program::Program;

/// What every run of an engine shares.
pub(crate) struct Shared {
    /// The current catalog; take a snapshot with `catalog.load()`.
    pub catalog: Arc<CatalogCell>,
    /// `tool_search`'s index and the toolbox.
    pub discovery: Arc<Discovery>,
    /// The MCP servers, when any are configured.
    pub mcp: Option<Arc<mcp_link::McpLink>>,
    pub limits: Limits,
    /// The configuration, its policy settled (what the gate applies), its
    /// `[sandbox]` and place; its `[journal]` and `[limits]` are unread.
    pub config: crate::config::ConfigFile,
    /// The current posture (starts as `config.policy.posture`) and its epoch.
    pub posture: PostureCell,
    pub approver: Arc<dyn Approver>,
    pub workspace: Arc<PathBuf>,
    /// Where runs keep their files: `<spill_root>/<run_id>/`, outside the
    /// workspace.
    pub spill_root: PathBuf,
    /// A folder run folders must resolve inside, with no link below it:
    /// none now that run state is outside the workspace.
    pub spill_confine: Option<PathBuf>,
    /// What tool calls may not change or read; how bash is confined.
    pub confinement: Arc<crate::sandbox::Confinement>,
    /// Every protected path and what it is (the gate's `protected_paths` step).
    pub protections: Vec<crate::gate::protection::Protection>,
    /// Where runs' journals go; `None` when journaling is off.
    pub journal: Option<Arc<dyn crate::journal::JournalStore>>,
    /// The policy and limits as journals record them.
    pub journal_facts: resume::JournalFacts,
    pub tools: Handle,
    /// The journaled runs going now, watched for cancels from other
    /// processes.
    pub cancel_watch: Arc<cancel_watch::CancelWatch>,
    /// The runs going now, watched for a deadline QuickJS does not hold
    /// (engine/overrun_watch.rs).
    pub overrun_watch: Arc<overrun_watch::OverrunWatch>,
    /// The limits per tool and per MCP server, shared by every run.
    pub pacing: pacing::Pacing,
    /// Where traced runs go when they end (telemetry/mod.rs).
    pub trace_sink: Option<Arc<dyn crate::telemetry::TraceSink>>,
    vms: VmPool,
    _own_runtime: OwnedRuntime,
}

/// A tokio runtime the engine made for itself; shut down without blocking,
/// so dropping the engine is fine anywhere, even inside async code.
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The composition engine: runs programs whose only way out is
/// `tools.call`, and returns a [`Receipt`] for every run.
///
/// A cheap-to-clone handle; share it across tasks and threads. Each run gets
/// a fresh VM, its own budget, ledger and clock.
///
/// ```
/// use codemode::{Engine, Program};
/// let workspace = tempfile::tempdir()?;
/// std::fs::write(workspace.path().join("a.txt"), "hello\n")?;
/// # // Run state goes to the user's state folder; here, a private one.
/// # let state = tempfile::tempdir()?;
/// let engine = Engine::builder().workspace(workspace.path())
/// #   .state_dir(state.path())
///     .build()?;
/// let receipt = engine.execute_blocking(Program::new(
///     "const r = await tools.read({path: 'a.txt'}); return r.metadata.total_lines;",
/// ));
/// assert_eq!(receipt.value, 1);
/// assert_eq!(receipt.calls[0].tool, "read");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("workspace", &self.shared.workspace)
            .field("catalog_sha256", &self.shared.catalog.load().digest())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A builder with every default.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// Starts `program` on a VM thread and returns a handle to the run.
    ///
    /// The run keeps a journal in the engine's journal store (unless
    /// [`EngineBuilder::no_journal`]), made durable before the receipt
    /// comes back; with the `pause` approver it may end `paused`, to be
    /// resumed with [`Engine::resume`].
    pub fn start(&self, program: Program) -> Run {
        self.start_with(program, RunOptions::default())
    }

    /// [`Engine::start`] with `options` for this run only (its own
    /// approver: a server mode asks the person behind each request).
    pub fn start_with(&self, program: Program, options: RunOptions) -> Run {
        let clock = Arc::new(RunClock::new(self.shared.limits.deadline));
        let run_id: Arc<str> = match &options.run_id {
            None => Arc::from(run_id::new_run_id()),
            Some(id) if run_id::is_run_id(id) => Arc::from(id.as_str()),
            Some(id) => {
                let shown = crate::receipt::spill::cut_text(id).into_owned();
                let id = run_id::new_run_id();
                let e = RunError::new(
                    ErrorKind::Invocation,
                    format!("`{shown}` is not a run id; make one with Engine::new_run_id"),
                );
                return self.refused_run(id, clock, e);
            }
        };
        let journaling = resume::new_run(&self.shared, &program, &run_id);
        self.launch(run_id, program, clock, journaling, options)
    }

    /// A new run id (`run-YYYYMMDDThhmmssZ-xxxxxxxx`), unique within and
    /// across processes: for [`RunOptions::run_id`], when a host must
    /// record a run's id before the run starts.
    pub fn new_run_id() -> String {
        run_id::new_run_id()
    }

    /// Whether `id` has the form [`Engine::new_run_id`] makes (so it names
    /// no path but a run folder's).
    pub fn is_run_id(id: &str) -> bool {
        run_id::is_run_id(id)
    }

    /// A run that failed before it started, with `error`.
    fn refused_run(&self, run_id: String, clock: Arc<RunClock>, error: RunError) -> Run {
        let (tx, receipt) = tokio::sync::oneshot::channel();
        let _ = tx.send(early_receipt(&self.shared, &run_id, &clock, error));
        Run { run_id: Arc::from(run_id), clock, receipt, shared: self.shared.clone() }
    }

    /// Resumes paused run `run_id` with `decisions` (by the seq of each
    /// pending call, as the paused receipt's `pending` lists them): a fresh
    /// VM re-runs the program, journaled calls are answered from the
    /// journal without running again, allowed calls run, denied ones reject
    /// with a `ToolError` of kind `denied`, pending calls not decided are
    /// gated again, and the run goes on. Decisions a person recorded with
    /// `codemode approve` since the pause ([`Engine::record_decisions`])
    /// apply too; a decision in `decisions` for such a call must agree
    /// with theirs. The receipt covers the whole run
    /// (every call once, one seq numbering, times across the pauses). A run
    /// can pause and be resumed many times (docs/JOURNAL.md).
    ///
    /// Errors come back as a receipt with status `failed` and
    /// `error.kind`: `not_resumable` (unknown id, ended run, held by
    /// another process, its journal unreadable: final; the run is not
    /// touched),
    /// `divergence` (the program, catalog, policy or limits changed since
    /// the pause: the run stays paused; or the replay took another path:
    /// the run ends failed), `invocation` (a decision for a call that is not
    /// pending, or contradicting a recorded one: the run stays paused).
    pub async fn resume(&self, run_id: &str, decisions: &[(u64, crate::journal::Decided)]) -> Receipt {
        match self.start_resume(run_id, decisions).await {
            Ok(run) => run.wait().await,
            Err(receipt) => receipt,
        }
    }

    /// [`Engine::resume`] up to the start of the replay: a handle to the
    /// resumed run (to cancel it, or wait for it), or the receipt of a
    /// resume refused before anything ran.
    ///
    /// # Errors
    /// The receipt of the refusal (see [`Engine::resume`]).
    pub async fn start_resume(
        &self,
        run_id: &str,
        decisions: &[(u64, crate::journal::Decided)],
    ) -> Result<Run, Receipt> {
        self.start_resume_with(run_id, decisions, RunOptions::default()).await
    }

    /// [`Engine::start_resume`] with `options` for the resumed run (its own
    /// approver decides the calls gated again).
    ///
    /// # Errors
    /// The receipt of the refusal (see [`Engine::resume`]).
    pub async fn start_resume_with(
        &self,
        run_id: &str,
        decisions: &[(u64, crate::journal::Decided)],
        options: RunOptions,
    ) -> Result<Run, Receipt> {
        let r = resume::prepare(self, run_id, decisions, options.any_workspace).await?;
        Ok(self.launch(Arc::from(run_id), r.program, r.clock, Some(r.journaling), options))
    }

    /// [`Engine::resume`], blocking this thread (not for async code).
    pub fn resume_blocking(&self, run_id: &str, decisions: &[(u64, crate::journal::Decided)]) -> Receipt {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        match rt {
            Ok(rt) => rt.block_on(self.resume(run_id, decisions)),
            Err(e) => {
                let e =
                    RunError::new(ErrorKind::Internal, format!("could not start a runtime to resume: {e}"));
                early_receipt(&self.shared, run_id, &RunClock::new(self.shared.limits.deadline), e)
            }
        }
    }

    /// Runs `program` on a VM thread as run `run_id`, timed by `clock`.
    fn launch(
        &self,
        run_id: Arc<str>,
        program: Program,
        clock: Arc<RunClock>,
        journaling: Option<crate::vm::journaling::Journaling>,
        options: RunOptions,
    ) -> Run {
        let (tx, rx) = oneshot::channel();
        // The VM sends the receipt, or the overrun watch when the VM does
        // not stop by its deadline and a grace (engine/overrun_watch.rs),
        // which then ends the run's journal.
        let slot =
            overrun_watch::Answer::new(tx, journaling.as_ref().and_then(overrun_watch::JournalEnd::of));
        // Watched from now, not from when the VM thread takes the run: a
        // run queued behind a thread held by such a program is answered
        // too.
        let overrun = self.shared.overrun_watch.watch(&run_id, &clock, &slot);
        let shared = self.shared.clone();
        let (id, c) = (run_id.clone(), clock.clone());
        let job: crate::vm::pool::Job = Box::new(move || {
            Box::pin(async move {
                let _overrun = overrun;
                slot.started_here();
                let durable = journaling.as_ref().and_then(|j| j.durable.clone());
                let undo = journaling.as_ref().and_then(|j| j.log.undo_log()).map(Arc::new);
                let files_seen = journaling.as_ref().map(|j| j.files_seen.clone());
                // A cancel another process asks for reaches a journaled run.
                let _watched = match (&shared.journal, journaling.is_some()) {
                    (Some(store), true) => Some(shared.cancel_watch.watch(store, &shared.tools, &id, &c)),
                    _ => None,
                };
                // A run is traced when the engine exports traces or the
                // run was started inside a trace (telemetry/mod.rs).
                let trace = (shared.trace_sink.is_some() || options.trace_parent.is_some())
                    .then(|| Arc::new(crate::telemetry::RunTrace::new(options.trace_parent)));
                let setup = vm_setup(&shared, &id, &c, (durable, undo, files_seen), options, trace.clone());
                let vm = Vm::new(setup, c.clone(), id.clone(), journaling);
                // The VM is freed after its receipt is sent (about a fifth
                // of a short run's time on this thread): nothing of the
                // run is left in it once `run` returns.
                let (receipt, _vm) = match vm {
                    Ok(mut vm) => (vm.run(program).await, Some(vm)),
                    Err(e) => (early_receipt(&shared, &id, &c, e), None),
                };
                if let (Some(trace), Some(sink)) = (&trace, &shared.trace_sink) {
                    trace.finish(sink.as_ref(), &receipt);
                }
                slot.send(receipt);
            })
        });
        let (failed_tx, failed_rx) = oneshot::channel();
        let rx = match self.shared.vms.submit(job) {
            Ok(()) => rx,
            Err(_) => {
                let e = RunError::new(ErrorKind::Internal, "every VM thread has stopped");
                let _ = failed_tx.send(early_receipt(&self.shared, &run_id, &clock, e));
                failed_rx
            }
        };
        Run { run_id, clock, receipt: rx, shared: self.shared.clone() }
    }

    /// Runs `program` to its end and returns the receipt.
    pub async fn execute(&self, program: Program) -> Receipt {
        self.start(program).wait().await
    }

    /// Runs `program` to its end, blocking this thread. Do not call from
    /// async code; use [`Engine::execute`] there.
    pub fn execute_blocking(&self, program: Program) -> Receipt {
        self.start(program).wait_blocking()
    }

    /// Makes one direct call (caller `direct`) of `tool` with `args`, through
    /// the same gate, bounds and spillover as a program's call, and returns
    /// its receipt with the envelope or the error. The call is timed by the
    /// engine's deadline as a run is (its waits on a person alone do not
    /// count): past it the call ends `in_flight`, its error of kind
    /// `timeout`.
    pub async fn call(&self, tool: &str, args: &serde_json::Value) -> CallOutcome {
        self.call_as(tool, args, Caller::Direct).await
    }

    /// [`Engine::call`] made as `caller`: [`Caller::Program`] for a host
    /// whose model reaches tools only through programs (`codemode mcp
    /// serve`): the gate's caller checks are a program's, and `tool_search`
    /// finds what a program may call and activates nothing (the host's
    /// tool list does not change).
    pub async fn call_as(&self, tool: &str, args: &serde_json::Value, caller: Caller) -> CallOutcome {
        let run_id: Arc<str> = Arc::from(run_id::new_run_id());
        direct::call(self.shared.clone(), run_id, tool, args, caller).await
    }

    /// [`Engine::call`], blocking this thread (not for async code).
    pub fn call_blocking(&self, tool: &str, args: &serde_json::Value) -> CallOutcome {
        let run_id: Arc<str> = Arc::from(run_id::new_run_id());
        let shared = self.shared.clone();
        let tool = tool.to_owned();
        let args = args.clone();
        let (tx, rx) = oneshot::channel();
        self.shared.tools.spawn(async move {
            let _ = tx.send(direct::call(shared, run_id, &tool, &args, Caller::Direct).await);
        });
        rx.blocking_recv().expect("the tool runtime is running while the engine lives")
    }

    /// A VM on the current thread, for hosts that hold VMs themselves; see
    /// [`Vm`].
    ///
    /// # Errors
    /// The VM could not be made (the prelude failed to load, or memory ran
    /// out); the error is the receipt-style `RunError`.
    pub fn vm(&self) -> Result<Vm, RunError> {
        let run_id: Arc<str> = Arc::from(run_id::new_run_id());
        let clock = Arc::new(RunClock::new(self.shared.limits.deadline));
        let setup = vm_setup(&self.shared, &run_id, &clock, (None, None, None), RunOptions::default(), None);
        Vm::new(setup, clock, run_id, None)
    }

    /// Saves `receipt` as JSON to `receipt.json` in its run's folder
    /// (`<runs_folder>/<run_id>/`, [`Engine::runs_folder`]; its spill files
    /// are in `spill/` there), atomically, and returns the path; the
    /// compact rendering ([`Receipt::render`]) can then say where the full
    /// receipt is.
    ///
    /// # Errors
    /// The folder cannot be made or written.
    pub fn save_receipt(&self, receipt: &Receipt) -> std::io::Result<PathBuf> {
        crate::receipt::spill::write_file(
            &self.receipt_area(receipt),
            "receipt",
            "json",
            receipt.to_json_pretty().as_bytes(),
        )
    }

    /// [`Engine::save_receipt`], without syncing the file when the run has
    /// a journal (the durable record of the run: the receipt file is then
    /// a copy a machine crash may lose); with the journal off it is synced
    /// as `save_receipt` does. For server mode, which writes the file after
    /// its answer.
    ///
    /// # Errors
    /// As [`Engine::save_receipt`].
    pub fn save_receipt_copy(&self, receipt: &Receipt) -> std::io::Result<PathBuf> {
        crate::receipt::spill::write_file_as(
            &self.receipt_area(receipt),
            "receipt",
            "json",
            receipt.to_json_pretty().as_bytes(),
            self.journal_store().is_none(),
        )
    }

    /// The absolute path [`Engine::save_receipt`] will save `receipt` at,
    /// its folder checked the same way but neither made nor written: a
    /// server answers naming the path and saves the file after it answered
    /// (docs/SERVE.md, "Results").
    ///
    /// # Errors
    /// The folder cannot be examined.
    pub fn receipt_path(&self, receipt: &Receipt) -> std::io::Result<PathBuf> {
        crate::receipt::spill::file_path(&self.receipt_area(receipt), "receipt", "json")
    }

    /// Makes run `run_id`'s folder in the runs folder
    /// ([`Engine::runs_folder`]) when it is not there (made and checked as
    /// [`Engine::save_receipt`] makes it), and holds it until the returned
    /// hold is dropped: meanwhile no prune, in this process or another,
    /// removes the folder (a prune reports it busy). A host that saves a
    /// run's receipt after the run (as `codemode run` does) holds the
    /// folder from the run's start until the receipt is saved and the
    /// journal written ([`crate::journal::JournalStore::flush_run`]), so a
    /// prune in another process never removes a run it is still writing.
    /// The hold is `flock(2)` on the folder: a process that dies holds
    /// nothing.
    ///
    /// # Errors
    /// `run_id` is not a run id; the folder cannot be made or opened; a
    /// prune is removing it right now (`WouldBlock`).
    #[cfg(unix)]
    pub fn hold_run_folder(&self, run_id: &str) -> std::io::Result<crate::journal::RunFolderHold> {
        crate::journal::local::check_run_id(run_id)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let dir = crate::receipt::spill::make_run_dir(
            &self.shared.spill_root.join(run_id),
            self.shared.spill_confine.as_deref(),
        )?;
        crate::journal::folder_hold::hold_shared(&dir)
    }

    /// Where `receipt`'s run keeps its files.
    fn receipt_area(&self, receipt: &Receipt) -> crate::receipt::spill::SpillArea {
        crate::receipt::spill::SpillArea::run_folder(
            &self.shared.spill_root,
            &receipt.run_id,
            self.shared.spill_confine.clone(),
        )
    }

    /// The engine's runs on disk (`codemode runs`, retention): its journal
    /// store and the folder of its runs' receipts and spill files.
    pub fn runs(&self) -> crate::journal::Runs {
        crate::journal::Runs::in_folder(self.shared.journal.clone(), &self.shared.spill_root)
    }

    /// Where the engine's runs keep their files, one folder per run: the
    /// workspace's folder in the state folder unless
    /// [`EngineBuilder::spill_dir`] named another.
    pub fn runs_folder(&self) -> &Path {
        &self.shared.spill_root
    }

    /// Changes the permission posture. Every run in progress refuses its
    /// later calls (their programs were written under the old posture), and
    /// a call waiting for approval when the posture narrows is refused.
    pub fn set_posture(&self, posture: Posture) {
        self.shared.posture.set(posture);
    }

    /// The current permission posture.
    pub fn posture(&self) -> Posture {
        self.shared.posture.get().0
    }

    /// The policy the gate applies (the [`ConfigFile::policy`] of
    /// [`Engine::config`]).
    ///
    /// [`ConfigFile::policy`]: crate::config::ConfigFile::policy
    pub fn policy(&self) -> &Policy {
        &self.shared.config.policy
    }

    /// The configuration the engine was built with
    /// ([`EngineBuilder::config`], or the default file with
    /// [`EngineBuilder::policy`]'s policy), its policy as the gate applies it
    /// (hook files reached through links resolved, a trusted MCP
    /// configuration's connections allowed).
    pub fn config(&self) -> &crate::config::ConfigFile {
        &self.shared.config
    }

    /// The digest (DESIGN.md §6) of the current catalog, lower-case hex;
    /// every receipt carries the digest of the catalog its run ended with.
    pub fn catalog_digest(&self) -> String {
        self.shared.catalog.load().digest().to_owned()
    }

    /// Every tool's spec, in catalog order (eager and deferred).
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.shared.catalog.load().specs().cloned().collect()
    }

    /// The tools a model is shown now: the eager tools in catalog order,
    /// then the deferred tools a direct `tool_search` activated into the
    /// toolbox, in activation order. Deferred tools not in the toolbox stay
    /// callable by exact name and findable by `tool_search`. In plan mode,
    /// the tools it refuses (those not read-only) are left out: a model is
    /// not shown a tool it cannot call.
    pub fn listed_tools(&self) -> Vec<ToolSpec> {
        let catalog = self.shared.catalog.load();
        let runs = |e: &&crate::catalog::Entry| self.mode_lets_run(e);
        let eager = catalog.entries().filter(|e| e.spec.loading == Loading::Eager).filter(runs);
        let active = self.shared.discovery.toolbox();
        let activated = active.iter().filter_map(|name| catalog.get(name)).filter(runs);
        eager.chain(activated).map(|e| e.spec.clone()).collect()
    }

    /// Every tool's spec the mode lets run, in catalog order (eager and
    /// deferred): [`Engine::tool_specs`] but, in plan mode, only the
    /// read-only tools. What to declare or list to a model or a person
    /// (`codemode types`, `mcp serve --direct-tools`); a call by name of
    /// another tool still gets the plan mode's refusal.
    pub fn usable_tools(&self) -> Vec<ToolSpec> {
        let catalog = self.shared.catalog.load();
        catalog.entries().filter(|e| self.mode_lets_run(e)).map(|e| e.spec.clone()).collect()
    }

    /// Whether the mode lets `entry`'s tool run (plan mode: a read-only one).
    fn mode_lets_run(&self, entry: &crate::catalog::Entry) -> bool {
        crate::gate::mode::plan_refusal(self.shared.config.policy.mode, entry, &entry.spec.name).is_none()
    }

    /// The `execute_tools` tool a host shows the model (name, input schema
    /// `{code}` or `{batch}` (docs/BATCH.md; run either with
    /// [`Engine::execute_tools`]), and a description carrying the
    /// TypeScript declarations of [`Engine::listed_tools`]). Not in the catalog: programs cannot start
    /// programs.
    pub fn execute_tools_spec(&self) -> ToolSpec {
        self.execute_tools_spec_with(ToolsShown::Declarations, None)
    }

    /// [`Engine::execute_tools_spec`] made smaller for a host with a small
    /// budget for tool descriptions: the listed tools `shown` as
    /// declarations, signature lines or names ([`ToolsShown`]); with
    /// `servers_named`, at most that many MCP servers are named, the others
    /// counted.
    pub fn execute_tools_spec_with(&self, shown: ToolsShown, servers_named: Option<usize>) -> ToolSpec {
        let mut declarations = execute_tools::tools_text(&self.listed_tools(), shown);
        if self.shared.config.policy.mode == crate::gate::Mode::Plan {
            declarations.insert_str(0, execute_tools::PLAN_MODE_LINE);
        }
        let mut servers: Vec<(String, Option<usize>)> = self
            .mcp_servers()
            .into_iter()
            .filter(|s| s.state != crate::mcp::ServerState::Disabled)
            .map(|s| (s.name, s.tools))
            .collect();
        let more = servers.len().saturating_sub(servers_named.unwrap_or(usize::MAX));
        servers.truncate(servers.len() - more);
        execute_tools::execute_tools_spec(&self.shared.limits, &servers, more, &declarations)
    }

    /// Every configured MCP server with its state and tool count; starts
    /// nothing. Empty without MCP servers.
    pub fn mcp_servers(&self) -> Vec<crate::mcp::ServerStatus> {
        self.shared.mcp.as_ref().map(|m| m.pool.servers()).unwrap_or_default()
    }

    /// Ends every MCP server's process group and reaps it (dropping the
    /// last engine handle does too, without waiting). Later calls of MCP
    /// tools fail.
    pub async fn shutdown_mcp(&self) {
        if let Some(mcp) = &self.shared.mcp {
            mcp.pool.shutdown().await;
        }
    }

    /// [`Engine::shutdown_mcp`], blocking this thread (not for async code).
    pub fn shutdown_mcp_blocking(&self) {
        if let Some(mcp) = self.shared.mcp.clone() {
            let (tx, rx) = oneshot::channel();
            self.shared.tools.spawn(async move {
                mcp.pool.shutdown().await;
                let _ = tx.send(());
            });
            let _ = rx.blocking_recv();
        }
    }

    /// Where runs keep their journals, unless journaling is off.
    pub fn journal_store(&self) -> Option<&Arc<dyn crate::journal::JournalStore>> {
        self.shared.journal.as_ref()
    }

    /// The limits every run is held to.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// The canonical workspace root.
    pub fn workspace(&self) -> &Path {
        &self.shared.workspace
    }
}

/// The receipt of a run that ended before its VM could run anything.
pub(super) fn early_receipt(shared: &Shared, run_id: &str, clock: &RunClock, error: RunError) -> Receipt {
    Ledger::new(0, 0).into_receipt(ReceiptParts {
        run_id: run_id.to_owned(),
        status: RunStatus::Failed,
        value: serde_json::Value::Null,
        value_truncated: None,
        error: Some(error),
        catalog_sha256: shared.catalog.load().digest().to_owned(),
        elapsed_ms: crate::receipt::millis(clock.elapsed()),
        approval_wait_ms: 0.0,
        warnings: run_warnings(shared, Vec::new()),
    })
}

/// The parts of a run's journal its dispatcher uses: where starts are made
/// durable, where pre-images go, and the files its calls name
/// (journal/files_seen.rs).
type JournalParts = (
    Option<crate::journal::durable::DurableLog>,
    Option<Arc<crate::journal::UndoLog>>,
    Option<Arc<crate::journal::files_seen::FilesSeen>>,
);

/// What a VM gets for run `run_id`: the limits, the tool runtime, and a
/// dispatcher of its own (pausable when the run keeps a journal; keeping
/// its file tools' pre-images in `undo` when given; noting the files its
/// calls name in `files_seen` when given; asking `options.approver` when
/// given).
fn vm_setup(
    shared: &Arc<Shared>,
    run_id: &Arc<str>,
    clock: &Arc<RunClock>,
    (durable, undo, files_seen): JournalParts,
    options: RunOptions,
    trace: Option<Arc<crate::telemetry::RunTrace>>,
) -> crate::vm::VmSetup {
    let mut dispatcher = dispatch::Dispatcher::new(shared.clone(), run_id.clone(), clock.clone());
    dispatcher.trace = trace.clone();
    dispatcher.files_seen = files_seen;
    let dispatcher = if durable.is_some() {
        let mut dispatcher = dispatcher.pausable();
        dispatcher.durable = durable;
        dispatcher
    } else {
        dispatcher
    };
    let dispatcher = dispatcher.keeping_preimages(undo);
    crate::vm::VmSetup {
        limits: shared.limits.clone(),
        tools: shared.tools.clone(),
        calls: Box::new(dispatcher.with_approver(options.approver)),
        on_call_end: options.on_call_end,
        on_call_open: trace.map(|trace| {
            Arc::new(move |seq, decision| trace.opened(seq, decision))
                as crate::receipt::ledger::CallOpenObserver
        }),
    }
}

/// The warnings a receipt of `shared`'s runs carries: `spill_failures`
/// (why spill files could not be written), then the bash sandbox when it is
/// off.
pub(crate) fn run_warnings(shared: &Shared, spill_failures: Vec<String>) -> Vec<String> {
    let mut warnings = spill_failures;
    if shared.confinement.sandbox.profile == crate::sandbox::SandboxProfile::Off {
        warnings.push(
            "the bash sandbox is off ([sandbox] profile = \"off\"): bash commands run unconfined".to_owned(),
        );
    }
    warnings
}
