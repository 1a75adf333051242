//! Tool calls: the tool's listing checked (hidden, read-only), the
//! `max_in_flight` permit, the timeout, `input_required` rounds answered,
//! and the errors a call can end with (the connection's end, a lost HTTP
//! connection, a JSON-RPC error).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde_json::Value;

use super::listing::fresh;
use super::{McpPool, ServerState, Slot, disabled_why, hidden, redacted};
use crate::catalog::{ToolContext, ToolOutput};
use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::connection::{Connection, error_text};
use crate::mcp::requests::Asker;
#[cfg(feature = "http")]
use crate::mcp::streamable_http;
use crate::mcp::{McpError, content};

/// Most `input_required` results (MCP 2026-07-28 multi round-trip requests)
/// one tool call answers before it fails; the same bound as rmcp's and the
/// reference SDKs' default.
pub const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

impl McpPool {
    /// Calls `tool` (its name on the server) with `args` (a JSON object),
    /// starting the server if needed. `timeout` overrides the server's
    /// `timeout_ms` and the pool's default; `cx` is passed to the
    /// `ConnectCheck`.
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
        let _in_use = super::idle::InUse::new(slot);
        let seen = slot.starts.lock().expect("starts lock").0;
        let (connection, _) = self.connection(slot, cx, Some(seen)).await?;
        // A `list_changed` received before this call applies to it. A call
        // that did not list lets one later notification list by itself.
        if !fresh(&self.inner, slot, &connection, false).await? {
            connection.listing.eager.store(true, Ordering::Release);
        }
        let listed = self.callable(slot, tool)?;
        let params = call_params(server, tool, args, cx.and_then(|cx| cx.trace.as_ref()))?;
        let request = request(slot, &connection, params, timeout, cx);
        let result = tokio::select! {
            r = request => r,
            _ = connection.down() => return Err(self.ended(slot, &connection).await),
        };
        match result {
            Err(timeout) => Err(McpError::CallTimeout { server: server.into(), tool: tool.into(), timeout }),
            // The request reported progress past the server's maximum total.
            Ok(Err(Round::Service(ServiceError::Timeout { timeout }))) => {
                Err(McpError::TotalTimeout { server: server.into(), tool: tool.into(), max_total: timeout })
            }
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

    /// Whether `tool` (its name on `slot`'s server) may be called, by the
    /// live list: `Some((read_only, output schema))` when it is listed,
    /// `None` when it is not (the server decides).
    ///
    /// # Errors
    /// [`McpError::Hidden`] for a hidden tool (listed or named in
    /// `disabledTools`); [`McpError::NotReadOnly`] on a `read_only` server
    /// for a tool not listed as read-only.
    fn callable(&self, slot: &Slot, tool: &str) -> Result<Option<ListedCall>, McpError> {
        let server = slot.config.name.as_str();
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
        Ok(listed)
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
        if let Some(error) = scope_required(&self.inner.options, &server, &error) {
            return error;
        }
        // HTTP 429 or 503: turned away unread; the connection stays up.
        if let Some((message, after)) = http_busy(&slot.config, &error) {
            return McpError::TryAgain { server, method: method.into(), message, after };
        }
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
            ServiceError::McpError(data) => match crate::mcp::error::marked_retryable(data.data.as_ref()) {
                Some(after) => McpError::TryAgain {
                    server,
                    method: method.into(),
                    message: data.message.to_string(),
                    after,
                },
                None => {
                    McpError::Protocol { server, method: method.into(), message: data.message.to_string() }
                }
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if connection.is_down().is_some()
                    || matches!(slot.config.transport, Transport::Stdio { .. }) =>
            {
                self.ended(slot, connection).await
            }
            other => McpError::Protocol { server, method: method.into(), message: error_text(&other) },
        }
    }
}

/// A listed tool as a call needs it: whether it is read-only, and its
/// compiled `outputSchema`.
type ListedCall = (bool, Option<Arc<jsonschema::Validator>>);

/// The `tools/call` parameters of `tool` with `args` (a JSON object, or
/// null for none), carrying the call's span as `_meta.traceparent` when it
/// is traced (SEP-414; over HTTP it also becomes the `traceparent` header,
/// streamable_http.rs).
///
/// # Errors
/// [`McpError::Protocol`] when `args` is neither.
fn call_params(
    server: &str,
    tool: &str,
    args: Value,
    trace: Option<&crate::telemetry::TraceContext>,
) -> Result<CallToolRequestParams, McpError> {
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
    if let Some(trace) = trace {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.0.0.insert("traceparent".to_owned(), Value::String(trace.traceparent()));
        params.meta = Some(meta);
    }
    Ok(params)
}

/// The `tools/call` of `params` on `connection`, in flight from now (its
/// questions answered by `cx`'s elicitor) until the future drops. It waits
/// first for a permit of the server's `max_in_flight`; the wait counts
/// against `timeout`. `Err(timeout)` when `timeout` passed.
fn request(
    slot: &Slot,
    connection: &Connection,
    params: CallToolRequestParams,
    timeout: Option<Duration>,
    cx: Option<&ToolContext>,
) -> impl Future<Output = Result<Result<rmcp::model::CallToolResult, Round>, Duration>> + 'static {
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
    async move {
        match timeout {
            Some(timeout) => tokio::time::timeout(timeout, request).await.map_err(|_| timeout),
            None => Ok(request.await),
        }
    }
}

/// What happened to an HTTP request that failed without an answer (see
/// [`streamable_http::lost`]); `None` for stdio and for a server's answer.
#[cfg(feature = "http")]
pub(super) fn http_lost(config: &ServerConfig, error: &ServiceError) -> Option<streamable_http::Lost> {
    match &config.shown {
        Transport::Http { url, .. } => streamable_http::lost(error, url),
        Transport::Stdio { .. } => None,
    }
}

/// An HTTP request the server turned away for now (429, 503; see
/// [`streamable_http::busy`]); `None` for stdio and everything else.
#[cfg(feature = "http")]
fn http_busy(config: &ServerConfig, error: &ServiceError) -> Option<(String, Option<Duration>)> {
    match &config.shown {
        Transport::Http { url, .. } => streamable_http::busy(error, url),
        Transport::Stdio { .. } => None,
    }
}

/// Without the `http` feature no server is reached over HTTP.
#[cfg(not(feature = "http"))]
fn http_busy(_config: &ServerConfig, _error: &ServiceError) -> Option<(String, Option<Duration>)> {
    None
}

/// Without the `http` feature no server is reached over HTTP.
#[cfg(not(feature = "http"))]
pub(super) fn http_lost(_config: &ServerConfig, _error: &ServiceError) -> Option<NoHttp> {
    None
}

/// What [`http_lost`] would say, in a build without HTTP: never made.
#[cfg(not(feature = "http"))]
pub(super) struct NoHttp {
    pub(super) cause: String,
    pub(super) down: bool,
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
        let input = match asker.call_once(peer, params.clone()).await.map_err(Round::Service)? {
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

/// [`McpError::ScopeRequired`] when `error` is a 403 `insufficient_scope`
/// the run did not (or could no longer) step up (see `oauth::step_up`).
pub(super) fn scope_required(
    options: &super::PoolOptions,
    server: &str,
    error: &ServiceError,
) -> Option<McpError> {
    #[cfg(feature = "oauth")]
    {
        let scope = crate::mcp::oauth::scope_needed(error)?;
        Some(McpError::ScopeRequired {
            server: server.to_owned(),
            scope,
            stepped_up: options.interactive_login.is_some(),
        })
    }
    #[cfg(not(feature = "oauth"))]
    {
        let _ = (options, server, error);
        None
    }
}
