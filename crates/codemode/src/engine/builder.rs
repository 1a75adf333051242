//! Building an engine: the builder's settings and the checks and steps of
//! [`EngineBuilder::build`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::runtime::Handle;

use crate::catalog::cell::CatalogCell;
use crate::catalog::tool_search::{Barred, Discovery, SearchLink, ToolSearch};
use crate::catalog::{Catalog, CatalogError, Compile, Tool, ToolSpec};
use crate::config::ConfigFile;
use crate::gate::posture_epoch::PostureCell;
use crate::gate::{Approver, Policy};
use crate::vm::Limits;
use crate::vm::pool::VmPool;

use super::{Engine, OwnedRuntime, Shared, confinement, mcp_link, resume};

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The workspace is missing or not a directory.
    #[error("workspace `{path}` is not a usable directory: {message}")]
    Workspace {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A limit is out of range.
    #[error("limit `{field}` {message}")]
    Limits {
        /// The `Limits` field.
        field: &'static str,
        /// Why it is out of range.
        message: String,
    },
    /// The tools do not form a catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The tool runtime given to `EngineBuilder::tool_runtime` is a
    /// current-thread runtime, which runs tools only while it is driven.
    #[error(
        "the tool runtime must be a multi-thread tokio runtime (a current-thread one runs tools only while something blocks on it)"
    )]
    ToolRuntime,
    /// The policy does not fit the catalog (a rule pattern on a tool that has
    /// no primary argument, settings for an unknown native tool).
    #[error("policy: {0}")]
    Policy(String),
    /// Where run state would go is not usable: no state folder can be
    /// found, a folder given is inside the workspace (a program could read
    /// or change it), or it cannot be made.
    #[error("run state: {0}")]
    RunState(String),
    /// A folder that decides later calls (run state, the trust record,
    /// MCP login tokens, the MCP schema cache) is reached through a
    /// symbolic link a program could rewrite: one in the workspace or in
    /// a folder the sandbox makes writable. The message names the folder,
    /// the link and what to set instead (docs/SECURITY.md).
    #[error("{0}")]
    RewritableLink(String),
    /// A `[sandbox] writable` entry cannot apply: the message names it and
    /// says what to write instead.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A thread or runtime could not start.
    #[error("could not start the engine's threads: {0}")]
    Threads(#[from] std::io::Error),
}

/// Configures an [`Engine`]; every setter states its default.
pub struct EngineBuilder {
    workspace: PathBuf,
    limits: Limits,
    config: ConfigFile,
    approver: Option<Arc<dyn Approver>>,
    tools: Vec<Arc<dyn Tool>>,
    native_tools: bool,
    spill_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    vm_threads: Option<usize>,
    spare_vms: bool,
    tool_runtime: Option<Handle>,
    mcp: Option<(crate::mcp::McpConfig, crate::mcp::PoolOptions)>,
    journal: JournalChoice,
    trace_sink: Option<Arc<dyn crate::telemetry::TraceSink>>,
}

/// Where an engine's runs keep their journals.
enum JournalChoice {
    /// The local folder store at the spill root.
    Default,
    Off,
    Store(Arc<dyn crate::journal::JournalStore>),
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            workspace: PathBuf::from("."),
            limits: Limits::default(),
            config: ConfigFile::default(),
            approver: None,
            tools: Vec::new(),
            native_tools: true,
            spill_dir: None,
            state_dir: None,
            vm_threads: None,
            spare_vms: true,
            tool_runtime: None,
            mcp: None,
            journal: JournalChoice::Default,
            trace_sink: None,
        }
    }
}

impl EngineBuilder {
    /// The workspace root: file tools resolve paths against it and refuse
    /// paths outside it. Default: the current directory.
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = dir.into();
        self
    }

    /// The limits of every run. Default: [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The policy the gate applies: mode, posture, rules, per-tool settings,
    /// hooks (see `docs/POLICY.md`); it replaces the policy of
    /// [`EngineBuilder::config`]'s file and keeps the rest. Default:
    /// [`Policy::default`] (work mode, posture ask: writers need an
    /// approval).
    ///
    /// For a policy read from a file, pass the whole file to
    /// [`EngineBuilder::config`] instead: only then are its `[sandbox]`
    /// applied and the file and its hooks' files protected from tool calls.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.config.policy = policy;
        self
    }

    /// The configuration file (`codemode.toml`, read with
    /// [`ConfigFile::load`]), replacing what [`EngineBuilder::policy`] set:
    /// its policy (as [`EngineBuilder::policy`]), its `[sandbox]` (how bash
    /// is confined), and its place: the file itself and every file its
    /// hooks name are protected from tool calls. Its `[journal]` and
    /// `[limits]` are the host's to apply (a store for
    /// [`EngineBuilder::journal`], [`LimitSettings::apply`] on the
    /// [`EngineBuilder::limits`]); the engine does not read them. Default:
    /// [`ConfigFile::default`] (the default policy, the `workspace-write`
    /// sandbox without network, no file).
    ///
    /// [`LimitSettings::apply`]: crate::config::LimitSettings::apply
    pub fn config(mut self, config: ConfigFile) -> Self {
        self.config = config;
        self
    }

    /// Who decides calls that need an approval. Default: [`DenyApprover`]
    /// (every such call is denied; the CLI uses a terminal prompt when it
    /// has a terminal).
    ///
    /// [`DenyApprover`]: crate::gate::DenyApprover
    pub fn approver(mut self, approver: impl Approver) -> Self {
        self.approver = Some(Arc::new(approver));
        self
    }

    /// [`EngineBuilder::approver`] for an approver already shared.
    pub fn approver_arc(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Registers a tool, after the native tools, in catalog order.
    /// Default: only the native tools.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Whether to register the native tools (`read`, `write`, `edit`,
    /// `file_search`, `grep_files`, `bash`). The synthetic `tool_search` is
    /// always registered, after them. Default: `true`.
    pub fn native_tools(mut self, on: bool) -> Self {
        self.native_tools = on;
        self
    }

    /// Where runs keep their files (spill files, the saved receipt, and
    /// the journal of the default store), one folder per run; it must be
    /// outside the workspace, and no tool or sandboxed command can reach
    /// it. Default: the workspace's folder in the state folder,
    /// `<state_dir>/workspaces/<name>-<16 hex>/runs`
    /// ([`codemode_base::run_state`]).
    pub fn spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
        self
    }

    /// The state folder under which each workspace's runs are kept (when
    /// [`EngineBuilder::spill_dir`] is not set), made when missing
    /// (private to the user); it must be outside the workspace. The whole
    /// folder (every workspace's runs) is hidden from tools and sandboxed
    /// commands. Default: `$XDG_STATE_HOME/codemode`, else
    /// `$HOME/.local/state/codemode` ([`codemode_base::run_state::state_home`]);
    /// that default may lie inside the workspace (a workspace that holds
    /// your home folder): it is hidden and protected there.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Number of VM threads. Default: the number of CPUs.
    pub fn vm_threads(mut self, n: usize) -> Self {
        self.vm_threads = Some(n.max(1));
        self
    }

    /// Whether a VM thread that has just finished its runs makes the next
    /// VM's runtime, context and prelude while it waits, so the next run
    /// on it starts about 0.1 ms sooner (0.8M of a VM's 1.07M start
    /// instructions), for about 200 KiB held per VM thread. The first VM
    /// thread makes one when it starts either way (while the engine is
    /// still being built). Default: true; off for a process that runs one
    /// program and exits (`codemode run`), where it would be work thrown
    /// away.
    pub fn spare_vms(mut self, on: bool) -> Self {
        self.spare_vms = on;
        self
    }

    /// Runs tools on this multi-thread tokio runtime instead of one the
    /// engine makes. Default: an engine-owned multi-thread runtime with one worker per CPU.
    pub fn tool_runtime(mut self, handle: Handle) -> Self {
        self.tool_runtime = Some(handle);
        self
    }

    /// The MCP servers whose tools join the catalog as deferred tools
    /// (`mcp__<server>__<tool>`, from the live listing or the schema
    /// cache), each with an `mcp_connect__<server>` tool; a server starts
    /// only when the gate allows `mcp_connect__<server>` (docs/MCP.md).
    /// `options` sets timeouts and the schema cache folder; its
    /// `connect_check` is replaced by the gate's. Default: no MCP servers.
    pub fn mcp(mut self, config: crate::mcp::McpConfig, options: crate::mcp::PoolOptions) -> Self {
        self.mcp = Some((config, options));
        self
    }

    /// Where runs keep their journals (docs/JOURNAL.md): every run of the
    /// engine writes one, and [`Engine::resume`] reads it. A local store's
    /// folder must be outside the workspace ([`JournalStore::folder`]).
    /// Default: a [`LocalStore`](crate::journal::LocalStore) at the spill
    /// folder (`<spill_dir>/<run_id>/journal.jsonl`).
    ///
    /// [`JournalStore::folder`]: crate::journal::JournalStore::folder
    pub fn journal(mut self, store: Arc<dyn crate::journal::JournalStore>) -> Self {
        self.journal = JournalChoice::Store(store);
        self
    }

    /// Runs keep no journal: nothing is written for them, a call the
    /// approver pauses is refused instead, and no run can be resumed.
    /// Default: journaling on.
    pub fn no_journal(mut self) -> Self {
        self.journal = JournalChoice::Off;
        self
    }

    /// Every run is traced and handed to `sink` when it ends (spans and
    /// counters for OpenTelemetry: the `codemode-otel` crate;
    /// docs/TELEMETRY.md). Default: none, and runs are traced only when
    /// started inside a trace
    /// ([`RunOptions::trace_parent`](crate::run::RunOptions::trace_parent)).
    pub fn trace_sink(mut self, sink: Arc<dyn crate::telemetry::TraceSink>) -> Self {
        self.trace_sink = Some(sink);
        self
    }

    /// Checks the configuration once and starts the engine's threads.
    ///
    /// # Errors
    /// [`BuildError`] naming the workspace, the limit field, or the tool at
    /// fault.
    pub fn build(mut self) -> Result<Engine, BuildError> {
        let workspace = usable_workspace(&self.workspace)?;
        self.limits.validate().map_err(|(field, message)| BuildError::Limits { field, message })?;
        // Started first: the first VM thread makes its spare VM while the
        // rest is built.
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let vms = VmPool::new(self.vm_threads.unwrap_or(cpus), self.spare_vms)?;
        // The engine's own tools compile their schemas on first use (a run
        // that calls none compiles none); the host's, when built.
        let mut tools: Vec<(Arc<dyn Tool>, Compile)> = if self.native_tools {
            crate::tools::native().into_iter().map(|t| (t, Compile::OnFirstUse)).collect()
        } else {
            Vec::new()
        };
        let (tool_search, discovery_cell) = ToolSearch::new();
        tools.push((Arc::new(tool_search), Compile::OnFirstUse));
        tools.extend(self.tools.into_iter().map(|t| (t, Compile::AtBuild)));
        confinement::settle_policy(
            &workspace,
            &mut self.config.policy,
            self.mcp.as_ref().map(|(config, _)| config),
        );
        let state = super::run_state::RunStateFolders::settle(
            &workspace,
            self.spill_dir.take(),
            self.state_dir.take(),
        )?;
        let spill_root = state.spill_root.clone();
        let spill_confine = None;
        let journal = self.journal.into_store(&spill_root);
        let state = state.with_journal(&workspace, journal.as_deref())?;
        let approver_files = self.approver.as_ref().map(|a| a.named_files()).unwrap_or_default();
        let (protections, confinement) = confinement::confine(
            &workspace,
            &self.config,
            self.mcp.as_ref().map(|(config, options)| (config, options)),
            approver_files,
            &state,
        )
        .map_err(BuildError::Sandbox)?;
        super::rewritable_links::refuse_for_engine(
            &confinement,
            &state,
            self.mcp.as_ref().and_then(|(_, options)| options.cache_dir.as_deref()),
        )?;
        let pacing = super::pacing::Pacing::new(
            self.config.policy.tools.iter().map(|(name, t)| (name.as_str(), &t.limits)),
            // An untrusted file's `scope = "global"` is dropped: its limits
            // stay per process rather than refuse every run of an engine
            // whose journal cannot keep them (docs/LIMITS.md).
            self.mcp.iter().flat_map(|(c, _)| {
                c.servers
                    .values()
                    .map(|s| (s.name.as_str(), s.call_limits().with_global(s.global_limits && c.trusted)))
            }),
            journal.as_ref(),
        )
        .map_err(BuildError::Policy)?;
        let mcp = self.mcp.map(|(config, mut options)| {
            // The root a server's `roots/list` gets outside a tool call.
            options.workspace.get_or_insert_with(|| workspace.clone());
            let (link, connect_tools) = mcp_link::McpLink::new(config, options);
            tools.extend(connect_tools.into_iter().map(|t| (t, Compile::AtBuild)));
            link
        });
        let catalog = catalog_of(tools, mcp.as_deref())?;
        check_policy(&self.config.policy, &catalog.load())?;
        let discovery = Arc::new(Discovery::new(hidden_from_discovery(&self.config.policy)));
        let _ = discovery_cell
            .set(SearchLink { catalog: Arc::downgrade(&catalog), discovery: discovery.clone() });
        let (tools_handle, own) = tool_runtime(self.tool_runtime, cpus)?;
        if let Some(link) = &mcp {
            link.follow(&catalog, &tools_handle);
        }
        let journal_facts = resume::JournalFacts::new(&self.config, &self.limits);
        let engine = Engine {
            shared: Arc::new(Shared {
                catalog,
                discovery,
                mcp,
                limits: self.limits,
                posture: PostureCell::new(self.config.policy.posture),
                config: self.config,
                approver: self.approver.unwrap_or_else(default_approver),
                workspace: Arc::new(workspace),
                spill_root,
                spill_confine,
                confinement,
                protections,
                journal,
                journal_facts,
                tools: tools_handle,
                vms,
                cancel_watch: Arc::default(),
                overrun_watch: Arc::default(),
                pacing,
                trace_sink: self.trace_sink,
                _own_runtime: own,
            }),
        };
        super::overrun_watch::OverrunWatch::start(&engine.shared);
        Ok(engine)
    }
}

impl JournalChoice {
    /// The store runs write their journals to; `None` when journaling is off.
    /// The default store is the local folder store at `spill_root`, bound
    /// to the workspace (a journal naming another is not resumed).
    fn into_store(self, spill_root: &Path) -> Option<Arc<dyn crate::journal::JournalStore>> {
        match self {
            JournalChoice::Default => Some(Arc::new(crate::journal::LocalStore::for_workspace(spill_root))),
            JournalChoice::Off => None,
            JournalChoice::Store(store) => Some(store),
        }
    }
}

/// `path` made absolute, when it is a directory.
///
/// # Errors
/// [`BuildError::Workspace`] when it is missing or not a directory.
fn usable_workspace(path: &Path) -> Result<PathBuf, BuildError> {
    let workspace = std::fs::canonicalize(path)
        .map_err(|e| BuildError::Workspace { path: path.to_owned(), message: e.to_string() })?;
    if !workspace.is_dir() {
        return Err(BuildError::Workspace { path: path.to_owned(), message: "not a directory".into() });
    }
    Ok(workspace)
}

/// The catalog of `tools` and the MCP servers' known (deferred) tools; an
/// MCP tool that does not fit is left out with a warning.
///
/// # Errors
/// [`BuildError::Catalog`] when the tools do not form a catalog (a name
/// used twice, a bad schema).
fn catalog_of(
    tools: Vec<(Arc<dyn Tool>, Compile)>,
    mcp: Option<&mcp_link::McpLink>,
) -> Result<Arc<CatalogCell>, BuildError> {
    let known = mcp.map(|m| m.known_tools()).unwrap_or_default();
    let (cell, skipped) = CatalogCell::new(tools, known)?;
    match mcp {
        Some(link) => link.warn_left_out(skipped),
        None => {
            for tool in skipped {
                tracing::warn!("an MCP tool was left out of the catalog: {tool}");
            }
        }
    }
    Ok(Arc::new(cell))
}

/// Which tools `tool_search` never offers (bars) under `policy`: those a rule
/// denies whole, an MCP server's tools when its connect tool is denied
/// whole, and every tool that is not read-only in plan mode.
fn hidden_from_discovery(policy: &Policy) -> Barred {
    let plan = policy.mode == crate::gate::Mode::Plan;
    let denied_whole: Vec<String> =
        policy.rules.deny.iter().filter(|r| r.pattern.is_none()).map(|r| r.tool.clone()).collect();
    Box::new(move |spec: &ToolSpec| {
        let server_denied = match &spec.source {
            crate::catalog::ToolSource::Mcp { server } => {
                denied_whole.contains(&crate::mcp::naming::connect_name(server))
            }
            _ => false,
        };
        denied_whole.contains(&spec.name) || server_denied || (plan && !spec.is_read_only())
    })
}

/// The runtime tools run on: `given`, or one the engine makes with `cpus`
/// workers (and shuts down when dropped).
///
/// # Errors
/// [`BuildError::ToolRuntime`] when `given` is a current-thread runtime;
/// [`BuildError::Threads`] when the engine's own cannot start.
fn tool_runtime(given: Option<Handle>, cpus: usize) -> Result<(Handle, OwnedRuntime), BuildError> {
    match given {
        Some(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread => {
            Err(BuildError::ToolRuntime)
        }
        Some(h) => Ok((h, OwnedRuntime(None))),
        None => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cpus)
                .thread_name("codemode-tools")
                .enable_all()
                .build()?;
            Ok((rt.handle().clone(), OwnedRuntime(Some(rt))))
        }
    }
}

/// The approver of an engine built without one: it denies every call that
/// needs an approval, saying how to set one.
fn default_approver() -> Arc<dyn Approver> {
    Arc::new(crate::gate::approvers::DenyApprover::with_reason(
        "no approver: the engine denies calls that need an approval; \
         set one with EngineBuilder::approver, or allow the call by a rule or the posture",
    ))
}

/// Checks the policy against the catalog: a rule with a pattern on a tool
/// that has no primary argument could never match, which is a mistake to
/// report rather than a rule to ignore.
fn check_policy(policy: &Policy, catalog: &Catalog) -> Result<(), BuildError> {
    // A name that differs from a tool's only in case would silently never
    // match (tool names are exact): that is a typo to report. Other unknown
    // names are allowed, for tools that arrive later (MCP servers).
    let names = policy
        .rules
        .allow
        .iter()
        .chain(&policy.rules.ask)
        .chain(&policy.rules.deny)
        .map(|r| (r.tool.as_str(), format!("the rule `{r}`")))
        .chain(policy.tools.keys().map(|t| (t.as_str(), format!("the settings [tools.{t}]"))));
    for (name, what) in names {
        if catalog.get(name).is_none()
            && let Some(spec) = catalog.specs().find(|s| s.name.eq_ignore_ascii_case(name))
        {
            return Err(BuildError::Policy(format!(
                "{what} names `{name}`, but tool names are exact: did you mean `{}`?",
                spec.name
            )));
        }
    }
    let rules = policy.rules.allow.iter().chain(&policy.rules.ask).chain(&policy.rules.deny);
    for rule in rules {
        if rule.pattern.is_some()
            && let Some(entry) = catalog.get(&rule.tool)
            && entry.spec.primary_argument.is_none()
        {
            return Err(BuildError::Policy(format!(
                "the rule `{rule}` has a pattern, but `{}` has no argument rules can match; name the tool alone",
                rule.tool
            )));
        }
    }
    Ok(())
}
