//! The engine's MCP servers: the client pool, which servers the gate let
//! start, the `mcp_connect__<server>` tools, and keeping the catalog in step
//! with the servers' tool lists.
//!
//! A server starts only after the gate allowed `mcp_connect__<server>`
//! (DESIGN.md §7): either a call of that synthetic tool, or the first call
//! of one of the server's tools, which the dispatcher gates as
//! `mcp_connect__<server>` first (`connect_first.rs`). The pool's
//! [`ConnectCheck`] lets a server start only once the gate allowed it, so
//! nothing else can start one; a server the gate allowed is restarted
//! after a crash without asking again.
//!
//! A trusted configuration ([`McpConfig::trusted`]) lets its servers start
//! without an approval: the engine's early gate steps note
//! `trusted MCP configuration <path>` as the connection's `allowed_by`
//! (after the deny rules; ask rules and hooks still apply). The approval
//! request of a connection carries the server's launch line as its subject.
//!
//! The catalog holds every enabled server's tools as deferred tools, from
//! the live listing or the on-disk schema cache; it is rebuilt whenever the
//! pool reports a new listing (first connection, `list_changed`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::{Value, json};

use crate::catalog::cell::CatalogCell;
use crate::catalog::{Loading, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec};
use crate::mcp::{ConnectCheck, ConnectFuture, McpConfig, McpError, McpPool, PoolOptions, naming};

/// Servers the gate allowed to start, shared with the pool's check.
#[derive(Default)]
struct Allowed(Mutex<HashSet<String>>);

impl Allowed {
    fn contains(&self, server: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(server)
    }

    /// Adds `server`; whether it was not there.
    fn insert(&self, server: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(server.to_owned())
    }

    fn remove(&self, server: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(server);
    }
}

/// The pool's connect check: only servers the gate allowed, and, while
/// their start runs, servers started before a program's first call
/// (`prestart.rs`: the gate's steps that run without a person or a hook
/// would allow them).
struct GateAllowed {
    allowed: Arc<Allowed>,
    prestarting: Arc<Allowed>,
}

impl ConnectCheck for GateAllowed {
    fn check(&self, server: &str, _: Option<&ToolContext>) -> ConnectFuture {
        let result = if self.allowed.contains(server) || self.prestarting.contains(server) {
            Ok(())
        } else {
            Err(format!("the gate has not allowed `{}`", naming::connect_name(server)))
        };
        Box::pin(async move { result })
    }
}

/// The engine's side of its MCP servers.
pub(crate) struct McpLink {
    pub pool: McpPool,
    allowed: Arc<Allowed>,
    /// Servers whose start before a program's first call is running
    /// ([`McpLink::prestart`]).
    prestarting: Arc<Allowed>,
    /// Enabled servers, in name order.
    servers: Vec<String>,
    /// Servers configured `read_only` (only read-only tools exposed).
    read_only: Vec<String>,
    /// Servers configured `disabled`.
    disabled: Vec<String>,
    /// Servers reached over HTTP: connecting to one starts no process, and
    /// its tool list, cached by URL, may be another server's by now.
    remote: Vec<String>,
    catalog: OnceLock<Weak<CatalogCell>>,
    /// One lock per server, held while a call decides and starts it.
    start_locks: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// What lets a trusted configuration's servers start without an
    /// approval (`trusted MCP configuration <path>`); `None` when the
    /// configuration is not trusted.
    trusted_by: Option<String>,
    /// The catalog names of the tools `disabledTools` hides, with why
    /// (naming the server and the config file).
    disabled_tools: std::collections::HashMap<String, String>,
    /// Each enabled server's `mcp_connect__<server>` name and what starting
    /// it runs ([`ServerConfig::launch_line`](crate::mcp::ServerConfig::launch_line)).
    launches: std::collections::HashMap<String, String>,
    /// The tools already said to be left out of the catalog: each is said
    /// once, not at every rebuild.
    left_out: Mutex<std::collections::HashSet<String>>,
}

impl McpLink {
    /// Logs each of `skipped` (a tool left out of the catalog, and why)
    /// once.
    pub(crate) fn warn_left_out(&self, skipped: impl IntoIterator<Item = impl std::fmt::Display>) {
        let mut said = self.left_out.lock().unwrap_or_else(|p| p.into_inner());
        for tool in skipped {
            let text = tool.to_string();
            if said.insert(text.clone()) {
                tracing::warn!("an MCP tool was left out of the catalog: {text}");
            }
        }
    }

    /// Waits until no other call is deciding or starting `server`; the
    /// guard keeps the others waiting until dropped.
    pub(crate) async fn start_lock(&self, server: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .start_locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(server.to_owned())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    /// The link over `config`'s servers (nothing starts), and the
    /// `mcp_connect__<server>` tools to put in the catalog.
    pub(crate) fn new(config: McpConfig, mut options: PoolOptions) -> (Arc<McpLink>, Vec<Arc<dyn Tool>>) {
        let allowed = Arc::new(Allowed::default());
        let prestarting = Arc::new(Allowed::default());
        options.connect_check =
            Some(Arc::new(GateAllowed { allowed: allowed.clone(), prestarting: prestarting.clone() }));
        let servers: Vec<String> = config.enabled().map(|s| s.name.clone()).collect();
        let trusted_by = config.trusted.then(|| match &config.source {
            Some(path) => format!("trusted MCP configuration {}", path.display()),
            None => "trusted MCP configuration (given by the host)".to_owned(),
        });
        let launches = config.enabled().map(|s| (naming::connect_name(&s.name), s.launch_line())).collect();
        let read_only = config.enabled().filter(|s| s.read_only).map(|s| s.name.clone()).collect();
        let disabled = config.servers.values().filter(|s| s.disabled).map(|s| s.name.clone()).collect();
        let remote = config
            .enabled()
            .filter(|s| matches!(s.transport, crate::mcp::Transport::Http { .. }))
            .map(|s| s.name.clone())
            .collect();
        let file =
            config.source.as_ref().map_or_else(|| "the MCP config".to_owned(), |p| p.display().to_string());
        let disabled_tools = config
            .enabled()
            .flat_map(|s| {
                s.disabled_tools.iter().map(|tool| {
                    let why = format!(
                        "`{tool}` of MCP server `{server}` is disabled by `disabledTools` in {file}",
                        server = s.name
                    );
                    (naming::tool_name(&s.name, tool), why)
                })
            })
            .collect();
        // A connect call may take the server's startup plus the listing: its
        // own timeout must not cut in before theirs, which say what failed.
        let budgets: Vec<std::time::Duration> = config
            .enabled()
            .map(|s| s.startup_timeout + options.list_timeout + std::time::Duration::from_secs(5))
            .collect();
        let pool = McpPool::new(config, options);
        let link = Arc::new(McpLink {
            pool,
            allowed,
            prestarting,
            servers,
            read_only,
            disabled,
            remote,
            disabled_tools,
            catalog: OnceLock::new(),
            start_locks: Mutex::default(),
            trusted_by,
            launches,
            left_out: Mutex::default(),
        });
        let connect_tools = link
            .servers
            .iter()
            .zip(budgets)
            .map(|(server, budget)| {
                Arc::new(McpConnect { server: server.clone(), budget, link: Arc::downgrade(&link) })
                    as Arc<dyn Tool>
            })
            .collect();
        (link, connect_tools)
    }

    /// Every enabled server's tools known without starting anything (live
    /// listing, else schema cache), for the catalog.
    pub(crate) fn known_tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            if let Ok(Some(tools)) = self.pool.cached_tools(server) {
                out.extend(tools.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>));
            }
        }
        out
    }

    /// Links the catalog to rebuild, and starts following the pool's
    /// listings on `runtime`: each new listing rebuilds the catalog.
    pub(crate) fn follow(self: &Arc<Self>, catalog: &Arc<CatalogCell>, runtime: &tokio::runtime::Handle) {
        let _ = self.catalog.set(Arc::downgrade(catalog));
        let mut changes = self.pool.changes();
        let link = Arc::downgrade(self);
        runtime.spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(link) = link.upgrade() else { break };
                link.refresh();
            }
        });
    }

    /// Rebuilds the catalog from the base tools and [`known_tools`]; a tool
    /// with a bad name or schema is left out and logged.
    ///
    /// [`known_tools`]: McpLink::known_tools
    pub(crate) fn refresh(&self) {
        let Some(cell) = self.catalog.get().and_then(Weak::upgrade) else { return };
        self.warn_left_out(cell.rebuild(self.known_tools()));
    }

    /// For `mcp_connect__<server>` of a trusted configuration (a file named
    /// on the command line or given by the host is the user's own): which
    /// file, for the receipt note of the call that started the server
    /// (`trusted MCP configuration <path>`). `None` for any other tool, and
    /// for every tool of an untrusted configuration. The allowance itself is
    /// an allow rule the engine adds when it is built
    /// (`allow_trusted_connections`).
    pub(crate) fn trusted_allowance(&self, tool: &str) -> Option<String> {
        self.trusted_by.clone().filter(|_| self.launches.contains_key(tool))
    }

    /// For `mcp_connect__<server>`: the approval subject, what starting
    /// the server runs (command line or URL, secrets as `${VAR}`).
    pub(crate) fn connect_subject(&self, tool: &str) -> Option<String> {
        self.launches.get(tool).cloned()
    }

    /// Whether `server` is connected now.
    pub(crate) fn is_running(&self, server: &str) -> bool {
        self.pool.servers().iter().any(|s| s.name == server && s.state == crate::mcp::ServerState::Running)
    }

    /// The enabled servers whose tools the catalog does not hold: never
    /// listed in this engine and not in the schema cache. In name order.
    pub(crate) fn unlisted_servers(&self) -> Vec<String> {
        self.servers.iter().filter(|s| matches!(self.pool.cached_tools(s), Ok(None))).cloned().collect()
    }

    /// Whether `server` is reached over HTTP (no process to start).
    pub(crate) fn is_remote(&self, server: &str) -> bool {
        self.remote.iter().any(|s| s == server)
    }

    /// Whether the catalog holds `server`'s tools: from a live listing or
    /// the schema cache.
    pub(crate) fn is_listed(&self, server: &str) -> bool {
        matches!(self.pool.cached_tools(server), Ok(Some(_)))
    }

    /// Whether `server`'s listing (live, else from the schema cache) has
    /// the tool the catalog names `tool`: a run whose catalog was taken
    /// before the listing came (the server was starting for another run)
    /// does not have it yet.
    pub(crate) fn lists_tool(&self, server: &str, tool: &str) -> bool {
        use crate::catalog::Tool as _;
        matches!(self.pool.cached_tools(server), Ok(Some(tools)) if tools.iter().any(|t| t.spec().name == tool))
    }

    /// The error of `server`'s last start, when it failed (or its
    /// connection ended) and it has not run since.
    pub(crate) fn last_failure(&self, server: &str) -> Option<String> {
        self.pool.servers().into_iter().find(|s| s.name == server).and_then(|s| match s.state {
            crate::mcp::ServerState::Failed { error } => Some(error),
            _ => None,
        })
    }

    /// Whether the gate already allowed `server` to start.
    pub(crate) fn is_allowed(&self, server: &str) -> bool {
        self.allowed.contains(server)
    }

    /// Starts `server` on `runtime` before a call asks for it: the caller
    /// (`prestart.rs`) found that the gate's steps that need no person and
    /// run no hook allow `mcp_connect__<server>`. The gate still decides
    /// the start when a call needs the server, and the server does not
    /// count as allowed until then; the pool's connect check lets this
    /// start through only while it runs. A call that needs the server
    /// meanwhile waits for this start (the pool starts a server once).
    /// `ended` is told how the start ended (the error's text when it
    /// failed). Returns whether a start was begun (`false`: one is running).
    pub(crate) fn prestart(
        self: &Arc<Self>,
        server: &str,
        runtime: &tokio::runtime::Handle,
        ended: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> bool {
        if !self.prestarting.insert(server) {
            return false;
        }
        let (link, server) = (self.clone(), server.to_owned());
        runtime.spawn(async move {
            let started = link.pool.connect(&server).await;
            link.prestarting.remove(&server);
            match started {
                Ok(_) => {
                    link.refresh();
                    ended(Ok(()));
                }
                Err(e) => {
                    tracing::debug!(server = %server, "an MCP server started before its first call failed: {e}");
                    ended(Err(e.to_string()));
                }
            }
        });
        true
    }

    /// The enabled server a program's call of `tool` needs: the server of
    /// a catalog entry from an MCP server, of `mcp_connect__<server>`, or
    /// named in `mcp__<server>__...` (plain server names only).
    pub(crate) fn server_needed_by(&self, catalog: &crate::catalog::Catalog, tool: &str) -> Option<String> {
        if let Some(crate::catalog::ToolSource::Mcp { server }) = catalog.get(tool).map(|e| &e.spec.source) {
            return Some(server.clone());
        }
        if tool.starts_with(naming::CONNECT_PREFIX) {
            return self.servers.iter().find(|s| naming::connect_name(s) == tool).cloned();
        }
        self.server_of_unlisted(tool).map(str::to_owned)
    }

    /// The enabled server whose tools are named `mcp__<server>__...`, for a
    /// call of a tool the catalog does not have yet (server not listed and
    /// not cached). Only servers whose names need no sanitising can be
    /// found this way; others are reached through `mcp_connect__<server>`.
    pub(crate) fn server_of_unlisted(&self, tool: &str) -> Option<&str> {
        server_named_in(&self.servers, tool)
    }

    /// The disabled server a tool name points at (`mcp__<server>__...`).
    pub(crate) fn disabled_server_of(&self, tool: &str) -> Option<&str> {
        server_named_in(&self.disabled, tool)
    }

    /// Why the catalog does not hold `tool` (a catalog name) although its
    /// server lists it: `disabledTools` in the config file, or a tool that
    /// runs only as a task (known once the server has listed it).
    pub(crate) fn why_hidden(&self, tool: &str) -> Option<String> {
        if let Some(why) = self.disabled_tools.get(tool) {
            return Some(why.clone());
        }
        if let Some(left_out) = self.unavailable().into_iter().find(|u| u.spec.name == tool) {
            return Some(format!(
                "`{tool}` is listed by its MCP server but is unavailable: {}",
                left_out.why
            ));
        }
        self.servers.iter().find_map(|server| {
            let hidden = self.pool.hidden_tools(server).ok()?;
            hidden
                .into_iter()
                .find(|(name, _)| naming::tool_name(server, name) == tool)
                .map(|(name, why)| format!("`{name}` of MCP server `{server}` cannot be called: {why}"))
        })
    }

    /// The MCP tools the catalog left out (bad schema, bad name), with why.
    fn unavailable(&self) -> Vec<crate::catalog::cell::Unavailable> {
        let cell = self.catalog.get().and_then(Weak::upgrade);
        cell.map(|c| c.unavailable().as_ref().clone()).unwrap_or_default()
    }

    /// Why `server` may not have listed `tool`, when its configuration
    /// explains it (`read_only`).
    pub(crate) fn why_unlisted(&self, server: &str) -> Option<String> {
        self.read_only.iter().any(|s| s == server).then(|| {
            format!(
                "MCP server `{server}` is configured `read_only`: only its tools annotated readOnlyHint are exposed"
            )
        })
    }

    /// Starts `server` (the gate allowed it), lists its tools, and rebuilds
    /// the catalog; returns the listing as `{server, tools: [{name,
    /// description}]}`.
    ///
    /// # Errors
    /// The pool's start or listing failure.
    pub(crate) async fn connect(&self, server: &str) -> Result<Value, McpError> {
        self.connect_since(server, self.pool.starts_seen(server)).await
    }

    /// [`McpLink::connect`] for a call that counted `seen` finished starts
    /// of `server` before it waited for its turn to start it: a start that
    /// failed meanwhile fails this call too, at once
    /// ([`McpPool::connect_since`]). A running server lists its tools again
    /// (once), for a call of a tool the catalog does not know.
    pub(crate) async fn connect_since(&self, server: &str, seen: u64) -> Result<Value, McpError> {
        self.allowed.insert(server);
        let tools = self.pool.connect_since(server, seen).await?;
        // The listing rebuilds the catalog (also done by the task that
        // follows the pool, but the caller needs it now).
        self.refresh();
        let left_out = self.unavailable();
        let (listed, unavailable): (Vec<Value>, Vec<Value>) = tools
            .iter()
            .map(|t| {
                let spec = t.spec();
                match left_out.iter().find(|u| u.spec.name == spec.name) {
                    Some(u) => json!({"name": spec.name, "why": u.why}),
                    None => json!({"name": spec.name, "description": spec.description}),
                }
            })
            .partition(|t| t.get("why").is_none());
        let mut listing = json!({"server": server, "tools": listed});
        if !unavailable.is_empty() {
            listing["unavailable"] = Value::Array(unavailable);
        }
        let hidden: Vec<Value> = self
            .pool
            .hidden_tools(server)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, why)| json!({"name": naming::tool_name(server, &name), "why": why}))
            .collect();
        if !hidden.is_empty() {
            listing["hidden"] = Value::Array(hidden);
        }
        Ok(listing)
    }
}

/// The server among `servers` whose tools are named `mcp__<server>__...`
/// like `tool` (plain server names only).
fn server_named_in<'a>(servers: &'a [String], tool: &str) -> Option<&'a str> {
    let rest = tool.strip_prefix(naming::TOOL_PREFIX)?;
    servers
        .iter()
        .find(|s| rest.strip_prefix(s.as_str()).is_some_and(|r| r.starts_with("__")))
        .map(String::as_str)
}

/// `mcp_connect__<server>`: starts one MCP server and lists its tools (and
/// the tools it hides, with why). The
/// gate decides it like any call (rules, hooks, approvals), which is how a
/// policy allows or refuses a server.
struct McpConnect {
    server: String,
    /// The call's timeout: the server's startup and listing timeouts, and a
    /// margin.
    budget: std::time::Duration,
    link: Weak<McpLink>,
}

impl Tool for McpConnect {
    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            naming::connect_name(&self.server),
            format!(
                "Start the MCP server `{server}` if it is not running and list its tools as \
                 {{server, tools: [{{name, description}}], hidden?: [{{name, why}}]}}; they are then callable by the \
                 names it lists (`mcp__<server>__<tool>`, with a hash suffix where a name had to change) and found by \
                 tool_search. Calling one of its tools starts it too.",
                server = self.server
            ),
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        // Not read-only: it runs the configured command (which may come with
        // a cloned workspace), so the posture decides it like `bash`.
        .read_only(false)
        .destructive(false)
        .source(ToolSource::Synthetic)
        .loading(Loading::Deferred);
        spec.annotations.open_world = Some(true);
        spec.timeout_ms(u64::try_from(self.budget.as_millis()).unwrap_or(u64::MAX))
    }

    fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
        let (link, server) = (self.link.upgrade(), self.server.clone());
        Box::pin(async move {
            let link = link.ok_or_else(|| ToolError::new("the engine's MCP servers are shut down"))?;
            link.connect(&server).await.map(ToolOutput::new).map_err(|e| ToolError::new(e.to_string()))
        })
    }
}
