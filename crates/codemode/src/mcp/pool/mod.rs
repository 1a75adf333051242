//! `McpPool`: the client side of every configured MCP server.
//!
//! - **Lazy.** Nothing starts when the pool is made. A server starts on the
//!   first [`McpPool::connect`] or [`McpPool::call`] that needs it, after the
//!   pool's [`ConnectCheck`] (the gate's `mcp_connect__<server>`) allowed
//!   it; a refused check starts no process. [`McpPool::servers`] and
//!   [`McpPool::cached_tools`] never start anything.
//! - **Listing.** After the handshake the pool lists the server's tools
//!   (`tools/list`, following `nextCursor` for at most
//!   [`PoolOptions::max_list_pages`] pages, within
//!   [`PoolOptions::list_timeout`]), keeps the list, writes it to the schema
//!   cache, and bumps the change counter ([`McpPool::changes`]). A
//!   `notifications/tools/list_changed` lists again and bumps it again.
//!   One listing of a server runs at a time; whoever needs a fresh list
//!   while one runs waits for it, and those that queue behind it share the
//!   one listing after it (coalesced). A notification is counted as it is
//!   read, so a call answered after it finds the list stale: the next call
//!   of the server's tools (and [`McpPool::connect`]) lists again first.
//!   A notification lists again by itself only once per tool call of the
//!   server (and once after the start), so a server that answers every
//!   listing with `list_changed` costs at most one listing per call, not a
//!   loop. [`McpPool::connect`] on a running server lists again once
//!   (unless a listing finished while it waited): the engine calls it for a
//!   tool name the catalog does not know.
//! - **Calls.** Each `tools/call` has a timeout (the server's `timeout_ms`,
//!   else the pool's default). A call cut by its timeout, or dropped by its
//!   caller (the run deadline), sends `notifications/cancelled` (rmcp sends
//!   it when the request future is dropped). A call pending when the
//!   connection ends fails at once with the cause and the stderr tail.
//!   Over streamable HTTP, a call whose connection is lost (refused, reset,
//!   the stream closed and not resumed) fails with what happened on the wire
//!   and marks the connection down; a session the server no longer knows is
//!   renewed once (see [`super::streamable_http`]).
//! - **Eras and server requests.** Each server is spoken to in its
//!   protocol era (see `era.rs`; the era is kept in the schema cache), and
//!   its questions are answered by the calling tool call's elicitor (see
//!   `requests.rs`). A modern server's `input_required` result is answered
//!   and the call retried with the server's `requestState` echoed verbatim,
//!   at most [`MAX_INPUT_ROUNDS`] times.
//! - **Restarts.** A connection that ended is started again on the next use.
//!   After a failure (start failed, or the connection ended less than
//!   [`STABLE_AFTER`] after it started) the next start waits
//!   `250 ms * 2^(failures-1)`, at most [`MAX_BACKOFF`]; a connection that
//!   lived longer resets the count. Calls that waited for a start that
//!   failed all fail with its error at once; they do not start the server
//!   again one after the other.
//! - **Idle stop.** With [`PoolOptions::idle_stop`], a server with no
//!   call in flight and none for that long is stopped (its process group
//!   ended) by a sweep that runs while the pool lives; its next use starts
//!   it again, as after any end (`idle.rs`).
//! - **Shutdown.** [`McpPool::shutdown`] (or dropping the last handle) ends
//!   every connection: the session is closed and each stdio server's process
//!   group is killed and reaped.
//!
//! The parts: starting a server (`connecting.rs`), tool calls
//! (`calls.rs`), listing tools (`listing.rs`) and stopping idle servers
//! (`idle.rs`).

mod calls;
mod connecting;
mod idle;
mod listing;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::McpError;
use super::cache;
use super::config::{McpConfig, ServerConfig, Transport};
use super::connection::Connection;
use super::era::Era;
use super::tool::McpTool;
use crate::catalog::ToolContext;
pub use calls::MAX_INPUT_ROUNDS;
pub use connecting::{MAX_BACKOFF, STABLE_AFTER};

/// The future a [`ConnectCheck`] returns: `Err(reason)` refuses.
pub type ConnectFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>>;

/// Decides whether a server may be started (the gate's
/// `mcp_connect__<server>` permission). Asked before every start,
/// including restarts; never asked for a server that is already running.
pub trait ConnectCheck: Send + Sync + 'static {
    /// `server` is the configured name; `cx` is the tool call that needs
    /// the server, or `None` for [`McpPool::connect`] without a call.
    /// `Err(reason)` refuses: no process starts and the call fails with
    /// [`McpError::ConnectRefused`].
    fn check(&self, server: &str, cx: Option<&ToolContext>) -> ConnectFuture;
}

/// Settings of an [`McpPool`]. Every field states its default.
#[derive(Clone)]
pub struct PoolOptions {
    /// Folder of the schema cache; `None` keeps no cache. Default:
    /// [`default_cache_dir`](super::default_cache_dir).
    pub cache_dir: Option<PathBuf>,
    /// Timeout of a tool call when the server has no `timeout_ms`.
    /// Default: 120 s.
    pub default_call_timeout: Duration,
    /// Timeout of listing a server's tools (all pages). Default: 30 s.
    pub list_timeout: Duration,
    /// Most `tools/list` pages read. Default: 100.
    pub max_list_pages: usize,
    /// Largest message accepted from a server, bytes (a stdio line, an HTTP
    /// JSON body or SSE event). Default: 16 MiB.
    pub max_message_bytes: usize,
    /// Asked before a server starts. Default: none (every start allowed).
    pub connect_check: Option<Arc<dyn ConnectCheck>>,
    /// The workspace folder (absolute, canonical) given as the one root to
    /// a server's `roots/list` when no tool call is in flight (during a call
    /// the call's [`ToolContext::workspace`] is). Default: none (no root).
    pub workspace: Option<PathBuf>,
    /// The run's consent to authorize in a browser when an HTTP server
    /// with a login asks for more scope (a 403 `insufficient_scope`) or
    /// refuses the login (a 401 a refresh did not cure): step-up
    /// authorization, at most [`MAX_REAUTHORIZATIONS`](crate::mcp::oauth::MAX_REAUTHORIZATIONS)
    /// per server (the CLI's `--login`; docs/MCP.md, "Authorization").
    /// Default: none (such a request fails with
    /// [`McpError::ScopeRequired`](crate::mcp::McpError::ScopeRequired) or
    /// [`McpError::LoginRequired`](crate::mcp::McpError::LoginRequired), and
    /// nothing waits for a browser).
    pub interactive_login: Option<Arc<crate::mcp::oauth::InteractiveLogin>>,
    /// Stop a running server that has had no tool call in flight for this
    /// long; its next call starts it again (the start costs what a first
    /// start does). Checked every quarter of it (at least every 50 ms, at
    /// most every 30 s), so a server may run up to a quarter longer. A
    /// listing alone (`tool_search`, [`McpPool::connect`]) counts as a use
    /// only when it starts the server. Default: none, a server runs until
    /// the pool ends.
    pub idle_stop: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            cache_dir: super::default_cache_dir(),
            default_call_timeout: Duration::from_secs(120),
            list_timeout: Duration::from_secs(30),
            max_list_pages: 100,
            max_message_bytes: 16 << 20,
            connect_check: None,
            workspace: None,
            interactive_login: None,
            idle_stop: None,
        }
    }
}

impl std::fmt::Debug for PoolOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolOptions")
            .field("cache_dir", &self.cache_dir)
            .field("default_call_timeout", &self.default_call_timeout)
            .field("list_timeout", &self.list_timeout)
            .field("max_list_pages", &self.max_list_pages)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("connect_check", &self.connect_check.is_some())
            .field("workspace", &self.workspace)
            .field("interactive_login", &self.interactive_login.is_some())
            .field("idle_stop", &self.idle_stop)
            .finish()
    }
}

/// A server's state as [`McpPool::servers`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// `disabled: true` in the config.
    Disabled,
    /// Not started (yet, or since the pool was made).
    NotStarted,
    /// Connected.
    Running,
    /// The last start failed or the connection ended; it is started again
    /// on next use.
    Failed {
        /// The last error.
        error: String,
    },
}

/// One line of [`McpPool::servers`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: &'static str,
    /// Its state.
    pub state: ServerState,
    /// How many tools it exposes, from the live list or the schema cache;
    /// `None` when neither is known.
    pub tools: Option<usize>,
    /// How many of its listed tools are hidden (`disabledTools`, task-only
    /// tools; see [`McpPool::hidden_tools`]); 0 when not known.
    pub hidden: usize,
    /// The protocol era it speaks, from the live connection or the schema
    /// cache; `None` when neither is known.
    pub era: Option<Era>,
}

/// One listed tool, as the pool keeps it.
pub(crate) struct Listed {
    /// The MCP `Tool` object as the server sent it.
    pub(crate) raw: Value,
    /// The tool's name on the server.
    pub(crate) name: String,
    /// `annotations.readOnlyHint == true`.
    pub(crate) read_only: bool,
    /// `execution.taskSupport == "required"`: the server only runs it as a
    /// task (MCP 2025-11-25 tasks), which codemode does not drive.
    pub(crate) task_required: bool,
    /// The compiled `outputSchema`, when it has a usable one.
    pub(crate) output: Option<Arc<jsonschema::Validator>>,
}

impl Listed {
    fn new(raw: Value) -> Option<Listed> {
        let name = raw.get("name")?.as_str()?.to_owned();
        let read_only = raw.pointer("/annotations/readOnlyHint").and_then(Value::as_bool) == Some(true);
        let task_required = raw.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required");
        let output = raw
            .get("outputSchema")
            .and_then(|schema| crate::catalog::schema_validator(schema).ok())
            .map(Arc::new);
        Some(Listed { raw, name, read_only, task_required, output })
    }
}

enum State {
    Idle,
    Up(Arc<Connection>),
    Failed,
}

/// One configured server.
pub(crate) struct Slot {
    pub(crate) config: ServerConfig,
    /// Held while starting, so one start at a time.
    state: tokio::sync::Mutex<State>,
    /// Mirrors `state` for the synchronous status view.
    status: Mutex<ServerState>,
    /// The last live listing.
    tools: Mutex<Option<Arc<Vec<Listed>>>>,
    /// Failures since the last stable connection, and when the last ended.
    failures: Mutex<(u32, Option<tokio::time::Instant>)>,
    /// Permits for calls at once (`max_in_flight`), when limited.
    in_flight: Option<Arc<tokio::sync::Semaphore>>,
    /// The era of the last connection, once one started.
    era: Mutex<Option<Era>>,
    /// Starts finished, and the last one's error if it failed.
    starts: Mutex<(u64, Option<McpError>)>,
    /// Tool calls in flight, and when the last one ended (or the server
    /// started): what the idle stop reads.
    usage: Mutex<idle::Usage>,
}

pub(crate) struct Inner {
    pub(crate) slots: BTreeMap<String, Arc<Slot>>,
    pub(crate) options: PoolOptions,
    changes: watch::Sender<u64>,
    shut: std::sync::atomic::AtomicBool,
    /// Set once at shutdown: a start still running stops at once (its
    /// process group killed) instead of holding the shutdown up to its
    /// startup timeout.
    stopping: watch::Sender<bool>,
    /// Whether the idle sweep was started (on the first start of a server).
    sweeping: std::sync::atomic::AtomicBool,
}

/// The MCP client pool; a cheap-clone handle (see the module docs).
#[derive(Clone)]
pub struct McpPool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpPool").field("servers", &self.inner.slots.keys().collect::<Vec<_>>()).finish()
    }
}

impl McpPool {
    /// A pool over `config`'s servers. Starts nothing.
    pub fn new(config: McpConfig, options: PoolOptions) -> McpPool {
        let slots = config
            .servers
            .into_iter()
            .map(|(name, config)| {
                let status = if config.disabled { ServerState::Disabled } else { ServerState::NotStarted };
                let in_flight = config.max_in_flight.map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
                let slot = Slot {
                    in_flight,
                    config,
                    state: tokio::sync::Mutex::new(State::Idle),
                    status: Mutex::new(status),
                    tools: Mutex::new(None),
                    failures: Mutex::new((0, None)),
                    era: Mutex::new(None),
                    starts: Mutex::new((0, None)),
                    usage: Mutex::new(idle::Usage::default()),
                };
                (name, Arc::new(slot))
            })
            .collect();
        let (changes, _) = watch::channel(0);
        McpPool {
            inner: Arc::new(Inner {
                slots,
                options,
                changes,
                shut: false.into(),
                stopping: watch::Sender::new(false),
                sweeping: false.into(),
            }),
        }
    }

    /// Every configured server with its state and tool count. Never starts
    /// a server (counts come from the live list or the schema cache).
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.inner
            .slots
            .values()
            .map(|slot| {
                let known = self.known(slot);
                ServerStatus {
                    name: slot.config.name.clone(),
                    transport: match slot.config.transport {
                        Transport::Stdio { .. } => "stdio",
                        Transport::Http { .. } => "http",
                    },
                    state: slot.status.lock().expect("status lock").clone(),
                    tools: known.as_ref().map(|tools| tools.iter().filter(|t| visible(slot, t)).count()),
                    hidden: known
                        .map_or(0, |tools| tools.iter().filter(|t| hidden(slot, t).is_some()).count()),
                    era: self.era(slot),
                }
            })
            .collect()
    }

    /// The server's tools as catalog tools, from the live list or else the
    /// schema cache; `Ok(None)` when neither has them. Never starts it.
    /// `read_only` servers list only their read-only tools.
    ///
    /// # Errors
    /// [`McpError::UnknownServer`], [`McpError::Disabled`].
    pub fn cached_tools(&self, server: &str) -> Result<Option<Vec<McpTool>>, McpError> {
        let slot = self.slot(server)?;
        Ok(self.known(slot).map(|tools| self.tools_of(slot, &tools)))
    }

    /// The tools `server` lists (live, else from the schema cache) that the
    /// configuration or the tool itself hides, each with why: its name on
    /// the server and a sentence naming the server, the tool and the cause
    /// (`disabledTools`, a task-only tool). `read_only` servers' other
    /// tools are not included (`McpError::NotReadOnly` says why). Never
    /// starts the server.
    ///
    /// # Errors
    /// [`McpError::UnknownServer`], [`McpError::Disabled`].
    pub fn hidden_tools(&self, server: &str) -> Result<Vec<(String, String)>, McpError> {
        let slot = self.slot(server)?;
        let tools = self.known(slot).unwrap_or_default();
        Ok(tools.iter().filter_map(|t| Some((t.name.clone(), hidden(slot, t)?))).collect())
    }

    /// A counter bumped whenever a server's tool list changes (a first
    /// listing, a `list_changed` refresh). The engine re-reads
    /// [`McpPool::cached_tools`] of the servers it uses when it moves.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Ends every connection and reaps every server process; later calls
    /// fail with [`McpError::ShutDown`].
    ///
    /// The servers end at once, each in the MCP specification's order (a
    /// stdio server's stdin closed, up to [`STDIN_CLOSE_GRACE`] for it to
    /// exit, SIGTERM, SIGKILL 2 s later): the whole shutdown takes as long
    /// as the slowest server, not the sum.
    ///
    /// [`STDIN_CLOSE_GRACE`]: crate::mcp::STDIN_CLOSE_GRACE
    pub async fn shutdown(&self) {
        self.inner.shut.store(true, std::sync::atomic::Ordering::Release);
        // A start in progress holds its slot: it gives up now.
        self.inner.stopping.send_replace(true);
        let mut stopping = tokio::task::JoinSet::new();
        for slot in self.inner.slots.values() {
            let mut state = slot.state.lock().await;
            if let State::Up(connection) = std::mem::replace(&mut *state, State::Idle) {
                stopping.spawn(async move { connection.stop().await });
            }
            *slot.status.lock().expect("status lock") =
                if slot.config.disabled { ServerState::Disabled } else { ServerState::NotStarted };
        }
        while stopping.join_next().await.is_some() {}
    }

    pub(crate) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(crate) fn upgrade(inner: &Weak<Inner>) -> Option<McpPool> {
        inner.upgrade().map(|inner| McpPool { inner })
    }

    fn slot(&self, server: &str) -> Result<&Arc<Slot>, McpError> {
        let slot =
            self.inner.slots.get(server).ok_or_else(|| McpError::UnknownServer { server: server.into() })?;
        if slot.config.disabled {
            return Err(McpError::Disabled { server: server.into() });
        }
        Ok(slot)
    }

    /// The era of the last connection, else the cached one.
    fn era(&self, slot: &Slot) -> Option<Era> {
        let live = *slot.era.lock().expect("era lock");
        live.or_else(|| cache::read_era(self.inner.options.cache_dir.as_ref()?, &slot.config))
    }

    fn live(&self, slot: &Slot) -> Option<Arc<Vec<Listed>>> {
        slot.tools.lock().expect("tools lock").clone()
    }

    /// The live list, else the cached one.
    fn known(&self, slot: &Slot) -> Option<Arc<Vec<Listed>>> {
        self.live(slot).or_else(|| {
            let dir = self.inner.options.cache_dir.as_ref()?;
            let raw = cache::read(dir, &slot.config)?;
            Some(Arc::new(raw.into_iter().filter_map(Listed::new).collect()))
        })
    }

    fn tools_of(&self, slot: &Slot, tools: &[Listed]) -> Vec<McpTool> {
        tools.iter().filter(|t| visible(slot, t)).map(|t| McpTool::new(self, &slot.config, &t.raw)).collect()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping the connections signals their monitors, which kill and
        // reap the process groups.
        for slot in self.slots.values() {
            if let Ok(mut state) = slot.state.try_lock() {
                *state = State::Idle;
            }
        }
    }
}

/// Whether a listed tool is exposed: not hidden ([`hidden`]), and
/// read-only on a `read_only` server.
fn visible(slot: &Slot, tool: &Listed) -> bool {
    (!slot.config.read_only || tool.read_only) && hidden(slot, tool).is_none()
}

/// Why a listed tool is hidden, if it is: named in the server's
/// `disabledTools`, or declaring `execution.taskSupport: "required"` (MCP
/// 2025-11-25, "Tasks": such a tool must be called as a task, which
/// codemode does not do, so listing it would only offer a call that fails).
fn hidden(slot: &Slot, tool: &Listed) -> Option<String> {
    if slot.config.disabled_tools.contains(&tool.name) {
        return Some(disabled_why(slot));
    }
    tool.task_required.then(|| {
        "it declares `execution.taskSupport: \"required\"` (it runs only as an MCP task, which codemode \
         does not support), so it is hidden"
            .to_owned()
    })
}

fn disabled_why(slot: &Slot) -> String {
    format!(
        "MCP server `{}` lists it in `disabledTools` in the MCP config, so it is hidden",
        slot.config.name
    )
}

/// `error` with the secrets of `slot`'s launch taken out
/// ([`ServerConfig::redact`]): every error leaving the pool, and every
/// error it keeps for [`McpPool::servers`], goes through here.
fn redacted(slot: &Slot, error: McpError) -> McpError {
    error.redacted(|text| slot.config.redact(text))
}
