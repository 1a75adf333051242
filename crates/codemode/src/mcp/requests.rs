//! What a server asks of the client: elicitation (a question for the user)
//! and roots (the folders it may work in). Sampling is not offered: codemode
//! has no model.
//!
//! - **Declared** ([`capabilities`]): `elicitation` with `form` and `url`,
//!   `roots` without `listChanged` (the root never changes during a
//!   connection). Sent in `initialize` (2025-11-25) and in every request's
//!   `_meta` (2026-07-28).
//! - **Roots** ([`ServerRequests::roots`]): the workspace folder as the one
//!   root, a `file://` URI of its canonical path: the workspace of the tool
//!   call in flight, else the pool's ([`PoolOptions::workspace`](super::PoolOptions::workspace)),
//!   else no root.
//! - **Elicitation** ([`ServerRequests::elicit`]): the request becomes a
//!   [`codemode::Elicitation`](crate::catalog::Elicitation) and is answered by
//!   the [`Elicitor`](crate::catalog::Elicitor) of the tool call that caused
//!   it; without one (or without a call) it is declined. A modern
//!   `input_required` entry names its call (the one being retried). A legacy
//!   `elicitation/create` carries nothing that names its call (rmcp gives
//!   the handler no related request id on stdio), so the connection's
//!   calls in flight decide: with one, that one; with several, the one that
//!   started first (the longest-waiting call; a deterministic rule, since
//!   the wire does not tell). The question is abandoned (answered `cancel`)
//!   when its call ends first, or when the server cancels the request.

// Roots are deprecated in rmcp (SEP-2577) but part of both eras we speak.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction as WireAction, ListRootsResult,
    Root,
};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::catalog::{
    Elicitation, ElicitationAction, ElicitationAnswer, ElicitationMode, Elicitor, ToolContext,
};

/// The client capabilities codemode declares (both eras): elicitation in
/// form and URL mode, roots without change notifications. No sampling.
pub(crate) fn capabilities(roots: bool) -> ClientCapabilities {
    let mut caps = json!({"elicitation": {"form": {}, "url": {}}, "roots": {}});
    if !roots {
        caps.as_object_mut().expect("an object").remove("roots");
    }
    serde_json::from_value(caps).expect("static client capabilities")
}

/// One tool call in flight on a connection: what answers its questions.
struct Call {
    elicitor: Option<Arc<dyn Elicitor>>,
    workspace: Option<Arc<PathBuf>>,
    /// Becomes `true` when the call ends (abandons its questions).
    ended: watch::Receiver<bool>,
}

/// The per-connection state behind server requests: the server's name, the
/// pool's workspace and the tool calls in flight.
pub(crate) struct ServerRequests {
    server: String,
    /// Whether the server is offered roots (its config's `roots`).
    roots: bool,
    workspace: Option<PathBuf>,
    calls: Mutex<BTreeMap<u64, Call>>,
    next: AtomicU64,
    /// The calls that hear progress, by their request's progress token.
    pub(crate) progress: Arc<super::progress::ProgressRoutes>,
}

/// A tool call's registration; dropping it ends the call (see
/// [`ServerRequests::begin`]).
pub(crate) struct CallGuard {
    requests: Arc<ServerRequests>,
    id: u64,
    ended: watch::Sender<bool>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let _ = self.ended.send(true);
        self.requests.calls.lock().expect("calls lock").remove(&self.id);
    }
}

impl CallGuard {
    /// The context of this call, for the questions of its `input_required`
    /// rounds.
    pub(crate) fn asker(&self) -> Asker {
        let calls = self.requests.calls.lock().expect("calls lock");
        let call = calls.get(&self.id).expect("a registered call");
        Asker {
            server: self.requests.server.clone(),
            elicitor: call.elicitor.clone(),
            progress: self.requests.progress.clone(),
            ended: call.ended.clone(),
            workspace: call
                .workspace
                .clone()
                .map(|w| (*w).clone())
                .or_else(|| self.requests.workspace.clone())
                .filter(|_| self.requests.roots),
        }
    }
}

/// Who answers one question: the server's name, the call's elicitor and
/// workspace, and the signal that the call ended.
#[derive(Clone)]
pub(crate) struct Asker {
    server: String,
    elicitor: Option<Arc<dyn Elicitor>>,
    /// The connection's progress routes (a request of this call is routed
    /// to its elicitor: `progress::call_once`).
    progress: Arc<super::progress::ProgressRoutes>,
    ended: watch::Receiver<bool>,
    workspace: Option<PathBuf>,
}

impl ServerRequests {
    /// The state of a connection to `server`; `workspace` is the root when
    /// no call is in flight; without `roots` (the server's config said
    /// `"roots": false`) every `roots/list` is answered with no root;
    /// `max_total` caps a call that reports progress (its
    /// `max_total_timeout_ms`).
    pub(crate) fn new(
        server: &str,
        roots: bool,
        workspace: Option<PathBuf>,
        max_total: std::time::Duration,
    ) -> Arc<ServerRequests> {
        Arc::new(ServerRequests {
            server: server.to_owned(),
            roots,
            workspace,
            calls: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            progress: Arc::new(super::progress::ProgressRoutes::new(max_total)),
        })
    }

    /// Registers a tool call (with its context, if any) until the guard is
    /// dropped.
    pub(crate) fn begin(self: &Arc<Self>, cx: Option<&ToolContext>) -> CallGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (ended, ended_rx) = watch::channel(false);
        let call = Call {
            elicitor: cx.and_then(|cx| cx.elicitor.clone()),
            workspace: cx.map(|cx| cx.workspace.clone()),
            ended: ended_rx,
        };
        self.calls.lock().expect("calls lock").insert(id, call);
        CallGuard { requests: self.clone(), id, ended }
    }

    /// Who answers a legacy server request: the call in flight that started
    /// first, else nobody (the pool's workspace, no elicitor).
    pub(crate) fn asker(&self) -> Asker {
        let calls = self.calls.lock().expect("calls lock");
        let first = calls.values().next();
        Asker {
            server: self.server.clone(),
            elicitor: first.and_then(|c| c.elicitor.clone()),
            progress: self.progress.clone(),
            ended: first.map_or_else(|| watch::channel(false).1, |c| c.ended.clone()),
            workspace: first
                .and_then(|c| c.workspace.as_ref().map(|w| (**w).clone()))
                .or_else(|| self.workspace.clone())
                .filter(|_| self.roots),
        }
    }
}

impl Asker {
    /// One `tools/call` of this call ([`call_once`](super::progress::call_once)):
    /// its progress reports go to the call's elicitor.
    ///
    /// # Errors
    /// rmcp's `ServiceError`, as `call_once` says.
    pub(crate) async fn call_once(
        &self,
        peer: &rmcp::service::Peer<rmcp::service::RoleClient>,
        params: rmcp::model::CallToolRequestParams,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::service::ServiceError> {
        super::progress::call_once(peer, params, &self.progress, self.elicitor.clone()).await
    }

    /// The `roots/list` answer: the workspace as the one root.
    pub(crate) fn roots(&self) -> ListRootsResult {
        ListRootsResult::new(self.workspace.as_deref().map(root).into_iter().collect())
    }

    /// Asks the call's elicitor `params` and returns the answer for the
    /// wire. Declines without an elicitor; answers `cancel` if the call ends
    /// or `cancelled` resolves first.
    pub(crate) async fn elicit(
        mut self,
        params: ElicitRequestParams,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> ElicitResult {
        let (Some(elicitor), Some(question)) = (self.elicitor.take(), question(&self.server, params)) else {
            return wire_answer(ElicitationAnswer::decline());
        };
        let mut ended = self.ended.clone();
        let answer = tokio::select! {
            answer = elicitor.elicit(question) => answer,
            _ = ended.wait_for(|ended| *ended) => ElicitationAnswer::cancel(),
            () = cancelled => ElicitationAnswer::cancel(),
        };
        wire_answer(answer)
    }
}

/// The root for a workspace folder: its `file://` URI (percent-encoded)
/// and its folder name.
fn root(workspace: &Path) -> Root {
    let uri = url::Url::from_directory_path(workspace)
        .map(|u| u.to_string())
        .unwrap_or_else(|()| format!("file://{}", workspace.display()));
    let uri = uri.strip_suffix('/').filter(|u| u.len() > "file://".len()).unwrap_or(&uri).to_owned();
    let mut root = Root::new(uri);
    root.name = workspace.file_name().map(|n| n.to_string_lossy().into_owned());
    root
}

/// An MCP elicitation request as the question the elicitor gets; `None`
/// for a mode codemode does not know (declined).
pub(crate) fn question(server: &str, params: ElicitRequestParams) -> Option<Elicitation> {
    Some(match params {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => Elicitation {
            server: server.to_owned(),
            message,
            mode: ElicitationMode::Form {
                requested_schema: serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            },
        },
        ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } => Elicitation {
            server: server.to_owned(),
            message,
            mode: ElicitationMode::Url { url, elicitation_id },
        },
        _ => return None,
    })
}

/// An elicitor's answer as MCP's `ElicitResult` (content only when
/// accepted).
pub(crate) fn wire_answer(answer: ElicitationAnswer) -> ElicitResult {
    let action = match answer.action {
        ElicitationAction::Accept => WireAction::Accept,
        ElicitationAction::Decline => WireAction::Decline,
        ElicitationAction::Cancel => WireAction::Cancel,
    };
    let content = match answer.action {
        ElicitationAction::Accept => answer.content.map(Value::Object),
        _ => None,
    };
    let mut result = ElicitResult::new(action);
    result.content = content;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_root_is_a_file_uri_of_the_workspace() {
        let root = root(Path::new("/work/my project"));
        assert_eq!(root.uri, "file:///work/my%20project");
        assert_eq!(root.name.as_deref(), Some("my project"));
        assert_eq!(super::root(Path::new("/")).uri, "file:///");
    }

    #[test]
    fn capabilities_declare_elicitation_and_roots_only() {
        let caps = serde_json::to_value(capabilities(true)).unwrap();
        assert_eq!(caps, json!({"elicitation": {"form": {}, "url": {}}, "roots": {}}));
        let caps = serde_json::to_value(capabilities(false)).unwrap();
        assert_eq!(caps, json!({"elicitation": {"form": {}, "url": {}}}));
    }

    #[test]
    fn content_goes_back_only_when_accepted() {
        let mut content = serde_json::Map::new();
        content.insert("name".into(), json!("x"));
        let accepted =
            wire_answer(ElicitationAnswer { action: ElicitationAction::Accept, content: Some(content) });
        assert_eq!(
            serde_json::to_value(accepted).unwrap(),
            json!({"action": "accept", "content": {"name": "x"}})
        );
        let declined = wire_answer(ElicitationAnswer { action: ElicitationAction::Decline, content: None });
        assert_eq!(serde_json::to_value(declined).unwrap(), json!({"action": "decline"}));
    }

    /// Accepts, saying who it is in the content.
    struct Named(&'static str);

    impl Elicitor for Named {
        fn elicit(&self, _question: Elicitation) -> crate::catalog::ElicitationFuture {
            let mut content = serde_json::Map::new();
            content.insert("by".into(), json!(self.0));
            let answer = ElicitationAnswer { action: ElicitationAction::Accept, content: Some(content) };
            Box::pin(async move { answer })
        }
    }

    fn form() -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_legacy_question_goes_to_the_call_that_started_first() {
        let requests = ServerRequests::new("s", true, None, Duration::from_secs(1));
        let context = |name: &'static str, ws: &str| {
            let mut cx = ToolContext::new(PathBuf::from(ws), "run", 1, crate::receipt::Caller::Program);
            cx.elicitor = Some(Arc::new(Named(name)));
            cx
        };
        let (a, b) = (context("a", "/a"), context("b", "/b"));
        let first = requests.begin(Some(&a));
        let second = requests.begin(Some(&b));
        let answer = requests.asker().elicit(form(), std::future::pending()).await;
        assert_eq!(answer.content, Some(json!({"by": "a"})));
        assert_eq!(requests.asker().roots().roots[0].uri, "file:///a");
        drop(first);
        let answer = requests.asker().elicit(form(), std::future::pending()).await;
        assert_eq!(answer.content, Some(json!({"by": "b"})));
        // A modern round asks its own call.
        let answer = second.asker().elicit(form(), std::future::pending()).await;
        assert_eq!(answer.content, Some(json!({"by": "b"})));
        drop(second);
        assert!(requests.asker().roots().roots.is_empty(), "no call, no pool workspace: no root");
    }

    /// Never answers (a person who walked away).
    struct Never;

    impl Elicitor for Never {
        fn elicit(&self, _question: Elicitation) -> crate::catalog::ElicitationFuture {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn without_an_elicitor_declined_and_a_question_outliving_its_call_cancelled() {
        let requests = ServerRequests::new("s", true, Some(PathBuf::from("/pool")), Duration::from_secs(1));
        assert_eq!(requests.asker().roots().roots[0].uri, "file:///pool");
        // `"roots": false`: no root, with or without a call in flight.
        let withheld = ServerRequests::new("s", false, Some(PathBuf::from("/pool")), Duration::from_secs(1));
        assert!(withheld.asker().roots().roots.is_empty());
        let cx = ToolContext::new(PathBuf::from("/w"), "run", 1, crate::receipt::Caller::Program);
        let guard = withheld.begin(Some(&cx));
        assert!(guard.asker().roots().roots.is_empty() && withheld.asker().roots().roots.is_empty());
        drop(guard);
        let answer = requests.asker().elicit(form(), std::future::pending()).await;
        assert_eq!(answer.action, WireAction::Decline, "no call in flight");

        let mut cx = ToolContext::new(PathBuf::from("/w"), "run", 1, crate::receipt::Caller::Program);
        cx.elicitor = Some(Arc::new(Never));
        let call = requests.begin(Some(&cx));
        let question = tokio::spawn(requests.asker().elicit(form(), std::future::pending()));
        tokio::task::yield_now().await;
        drop(call);
        assert_eq!(question.await.unwrap().action, WireAction::Cancel);

        // The server's cancel ends it too.
        let _call = requests.begin(Some(&cx));
        let answer = requests.asker().elicit(form(), std::future::ready(())).await;
        assert_eq!(answer.action, WireAction::Cancel);
    }
}
