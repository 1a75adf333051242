//! Progress of tool calls (MCP "Progress"): every request rmcp sends
//! carries a `progressToken` in its `_meta`; a server that reports progress
//! sends `notifications/progress` with that token. A `tools/call` is sent
//! here ([`call_once`]) rather than through rmcp's `call_tool_once`, which
//! does not say which token its request carries, so the token can be
//! routed to the call's [`Elicitor`]: each report resets the call's
//! timeout in the engine and the last one goes into the receipt. Reports
//! are read from the raw stream (a stdio server's lines, an HTTP answer's
//! SSE events: `connection::ListingTap`) before rmcp sees the answer that
//! follows them, so a call's last report is never lost to the handler task
//! rmcp runs notifications on. A report with a token no call in flight
//! holds is dropped; so is one sent on an HTTP server's standalone GET
//! stream.
//!
//! A request that has reported progress is cut once the server's maximum
//! total (`max_total_timeout_ms`) has passed since it was sent, whatever
//! its timeout says; one that reported none is left to its timeout (the
//! engine's, which may be longer than the maximum total).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientRequest, ProgressNotificationParam, ProgressToken, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::watch;

use crate::catalog::{CallProgress, Elicitor};

/// A request in flight: whether it reported progress, and who hears it.
struct Route {
    /// Becomes `true` with the first report.
    progressed: watch::Sender<bool>,
    elicitor: Option<Arc<dyn Elicitor>>,
}

/// The `tools/call` requests in flight on one connection, by the progress
/// token they carry, and the server's maximum total.
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, Route>>,
    max_total: Duration,
}

impl ProgressRoutes {
    /// No request in flight yet; a request that reports progress is cut
    /// after `max_total`.
    pub(crate) fn new(max_total: Duration) -> ProgressRoutes {
        ProgressRoutes { routes: Mutex::default(), max_total }
    }

    /// Hands `report` to the call whose request carries its token, if one
    /// is in flight.
    pub(crate) fn deliver(&self, report: ProgressNotificationParam) {
        let routes = self.routes.lock().expect("progress lock");
        let Some(route) = routes.get(&report.progress_token) else { return };
        route.progressed.send_replace(true);
        let elicitor = route.elicitor.clone();
        drop(routes);
        if let Some(elicitor) = elicitor {
            elicitor.progress(CallProgress::new(report.progress, report.total, report.message));
        }
    }
}

/// Unroutes a call's token, and tells the server the request is cancelled
/// when the call is dropped before its answer came (as rmcp's own
/// requests do).
struct InFlight<'a> {
    routes: &'a ProgressRoutes,
    token: ProgressToken,
    peer: &'a Peer<RoleClient>,
    /// `Some` until the answer came.
    id: Option<RequestId>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.routes.routes.lock().expect("progress lock").remove(&self.token);
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        let param = CancelledNotificationParam::new(Some(id), Some("request abandoned by the caller".into()));
        runtime.spawn(async move {
            let _ = peer.send_notification(CancelledNotification::new(param).into()).await;
        });
    }
}

/// One `tools/call` of `params` on `peer`, its progress reports handed to
/// `elicitor` while it is in flight: as rmcp's `call_tool_once`, a final
/// result, an `input_required` result or a task; dropping the future
/// cancels the request (`notifications/cancelled`).
///
/// # Errors
/// rmcp's [`ServiceError`]: the transport, a JSON-RPC error, an answer of
/// another shape ([`ServiceError::UnexpectedResponse`]), and
/// [`ServiceError::Timeout`] with the maximum total for a request that
/// reported progress and had not finished by then (it is cancelled).
pub(crate) async fn call_once(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    routes: &ProgressRoutes,
    elicitor: Option<Arc<dyn Elicitor>>,
) -> Result<CallToolResponse, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer.send_request_with_option(request, PeerRequestOptions::no_options()).await?;
    let token = handle.progress_token.clone();
    let (progressed, mut reported) = watch::channel(false);
    let route = Route { progressed, elicitor };
    routes.routes.lock().expect("progress lock").insert(token.clone(), route);
    let mut in_flight = InFlight { routes, token, peer, id: Some(handle.id.clone()) };
    let max_total = routes.max_total;
    // The cap holds once the request has reported progress (at once, for
    // a first report after the maximum total passed).
    let capped = async {
        tokio::time::sleep(max_total).await;
        if reported.wait_for(|reported| *reported).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let result = tokio::select! {
        result = handle.await_response() => result,
        // Dropping `in_flight` with its id cancels the request.
        () = capped => return Err(ServiceError::Timeout { timeout: max_total }),
    };
    in_flight.id = None;
    match result? {
        ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => Ok(CallToolResponse::InputRequired(result)),
        ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
        other => contentless(other).map(CallToolResponse::Complete).ok_or(ServiceError::UnexpectedResponse),
    }
}

/// A `tools/call` answer without `content`, which rmcp's untagged
/// `ServerResult` reads as an empty result, a task acknowledgement or a
/// result of `_meta` alone: the call's result with no content (as rmcp's
/// `call_tool_once` reads it). `None` for any other shape.
fn contentless(result: ServerResult) -> Option<CallToolResult> {
    let mut value = match &result {
        ServerResult::EmptyResult(_) | ServerResult::TaskAckResult(_) => {
            serde_json::to_value(&result).ok()?
        }
        ServerResult::CustomResult(custom) => {
            let only_meta = custom.0.as_object().is_some_and(|o| o.len() == 1 && o.contains_key("_meta"));
            if !only_meta {
                return None;
            }
            custom.0.clone()
        }
        _ => return None,
    };
    value.as_object_mut()?.entry("content").or_insert(Value::Array(Vec::new()));
    serde_json::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_without_content_are_results_without_content() {
        let empty: ServerResult = serde_json::from_value(json!({})).unwrap();
        assert!(contentless(empty).is_some_and(|r| r.content.is_empty()));
        let meta = ServerResult::CustomResult(rmcp::model::CustomResult::new(json!({"_meta": {"k": 1}})));
        assert!(contentless(meta).is_some_and(|r| r.meta.is_some()));
        let other = ServerResult::CustomResult(rmcp::model::CustomResult::new(json!({"tools": []})));
        assert!(contentless(other).is_none());
    }
}
