//! `McpError`: what can go wrong reaching an MCP server or calling its
//! tools. Transport details (rmcp's errors) never leave `mcp/`: each is
//! turned into a variant with the server, tool and limit it concerns.

use std::time::Duration;

/// A failure of the MCP client pool. Messages are lower-case, name the
/// server (and tool), and end with the server's stderr tail where there is
/// one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// No server of that name is configured.
    #[error("no MCP server named `{server}` is configured")]
    UnknownServer {
        /// The name asked for.
        server: String,
    },
    /// The server is configured with `disabled: true`.
    #[error("MCP server `{server}` is disabled in the MCP config")]
    Disabled {
        /// The server.
        server: String,
    },
    /// The connection check (`mcp_connect__<server>`) refused to start it.
    #[error("connecting to MCP server `{server}` was refused: {reason}")]
    ConnectRefused {
        /// The server.
        server: String,
        /// Why, as the check said.
        reason: String,
    },
    /// The server's process could not be started.
    #[error("cannot start MCP server `{server}` (`{command}`): {message}")]
    Spawn {
        /// The server.
        server: String,
        /// The command.
        command: String,
        /// The OS error.
        message: String,
    },
    /// The server did not complete the handshake (`server/discover` or
    /// `initialize`) in time.
    #[error("MCP server `{server}` did not complete the handshake (server/discover or initialize) within {} ms{}", .timeout.as_millis(), tail(.stderr))]
    StartupTimeout {
        /// The server.
        server: String,
        /// The startup timeout.
        timeout: Duration,
        /// The last bytes of its stderr.
        stderr: String,
    },
    /// The handshake failed (the server refused it or closed the connection).
    #[error("MCP server `{server}` failed to initialise: {message}{}", tail(.stderr))]
    Initialize {
        /// The server.
        server: String,
        /// What failed.
        message: String,
        /// The last bytes of its stderr.
        stderr: String,
    },
    /// The connection ended (the process exited or crashed, or the stream
    /// closed) while a request was pending or before it was sent. Over
    /// streamable HTTP, `cause` says what happened on the wire and names the
    /// URL (`cannot connect to URL (connection refused): is the server
    /// running? ...`, `the server at URL closed the stream before answering`, `HTTP
    /// 502 from URL`); `stderr` is empty. See docs/MCP.md, "Streamable HTTP
    /// failures".
    #[error("MCP server `{server}` stopped: {cause}{}", tail(.stderr))]
    Stopped {
        /// The server.
        server: String,
        /// How it ended, e.g. `exited with status 3`.
        cause: String,
        /// The last bytes of its stderr.
        stderr: String,
    },
    /// The server sent a message over the size limit; the connection was
    /// closed (the server is restarted on next use).
    #[error(
        "MCP server `{server}` sent a message over the {limit_bytes}-byte limit; the connection was closed \
         (ask for less, or raise the pool's max_message_bytes)"
    )]
    MessageTooLarge {
        /// The server.
        server: String,
        /// The limit.
        limit_bytes: usize,
    },
    /// The server sent a message nested deeper than
    /// [`MAX_JSON_DEPTH`](super::MAX_JSON_DEPTH) levels of arrays and
    /// objects, which the JSON reader cannot take apart; the connection was
    /// closed (the server is started again on next use), so the request
    /// waiting for that answer fails at once instead of at its timeout.
    #[error(
        "MCP server `{server}` sent a message nested more than {limit} levels deep (arrays and objects), which codemode cannot read; the connection was closed (ask the tool for a flatter answer)"
    )]
    TooDeep {
        /// The server.
        server: String,
        /// The deepest nesting read ([`MAX_JSON_DEPTH`](super::MAX_JSON_DEPTH)).
        limit: usize,
    },
    /// A tool call took longer than its timeout (`notifications/cancelled`
    /// was sent).
    #[error("tool `{tool}` of MCP server `{server}` did not answer within {} ms; the call was cancelled", .timeout.as_millis())]
    CallTimeout {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The call reported progress (which kept resetting its timeout) but
    /// had not finished when its server's maximum total passed
    /// (`max_total_timeout_ms`); a `notifications/cancelled` was sent.
    #[error(
        "tool `{tool}` of MCP server `{server}` reported progress but did not finish within its maximum \
         total of {} ms (the server's max_total_timeout_ms); the call was cancelled",
        .max_total.as_millis()
    )]
    TotalTimeout {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The server's maximum total.
        max_total: Duration,
    },
    /// Listing the server's tools took longer than the list timeout.
    #[error("MCP server `{server}` did not list its tools within {} ms", .timeout.as_millis())]
    ListTimeout {
        /// The server.
        server: String,
        /// The timeout.
        timeout: Duration,
    },
    /// `tools/list` returned more pages than the page cap.
    #[error("MCP server `{server}` listed more than {pages} pages of tools; it may be looping on its cursor")]
    TooManyPages {
        /// The server.
        server: String,
        /// The cap.
        pages: usize,
    },
    /// The server answered a request with a JSON-RPC error, or with
    /// something that is not MCP.
    #[error("MCP server `{server}` answered `{method}` with an error: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// The request, e.g. `tools/call`.
        method: String,
        /// The error.
        message: String,
    },
    /// The server turned a request away for now: a JSON-RPC error that
    /// marks it retryable (`error.data.retryable: true`, with an optional
    /// `error.data.retryAfterMs`), or over HTTP a 429 or 503 answer (its
    /// `Retry-After` seconds read). The request did not run and may be sent
    /// again (docs/LIMITS.md, "Retries").
    #[error("MCP server `{server}` turned `{method}` away for now (it may be sent again): {message}")]
    TryAgain {
        /// The server.
        server: String,
        /// The request, e.g. `tools/call`.
        method: String,
        /// The error.
        message: String,
        /// How long the server asked to wait (`retryAfterMs`).
        after: Option<Duration>,
    },
    /// A multi round-trip call (MCP 2026-07-28 `input_required`) codemode
    /// could not complete: the server asked for something codemode does not
    /// offer (sampling), answered malformed rounds, or kept asking past the
    /// round limit. The server answered; codemode gave up.
    #[error("MCP server `{server}`: codemode could not complete `{method}`: {message}")]
    RoundsAbandoned {
        /// The server.
        server: String,
        /// The request, e.g. `tools/call`.
        method: String,
        /// What the server asked for and why codemode stopped.
        message: String,
    },
    /// The tool ran and reported failure (`isError: true`).
    #[error("tool `{tool}` of MCP server `{server}` failed: {message}")]
    ToolFailed {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The text of its result.
        message: String,
    },
    /// The tool's `structuredContent` does not match its `outputSchema`.
    #[error(
        "tool `{tool}` of MCP server `{server}` returned content that does not match its outputSchema: {message}"
    )]
    InvalidOutput {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The first validation error.
        message: String,
    },
    /// The server has no tool of that name (as last listed).
    #[error("MCP server `{server}` has no tool `{tool}`")]
    UnknownTool {
        /// The server.
        server: String,
        /// The name asked for.
        tool: String,
    },
    /// The server is `read_only` and the tool is not annotated read-only.
    #[error(
        "tool `{tool}` of MCP server `{server}` is not annotated read-only and the server is configured \
         `read_only: true`"
    )]
    NotReadOnly {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
    },
    /// The tool is hidden: the configuration's `disabledTools` names it, or
    /// it runs only as a task.
    #[error("tool `{tool}` of MCP server `{server}` cannot be called: {why}")]
    Hidden {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// Why it is hidden.
        why: String,
    },
    /// The pool was shut down.
    #[error("the MCP client pool was shut down; MCP server `{server}` is not available")]
    ShutDown {
        /// The server.
        server: String,
    },
    /// The HTTP server answered 401: there is no login for its URL, or the
    /// login's tokens were refused and could not be refreshed (MCP
    /// authorization; see `mcp::oauth`).
    #[error(
        "MCP server `{server}` requires authorization: run `codemode mcp login {server}` (opens a browser; give it the same `--mcp-config` or `--workspace` as this run), then run again"
    )]
    LoginRequired {
        /// The server.
        server: String,
    },
    /// The HTTP server answered 403 with `WWW-Authenticate: Bearer
    /// error="insufficient_scope", scope="..."` (RFC 6750 §3.1): the login
    /// lacks scopes, and the run did not re-authorize (it was not started
    /// with `--login`, or made its
    /// [`MAX_REAUTHORIZATIONS`](crate::mcp::oauth::MAX_REAUTHORIZATIONS)
    /// already). The scopes are kept with the login, so `codemode mcp
    /// login SERVER` asks for them (MCP authorization, step-up).
    #[error(
        "MCP server `{server}` needs OAuth scope `{scope}`, which its login lacks (HTTP 403 insufficient_scope){}: run `codemode mcp login {server}` (it asks for that scope), then run again",
        if *.stepped_up { "; this run re-authorized as often as it may" } else { "" }
    )]
    ScopeRequired {
        /// The server.
        server: String,
        /// The scopes the login needs, space-separated: those it had and
        /// those the server asked for.
        scope: String,
        /// Whether the run could re-authorize (`--login`) and made its
        /// re-authorizations of the server already.
        stepped_up: bool,
    },
}

impl McpError {
    /// The error with `redact` applied to every text it holds (messages,
    /// commands, stderr tails, tool names), so a secret expanded into the
    /// server's launch never reaches a message, a receipt or a log.
    pub(crate) fn redacted(self, redact: impl Fn(&str) -> String) -> McpError {
        use McpError as E;
        let r = |s: String| redact(&s);
        match self {
            E::UnknownServer { server } => E::UnknownServer { server: r(server) },
            E::Disabled { server } => E::Disabled { server: r(server) },
            E::ConnectRefused { server, reason } => {
                E::ConnectRefused { server: r(server), reason: r(reason) }
            }
            E::Spawn { server, command, message } => {
                E::Spawn { server: r(server), command: r(command), message: r(message) }
            }
            E::StartupTimeout { server, timeout, stderr } => {
                E::StartupTimeout { server: r(server), timeout, stderr: r(stderr) }
            }
            E::Initialize { server, message, stderr } => {
                E::Initialize { server: r(server), message: r(message), stderr: r(stderr) }
            }
            E::Stopped { server, cause, stderr } => {
                E::Stopped { server: r(server), cause: r(cause), stderr: r(stderr) }
            }
            E::MessageTooLarge { server, limit_bytes } => {
                E::MessageTooLarge { server: r(server), limit_bytes }
            }
            E::TooDeep { server, limit } => E::TooDeep { server: r(server), limit },
            E::CallTimeout { server, tool, timeout } => {
                E::CallTimeout { server: r(server), tool: r(tool), timeout }
            }
            E::TotalTimeout { server, tool, max_total } => {
                E::TotalTimeout { server: r(server), tool: r(tool), max_total }
            }
            E::ListTimeout { server, timeout } => E::ListTimeout { server: r(server), timeout },
            E::TooManyPages { server, pages } => E::TooManyPages { server: r(server), pages },
            E::Protocol { server, method, message } => {
                E::Protocol { server: r(server), method: r(method), message: r(message) }
            }
            E::TryAgain { server, method, message, after } => {
                E::TryAgain { server: r(server), method: r(method), message: r(message), after }
            }
            E::ToolFailed { server, tool, message } => {
                E::ToolFailed { server: r(server), tool: r(tool), message: r(message) }
            }
            E::RoundsAbandoned { server, method, message } => {
                E::RoundsAbandoned { server: r(server), method: r(method), message: r(message) }
            }
            E::InvalidOutput { server, tool, message } => {
                E::InvalidOutput { server: r(server), tool: r(tool), message: r(message) }
            }
            E::UnknownTool { server, tool } => E::UnknownTool { server: r(server), tool: r(tool) },
            E::NotReadOnly { server, tool } => E::NotReadOnly { server: r(server), tool: r(tool) },
            E::Hidden { server, tool, why } => E::Hidden { server: r(server), tool: r(tool), why: r(why) },
            E::ShutDown { server } => E::ShutDown { server: r(server) },
            E::LoginRequired { server } => E::LoginRequired { server: r(server) },
            E::ScopeRequired { server, scope, stepped_up } => {
                E::ScopeRequired { server: r(server), scope: r(scope), stepped_up }
            }
        }
    }
}

impl McpError {
    /// Whether the call that failed with this error may be made again
    /// (docs/LIMITS.md, "Retries"): [`RetryHint::Server`] for an error the
    /// server marked retryable; [`RetryHint::Transport`] when the server
    /// could not be started or its connection ended (the call may or may
    /// not have run); [`RetryHint::No`] for the rest, a timeout included.
    pub fn retry_hint(&self) -> crate::catalog::RetryHint {
        use crate::catalog::RetryHint;
        match self {
            McpError::TryAgain { after, .. } => RetryHint::Server { after: *after },
            McpError::Spawn { .. }
            | McpError::StartupTimeout { .. }
            | McpError::Initialize { .. }
            | McpError::Stopped { .. } => RetryHint::Transport,
            _ => RetryHint::No,
        }
    }
}

/// A JSON-RPC error's `data` marks it retryable: `{"retryable": true}`,
/// with the wait it asks for when it has `retryAfterMs` (a whole number of
/// milliseconds).
pub(crate) fn marked_retryable(data: Option<&serde_json::Value>) -> Option<Option<Duration>> {
    let data = data?;
    (data.get("retryable")? == &serde_json::Value::Bool(true))
        .then(|| data.get("retryAfterMs").and_then(serde_json::Value::as_u64).map(Duration::from_millis))
}

/// `"; stderr: ..."` for a non-empty tail.
fn tail(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() { String::new() } else { format!("; stderr tail: {stderr}") }
}
