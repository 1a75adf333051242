//! One live connection to one MCP server: the process (stdio) or HTTP
//! session, the rmcp client on top, and the watch that says when it ended.
//!
//! - **Stdio.** The server runs in a session and process group of its own
//!   ([`ProcessGroup`](codemode_base::process_group::ProcessGroup), no controlling terminal) with piped stdin, stdout and stderr. A monitor task
//!   owns the group: when the direct child exits, when its stdout closes or
//!   carries a message over the size limit, or when the connection is
//!   stopped, it ends the whole group (wrappers' grandchildren included),
//!   reaps it, and publishes why the connection is down. A server still
//!   running is ended in the MCP specification's order: its stdin closed
//!   (the monitor holds it through `stdin_pipe.rs`, whoever writes), then
//!   [`STDIN_CLOSE_GRACE`] to exit, then SIGTERM, then SIGKILL. stderr is drained
//!   continuously; its last [`STDERR_TAIL`] bytes go into errors.
//! - **Size limit.** stdout is read through [`BoundedLines`](bounded_lines::BoundedLines): a line (one
//!   JSON-RPC message) longer than the limit ends the stream, so the pending
//!   calls fail with [`McpError::MessageTooLarge`] instead of waiting.
//!   (rmcp's own line limit drops the line and keeps waiting, which would
//!   leave the call hanging until its timeout.) For HTTP, rmcp's
//!   `max_json_response_size` and `max_sse_event_size` are set to the limit.
//! - **Depth limit.** A line nested deeper than [`MAX_JSON_DEPTH`] levels
//!   of arrays and objects ends the stream the same way
//!   ([`McpError::TooDeep`]): rmcp's JSON reader would drop it as
//!   unreadable and the request waiting for it would wait its whole
//!   timeout.
//! - **Lone surrogates.** An escaped half of a UTF-16 surrogate pair in a
//!   line (`\ud83d`, which `JSON.stringify` writes for a JavaScript string
//!   cut mid-character) becomes `\ufffd` before rmcp reads the line
//!   ([`Repaired`](crate::mcp::lone_surrogates::Repaired)): serde_json refuses such a string, rmcp would drop the
//!   message, and the call it answers would wait its whole timeout. Each
//!   line is repaired afresh (a non-JSON line that ends inside a string
//!   does not carry over).
//! - **`list_changed` in order.** `BoundedLines` counts each
//!   `notifications/tools/list_changed` line as it is read, before any
//!   later answer reaches rmcp ([`Listing::notified`]), so a call answered
//!   after the notification sees the list as stale (rmcp hands
//!   notifications to the handler on a task of their own, which may run
//!   after the answer was delivered).
//! - **Down.** [`Connection::down`] resolves once the connection has ended,
//!   with its [`Down`] cause; every pending request races it, so a crash
//!   fails them at once.
//!
//! The parts: the handshake (`handshake.rs`), the stdio process
//! (`stdio_transport.rs`, `bounded_lines.rs`), the HTTP session
//! (`http_transport.rs`), the tool listing's state (`listing.rs`), the
//! rmcp client handler (`handler.rs`) and error text (`error_text.rs`).

pub(crate) mod bounded_lines;
mod error_text;
mod handler;
mod handshake;
mod http_transport;
mod listing;
mod stdin_pipe;
mod stdio_transport;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{ClientLifecycleMode, Peer, RoleClient, RunningService};
use tokio::sync::{mpsc, watch};

use super::McpError;
use super::config::{ServerConfig, Transport};
use super::era::{self, Era};
use super::requests::ServerRequests;
pub(crate) use error_text::error_text;
use handler::Handler;
#[cfg(feature = "http")]
pub(crate) use http_transport::ensure_tls_provider;
pub(crate) use listing::{Listing, ListingTap};
use stdio_transport::Tail;

/// Bytes of a server's stderr kept for error messages.
pub const STDERR_TAIL: usize = 4096;

/// Deepest nesting of arrays and objects read in one message: serde_json's
/// recursion limit (128) less one, the deepest it parses.
pub const MAX_JSON_DEPTH: usize = 127;

/// How long the monitor waits for a process whose stdout closed to exit by
/// itself (so its exit status can be reported) before killing it.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// How long a stdio server has to exit by itself once its stdin is closed
/// at the end of its session, before SIGTERM (and SIGKILL 2 s after that):
/// the MCP specification's stdio shutdown, in its order.
pub const STDIN_CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How long reaping a stopped server's process group may take.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Down {
    /// The process exited or its stream closed; a phrase such as
    /// `exited with status 3`.
    Ended(String),
    /// A message over the limit arrived.
    TooLarge,
    /// A message nested deeper than [`MAX_JSON_DEPTH`] arrived.
    TooDeep,
    /// The pool stopped it.
    Stopped,
}

/// The handshake in progress.
type Serving = Pin<
    Box<
        dyn std::future::Future<
                Output = Result<RunningService<RoleClient, Handler>, rmcp::service::ClientInitializeError>,
            > + Send,
    >,
>;

/// A live connection.
pub(crate) struct Connection {
    /// The server's name.
    pub(crate) server: String,
    /// The rmcp client; dropping it ends the session.
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    /// Sends requests.
    pub(crate) peer: Peer<RoleClient>,
    /// `Some(cause)` once the connection has ended.
    down: watch::Receiver<Option<Down>>,
    /// Ends the connection (the monitor kills the process group).
    down_tx: Arc<watch::Sender<Option<Down>>>,
    /// The server's stderr tail (empty for HTTP).
    pub(crate) stderr: Arc<Tail>,
    /// The message size limit.
    pub(crate) limit: usize,
    /// The monitor of the process, if there is one.
    monitor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// When it started.
    pub(crate) started: tokio::time::Instant,
    /// The protocol era the server speaks.
    pub(crate) era: Era,
    /// The tool calls in flight and what answers their questions.
    pub(crate) requests: Arc<ServerRequests>,
    /// What its raw `tools/list` answers said that rmcp's typed ones drop
    /// (see [`ListingTap`]).
    pub(crate) listing_tap: ListingTap,
    /// Where its tool listing stands against its `list_changed`
    /// notifications.
    pub(crate) listing: Listing,
}

/// What starting a connection gives besides the connection.
pub(crate) struct Started {
    pub(crate) connection: Arc<Connection>,
    /// One message per `notifications/tools/list_changed`.
    pub(crate) list_changed: mpsc::UnboundedReceiver<()>,
}

/// A failed start, and whether the other lifecycle may be tried.
struct Failed {
    error: McpError,
    /// The server answered the handshake, but not as this lifecycle wants
    /// (see [`answered`]).
    retry: bool,
}

/// A connection being started, until its handshake finished: what the
/// [`Connection`] will hold, filled in by the transport.
struct Starting {
    /// The message size limit.
    limit: usize,
    /// `Some(cause)` once the connection has ended.
    down: watch::Receiver<Option<Down>>,
    /// Ends the connection (the monitor kills the process group).
    down_tx: Arc<watch::Sender<Option<Down>>>,
    /// The server's stderr tail (stays empty for HTTP).
    stderr: Arc<Tail>,
    /// Where the tool listing stands against `list_changed`.
    listing: Listing,
    /// What the raw `tools/list` answers said.
    listing_tap: ListingTap,
    /// The monitor of the process (stdio).
    monitor: Option<tokio::task::JoinHandle<()>>,
    /// The run's consent to re-authorize in a browser (HTTP with a login).
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    interactive: Interactive,
}

/// [`PoolOptions::interactive_login`](crate::mcp::PoolOptions::interactive_login).
type Interactive = Option<Arc<crate::mcp::oauth::InteractiveLogin>>;

impl Connection {
    /// Starts `server` and completes the MCP handshake within its startup
    /// timeout, in the era it speaks (see [`era`]): first the lifecycle
    /// `hint` (the era the schema cache remembers) suggests, then, if that
    /// handshake failed while the server was still there, the other one on
    /// a fresh process or HTTP connection. `workspace` is the root when no
    /// tool call is in flight; `interactive` the run's consent to
    /// re-authorize in a browser. When `stop` turns `true` (the pool's
    /// shutdown) the start gives up: its process is ended and reaped before
    /// this returns [`McpError::ShutDown`].
    pub(crate) async fn start(
        server: &ServerConfig,
        limit: usize,
        hint: Option<Era>,
        workspace: Option<std::path::PathBuf>,
        interactive: &Interactive,
        stop: &watch::Receiver<bool>,
    ) -> Result<Started, McpError> {
        let deadline = tokio::time::Instant::now() + server.startup_timeout;
        let requests = ServerRequests::new(&server.name, server.roots, workspace, server.max_total_timeout);
        let first = Self::start_with(
            server,
            limit,
            era::first_lifecycle(hint),
            (deadline, stop.clone()),
            &requests,
            interactive,
        )
        .await;
        match first {
            Ok(started) => Ok(started),
            Err(Failed { error, retry: true }) if deadline > tokio::time::Instant::now() => {
                tracing::debug!(server = %server.name, "handshake failed ({error}); trying the other protocol era");
                let lifecycle = era::second_lifecycle(hint);
                Self::start_with(server, limit, lifecycle, (deadline, stop.clone()), &requests, interactive)
                    .await
                    .map_err(|f| f.error)
            }
            Err(failed) => Err(failed.error),
        }
    }

    /// One start with `lifecycle`, finished by `deadline` unless `stop`
    /// turns `true` first: the transport (a process or an HTTP session),
    /// then the handshake.
    async fn start_with(
        server: &ServerConfig,
        limit: usize,
        lifecycle: ClientLifecycleMode,
        (deadline, mut stop): (tokio::time::Instant, watch::Receiver<bool>),
        requests: &Arc<ServerRequests>,
        interactive: &Interactive,
    ) -> Result<Started, Failed> {
        let (down_tx, down) = watch::channel(None);
        let down_tx = Arc::new(down_tx);
        // A start abandoned half-way (the call's future dropped at a
        // deadline, a cancel, Ctrl-C) must still end the process.
        let mut abandoned = StopOnDrop(Some(down_tx.clone()));
        let mut starting = Starting {
            limit,
            down,
            down_tx,
            stderr: Arc::default(),
            listing: Listing::default(),
            listing_tap: ListingTap::default().routing(requests.progress.clone()),
            monitor: None,
            interactive: interactive.clone(),
        };
        let (list_tx, list_changed) = mpsc::unbounded_channel();
        let stdio = matches!(server.transport, Transport::Stdio { .. });
        let handler = Handler {
            list_changed: list_tx,
            count: (!stdio).then(|| starting.listing.notified.clone()),
            requests: requests.clone(),
            roots: server.roots,
        };
        let serving = match &server.transport {
            Transport::Stdio { command, args, env, cwd } => {
                let cmd = stdio_transport::command(command, args, env, cwd.as_deref());
                stdio_transport::serve(server, cmd, lifecycle, handler, &mut starting)
            }
            Transport::Http { url, headers } => {
                http_transport::serve(server, url, headers, lifecycle, handler, &starting).await
            }
        }
        .map_err(|error| Failed { error, retry: false })?;
        let shaken = tokio::select! {
            shaken = handshake::handshake(server, deadline, serving, &starting.down) => Some(shaken),
            _ = stop.wait_for(|s| *s) => None,
        };
        let Some(shaken) = shaken else {
            // Shut down half-way: end the process and wait until it is
            // reaped, so nothing the start spawned outlives the pool.
            starting.down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
            abandoned.0 = None;
            if let Some(monitor) = starting.monitor.take() {
                let _ = monitor.await;
            }
            return Err(Failed { error: McpError::ShutDown { server: server.name.clone() }, retry: false });
        };
        match shaken {
            Ok(service) => {
                let connection = starting.connected(&server.name, service, requests);
                abandoned.0 = None;
                Ok(Started { connection: Arc::new(connection), list_changed })
            }
            Err(unfinished) => Err(starting.failed(server, unfinished).await),
        }
    }

    /// Resolves with the cause once the connection has ended.
    pub(crate) async fn down(&self) -> Down {
        let mut down = self.down.clone();
        let cause = down.wait_for(Option::is_some).await.ok().and_then(|d| d.clone());
        cause.unwrap_or(Down::Stopped)
    }

    /// The cause if the connection has ended.
    pub(crate) fn is_down(&self) -> Option<Down> {
        self.down
            .borrow()
            .clone()
            .or_else(|| self.peer.is_transport_closed().then(|| Down::Ended("the connection closed".into())))
    }

    /// The error for a request cut by the end of the connection; waits
    /// (briefly) for the cause so the message says how it ended.
    pub(crate) async fn down_error(&self) -> McpError {
        let cause = tokio::time::timeout(REAP_WAIT + EXIT_GRACE, self.down())
            .await
            .unwrap_or_else(|_| Down::Ended("the connection closed".into()));
        let server = self.server.clone();
        match cause {
            Down::TooLarge => McpError::MessageTooLarge { server, limit_bytes: self.limit },
            Down::TooDeep => McpError::TooDeep { server, limit: MAX_JSON_DEPTH },
            Down::Stopped => McpError::ShutDown { server },
            Down::Ended(cause) => McpError::Stopped { server, cause, stderr: self.stderr.settled().await },
        }
    }

    /// Marks the connection as ended by `cause` (an HTTP connection lost
    /// mid-request: rmcp's transport stays open, so nothing else would);
    /// the pool starts a new one on next use. A cause already set stays.
    pub(crate) fn lost(&self, cause: String) {
        self.down_tx.send_if_modified(|d| set_once(d, Down::Ended(cause)));
    }

    /// Ends the connection: closes the session, kills and reaps the
    /// process group. Idempotent.
    pub(crate) async fn stop(&self) {
        let service = self.service.lock().expect("service lock").take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(Duration::from_millis(500)).await;
        }
        self.down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
        let monitor = self.monitor.lock().expect("monitor lock").take();
        if let Some(monitor) = monitor {
            let _ = monitor.await;
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The monitor sees this and kills the group; if the runtime is gone,
        // the ProcessGroup's own drop guard kills it.
        self.down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
    }
}
/// The variables a stdio server inherits from codemode's environment; the
/// rest of its environment is its config's `env`. The same list as the
/// reference MCP SDKs' default (TypeScript SDK `getDefaultEnvironment`), so
/// secrets in codemode's environment do not reach every server.
pub const INHERITED_ENV: [&str; 8] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"];

/// Tells the process monitor to stop (kill and reap the group) when
/// dropped still holding its sender.
struct StopOnDrop(Option<Arc<watch::Sender<Option<Down>>>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(down_tx) = self.0.take() {
            down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
        }
    }
}

/// Sets `slot` to `cause` unless a cause is already there.
fn set_once(slot: &mut Option<Down>, cause: Down) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(cause);
    true
}
