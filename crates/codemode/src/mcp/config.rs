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
//!             "timeout_ms": 60000, "startup_timeout_ms": 30000,
//!             "read_only": true},
//!   "web":   {"type": "http", "url": "https://example.com/mcp",
//!             "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
//!   "old":   {"command": "old-server", "disabled": true}
//! }}
//! ```
//!
//! - A server with `command` is a stdio server; one with `url` (Windsurf:
//!   `serverUrl`; or `type: "http"` / `"streamable-http"` /
//!   `"streamableHttp"`) is a streamable HTTP server. `type: "sse"` (the
//!   legacy HTTP+SSE transport) is refused.
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a literal `headers` value (one without `${VAR}`) is shown as.
pub const REDACTED: &str = "[redacted]";

/// Expanded values shorter than this many bytes are not taken out of free
/// text by [`ServerConfig::redact`] (replacing every `1` or `a` in a message
/// would garble it and hide nothing worth hiding); they are still never
/// shown by [`ServerConfig::shown`] or [`ServerConfig::launch_line`].
pub const MIN_REDACTED_LEN: usize = 4;

/// Default wait for a server's `initialize` answer: 30 s.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

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
    pub timeout: Option<Duration>,
    /// Wait for its `initialize` answer. Default: [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// Only tools annotated `readOnlyHint: true` are exposed and callable.
    pub read_only: bool,
    /// The server is configured but never started nor listed.
    pub disabled: bool,
    /// Most calls of its tools running at once, across every run of the
    /// engine; further calls wait (their timeout runs while they wait).
    /// `None`: no limit but the runs' own in-flight limits.
    pub max_in_flight: Option<usize>,
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
            .field("startup_timeout", &self.startup_timeout)
            .field("read_only", &self.read_only)
            .field("disabled", &self.disabled)
            .field("max_in_flight", &self.max_in_flight)
            .field("disabled_tools", &self.disabled_tools)
            .field("auto_approve", &self.auto_approve)
            .finish_non_exhaustive()
    }
}

/// Every secret of every server configuration read in this process, with
/// its shown form, longest first.
static KNOWN_SECRETS: std::sync::RwLock<Vec<(String, String)>> = std::sync::RwLock::new(Vec::new());

fn remember_secrets(secrets: &[(String, String)]) {
    if secrets.is_empty() {
        return;
    }
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    for secret in secrets {
        if !known.contains(secret) {
            known.push(secret.clone());
        }
    }
    known.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
}

/// `text` with every secret of every MCP server configuration read in this
/// process so far replaced by its `${VAR}` form (or [`REDACTED`]), as
/// [`ServerConfig::redact`] does for one server.
///
/// For text codemode does not make itself: the log lines of the libraries
/// under it. rmcp's own error lines quote a failed request's URL, `${VAR}`
/// values included; the `codemode` binary passes its whole stderr log
/// through this, and a host that installs its own `tracing` subscriber
/// should do the same.
pub fn redact_known_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    let known = KNOWN_SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !known.iter().any(|(value, _)| text.contains(value.as_str())) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for (value, shown) in known.iter() {
        if out.contains(value.as_str()) {
            out = out.replace(value.as_str(), shown);
        }
    }
    std::borrow::Cow::Owned(out)
}

impl ServerConfig {
    /// `text` with every expanded `${VAR}` value of this server (and every
    /// literal `headers` value) replaced by its `${VAR}` form (or
    /// [`REDACTED`]), longest value first; values shorter than
    /// [`MIN_REDACTED_LEN`] bytes are left. Apply it to anything shown that
    /// may quote the launch: error messages, the server's stderr, logs.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (value, shown) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), shown);
            }
        }
        out
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
    /// extension (`"source": "extension"`), which codemode cannot run. Each
    /// is one line of [`McpConfig::warnings`].
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

/// Whether `name` can make tool names (`mcp__<server>__<tool>`): 1 to
/// [`MAX_SERVER_NAME_LEN`] characters, no control characters, at least one
/// ASCII letter or digit. Other characters are replaced and the name gets a
/// hash suffix (src/mcp/naming.rs), as other clients' names (`time.server`,
/// `my memory`) need.
fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_SERVER_NAME_LEN
        && !name.chars().any(char::is_control)
        && name.bytes().any(|b| b.is_ascii_alphanumeric())
}

/// The first symbolic link on the way to `path`: the file itself, or a
/// folder between `base` (the config file's folder) and it.
fn linked_component(path: &Path, base: &Path) -> Option<PathBuf> {
    if path.starts_with(base) {
        return codemode_base::links::link_below(path, base).map(Path::to_path_buf);
    }
    path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()).then(|| path.to_path_buf())
}

/// Whether `url`'s host is this machine (`localhost`, `127.0.0.0/8`,
/// `::1`): only such an HTTP server is offered roots by default, so a
/// remote server does not learn the local workspace path.
fn is_loopback_url(url: &str) -> bool {
    match url::Url::parse(url).ok().and_then(|u| u.host().map(|h| h.to_owned())) {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Where the variables of a config come from.
struct Vars<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    workspace: Option<&'a Path>,
    inputs: &'a BTreeMap<String, super::dialect::Input>,
}

/// The raw shape of one server entry, after `dialect::normalise` (other
/// keys are collected there and warned about).
#[derive(Deserialize)]
struct RawServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout_ms: Option<u64>,
    startup_timeout_ms: Option<u64>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    disabled: bool,
    max_in_flight: Option<usize>,
    #[serde(rename = "envFile")]
    env_file: Option<String>,
    #[serde(rename = "disabledTools", default)]
    disabled_tools: Vec<String>,
    #[serde(rename = "autoApprove", default)]
    auto_approve: Vec<String>,
    /// Cline's per-call timeout, in seconds.
    timeout: Option<u64>,
    oauth: Option<super::oauth::OAuthSettings>,
    roots: Option<bool>,
}

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
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let base = std::fs::canonicalize(if base.as_os_str().is_empty() { Path::new(".") } else { &base })
            .unwrap_or(base);
        let workspace = workspace.map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.to_owned()));
        let mut config =
            McpConfig::parse_in(&text, &base, workspace.as_deref(), &|name| std::env::var(name).ok())?;
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
}

fn field_error(server: &str, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Field { server: server.to_owned(), field: field.into(), message: message.into() }
}

fn parse_server(name: &str, raw: &Value, base: &Path, vars: &Vars<'_>) -> Result<ServerConfig, ConfigError> {
    if !valid_server_name(name) {
        return Err(field_error(
            name,
            "name",
            format!(
                "a server name becomes part of tool names (`mcp__<server>__<tool>`): it needs 1 to \
                 {MAX_SERVER_NAME_LEN} characters, at least one ASCII letter or digit and no control \
                 characters (other characters are replaced and the tool names get a hash suffix; \
                 `my-server` stays as it is)"
            ),
        ));
    }
    let raw: RawServer = serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "entry".to_owned() } else { path };
        field_error(name, field, e.into_inner().to_string())
    })?;
    // Expanded values (from the environment) and their `${VAR}` forms.
    let secrets = std::cell::RefCell::new(Vec::<(String, String)>::new());
    let expand = |field: &str, value: &str| {
        let (expanded, found) = expand_vars(value, vars).map_err(|m| field_error(name, field, m))?;
        secrets.borrow_mut().extend(found);
        Ok::<_, ConfigError>(expanded)
    };
    let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
    let http = match kind.as_deref() {
        None => raw.url.is_some() && raw.command.is_none(),
        Some("stdio") => false,
        Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => true,
        Some("sse") => {
            return Err(field_error(
                name,
                "type",
                "the legacy HTTP+SSE transport is not supported; use a streamable HTTP url (`\"type\": \"http\"`)",
            ));
        }
        Some(other) => {
            return Err(field_error(
                name,
                "type",
                format!("unknown transport `{other}`; use \"stdio\" or \"http\""),
            ));
        }
    };
    let mut env_file = None;
    let (transport, shown) = if http {
        let Some(url) = &raw.url else {
            return Err(field_error(name, "url", "an HTTP server needs a `url`"));
        };
        if raw.command.is_some() {
            return Err(field_error(
                name,
                "command",
                "give either `command` (stdio) or `url` (HTTP), not both",
            ));
        }
        if raw.env_file.is_some() {
            return Err(field_error(
                name,
                "envFile",
                "`envFile` sets a stdio server's environment; an HTTP server has none (use `headers`)",
            ));
        }
        let written = url;
        let url = expand("url", url)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            // As written: the expanded URL may hold a secret.
            return Err(field_error(name, "url", format!("`{written}` is not an http:// or https:// URL")));
        }
        let mut headers = BTreeMap::new();
        let mut shown_headers = BTreeMap::new();
        for (key, written) in &raw.headers {
            let field = format!("headers.{key}");
            let value = expand(&field, written)?;
            // A literal value (an API key pasted in) is a secret as a whole.
            let shown = if value == *written { REDACTED.to_owned() } else { written.clone() };
            if shown == REDACTED {
                secrets.borrow_mut().push((value.clone(), REDACTED.to_owned()));
            }
            shown_headers.insert(key.clone(), shown);
            http::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| field_error(name, &field, "not a valid HTTP header name"))?;
            if ["accept", "mcp-session-id", "last-event-id"].contains(&key.to_ascii_lowercase().as_str()) {
                return Err(field_error(name, &field, "this header is set by the MCP transport; remove it"));
            }
            http::HeaderValue::from_str(&value)
                .map_err(|_| field_error(name, &field, "not a valid HTTP header value"))?;
            headers.insert(key.clone(), value);
        }
        (
            Transport::Http { url, headers },
            Transport::Http { url: raw.url.clone().unwrap_or_default(), headers: shown_headers },
        )
    } else {
        let Some(command) = &raw.command else {
            return Err(field_error(
                name,
                "command",
                "a stdio server needs a `command` (or give a `url` for HTTP)",
            ));
        };
        if raw.url.is_some() {
            return Err(field_error(name, "url", "give either `command` (stdio) or `url` (HTTP), not both"));
        }
        let command = expand("command", command)?;
        if command.trim().is_empty() {
            return Err(field_error(name, "command", "must not be empty"));
        }
        let args = raw
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| expand(&format!("args[{i}]"), a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut env_vars = BTreeMap::new();
        for (key, value) in &raw.env {
            env_vars.insert(key.clone(), expand(&format!("env.{key}"), value)?);
        }
        let mut shown_env = raw.env.clone();
        if let Some(written) = &raw.env_file {
            let path = PathBuf::from(expand("envFile", written)?);
            let path = if path.is_relative() { base.join(path) } else { path };
            if let Some(link) = linked_component(&path, base) {
                return Err(field_error(
                    name,
                    "envFile",
                    format!(
                        "{} is reached through the symbolic link {}; a program could point the link elsewhere \
                         for a later start: name the file itself",
                        path.display(),
                        link.display()
                    ),
                ));
            }
            env_file.replace(path.clone());
            for (key, value) in read_env_file(&path).map_err(|m| field_error(name, "envFile", m))? {
                // `env` entries win over the file's.
                if env_vars.contains_key(&key) {
                    continue;
                }
                secrets.borrow_mut().push((value.clone(), REDACTED.to_owned()));
                shown_env.insert(key.clone(), REDACTED.to_owned());
                env_vars.insert(key, value);
            }
        }
        let mut shown_cwd = None;
        let cwd = match &raw.cwd {
            Some(written) => {
                let cwd = PathBuf::from(expand("cwd", written)?);
                let cwd = if cwd.is_relative() { base.join(cwd) } else { cwd };
                // One spelling per folder (`examples/..`, `./`, a symlink),
                // so the schema cache key does not depend on how the
                // config file was named.
                let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
                shown_cwd = Some(if written.contains("${") { PathBuf::from(written) } else { cwd.clone() });
                Some(cwd)
            }
            None => None,
        };
        let shown = Transport::Stdio {
            command: raw.command.clone().unwrap_or_default(),
            args: raw.args.clone(),
            env: shown_env,
            cwd: shown_cwd,
        };
        (Transport::Stdio { command, args, env: env_vars, cwd }, shown)
    };
    let mut secrets = secrets.into_inner();
    secrets.retain(|(value, _)| value.len() >= MIN_REDACTED_LEN);
    // Longest first, so a value inside another is not replaced first.
    secrets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    remember_secrets(&secrets);
    for (field, value) in [("timeout_ms", raw.timeout_ms), ("startup_timeout_ms", raw.startup_timeout_ms)] {
        if value == Some(0) {
            return Err(field_error(name, field, "must be at least 1 (milliseconds)"));
        }
    }
    if raw.max_in_flight == Some(0) {
        return Err(field_error(name, "max_in_flight", "must be at least 1 (calls at once)"));
    }
    let timeout = match (raw.timeout, raw.timeout_ms) {
        (Some(_), Some(_)) => {
            return Err(field_error(
                name,
                "timeout",
                "give either `timeout` (seconds) or `timeout_ms`, not both",
            ));
        }
        (Some(secs), None) if !(1..=3600).contains(&secs) => {
            return Err(field_error(
                name,
                "timeout",
                format!(
                    "{secs} is not between 1 and 3600: `timeout` is in seconds (as Cline reads it); \
                     write `timeout_ms` for milliseconds"
                ),
            ));
        }
        (Some(secs), None) => Some(Duration::from_secs(secs)),
        (None, ms) => ms.map(Duration::from_millis),
    };
    if raw.oauth.is_some() && !http {
        return Err(field_error(name, "oauth", "OAuth applies to HTTP servers only (give a `url`)"));
    }
    let roots = raw.roots.unwrap_or_else(|| match &transport {
        Transport::Stdio { .. } => true,
        Transport::Http { url, .. } => is_loopback_url(url),
    });
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        timeout,
        startup_timeout: raw.startup_timeout_ms.map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis),
        read_only: raw.read_only,
        disabled: raw.disabled,
        max_in_flight: raw.max_in_flight,
        disabled_tools: raw.disabled_tools.into_iter().collect(),
        auto_approve: raw.auto_approve.into_iter().collect(),
        oauth: raw.oauth,
        env_file,
        roots,
        shown,
        secrets,
    })
}

/// A `disabled: true` server whose entry has an error: listed as disabled,
/// never started, nothing of its entry kept.
fn disabled_server(name: &str) -> ServerConfig {
    let transport =
        Transport::Stdio { command: String::new(), args: Vec::new(), env: BTreeMap::new(), cwd: None };
    ServerConfig {
        name: name.to_owned(),
        shown: transport.clone(),
        transport,
        timeout: None,
        startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        read_only: false,
        disabled: true,
        max_in_flight: None,
        disabled_tools: BTreeSet::new(),
        auto_approve: BTreeSet::new(),
        oauth: None,
        env_file: None,
        roots: true,
        secrets: Vec::new(),
    }
}

/// The `KEY=value` entries of the dotenv file at `path` (read as
/// `codemode_base::config_file` reads any config file, parsed by `dotenvy`).
///
/// # Errors
/// A message that names the file but quotes none of its values.
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = codemode_base::config_file::read_config(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        match item {
            Ok(pair) => out.push(pair),
            // Its message quotes the line, which may hold a secret.
            Err(dotenvy::Error::LineParse(..)) => {
                return Err(format!(
                    "{}: the entry after the first {} is not `KEY=value` dotenv text",
                    path.display(),
                    out.len()
                ));
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(out)
}

/// Expands the variables of `value` (see the module docs); also returns
/// each secret value with the form it is shown as: values from the
/// environment (`${VAR}`, `${env:VAR}`) and inputs (`${input:ID}`); a
/// default written in the file, `${userHome}` and `${workspaceFolder}` are
/// no secrets (an input's default is, when the input is a `password`).
///
/// # Errors
/// A message naming the missing variable or input and where its value can
/// come from, an unknown `${...}`, or an unterminated `${`.
fn expand_vars(value: &str, vars: &Vars<'_>) -> Result<(String, Vec<(String, String)>), String> {
    let mut found = Vec::new();
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        // `$${` is a literal `${` (as in docker compose files).
        if rest[..start].ends_with('$') {
            out.push_str(&rest[..start]);
            out.push('{');
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated `${{` in `{value}`; write `${{VAR}}`"));
        };
        let inner = &after[..end];
        let shown = format!("${{{inner}}}");
        let identifier = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        match inner.split_once(':') {
            None if inner == "userHome" => match (vars.env)("HOME") {
                Some(home) => out.push_str(&home),
                None => return Err("`${userHome}` needs HOME to be set".to_owned()),
            },
            None if inner == "workspaceFolder" => match vars.workspace {
                Some(ws) => out.push_str(&ws.to_string_lossy()),
                None => {
                    return Err("`${workspaceFolder}` is not known here: name the workspace (the CLI's \
                                --workspace; McpConfig::load_in for a library host)"
                        .to_owned());
                }
            },
            Some(("env", var)) if identifier(var) => match (vars.env)(var) {
                Some(v) => {
                    out.push_str(&v);
                    found.push((v, shown));
                }
                None => return Err(format!("environment variable `{var}` is not set; set it")),
            },
            Some(("input", id)) => {
                let Some(input) = vars.inputs.get(id) else {
                    return Err(format!(
                        "`{shown}` names no input of the file's `inputs` list; add {{\"id\": \"{id}\", ...}} there"
                    ));
                };
                let variable = input_variable(id);
                match ((vars.env)(&variable), &input.default) {
                    (Some(v), _) => {
                        out.push_str(&v);
                        found.push((v, shown));
                    }
                    (None, Some(d)) => {
                        out.push_str(d);
                        if input.password {
                            found.push((d.clone(), shown));
                        }
                    }
                    (None, None) => {
                        let about =
                            input.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
                        return Err(format!(
                            "input `{id}`{about} has no value: codemode cannot prompt for inputs; set the \
                             environment variable {variable}, or give the input a `default`"
                        ));
                    }
                }
            }
            Some((var, default)) if identifier(var) && default.starts_with('-') => match (vars.env)(var) {
                Some(v) => {
                    out.push_str(&v);
                    found.push((v, format!("${{{var}}}")));
                }
                None => out.push_str(&default[1..]),
            },
            None if identifier(inner) => match (vars.env)(inner) {
                Some(v) => {
                    out.push_str(&v);
                    found.push((v, shown));
                }
                None => {
                    return Err(format!(
                        "environment variable `{inner}` is not set; set it or write `${{{inner}:-default}}`"
                    ));
                }
            },
            _ => {
                return Err(format!(
                    "`{shown}` is not a variable codemode knows; write `${{VAR}}`, `${{VAR:-default}}`, \
                     `${{env:VAR}}`, `${{input:ID}}`, `${{userHome}}` or `${{workspaceFolder}}`"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<McpConfig, ConfigError> {
        McpConfig::parse(text, Path::new("/cfg"), &env)
    }

    #[test]
    fn stdio_and_http_servers_with_expansion() {
        let config = parse(
            r#"{"mcpServers": {
                "files": {"command": "node", "args": ["s.js", "${HOME}/notes", "${X:-dflt}"],
                          "env": {"T": "${TOKEN}"}, "cwd": "sub", "timeout_ms": 5000,
                          "startup_timeout_ms": 700, "read_only": true, "autoApprove": []},
                "web": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "typed": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
                "off": {"command": "x", "disabled": true}
            }}"#,
        )
        .unwrap();
        let files = &config.servers["files"];
        assert_eq!(
            files.transport,
            Transport::Stdio {
                command: "node".into(),
                args: vec!["s.js".into(), "/home/u/notes".into(), "dflt".into()],
                env: [("T".to_owned(), "s3cret".to_owned())].into(),
                cwd: Some(PathBuf::from("/cfg/sub")),
            }
        );
        assert_eq!(files.timeout, Some(Duration::from_millis(5000)));
        assert_eq!(files.startup_timeout, Duration::from_millis(700));
        assert!(files.read_only && !files.disabled);
        let web = &config.servers["web"];
        assert_eq!(
            web.transport,
            Transport::Http {
                url: "https://h/mcp".into(),
                headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into()
            }
        );
        assert_eq!(web.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert!(matches!(config.servers["typed"].transport, Transport::Http { .. }));
        assert_eq!(config.enabled().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["files", "typed", "web"]);
    }

    #[test]
    fn roots_are_offered_to_local_servers_only_unless_the_config_says() {
        let config = parse(
            r#"{"mcpServers": {
                "local": {"command": "x"},
                "here": {"url": "http://127.0.0.1:3000/mcp"},
                "named": {"url": "http://localhost:3000/mcp"},
                "remote": {"url": "https://example.com/mcp"},
                "asked": {"url": "https://example.com/mcp", "roots": true},
                "kept": {"command": "x", "roots": false}
            }}"#,
        )
        .unwrap();
        let roots = |name: &str| config.servers[name].roots;
        assert!(roots("local") && roots("here") && roots("named") && roots("asked"));
        assert!(!roots("remote") && !roots("kept"));
    }

    #[test]
    fn other_clients_server_names_load_and_a_zed_extension_server_is_skipped() {
        let config = parse(
            r#"{"context_servers": {
                "time.server": {"command": "t"},
                "my memory": {"command": "m"},
                "github.com/modelcontextprotocol/servers/tree/main/src/fetch": {"command": "f"},
                "postgres": {"source": "extension", "settings": {}}
            }}"#,
        )
        .unwrap();
        let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["github.com/modelcontextprotocol/servers/tree/main/src/fetch", "my memory", "time.server"]
        );
        let warnings = config.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("server `postgres` is skipped") && warnings[0].contains("Zed extension")
        );
        for bad in ["", "\\u00e9\\u00e9", "a\\u0007b"] {
            let text = format!(r#"{{"mcpServers": {{"{bad}": {{"command": "x"}}}}}}"#);
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains("at least one ASCII letter or digit"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn errors_name_the_server_and_the_field() {
        let cases = [
            (
                r#"{"mcpServers": {"zero": {"command": "x", "max_in_flight": 0}}}"#,
                "zero",
                "max_in_flight",
                "at least 1",
            ),
            (
                r#"{"mcpServers": {"both": {"command": "x", "url": "http://h/mcp"}}}"#,
                "both",
                "url",
                "not both",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": ["${NOPE}"]}}}"#,
                "a",
                "args[0]",
                "`NOPE` is not set",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE"}}}}"#,
                "a",
                "env.K",
                "unterminated",
            ),
            (
                r#"{"mcpServers": {"b": {"command": "x", "timeout_ms": "5"}}}"#,
                "b",
                "timeout_ms",
                "invalid type",
            ),
            (r#"{"mcpServers": {"b": {"command": "x", "timeout_ms": 0}}}"#, "b", "timeout_ms", "at least 1"),
            (r#"{"mcpServers": {"c": {"args": []}}}"#, "c", "command", "needs a `command`"),
            (r#"{"mcpServers": {"c": {"type": "sse", "url": "http://h"}}}"#, "c", "type", "not supported"),
            (r#"{"mcpServers": {"c": {"type": "http"}}}"#, "c", "url", "needs a `url`"),
            (r#"{"mcpServers": {"c": {"url": "ftp://h"}}}"#, "c", "url", "not an http"),
            (
                r#"{"mcpServers": {"d": {"url": "http://h", "headers": {"a b": "v"}}}}"#,
                "d",
                "headers.a b",
                "header name",
            ),
            (
                r#"{"mcpServers": {"d": {"url": "http://h", "headers": {"X": "${NOPE}"}}}}"#,
                "d",
                "headers.X",
                "NOPE",
            ),
            (r#"{"mcpServers": {"e": "node"}}"#, "e", "entry", "invalid type"),
        ];
        for (text, server, field, needle) in cases {
            match parse(text) {
                Err(ConfigError::Field { server: s, field: f, message }) => {
                    assert_eq!((s.as_str(), f.as_str()), (server, field), "{text}");
                    assert!(message.contains(needle), "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(parse("[]"), Err(ConfigError::Syntax { .. })));
        assert!(matches!(parse("{"), Err(ConfigError::Syntax { .. })));
    }

    #[test]
    fn secrets_are_shown_as_written_and_redacted_from_text() {
        let config = parse(
            r#"{"mcpServers": {
                "s": {"command": "${HOME}/bin/srv", "args": ["--token=${TOKEN}", "two words", "${X:-dflt}"],
                      "env": {"T": "${TOKEN}", "LIT": "plain"}, "cwd": "sub"},
                "w": {"url": "https://h/mcp?k=${TOKEN}",
                      "headers": {"Authorization": "Bearer ${TOKEN}", "X-Key": "literal-key-123"}}
            }}"#,
        )
        .unwrap();
        let s = &config.servers["s"];
        assert_eq!(
            s.launch_line(),
            "LIT=plain T=${TOKEN} ${HOME}/bin/srv --token=${TOKEN} 'two words' ${X:-dflt} (in /cfg/sub)"
        );
        assert_eq!(
            s.redact("cannot run /home/u/bin/srv --token=s3cret"),
            "cannot run ${HOME}/bin/srv --token=${TOKEN}"
        );
        // A default written in the file is no secret.
        assert_eq!(s.redact("dflt"), "dflt");
        let w = &config.servers["w"];
        // The headers are part of what an approval shows: a value may carry
        // a variable of the user's environment to the server.
        assert_eq!(
            w.launch_line(),
            "https://h/mcp?k=${TOKEN} (headers Authorization: Bearer ${TOKEN}, X-Key: [redacted])"
        );
        assert_eq!(
            w.shown,
            Transport::Http {
                url: "https://h/mcp?k=${TOKEN}".into(),
                headers: [
                    ("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned()),
                    ("X-Key".to_owned(), REDACTED.to_owned())
                ]
                .into()
            }
        );
        assert_eq!(w.redact("sent literal-key-123 and s3cret"), format!("sent {REDACTED} and ${{TOKEN}}"));
        let debug = format!("{config:?}");
        assert!(!debug.contains("s3cret") && !debug.contains("literal-key-123"), "{debug}");
        // A bad URL is quoted as written.
        let err = parse(r#"{"mcpServers": {"b": {"url": "${TOKEN}"}}}"#).unwrap_err().to_string();
        assert!(err.contains("${TOKEN}") && !err.contains("s3cret"), "{err}");
    }

    #[test]
    fn loaded_files_are_trusted_and_name_their_source() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.json"), r#"{"mcpServers": {}}"#).unwrap();
        let loaded = McpConfig::load(&dir.path().join("./m.json")).unwrap();
        assert!(loaded.trusted);
        assert_eq!(loaded.source, Some(std::fs::canonicalize(dir.path().join("m.json")).unwrap()));
        assert!(McpConfig::default().trusted && parse(r#"{"mcpServers": {}}"#).unwrap().source.is_none());
    }

    #[test]
    fn a_relative_cwd_has_one_spelling_whatever_the_config_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        let text = r#"{"mcpServers": {"s": {"command": "x", "cwd": ".."}}}"#;
        let hashes: Vec<String> = [real.join("sub"), real.join("sub/."), real.join("sub/../sub")]
            .iter()
            .map(|base| McpConfig::parse(text, base, &|_| None).unwrap().servers["s"].launch_hash())
            .collect();
        assert!(hashes.iter().all(|h| h == &hashes[0]), "{hashes:?}");
        let cwd = match &McpConfig::parse(text, &real.join("sub"), &|_| None).unwrap().servers["s"].transport
        {
            Transport::Stdio { cwd, .. } => cwd.clone().unwrap(),
            Transport::Http { .. } => unreachable!(),
        };
        assert_eq!(cwd, real);
    }

    #[test]
    fn expansion_keeps_plain_dollars_and_the_launch_hash_tracks_the_launch() {
        let inputs = BTreeMap::new();
        let vars = Vars { env: &env, workspace: None, inputs: &inputs };
        assert_eq!(expand_vars("a$b ${X:-} $", &vars).unwrap().0, "a$b  $");
        assert_eq!(expand_vars("$${HOME} ${HOME} $${", &vars).unwrap().0, "${HOME} /home/u ${");
        let config = parse(
            r#"{"mcpServers": {"a": {"command": "x", "timeout_ms": 1},
                                               "b": {"command": "x", "read_only": true},
                                               "c": {"command": "x", "args": ["1"]}}}"#,
        )
        .unwrap();
        let hash = |n: &str| config.servers[n].launch_hash();
        assert_eq!(hash("a"), hash("b"));
        assert_ne!(hash("a"), hash("c"));
        assert_eq!(hash("a").len(), 64);
    }

    #[test]
    fn every_variable_form_expands_and_secrets_keep_their_written_form() {
        let text = r#"{
          // VS Code's shape, with comments and trailing commas
          "inputs": [
            {"type": "promptString", "id": "api-key", "description": "The API key", "password": true},
            {"type": "promptString", "id": "region", "default": "eu"},
          ],
          "servers": {
            "s": {"type": "stdio", "command": "${userHome}/bin/srv",
                  "args": ["${workspaceFolder}/data", "${env:TOKEN}", "${input:region}"],
                  "env": {"KEY": "${input:api-key}"},},
          },
        }"#;
        let env = |name: &str| match name {
            "HOME" => Some("/home/u".to_owned()),
            "TOKEN" => Some("s3cret".to_owned()),
            "CODEMODE_INPUT_API_KEY" => Some("key-from-env".to_owned()),
            _ => None,
        };
        let config = McpConfig::parse_in(text, Path::new("/cfg"), Some(Path::new("/ws")), &env).unwrap();
        let s = &config.servers["s"];
        assert_eq!(
            s.transport,
            Transport::Stdio {
                command: "/home/u/bin/srv".into(),
                args: vec!["/ws/data".into(), "s3cret".into(), "eu".into()],
                env: [("KEY".to_owned(), "key-from-env".to_owned())].into(),
                cwd: None,
            }
        );
        assert_eq!(s.redact("got key-from-env and s3cret"), "got ${input:api-key} and ${env:TOKEN}");
        assert!(s.launch_line().contains("KEY=${input:api-key}"), "{}", s.launch_line());
        // No workspace, no value for an input: errors that say what to do.
        let err = McpConfig::parse(text, Path::new("/cfg"), &env).unwrap_err().to_string();
        assert!(err.contains("workspaceFolder") && err.contains("args[0]"), "{err}");
        let no_key = |n: &str| if n == "CODEMODE_INPUT_API_KEY" { None } else { env(n) };
        let err = McpConfig::parse_in(text, Path::new("/cfg"), Some(Path::new("/ws")), &no_key)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("input `api-key` (The API key) has no value")
                && err.contains("CODEMODE_INPUT_API_KEY")
                && err.contains("`default`")
                && err.contains("env.KEY"),
            "{err}"
        );
        for (bad, needle) in
            [("${input:nope}", "names no input"), ("${config:x}", "not a variable codemode knows")]
        {
            let text = format!(r#"{{"mcpServers": {{"s": {{"command": "{bad}"}}}}}}"#);
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn env_file_values_reach_the_environment_and_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "# a comment\nAPI_TOKEN=tok-from-file\nSHARED=file\n")
            .unwrap();
        let text =
            r#"{"mcpServers": {"s": {"command": "x", "envFile": ".env", "env": {"SHARED": "config"}}}}"#;
        let config = McpConfig::parse(text, dir.path(), &env).unwrap();
        let s = &config.servers["s"];
        let Transport::Stdio { env: vars, .. } = &s.transport else { unreachable!() };
        assert_eq!(vars["API_TOKEN"], "tok-from-file");
        assert_eq!(vars["SHARED"], "config", "`env` wins over the file");
        assert_eq!(s.redact("saw tok-from-file"), format!("saw {REDACTED}"));
        assert!(!s.launch_line().contains("tok-from-file"), "{}", s.launch_line());
        std::fs::write(dir.path().join("bad.env"), "GOOD=1\nnot a line with secret-value\n").unwrap();
        let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "bad.env"}}}"#;
        let err = McpConfig::parse(text, dir.path(), &env).unwrap_err().to_string();
        assert!(err.contains("envFile") && err.contains("bad.env") && !err.contains("secret-value"), "{err}");
        let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "missing.env"}}}"#;
        assert!(McpConfig::parse(text, dir.path(), &env).unwrap_err().to_string().contains("missing.env"));
        // The approval shows where the redacted values come from.
        assert!(
            s.launch_line().ends_with(&format!("(environment from {})", dir.path().join(".env").display()))
        );
    }

    #[test]
    fn an_env_file_reached_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/real.env"), "A=1\n").unwrap();
        std::os::unix::fs::symlink("sub/real.env", dir.path().join("link.env")).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("linked")).unwrap();
        for written in ["link.env", "linked/real.env"] {
            let text = format!(r#"{{"mcpServers": {{"s": {{"command": "x", "envFile": "{written}"}}}}}}"#);
            let err = McpConfig::parse(&text, dir.path(), &env).unwrap_err().to_string();
            assert!(err.contains("symbolic link") && err.contains("envFile"), "{written}: {err}");
        }
        let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "sub/real.env"}}}"#;
        assert!(McpConfig::parse(text, dir.path(), &env).is_ok());
    }

    #[test]
    fn client_keys_map_to_codemode_settings_and_the_rest_is_warned_about() {
        let config = parse(
            r#"{"mcpServers": {
                "cline": {"command": "x", "timeout": 90, "alwaysAllow": ["read"], "disabledTools": ["rm"],
                          "description": "d", "watchPaths": []},
                "wind": {"serverUrl": "https://h/mcp", "description": "e"},
                "zed": {"command": {"path": "z", "args": ["1"]}, "source": "custom"}
            }}"#,
        )
        .unwrap();
        let cline = &config.servers["cline"];
        assert_eq!(cline.timeout, Some(Duration::from_secs(90)));
        assert_eq!(cline.disabled_tools, ["rm".to_owned()].into());
        assert_eq!(cline.auto_approve, ["read".to_owned()].into());
        assert!(
            matches!(&config.servers["wind"].transport, Transport::Http { url, .. } if url == "https://h/mcp")
        );
        assert!(matches!(&config.servers["zed"].transport, Transport::Stdio { command, args, .. }
            if command == "z" && args == &["1"]));
        assert_eq!(config.auto_approve_rules(), ["mcp__cline__read"]);
        // A disabled server with an error is skipped, not an error.
        let skipped = parse(
            r#"{"mcpServers": {"off": {"command": "${NOPE}", "disabled": true}, "on": {"command": "x"}}}"#,
        )
        .unwrap();
        assert!(skipped.servers["off"].disabled && skipped.enabled().count() == 1);
        assert!(parse(r#"{"mcpServers": {"": {"command": "x", "disabled": true}}}"#).is_err());
        let untrusted = McpConfig { trusted: false, ..config.clone() };
        assert!(untrusted.auto_approve_rules().is_empty());
        assert_eq!(
            config.warnings(),
            [
                "MCP config: `description` (servers cline, wind) has no effect in codemode and is ignored",
                "MCP config: `watchPaths` (server cline) has no effect in codemode and is ignored",
            ]
        );
        for (text, field, needle) in [
            (r#"{"mcpServers": {"s": {"command": "x", "timeout": 60000}}}"#, "timeout", "in seconds"),
            (
                r#"{"mcpServers": {"s": {"command": "x", "timeout": 5, "timeout_ms": 5}}}"#,
                "timeout",
                "not both",
            ),
            (r#"{"mcpServers": {"s": {"url": "http://h", "envFile": ".env"}}}"#, "envFile", "stdio"),
            (r#"{"mcpServers": {"---": {"command": "x"}}}"#, "name", "at least one ASCII letter or digit"),
            (
                r#"{"mcpServers": {"s": {"command": "x", "disabledTools": "rm"}}}"#,
                "disabledTools",
                "invalid type",
            ),
        ] {
            match parse(text) {
                Err(ConfigError::Field { field: f, message, .. }) => {
                    assert_eq!(f, field, "{text}");
                    assert!(message.contains(needle), "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
