//! Options shared by the subcommands that build an engine (`run`, `call`,
//! `batch`, `tools`, `search`, `types`, `mcp`): workspace, policy file, MCP
//! servers, mode, posture, approver, deadline.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use codemode::{Engine, Limits, Mode, Policy, Posture};

/// How to build the engine.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EngineArgs {
    /// Workspace root the tools work in [default: current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Policy file, yours: it applies whole [default: <workspace>/codemode.toml
    /// when present, which grants nothing until `codemode trust`].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// MCP servers, as the `mcpServers` JSON other MCP clients read; yours:
    /// they start without an approval [default: <workspace>/.mcp.json when
    /// present, whose servers need an approval until `codemode trust`].
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
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
    /// Run deadline in seconds, e.g. 60 or 0.5 [default: 60].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    deadline: Option<f64>,
}

impl EngineArgs {
    /// These options with `spec` as the approver when `--approve` is not
    /// given (`codemode resume` pauses again by default).
    pub(crate) fn approve_by_default(mut self, spec: &str) -> Self {
        self.approve.get_or_insert_with(|| spec.to_owned());
        self
    }

    /// Builds the engine these options describe.
    pub(crate) fn build(&self) -> anyhow::Result<CliEngine> {
        self.build_with(|_| {})
    }

    /// Whether calls that need an approval will be asked at the terminal
    /// (`--approve prompt`, or no `--approve` with stdin and stderr
    /// terminals), which reads answers from stdin and writes to stderr.
    pub(crate) fn prompts(&self) -> bool {
        use std::io::IsTerminal as _;
        match self.approve.as_deref() {
            Some(spec) => spec == "prompt",
            None => std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        }
    }

    /// [`EngineArgs::build`], letting `adjust` change the limits after the
    /// options set theirs (`codemode batch` sizes the call budget).
    pub(crate) fn build_with(&self, adjust: impl FnOnce(&mut Limits)) -> anyhow::Result<CliEngine> {
        let mut limits = Limits::default();
        if let Some(secs) = self.deadline {
            if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
                bail!("--deadline must be a number of seconds between 0 and 86400, got {secs}");
            }
            limits.deadline = Duration::from_secs_f64(secs);
        }
        adjust(&mut limits);
        let workspace = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut policy = match &self.config {
            // Named on the command line: the user's own, applied whole.
            Some(path) => Policy::load(path)?,
            None => {
                let default = workspace.join("codemode.toml");
                if default.exists() { workspace_policy(&default)? } else { Policy::default() }
            }
        };
        match self.mode.as_deref() {
            Some("plan") => policy.mode = Mode::Plan,
            Some("work") => policy.mode = Mode::Work,
            _ => {}
        }
        match self.posture.as_deref() {
            Some("ask") => policy.posture = Posture::Ask,
            Some("auto-review") => policy.posture = Posture::AutoReview,
            Some("full-access") => policy.posture = Posture::FullAccess,
            _ => {}
        }
        let approver = match &self.approve {
            Some(spec) => {
                codemode::approver_from_spec(spec).map_err(anyhow::Error::msg).context("--approve")?
            }
            None => codemode::default_approver(),
        };
        let mut builder =
            Engine::builder().workspace(&workspace).limits(limits).policy(policy).approver_arc(approver);
        if let Some(config) = self.mcp_config(&workspace)? {
            builder = builder.mcp(config, codemode::mcp::PoolOptions::default());
        }
        Ok(CliEngine(builder.build()?))
    }

    /// The MCP configuration: `--mcp-config`, else the workspace's
    /// `.mcp.json` when there is one (announced on stderr, like a
    /// workspace policy file: it decides which programs may be started).
    fn mcp_config(&self, workspace: &std::path::Path) -> anyhow::Result<Option<codemode::mcp::McpConfig>> {
        let path = match &self.mcp_config {
            Some(path) => path.clone(),
            None => {
                let default = workspace.join(".mcp.json");
                if !default.exists() {
                    return Ok(None);
                }
                default
            }
        };
        let mut config = codemode::mcp::McpConfig::load(&path)
            .with_context(|| format!("MCP configuration {}", path.display()))?;
        if self.mcp_config.is_none() {
            // Found in the workspace, not named by the user: its servers
            // start without an approval only once `codemode trust` has
            // recorded the file as it is now (docs/SECURITY.md).
            config.trusted = workspace_file_trusted(&path)?;
            let names: Vec<&str> = config.enabled().map(|s| s.name.as_str()).collect();
            let trust = if config.trusted {
                "trusted".to_owned()
            } else {
                let dir = workspace.display();
                format!(
                    "not trusted: each server needs an approval to start; `codemode trust {dir}` to trust it"
                )
            };
            eprintln!("codemode: MCP servers from {} ({trust}): {}", path.display(), names.join(", "));
        }
        Ok(Some(config))
    }
}

/// Whether the workspace file `path` is trusted (`codemode trust`). A trust
/// record that cannot be read is an error, never "trusted"; no config
/// folder at all means untrusted.
pub(crate) fn workspace_file_trusted(path: &std::path::Path) -> anyhow::Result<bool> {
    use codemode::trust::{TrustError, TrustState, TrustStore};
    let store = match TrustStore::user() {
        Ok(store) => store,
        Err(TrustError::NoConfigDir) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    Ok(store.state(path).context("workspace trust")? == TrustState::Trusted)
}

/// A workspace's own `codemode.toml`: applied whole when trusted, else only
/// its restrictions; either way the CLI says so in one line on stderr.
fn workspace_policy(path: &std::path::Path) -> anyhow::Result<Policy> {
    let policy = Policy::load(path)?;
    let summary = |p: &Policy| {
        format!(
            "mode {}, posture {}, {} rules, {} hooks",
            if p.mode == Mode::Plan { "plan" } else { "work" },
            p.posture.as_str(),
            p.rules.allow.len() + p.rules.ask.len() + p.rules.deny.len(),
            p.hooks.len()
        )
    };
    if workspace_file_trusted(path)? {
        eprintln!("codemode: policy from {} (trusted): {}", path.display(), summary(&policy));
        return Ok(policy);
    }
    let (policy, dropped) = policy.without_grants();
    if dropped.is_empty() {
        eprintln!(
            "codemode: policy from {} (untrusted, grants nothing): {}",
            path.display(),
            summary(&policy)
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
    Ok(policy)
}

/// The CLI's engine: when the command ends it ends the MCP servers'
/// process groups and reaps them, before the process exits (dropping an
/// engine alone would leave that to its tool runtime, which dies with the
/// process).
pub(crate) struct CliEngine(Engine);

impl std::ops::Deref for CliEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.0
    }
}

impl Drop for CliEngine {
    fn drop(&mut self) {
        self.0.shutdown_mcp_blocking();
    }
}
