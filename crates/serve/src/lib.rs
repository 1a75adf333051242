//! Server mode: codemode as an MCP server (`codemode mcp serve`), so any
//! MCP host's model gets code mode (docs/SERVE.md).
//!
//! The surface is `execute_tools` and `tool_search` (surface.rs); upstream
//! MCP servers from the MCP configuration are reached inside programs,
//! started lazily through the gate. Every call of a served program passes
//! the same gate as any other; approvals reach the person behind the MCP
//! client, never the model (approvals.rs). Results carry the compact
//! receipt as text and its facts as `structuredContent` (result.rs).
//!
//! Both protocol eras are served through rmcp: stdio here, streamable HTTP
//! in http.rs.

mod approvals;
mod arguments;
mod direct;
mod eliciting;
#[doc(hidden)]
pub mod fuzzing;
mod handler;
#[cfg(feature = "http")]
mod http;
mod input_required;
mod long_runs;
mod pausing;
mod question;
mod request_state;
mod result;
mod rollback;
mod saves;
#[cfg(feature = "http")]
mod sessions;
mod stdin_closed;
mod stdio_socket;
mod stdout_watch;
mod surface;
mod trace_parent;

use std::sync::Arc;
use std::time::Duration;

pub use arguments::{MAX_ARGUMENTS_BYTES, MAX_REQUEST_STATE_BYTES};
pub use handler::CodeModeServer;
#[cfg(feature = "http")]
pub use http::{ENDPOINT, EngineFactory, HttpOptions, HttpServer, MAX_BODY_BYTES, TOKEN_MIN_BYTES};
pub use request_state::STATE_KEY_BYTES;
pub use result::TEXT_BYTES;
#[cfg(feature = "http")]
pub use sessions::SESSION_IDLE;
pub use surface::LIST_BUDGET;

use codemode::Approver;

/// How a server behaves beyond its engine.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// List the native tools (read, write, edit, file_search, grep_files,
    /// bash) as MCP tools too, each call through the same gate. Default:
    /// false.
    pub direct_tools: bool,
    /// How long a call waits for a person's answer to an approval asked
    /// with `elicitation/create` before it is denied. Not counted against
    /// the run's deadline. Default: 300 s.
    pub approval_timeout: Duration,
    /// Decides every approval instead of the person behind the client
    /// (`--approve deny|allow|cmd:PROGRAM`). Default: none.
    pub approver: Option<Arc<dyn Approver>>,
    /// Every approval pauses the run for `codemode approve`, whatever the
    /// client declared (`--approve pause`). Default: false.
    pub pause_always: bool,
    /// The key sealing `requestState` of `input_required` results (at least
    /// [`STATE_KEY_BYTES`] bytes). Replicas behind one load balancer need
    /// the same key. Default: none, a random key per process.
    pub state_key: Option<Vec<u8>>,
    /// How long an approval asked with `input_required` may wait for its
    /// answer. Default: 1 hour.
    pub state_ttl: Duration,
    /// The command a paused result names for a person to decide, with
    /// `{run_id}` and `{seqs}`. Default: [`DEFAULT_DECIDE_COMMAND`]; the
    /// CLI adds the options naming the workspace, policy file and journal
    /// store after `--allow {seqs}`.
    pub decide_command: String,
    /// How long an `execute_tools` request waits for its run before it
    /// answers `{status: "running", run_id}` and lets the run go on in the
    /// server (bounded by its own deadline), for the model to
    /// `{"wait": RUN_ID}` or `{"cancel": RUN_ID}`; a `wait` answers within
    /// the same bound. `None`: a request waits for its run's end. Default:
    /// [`DEFAULT_YIELD_AFTER`].
    pub yield_after: Option<Duration>,
}

/// The default of [`ServeOptions::yield_after`]: 45 s, below the 60 s a
/// tool call gets from the official TypeScript SDK's client (its default
/// request timeout) and the hosts built on it.
pub const DEFAULT_YIELD_AFTER: Duration = Duration::from_secs(45);

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            direct_tools: false,
            approval_timeout: Duration::from_secs(300),
            approver: None,
            pause_always: false,
            state_key: None,
            state_ttl: Duration::from_secs(3600),
            decide_command: DEFAULT_DECIDE_COMMAND.to_owned(),
            yield_after: Some(DEFAULT_YIELD_AFTER),
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("direct_tools", &self.direct_tools)
            .field("approval_timeout", &self.approval_timeout)
            .field("approver", &self.approver.is_some())
            .field("pause_always", &self.pause_always)
            .field("state_key", &self.state_key.as_ref().map(|_| "<set>"))
            .field("state_ttl", &self.state_ttl)
            .field("decide_command", &self.decide_command)
            .field("yield_after", &self.yield_after)
            .finish()
    }
}

/// The default of [`ServeOptions::decide_command`].
pub const DEFAULT_DECIDE_COMMAND: &str = "codemode approve {run_id} --allow {seqs} (or --deny {seqs}), then call execute_tools with {\"resume\": \"{run_id}\"}";

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The request-state key is unusable.
    #[error("request-state key: {0}")]
    Key(String),
    /// The server's configuration is refused (e.g. an address beyond
    /// loopback without a bearer token); the message says what to change.
    #[error("{0}")]
    Config(String),
    /// The transport failed (stdin/stdout closed badly, a socket error).
    #[error("{0}")]
    Transport(String),
}

/// Whether the request of `context` speaks MCP 2026-07-28 or later.
pub(crate) fn is_modern(context: &rmcp::service::RequestContext<rmcp::service::RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

impl CodeModeServer {
    /// Serves MCP on this process's stdin and stdout until the client
    /// closes stdin, closes stdout (a pipe whose reading end is gone: no
    /// answer could reach anyone, so no program should run for nobody), or
    /// `shutdown` completes (SIGTERM, Ctrl-C in the CLI): then runs in
    /// flight are cancelled (receipts saved, answered when stdout is still
    /// open; at most 30 s), and the upstream MCP servers are ended.
    ///
    /// # Errors
    /// The transport failed to start or broke.
    pub async fn serve_stdio(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), ServeError> {
        use rmcp::ServiceExt as _;
        let engine = self.engine().clone();
        let server = self.clone();
        use rmcp::transport::async_rw::AsyncRwTransport;
        // A line (one message) over the bound is dropped unread. Sockets
        // (a Node.js client's) and FIFOs are read and written from the
        // reactor; anything else on the blocking pool. The end of stdin is
        // noticed as the transport reads it (stdin_closed.rs).
        let stdin_closed = tokio_util::sync::CancellationToken::new();
        let running = match stdio_socket::socket_stdio() {
            Some((reader, writer)) => {
                let reader = stdin_closed::NoticesEnd::new(reader, stdin_closed.clone());
                let transport = AsyncRwTransport::new(reader, writer);
                self.serve(transport.with_max_line_length(MAX_STDIO_LINE_BYTES)).await
            }
            None => {
                let (reader, writer) = rmcp::transport::io::stdio_pipes();
                let reader = stdin_closed::NoticesEnd::new(reader, stdin_closed.clone());
                let transport = AsyncRwTransport::new(reader, writer);
                self.serve(transport.with_max_line_length(MAX_STDIO_LINE_BYTES)).await
            }
        }
        .map_err(|e| ServeError::Transport(format!("could not start serving on stdio: {e}")))?;
        let closed = running.cancellation_token();
        let waiting = running.waiting();
        let (stdout_gone, _watching) = stdout_watch::closed();
        tokio::pin!(waiting, shutdown, stdout_gone);
        let ended = tokio::select! {
            // The client closed stdin: runs still going are cancelled at
            // once (not after rmcp's wait for their answers) and their
            // receipts saved before the process ends.
            () = stdin_closed.cancelled() => {
                server.stop_runs(Duration::from_secs(30)).await;
                end_of_session(waiting).await
            }
            ended = &mut waiting => {
                server.stop_runs(Duration::from_secs(30)).await;
                ended.map(|_| ())
            }
            () = &mut stdout_gone => {
                tracing::warn!("the client closed codemode's stdout: stopping (runs in flight are cancelled)");
                server.stop_runs(Duration::from_secs(30)).await;
                closed.cancel();
                end_of_session(waiting).await
            }
            () = &mut shutdown => {
                server.stop_runs(Duration::from_secs(30)).await;
                closed.cancel();
                end_of_session(waiting).await
            }
        };
        engine.shutdown_mcp().await;
        ended.map_err(|e| ServeError::Transport(format!("the stdio session ended badly: {e}")))
    }
}

/// The longest line (one JSON-RPC message) read over stdio: 4 MiB and
/// 64 KiB, [`MAX_ARGUMENTS_BYTES`] and room for the request around its
/// arguments; a longer one is dropped unread (its request gets no answer:
/// its id is in what was not read). Not more: a line is parsed whole
/// before anything can look at its size, and a line of small numbers
/// parses to about 16 times its bytes, several times over (16 MiB lines
/// took about 2 GB).
pub const MAX_STDIO_LINE_BYTES: usize = MAX_ARGUMENTS_BYTES + 64 * 1024;

/// How long a stopping stdio session waits for rmcp to finish sending
/// answers already made: a client that stopped reading (its stdout pipe
/// or socket full) would otherwise hold the process forever.
const SEND_WAIT: Duration = Duration::from_secs(5);

/// Waits for the stdio session to end, at most [`SEND_WAIT`]; past that
/// the answers still unsent are dropped with a warning, and the process
/// can end.
async fn end_of_session<E>(
    waiting: impl std::future::Future<Output = Result<impl Sized, E>>,
) -> Result<(), E> {
    match tokio::time::timeout(SEND_WAIT, waiting).await {
        Ok(ended) => ended.map(|_| ()),
        Err(_) => {
            tracing::warn!(
                "the client is not reading codemode's answers: stopping without sending the rest ({} s waited)",
                SEND_WAIT.as_secs()
            );
            Ok(())
        }
    }
}
