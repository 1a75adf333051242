//! A connection's tool listing: where it stands against the server's
//! `notifications/tools/list_changed` ([`Listing`]), and what the raw
//! `tools/list` answers say that rmcp's typed ones drop ([`ListingTap`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::mcp::progress::ProgressRoutes;

/// A connection's tool listing against the server's
/// `notifications/tools/list_changed`: how many arrived, which of them the
/// last listing covers, and the lock that keeps one listing in flight
/// (callers that need a fresh list while one runs wait for it instead of
/// listing again). Used by the pool (see `pool/listing.rs` and the pool's
/// module docs, "Listing").
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
///
/// And it hands each `notifications/progress` to the call it is about
/// ([`ProgressRoutes`]), in the order of the stream: rmcp hands
/// notifications to the handler on a task of their own, which may run
/// after the call's answer that followed the report was delivered, and the
/// call's last report would be lost.
#[derive(Clone, Default)]
pub(crate) struct ListingTap(
    Arc<Mutex<std::collections::HashSet<String>>>,
    Arc<Mutex<Option<ToolsPage>>>,
    Option<Arc<ProgressRoutes>>,
);

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

    /// The same tap, handing progress reports to `routes`.
    pub(crate) fn routing(self, routes: Arc<ProgressRoutes>) -> ListingTap {
        ListingTap(self.0, self.1, Some(routes))
    }

    /// Hands a `notifications/progress` line to its call (only lines that
    /// mention the method are parsed).
    fn progress(&self, line: &[u8]) {
        let Some(routes) = &self.2 else { return };
        if memchr::memmem::find(line, b"notifications/progress").is_none() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else { return };
        if message.get("method").and_then(serde_json::Value::as_str) != Some("notifications/progress")
            || message.get("id").is_some()
        {
            return;
        }
        let params = message.get("params").cloned().unwrap_or_default();
        if let Ok(report) = serde_json::from_value::<rmcp::model::ProgressNotificationParam>(params) {
            routes.deliver(report);
        }
    }

    /// Notes the task-only tools of one JSON-RPC message line (only lines
    /// that mention `"taskSupport"` are parsed), keeps a `tools/list` page
    /// that has a tool without `inputSchema` (only lines that mention
    /// `"tools"` are parsed), and hands a progress report to its call.
    pub(crate) fn scan(&self, line: &[u8]) {
        self.progress(line);
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
