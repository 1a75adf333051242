//! Options shared by the subcommands that build an engine: where the
//! workspace, policy file and MCP servers are ([`CatalogArgs`], all that
//! `tools`, `types`, `search` and `mcp list` take), and for the commands
//! that make calls (`run`, `call`, `batch`, `resume`, `mcp serve`, `mcp
//! tools`) mode, posture, approver, deadline and journal ([`EngineArgs`]);
//! the run limits of `run`, `resume`, `batch` and `mcp serve`
//! ([`LimitArgs`], [`CallLimitArgs`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codemode::config::ConfigFile;
use codemode::journal::{JournalSpec, JournalStore, Retention};
use codemode::limit_settings::{self as limit, LimitSettings};
use codemode::trust::{ReadFile, TrustState};
use codemode::{Engine, Limits, policy::Mode, policy::Posture};

/// Where the workspace, its policy and its MCP servers are: the options of
/// the commands that only read the catalog.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct CatalogArgs {
    /// Workspace root the tools work in [default: current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Policy file, yours: it applies whole [default: <workspace>/codemode.toml
    /// when present, which grants nothing until `codemode trust`].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// MCP servers, as other MCP clients write them (`mcpServers`, VS Code's
    /// `servers`, Zed's `context_servers`; JSONC); yours: they start without
    /// an approval [default: <workspace>/.mcp.json, else .cursor/mcp.json,
    /// else .vscode/mcp.json, whose servers need an approval until
    /// `codemode trust`].
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
}

impl CatalogArgs {
    /// Engine options with these places and nothing else set; `approve` as
    /// `--approve` (`codemode search` may start an MCP server through the
    /// gate).
    pub(crate) fn engine(&self, approve: Option<String>) -> EngineArgs {
        EngineArgs { catalog: self.clone(), approve, ..EngineArgs::default() }
    }
}

/// The call limits of `run`, `resume`, `batch` and `mcp serve`: over the
/// policy's `[limits]`, which is over the defaults (docs/LIMITS.md).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct CallLimitArgs {
    /// Tool calls a run may make, 1-1000000; the call past it ends the run
    /// [default: [limits] max_calls, else 1000].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_max_calls)]
    max_calls: Option<usize>,
    /// Tool calls running at once, 1-1024; more wait their turn [default:
    /// [limits] max_in_flight, else 16].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_max_in_flight)]
    max_in_flight: Option<usize>,
    /// Seconds one tool call may take, e.g. 120 or 0.5, unless its own
    /// timeout says otherwise (the policy's [tools.NAME] timeout_ms, an MCP
    /// server's timeout_ms); bash is timed by its `timeout` argument alone
    /// (default 120 s), never by this [default: [limits] tool_timeout, else
    /// 30].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_seconds)]
    tool_timeout: Option<Duration>,
}

/// [`CallLimitArgs`] and the program's memory: the limits of the commands
/// that run a program (`run`, `resume`, `mcp serve`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct LimitArgs {
    #[command(flatten)]
    calls: CallLimitArgs,
    /// Memory of the program's VM, 1MiB-16GiB, as bytes or with a unit:
    /// 64MiB, 512KiB, 1GiB [default: [limits] memory, else 64MiB].
    #[arg(long, value_name = "SIZE", value_parser = limit::parse_memory)]
    memory: Option<usize>,
    /// Bytes of the program's value (compact JSON) kept and printed,
    /// 1KiB-1GiB, e.g. 1MiB; a larger value is cut and `run` exits 6
    /// [default: [limits] max_value, else 16KiB].
    #[arg(long, value_name = "SIZE", value_parser = limit::parse_value_size)]
    max_value: Option<usize>,
}

impl CallLimitArgs {
    /// The limits these flags set.
    pub(crate) fn settings(&self) -> LimitSettings {
        let mut s = LimitSettings::default();
        s.max_calls = self.max_calls;
        s.max_in_flight = self.max_in_flight;
        s.tool_timeout = self.tool_timeout;
        s
    }
}

impl LimitArgs {
    /// The limits these flags set.
    pub(crate) fn settings(&self) -> LimitSettings {
        let mut s = self.calls.settings();
        s.memory_bytes = self.memory;
        s.value_bytes = self.max_value;
        s
    }
}

fn parse_max_calls(text: &str) -> Result<usize, String> {
    limit::check_count(parse_integer(text)?, limit::MAX_CALLS_RANGE)
}

fn parse_max_in_flight(text: &str) -> Result<usize, String> {
    limit::check_count(parse_integer(text)?, limit::MAX_IN_FLIGHT_RANGE)
}

fn parse_integer(text: &str) -> Result<i64, String> {
    text.trim().parse().map_err(|_| format!("`{text}` is not a whole number"))
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 =
        text.trim().parse().map_err(|_| format!("`{text}` is not a number of seconds, e.g. 120 or 0.5"))?;
    limit::check_seconds(secs)
}

/// How to build the engine.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct EngineArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// plan (read-only tools only) or work [default: the policy's, else work].
    #[arg(long, value_name = "MODE", value_parser = ["plan", "work"])]
    mode: Option<String>,
    /// ask, auto-review or full-access [default: the policy's, else ask].
    #[arg(long, value_name = "POSTURE", value_parser = ["ask", "auto-review", "full-access"])]
    posture: Option<String>,
    /// Who approves calls that need it: deny, allow, prompt, pause (end the
    /// run paused, for `codemode resume`) or cmd:PROGRAM [default: prompt
    /// on a terminal, else deny; pause for `resume`].
    #[arg(long, value_name = "APPROVER")]
    approve: Option<String>,
    /// Run deadline in seconds, e.g. 60 or 0.5, at most 86400 [default:
    /// [limits] deadline, else 60].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = parse_seconds)]
    deadline: Option<Duration>,
    /// Where runs' journals go: a folder outside the workspace,
    /// postgres://..., or off [default: the policy's [journal] url, else
    /// the workspace's folder in $XDG_STATE_HOME/codemode].
    #[arg(long, value_name = "DIR|URL|off")]
    journal: Option<String>,
    /// Let HTTP MCP servers with a login re-authorize in a browser during
    /// this command when they ask for more OAuth scope (403
    /// insufficient_scope) or refuse the login, at most twice per server
    /// [default: they fail, naming `codemode mcp login SERVER`].
    #[arg(long)]
    login: bool,
    /// The limits the command's flags set (see [`EngineArgs::with_limits`]).
    #[arg(skip)]
    limits: LimitSettings,
    /// `--no-admission` of `run` and `mcp serve` (see
    /// [`EngineArgs::without_admission`]).
    #[arg(skip)]
    no_admission: bool,
    /// Set by commands that run one program and exit (`run`, `resume`):
    /// see [`EngineArgs::for_one_run`].
    #[arg(skip)]
    one_run: bool,
    /// `--upstream-idle` of `mcp serve` (see [`EngineArgs::with_upstream_idle`]).
    #[arg(skip)]
    upstream_idle: Option<std::time::Duration>,
}

impl EngineArgs {
    /// These options with the limits `flags` set (over the policy's
    /// `[limits]`).
    pub(crate) fn with_limits(mut self, flags: LimitSettings) -> Self {
        self.limits = flags;
        self
    }

    /// These options with MCP servers stopped after `idle` without a call
    /// (`None`: never).
    pub(crate) fn with_upstream_idle(mut self, idle: Option<std::time::Duration>) -> Self {
        self.upstream_idle = idle;
        self
    }

    /// These options with the policy's admission check turned off when
    /// `off` (`--no-admission`).
    pub(crate) fn without_admission(mut self, off: bool) -> Self {
        self.no_admission = off;
        self
    }

    /// These options for a process that runs one program and exits: one VM
    /// thread ([`codemode::EngineBuilder::vm_threads`]), which makes no
    /// spare VM after the run ([`codemode::EngineBuilder::spare_vms`]).
    pub(crate) fn for_one_run(mut self) -> Self {
        self.one_run = true;
        self
    }

    /// These options with `spec` as the approver when `--approve` is not
    /// given (`codemode resume` pauses again by default).
    pub(crate) fn approve_by_default(mut self, spec: &str) -> Self {
        self.approve.get_or_insert_with(|| spec.to_owned());
        self
    }

    /// Refuses `--approve pause` for a command whose calls cannot pause
    /// (`what` names it).
    ///
    /// # Errors
    /// `--approve pause` was given.
    pub(crate) fn refuse_pause(&self, what: &str) -> anyhow::Result<()> {
        if self.approve.as_deref().map(str::trim) == Some("pause") {
            bail!(
                "--approve pause: {what} cannot pause (only a program run keeps a journal to resume); \
                 use prompt, deny, allow or cmd:PROGRAM, or run a program with `codemode run`"
            );
        }
        Ok(())
    }

    /// Options naming only where runs are (`codemode runs`, `approve`).
    pub(crate) fn placed(
        workspace: Option<PathBuf>,
        config: Option<PathBuf>,
        journal: Option<String>,
    ) -> Self {
        EngineArgs {
            catalog: CatalogArgs { workspace, config, mcp_config: None },
            journal,
            ..EngineArgs::default()
        }
    }

    /// The options `codemode approve` needs to find a run made with these
    /// options (workspace, policy file, journal), as command-line text.
    pub(crate) fn approve_options(&self) -> String {
        EngineArgs::placed(self.catalog.workspace.clone(), self.catalog.config.clone(), self.journal.clone())
            .resume_options(true)
    }

    /// Whether `--journal` holds a credential that the options printed for
    /// a person show masked (`***`, [`codemode::journal::without_credentials`]).
    pub(crate) fn journal_masked(&self) -> bool {
        self.journal.as_deref().is_some_and(|j| codemode::journal::without_credentials(j) != j)
    }

    /// Whether `--workspace` was given (else the workspace is the current
    /// folder).
    pub(crate) fn workspace_given(&self) -> bool {
        self.catalog.workspace.is_some()
    }

    /// The approver spec given with `--approve`, if any.
    pub(crate) fn approver_spec(&self) -> Option<&str> {
        self.approve.as_deref()
    }

    /// The options a resume of a run made with these options needs again
    /// (the same workspace, policy, MCP servers, mode, posture and journal:
    /// a changed policy is refused), as command-line text, each value
    /// quoted when it needs to be; the limits given as flags too, the
    /// deadline only `with_deadline`.
    pub(crate) fn resume_options(&self, with_deadline: bool) -> String {
        let quote = |v: &str| {
            if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "/._-:=@".contains(c)) {
                v.to_owned()
            } else {
                format!("'{}'", v.replace('\'', "'\\''"))
            }
        };
        let path =
            |p: &PathBuf| quote(&std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string());
        let mut out = String::new();
        let mut add = |flag: &str, value: String| {
            out.push_str(&format!(" --{flag} {value}"));
        };
        if let Some(w) = &self.catalog.workspace {
            add("workspace", path(w));
        }
        if let Some(c) = &self.catalog.config {
            add("config", path(c));
        }
        if let Some(m) = &self.catalog.mcp_config {
            add("mcp-config", path(m));
        }
        if let Some(m) = &self.mode {
            add("mode", quote(m));
        }
        if let Some(p) = &self.posture {
            add("posture", quote(p));
        }
        if let Some(j) = &self.journal {
            // A folder as an absolute path (the hint may be run from
            // elsewhere); a database's connection string with its
            // credentials masked (stderr ends up in logs, and a server's
            // paused result reaches the model).
            let shown = match codemode::journal::JournalSpec::parse(j) {
                Ok(codemode::journal::JournalSpec::Folder(dir)) => path(&dir),
                _ => quote(&codemode::journal::without_credentials(j)),
            };
            add("journal", shown);
        }
        // The limits given as flags: a resumed run gets the same budget.
        if let Some(d) = self.deadline.or(self.limits.deadline)
            && with_deadline
        {
            add("deadline", d.as_secs_f64().to_string());
        }
        if let Some(n) = self.limits.max_calls {
            add("max-calls", n.to_string());
        }
        if let Some(n) = self.limits.max_in_flight {
            add("max-in-flight", n.to_string());
        }
        if let Some(d) = self.limits.tool_timeout {
            add("tool-timeout", d.as_secs_f64().to_string());
        }
        if let Some(n) = self.limits.memory_bytes {
            add("memory", n.to_string());
        }
        if let Some(n) = self.limits.value_bytes {
            add("max-value", n.to_string());
        }
        out
    }

    /// Builds the engine these options describe.
    pub(crate) fn build(&self) -> anyhow::Result<CliEngine> {
        self.build_with(|_, _| {})
    }

    /// Whether calls that need an approval will be asked at the terminal
    /// (`--approve prompt`, or no `--approve` with stderr a terminal and a
    /// controlling terminal, as `codemode::approval::default_approver` decides),
    /// which asks and reads answers on the controlling terminal.
    pub(crate) fn prompts(&self) -> bool {
        use std::io::IsTerminal as _;
        match self.approve.as_deref() {
            Some(spec) => spec.trim() == "prompt",
            None => {
                std::io::stderr().is_terminal()
                    && std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").is_ok()
            }
        }
    }

    /// [`EngineArgs::build`], letting `adjust` change the limits after the
    /// options set theirs; it is also given what the policy's `[limits]`
    /// and the flags set (`codemode batch` sizes the call budget unless
    /// one of them set it).
    pub(crate) fn build_with(
        &self,
        adjust: impl FnOnce(&mut Limits, &LimitSettings),
    ) -> anyhow::Result<CliEngine> {
        let workspace = self.catalog.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut config = load_config(self.catalog.config.as_deref(), &workspace, Notice::Full)?;
        // The defaults, then the file's [limits], then the flags.
        let mut limits = Limits::default();
        let mut flags = self.limits;
        flags.deadline = self.deadline.or(flags.deadline);
        let set = config.limits.overridden_by(flags);
        set.apply(&mut limits);
        adjust(&mut limits, &set);
        let journal = journal_choice(self.journal.as_deref(), &config, &workspace)?;
        let retention = config.journal.retention;
        match self.mode.as_deref() {
            Some("plan") => config.policy.mode = Mode::Plan,
            Some("work") => config.policy.mode = Mode::Work,
            _ => {}
        }
        if self.no_admission {
            config.policy.admission = false;
        }
        match self.posture.as_deref() {
            Some("ask") => config.policy.posture = Posture::Ask,
            Some("auto-review") => config.policy.posture = Posture::AutoReview,
            Some("full-access") => config.policy.posture = Posture::FullAccess,
            _ => {}
        }
        let approver = self.approver()?;
        let mut builder = Engine::builder()
            .workspace(&workspace)
            .limits(limits)
            .config(config)
            .approver_arc(approver)
            .spare_vms(!self.one_run);
        if self.one_run {
            // One program, so one VM thread: a second would only start a
            // thread and a runtime for nothing (docs/PERFORMANCE.md,
            // "`codemode run`: one VM thread ...").
            builder = builder.vm_threads(1);
        }
        match journal {
            JournalChoice::Default => {}
            JournalChoice::Off => builder = builder.no_journal(),
            JournalChoice::Store(store) => builder = builder.journal(store),
        }
        if let Some(config) = self.mcp_config(&workspace)? {
            let mut options =
                codemode::mcp::PoolOptions { idle_stop: self.upstream_idle, ..Default::default() };
            if self.login {
                options.interactive_login = Some(Arc::new(codemode::mcp::oauth::InteractiveLogin::new(
                    |server, url, opened| {
                        let opened = opened.map(|how| format!(" (opened with {how})")).unwrap_or_default();
                        eprintln!(
                            "codemode: MCP server `{server}` asks for authorization; open this URL to authorize{opened}:\n{url}"
                        );
                    },
                )));
            }
            builder = builder.mcp(config, options);
        }
        if let Some(sink) = super::telemetry::sink() {
            builder = builder.trace_sink(sink);
        }
        Ok(CliEngine { engine: builder.build()?, retention, detached: false })
    }

    /// The approver `--approve` names, else the default one (the
    /// terminal's prompt when there is one, else deny).
    pub(crate) fn approver(&self) -> anyhow::Result<Arc<dyn codemode::Approver>> {
        Ok(match &self.approve {
            Some(spec) => codemode::approval::approver_from_spec(spec)
                .map_err(anyhow::Error::msg)
                .context("--approve")?,
            None => codemode::approval::default_approver(),
        })
    }

    /// The MCP configuration these options name (see
    /// [`EngineArgs::mcp_config`]), without building an engine.
    pub(crate) fn mcp_config_only(&self) -> anyhow::Result<Option<codemode::mcp::McpConfig>> {
        let workspace = self.catalog.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        self.mcp_config(&workspace)
    }

    /// The MCP configuration: `--mcp-config`, else the workspace's
    /// `.mcp.json`, `.cursor/mcp.json` or `.vscode/mcp.json`, the first
    /// found (announced on stderr, like a workspace policy file: it decides
    /// which programs may be started). Keys without effect are warned about
    /// on stderr, one line per key; an untrusted file's `autoApprove` too.
    fn mcp_config(&self, workspace: &std::path::Path) -> anyhow::Result<Option<codemode::mcp::McpConfig>> {
        let path = match &self.catalog.mcp_config {
            Some(path) => path.clone(),
            None => match codemode::mcp::workspace_config_file(workspace) {
                Some(found) => found,
                None => return Ok(None),
            },
        };
        let mut config = if self.catalog.mcp_config.is_none() {
            // Found in the workspace, not named by the user: its servers
            // start without an approval only once `codemode trust` has
            // recorded the file as it is now, and the commands' files as
            // they are now (docs/SECURITY.md). Read once: the trust is
            // decided by the bytes parsed.
            let file = ReadFile::read_in(workspace, &path)
                .with_context(|| format!("MCP configuration {}", path.display()))?;
            let mut config = codemode::mcp::McpConfig::load_text_in(&path, file.text()?, Some(workspace))
                .with_context(|| format!("MCP configuration {}", path.display()))?;
            config.trusted = workspace_file_trust(&file, workspace)? == TrustState::Trusted;
            if !config.trusted {
                refuse_undetermined_servers(&mut config, &path, workspace);
            }
            config
        } else {
            codemode::mcp::McpConfig::load_in(&path, Some(workspace))
                .with_context(|| format!("MCP configuration {}", path.display()))?
        };
        // An entry that is this codemode serving this workspace would be
        // its own upstream server: left out, and named in the warnings.
        super::own_server::skip_own_servers(&mut config, workspace);
        if self.catalog.mcp_config.is_none() {
            let names: Vec<&str> = config.enabled().map(|s| s.name.as_str()).collect();
            let trust = if config.trusted {
                "trusted".to_owned()
            } else {
                let dir = workspace.display();
                format!(
                    "not trusted: starting each server needs an approval, unless the posture is full-access; \
                     `codemode trust {dir}` to trust it"
                )
            };
            super::note!(
                "MCP servers from {} ({trust}): {}",
                path.display(),
                super::run::printable(&names.join(", "))
            );
        }
        for warning in config.warnings() {
            eprintln!("codemode: {}", super::run::printable(&warning));
        }
        if !config.trusted {
            let listing: Vec<&str> =
                config.enabled().filter(|s| !s.auto_approve.is_empty()).map(|s| s.name.as_str()).collect();
            if !listing.is_empty() {
                eprintln!(
                    "codemode: {}: `autoApprove`/`alwaysAllow` (server{} {}) ignored: the file is not trusted, \
                     so its servers' tools are approved as the posture says",
                    path.display(),
                    if listing.len() == 1 { "" } else { "s" },
                    listing.join(", ")
                );
            }
        }
        Ok(Some(config))
    }
}

/// How the workspace file read as `file` stands (`codemode trust`); when
/// it is not trusted for a reason beyond "never trusted" (a link, a pinned
/// file changed), one line on stderr says so and names `codemode trust`.
/// A trust record that cannot be read is an error, never "trusted"; no
/// config folder at all means untrusted.
pub(crate) fn workspace_file_trust(file: &ReadFile, workspace: &Path) -> anyhow::Result<TrustState> {
    use codemode::trust::{TrustError, TrustStore};
    let store = match TrustStore::user() {
        Ok(store) => store,
        Err(TrustError::NoConfigDir) => return Ok(TrustState::Untrusted),
        Err(e) => return Err(e.into()),
    };
    let state = store.state_of(file).context("workspace trust")?;
    let shown = file.path().display();
    if let Some(link) = file.link() {
        let how = if link == file.path() {
            "is a symbolic link".to_owned()
        } else {
            format!("is reached through the symbolic link {}", link.display())
        };
        eprintln!(
            "codemode: {shown} {how}: it applies as an untrusted file (its restrictions, not its grants); \
             only a workspace's own file can be trusted: copy it in place of the link"
        );
    } else if let TrustState::PinChanged { file: pinned } = &state {
        eprintln!(
            "codemode: {shown} is not trusted: {}, which its commands run, changed since it was trusted; \
             read it, then `codemode trust {}`",
            pinned.display(),
            workspace.display()
        );
    }
    Ok(state)
}

/// Drops the servers of an untrusted workspace MCP configuration whose
/// files cannot all be known (`sh -c "$X"`): no approval can say what
/// such a command would run; one line on stderr per server.
fn refuse_undetermined_servers(config: &mut codemode::mcp::McpConfig, path: &Path, workspace: &Path) {
    let names: Vec<String> = config.enabled().map(|s| s.name.clone()).collect();
    for name in names {
        let Some(server) = config.servers.get_mut(&name) else { continue };
        let one = codemode::mcp::McpConfig {
            servers: [(name.clone(), server.clone())].into(),
            ..Default::default()
        };
        if let Some(why) = one.command_pins(workspace).undetermined.first() {
            server.disabled = true;
            eprintln!(
                "codemode: {}: {} is not started: the file is not trusted and codemode cannot tell what it runs \
                 ({why})",
                path.display(),
                super::run::printable(&format!("server `{name}`")),
            );
        }
    }
}

/// What the CLI says about a workspace's own `codemode.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// One line on stderr: applied whole, or what of it is ignored.
    Full,
    /// Only when its `[journal] url` is ignored (`codemode runs`).
    JournalOnly,
}

/// The configuration file: `--config FILE` applied whole, else the
/// workspace's `codemode.toml` as its trust allows, else the default.
pub(crate) fn load_config(
    config: Option<&Path>,
    workspace: &Path,
    notice: Notice,
) -> anyhow::Result<ConfigFile> {
    match config {
        // Named on the command line: the user's own, applied whole.
        Some(path) => Ok(ConfigFile::load(path)?),
        None => {
            let default = workspace.join("codemode.toml");
            if default.exists() { workspace_config(&default, notice) } else { Ok(ConfigFile::default()) }
        }
    }
}

/// Where an engine's runs keep their journals.
pub(crate) enum JournalChoice {
    /// The engine's default: the workspace's folder in the state folder.
    Default,
    Off,
    Store(Arc<dyn JournalStore>),
}

impl JournalChoice {
    /// The store, `None` for the default folder or off.
    pub(crate) fn store(self) -> Option<Arc<dyn JournalStore>> {
        match self {
            JournalChoice::Store(store) => Some(store),
            JournalChoice::Default | JournalChoice::Off => None,
        }
    }
}

/// The journal `--journal` names (a relative folder taken from the current
/// directory), else the file's `[journal] url` (a relative folder taken
/// from the workspace; an untrusted workspace file's url was dropped by
/// `ConfigFile::without_grants`), else the default.
pub(crate) fn journal_choice(
    flag: Option<&str>,
    config: &ConfigFile,
    workspace: &Path,
) -> anyhow::Result<JournalChoice> {
    let (spec, what) = match (flag, config.journal.url.as_deref()) {
        (Some(flag), _) => {
            let spec = match JournalSpec::parse(flag).map_err(anyhow::Error::msg).context("--journal")? {
                JournalSpec::Folder(dir) => std::path::absolute(&dir)
                    .with_context(|| format!("--journal {}", dir.display()))?
                    .display()
                    .to_string(),
                _ => flag.to_owned(),
            };
            (spec, "--journal".to_owned())
        }
        (None, Some(url)) => {
            let from =
                config.source.as_ref().map_or_else(|| "the policy".to_owned(), |p| p.display().to_string());
            (url.to_owned(), format!("[journal] url of {from}"))
        }
        (None, None) => {
            if let Ok(workspace) = std::fs::canonicalize(workspace) {
                move_legacy_runs(&workspace);
            }
            return Ok(JournalChoice::Default);
        }
    };
    // The workspace as the engine will see it; an unusable one is reported
    // when the engine is built.
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    move_legacy_runs(&workspace);
    Ok(match codemode_journal_postgres::open_store(&spec, &workspace).with_context(|| what)? {
        None => JournalChoice::Off,
        Some(store) => JournalChoice::Store(store),
    })
}

/// Moves the runs an earlier codemode kept in `<workspace>/.codemode/runs`
/// to the workspace's folder in the state folder, once, saying so in one
/// line on stderr (docs/JOURNAL.md, "Runs on disk"). Never an error: what
/// goes wrong is a warning.
fn move_legacy_runs(workspace: &Path) {
    let Ok(to) = codemode::journal::run_state::runs_folder(workspace) else { return };
    match codemode::journal::move_legacy_runs(workspace, &to) {
        Ok(Some(moved)) => eprintln!("codemode: {moved}"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("codemode: warning: runs in {}/.codemode/runs were not moved: {e}", workspace.display())
        }
    }
}

/// A workspace's own `codemode.toml`: applied whole when trusted, else only
/// its restrictions; the CLI says so in one line on stderr (with
/// [`Notice::JournalOnly`], only when its journal url is ignored).
fn workspace_config(path: &std::path::Path, notice: Notice) -> anyhow::Result<ConfigFile> {
    // Read once: the trust is decided by the bytes parsed.
    let workspace = path.parent().unwrap_or(Path::new("."));
    let file =
        ReadFile::read_in(workspace, path).with_context(|| format!("the policy file {}", path.display()))?;
    let config = ConfigFile::load_text(path, file.text()?)?;
    let summary = |p: &codemode::Policy| {
        format!(
            "mode {}, posture {}, {} rules, {} hooks",
            if p.mode == Mode::Plan { "plan" } else { "work" },
            p.posture.as_str(),
            p.rules.allow.len() + p.rules.ask.len() + p.rules.deny.len(),
            p.hooks.len()
        )
    };
    if workspace_file_trust(&file, workspace)? == TrustState::Trusted {
        if notice == Notice::Full {
            super::note!("policy from {} (trusted): {}", path.display(), summary(&config.policy));
        }
        return Ok(config);
    }
    let (config, dropped) = config.without_grants();
    if notice == Notice::JournalOnly {
        let journal: Vec<&str> = dropped
            .iter()
            .filter(|d| d.contains("journal"))
            .map(|d| if d == "journal url" { "[journal] url" } else { d.as_str() })
            .collect();
        if !journal.is_empty() {
            eprintln!(
                "codemode: {} is not trusted: {} ignored; read it, then `codemode trust {}`",
                path.display(),
                journal.iter().map(|d| format!("its {d} is")).collect::<Vec<_>>().join(", "),
                path.parent().map_or_else(|| ".".into(), |d| d.display().to_string())
            );
        }
    } else if dropped.is_empty() {
        super::note!(
            "policy from {} (untrusted, grants nothing): {}",
            path.display(),
            summary(&config.policy)
        );
    } else {
        eprintln!(
            "codemode: {} is not trusted: its restrictions apply, its grants do not ({} ignored); \
             read it, then `codemode trust {}` to apply it whole",
            path.display(),
            dropped.join(", "),
            path.parent().map_or_else(|| ".".into(), |d| d.display().to_string())
        );
    }
    Ok(config)
}

/// The CLI's engine: when the command ends it ends the MCP servers'
/// process groups and reaps them, before the process exits (dropping an
/// engine alone would leave that to its tool runtime, which dies with the
/// process).
pub(crate) struct CliEngine {
    engine: Engine,
    /// How long runs are kept (`[journal] keep_runs`, `keep_days`).
    retention: Retention,
    /// The MCP servers were handed over with [`CliEngine::into_engine`].
    detached: bool,
}

impl CliEngine {
    /// The engine, for an owner that ends its MCP servers itself
    /// (`Engine::shutdown_mcp`, or dropping its last handle): dropping this
    /// no longer does.
    pub(crate) fn into_engine(mut self) -> Engine {
        self.detached = true;
        self.engine.clone()
    }

    /// Prunes the workspace's runs to the configured retention, keeping
    /// `run_id` (the run just made). Never an error: what goes wrong is a
    /// warning on stderr.
    pub(crate) fn apply_retention(&self, run_id: &str) {
        super::retention::prune_runs(&self.engine, self.retention, run_id, None);
    }

    /// [`CliEngine::apply_retention`] after a run that went on since
    /// `started`: a run another process ended meanwhile (a resume of
    /// another run at the same time) is left to the next prune
    /// ([`codemode::journal::PruneOptions::at`]).
    pub(crate) fn apply_retention_since(&self, run_id: &str, started: std::time::SystemTime) {
        super::retention::prune_runs(&self.engine, self.retention, run_id, Some(started));
    }

    /// How long runs are kept (`[journal] keep_runs`, `keep_days`).
    pub(crate) fn retention(&self) -> Retention {
        self.retention
    }
}

impl std::ops::Deref for CliEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl Drop for CliEngine {
    fn drop(&mut self) {
        if !self.detached {
            self.engine.shutdown_mcp_blocking();
        }
        // The journals written or synced after their runs' receipts are
        // done before the command returns: the store's last clone may be
        // dropped later, on a VM thread the process does not wait for.
        if let Some(store) = self.engine.journal_store() {
            store.flush();
        }
        // The command ends with the process: what had to be done before
        // it (its MCP servers ended and reaped, its journals written) is
        // done above. Freeing the engine's memory (the catalog's schemas,
        // every tool's spec) would cost about 0.3M instructions of a
        // 5M-instruction `codemode run` and change nothing, so its last
        // handle is left to the process's exit (docs/PERFORMANCE.md).
        if !self.detached {
            std::mem::forget(self.engine.clone());
        }
    }
}
