//! The MCP server configuration: the JSON (JSONC) that common MCP clients
//! write (`mcpServers`, VS Code's `servers` + `inputs`, Zed's
//! `context_servers`; see `dialect.rs`), with codemode's per-server
//! settings.
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "node", "args": ["server.js", "${HOME}/notes"],
//!             "env": {"TOKEN": "${TOKEN:-none}"}, "cwd": "tools",
//!             "envFile": ".env", "disabledTools": ["delete_file"],
//!             "autoApprove": ["read_file"],
//!             "timeout_ms": 60000, "max_total_timeout_ms": 600000,
//!             "startup_timeout_ms": 30000,
//!             "read_only": true, "max_in_flight": 8, "rate": 5,
//!             "retry": {"attempts": 3, "base_delay_ms": 500}},
//!   "web":   {"type": "http", "url": "https://example.com/mcp",
//!             "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
//!   "old":   {"command": "old-server", "disabled": true}
//! }}
//! ```
//!
//! - A server with `command` is a stdio server; one with `url` (Windsurf:
//!   `serverUrl`; or `type: "http"` / `"streamable-http"` /
//!   `"streamableHttp"`) is a streamable HTTP server. An entry with
//!   `type: "sse"` (the legacy HTTP+SSE transport, not supported), another
//!   `type` codemode does not know, or neither `command` nor `url` (a
//!   shape written for another client, such as `url` nested under
//!   `transport`) is skipped with a warning naming the key
//!   ([`McpConfig::skipped`]), so it does not stop the other servers.
//! - Variables are expanded in `command`, `args`, `env` values, `cwd`,
//!   `envFile`, `url` and `headers` values: `${VAR}`, `${VAR:-default}` and
//!   `${env:VAR}` from the environment, `${userHome}` (`$HOME`),
//!   `${workspaceFolder}` (the workspace root, given to
//!   [`McpConfig::load_in`]), `${input:ID}` (a VS Code input: the
//!   environment variable `CODEMODE_INPUT_<ID>`, else the input's
//!   `default`; see [`input_variable`]). A missing value is an error naming
//!   the server, the field and where a value can come from. `$` not
//!   followed by `{` is kept as is.
//! - A relative `cwd` or `envFile` is resolved against the folder of the
//!   config file. `envFile` is dotenv text (read with `dotenvy`); `env`
//!   entries win over it.
//! - `disabledTools` (the server's own tool names) are hidden: not listed,
//!   not callable. `autoApprove` / `alwaysAllow` (tool names) become allow
//!   rules `mcp__<server>__<tool>` when the file is trusted
//!   ([`McpConfig::auto_approve_rules`]); an untrusted file's are ignored.
//!   `timeout` (Cline: seconds, at most 3600) is the per-call timeout like
//!   `timeout_ms`.
//! - Keys that have no effect in codemode (`description`, a misspelt field,
//!   ...) are collected in [`McpConfig::ignored`] for one warning per key
//!   ([`McpConfig::warnings`]).
//! - A `disabled: true` server is neither started nor listed; an error in
//!   its entry (other than its name) does not stop the file loading.
//! - A server's name becomes part of tool names (`mcp__<server>__<tool>`):
//!   it needs 1 to 64 characters, at least one ASCII letter or digit, and
//!   no control characters; other characters are replaced and the names
//!   get a hash suffix (src/mcp/naming.rs).
//! - Values that came from the environment, an input or an `envFile` (and
//!   every literal `headers` value) are secrets as far as codemode is
//!   concerned: [`ServerConfig::shown`] and [`ServerConfig::launch_line`]
//!   show the configuration as written (`${VAR}`, literal header values and
//!   `envFile` values as [`REDACTED`]), and [`ServerConfig::redact`] takes
//!   the expanded values out of any text (error messages, stderr tails,
//!   logs). Only the process and the HTTP client get the expanded values.
//! - `read_only: true` exposes and allows only the server's tools annotated
//!   `readOnlyHint: true`; every other tool of it is hidden and refused.
//!   It never makes a tool read-only that did not say so.
//! - `max_in_flight`, `rate` (calls per second) and `retry` (`{attempts,
//!   base_delay_ms, max_delay_ms, jitter}`) limit calls of the server's
//!   tools; the engine applies them (docs/LIMITS.md), per process or, with
//!   `"scope": "global"`, across every process sharing the PostgreSQL
//!   journal store.

mod env_paths;
mod http_entry;
mod secrets;
mod server_entry;
mod stdio_entry;
#[cfg(test)]
mod tests;
mod variables;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use secrets::redact_known_secrets;
use server_entry::{disabled_server, parse_server};
use variables::Vars;

/// What a literal `headers` value (one without `${VAR}`) is shown as.
pub const REDACTED: &str = "[redacted]";

/// Expanded values shorter than this many bytes are not taken out of free
/// text by [`ServerConfig::redact`] (replacing every `1` or `a` in a message
/// would garble it and hide nothing worth hiding); they are still never
/// shown by [`ServerConfig::shown`] or [`ServerConfig::launch_line`].
pub const MIN_REDACTED_LEN: usize = 4;

/// Default wait for a server's `initialize` answer: 30 s.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Default longest a tool call of a server may last while its progress
/// reports keep resetting its timeout (`max_total_timeout_ms`): 10 min.
/// A call that reports no progress is cut at its timeout as before.
pub const DEFAULT_MAX_TOTAL_TIMEOUT: Duration = Duration::from_secs(600);

/// A configuration error, naming the server and the field where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read MCP config {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The file is not JSON(C), or its top level has no servers object.
    #[error(
        "MCP config is not valid: {message} (expected {{\"mcpServers\": {{\"NAME\": {{...}}}}}}, VS Code's \
         {{\"servers\": {{...}}}} or Zed's {{\"context_servers\": {{...}}}})"
    )]
    Syntax {
        /// What the parser said.
        message: String,
    },
    /// A server's field is wrong.
    #[error("MCP server `{server}`: field `{field}`: {message}")]
    Field {
        /// The server's name.
        server: String,
        /// The field, e.g. `args[2]` or `env.TOKEN`.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// How codemode reaches one server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking JSON-RPC over stdin/stdout.
    Stdio {
        /// The program (looked up in `PATH` when it has no slash).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (added to codemode's environment).
        env: BTreeMap<String, String>,
        /// Working folder; `None` is codemode's own.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint (MCP specification 2025-03-26 and later,
    /// "Streamable HTTP").
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// One configured server, expanded and checked. Its `Debug` form shows
/// [`ServerConfig::shown`] in place of the expanded transport.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The server's name (the key in `mcpServers`).
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Per-call timeout for its tools; `None` uses the pool's default.
    /// Each progress report of a call (`notifications/progress`) starts it
    /// again, up to [`ServerConfig::max_total_timeout`].
    pub timeout: Option<Duration>,
    /// The longest a call of its tools may last, from when it is sent,
    /// however often its progress reports reset its timeout
    /// (`max_total_timeout_ms`). Default: [`DEFAULT_MAX_TOTAL_TIMEOUT`].
    pub max_total_timeout: Duration,
    /// Wait for its `initialize` answer. Default: [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// Only tools annotated `readOnlyHint: true` are exposed and callable.
    pub read_only: bool,
    /// The server is configured but never started nor listed.
    pub disabled: bool,
    /// Most calls of its tools running at once, across every run of the
    /// engine; further calls wait. The engine's calls wait before their
    /// timeout starts, the wait recorded as `queued_ms`; a call of
    /// [`McpPool::call`](super::McpPool::call) waits within its timeout.
    /// `None`: no limit but the runs' own in-flight limits.
    pub max_in_flight: Option<usize>,
    /// Calls of its tools started per second, across every run of the
    /// engine (`"rate"`, docs/LIMITS.md); applied by the engine, not by
    /// the pool. `None`: no bound.
    pub rate: Option<codemode_base::pacing::Rate>,
    /// Failed calls of its tools made again (`"retry"`, docs/LIMITS.md);
    /// applied by the engine, not by the pool. `None`: each call once.
    pub retry: Option<codemode_base::pacing::RetryPolicy>,
    /// `"scope": "global"`: `max_in_flight` and `rate` are kept in the
    /// journal's PostgreSQL store and hold across every process sharing it
    /// (docs/LIMITS.md). `false`: per process.
    pub global_limits: bool,
    /// The server's own tool names hidden by `disabledTools`: not listed,
    /// not callable.
    pub disabled_tools: BTreeSet<String>,
    /// The server's own tool names of `autoApprove` / `alwaysAllow`: allowed
    /// without an approval when the file is trusted
    /// ([`McpConfig::auto_approve_rules`]), ignored otherwise.
    pub auto_approve: BTreeSet<String>,
    /// The transport as written in the file, for people: `${VAR}`
    /// references unexpanded, literal `headers` values replaced by
    /// [`REDACTED`], a relative `cwd` resolved when it holds no `${VAR}`.
    /// Never used to start anything.
    pub shown: Transport,
    /// OAuth settings of an HTTP server (`"oauth"`: client id, client ID
    /// metadata document URL, scopes, callback port); `None`: the defaults
    /// (see `mcp::oauth`).
    pub oauth: Option<super::oauth::OAuthSettings>,
    /// The `envFile` read for a stdio server's environment, as resolved
    /// (absolute when the config file's folder is); the engine protects it
    /// like the files the server runs (docs/SECURITY.md).
    pub env_file: Option<PathBuf>,
    /// Whether the server is offered the workspace as its root (MCP roots;
    /// config `"roots": false` withholds it, `true` offers it). Default:
    /// stdio servers and HTTP servers on this machine; a remote HTTP server
    /// is not told the local workspace path. Some servers take the roots in
    /// place of the folders their command line names (server-filesystem):
    /// `false` keeps those.
    pub roots: bool,
    /// Expanded secrets and what to show instead, longest first (see
    /// [`ServerConfig::redact`]).
    secrets: Vec<(String, String)>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("transport", &self.shown)
            .field("timeout", &self.timeout)
            .field("max_total_timeout", &self.max_total_timeout)
            .field("startup_timeout", &self.startup_timeout)
            .field("read_only", &self.read_only)
            .field("disabled", &self.disabled)
            .field("max_in_flight", &self.max_in_flight)
            .field("rate", &self.rate)
            .field("retry", &self.retry)
            .field("global_limits", &self.global_limits)
            .field("disabled_tools", &self.disabled_tools)
            .field("auto_approve", &self.auto_approve)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// Its limits on calls (`max_in_flight`, `rate`, `retry`), as the
    /// engine applies them.
    pub fn call_limits(&self) -> codemode_base::pacing::CallLimits {
        codemode_base::pacing::CallLimits::new(self.max_in_flight, self.rate, self.retry)
            .with_global(self.global_limits)
    }

    /// What starting the server runs, as one line for an approval or a
    /// message, with secrets shown as `${VAR}` (from [`ServerConfig::shown`]):
    /// `[KEY=value ...] command arg ... [(in CWD)]` for a stdio server (an
    /// argument holding whitespace, quotes or a backslash is single-quoted;
    /// `env` entries of the config come first, as a shell would write
    /// them), the URL for an HTTP server.
    pub fn launch_line(&self) -> String {
        match &self.shown {
            Transport::Stdio { command, args, env, cwd } => {
                let mut words: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", quoted(v))).collect();
                words.push(quoted(command));
                words.extend(args.iter().map(|a| quoted(a)));
                let mut line = words.join(" ");
                if let Some(cwd) = cwd {
                    line.push_str(&format!(" (in {})", quoted(&cwd.to_string_lossy())));
                }
                // Which file the `[redacted]` values above come from.
                if let Some(file) = &self.env_file {
                    line.push_str(&format!(" (environment from {})", quoted(&file.to_string_lossy())));
                }
                line
            }
            // The headers too: a value may carry a variable of the user's
            // environment to the server (shown as written, `${VAR}`;
            // literal values as `[redacted]`).
            Transport::Http { url, headers } if !headers.is_empty() => {
                let list: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{url} (headers {})", list.join(", "))
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }

    /// Lower-case hex SHA-256 of the launch configuration (transport,
    /// command, args, env, cwd, url, headers; not timeouts or flags): the
    /// key of the server's schema cache.
    pub fn launch_hash(&self) -> String {
        let launch = match &self.transport {
            Transport::Stdio { command, args, env, cwd } => serde_json::json!({
                "stdio": {"command": command, "args": args, "env": env,
                          "cwd": cwd.as_ref().map(|c| c.to_string_lossy().into_owned())}
            }),
            Transport::Http { url, headers } => {
                serde_json::json!({"http": {"url": url, "headers": headers}})
            }
        };
        let digest = Sha256::digest(serde_json::to_vec(&launch).expect("JSON values serialise"));
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// `word` as a shell would need it to stay one word: single-quoted when
/// it is empty or holds whitespace, a quote or a backslash. For display
/// only (`$` is left alone so `${VAR}` reads as the config has it).
fn quoted(word: &str) -> String {
    let plain =
        !word.is_empty() && !word.chars().any(|c| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// The configured servers, in name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// Every server, enabled or not, by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// The file is the user's own (named on the command line, or handed
    /// over by a library host): its servers start without an approval
    /// (deny rules, ask rules and hooks on `mcp_connect__<server>` still
    /// apply). `false` for a workspace file the user has not trusted: each
    /// server's start needs an approval as the posture says. Default and
    /// [`McpConfig::load`] / [`McpConfig::parse`]: `true`; a host that
    /// loads a file it found rather than one it was given sets it `false`.
    pub trusted: bool,
    /// The canonical path of the file it was read from
    /// ([`McpConfig::load`]); `None` for a config parsed from text.
    pub source: Option<PathBuf>,
    /// Keys of server entries that have no effect in codemode, each with
    /// the servers that hold it (see [`McpConfig::warnings`]).
    pub ignored: BTreeMap<String, Vec<String>>,
    /// Servers left out, with why: Zed context servers that come from a Zed
    /// extension (`"source": "extension"`), which codemode cannot run, and
    /// entries that name no transport codemode can use (`type: "sse"`, an
    /// unknown `type`, neither `command` nor `url`, as when they are nested
    /// under `transport`). Each is one line of [`McpConfig::warnings`].
    pub skipped: Vec<(String, String)>,
}

impl Default for McpConfig {
    /// No servers, trusted, no source, nothing ignored.
    fn default() -> Self {
        McpConfig {
            servers: BTreeMap::new(),
            trusted: true,
            source: None,
            ignored: BTreeMap::new(),
            skipped: Vec::new(),
        }
    }
}

/// Where `${input:ID}` looks first: `CODEMODE_INPUT_` and the ID in upper
/// case with every character outside `A-Z 0-9` as `_` (`${input:api-key}`
/// reads `CODEMODE_INPUT_API_KEY`). codemode cannot prompt the way VS Code
/// does, so an input's value comes from this variable, else its `default`.
pub fn input_variable(id: &str) -> String {
    let id: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("CODEMODE_INPUT_{id}")
}

/// The MCP config files a workspace may hold, in the order they are looked
/// for: codemode's and Claude Code's `.mcp.json`, Cursor's
/// `.cursor/mcp.json`, VS Code's `.vscode/mcp.json`. Only the first found
/// is read ([`workspace_config_file`]).
pub const WORKSPACE_CONFIG_FILES: [&str; 3] = [".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"];

/// The first of [`WORKSPACE_CONFIG_FILES`] that exists in `workspace`.
pub fn workspace_config_file(workspace: &Path) -> Option<PathBuf> {
    WORKSPACE_CONFIG_FILES.iter().map(|f| workspace.join(f)).find(|p| p.exists())
}

/// The longest server name, in bytes (so tool names stay readable within
/// the catalog's 128 bytes).
pub const MAX_SERVER_NAME_LEN: usize = 64;

impl McpConfig {
    /// Reads and checks the config file at `path`, expanding variables from
    /// the process environment; `${workspaceFolder}` is an error (see
    /// [`McpConfig::load_in`]).
    ///
    /// # Errors
    /// [`ConfigError`] naming the server and field of the first problem.
    pub fn load(path: &Path) -> Result<McpConfig, ConfigError> {
        McpConfig::load_in(path, None)
    }

    /// [`McpConfig::load`] with `workspace` as `${workspaceFolder}`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the server and field of the first problem.
    pub fn load_in(path: &Path, workspace: Option<&Path>) -> Result<McpConfig, ConfigError> {
        let text = codemode_base::config_file::read_config(path)
            .map_err(|e| ConfigError::Read { path: path.to_owned(), message: e.to_string() })?;
        McpConfig::load_text_in(path, &text, workspace)
    }

    /// [`McpConfig::load_in`] of `text`, the bytes already read from
    /// `path` (once: a host that decides the file's trust by the same
    /// bytes parses them here rather than reading the file again).
    ///
    /// # Errors
    /// [`ConfigError`] naming the server and field of the first problem.
    pub fn load_text_in(path: &Path, text: &str, workspace: Option<&Path>) -> Result<McpConfig, ConfigError> {
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let base = std::fs::canonicalize(if base.as_os_str().is_empty() { Path::new(".") } else { &base })
            .unwrap_or(base);
        let workspace = workspace.map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.to_owned()));
        let mut config =
            McpConfig::parse_in(text, &base, workspace.as_deref(), &|name| std::env::var(name).ok())?;
        config.source = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()));
        Ok(config)
    }

    /// Parses config text. `base` resolves relative `cwd` and `envFile`
    /// values; `env` looks up `${VAR}`s; `${workspaceFolder}` is an error.
    ///
    /// # Errors
    /// [`ConfigError`] naming the server and field of the first problem.
    pub fn parse(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        McpConfig::parse_in(text, base, None, env)
    }

    /// [`McpConfig::parse`] with `workspace` as `${workspaceFolder}`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the server and field of the first problem.
    pub fn parse_in(
        text: &str,
        base: &Path,
        workspace: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        let top = super::dialect::parse_text(text)?;
        let document = super::dialect::document(&top)?;
        let vars = Vars { env, workspace, inputs: &document.inputs };
        let mut config = McpConfig::default();
        for (name, raw) in &document.servers {
            if raw.get("source").and_then(Value::as_str) == Some("extension") && raw.get("command").is_none()
            {
                let why = "it comes from a Zed extension, which codemode cannot run; give its `command` \
                           (and `args`) to use it";
                config.skipped.push((name.clone(), why.to_owned()));
                continue;
            }
            let (entry, unknown) = super::dialect::normalise(name, raw)?;
            if let Some(why) = super::dialect::unusable(&entry) {
                config.skipped.push((name.clone(), why));
                continue;
            }
            for key in unknown {
                config.ignored.entry(key).or_default().push(name.clone());
            }
            let server = match parse_server(name, &entry, base, &vars) {
                Ok(server) => server,
                // A disabled server is skipped: an error in it (a variable
                // not set, an input without a value) does not stop the
                // others. Its name must still be valid.
                Err(ConfigError::Field { field, .. })
                    if field != "name" && entry.get("disabled") == Some(&Value::Bool(true)) =>
                {
                    disabled_server(name)
                }
                Err(e) => return Err(e),
            };
            config.servers.insert(name.clone(), server);
        }
        Ok(config)
    }

    /// One line per key in [`McpConfig::ignored`], naming the key, the file
    /// and the servers: `MCP config FILE: `KEY` (server a, b) has no effect
    /// in codemode and is ignored`.
    pub fn warnings(&self) -> Vec<String> {
        let file = self.source.as_ref().map_or_else(|| "MCP config".to_owned(), |p| p.display().to_string());
        self.ignored
            .iter()
            .map(|(key, servers)| {
                let s = if servers.len() == 1 { "" } else { "s" };
                format!(
                    "{file}: `{key}` (server{s} {}) has no effect in codemode and is ignored",
                    servers.join(", ")
                )
            })
            .chain(
                self.skipped
                    .iter()
                    .map(|(server, why)| format!("{file}: server `{server}` is skipped: {why}")),
            )
            .collect()
    }

    /// The allow rules a trusted file's `autoApprove` / `alwaysAllow` lists
    /// make: `mcp__<server>__<tool>` for each listed tool of each enabled
    /// server, in server and tool order. Empty when the file is not
    /// [`trusted`](McpConfig::trusted): a workspace file must not approve
    /// its own servers' tools.
    pub fn auto_approve_rules(&self) -> Vec<String> {
        if !self.trusted {
            return Vec::new();
        }
        self.enabled()
            .flat_map(|s| s.auto_approve.iter().map(|tool| super::naming::tool_name(&s.name, tool)))
            .collect()
    }

    /// The servers that are not disabled.
    pub fn enabled(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.values().filter(|s| !s.disabled)
    }

    /// The workspace files the enabled stdio servers name
    /// ([`command_files`](codemode_base::command_files) of `command` and
    /// `args` from the server's `cwd`, else the current folder, with the
    /// `PATH` its `env` sets, else codemode's own; its `envFile`; and the
    /// paths path-like variables of its `env` name: `PYTHONPATH`,
    /// `NODE_OPTIONS`' `--require`, ...), existing or not, the workspace
    /// folders its `env` names, and the servers whose files cannot all be
    /// known: what `codemode trust` pins with the file (and notes, for
    /// folders) and what the engine protects.
    pub fn command_pins(&self, workspace: &Path) -> crate::trust::CommandPins {
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let here = std::env::current_dir().unwrap_or_else(|_| workspace.clone());
        let mut pins = crate::trust::CommandPins::default();
        for server in self.enabled() {
            let Transport::Stdio { command, args, cwd, env } = &server.transport else { continue };
            let argv: Vec<String> = std::iter::once(command).chain(args).cloned().collect();
            let dir = cwd.clone().unwrap_or_else(|| here.clone());
            // The program is looked up on the `PATH` the server gets.
            let path = env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH"));
            let mut found = codemode_base::command_files::command_files_with_path(
                &argv,
                &dir,
                &workspace,
                path.as_deref(),
            );
            // The environment file decides what the server runs as much as
            // its script does (`NODE_OPTIONS`, `PYTHONPATH`).
            if let Some(file) = &server.env_file {
                let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.clone());
                if file.starts_with(&workspace) {
                    found.files.push(file);
                }
            }
            // What its environment names (`PYTHONPATH=lib`) runs as its
            // script does: files are pinned, folders protected.
            let named = env_paths::env_paths(env, &dir, &workspace);
            found.files.extend(named.files.into_iter().map(|(file, _)| file));
            if found.undetermined.is_none() {
                found.undetermined = named.undetermined;
            }
            let what = format!("server `{}`", server.name);
            for (folder, key) in named.folders {
                pins.add_folder(folder, format!("{what}'s env {key}"));
            }
            pins.add(&what, found);
        }
        pins
    }
}

fn field_error(server: &str, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Field { server: server.to_owned(), field: field.into(), message: message.into() }
}
