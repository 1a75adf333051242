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
//! - **Shutdown.** [`McpPool::shutdown`] (or dropping the last handle) ends
//!   every connection: the session is closed and each stdio server's process
//!   group is killed and reaped.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio::sync::watch;

use super::McpError;
use super::cache;
use super::config::{McpConfig, ServerConfig, Transport};
use super::connection::{Connection, Down};
use super::content;
use super::era::Era;
use super::requests::Asker;
#[cfg(feature = "http")]
use super::streamable_http;
use super::tool::McpTool;
use crate::catalog::{ToolContext, ToolOutput};

/// A connection that lived this long before it ended resets the backoff.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Longest wait before restarting a failing server.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Most `input_required` results (MCP 2026-07-28 multi round-trip requests)
/// one tool call answers before it fails; the same bound as rmcp's and the
/// reference SDKs' default.
pub const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

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
}

pub(crate) struct Inner {
    pub(crate) slots: BTreeMap<String, Arc<Slot>>,
    pub(crate) options: PoolOptions,
    changes: watch::Sender<u64>,
    shut: std::sync::atomic::AtomicBool,
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
                };
                (name, Arc::new(slot))
            })
            .collect();
        let (changes, _) = watch::channel(0);
        McpPool { inner: Arc::new(Inner { slots, options, changes, shut: false.into() }) }
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

    /// Starts `server` if it is not running (asking the
    /// [`ConnectCheck`]), and returns its tools as catalog tools. The one
    /// entry point the engine calls once the gate allowed
    /// `mcp_connect__<server>`.
    ///
    /// # Errors
    /// Any start or listing failure: [`McpError::ConnectRefused`],
    /// [`McpError::Spawn`], [`McpError::StartupTimeout`],
    /// [`McpError::Initialize`], [`McpError::ListTimeout`],
    /// [`McpError::TooManyPages`], ...
    pub async fn connect(&self, server: &str) -> Result<Vec<McpTool>, McpError> {
        self.connect_since(server, self.starts_seen(server)).await
    }

    /// How many starts of `server` have finished (0 for an unknown
    /// server); given to [`McpPool::connect_since`] by a caller that may
    /// wait before it connects.
    pub(crate) fn starts_seen(&self, server: &str) -> u64 {
        self.inner.slots.get(server).map_or(0, |slot| slot.starts.lock().expect("starts lock").0)
    }

    /// [`McpPool::connect`] for a caller that counted `seen` finished
    /// starts before it began waiting: a start that failed since fails it
    /// with the same error, without starting the server again. A running
    /// server lists its tools again (once, shared with a listing that
    /// finished while this waited).
    pub(crate) async fn connect_since(&self, server: &str, seen: u64) -> Result<Vec<McpTool>, McpError> {
        let slot = self.slot(server)?;
        let (connection, started) =
            self.connection(slot, None, Some(seen)).await.map_err(|e| redacted(slot, e))?;
        if !started {
            fresh(&self.inner, slot, &connection, true).await.map_err(|e| redacted(slot, e))?;
        }
        let tools = self.live(slot).unwrap_or_default();
        Ok(self.tools_of(slot, &tools))
    }

    /// Calls `tool` (its name on the server) with `args` (a JSON object),
    /// starting the server if needed. `timeout` overrides the server's
    /// `timeout_ms` and the pool's default; `cx` is passed to the
    /// [`ConnectCheck`].
    ///
    /// # Errors
    /// Start failures as [`McpPool::connect`];
    /// [`McpError::NotReadOnly`] for a refused tool of a `read_only` server;
    /// [`McpError::CallTimeout`]; [`McpError::Stopped`] /
    /// [`McpError::MessageTooLarge`] when the connection ended;
    /// [`McpError::Protocol`] for a JSON-RPC error;
    /// [`McpError::ToolFailed`] for `isError: true`;
    /// [`McpError::InvalidOutput`].
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        timeout: Option<Duration>,
        cx: Option<&ToolContext>,
    ) -> Result<ToolOutput, McpError> {
        let slot = self.slot(server)?;
        let timeout = timeout.or(slot.config.timeout).unwrap_or(self.inner.options.default_call_timeout);
        self.call_on(slot, tool, args, Some(timeout), cx).await.map_err(|e| redacted(slot, e))
    }

    /// [`McpPool::call`] without a timeout of its own: the caller times the
    /// call (the engine does, with the tool's timeout from the MCP config
    /// or `codemode.toml`), so a timeout ends it the same way wherever it
    /// was set.
    pub(crate) async fn call_untimed(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        cx: Option<&ToolContext>,
    ) -> Result<ToolOutput, McpError> {
        let slot = self.slot(server)?;
        self.call_on(slot, tool, args, None, cx).await.map_err(|e| redacted(slot, e))
    }

    /// [`McpPool::call`] on `slot`, errors not yet redacted; no `timeout`
    /// leaves timing to the caller.
    async fn call_on(
        &self,
        slot: &Arc<Slot>,
        tool: &str,
        args: Value,
        timeout: Option<Duration>,
        cx: Option<&ToolContext>,
    ) -> Result<ToolOutput, McpError> {
        let server = slot.config.name.as_str();
        let seen = slot.starts.lock().expect("starts lock").0;
        let (connection, _) = self.connection(slot, cx, Some(seen)).await?;
        // A `list_changed` received before this call applies to it. A call
        // that did not list lets one later notification list by itself.
        if !fresh(&self.inner, slot, &connection, false).await? {
            connection.listing.eager.store(true, std::sync::atomic::Ordering::Release);
        }
        let listed = self.live(slot).and_then(|tools| {
            let i = tools.iter().position(|t| t.name == tool)?;
            if let Some(why) = hidden(slot, &tools[i]) {
                return Some(Err(why));
            }
            Some(Ok((tools[i].read_only, tools[i].output.clone())))
        });
        let listed = match listed {
            Some(Err(why)) => return Err(McpError::Hidden { server: server.into(), tool: tool.into(), why }),
            Some(Ok(listed)) => Some(listed),
            None if slot.config.disabled_tools.contains(tool) => {
                return Err(McpError::Hidden {
                    server: server.into(),
                    tool: tool.into(),
                    why: disabled_why(slot),
                });
            }
            None => None,
        };
        if slot.config.read_only && !matches!(listed, Some((true, _))) {
            return Err(McpError::NotReadOnly { server: server.into(), tool: tool.into() });
        }
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(McpError::Protocol {
                    server: server.into(),
                    method: "tools/call".into(),
                    message: format!("arguments must be a JSON object, not {other}"),
                });
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        // Dropping the request future (timeout, down, or our caller's drop)
        // makes rmcp send notifications/cancelled. A server's
        // `max_in_flight` holds the call back first; the wait counts
        // against its timeout.
        // The call is in flight (its questions are answered by its context)
        // until the guard drops with the request future.
        let (limit, peer) = (slot.in_flight.clone(), connection.peer.clone());
        let guard = connection.requests.begin(cx);
        let request = async move {
            let _permit = match limit {
                Some(limit) => Some(limit.acquire_owned().await),
                None => None,
            };
            call_rounds(&peer, params, guard.asker()).await
        };
        let request = async move {
            match timeout {
                Some(timeout) => tokio::time::timeout(timeout, request).await.map_err(|_| timeout),
                None => Ok(request.await),
            }
        };
        let result = tokio::select! {
            r = request => r,
            _ = connection.down() => return Err(self.ended(slot, &connection).await),
        };
        match result {
            Err(timeout) => Err(McpError::CallTimeout { server: server.into(), tool: tool.into(), timeout }),
            Ok(Err(Round::Service(error))) => {
                Err(self.service_error(slot, &connection, "tools/call", error).await)
            }
            Ok(Err(Round::Refused(message))) => {
                Err(McpError::RoundsAbandoned { server: server.into(), method: "tools/call".into(), message })
            }
            Ok(Ok(result)) => {
                let result = serde_json::to_value(result).unwrap_or(Value::Null);
                content::to_output(server, tool, result, listed.as_ref().and_then(|l| l.1.as_deref()))
            }
        }
    }

    /// A counter bumped whenever a server's tool list changes (a first
    /// listing, a `list_changed` refresh). The engine re-reads
    /// [`McpPool::cached_tools`] of the servers it uses when it moves.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Ends every connection and reaps every server process; later calls
    /// fail with [`McpError::ShutDown`].
    pub async fn shutdown(&self) {
        self.inner.shut.store(true, std::sync::atomic::Ordering::Release);
        for slot in self.inner.slots.values() {
            let mut state = slot.state.lock().await;
            if let State::Up(connection) = std::mem::replace(&mut *state, State::Idle) {
                connection.stop().await;
            }
            *slot.status.lock().expect("status lock") =
                if slot.config.disabled { ServerState::Disabled } else { ServerState::NotStarted };
        }
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

    /// The live connection, started if needed (see the module docs). With
    /// `seen` (the finished starts counted before the caller began to
    /// wait), a start that failed since is this call's failure too.
    /// Returns the connection and whether this call started it.
    async fn connection(
        &self,
        slot: &Arc<Slot>,
        cx: Option<&ToolContext>,
        seen: Option<u64>,
    ) -> Result<(Arc<Connection>, bool), McpError> {
        let server = &slot.config.name;
        let mut state = slot.state.lock().await;
        if self.inner.shut.load(std::sync::atomic::Ordering::Acquire) {
            return Err(McpError::ShutDown { server: server.clone() });
        }
        if let State::Up(connection) = &*state {
            match connection.is_down() {
                None => return Ok((connection.clone(), false)),
                Some(_) => {
                    self.note_end(slot, connection.started.elapsed());
                    connection.stop().await;
                    *state = State::Failed;
                }
            }
        }
        if let Some(seen) = seen {
            let starts = slot.starts.lock().expect("starts lock");
            if starts.0 > seen
                && let Some(error) = &starts.1
            {
                return Err(error.clone());
            }
        }
        if let Some(check) = &self.inner.options.connect_check {
            check
                .check(server, cx)
                .await
                .map_err(|reason| McpError::ConnectRefused { server: server.clone(), reason })?;
        }
        let wait = {
            let (failures, last) = *slot.failures.lock().expect("failures lock");
            match (failures, last) {
                (0, _) | (_, None) => Duration::ZERO,
                (n, Some(at)) => backoff(n).saturating_sub(at.elapsed()),
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let options = &self.inner.options;
        let hint = self.era(slot);
        let start =
            Connection::start(&slot.config, options.max_message_bytes, hint, options.workspace.clone());
        let started = match start.await {
            Ok(started) => started,
            Err(error) => return Err(self.fail(slot, &mut state, error)),
        };
        let connection = started.connection;
        *slot.era.lock().expect("era lock") = Some(connection.era);
        if let Err(error) = fresh(&self.inner, slot, &connection, true).await {
            connection.stop().await;
            return Err(self.fail(slot, &mut state, error));
        }
        connection.listing.eager.store(true, std::sync::atomic::Ordering::Release);
        let mut starts = slot.starts.lock().expect("starts lock");
        *starts = (starts.0 + 1, None);
        drop(starts);
        tokio::spawn(refresh(
            Arc::downgrade(&self.inner),
            slot.clone(),
            Arc::downgrade(&connection),
            started.list_changed,
        ));
        *state = State::Up(connection.clone());
        *slot.status.lock().expect("status lock") = ServerState::Running;
        Ok((connection, true))
    }

    fn fail(&self, slot: &Slot, state: &mut State, error: McpError) -> McpError {
        self.note_end(slot, Duration::ZERO);
        let error = redacted(slot, error);
        let mut starts = slot.starts.lock().expect("starts lock");
        *starts = (starts.0 + 1, Some(error.clone()));
        drop(starts);
        *slot.status.lock().expect("status lock") = ServerState::Failed { error: error.to_string() };
        *state = State::Failed;
        error
    }

    /// Counts a failure (or resets after a stable connection).
    fn note_end(&self, slot: &Slot, lived: Duration) {
        let mut failures = slot.failures.lock().expect("failures lock");
        failures.0 = if lived >= STABLE_AFTER { 0 } else { failures.0.saturating_add(1) };
        failures.1 = Some(tokio::time::Instant::now());
    }

    /// The error for a request cut by the end of the connection; marks the
    /// server failed so the next use restarts it.
    async fn ended(&self, slot: &Slot, connection: &Connection) -> McpError {
        let error = redacted(slot, connection.down_error().await);
        *slot.status.lock().expect("status lock") = ServerState::Failed { error: error.to_string() };
        error
    }

    async fn service_error(
        &self,
        slot: &Slot,
        connection: &Connection,
        method: &str,
        error: ServiceError,
    ) -> McpError {
        let server = slot.config.name.clone();
        // Over HTTP, a request that failed without an answer says what
        // happened on the wire; a lost connection is marked down, so the
        // next use starts a new one (with the back-off).
        if let Some(lost) = http_lost(&slot.config, &error) {
            if lost.down {
                connection.lost(lost.cause);
                return self.ended(slot, connection).await;
            }
            return McpError::Stopped { server, cause: lost.cause, stderr: String::new() };
        }
        match error {
            ServiceError::McpError(data) => {
                McpError::Protocol { server, method: method.into(), message: data.message.to_string() }
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if connection.is_down().is_some()
                    || matches!(slot.config.transport, Transport::Stdio { .. }) =>
            {
                self.ended(slot, connection).await
            }
            other => McpError::Protocol {
                server,
                method: method.into(),
                message: super::connection::error_text(&other),
            },
        }
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

fn backoff(failures: u32) -> Duration {
    let ms = 250u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(MAX_BACKOFF)
}

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

/// What happened to an HTTP request that failed without an answer (see
/// [`streamable_http::lost`]); `None` for stdio and for a server's answer.
#[cfg(feature = "http")]
fn http_lost(config: &ServerConfig, error: &ServiceError) -> Option<streamable_http::Lost> {
    match &config.shown {
        Transport::Http { url, .. } => streamable_http::lost(error, url),
        Transport::Stdio { .. } => None,
    }
}

/// Without the `http` feature no server is reached over HTTP.
#[cfg(not(feature = "http"))]
fn http_lost(_config: &ServerConfig, _error: &ServiceError) -> Option<NoHttp> {
    None
}

/// What [`http_lost`] would say, in a build without HTTP: never made.
#[cfg(not(feature = "http"))]
struct NoHttp {
    cause: String,
    down: bool,
}

/// Why a tool call's rounds failed.
enum Round {
    /// The request failed (transport, JSON-RPC error, unexpected answer).
    Service(ServiceError),
    /// The server's `input_required` result could not be answered: what it
    /// asked for, in words.
    Refused(String),
}

/// One `tools/call`, answering `input_required` results (MCP 2026-07-28,
/// multi round-trip requests) until the server completes it: each
/// elicitation is asked of the call's elicitor, each `roots/list` answered
/// with the workspace, and the call sent again (a new JSON-RPC id) with the
/// answers and the server's `requestState` echoed verbatim. At most
/// [`MAX_INPUT_ROUNDS`] rounds; a sampling request (codemode has no model)
/// or a task (not supported here) fails the call.
async fn call_rounds(
    peer: &rmcp::service::Peer<rmcp::service::RoleClient>,
    mut params: CallToolRequestParams,
    asker: Asker,
) -> Result<rmcp::model::CallToolResult, Round> {
    use rmcp::model::{CallToolResponse, InputRequest};
    for _ in 0..MAX_INPUT_ROUNDS {
        let input = match peer.call_tool_once(params.clone()).await.map_err(Round::Service)? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(input) => input,
            CallToolResponse::Task(_) => {
                return Err(Round::Refused(
                    "the server made the call a task, which codemode does not follow; \
                     the tool cannot be used from codemode"
                        .into(),
                ));
            }
            _ => return Err(Round::Service(ServiceError::UnexpectedResponse)),
        };
        let asked = input.input_requests.unwrap_or_default();
        if asked.is_empty() && input.request_state.is_none() {
            return Err(Round::Refused(
                "the server answered input_required without inputRequests or requestState".into(),
            ));
        }
        let mut answers = rmcp::model::InputResponses::new();
        for (key, request) in asked {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    let asker = asker.clone();
                    serde_json::to_value(asker.elicit(request.params, std::future::pending()).await)
                }
                #[allow(deprecated)]
                InputRequest::ListRoots(_) => serde_json::to_value(asker.roots()),
                InputRequest::CreateMessage(_) => {
                    return Err(Round::Refused(format!(
                        "the server asked for sampling (`sampling/createMessage`, input request `{key}`), \
                         which codemode does not offer: it has no model"
                    )));
                }
                _ => {
                    return Err(Round::Refused(format!(
                        "the server asked for input codemode does not know (input request `{key}`)"
                    )));
                }
            };
            answers.insert(key, answer.unwrap_or(Value::Null));
        }
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = input.request_state;
    }
    Err(Round::Refused(format!(
        "the server still asked for input after {MAX_INPUT_ROUNDS} rounds; the call was abandoned"
    )))
}

/// Lists every tool of a connection, page by page (see the module docs).
async fn list(
    connection: &Connection,
    options: &PoolOptions,
    config: &ServerConfig,
) -> Result<Vec<Value>, McpError> {
    let server = connection.server.clone();
    let pages = async {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..options.max_list_pages {
            let params = cursor.take().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let list_error = |e: ServiceError| match http_lost(config, &e) {
                Some(lost) => {
                    if lost.down {
                        connection.lost(lost.cause.clone());
                    }
                    McpError::Stopped { server: server.clone(), cause: lost.cause, stderr: String::new() }
                }
                None => match e {
                    ServiceError::McpError(data) => McpError::Protocol {
                        server: server.clone(),
                        method: "tools/list".into(),
                        message: data.message.to_string(),
                    },
                    ServiceError::TransportClosed => McpError::Stopped {
                        server: server.clone(),
                        cause: "the connection closed".into(),
                        stderr: connection.stderr.text(),
                    },
                    other => McpError::Protocol {
                        server: server.clone(),
                        method: "tools/list".into(),
                        message: super::connection::error_text(&other),
                    },
                },
            };
            // (A page kept from an earlier answer is not this one's.)
            let _ = connection.listing_tap.take_tools_page();
            let (page, next_cursor) = match connection.peer.list_tools(params).await {
                Ok(page) => (
                    page.tools.into_iter().filter_map(|t| serde_json::to_value(t).ok()).collect::<Vec<_>>(),
                    page.next_cursor,
                ),
                // A stdio stream that ended: how it ended (a message too
                // large or nested too deeply, the process's exit).
                Err(ServiceError::TransportClosed) if matches!(config.transport, Transport::Stdio { .. }) => {
                    return Err(connection.down_error().await);
                }
                // rmcp's typed page refused the answer (a tool without
                // `inputSchema`, which MCP.md reads as an object schema):
                // the page as the raw messages had it (stdio).
                Err(ServiceError::UnexpectedResponse)
                    if let Some(raw) = connection.listing_tap.take_tools_page() =>
                {
                    raw
                }
                Err(e) => return Err(list_error(e)),
            };
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
        Err(McpError::TooManyPages { server: server.clone(), pages: options.max_list_pages })
    };
    tokio::select! {
        r = tokio::time::timeout(options.list_timeout, pages) => {
            r.unwrap_or_else(|_| Err(McpError::ListTimeout { server: server.clone(), timeout: options.list_timeout }))
        }
        down = connection.down() => Err(match down {
            Down::TooLarge => McpError::MessageTooLarge { server, limit_bytes: connection.limit },
            Down::TooDeep => McpError::TooDeep { server, limit: super::connection::MAX_JSON_DEPTH },
            _ => connection.down_error().await,
        }),
    }
}

/// Makes `slot`'s listing cover every `list_changed` that `connection`
/// received (one listing in flight; callers that arrive while it runs wait
/// for it and share the next one). With `force`, lists even when the list
/// is not stale, unless a listing finished while this waited for the
/// lock. Returns whether it listed.
async fn fresh(inner: &Inner, slot: &Slot, connection: &Connection, force: bool) -> Result<bool, McpError> {
    use std::sync::atomic::Ordering;
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
async fn refresh(
    inner: Weak<Inner>,
    slot: Arc<Slot>,
    connection: Weak<Connection>,
    mut list_changed: tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    while list_changed.recv().await.is_some() {
        while list_changed.try_recv().is_ok() {}
        let (Some(inner), Some(connection)) = (inner.upgrade(), connection.upgrade()) else { return };
        if !connection.listing.eager.swap(false, std::sync::atomic::Ordering::AcqRel) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(4), Duration::from_secs(2));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
