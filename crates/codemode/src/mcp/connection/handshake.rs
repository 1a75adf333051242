//! The MCP handshake of a connection being started: waiting for it (within
//! the startup timeout, while the connection is up), the [`Connection`] it
//! makes, and the error of one that did not finish, with whether the other
//! protocol era may be tried.

use std::sync::{Arc, Mutex};

use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use tokio::sync::watch;

use super::error_text::error_text;
use super::handler::Handler;
use super::{Connection, Down, EXIT_GRACE, Failed, MAX_JSON_DEPTH, Serving, Starting, set_once};
use crate::mcp::McpError;
use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::era::Era;
use crate::mcp::requests::ServerRequests;
#[cfg(feature = "http")]
use crate::mcp::streamable_http;

/// How a handshake that did not finish ended.
pub(super) enum Unfinished {
    /// rmcp's handshake failed.
    Failed {
        /// What happened, in words ([`failure_text`]).
        message: String,
        /// Whether the server answered ([`answered`]).
        answered: bool,
        /// Whether the server wants an OAuth login.
        login_required: bool,
        /// The scopes a 403 `insufficient_scope` asked for, when that is
        /// why (see `oauth::step_up`).
        scope_required: Option<String>,
    },
    /// The startup timeout passed first.
    TimedOut,
    /// The connection went down first.
    Down,
}

/// Runs the handshake `serving` with `server` until `deadline`, or until
/// the connection (`down`) ends.
///
/// # Errors
/// [`Unfinished`]: how it did not finish.
pub(super) async fn handshake(
    server: &ServerConfig,
    deadline: tokio::time::Instant,
    serving: Serving,
    down: &watch::Receiver<Option<Down>>,
) -> Result<RunningService<RoleClient, Handler>, Unfinished> {
    let mut down_rx = down.clone();
    let outcome = tokio::select! {
        r = tokio::time::timeout_at(deadline, serving) => Some(r),
        () = async { let _ = down_rx.wait_for(Option::is_some).await; } => None,
    };
    match outcome {
        Some(Ok(Ok(service))) => Ok(service),
        Some(Ok(Err(e))) => Err(Unfinished::Failed {
            message: failure_text(server, &e),
            answered: answered(&e),
            login_required: crate::mcp::oauth::needs_login(&e),
            scope_required: scope_needed_at_start(&e),
        }),
        Some(Err(_)) => Err(Unfinished::TimedOut),
        None => Err(Unfinished::Down),
    }
}

impl Starting {
    /// The live connection of server `server` once `service` finished the
    /// handshake, in the era the server answered with.
    pub(super) fn connected(
        self,
        server: &str,
        service: RunningService<RoleClient, Handler>,
        requests: &Arc<ServerRequests>,
    ) -> Connection {
        let era = service.peer().peer_info().map_or(Era::Legacy, |info| Era::of(&info.protocol_version));
        Connection {
            era,
            requests: requests.clone(),
            server: server.to_owned(),
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            down: self.down,
            down_tx: self.down_tx,
            stderr: self.stderr,
            limit: self.limit,
            monitor: Mutex::new(self.monitor),
            started: tokio::time::Instant::now(),
            listing_tap: self.listing_tap,
            listing: self.listing,
        }
    }

    /// Ends a start whose handshake did not finish: the process is ended
    /// and reaped, then what happened is described ([`failed_start`]).
    pub(super) async fn failed(mut self, server: &ServerConfig, unfinished: Unfinished) -> Failed {
        if let Unfinished::Failed { scope_required: Some(scope), .. } = &unfinished {
            let _ = self.down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
            let error = McpError::ScopeRequired {
                server: server.name.clone(),
                scope: scope.clone(),
                stepped_up: self.interactive.is_some(),
            };
            return Failed { error, retry: false };
        }
        // A server that exits at once makes rmcp fail to write before the
        // exit is seen: give the exit a moment, so the error says how the
        // process ended rather than "broken pipe".
        if !matches!(unfinished, Unfinished::TimedOut) && self.monitor.is_some() {
            let mut down_rx = self.down.clone();
            let _ = tokio::time::timeout(EXIT_GRACE, down_rx.wait_for(Option::is_some)).await;
        }
        // Failed: end the process, then describe what happened. (A
        // process stopped here is `Down::Stopped`; one that ended by itself
        // is `Down::Ended`.)
        let _ = self.down_tx.send_if_modified(|d| set_once(d, Down::Stopped));
        if let Some(monitor) = self.monitor.take() {
            let _ = monitor.await;
        }
        let cause = self.down.borrow().clone();
        let stderr = self.stderr.settled().await;
        failed_start(server, self.limit, unfinished, cause, stderr)
    }
}

/// The error of a start of `server` whose handshake did not finish, given
/// why the connection is down (`cause`) and the server's `stderr` tail:
/// a login needed, a message over `limit` bytes or nested too deeply, the
/// startup timeout, or the handshake's failure (to be retried in the other
/// era when the server answered, see [`answered`]).
fn failed_start(
    server: &ServerConfig,
    limit: usize,
    unfinished: Unfinished,
    cause: Option<Down>,
    stderr: String,
) -> Failed {
    let fatal = |error| Failed { error, retry: false };
    let name = server.name.clone();
    // `None`: the startup timeout; else the message and whether the server
    // answered.
    let (failure, login_required) = match unfinished {
        Unfinished::Failed { message, answered, login_required, .. } => {
            (Some((message, answered)), login_required)
        }
        Unfinished::TimedOut => (None, false),
        Unfinished::Down => (Some((String::new(), false)), false),
    };
    match (failure, cause) {
        _ if login_required => fatal(McpError::LoginRequired { server: name }),
        (_, Some(Down::TooLarge)) => fatal(McpError::MessageTooLarge { server: name, limit_bytes: limit }),
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
    }
}

/// A failed handshake in words: over HTTP, what happened on the wire,
/// naming the URL as written; else [`handshake_text`].
fn failure_text(server: &ServerConfig, error: &ClientInitializeError) -> String {
    match &server.shown {
        #[cfg(feature = "http")]
        Transport::Http { url, .. } => streamable_http::handshake_failure(error, url),
        #[cfg(not(feature = "http"))]
        Transport::Http { .. } => None,
        Transport::Stdio { .. } => None,
    }
    .unwrap_or_else(|| handshake_text(error))
}

/// Whether a failed handshake got an answer from the server (an error, or
/// a result of the wrong kind), so the other lifecycle may work: not a
/// transport failure, a cancel, or an authorization refusal.
fn answered(error: &ClientInitializeError) -> bool {
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
fn handshake_text(error: &ClientInitializeError) -> String {
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

#[cfg(feature = "oauth")]
use crate::mcp::oauth::scope_needed_at_start;

/// Without the `oauth` feature no scope is asked for.
#[cfg(not(feature = "oauth"))]
fn scope_needed_at_start(_error: &rmcp::service::ClientInitializeError) -> Option<String> {
    None
}
