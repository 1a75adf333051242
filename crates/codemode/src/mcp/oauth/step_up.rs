//! Re-authorizing during a run: step-up authorization on a 403
//! `insufficient_scope` (RFC 6750 §3.1; MCP authorization 2025-11-25 and
//! 2026-07-28, "Scope Challenge Handling", step-up authorization flow) and
//! a new login when the server refuses the login's tokens (401 after
//! rmcp's refresh; e.g. its protected-resource metadata now names another
//! authorization server, SEP-2352).
//!
//! [`StepUp`] wraps rmcp's `AuthClient`. On a 403 `insufficient_scope` it
//! remembers, with the login, the union of the scopes the login was
//! granted and those the challenge names (so the next `codemode mcp login`
//! asks for them). Then:
//! - when the run opted in ([`InteractiveLogin`], `codemode run --login`)
//!   and fewer than [`MAX_REAUTHORIZATIONS`] re-authorizations of the
//!   server were made by this process, the login flow runs again (a
//!   browser, the loopback redirect; discovery from the challenge, so a
//!   new authorization server means a new registration there and no
//!   credentials of the old one), asking for that union, and the request
//!   is sent again with the new token;
//! - else the request fails with the challenge and the union, which the
//!   pool turns into [`McpError::ScopeRequired`](crate::mcp::McpError)
//!   naming the scopes and `codemode mcp login SERVER`.
//!
//! A 401 the `AuthClient` could not cure with a refresh is re-authorized
//! the same way when the run opted in (same budget), else it fails as
//! before ([`McpError::LoginRequired`](crate::mcp::McpError) at the start,
//! an HTTP 401 line on a call). Nothing here waits for a browser unless
//! the run asked for it; the wait for the redirect counts against the
//! request's own timeout (the call's `timeout_ms`, the startup timeout).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::service::ServiceError;
use rmcp::transport::auth::{AuthClient, CredentialStore as _};
use rmcp::transport::streamable_http_client::{
    InsufficientScopeError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::store::TokenFileStore;
use super::{InteractiveLogin, OAuthSettings, Probed, challenge};
use crate::mcp::ServerConfig;

/// rmcp's `AuthClient` with step-up (see the module doc). Clones share
/// the login.
#[derive(Clone)]
pub(crate) struct StepUp {
    client: AuthClient<reqwest::Client>,
    server: String,
    url: String,
    settings: OAuthSettings,
    interactive: Option<Arc<InteractiveLogin>>,
    /// Bumped by each re-authorization: a request that failed before
    /// another one's re-authorization is sent again with its token.
    generation: Arc<AtomicU64>,
}

impl std::fmt::Debug for StepUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepUp").field("server", &self.server).finish_non_exhaustive()
    }
}

/// What a failed request needs.
enum Need {
    /// A 403 `insufficient_scope`: its `WWW-Authenticate` value.
    Scope(InsufficientScopeError),
    /// A 401 the refresh did not cure: its `WWW-Authenticate` value.
    Login(String),
}

type SseStream = std::pin::Pin<
    Box<
        dyn futures_core::Stream<
                Item = Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
            > + Send,
    >,
>;
type Post = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

impl StepUp {
    /// `client` for `server` at `url`.
    pub(crate) fn new(
        client: AuthClient<reqwest::Client>,
        url: &str,
        server: &ServerConfig,
        settings: OAuthSettings,
        interactive: Option<Arc<InteractiveLogin>>,
    ) -> StepUp {
        StepUp {
            client,
            server: server.name.clone(),
            url: url.to_owned(),
            settings,
            interactive,
            generation: Arc::default(),
        }
    }

    /// Handles the failure `need` of a request sent at `generation`:
    /// `Ok(())` when the request should be sent again (re-authorized, here
    /// or by another request meanwhile), else the error to return.
    async fn reauthorize(
        &self,
        need: Need,
        generation: u64,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        let dir = super::user_token_dir().ok();
        let store = dir.as_ref().map(|dir| TokenFileStore::new(dir, &self.url));
        let (header, error) = match need {
            Need::Scope(error) => {
                let asked = challenge::insufficient_scope(&error.www_authenticate_header, &self.url)
                    .unwrap_or_default();
                let had = match &store {
                    Some(store) => {
                        store.load().await.ok().flatten().map(|c| c.granted_scopes).unwrap_or_default()
                    }
                    None => Vec::new(),
                };
                let union = challenge::scope_union(&had, &asked);
                if let Some(store) = &store
                    && let Err(e) = store.remember_scopes(&union).await
                {
                    tracing::warn!(server = %self.server, "cannot keep the scopes the server asked for: {e}");
                }
                let header = error.www_authenticate_header.clone();
                let error = InsufficientScopeError::new(header.clone(), Some(union.join(" ")));
                (header, StreamableHttpError::InsufficientScope(error))
            }
            Need::Login(header) => (
                header.clone(),
                StreamableHttpError::AuthRequired(
                    rmcp::transport::streamable_http_client::AuthRequiredError::new(header),
                ),
            ),
        };
        let (Some(interactive), Some(dir)) = (&self.interactive, dir) else { return Err(error) };
        let _turn = interactive.turn.lock().await;
        if self.generation.load(Ordering::SeqCst) != generation {
            return Ok(());
        }
        if !interactive.take(&self.server) {
            return Err(error);
        }
        let mut announce =
            |auth_url: &str, opened: Option<&str>| (interactive.announce)(&self.server, auth_url, opened);
        let challenge = Probed::Challenge(header);
        let issuer = match &store {
            Some(store) => store.load().await.ok().flatten().and_then(|c| c.issuer),
            None => None,
        };
        let login = super::authorize(
            &self.url,
            &self.settings,
            &dir,
            super::DEFAULT_LOGIN_TIMEOUT,
            challenge,
            issuer.as_deref(),
            &mut announce,
        )
        .await;
        if let Err(message) = login {
            tracing::warn!(server = %self.server, "re-authorization failed: {message}");
            return Err(error);
        }
        match super::login_manager(&self.url, &self.settings).await {
            Ok(Some(manager)) => *self.client.auth_manager.lock().await = manager,
            Ok(None) => return Err(error),
            Err(message) => {
                tracing::warn!(server = %self.server, "cannot load the new login: {message}");
                return Err(error);
            }
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl StreamableHttpClient for StepUp {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Post> + Send + '_ {
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
    ) -> impl Future<Output = Post> + Send + '_ {
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
    ) -> Post {
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let answer = self
                .client
                .post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                    limits,
                )
                .await;
            let need = match answer {
                Err(StreamableHttpError::InsufficientScope(error)) => Need::Scope(error),
                Err(StreamableHttpError::AuthRequired(error)) => Need::Login(error.www_authenticate_header),
                answer => return answer,
            };
            self.reauthorize(need, generation).await?;
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.client.delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<SseStream, StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.client.get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<SseStream, StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.client.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// The scopes a failed request needed, when it failed on a 403
/// `insufficient_scope` that was not (or could not be) stepped up: the
/// union [`StepUp`] computed (space-separated; the challenge's own `scope`
/// for a client without a login). `None` for any other failure.
pub(crate) fn scope_needed(error: &ServiceError) -> Option<String> {
    let ServiceError::TransportSend(e) = error else { return None };
    scope_in(e.error.as_ref())
}

/// [`scope_needed`] for a handshake that failed.
pub(crate) fn scope_needed_at_start(error: &rmcp::service::ClientInitializeError) -> Option<String> {
    use rmcp::service::ClientInitializeError as E;
    match error {
        E::TransportError { error, .. } => scope_in(error.error.as_ref()),
        E::LegacyFallbackFailed { discover, fallback } => {
            scope_needed_at_start(fallback).or_else(|| scope_needed_at_start(discover))
        }
        _ => None,
    }
}

/// The scopes of the first `InsufficientScope` in `error`'s chain.
fn scope_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(StreamableHttpError::InsufficientScope(scope)) =
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some(scope.required_scope.clone().unwrap_or_default());
        }
        next = e.source();
    }
    None
}
