//! A streamable HTTP server's session: rmcp's streamable HTTP client with
//! the configured headers, the message size limit, bounded reconnects, the
//! OAuth login for the URL when there is one, and the listing tap (see
//! `streamable_http.rs`).

use std::collections::BTreeMap;

use rmcp::service::ClientLifecycleMode;
#[cfg(feature = "http")]
use rmcp::service::ClientServiceExt as _;

use super::handler::Handler;
use super::{Serving, Starting};
use crate::mcp::McpError;
use crate::mcp::config::ServerConfig;
#[cfg(feature = "http")]
use crate::mcp::era::Probing;
#[cfg(feature = "http")]
use crate::mcp::streamable_http;

/// The handshake with `handler` over a streamable HTTP session with
/// `url`, sending `headers`.
///
/// # Errors
/// What getting the OAuth login for the URL failed with.
#[cfg(feature = "http")]
pub(super) async fn serve(
    #[cfg_attr(not(feature = "oauth"), allow(unused_variables))] server: &ServerConfig,
    url: &str,
    headers: &BTreeMap<String, String>,
    lifecycle: ClientLifecycleMode,
    handler: Handler,
    starting: &Starting,
) -> Result<Serving, McpError> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    ensure_tls_provider();
    // Checked when the config was read (Authorization included, sent as
    // written).
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
    config.uri = url.into();
    config.custom_headers = custom;
    config.max_json_response_size = starting.limit;
    config.max_sse_event_size = starting.limit;
    // Bounded SSE reconnects; a rejected session renewed once.
    config.retry_config = streamable_http::reconnect_policy();
    // With a login for the URL, rmcp's AuthClient adds the bearer token and
    // refreshes it (src/mcp/oauth), inside the session-aware wrapper.
    #[cfg(feature = "oauth")]
    let login = crate::mcp::oauth::authorized_client(url, server, starting.interactive.clone()).await?;
    #[cfg(not(feature = "oauth"))]
    let login: Option<std::convert::Infallible> = None;
    let tap = starting.listing_tap.clone();
    match login {
        #[cfg(feature = "oauth")]
        Some(client) => {
            let client = streamable_http::SessionAware(client, None).tapped(tap);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            Ok(Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)))
        }
        #[cfg(not(feature = "oauth"))]
        Some(never) => match never {},
        None => {
            let client = streamable_http::client().tapped(tap);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            Ok(Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)))
        }
    }
}

/// Without the `http` feature there is no HTTP client.
///
/// # Errors
/// Always [`McpError::ConnectRefused`], naming the feature.
#[cfg(not(feature = "http"))]
pub(super) async fn serve(
    server: &ServerConfig,
    url: &str,
    _headers: &BTreeMap<String, String>,
    _lifecycle: ClientLifecycleMode,
    _handler: Handler,
    _starting: &Starting,
) -> Result<Serving, McpError> {
    Err(McpError::ConnectRefused {
        server: server.name.clone(),
        reason: format!(
            "{url} is a streamable HTTP server and this build of codemode has no HTTP client \
             (the `http` feature of the codemode crate)"
        ),
    })
}

/// Installs rustls' ring provider as the process default, unless one is
/// installed already (reqwest is built without a provider of its own).
#[cfg(feature = "http")]
pub(crate) fn ensure_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
