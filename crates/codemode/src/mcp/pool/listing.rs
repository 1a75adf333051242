//! Listing a server's tools: `tools/list` page by page within the list
//! timeout, one listing at a time per connection (shared by whoever waits
//! for it), the relisting a `notifications/tools/list_changed` starts, and
//! keeping the list (and the schema cache).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use rmcp::model::PaginatedRequestParams;
use rmcp::service::ServiceError;
use serde_json::Value;

use super::calls::http_lost;
use super::{Inner, Listed, PoolOptions, Slot, redacted};
use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::connection::{Connection, Down, MAX_JSON_DEPTH, error_text};
use crate::mcp::{McpError, cache};

/// Keeps `raw` (the tools as listed) as `slot`'s live list, writes it to
/// the schema cache, and bumps the pool's change counter.
fn store(inner: &Inner, slot: &Slot, raw: Vec<Value>) {
    if let Some(dir) = &inner.options.cache_dir
        && let Err(e) = cache::write(dir, &slot.config, &raw, *slot.era.lock().expect("era lock"))
    {
        tracing::warn!(server = %slot.config.name, "cannot write the MCP schema cache: {e}");
    }
    let listed: Vec<Listed> = raw.into_iter().filter_map(Listed::new).collect();
    *slot.tools.lock().expect("tools lock") = Some(Arc::new(listed));
    inner.changes.send_modify(|n| *n += 1);
}

/// Lists every tool of a connection, page by page (see the module docs),
/// within the list timeout, failing at once when the connection ends.
///
/// # Errors
/// [`McpError::ListTimeout`], [`McpError::TooManyPages`], how the
/// connection ended, or what a page's request failed with ([`page`]).
async fn list(
    connection: &Connection,
    options: &PoolOptions,
    config: &ServerConfig,
) -> Result<Vec<Value>, McpError> {
    let server = connection.server.clone();
    let pages = pages(connection, options, config);
    tokio::select! {
        r = tokio::time::timeout(options.list_timeout, pages) => {
            r.unwrap_or_else(|_| Err(McpError::ListTimeout { server: server.clone(), timeout: options.list_timeout }))
        }
        down = connection.down() => Err(match down {
            Down::TooLarge => McpError::MessageTooLarge { server, limit_bytes: connection.limit },
            Down::TooDeep => McpError::TooDeep { server, limit: MAX_JSON_DEPTH },
            _ => connection.down_error().await,
        }),
    }
}

/// Every page of the tool list, following `nextCursor` for at most
/// [`PoolOptions::max_list_pages`] pages; a tool the raw messages declared
/// task-only gets its `execution` back.
///
/// # Errors
/// [`McpError::TooManyPages`], or what a page's request failed with.
async fn pages(
    connection: &Connection,
    options: &PoolOptions,
    config: &ServerConfig,
) -> Result<Vec<Value>, McpError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..options.max_list_pages {
        let (page, next_cursor) = page(connection, config, options, cursor.take()).await?;
        // `execution` is not kept by rmcp's `Tool`: put back what the
        // raw messages said (stdio), so the cache keeps it too.
        tools.extend(page.into_iter().map(|mut t| {
            if t.get("name").and_then(Value::as_str).is_some_and(|n| connection.listing_tap.contains(n)) {
                t["execution"] = serde_json::json!({"taskSupport": "required"});
            }
            t
        }));
        match next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(McpError::TooManyPages { server: connection.server.clone(), pages: options.max_list_pages })
}

/// One `tools/list` page (from `cursor`): its tools as JSON and its next
/// cursor. A page rmcp's typed answer refused (a tool without
/// `inputSchema`) is taken as the raw messages had it (stdio).
///
/// # Errors
/// How a stdio stream that closed ended, else [`list_error`].
async fn page(
    connection: &Connection,
    config: &ServerConfig,
    options: &PoolOptions,
    cursor: Option<String>,
) -> Result<(Vec<Value>, Option<String>), McpError> {
    let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
    // (A page kept from an earlier answer is not this one's.)
    let _ = connection.listing_tap.take_tools_page();
    match connection.peer.list_tools(params).await {
        Ok(page) => Ok((
            page.tools.into_iter().filter_map(|t| serde_json::to_value(t).ok()).collect::<Vec<_>>(),
            page.next_cursor,
        )),
        // A stdio stream that ended: how it ended (a message too
        // large or nested too deeply, the process's exit).
        Err(ServiceError::TransportClosed) if matches!(config.transport, Transport::Stdio { .. }) => {
            Err(connection.down_error().await)
        }
        // rmcp's typed page refused the answer (a tool without
        // `inputSchema`, which MCP.md reads as an object schema):
        // the page as the raw messages had it (stdio).
        Err(ServiceError::UnexpectedResponse) if let Some(raw) = connection.listing_tap.take_tools_page() => {
            Ok(raw)
        }
        Err(e) => Err(list_error(connection, config, options, e)),
    }
}

/// The error of a `tools/list` request that failed: over HTTP, what
/// happened on the wire (a lost connection is marked down); else the
/// server's JSON-RPC error, the closed connection, or the transport's
/// error.
fn list_error(
    connection: &Connection,
    config: &ServerConfig,
    options: &PoolOptions,
    e: ServiceError,
) -> McpError {
    let server = connection.server.clone();
    if let Some(error) = super::calls::scope_required(options, &server, &e) {
        return error;
    }
    match http_lost(config, &e) {
        Some(lost) => {
            if lost.down {
                connection.lost(lost.cause.clone());
            }
            McpError::Stopped { server, cause: lost.cause, stderr: String::new() }
        }
        None => match e {
            ServiceError::McpError(data) => {
                McpError::Protocol { server, method: "tools/list".into(), message: data.message.to_string() }
            }
            ServiceError::TransportClosed => McpError::Stopped {
                server,
                cause: "the connection closed".into(),
                stderr: connection.stderr.text(),
            },
            other => McpError::Protocol { server, method: "tools/list".into(), message: error_text(&other) },
        },
    }
}

/// Makes `slot`'s listing cover every `list_changed` that `connection`
/// received (one listing in flight; callers that arrive while it runs wait
/// for it and share the next one). With `force`, lists even when the list
/// is not stale, unless a listing finished while this waited for the
/// lock. Returns whether it listed.
pub(super) async fn fresh(
    inner: &Inner,
    slot: &Slot,
    connection: &Connection,
    force: bool,
) -> Result<bool, McpError> {
    let listing = &connection.listing;
    if !force && !listing.stale() {
        return Ok(false);
    }
    let finished = listing.completed.load(Ordering::Acquire);
    let _one = listing.lock.lock().await;
    let shared = listing.completed.load(Ordering::Acquire) > finished;
    if !listing.stale() && (!force || shared) {
        return Ok(false);
    }
    let covers = listing.notified.load(Ordering::Acquire);
    // Each listing uses up a notification's right to list again by itself.
    listing.eager.store(false, Ordering::Release);
    let raw = list(connection, &inner.options, &slot.config).await?;
    store(inner, slot, raw);
    listing.applied.fetch_max(covers, Ordering::AcqRel);
    listing.completed.fetch_add(1, Ordering::AcqRel);
    Ok(true)
}

/// Lists again on a `notifications/tools/list_changed` (see [`fresh`]),
/// when the connection still has the right to (see the module docs),
/// until the connection ends; otherwise the list stays stale and the next
/// call lists.
pub(super) async fn refresh(
    inner: Weak<Inner>,
    slot: Arc<Slot>,
    connection: Weak<Connection>,
    mut list_changed: tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    while list_changed.recv().await.is_some() {
        while list_changed.try_recv().is_ok() {}
        let (Some(inner), Some(connection)) = (inner.upgrade(), connection.upgrade()) else { return };
        if !connection.listing.eager.swap(false, Ordering::AcqRel) {
            continue;
        }
        if let Err(e) = fresh(&inner, &slot, &connection, false).await {
            // Shutting down is not a failure worth a line.
            if matches!(e, McpError::ShutDown { .. }) {
                return;
            }
            let e = redacted(&slot, e);
            tracing::warn!(server = %slot.config.name, "refreshing the tool list failed: {e}");
        }
    }
}
