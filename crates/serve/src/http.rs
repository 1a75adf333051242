//! `codemode mcp serve --http ADDR`: MCP over streamable HTTP (MCP
//! 2025-11-25 and 2026-07-28, basic/transports, "Streamable HTTP"); see
//! docs/SERVE.md, "HTTP".
//!
//! One endpoint, [`ENDPOINT`], served by rmcp's [`StreamableHttpService`]
//! under hyper's HTTP/1.1 server. Both protocol eras: `initialize` opens a
//! session (`Mcp-Session-Id`) for a 2025-11-25 client; a 2026-07-28 request
//! (`server/discover`, or any request whose `_meta` names the version and
//! the client's capabilities) is served on its own, without a session.
//!
//! Protections, in the order a request meets them (docs/SECURITY.md):
//! the path must be [`ENDPOINT`]; when a bearer token is set, the request
//! must carry it (`Authorization: Bearer`, RFC 6750; compared in constant
//! time) or gets 401 with `WWW-Authenticate: Bearer`; the `Host` header must
//! name loopback or an allowed host and a browser's `Origin` must be a
//! loopback or allowed origin (DNS rebinding, MCP basic/transports,
//! "Security Warning"), else 403; a body above [`MAX_BODY_BYTES`] gets 413.
//!
//! Upstream MCP servers live as long as the engine that started them (or
//! until idle past the engine's `idle_stop`): the shared engine (2026-07-28
//! requests) for the life of the process; with an [`EngineFactory`], each
//! 2025-11-25 session gets its own engine on its first tool call, whose MCP
//! servers end when the session closes or ends idle (sessions.rs).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use tokio_util::sync::CancellationToken;

use super::sessions::{SESSION_IDLE, Tracked};
use super::{CodeModeServer, ServeError};
use codemode::Engine;

/// The path of the MCP endpoint; every other path answers 404.
pub const ENDPOINT: &str = "/mcp";

/// The largest request body accepted, in bytes (4 MiB, rmcp's default):
/// room for a large `{batch}` or a program carrying file contents; a
/// larger body gets 413 before it is parsed.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The most 2025-11-25 sessions kept at once by default. A session lives
/// until its client closes it (`DELETE`) or it stays idle
/// ([`HttpOptions::session_idle`]), and clients that leave without closing
/// are common: without a bound, a client on loopback opening sessions in a
/// loop grew the server without end (found by the `serve_http_request`
/// fuzz target). At the bound the session idle longest ends to make room.
pub const MAX_SESSIONS: usize = 1000;

/// The fewest bytes a bearer token may have.
pub const TOKEN_MIN_BYTES: usize = 16;

/// How long a stopping server waits for runs in flight to save their
/// receipts, and for connections to close, before it ends anyway.
const DRAIN: Duration = Duration::from_secs(30);

/// How long a stopping server lets answers already written reach their
/// clients before it ends the streams still open.
const STREAM_GRACE: Duration = Duration::from_secs(1);

/// Builds an engine the same way the shared one was built (same workspace,
/// policy, MCP configuration and journal store), for one 2025-11-25
/// session. Called on a blocking thread. Errors are a sentence for the
/// client.
pub type EngineFactory = Arc<dyn Fn() -> Result<Engine, String> + Send + Sync>;

/// How the HTTP server listens and whom it serves.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The address to listen on; port 0 picks a free port
    /// ([`HttpServer::local_addr`] tells which).
    pub addr: SocketAddr,
    /// The bearer token every request must carry (`Authorization: Bearer
    /// TOKEN`), at least [`TOKEN_MIN_BYTES`] bytes. Required when `addr` is
    /// not loopback. Default: none.
    pub token: Option<String>,
    /// Names (or `name:port`) accepted in the `Host` header besides
    /// `localhost`, `127.0.0.1`, `::1` and the bound address. Default: none.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port|:*]`) accepted in the `Origin`
    /// header besides loopback ones. Requests without `Origin` (not from a
    /// browser) are not affected. Default: none.
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes. Default: [`MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// The most 2025-11-25 sessions open at once; an `initialize` at the
    /// bound ends the session idle longest (no tool call in flight, no run
    /// of its own going) to make room, and gets 503 with `Retry-After`,
    /// naming the bound, only when every session is busy. 2026-07-28
    /// requests open no session and are not counted. Default:
    /// [`MAX_SESSIONS`].
    pub max_sessions: usize,
    /// How long a 2025-11-25 session may stay idle (no message, no tool
    /// call in flight, no run of its own going) before it ends, with its
    /// engine and upstream MCP servers; its next request gets 404. Checked
    /// every quarter of it (at least every 50 ms, at most every 30 s).
    /// Default: [`SESSION_IDLE`] (5 minutes).
    pub session_idle: Duration,
    /// Gives each 2025-11-25 session its own engine (and so its own
    /// upstream MCP servers). Default: none, every session shares the
    /// server's engine.
    pub session_engines: Option<EngineFactory>,
}

impl HttpOptions {
    /// Options listening on `addr`, every other field at its default.
    pub fn new(addr: SocketAddr) -> HttpOptions {
        HttpOptions {
            addr,
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: MAX_BODY_BYTES,
            max_sessions: MAX_SESSIONS,
            session_idle: SESSION_IDLE,
            session_engines: None,
        }
    }
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_sessions", &self.max_sessions)
            .field("session_idle", &self.session_idle)
            .field("session_engines", &self.session_engines.is_some())
            .finish()
    }
}

/// A bound HTTP server; [`HttpServer::run`] serves until told to stop.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    front: Arc<Front>,
    shared: CodeModeServer,
    sessions: Arc<Sessions>,
    /// The 2025-11-25 sessions, swept for idle ones while serving.
    tracked: Arc<Tracked>,
    session_idle: Duration,
    inflight: Arc<tokio::sync::RwLock<()>>,
    /// Cancels the runs in flight.
    stop: CancellationToken,
    /// Ends rmcp's sessions and streams (after the runs answered).
    close: CancellationToken,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl CodeModeServer {
    /// Binds the HTTP server of `options`; nothing is served until
    /// [`HttpServer::run`].
    ///
    /// # Errors
    /// [`ServeError::Config`]: the address is beyond loopback and no token
    /// was given, or the token is shorter than [`TOKEN_MIN_BYTES`];
    /// [`ServeError::Transport`]: the address could not be bound.
    pub async fn bind_http(self, options: HttpOptions) -> Result<HttpServer, ServeError> {
        let token = check_token(&options)?;
        let listener = tokio::net::TcpListener::bind(options.addr)
            .await
            .map_err(|e| ServeError::Transport(format!("could not listen on {}: {e}", options.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| ServeError::Transport(format!("could not read the bound address: {e}")))?;
        let stop = CancellationToken::new();
        let close = CancellationToken::new();
        let sessions = Arc::new(Sessions {
            factory: options.session_engines.clone(),
            live: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        });
        let inflight = Arc::new(tokio::sync::RwLock::new(()));
        // rmcp's own clock ends a session after this long without a
        // message, busy or not: kept as the outer bound, longer than any
        // run. Idle sessions end much sooner (sessions.rs).
        let mut sessions_config =
            rmcp::transport::streamable_http_server::session::local::SessionConfig::default();
        sessions_config.keep_alive =
            Some(session_idle(self.engine().limits().deadline, self.options().approval_timeout));
        let mut manager = LocalSessionManager::default();
        manager.session_config = sessions_config;
        let tracked = Arc::new(Tracked::new(manager));
        let gateway = Gateway {
            tracked: tracked.clone(),
            shared: self.clone(),
            sessions: sessions.clone(),
            own: Arc::new(tokio::sync::OnceCell::new()),
            inflight: inflight.clone(),
            stop: stop.clone(),
        };
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .with_json_response(true)
            .with_allowed_hosts(allowed_hosts(&options, addr))
            .with_allowed_origins(allowed_origins(&options))
            .enforce_origin_validation()
            .with_max_request_body_bytes(options.max_body_bytes)
            .with_cancellation_token(close.clone());
        let service = StreamableHttpService::new(move || Ok(gateway.fresh()), tracked.clone(), config);
        let sessions_bound = SessionsBound { tracked: tracked.clone(), max: options.max_sessions };
        Ok(HttpServer {
            listener,
            addr,
            front: Arc::new(Front { service, token, sessions: sessions_bound }),
            shared: self,
            sessions,
            tracked,
            session_idle: options.session_idle,
            inflight,
            stop,
            close,
        })
    }
}

impl HttpServer {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8080/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{ENDPOINT}", self.addr)
    }

    /// Serves until `shutdown` completes; then stops accepting, cancels the
    /// runs in flight (their receipts are saved and their answers sent),
    /// closes sessions and connections (waiting at most 30 s for each), and
    /// ends every upstream MCP server's process group.
    ///
    /// # Errors
    /// None today; the result leaves room for transport failures.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let graceful = GracefulShutdown::new();
        let sweeping = tokio::spawn(sweep_sessions(self.tracked.clone(), self.session_idle));
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            // Out of descriptors and the like: wait, then go on.
                            tracing::warn!("codemode mcp serve: accepting a connection failed: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let connection = graceful.watch(self.connection(stream));
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(self.listener);
        sweeping.abort();
        // Runs in flight stop, save their receipts and answer; then the
        // sessions and streams end, and the connections close.
        self.stop.cancel();
        let _ = tokio::time::timeout(DRAIN, self.inflight.write()).await;
        super::saves::wait_all(DRAIN).await;
        // Connections close once their answers are out; streams that never
        // end by themselves (a session's GET stream) are ended after a grace.
        let drained = graceful.shutdown();
        tokio::pin!(drained);
        tokio::select! {
            () = &mut drained => {}
            () = tokio::time::sleep(STREAM_GRACE) => {
                self.close.cancel();
                let _ = tokio::time::timeout(DRAIN, drained).await;
            }
        }
        self.close.cancel();
        self.shared.engine().shutdown_mcp().await;
        for engine in self.sessions.drain() {
            engine.shutdown_mcp().await;
        }
        Ok(())
    }
}

impl HttpServer {
    /// One HTTP/1.1 connection over `io` served by the front (path, bearer
    /// token, then rmcp's service): what the accept loop runs for each
    /// connection, and the fuzz target `serve_http_request` over an
    /// in-memory stream.
    pub(crate) fn connection<I>(
        &self,
        io: I,
    ) -> impl hyper_util::server::graceful::GracefulConnection + Send + 'static
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let front = self.front.clone();
        let service = hyper::service::service_fn(move |request| {
            let front = front.clone();
            async move { Ok::<_, Infallible>(front.handle(request).await) }
        });
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service)
    }
}

/// The token's SHA-256, or none; refuses a missing token beyond loopback
/// and a short one.
fn check_token(options: &HttpOptions) -> Result<Option<[u8; 32]>, ServeError> {
    match options.token.as_deref().map(str::trim) {
        None | Some("") if !options.addr.ip().is_loopback() => Err(ServeError::Config(format!(
            "{} is reachable beyond this machine, so a bearer token is required: put one in a file and pass \
             --token-file FILE, or set $CODEMODE_SERVE_TOKEN (e.g. `head -c 32 /dev/urandom | base64 > token`); \
             clients send it as `Authorization: Bearer TOKEN`",
            options.addr
        ))),
        None | Some("") => Ok(None),
        Some(token) if token.len() < TOKEN_MIN_BYTES => Err(ServeError::Config(format!(
            "the bearer token has {} bytes; it needs at least {TOKEN_MIN_BYTES} (e.g. `head -c 32 /dev/urandom | \
             base64 > token`)",
            token.len()
        ))),
        Some(token) => Ok(Some(Sha256::digest(token.as_bytes()).into())),
    }
}

/// `Host` values accepted: loopback names, the bound address when it is a
/// specific one, and the allowed hosts.
fn allowed_hosts(options: &HttpOptions, bound: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !bound.ip().is_unspecified() && !bound.ip().is_loopback() {
        hosts.push(bound.ip().to_string());
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    hosts
}

/// `Origin` values accepted: loopback origins on any port, and the allowed
/// origins.
fn allowed_origins(options: &HttpOptions) -> Vec<String> {
    let mut origins = Vec::new();
    for scheme in ["http", "https"] {
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            origins.push(format!("{scheme}://{host}:*"));
        }
    }
    origins.extend(options.allowed_origins.iter().cloned());
    origins
}

/// What every HTTP request meets first: the path and the bearer token,
/// then rmcp's service (Host, Origin, body size, MCP).
struct Front {
    service: StreamableHttpService<Gateway, Tracked>,
    /// SHA-256 of the bearer token, when one is required.
    token: Option<[u8; 32]>,
    sessions: SessionsBound,
}

/// Ends the sessions idle for `idle`, every quarter of it, until aborted.
async fn sweep_sessions(tracked: Arc<Tracked>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        if tracked.sweep(idle).await > 0 {
            codemode_base::memory::give_back();
        }
    }
}

/// The bound on 2025-11-25 sessions open at once.
struct SessionsBound {
    tracked: Arc<Tracked>,
    max: usize,
}

impl SessionsBound {
    /// When `request` would open one more session than the bound (a
    /// `POST` without `Mcp-Session-Id` of a client of 2025-11-25 or older:
    /// its `initialize`; rmcp refuses any other such request), ends the
    /// session idle longest to make room, or answers 503 when every session
    /// is busy. Checked before rmcp reads the body, so initializes arriving
    /// at once may pass the bound by their number.
    async fn refusal(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let headers = request.headers();
        let modern = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        if request.method() != hyper::Method::POST || headers.contains_key("mcp-session-id") || modern {
            return None;
        }
        if self.tracked.make_room(self.max).await {
            return None;
        }
        let open = self.tracked.open().await;
        {
            let mut response = plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Service Unavailable: codemode mcp serve has {open} sessions open, the most it keeps \
                     (--max-sessions {}), and every one is running a tool call or a run; retry when one \
                     ends, or close sessions you no longer use (DELETE with their Mcp-Session-Id)",
                    self.max,
                ),
            );
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
            Some(response)
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

impl Front {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != ENDPOINT {
            return plain(
                StatusCode::NOT_FOUND,
                format!("Not Found: the MCP endpoint of codemode mcp serve is {ENDPOINT}"),
            );
        }
        if let Some(expected) = &self.token {
            match bearer(request.headers()) {
                Some(given) if bool::from(Sha256::digest(given.as_bytes()).ct_eq(expected)) => {}
                given => return unauthorized(given.is_some()),
            }
        }
        if let Some(refused) = self.sessions.refusal(&request).await {
            return refused;
        }
        self.service.handle(request).await
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme is
/// case-insensitive, RFC 9110 section 11.1).
fn bearer(headers: &hyper::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// 401 with `WWW-Authenticate: Bearer` (RFC 6750 section 3; `invalid_token`
/// when a token was sent).
fn unauthorized(sent: bool) -> Response<Body> {
    let challenge =
        if sent { r#"Bearer realm="codemode", error="invalid_token""# } else { r#"Bearer realm="codemode""# };
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "Unauthorized: send `Authorization: Bearer TOKEN` with the token codemode mcp serve was given \
         (--token-file or $CODEMODE_SERVE_TOKEN)"
            .to_owned(),
    );
    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static(challenge));
    response
}

/// A text/plain answer.
fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// The per-session engines alive now, to end their MCP servers when the
/// process stops.
struct Sessions {
    factory: Option<EngineFactory>,
    live: Mutex<HashMap<u64, Engine>>,
    next: AtomicU64,
}

impl Sessions {
    fn drain(&self) -> Vec<Engine> {
        self.live.lock().map(|mut live| live.drain().map(|(_, e)| e).collect()).unwrap_or_default()
    }
}

/// One 2025-11-25 session's own server; dropped with the session (closed
/// by the client, expired, or the server stopping), which ends its engine's
/// MCP servers.
struct SessionServer {
    server: CodeModeServer,
    id: u64,
    sessions: Arc<Sessions>,
}

impl Drop for SessionServer {
    fn drop(&mut self) {
        let engine = self.sessions.live.lock().ok().and_then(|mut live| live.remove(&self.id));
        if let (Some(engine), Ok(runtime)) = (engine, tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                engine.shutdown_mcp().await;
                drop(engine);
                codemode_base::memory::give_back();
            });
        }
    }
}

/// How long a 2025-11-25 session may go without a message before rmcp ends
/// it, busy or not (the outer bound; idle sessions end sooner, see
/// [`HttpOptions::session_idle`]). rmcp counts a session idle while one of
/// its requests runs, so this outlasts the longest run:
/// the deadline plus ten approvals waited to their timeout (the person's
/// time is not the run's), and a minute; at least rmcp's default of five
/// minutes, at most a day.
fn session_idle(deadline: Duration, approval_timeout: Duration) -> Duration {
    (deadline + approval_timeout * 10 + Duration::from_secs(60))
        .clamp(Duration::from_secs(300), Duration::from_secs(86_400))
}

/// The MCP handler rmcp makes one of per session (and per stateless
/// request): 2026-07-28 requests go to the shared server; a 2025-11-25
/// session's tool calls go to its own server when sessions get engines.
/// Every tool call is also cancelled when the server stops.
#[derive(Clone)]
struct Gateway {
    shared: CodeModeServer,
    /// The sessions' use: each tool call marks its session busy.
    tracked: Arc<Tracked>,
    sessions: Arc<Sessions>,
    /// This session's own server, made on its first tool call.
    own: Arc<tokio::sync::OnceCell<SessionServer>>,
    /// Held shared by each tool call; the stopping server takes it whole.
    inflight: Arc<tokio::sync::RwLock<()>>,
    stop: CancellationToken,
}

impl Gateway {
    /// A handler for a new session or request.
    fn fresh(&self) -> Gateway {
        Gateway { own: Arc::new(tokio::sync::OnceCell::new()), ..self.clone() }
    }

    /// The server that runs this request's tool calls, and whether it is
    /// this session's own.
    async fn server_for(&self, cx: &RequestContext<RoleServer>) -> Result<(CodeModeServer, bool), McpError> {
        let Some(factory) = self.sessions.factory.clone() else { return Ok((self.shared.clone(), false)) };
        if super::is_modern(cx) {
            return Ok((self.shared.clone(), false));
        }
        let own = self
            .own
            .get_or_try_init(|| async {
                let engine = tokio::task::spawn_blocking(move || factory())
                    .await
                    .map_err(|e| format!("the engine could not be built: {e}"))??;
                let server = CodeModeServer::new(engine.clone(), self.shared.options().clone())
                    .map_err(|e| e.to_string())?;
                let id = self.sessions.next.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut live) = self.sessions.live.lock() {
                    live.insert(id, engine);
                }
                Ok::<_, String>(SessionServer { server, id, sessions: self.sessions.clone() })
            })
            .await
            .map_err(|e| {
                McpError::internal_error(format!("could not start this session's engine: {e}"), None)
            })?;
        Ok((own.server.clone(), true))
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        self.shared.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.shared.list_tools(request, context).await
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.ping(context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if self.stop.is_cancelled() {
            return Err(McpError::internal_error("codemode mcp serve is stopping; nothing was run", None));
        }
        // The session is busy from here until the call ends (and, with its
        // own server, while that server holds runs going): building its
        // engine on a loaded machine can take longer than the idle time.
        let busy = session_id(&context).map(|id| self.tracked.busy(id));
        let _running = self.inflight.clone().read_owned().await;
        if self.stop.is_cancelled() {
            return Err(McpError::internal_error("codemode mcp serve is stopping; nothing was run", None));
        }
        // Cancelled by the client's cancellation or by the server stopping;
        // ended with this call.
        let _end = super::handler::link_cancellation(&mut context, &self.stop);
        let (server, own) = self.server_for(&context).await?;
        if let (Some(busy), true) = (&busy, own) {
            busy.own(server.clone());
        }
        server.call_tool(request, context).await
    }
}

/// The `Mcp-Session-Id` of the request `cx`, when it has one.
fn session_id(cx: &RequestContext<RoleServer>) -> Option<SessionId> {
    let parts = cx.extensions.get::<::http::request::Parts>()?;
    parts.headers.get("mcp-session-id")?.to_str().ok().map(SessionId::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn a_session_outlasts_its_longest_run() {
        let s = |secs| Duration::from_secs(secs);
        assert_eq!(session_idle(s(60), s(300)), s(60 + 3000 + 60));
        assert_eq!(session_idle(s(1), s(1)), s(300), "at least rmcp's default");
        assert_eq!(session_idle(s(86_400), s(300)), s(86_400), "at most a day");
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_other_schemes_are_not_bearer() {
        assert_eq!(bearer(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&headers("Bearer")), None);
        assert_eq!(bearer(&hyper::HeaderMap::new()), None);
    }

    #[test]
    fn beyond_loopback_a_token_is_required_and_short_ones_are_refused() {
        let mut options = HttpOptions::new("0.0.0.0:0".parse().unwrap());
        let refused = check_token(&options).unwrap_err().to_string();
        assert!(refused.contains("--token-file") && refused.contains("CODEMODE_SERVE_TOKEN"), "{refused}");
        options.token = Some("short".into());
        assert!(check_token(&options).unwrap_err().to_string().contains("at least 16"));
        options.token = Some("0123456789abcdef0123".into());
        assert!(check_token(&options).unwrap().is_some());
        let loopback = HttpOptions::new("127.0.0.1:0".parse().unwrap());
        assert!(check_token(&loopback).unwrap().is_none());
    }
}
