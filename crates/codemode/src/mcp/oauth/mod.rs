//! OAuth for streamable HTTP MCP servers (MCP specification 2025-11-25 and
//! 2026-07-28, "Authorization"), on rmcp's `auth` module: rmcp does the
//! discovery, registration, PKCE, token requests and refreshes; this module
//! adds where logins are kept (`store`), the loopback redirect
//! (`redirect`), the login command's flow ([`login`]) and the transport's
//! authorized HTTP client (`authorized_client`).
//!
//! A login (`codemode mcp login SERVER`):
//! 1. an unauthenticated `initialize` POST to the server's URL; a 401's
//!    `WWW-Authenticate` challenge seeds discovery (its `resource_metadata`
//!    URL and `scope`);
//! 2. protected-resource metadata (RFC 9728: the challenge's URL, else the
//!    path-based then the root well-known URL), then the authorization
//!    server's metadata (RFC 8414, else OpenID Connect discovery);
//! 3. the client: the config's pre-registered `clientId`, else its
//!    `clientMetadataUrl` (a client ID metadata document) when the
//!    authorization server advertises `client_id_metadata_document_supported`,
//!    else dynamic client registration (RFC 7591);
//! 4. the authorization URL with PKCE S256, `state`, the `resource`
//!    parameter (RFC 8707) and the scopes (the config's `scopes`, else the
//!    challenge's `scope`, else the protected resource's `scopes_supported`,
//!    else none), printed and opened in a browser;
//! 5. the redirect to `http://127.0.0.1:PORT/callback` (one request, its
//!    `state` checked; its `iss` checked when the server supports RFC 9207);
//! 6. the code exchanged for tokens, kept in the login file of the URL.
//!
//! Using it: an HTTP server with a login is reached through rmcp's
//! `AuthClient`, which sends `Authorization: Bearer`, refreshes an expired
//! access token with the refresh token first, and on a 401 refreshes once
//! and retries. A server that answers 401 to a run without a (valid) login
//! fails at once with [`McpError::LoginRequired`](super::McpError), which
//! names `codemode mcp login SERVER`; nothing waits for a browser unless the
//! run consented (`--login`): then a 403 `insufficient_scope` or a refused
//! login is re-authorized during the run (`step_up`, at most
//! [`MAX_REAUTHORIZATIONS`] per server), and the challenged scopes are kept
//! with the login either way.
//!
//! Tokens are never printed nor put in errors: errors of this module are
//! built from rmcp's error kinds and the authorization server's answers,
//! never from the token file.

pub(crate) mod challenge;
mod interactive;
#[cfg(feature = "oauth")]
mod redirect;
#[cfg(feature = "oauth")]
mod step_up;
pub(crate) mod store;

use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "oauth")]
use rmcp::transport::auth::{AuthClient, AuthorizationManager, AuthorizationRequest, AuthorizationSession};
use serde::Deserialize;

#[cfg(feature = "oauth")]
use super::{McpError, ServerConfig};

pub use interactive::{Announce, InteractiveLogin, MAX_REAUTHORIZATIONS};
#[cfg(feature = "oauth")]
pub(crate) use step_up::{StepUp, scope_needed, scope_needed_at_start};
use store::TokenFileStore;
pub use store::{MAX_TOKEN_FILE_BYTES, token_path, user_token_dir};

/// How long `codemode mcp login` waits for the browser's redirect by default.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The client name sent in dynamic client registration.
#[cfg(feature = "oauth")]
const CLIENT_NAME: &str = "codemode";

/// OAuth settings of one HTTP server: the `"oauth"` object of its config
/// entry (the shape Claude Code's `.mcp.json` uses), all optional:
/// `{"clientId": "...", "clientSecret": "${SECRET}", "clientMetadataUrl": "https://...", "scopes": ["a", "b"], "callbackPort": 8765}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// A client id registered with the authorization server out of band
    /// (MCP authorization, "Preregistration"); skips registration.
    pub client_id: Option<String>,
    /// The secret of that pre-registered client (a confidential client),
    /// expanded like the entry's other fields (`${VAR}` from the
    /// environment) and kept out of everything codemode shows. The token
    /// endpoint gets it as the authorization server's metadata prefers:
    /// HTTP Basic (`client_secret_basic`) or in the form
    /// (`client_secret_post`); without it the client is public (`none`).
    pub client_secret: Option<String>,
    /// The HTTPS URL of a client ID metadata document describing codemode
    /// as the user deployed it (MCP authorization, "Client ID Metadata
    /// Documents"); used when the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: as the server says (see the module doc).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The loopback port of the redirect (a pre-registered client's
    /// redirect URI names one); `None`: any free port.
    pub callback_port: Option<u16>,
}

/// What a login did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoginOutcome {
    /// The file the tokens are kept in.
    pub path: PathBuf,
}

#[cfg(feature = "oauth")]
/// Runs the login flow (see the module doc) for the MCP server at `url`,
/// keeping the tokens under `dir` ([`user_token_dir`] for the user's).
/// `announce` gets the authorization URL (to print) and what opened it, if
/// anything did.
///
/// # Errors
/// A message saying which step failed (discovery, registration, the
/// redirect, the token exchange) and what to do; it never holds a token.
pub async fn login(
    url: &str,
    settings: &OAuthSettings,
    dir: &std::path::Path,
    timeout: Duration,
    announce: &mut (dyn FnMut(&str, Option<&str>) + Send),
) -> Result<LoginOutcome, String> {
    super::connection::ensure_tls_provider();
    let challenge = probe(url).await?;
    authorize(url, settings, dir, timeout, challenge, None, announce).await
}

#[cfg(feature = "oauth")]
/// The login flow from discovery on (steps 2 to 6 of the module doc), for
/// the MCP server at `url` whose challenge was `challenge`
/// ([`Probed::Challenge`], the `WWW-Authenticate` value of its 401 or 403),
/// or which asked for none. The scopes asked for are the config's, else
/// rmcp's choice (the challenge's `scope`, else the protected resource's
/// `scopes_supported`), each time with the login's step-up scopes added
/// (the scopes earlier `insufficient_scope` challenges asked for).
///
/// `reissuing` is the issuer of the login a run re-authorizes (step_up.rs;
/// `None` for `codemode mcp login`): a pre-registered client (the
/// config's `clientId` and `clientSecret`) is never sent to an
/// authorization server with another issuer, since the MCP server's
/// challenge chose that server.
///
/// # Errors
/// As [`login`]; also when re-authorizing with a pre-registered client and
/// the authorization server changed.
pub(crate) async fn authorize(
    url: &str,
    settings: &OAuthSettings,
    dir: &std::path::Path,
    timeout: Duration,
    challenge: Probed,
    reissuing: Option<&str>,
    announce: &mut (dyn FnMut(&str, Option<&str>) + Send),
) -> Result<LoginOutcome, String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", settings.callback_port.unwrap_or(0)))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1 for the redirect: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}{}", redirect::CALLBACK_PATH);

    let store = TokenFileStore::new(dir, url);
    let mut manager = AuthorizationManager::new(url).await.map_err(|e| step("set up OAuth", &e))?;
    manager.set_credential_store(store.clone());
    let header = match &challenge {
        Probed::Challenge(header) => Some(header.as_str()),
        Probed::NoChallenge | Probed::Open => None,
    };
    let resolution = manager
        .resolve_metadata_from_challenge(header)
        .await
        .map_err(|e| step("discover the authorization server", &e))?;
    // A server that answered `initialize` without a token and publishes
    // no authorization metadata needs no login.
    if matches!(challenge, Probed::Open) && !resolution.source.is_discovered() {
        return Err(format!(
            "{url} answered without asking for authorization and publishes no authorization metadata; no login is needed"
        ));
    }
    if let (Some(_), Some(old)) = (&settings.client_id, reissuing)
        && resolution.metadata.issuer.as_deref() != Some(old)
    {
        let now = resolution.metadata.issuer.as_deref().unwrap_or("one that names no issuer");
        return Err(format!(
            "the server's authorization server is now {now} (the login was made at {old}); the configured \
             oauth.clientId and clientSecret are not sent to another authorization server: register codemode \
             there, set them for it, and run `codemode mcp login`"
        ));
    }
    manager.set_metadata(resolution.metadata);
    let step_up = store.step_up_scopes();

    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id);
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret);
        }
    }
    if let Some(url) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(url);
    }
    if !settings.scopes.is_empty() || !step_up.is_empty() {
        let base = match settings.scopes.is_empty() {
            true => manager.select_initial_scopes(&[]).await,
            false => settings.scopes.clone(),
        };
        request = request.with_scopes(challenge::scope_union(&base, &step_up));
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| step("register codemode with the authorization server", &e))?;
    let auth_url = session.get_authorization_url().to_owned();
    let state = url::Url::parse(&auth_url)
        .ok()
        .and_then(|u| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()))
        .ok_or("the authorization URL has no state")?;
    let opened = redirect::open_browser(&auth_url);
    announce(&auth_url, opened.as_deref());
    let callback = redirect::wait_for_callback(listener, &state, timeout).await?;
    session.handle_callback_url(&callback).await.map_err(|e| step("exchange the code for a token", &e))?;
    Ok(LoginOutcome { path: store.path().to_owned() })
}

/// Removes the login of `url` kept under `dir`: `Ok(Some(path))` when there
/// was one, `Ok(None)` when there was none.
///
/// # Errors
/// The login file exists but cannot be removed.
pub fn logout(url: &str, dir: &std::path::Path) -> Result<Option<PathBuf>, String> {
    let store = TokenFileStore::new(dir, url);
    Ok(store.remove()?.then(|| store.path().to_owned()))
}

#[cfg(feature = "oauth")]
/// The HTTP client for `server` (at `url`) when the user has a login for
/// the URL: [`login_client`] within the server's startup timeout, inside
/// [`StepUp`] (a 403 `insufficient_scope` or a refused login re-authorized
/// when `interactive` allows it, see `step_up`), its failures as
/// [`McpError`]s (secrets of the config redacted).
///
/// # Errors
/// [`McpError::StartupTimeout`], [`McpError::Initialize`].
pub(crate) async fn authorized_client(
    url: &str,
    server: &ServerConfig,
    interactive: Option<std::sync::Arc<InteractiveLogin>>,
) -> Result<Option<StepUp>, McpError> {
    let timeout = server.startup_timeout;
    let settings = server.oauth.clone().unwrap_or_default();
    match tokio::time::timeout(timeout, login_client(url, &settings)).await {
        Ok(Ok(client)) => Ok(client.map(|client| StepUp::new(client, url, server, settings, interactive))),
        Ok(Err(message)) => Err(McpError::Initialize {
            server: server.name.clone(),
            message: server.redact(&message),
            stderr: String::new(),
        }),
        Err(_) => {
            Err(McpError::StartupTimeout { server: server.name.clone(), timeout, stderr: String::new() })
        }
    }
}

#[cfg(feature = "oauth")]
/// The HTTP client for the MCP server at `url` when the user has a login
/// for it (in [`user_token_dir`]): rmcp's `AuthClient` over
/// [`login_manager`], which adds the bearer token and refreshes it.
/// `Ok(None)` without a login (see [`login_manager`]).
///
/// # Errors
/// As [`login_manager`].
async fn login_client(
    url: &str,
    settings: &OAuthSettings,
) -> Result<Option<AuthClient<reqwest::Client>>, String> {
    let Some(manager) = login_manager(url, settings).await? else { return Ok(None) };
    // Redirects are not followed: a POST must not turn into a GET, and the
    // token must not travel to another origin.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    Ok(Some(AuthClient::new(http, manager)))
}

#[cfg(feature = "oauth")]
/// The authorization manager of the user's login for the MCP server at
/// `url` (in [`user_token_dir`]), refreshing as the pre-registered
/// confidential client `settings` names when it gives a secret. `Ok(None)`
/// without a login (or without a config folder, or when the authorization
/// server changed since the login: rmcp drops its tokens, which belong to
/// the old one), so the server is reached without a token.
///
/// # Errors
/// A message when the login exists but the authorization server's metadata
/// cannot be read or the login file is unreadable.
pub(crate) async fn login_manager(
    url: &str,
    settings: &OAuthSettings,
) -> Result<Option<AuthorizationManager>, String> {
    let Ok(dir) = user_token_dir() else { return Ok(None) };
    let store = TokenFileStore::new(&dir, url);
    if !store.exists() {
        return Ok(None);
    }
    let mut manager = AuthorizationManager::new(url).await.map_err(|e| step("set up OAuth", &e))?;
    manager.set_credential_store(store);
    if !manager.initialize_from_store().await.map_err(|e| step("load the login", &e))? {
        return Ok(None);
    }
    if let (Some(id), Some(secret)) = (&settings.client_id, &settings.client_secret) {
        let mut client = rmcp::transport::auth::OAuthClientConfig::new(id, url);
        client.client_secret = Some(secret.clone());
        manager.configure_client(client).map_err(|e| step("set up the pre-registered client", &e))?;
    }
    Ok(Some(manager))
}

#[cfg(feature = "oauth")]
/// Whether `error` (a failed start or request, with its sources) says the
/// server wants authorization: a 401 with no token, or one that could not
/// be refreshed.
pub(crate) fn needs_login(error: &rmcp::service::ClientInitializeError) -> bool {
    error.is_authorization_required()
}

#[cfg(feature = "oauth")]
/// What the unauthenticated `initialize` of a login found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probed {
    /// A 401 (or, in a run, a 401 or 403) with this `WWW-Authenticate`
    /// Bearer value: its `resource_metadata` and `scope` seed discovery.
    Challenge(String),
    /// Another error status, or a 401 without a Bearer challenge:
    /// discovery uses the well-known URLs alone.
    NoChallenge,
    /// The server answered `initialize` without a token: it may still want
    /// one for other requests (its tools), so discovery uses the
    /// well-known URLs, and the login fails when they publish nothing.
    Open,
}

#[cfg(feature = "oauth")]
/// An unauthenticated `initialize` POST to `url` (see [`Probed`]).
///
/// # Errors
/// The server cannot be reached.
async fn probe(url: &str) -> Result<Probed, String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let response = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {}", super::connection::error_text(&e)))?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Ok(bearer_challenge(&response).map_or(Probed::NoChallenge, Probed::Challenge));
    }
    if status.is_success() {
        // `initialize` may be open while the rest wants a token: a
        // `tools/list` in the new session gets the server's challenge.
        let session = response.headers().get("mcp-session-id").cloned();
        let send = |body: serde_json::Value| {
            let mut request = client
                .post(url)
                .header("Accept", "application/json, text/event-stream")
                .header("Content-Type", "application/json")
                .header("MCP-Protocol-Version", "2025-11-25")
                .body(body.to_string());
            if let Some(session) = &session {
                request = request.header("Mcp-Session-Id", session.clone());
            }
            request.send()
        };
        let _ = send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        let listed = send(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
        return Ok(match listed {
            Ok(answer) if answer.status() == reqwest::StatusCode::UNAUTHORIZED => {
                bearer_challenge(&answer).map_or(Probed::Open, Probed::Challenge)
            }
            _ => Probed::Open,
        });
    }
    Ok(Probed::NoChallenge)
}

#[cfg(feature = "oauth")]
/// The first Bearer `WWW-Authenticate` value of `response`.
fn bearer_challenge(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.trim_start().to_ascii_lowercase().starts_with("bearer"))
        .map(str::to_owned)
}

#[cfg(feature = "oauth")]
/// A failed login step as a message: what was being done and rmcp's error
/// (its texts name the endpoint and the server's error code, not tokens).
fn step(what: &str, error: &rmcp::transport::auth::AuthError) -> String {
    format!("could not {what}: {}", super::connection::error_text(error))
}

/// Without the `oauth` feature no server is logged in to: a 401 is an
/// ordinary handshake failure.
#[cfg(not(feature = "oauth"))]
pub(crate) fn needs_login(_error: &rmcp::service::ClientInitializeError) -> bool {
    false
}

#[cfg(all(test, feature = "oauth"))]
mod tests {
    use std::path::Path;

    use crate::mcp::McpConfig;

    fn parse(server: serde_json::Value) -> Result<McpConfig, String> {
        let text = serde_json::json!({"mcpServers": {"web": server}}).to_string();
        McpConfig::parse(&text, Path::new("/"), &|_| None).map_err(|e| e.to_string())
    }

    #[test]
    fn an_http_server_may_carry_oauth_settings() {
        let config = parse(serde_json::json!({"url": "https://h/mcp", "oauth": {
            "clientId": "abc", "clientMetadataUrl": "https://me/client.json",
            "scopes": ["read", "write"], "callbackPort": 8765}}))
        .unwrap();
        let oauth = config.servers["web"].oauth.clone().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("abc"));
        assert_eq!(oauth.client_metadata_url.as_deref(), Some("https://me/client.json"));
        assert_eq!(oauth.scopes, ["read", "write"]);
        assert_eq!(oauth.callback_port, Some(8765));
        assert_eq!(parse(serde_json::json!({"url": "https://h/mcp"})).unwrap().servers["web"].oauth, None);
    }

    #[test]
    fn oauth_settings_are_checked() {
        let unknown = parse(serde_json::json!({"url": "https://h/mcp", "oauth": {"tokenEndpoint": "x"}}));
        assert!(unknown.unwrap_err().contains("oauth"));
        let lone =
            parse(serde_json::json!({"url": "https://h/mcp", "oauth": {"clientSecret": "x"}})).unwrap_err();
        assert!(lone.contains("oauth.clientSecret") && lone.contains("clientId"), "{lone}");
        let stdio = parse(serde_json::json!({"command": "srv", "oauth": {}})).unwrap_err();
        assert!(stdio.contains("HTTP servers only"), "{stdio}");
    }
}
