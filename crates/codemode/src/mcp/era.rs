//! The two eras of the MCP protocol and how a connection picks one.
//!
//! - **Modern** (specification 2026-07-28): no handshake; the client sends
//!   `server/discover` and then carries its protocol version, client info
//!   and capabilities in every request's `_meta`; the server asks the user
//!   for input through `input_required` results (multi round-trip
//!   requests).
//! - **Legacy** (2025-11-25 and earlier): the `initialize` handshake, a
//!   session, and server-initiated requests (`elicitation/create`,
//!   `roots/list`).
//!
//! A server of unknown era is probed with `server/discover` (rmcp's
//! [`ClientLifecycleMode::Auto`]): only a discover result that names a
//! version we speak is modern evidence. A JSON-RPC error (the TypeScript
//! SDK 1.x answers `-32601 Method not found` at once) falls back to
//! `initialize` on the same connection. A result that is not a discover
//! result (a legacy server answering every unknown method with `{}`) is
//! turned into such an error by [`Probing`], so it falls back the same way
//! instead of failing the start. Anything else that fails the probe is
//! retried once with `initialize` on a fresh connection (see
//! `Connection::start`).
//!
//! The era a server spoke is kept in the schema cache and tried first next
//! time: a legacy server is not probed again.

use std::borrow::Cow;

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{ClientLifecycleMode, RoleClient};
use rmcp::transport::Transport;
use serde::{Deserialize, Serialize};

/// The protocol era a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// 2026-07-28: `server/discover`, per-request `_meta`, multi
    /// round-trip requests.
    Modern,
    /// 2025-11-25 and earlier: `initialize` and a session.
    Legacy,
}

impl Era {
    /// `"modern"` or `"legacy"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }

    /// The era of a negotiated protocol version: versions without
    /// `initialize` (2026-07-28 on) are modern.
    pub(crate) fn of(version: &ProtocolVersion) -> Era {
        if version.has_initialize() { Era::Legacy } else { Era::Modern }
    }
}

impl std::fmt::Display for Era {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The protocol version sent in `initialize`: the newest that has the
/// handshake (2025-11-25), not rmcp's default (2026-07-28, which has none).
pub(crate) const INITIALIZE_VERSION: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// The versions offered in `server/discover`, preferred first.
pub(crate) fn modern_versions() -> Vec<ProtocolVersion> {
    vec![ProtocolVersion::V_2026_07_28]
}

/// The lifecycle to try first for a server last seen in `hint`: `initialize`
/// for a legacy server, else a `server/discover` probe with fallback.
pub(crate) fn first_lifecycle(hint: Option<Era>) -> ClientLifecycleMode {
    match hint {
        Some(Era::Legacy) => ClientLifecycleMode::Initialize,
        _ => auto(),
    }
}

/// The lifecycle of the second attempt, after the first failed without the
/// server going away: the other one.
pub(crate) fn second_lifecycle(hint: Option<Era>) -> ClientLifecycleMode {
    match hint {
        Some(Era::Legacy) => auto(),
        _ => ClientLifecycleMode::Initialize,
    }
}

fn auto() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: modern_versions(),
        legacy_version: Some(INITIALIZE_VERSION),
    }
}

/// A client transport that makes a `server/discover` answer which is not a
/// discover result into a `-32601` error for the same request id, so rmcp's
/// Auto lifecycle takes it as a legacy server and falls back to
/// `initialize` on the same connection (it would otherwise fail the start).
pub(crate) struct Probing<T> {
    inner: T,
    /// The id of the `server/discover` request awaiting its answer.
    discover: Option<RequestId>,
}

impl<T> Probing<T> {
    pub(crate) fn new(inner: T) -> Probing<T> {
        Probing { inner, discover: None }
    }

    /// `message`, or the error that stands for it when it answers the
    /// pending discover request with something else than a discover result.
    fn screen(&mut self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        let Some(pending) = &self.discover else { return message };
        match message {
            ServerJsonRpcMessage::Response(response) if &response.id == pending => {
                self.discover = None;
                if matches!(response.result, ServerResult::DiscoverResult(_)) {
                    return ServerJsonRpcMessage::Response(response);
                }
                let error = ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "server/discover was answered without a discover result (a server of the 2025-11-25 era)",
                    None,
                );
                ServerJsonRpcMessage::error(error, Some(response.id))
            }
            ServerJsonRpcMessage::Error(error) if error.id.as_ref() == Some(pending) => {
                self.discover = None;
                ServerJsonRpcMessage::Error(error)
            }
            other => other,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Probing<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.discover = Some(request.id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let message = self.inner.receive().await?;
        Some(self.screen(message))
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probing_after_discover() -> Probing<()> {
        Probing { inner: (), discover: Some(RequestId::Number(0)) }
    }

    fn message(value: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_empty_discover_result_becomes_method_not_found() {
        let mut probing = probing_after_discover();
        let out = probing.screen(message(json!({"jsonrpc": "2.0", "id": 0, "result": {}})));
        let out = serde_json::to_value(out).unwrap();
        assert_eq!(out["error"]["code"], json!(-32601), "{out}");
        assert_eq!(out["id"], json!(0));
        assert!(probing.discover.is_none());
    }

    #[test]
    fn a_discover_result_and_other_answers_pass_unchanged() {
        let mut probing = probing_after_discover();
        let modern = json!({"jsonrpc": "2.0", "id": 0, "result": {
            "supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": "complete",
            "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}}});
        let out = serde_json::to_value(probing.screen(message(modern))).unwrap();
        assert_eq!(out["result"]["supportedVersions"], json!(["2026-07-28"]), "{out}");
        // Once answered, later results are not touched.
        let later = json!({"jsonrpc": "2.0", "id": 0, "result": {}});
        let out = serde_json::to_value(probing.screen(message(later))).unwrap();
        assert!(out.get("error").is_none(), "{out}");
    }

    #[test]
    fn versions_sort_into_eras() {
        assert_eq!(Era::of(&ProtocolVersion::V_2026_07_28), Era::Modern);
        assert_eq!(Era::of(&INITIALIZE_VERSION), Era::Legacy);
        assert_eq!(Era::of(&ProtocolVersion::V_2024_11_05), Era::Legacy);
    }
}
