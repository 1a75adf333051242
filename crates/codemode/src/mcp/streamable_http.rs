//! Streamable HTTP: what codemode adds to rmcp's client transport so that a
//! lost server fails a call within seconds and says what happened.
//!
//! - **Bounded reconnects.** [`reconnect_policy`]: an SSE stream that breaks
//!   (the response stream of a call, or the session's GET stream) is
//!   resumed with `Last-Event-ID` at most [`RECONNECT_ATTEMPTS`] times (at
//!   once, then after 1 s and after 2 s, or after the server's `retry:`
//!   interval when that is longer), then given up. rmcp's default policy retries forever, which left a call
//!   to a killed server waiting for its whole timeout.
//! - **Session loss.** [`SessionAware`] wraps the HTTP client: a request
//!   sent with a session id that the server rejects as a whole (HTTP 404,
//!   which rmcp already reads as "session expired", or an error without a
//!   request id that names the session, as the TypeScript SDK's examples
//!   answer with HTTP 400) is reported to rmcp as an expired session. rmcp
//!   then opens a new session once (a new `initialize` handshake) and sends
//!   that request again once: the server refused it unread, so it did not
//!   run. Any other error without a request id fails the request instead of
//!   leaving it unanswered.
//! - **What happened on the wire.** [`lost`] turns a failed request into a
//!   sentence ("cannot connect to URL (connection refused): is the server
//!   running? check the server's `url` ...", "the server at URL closed the stream before answering", "HTTP
//!   502 from URL") and says whether the connection is gone.
//!
//! Spec: MCP 2025-11-25, Transports, "Streamable HTTP" (session management:
//! a 404 to a request carrying `Mcp-Session-Id` means the session ended and
//! the client must start a new one; resumability with `Last-Event-ID`).

use super::connection::ListingTap;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::ServiceError;
use rmcp::transport::common::client_side_sse::{ExponentialBackoff, SseRetryPolicy};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// How many times a broken SSE stream is reconnected before the request
/// waiting on it fails.
pub const RECONNECT_ATTEMPTS: usize = 3;

/// The first wait between reconnects; it doubles (1 s, 2 s).
const RECONNECT_BASE: Duration = Duration::from_millis(500);

/// The longest wait between reconnects codemode chooses (a server's
/// `retry:` field can ask for longer; rmcp honours it).
const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// Redirects followed for one request (same origin, 307/308 only).
const MAX_REDIRECTS: usize = 10;

/// The SSE reconnect policy: [`RECONNECT_ATTEMPTS`] attempts (rmcp makes
/// the first at once; this policy spaces the next ones 1 s and 2 s apart),
/// then the stream is given up (see the module docs).
pub(crate) fn reconnect_policy() -> Arc<dyn SseRetryPolicy> {
    let mut policy = ExponentialBackoff::default();
    policy.max_times = Some(RECONNECT_ATTEMPTS);
    policy.base_duration = RECONNECT_BASE;
    policy.max_delay = Some(RECONNECT_MAX);
    Arc::new(policy)
}

/// The HTTP client: [`reqwest_client`] inside [`SessionAware`]. A client
/// that adds to reqwest (authorization) goes between the two.
pub(crate) fn client() -> SessionAware<reqwest::Client> {
    SessionAware(reqwest_client(), None)
}

/// reqwest as rmcp builds it: no idle connection reuse; only same-origin
/// 307/308 redirects (they keep the method and body), at most
/// [`MAX_REDIRECTS`], so the session id and the configured headers never go
/// to another host.
/// Installs the TLS provider first if none is (reqwest is built without
/// one of its own).
pub(crate) fn reqwest_client() -> reqwest::Client {
    super::connection::ensure_tls_provider();
    let redirect = reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt.previous().first().is_some_and(|first| {
            let next = attempt.url();
            (first.scheme(), first.host_str(), first.port_or_known_default())
                == (next.scheme(), next.host_str(), next.port_or_known_default())
        });
        let kept = matches!(attempt.status().as_u16(), 307 | 308);
        if same_origin && kept && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirect)
        .build()
        .expect("the HTTP client builds (a TLS provider is installed)")
}

/// An HTTP client for rmcp's streamable HTTP transport that reports a
/// rejected session as expired and never leaves a request without an
/// answer (see the module docs). Everything else is `C`'s. With a tap, the
/// raw events of streamed answers are shown to it first (task-only tools:
/// rmcp's `Tool` does not keep `execution`).
#[derive(Clone, Default)]
pub(crate) struct SessionAware<C>(pub(crate) C, pub(crate) Option<ListingTap>);

impl<C: std::fmt::Debug> std::fmt::Debug for SessionAware<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SessionAware").field(&self.0).finish()
    }
}

/// A stream of SSE events whose data lines `tap` sees as they pass.
struct Tapped {
    inner: SseStream,
    tap: ListingTap,
}

impl futures_core::Stream for Tapped {
    type Item = Result<sse_stream::Sse, SseError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        if let std::task::Poll::Ready(Some(Ok(event))) = &next
            && let Some(data) = &event.data
        {
            self.tap.scan(data.as_bytes());
        }
        next
    }
}

type Post<E> = Result<StreamableHttpPostResponse, StreamableHttpError<E>>;
type SseStream = Pin<Box<dyn futures_core::Stream<Item = Result<sse_stream::Sse, SseError>> + Send>>;

impl<C> SessionAware<C> {
    /// The same client, showing the raw events of streamed answers to `tap`.
    pub(crate) fn tapped(self, tap: ListingTap) -> SessionAware<C> {
        SessionAware(self.0, Some(tap))
    }
}

impl<C: StreamableHttpClient + Sync> SessionAware<C> {
    /// What rmcp should see of `C`'s answer to `message`.
    fn judge(message: &ClientJsonRpcMessage, with_session: bool, answer: Post<C::Error>) -> Post<C::Error> {
        if !matches!(message, ClientJsonRpcMessage::Request(_)) {
            return answer;
        }
        match answer {
            // An error that is no request's answer: the server refused the
            // POST as a whole (it did not run the request).
            Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), _))
                if error.id.is_none() =>
            {
                let message = error.error.message.to_string();
                if with_session && names_the_session(&message) {
                    Err(StreamableHttpError::SessionExpired)
                } else {
                    Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                        "the server refused the request: {message}"
                    ))))
                }
            }
            Err(StreamableHttpError::UnexpectedServerResponse(text))
                if with_session && text.starts_with("HTTP 4") && names_the_session(&text) =>
            {
                Err(StreamableHttpError::SessionExpired)
            }
            other => other,
        }
    }
}

/// Whether a server's refusal is about the session id (`No valid session
/// ID provided`, `Session not found`, `Invalid session`).
/// The `traceparent` a traced `tools/call` carries in its `_meta`
/// (pool/calls.rs), as the HTTP header W3C Trace Context §3 names: the
/// server's HTTP layer (a proxy, a gateway, its instrumentation) joins the
/// trace without reading the body. Only a well-formed value passes.
fn traceparent_of(message: &ClientJsonRpcMessage) -> Option<HeaderValue> {
    let rmcp::model::JsonRpcMessage::Request(request) = message else { return None };
    let rmcp::model::ClientRequest::CallToolRequest(call) = &request.request else { return None };
    let value = call.params.meta.as_ref()?.0.0.get("traceparent")?.as_str()?;
    crate::telemetry::TraceContext::parse(value)?;
    HeaderValue::from_str(value).ok()
}

fn names_the_session(text: &str) -> bool {
    text.to_ascii_lowercase().contains("session")
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for SessionAware<C> {
    type Error = C::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Post<Self::Error>> + Send + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Post<Self::Error>> + Send + '_ {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Post<Self::Error> {
        let with_session = session_id.is_some();
        let mut custom_headers = custom_headers;
        if let Some(traceparent) = traceparent_of(&message) {
            custom_headers.insert(HeaderName::from_static("traceparent"), traceparent);
        }
        let answer = self
            .0
            .post_message_with_response_limits(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        match (Self::judge(&message, with_session, answer), &self.1) {
            (Ok(StreamableHttpPostResponse::Sse(stream, session)), Some(tap)) => {
                let tapped = Tapped { inner: stream, tap: tap.clone() };
                Ok(StreamableHttpPostResponse::Sse(Box::pin(tapped), session))
            }
            (answer, _) => answer,
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.0.delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<SseStream, StreamableHttpError<Self::Error>>> + Send + '_ {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<SseStream, StreamableHttpError<Self::Error>>> + Send + '_ {
        self.0.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// A request that failed without an answer from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    /// What happened, as a phrase naming the URL.
    pub(crate) cause: String,
    /// Whether the connection is gone (the pool starts a new one on next
    /// use); `false` when rmcp already moved to a new session.
    pub(crate) down: bool,
}

/// The text rmcp gives a request whose session it replaced while the
/// request was pending.
const REINITIALIZED: &str = "streamable HTTP session was re-initialized before the response arrived";

/// What happened to a request to `url` that failed with `error`, or `None`
/// when the server answered (a JSON-RPC error of its own) or the failure is
/// not the connection's.
pub(crate) fn lost(error: &ServiceError, url: &str) -> Option<Lost> {
    match error {
        ServiceError::TransportClosed => Some(Lost {
            cause: format!("the server at {url} closed the stream before answering"),
            down: true,
        }),
        ServiceError::McpError(data) if data.message == REINITIALIZED => Some(Lost {
            cause: format!(
                "the server at {url} lost the session while the call was under way; a new session was opened, \
                 and the call was not sent again because it may have run"
            ),
            down: false,
        }),
        ServiceError::TransportSend(e) => Some(describe(e.error.as_ref(), url).unwrap_or_else(|| Lost {
            cause: format!("{} (from {url})", super::connection::error_text(e.error.as_ref())),
            down: true,
        })),
        _ => None,
    }
}

/// A request the server at `url` turned away for now, unread: HTTP 429
/// (Too Many Requests) or 503 (Service Unavailable), with the wait its
/// `Retry-After` asks for when it gives a number of seconds (an HTTP date
/// is not read). The request did not run and the connection stays up, so
/// the caller may send it again (docs/LIMITS.md, "Retries"). `None` for
/// any other failure.
pub(crate) fn busy(error: &ServiceError, url: &str) -> Option<(String, Option<Duration>)> {
    let ServiceError::TransportSend(e) = error else {
        return None;
    };
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e.error.as_ref());
    while let Some(e) = next {
        if let Some(StreamableHttpError::HttpStatus(status)) =
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            let after = status.retry_after.as_deref().and_then(|v| v.trim().parse::<u64>().ok());
            return matches!(status.status, 429 | 503)
                .then(|| (format!("HTTP {} from {url}", status.status), after.map(Duration::from_secs)));
        }
        next = e.source();
    }
    None
}

/// What happened to a handshake with `url` that failed on the wire, or
/// `None` when the server answered it (or the failure is not the wire's).
pub(crate) fn handshake_failure(error: &rmcp::service::ClientInitializeError, url: &str) -> Option<String> {
    match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            describe(error.error.as_ref(), url).map(|lost| lost.cause)
        }
        // Both lifecycles failed: the wire's failure of the fallback (the
        // `initialize` a plain server answers), else of the probe.
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            handshake_failure(fallback, url).or_else(|| handshake_failure(discover, url))
        }
        _ => None,
    }
}

/// [`lost`] for an error of the transport (a send, or the handshake);
/// `None` when no HTTP or connection error is in `error`'s chain.
pub(crate) fn describe(error: &(dyn std::error::Error + 'static), url: &str) -> Option<Lost> {
    let down = |cause: String| Some(Lost { cause, down: true });
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match e {
                StreamableHttpError::Client(e) => down(client_error(e, url)),
                StreamableHttpError::HttpStatus(e) => down(status_text(e.status, &e.status.to_string(), url)),
                StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP ") => {
                    let text = text.trim().trim_end_matches(':');
                    let code =
                        text[5..].split(|c: char| !c.is_ascii_digit()).next().and_then(|c| c.parse().ok());
                    down(match code {
                        Some(code) => status_text(code, &text[5..], url),
                        None => format!("{text} from {url}"),
                    })
                }
                StreamableHttpError::SessionExpired => down(format!(
                    "the server at {url} lost the session and rejected the request again on a new session"
                )),
                StreamableHttpError::SessionRecoveryTimeout => down(format!(
                    "the server at {url} lost the session while the call was under way; the call was not sent \
                     again because it may have run"
                )),
                StreamableHttpError::ReinitializationFailed(data) => down(format!(
                    "the server at {url} lost the session and refused a new one: {}",
                    data.message
                )),
                StreamableHttpError::UnexpectedServerResponse(text) => {
                    down(format!("unexpected answer from {url}: {}", text.trim()))
                }
                StreamableHttpError::Sse(_) | StreamableHttpError::UnexpectedEndOfStream => {
                    down(format!("the server at {url} closed the stream before answering"))
                }
                other => down(format!("{} (from {url})", super::connection::error_text(other))),
            };
        }
        if let Some(e) = e.downcast_ref::<reqwest::Error>() {
            return down(client_error(e, url));
        }
        next = e.source();
    }
    None
}

/// Where a connection or status error sends the user: the configured URL.
const CHECK_URL: &str = "check the server's `url` in the MCP configuration";

/// An HTTP error status from `url` as a line that says what to check:
/// `status` is the status as the client has it (`404 Not Found`, with the
/// body's text when the server gave one).
fn status_text(code: u16, status: &str, url: &str) -> String {
    let status = status.trim().trim_end_matches(':');
    match code {
        401 => format!(
            "HTTP {status} from {url}: the server wants credentials it did not get or did not accept; check the \
             server's `headers` in the MCP configuration, or sign in with `codemode mcp login SERVER`"
        ),
        403 => format!(
            "HTTP {status} from {url}: the server refused these credentials; check the server's `headers` in \
             the MCP configuration (or the login's scopes)"
        ),
        404 => format!(
            "HTTP {status} from {url}: no MCP endpoint at that address; {CHECK_URL} (often ends in /mcp)"
        ),
        _ => format!("HTTP {status} from {url}"),
    }
}

/// A reqwest failure as what happened on the wire, and what to check.
fn client_error(error: &reqwest::Error, url: &str) -> String {
    let io = io_kind(error);
    if error.is_connect() {
        if let Some(tls) = tls_error(error) {
            return format!(
                "the TLS handshake with {url} failed ({tls}); is it an https server with a certificate this \
                 machine trusts? {CHECK_URL} (http:// or https://)"
            );
        }
        let cause = root_cause(error);
        return match io {
            Some(std::io::ErrorKind::ConnectionRefused) => {
                format!("cannot connect to {url} (connection refused): is the server running? {CHECK_URL}")
            }
            _ if is_dns_failure(&cause) => {
                format!("cannot resolve the host of {url} ({cause}); {CHECK_URL}")
            }
            _ => format!("cannot connect to {url} ({cause}): is the server running? {CHECK_URL}"),
        };
    }
    if error.is_timeout() {
        return format!("the request to {url} timed out");
    }
    match io {
        Some(std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe) => {
            format!("the connection to {url} was reset before the server answered")
        }
        _ => format!("the connection to {url} was lost before the server answered ({})", root_cause(error)),
    }
}

/// The TLS failure under `error`, if the connection failed in the TLS
/// handshake (a rustls error in its chain).
fn tls_error(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // An I/O error's `source` skips the error it wraps: look inside.
        next = match e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// Whether a connect failure's innermost text is a failed host lookup
/// (getaddrinfo's texts, as the standard library and hyper give them).
fn is_dns_failure(cause: &str) -> bool {
    let cause = cause.to_ascii_lowercase();
    [
        "failed to lookup address",
        "name or service not known",
        "no address associated",
        "nodename nor servname",
    ]
    .iter()
    .any(|t| cause.contains(t))
}

/// The kind of the I/O error under `error`, if there is one.
fn io_kind(error: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        next = e.source();
    }
    None
}

/// The innermost error's text.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut e = error;
    while let Some(source) = e.source() {
        e = source;
    }
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorData, NumberOrString, RequestId};

    type Client = SessionAware<reqwest::Client>;

    fn request() -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).unwrap()
    }

    fn refusal(message: &str, id: Option<RequestId>) -> Post<reqwest::Error> {
        Ok(StreamableHttpPostResponse::Json(
            ServerJsonRpcMessage::error(ErrorData::invalid_request(message.to_owned(), None), id),
            None,
        ))
    }

    #[test]
    fn a_refusal_naming_the_session_is_an_expired_session() {
        let judged =
            Client::judge(&request(), true, refusal("Bad Request: No valid session ID provided", None));
        assert!(matches!(judged, Err(StreamableHttpError::SessionExpired)), "{judged:?}");
        let text = Err(StreamableHttpError::UnexpectedServerResponse(
            "HTTP 400 Bad Request: invalid session".into(),
        ));
        assert!(matches!(Client::judge(&request(), true, text), Err(StreamableHttpError::SessionExpired)));
    }

    #[test]
    fn other_refusals_fail_the_request_and_answers_pass() {
        // No session sent: nothing to renew, but no silent drop either.
        let judged = Client::judge(&request(), false, refusal("No valid session ID provided", None));
        assert!(
            matches!(judged, Err(StreamableHttpError::UnexpectedServerResponse(ref t)) if t.contains("refused"))
        );
        // An error answering the request (it has its id) is the server's answer.
        let id = Some(NumberOrString::Number(7));
        let judged = Client::judge(&request(), true, refusal("session quota exceeded", id));
        assert!(matches!(judged, Ok(StreamableHttpPostResponse::Json(..))), "{judged:?}");
        let text =
            Err(StreamableHttpError::UnexpectedServerResponse("HTTP 400 Bad Request: bad JSON".into()));
        assert!(matches!(
            Client::judge(&request(), true, text),
            Err(StreamableHttpError::UnexpectedServerResponse(_))
        ));
    }

    /// A one-request-per-connection HTTP server on a free local port that
    /// answers every request with `answer(path)`; returns its port and the
    /// paths it was asked for.
    fn tiny_server(answer: fn(&str, u16) -> String) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
        use std::io::{BufRead as _, BufReader, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                // The headers, then a small body (Content-Length read loosely).
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                let _ = std::io::Read::read_exact(&mut reader, &mut body);
                log.lock().unwrap().push(path.clone());
                let _ = (&stream).write_all(answer(&path, port).as_bytes());
            }
        });
        (port, seen)
    }

    #[tokio::test]
    async fn redirects_are_followed_only_to_the_same_origin() {
        let (other, other_seen) = tiny_server(|_, _| "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".into());
        static OTHER: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
        OTHER.set(other).unwrap();
        let (port, seen) = tiny_server(|path, port| match path {
            "/same" => format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/mcp\r\nContent-Length: 0\r\n\r\n"
            ),
            "/away" => format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{}/mcp\r\nContent-Length: 0\r\n\r\n",
                OTHER.get().unwrap()
            ),
            _ => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".into(),
        });
        let client = reqwest_client();
        let same = client.post(format!("http://127.0.0.1:{port}/same")).body("{}").send().await.unwrap();
        assert_eq!(same.status().as_u16(), 200);
        assert_eq!(*seen.lock().unwrap(), ["/same", "/mcp"]);
        let away = client
            .post(format!("http://127.0.0.1:{port}/away"))
            .header("Mcp-Session-Id", "secret-session")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(away.status().as_u16(), 307, "a cross-origin redirect is not followed");
        assert!(other_seen.lock().unwrap().is_empty(), "the other host was asked");
    }

    #[test]
    fn the_reconnect_policy_gives_up() {
        let policy = reconnect_policy();
        assert_eq!(policy.retry(1), Some(Duration::from_secs(1)));
        assert_eq!(policy.retry(2), Some(Duration::from_secs(2)));
        assert_eq!(policy.retry(RECONNECT_ATTEMPTS), None);
    }
}
