//! One live connection to one MCP server: the process (stdio) or HTTP
//! session, the rmcp client on top, and the watch that says when it ended.
//!
//! - **Stdio.** The server runs in a session and process group of its own
//!   ([`ProcessGroup`], no controlling terminal) with piped stdin, stdout and stderr. A monitor task
//!   owns the group: when the direct child exits, when its stdout closes or
//!   carries a message over the size limit, or when the connection is
//!   stopped, it kills the whole group (wrappers' grandchildren included),
//!   reaps it, and publishes why the connection is down. stderr is drained
//!   continuously; its last [`STDERR_TAIL`] bytes go into errors.
//! - **Size limit.** stdout is read through [`BoundedLines`]: a line (one
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
//!   ([`Repaired`]): serde_json refuses such a string, rmcp would drop the
//!   message, and the call it answers would wait its whole timeout.
//! - **`list_changed` in order.** [`BoundedLines`] counts each
//!   `notifications/tools/list_changed` line as it is read, before any
//!   later answer reaches rmcp ([`Listing::notified`]), so a call answered
//!   after the notification sees the list as stale (rmcp hands
//!   notifications to the handler on a task of their own, which may run
//!   after the answer was delivered).
//! - **Down.** [`Connection::down`] resolves once the connection has ended,
//!   with its [`Down`] cause; every pending request races it, so a crash
//!   fails them at once.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, NotificationContext, Peer, RequestContext, RoleClient,
    RunningService,
};
use rmcp::{ClientHandler, model};
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};
use tokio::sync::{mpsc, watch};

use super::McpError;
use super::config::{ServerConfig, Transport};
use super::era::{self, Era, Probing};
use super::lone_surrogates::Repaired;
use super::requests::{self, ServerRequests};
#[cfg(feature = "http")]
use super::streamable_http;
use codemode_base::process_group::ProcessGroup;

/// Bytes of a server's stderr kept for error messages.
pub const STDERR_TAIL: usize = 4096;

/// Deepest nesting of arrays and objects read in one message: serde_json's
/// recursion limit (128) less one, the deepest it parses.
pub const MAX_JSON_DEPTH: usize = 127;

/// How long the monitor waits for a process whose stdout closed to exit by
/// itself (so its exit status can be reported) before killing it.
const EXIT_GRACE: Duration = Duration::from_millis(200);

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

/// The last bytes of a stream, and whether it has ended.
#[derive(Default)]
pub(crate) struct Tail {
    bytes: Mutex<VecDeque<u8>>,
    done: AtomicBool,
}

impl Tail {
    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().expect("tail lock");
        bytes.extend(chunk);
        let excess = bytes.len().saturating_sub(STDERR_TAIL);
        bytes.drain(..excess);
    }

    /// The kept bytes as text (lossy).
    pub(crate) fn text(&self) -> String {
        let bytes = self.bytes.lock().expect("tail lock");
        let (a, b) = bytes.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }

    /// The tail once stderr has ended (or after a short wait).
    pub(crate) async fn settled(&self) -> String {
        for _ in 0..50 {
            if self.done.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.text()
    }
}

/// The rmcp client handler: identifies codemode, declares its
/// capabilities ([`requests::capabilities`]), answers the server's
/// `elicitation/create` and `roots/list` requests through the connection's
/// [`ServerRequests`], and forwards `notifications/tools/list_changed`.
/// Sampling is left to rmcp's default (`-32601 Method not found`).
pub(crate) struct Handler {
    list_changed: mpsc::UnboundedSender<()>,
    /// Where the notification is counted when no [`BoundedLines`] counts
    /// it (HTTP).
    count: Option<Arc<AtomicU64>>,
    requests: Arc<ServerRequests>,
    /// Whether `roots` is declared (the server's config).
    roots: bool,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(count) = &self.count {
            count.fetch_add(1, Ordering::AcqRel);
        }
        let _ = self.list_changed.send(());
    }

    async fn create_elicitation(
        &self,
        request: model::ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<model::ElicitResult, model::ErrorData> {
        let asker = self.requests.asker();
        Ok(asker.elicit(request, context.ct.cancelled_owned()).await)
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<model::ListRootsResult, model::ErrorData> {
        Ok(self.requests.asker().roots())
    }

    fn get_info(&self) -> model::ClientConfig {
        model::ClientConfig::new(
            requests::capabilities(self.roots),
            model::Implementation::new("codemode", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(era::INITIALIZE_VERSION)
    }
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

/// A connection's tool listing against the server's
/// `notifications/tools/list_changed`: how many arrived, which of them the
/// last listing covers, and the lock that keeps one listing in flight
/// (callers that need a fresh list while one runs wait for it instead of
/// listing again). Used by the pool (see `pool.rs`, "Listing").
#[derive(Default)]
pub(crate) struct Listing {
    /// `list_changed` notifications received.
    pub(crate) notified: Arc<AtomicU64>,
    /// The value of `notified` when the last finished listing started.
    pub(crate) applied: AtomicU64,
    /// Listings finished.
    pub(crate) completed: AtomicU64,
    /// Whether a notification may start a listing by itself: set when the
    /// connection starts and at each tool call, taken by each listing, so
    /// a server that answers every listing with `list_changed` gets at
    /// most one listing per call of its tools, not a loop.
    pub(crate) eager: AtomicBool,
    /// Held while listing.
    pub(crate) lock: tokio::sync::Mutex<()>,
}

impl Listing {
    /// Whether a notification arrived that the last listing does not cover.
    pub(crate) fn stale(&self) -> bool {
        self.notified.load(Ordering::Acquire) > self.applied.load(Ordering::Acquire)
    }
}

/// What a server's raw `tools/list` answers say that rmcp's typed ones
/// drop. First, the tools it declared task-only (`execution.taskSupport:
/// "required"`, MCP 2025-11-25 "Tasks"), seen in the raw messages of a
/// stdio server and in the events of an HTTP server's streamed (SSE)
/// answers (`streamable_http::SessionAware`): rmcp's `Tool` type does not
/// keep `execution`, so the pool could not otherwise tell such a tool from
/// one it can call. An HTTP answer sent as one JSON body is parsed before
/// codemode sees it; there such a tool stays listed (its call fails with
/// the server's error).
///
/// It also keeps the last `tools/list` page a stdio server sent, as sent
/// ([`ListingTap::take_tools_page`]): rmcp's typed page refuses a whole
/// answer for one tool without `inputSchema`.
#[derive(Clone, Default)]
pub(crate) struct ListingTap(Arc<Mutex<std::collections::HashSet<String>>>, Arc<Mutex<Option<ToolsPage>>>);

/// One `tools/list` page as sent: its tools and its next cursor.
pub(crate) type ToolsPage = (Vec<serde_json::Value>, Option<String>);

impl ListingTap {
    /// Whether `tool` was declared task-only.
    pub(crate) fn contains(&self, tool: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(tool)
    }

    /// The last `tools/list` page seen (its tools and next cursor), taken.
    pub(crate) fn take_tools_page(&self) -> Option<ToolsPage> {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Notes the task-only tools of one JSON-RPC message line (only lines
    /// that mention `"taskSupport"` are parsed), and keeps a `tools/list`
    /// page that has a tool without `inputSchema` (only lines that mention
    /// `"tools"` are parsed).
    pub(crate) fn scan(&self, line: &[u8]) {
        let task_support = memchr::memmem::find(line, b"\"taskSupport\"").is_some();
        if !task_support && memchr::memmem::find(line, b"\"tools\"").is_none() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else { return };
        let Some(tools) = message.pointer("/result/tools").and_then(serde_json::Value::as_array) else {
            return;
        };
        if tools.iter().any(|t| t.get("inputSchema").is_none()) {
            let cursor = message.pointer("/result/nextCursor").and_then(serde_json::Value::as_str);
            *self.1.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((tools.clone(), cursor.map(str::to_owned)));
        }
        if !task_support {
            return;
        }
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(serde_json::Value::as_str) {
                if tool.pointer("/execution/taskSupport").and_then(serde_json::Value::as_str)
                    == Some("required")
                {
                    set.insert(name.to_owned());
                } else {
                    set.remove(name);
                }
            }
        }
    }
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

impl Connection {
    /// Starts `server` and completes the MCP handshake within its startup
    /// timeout, in the era it speaks (see [`era`]): first the lifecycle
    /// `hint` (the era the schema cache remembers) suggests, then, if that
    /// handshake failed while the server was still there, the other one on
    /// a fresh process or HTTP connection. `workspace` is the root when no
    /// tool call is in flight.
    pub(crate) async fn start(
        server: &ServerConfig,
        limit: usize,
        hint: Option<Era>,
        workspace: Option<std::path::PathBuf>,
    ) -> Result<Started, McpError> {
        let deadline = tokio::time::Instant::now() + server.startup_timeout;
        let requests = ServerRequests::new(&server.name, server.roots, workspace);
        let first = Self::start_with(server, limit, era::first_lifecycle(hint), deadline, &requests).await;
        match first {
            Ok(started) => Ok(started),
            Err(Failed { error, retry: true }) if deadline > tokio::time::Instant::now() => {
                tracing::debug!(server = %server.name, "handshake failed ({error}); trying the other protocol era");
                Self::start_with(server, limit, era::second_lifecycle(hint), deadline, &requests)
                    .await
                    .map_err(|f| f.error)
            }
            Err(failed) => Err(failed.error),
        }
    }

    /// One start with `lifecycle`, finished by `deadline`.
    async fn start_with(
        server: &ServerConfig,
        limit: usize,
        lifecycle: ClientLifecycleMode,
        deadline: tokio::time::Instant,
        requests: &Arc<ServerRequests>,
    ) -> Result<Started, Failed> {
        let fatal = |error| Failed { error, retry: false };
        let (down_tx, down) = watch::channel(None);
        let down_tx = Arc::new(down_tx);
        // A start abandoned half-way (the call's future dropped at a
        // deadline, a cancel, Ctrl-C) must still end the process.
        let mut abandoned = StopOnDrop(Some(down_tx.clone()));
        let stderr = Arc::new(Tail::default());
        let (list_tx, list_changed) = mpsc::unbounded_channel();
        let listing = Listing::default();
        let stdio = matches!(server.transport, Transport::Stdio { .. });
        let handler = Handler {
            list_changed: list_tx,
            count: (!stdio).then(|| listing.notified.clone()),
            requests: requests.clone(),
            roots: server.roots,
        };
        let name = server.name.clone();
        // Set by the stdio arm; the HTTP arm leaves it (and without HTTP
        // every other arm returns).
        #[cfg_attr(not(feature = "http"), allow(unused_assignments))]
        let mut monitor = None;
        let listing_tap = ListingTap::default();
        let serving = match &server.transport {
            Transport::Stdio { command, args, env, cwd } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(INHERITED_ENV.iter().filter_map(|k| Some((*k, std::env::var_os(k)?))))
                    .envs(env)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                // A session of its own: no controlling terminal.
                codemode_base::process_group::in_new_session(&mut cmd);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                // The command as written (`${VAR}` unexpanded).
                let spawn_error = |message: String| McpError::Spawn {
                    server: name.clone(),
                    command: match &server.shown {
                        Transport::Stdio { command, .. } => command.clone(),
                        Transport::Http { .. } => String::new(),
                    },
                    message,
                };
                let mut child = cmd.spawn().map_err(|e| fatal(spawn_error(e.to_string())))?;
                let stdin = child.stdin.take().expect("piped stdin");
                let stdout = child.stdout.take().expect("piped stdout");
                let child_stderr = child.stderr.take().expect("piped stderr");
                let group = ProcessGroup::new(child, "mcp server", REAP_WAIT).ok_or_else(|| {
                    fatal(spawn_error("the process ended before it could be watched".into()))
                })?;
                tokio::spawn(drain(child_stderr, stderr.clone()));
                let closed = Arc::new(tokio::sync::Notify::new());
                let oversized = Arc::new(AtomicBool::new(false));
                let too_deep = Arc::new(AtomicBool::new(false));
                let stdout = BoundedLines {
                    too_deep: too_deep.clone(),
                    json: JsonDepth::default(),
                    list_changed: Some(listing.notified.clone()),
                    ..BoundedLines::new(Repaired::new(stdout), limit, oversized.clone(), closed.clone())
                }
                .tapped(listing_tap.clone());
                monitor =
                    Some(tokio::spawn(watch_process(group, down_tx.clone(), closed, [oversized, too_deep])));
                let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin);
                Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)) as Serving
            }
            #[cfg(not(feature = "http"))]
            Transport::Http { url, .. } => {
                return Err(fatal(McpError::ConnectRefused {
                    server: name,
                    reason: format!(
                        "{url} is a streamable HTTP server and this build of codemode has no HTTP client \
                         (the `http` feature of the codemode crate)"
                    ),
                }));
            }
            #[cfg(feature = "http")]
            Transport::Http { url, headers } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                ensure_tls_provider();
                // Checked when the config was read (Authorization included,
                // sent as written).
                let custom = headers
                    .iter()
                    .filter_map(|(key, value)| {
                        Some((
                            http::HeaderName::from_bytes(key.as_bytes()).ok()?,
                            http::HeaderValue::from_str(value).ok()?,
                        ))
                    })
                    .collect();
                let mut config = StreamableHttpClientTransportConfig::default();
                config.uri = url.as_str().into();
                config.custom_headers = custom;
                config.max_json_response_size = limit;
                config.max_sse_event_size = limit;
                // Bounded SSE reconnects; a rejected session renewed once.
                config.retry_config = streamable_http::reconnect_policy();
                // With a login for the URL, rmcp's AuthClient adds the
                // bearer token and refreshes it (src/mcp/oauth), inside the
                // session-aware wrapper.
                #[cfg(feature = "oauth")]
                let login = super::oauth::authorized_client(url, server).await.map_err(fatal)?;
                #[cfg(not(feature = "oauth"))]
                let login: Option<std::convert::Infallible> = None;
                match login {
                    #[cfg(feature = "oauth")]
                    Some(client) => {
                        let client = streamable_http::SessionAware(client, None).tapped(listing_tap.clone());
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)) as Serving
                    }
                    #[cfg(not(feature = "oauth"))]
                    Some(never) => match never {},
                    None => {
                        let client = streamable_http::client().tapped(listing_tap.clone());
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)) as Serving
                    }
                }
            }
        };
        let mut down_rx = down.clone();
        let outcome = tokio::select! {
            r = tokio::time::timeout_at(deadline, serving) => Some(r),
            () = async { let _ = down_rx.wait_for(Option::is_some).await; } => None,
        };
        let login_required = matches!(&outcome, Some(Ok(Err(e))) if super::oauth::needs_login(e));
        let failure = match outcome {
            Some(Ok(Ok(service))) => {
                let era =
                    service.peer().peer_info().map_or(Era::Legacy, |info| Era::of(&info.protocol_version));
                let connection = Connection {
                    era,
                    requests: requests.clone(),
                    server: name,
                    peer: service.peer().clone(),
                    service: Mutex::new(Some(service)),
                    down,
                    down_tx,
                    stderr,
                    limit,
                    monitor: Mutex::new(monitor),
                    started: tokio::time::Instant::now(),
                    listing_tap,
                    listing,
                };
                abandoned.0 = None;
                return Ok(Started { connection: Arc::new(connection), list_changed });
            }
            // Over HTTP: what happened on the wire, naming the URL.
            Some(Ok(Err(e))) => Some((
                match &server.shown {
                    #[cfg(feature = "http")]
                    Transport::Http { url, .. } => streamable_http::handshake_failure(&e, url),
                    #[cfg(not(feature = "http"))]
                    Transport::Http { .. } => None,
                    Transport::Stdio { .. } => None,
                }
                .unwrap_or_else(|| handshake_text(&e)),
                answered(&e),
            )),
            Some(Err(_)) => None,
            None => Some((String::new(), false)),
        };
        // A server that exits at once makes rmcp fail to write before the
        // exit is seen: give the exit a moment, so the error says how the
        // process ended rather than "broken pipe".
        if failure.is_some() && monitor.is_some() {
            let mut down_rx = down.clone();
            let _ = tokio::time::timeout(EXIT_GRACE, down_rx.wait_for(Option::is_some)).await;
        }
        // Failed: end the process, then describe what happened. (A
        // process stopped here is `Down::Stopped`; one that ended by itself
        // is `Down::Ended`.)
        let _ = down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
        if let Some(monitor) = monitor.take() {
            let _ = monitor.await;
        }
        let cause = down.borrow().clone();
        let stderr = stderr.settled().await;
        Err(match (failure, cause) {
            _ if login_required => fatal(McpError::LoginRequired { server: name }),
            (_, Some(Down::TooLarge)) => {
                fatal(McpError::MessageTooLarge { server: name, limit_bytes: limit })
            }
            (_, Some(Down::TooDeep)) => fatal(McpError::TooDeep { server: name, limit: MAX_JSON_DEPTH }),
            (None, _) => {
                fatal(McpError::StartupTimeout { server: name, timeout: server.startup_timeout, stderr })
            }
            // The server answered, but not as this lifecycle wants: the
            // other one may work (the process may have ended since, when
            // rmcp closed its stdin).
            (Some((message, true)), _) => {
                Failed { error: McpError::Initialize { server: name, message, stderr }, retry: true }
            }
            // How the process ended says more than the transport's error.
            (Some(_), Some(Down::Ended(cause))) => {
                fatal(McpError::Initialize { server: name, message: cause, stderr })
            }
            (Some((message, false)), _) => fatal(McpError::Initialize { server: name, message, stderr }),
        })
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

/// Whether a failed handshake got an answer from the server (an error, or
/// a result of the wrong kind), so the other lifecycle may work: not a
/// transport failure, a cancel, or an authorization refusal.
fn answered(error: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as E;
    matches!(
        error,
        E::JsonRpcError(_)
            | E::ExpectedInitResult(_)
            | E::ExpectedInitResponse(_)
            | E::ConflictInitResponseId(..)
            | E::UncorrelatedErrorResponse { .. }
            | E::NoCompatibleProtocolVersion { .. }
    ) && !error.is_authorization_required()
}

/// A failed handshake in words; a failed probe and fallback name both.
fn handshake_text(error: &rmcp::service::ClientInitializeError) -> String {
    match error {
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            format!(
                "server/discover failed ({}), then initialize failed ({})",
                error_text(&**discover),
                error_text(&**fallback)
            )
        }
        other => error_text(other),
    }
}

/// `error` and its sources as one line, without the Rust type names rmcp
/// puts in its messages (`Transport [rmcp::transport::...<...>] error`).
pub(crate) fn error_text(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = without_type_names(&e.to_string());
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// `text` without bracketed Rust paths (`[a::b<c>]`).
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let tail = &rest[open..];
        // The matching `]` (type names nest `<...>` and `[...]`).
        let mut depth = 0usize;
        let close = tail.char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
            None
        });
        match close {
            Some(close) if tail[..close].contains("::") => {
                out.push_str(rest[..open].trim_end());
                rest = &tail[close + 1..];
            }
            _ => {
                out.push_str(&rest[..open + 1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
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

#[cfg(feature = "http")]
/// Installs rustls' ring provider as the process default, unless one is
/// installed already (reqwest is built without a provider of its own).
pub(crate) fn ensure_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Reads `stderr` into `tail` until it ends.
async fn drain(mut stderr: tokio::process::ChildStderr, tail: Arc<Tail>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.push(&buf[..n]);
    }
    tail.done.store(true, Ordering::Release);
}

/// Owns the process group: ends it when the child exits, stdout closes or
/// the connection is stopped, and publishes the cause.
async fn watch_process(
    mut group: ProcessGroup,
    down_tx: Arc<watch::Sender<Option<Down>>>,
    closed: Arc<tokio::sync::Notify>,
    [oversized, too_deep]: [Arc<AtomicBool>; 2],
) {
    let mut down = down_tx.subscribe();
    let status = tokio::select! {
        status = group.child().wait() => status.ok(),
        () = closed.notified() => {
            // stdout ended: give the process a moment to exit by itself.
            tokio::time::timeout(EXIT_GRACE, group.child().wait()).await.ok().and_then(Result::ok)
        }
        () = async { let _ = down.wait_for(Option::is_some).await; } => None,
    };
    if status.is_some() {
        // It exited: whatever it left in its group dies with it.
        group.kill();
    } else {
        // Shut down while running: SIGTERM, so it can end its own children,
        // then SIGKILL after the grace period.
        let _ = group.terminate().await;
    }
    let _ = group.child().wait().await;
    group.reap().await;
    let cause = if oversized.load(Ordering::Acquire) {
        Down::TooLarge
    } else if too_deep.load(Ordering::Acquire) {
        Down::TooDeep
    } else {
        match status {
            Some(status) => Down::Ended(describe(status)),
            None => Down::Ended("it closed its stdout".into()),
        }
    };
    down_tx.send_if_modified(|d| set_once(d, cause));
}

/// `exited with status 3` / `was killed by signal 9`.
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("the process exited with status {code}"),
        (None, Some(signal)) => format!("the process was killed by signal {signal}"),
        _ => "the process ended".into(),
    }
}

/// A child's stdout that ends (EOF) when one line exceeds `limit` bytes
/// or nests deeper than [`MAX_JSON_DEPTH`], and says so; it also signals
/// when the stream ends for any reason.
struct BoundedLines<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far.
    line: usize,
    oversized: Arc<AtomicBool>,
    /// Set when a line nested too deeply ended the stream.
    too_deep: Arc<AtomicBool>,
    /// Where the current line's JSON nesting stands.
    json: JsonDepth,
    closed: Arc<tokio::sync::Notify>,
    ended: bool,
    /// Where whole lines go ([`ListingTap::scan`]), and the current line
    /// so far.
    tap: Option<(ListingTap, Vec<u8>)>,
    /// Counts the `notifications/tools/list_changed` lines (needs the tap).
    list_changed: Option<Arc<AtomicU64>>,
}

impl<R> BoundedLines<R> {
    fn new(inner: R, limit: usize, oversized: Arc<AtomicBool>, closed: Arc<tokio::sync::Notify>) -> Self {
        BoundedLines {
            inner,
            limit,
            line: 0,
            oversized,
            too_deep: Arc::default(),
            json: JsonDepth::default(),
            closed,
            ended: false,
            tap: None,
            list_changed: None,
        }
    }

    fn tapped(self, tap: ListingTap) -> Self {
        BoundedLines { tap: Some((tap, Vec::new())), ..self }
    }

    /// A whole line was read: show it to the tap, count a `list_changed`.
    fn line_done(&mut self, line: &[u8]) {
        self.line = 0;
        self.json = JsonDepth::default();
        let Some((tap, pending)) = &mut self.tap else { return };
        pending.extend_from_slice(line);
        tap.scan(pending);
        if let Some(count) = &self.list_changed
            && is_list_changed(pending)
        {
            count.fetch_add(1, Ordering::AcqRel);
        }
        pending.clear();
    }
}

/// Whether `line` is a `notifications/tools/list_changed` notification.
fn is_list_changed(line: &[u8]) -> bool {
    const METHOD: &[u8] = b"notifications/tools/list_changed";
    memchr::memmem::find(line, METHOD).is_some()
        && serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|m| {
            m.get("method").and_then(serde_json::Value::as_str).map(str::as_bytes) == Some(METHOD)
                && m.get("id").is_none()
        })
}

/// The nesting of arrays and objects at a point of a JSON text, strings
/// skipped (enough to bound the depth; the text is not validated).
#[derive(Default, Clone, Copy)]
struct JsonDepth {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonDepth {
    /// Takes one byte; returns the depth after it.
    fn push(&mut self, b: u8) -> usize {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
        } else {
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => self.depth += 1,
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        self.depth
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                if fresh.is_empty() {
                    this.ended = true;
                    this.closed.notify_one();
                    return Poll::Ready(Ok(()));
                }
                let mut last_newline = None;
                for (i, &b) in fresh.iter().enumerate() {
                    if b == b'\n' {
                        this.line_done(&fresh[last_newline.map_or(0, |n| n + 1)..i]);
                        last_newline = Some(i);
                    } else {
                        this.line += 1;
                        let too_deep = this.json.push(b) > MAX_JSON_DEPTH;
                        if too_deep {
                            this.too_deep.store(true, Ordering::Release);
                        }
                        if this.line > this.limit || too_deep {
                            this.oversized.store(!too_deep, Ordering::Release);
                            this.ended = true;
                            this.closed.notify_one();
                            // Keep the whole lines before the oversized one.
                            buf.set_filled(before + last_newline.map_or(0, |n| n + 1));
                            return Poll::Ready(Ok(()));
                        }
                    }
                }
                if let Some((_, pending)) = &mut this.tap {
                    pending.extend_from_slice(&fresh[last_newline.map_or(0, |n| n + 1)..]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                this.ended = true;
                this.closed.notify_one();
                Poll::Ready(Err(e))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_lines_end_the_stream_on_an_oversized_line() {
        let data: &[u8] = b"short\nthis line is far too long\nnever read\n";
        let oversized = Arc::new(AtomicBool::new(false));
        let mut reader = BoundedLines::new(data, 10, oversized.clone(), Arc::new(tokio::sync::Notify::new()));
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert!(oversized.load(Ordering::Acquire));
        assert_eq!(out, b"short\n");
    }

    #[tokio::test]
    async fn the_tap_notes_task_only_tools_across_reads() {
        let listing = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b","execution":{"taskSupport":"optional"}},{"name":"c"}]}}"#;
        let mut data = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".to_vec();
        data.extend_from_slice(listing);
        data.push(b'\n');
        data.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n");
        let tap = ListingTap::default();
        // One byte per read, so every line spans many reads.
        let inner = tokio_test_reader(data.clone());
        let count = Arc::new(AtomicU64::new(0));
        let mut reader = BoundedLines {
            list_changed: Some(count.clone()),
            ..BoundedLines::new(inner, 1 << 20, Arc::default(), Arc::new(tokio::sync::Notify::new()))
        }
        .tapped(tap.clone());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
        assert!(tap.contains("a") && !tap.contains("b") && !tap.contains("c"));
        assert_eq!(count.load(Ordering::Acquire), 1);
    }

    #[tokio::test]
    async fn a_line_nested_too_deeply_ends_the_stream() {
        let ok = format!("{}{}", "[".repeat(MAX_JSON_DEPTH), "]".repeat(MAX_JSON_DEPTH));
        // Brackets inside strings (escaped quotes too) do not count.
        let quoted = format!("{{\"s\": \"\\\"{}\"}}", "[".repeat(500));
        let deep = format!("{}{}", "[".repeat(MAX_JSON_DEPTH + 1), "]".repeat(MAX_JSON_DEPTH + 1));
        let data = format!("{ok}\n{quoted}\n{deep}\nnever read\n").into_bytes();
        let mut reader = BoundedLines::new(&data[..], 1 << 20, Arc::default(), Arc::default());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert!(reader.too_deep.load(Ordering::Acquire));
        assert!(!reader.oversized.load(Ordering::Acquire));
        assert_eq!(out, format!("{ok}\n{quoted}\n").into_bytes());
    }

    /// A reader that gives one byte per read.
    fn tokio_test_reader(data: Vec<u8>) -> impl AsyncRead + Unpin {
        struct OneByte(std::collections::VecDeque<u8>);
        impl AsyncRead for OneByte {
            fn poll_read(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<std::io::Result<()>> {
                if let Some(b) = self.0.pop_front() {
                    buf.put_slice(&[b]);
                }
                Poll::Ready(Ok(()))
            }
        }
        OneByte(data.into())
    }

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let tail = Tail::default();
        tail.push(&vec![b'a'; STDERR_TAIL]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("aend"));
    }
}

#[cfg(test)]
mod error_text_tests {
    use super::*;

    #[test]
    fn rust_type_names_are_taken_out_of_messages() {
        let raw = "Send message error Transport [rmcp::transport::async_rw::AsyncRwTransport<RoleClient, BoundedLines<tokio::process::ChildStdout>, [u8; 4]>] error: Broken pipe";
        assert_eq!(without_type_names(raw), "Send message error Transport error: Broken pipe");
        assert_eq!(without_type_names("keep [this] and [a, b]"), "keep [this] and [a, b]");
        assert_eq!(without_type_names("open [ never closed"), "open [ never closed");
    }

    #[test]
    fn sources_are_joined_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "client error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"));
        assert_eq!(error_text(&e), "client error: connection refused");
    }
}
