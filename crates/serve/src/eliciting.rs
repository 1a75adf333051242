//! The approver of a 2025-11-25 client with form elicitation: one
//! `elicitation/create` for the calls that wait together, and the
//! upstream servers' own questions passed on (docs/SERVE.md, "Approvals").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ElicitationAction, PingRequest, RequestId, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleServer, ServiceError};
use serde_json::Value;
use tokio::sync::oneshot;

use codemode::Approver;
use codemode::approval::{
    Answer, Approval, ApprovalFuture, ApprovalRequest, ApproverError, RunGrant, RunGrants,
};
use codemode::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};

use super::question::{self, Asked, form};

/// Asks the person behind a 2025-11-25 client with `elicitation/create`:
/// the calls that wait for approval at the same time (those that arrive
/// within [`GATHER`] of each other, up to [`GATHER_AT_MOST`] from the
/// first, and every one that arrives while a question is out) come as one
/// question listing them
/// ([`crate::question`]); an answer for the rest of the run is held here,
/// in the terminal prompt's [`RunGrants`], for the run this approver
/// serves.
struct ElicitingApprover {
    peer: Peer<RoleServer>,
    /// How long to wait for an answer before denying.
    timeout: Duration,
    client: String,
    /// The calls waiting for the next question, and the grants held.
    batch: Mutex<Batch>,
}

/// How long a question waits for more calls after the last one arrived:
/// calls a program starts together reach the gate within a few
/// milliseconds of each other, and calls that were waiting for a free
/// slot (`max_in_flight`) follow one by one as others end.
pub(crate) const GATHER: Duration = Duration::from_millis(150);

/// The longest a question waits for more calls, from the first.
pub(crate) const GATHER_AT_MOST: Duration = Duration::from_secs(1);

/// The calls waiting for a question, and what answers for the rest of the
/// run allowed.
#[derive(Default)]
struct Batch {
    waiting: Vec<Waiting>,
    /// Whether a task is asking (or about to ask) the waiting calls.
    asking: bool,
    grants: RunGrants,
}

/// A call waiting for the person's answer.
struct Waiting {
    request: ApprovalRequest,
    grant: Option<RunGrant>,
    answer: oneshot::Sender<Result<Approval, ApproverError>>,
}

impl ElicitingApprover {
    /// The reason of every call an answer for the rest of the run allowed.
    fn for_run_reason(&self) -> String {
        format!("allowed by the person in {} for the rest of the run", self.client)
    }

    /// Asks the waiting calls, one question at a time, until none waits.
    async fn ask_waiting(self: Arc<Self>) {
        loop {
            self.gather().await;
            let calls = {
                let mut batch = self.batch.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // Calls an answer given meanwhile covers are not asked, nor
                // calls nobody waits for any more (their run was cancelled).
                let (covered, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut batch.waiting)
                    .into_iter()
                    .filter(|w| !w.answer.is_closed())
                    .partition(|w| w.grant.as_ref().is_some_and(|g| batch.grants.cover(g)));
                for w in covered {
                    let _ = w.answer.send(Ok(Approval::allow().with_reason(self.for_run_reason())));
                }
                batch.waiting = rest;
                let asked: Vec<Asked<'_>> = batch.waiting.iter().map(|w| self.asked(w)).collect();
                let run_id = batch.waiting.first().map(|w| w.request.run_id.clone()).unwrap_or_default();
                let n = question::fitting(&asked, &run_id);
                drop(asked);
                if n == 0 {
                    batch.asking = false;
                    return;
                }
                batch.waiting.drain(..n).collect::<Vec<_>>()
            };
            let (approval, granted) = self.ask(&calls).await.unwrap_or_else(|| {
                (Approval::deny("withdrawn: nobody waits for the answer any more"), false)
            });
            let mut batch = self.batch.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for w in calls {
                let answer = match (granted, w.grant) {
                    (true, Some(grant)) if approval.decision == Answer::Allow => {
                        batch.grants.hold(grant);
                        Approval::allow().with_reason(self.for_run_reason())
                    }
                    _ => approval.clone(),
                };
                let _ = w.answer.send(Ok(answer));
            }
        }
    }

    /// Waits until no call arrived for [`GATHER`], at most
    /// [`GATHER_AT_MOST`].
    async fn gather(&self) {
        let waiting = || self.batch.lock().unwrap_or_else(std::sync::PoisonError::into_inner).waiting.len();
        let until = tokio::time::Instant::now() + GATHER_AT_MOST;
        let mut seen = waiting();
        loop {
            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + GATHER)).await;
            let now = waiting();
            if now == seen || tokio::time::Instant::now() >= until {
                return;
            }
            seen = now;
        }
    }

    /// The call `w` as a question shows it. A grant for one command names
    /// the call whose command it is.
    fn asked<'a>(&self, w: &'a Waiting) -> Asked<'a> {
        let reach = w.grant.as_ref().map(|g| {
            let reach = g.reach(&codemode::display_text::visible(g.tool()));
            if g.per_subject() { format!("for call {}, {reach}", w.request.seq) } else { reach }
        });
        Asked::of(&w.request, reach)
    }

    /// Asks one question about `calls`: the answer for each, and whether
    /// the person allowed the rest of the run too; `None` when the
    /// question was withdrawn, nobody waiting for its answer any more (the
    /// calls' runs were told to stop: gate/approval_wait.rs).
    async fn ask(&self, calls: &[Waiting]) -> Option<(Approval, bool)> {
        let asked: Vec<Asked<'_>> = calls.iter().map(|w| self.asked(w)).collect();
        let run_id = calls.first().map(|w| w.request.run_id.as_str()).unwrap_or_default();
        let client = &self.client;
        let Some(params) = question::question(run_id, &asked) else {
            return Some((
                Approval::deny(format!("the approval question for {client} could not be made; not run")),
                false,
            ));
        };
        let timeout = self.timeout;
        let also = match calls.len() {
            1 => String::new(),
            n => format!(" (one question about {n} calls)"),
        };
        let nobody_waits = async {
            while !calls.iter().all(|w| w.answer.is_closed()) {
                tokio::time::sleep(WITHDRAW_POLL).await;
            }
        };
        let asked = ask_client(&self.peer, params, timeout, nobody_waits).await?;
        let approval = match asked {
            Ok(answer) => match answer.action {
                ElicitationAction::Accept => {
                    let granted = question::rest_of_run(answer.content.as_ref());
                    let approved = format!("approved by the person in {client}{also}");
                    return Some((Approval::allow().with_reason(approved), granted));
                }
                ElicitationAction::Decline => {
                    Approval::deny(format!("declined by the person in {client}{also}"))
                }
                _ => Approval::deny(format!("the person dismissed the approval in {client}{also}; not run")),
            },
            Err(ServiceError::Timeout { .. }) => Approval::deny(format!(
                "no answer from {client} within the approval timeout of {} s; not run",
                timeout.as_secs_f64()
            )),
            Err(e) => Approval::deny(format!("{client} could not ask for the approval ({e}); not run")),
        };
        Some((approval, false))
    }
}

/// How often a question out to the client looks whether anyone still
/// waits for its answer.
const WITHDRAW_POLL: Duration = Duration::from_millis(200);

/// How long the `ping` sent before a question waits for its answer
/// (nothing waits on it: this only bounds how long rmcp keeps it as
/// outstanding).
const PING_WAIT: Duration = Duration::from_secs(30);

/// Sends a `ping` (MCP specification, "Ping") without waiting for its
/// answer, before a question: rmcp numbers a session's requests from 0,
/// and the official TypeScript SDK (1.32.2) drops a
/// `notifications/cancelled` whose `requestId` is 0 (it tests the id for
/// truth), so a question sent as request 0 could never be withdrawn from
/// its clients. With a ping first, whose id comes before the question's,
/// no question is request 0, in any session (over HTTP one server serves
/// many sessions, each numbering from 0), whatever the questions asked at
/// once. The answer is awaited off the question's way.
async fn ping_first(peer: &Peer<RoleServer>) {
    let ping = ServerRequest::PingRequest(PingRequest::default());
    if let Ok(handle) = peer.send_request_with_option(ping, PeerRequestOptions::with_timeout(PING_WAIT)).await
    {
        tokio::spawn(async move {
            let _ = handle.await_response().await;
        });
    }
}

/// Puts `params` to the client (`elicitation/create`) and waits at most
/// `timeout` for its answer, unless `withdrawn` resolves first: then, or
/// when this future is dropped before the answer, the question is
/// cancelled on the client's side (`notifications/cancelled`, MCP
/// specification, "Cancellation"), so the person no longer sees a question
/// whose answer would act on nothing, and `None` comes back.
async fn ask_client(
    peer: &Peer<RoleServer>,
    params: ElicitRequestParams,
    timeout: Duration,
    withdrawn: impl std::future::Future<Output = ()>,
) -> Option<Result<ElicitResult, ServiceError>> {
    ping_first(peer).await;
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let handle = match peer.send_request_with_option(request, PeerRequestOptions::with_timeout(timeout)).await
    {
        Ok(handle) => handle,
        Err(e) => return Some(Err(e)),
    };
    let mut unanswered = CancelOnDrop { peer: peer.clone(), id: Some(handle.id.clone()) };
    tokio::select! {
        // An answer that came wins over a withdrawal at the same moment:
        // no cancel goes out for a question already answered.
        biased;
        answer = handle.await_response() => {
            // Answered, or timed out (rmcp then cancels it itself).
            unanswered.id = None;
            Some(answer.and_then(|r| match r {
                ClientResult::ElicitResult(r) => Ok(r),
                _ => Err(ServiceError::UnexpectedResponse),
            }))
        }
        () = withdrawn => None,
    }
}

/// Cancels request `id` on the client when dropped, unless `id` was taken.
struct CancelOnDrop {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        let reason = "withdrawn: the codemode run was told to stop (its deadline, a cancel or a limit)";
        runtime.spawn(async move {
            let param = CancelledNotificationParam::new(Some(id), Some(reason.to_owned()));
            let _ = peer.send_notification(CancelledNotification::new(param).into()).await;
        });
    }
}

/// The approver behind an `Arc`, so its asking task can hold it.
#[derive(Clone)]
pub(crate) struct Eliciting(Arc<ElicitingApprover>);

impl Eliciting {
    /// Asks through `peer`, waiting `timeout` for each answer; `client` is
    /// the client's name, for reasons in the receipt.
    pub fn new(peer: Peer<RoleServer>, timeout: Duration, client: String) -> Eliciting {
        Eliciting(Arc::new(ElicitingApprover { peer, timeout, client, batch: Mutex::default() }))
    }
}

impl Approver for Eliciting {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        let this = self.0.clone();
        Box::pin(async move {
            let grant = RunGrant::of(&request);
            let (answer, answered) = oneshot::channel();
            {
                let mut batch = this.batch.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if grant.as_ref().is_some_and(|g| batch.grants.cover(g)) {
                    return Ok(Approval::allow().with_reason(this.for_run_reason()));
                }
                batch.waiting.push(Waiting { request, grant, answer });
                if !std::mem::replace(&mut batch.asking, true) {
                    tokio::spawn(this.clone().ask_waiting());
                }
            }
            answered.await.unwrap_or_else(|_| Err(ApproverError("the question was dropped".to_owned())))
        })
    }

    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        self.0.elicit(request)
    }
}

impl ElicitingApprover {
    /// Puts an upstream MCP server's form question to the same person;
    /// URL-mode questions are declined (the page would open from a server
    /// the person did not choose to talk to).
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        let peer = self.peer.clone();
        let timeout = self.timeout;
        let by = self.client.clone();
        Box::pin(async move {
            let codemode::elicitation::ElicitationMode::Form { requested_schema } = &request.elicitation.mode
            else {
                return ElicitationReply::decline(
                    by,
                    "URL-mode questions are not passed on by codemode mcp serve",
                );
            };
            let message = format!(
                "The MCP server `{}` asks, during call {} ({}) of a codemode program:\n{}",
                request.elicitation.server, request.seq, request.tool, request.elicitation.message
            );
            let Some(params) = form(message, requested_schema.clone()) else {
                return ElicitationReply::decline(
                    by,
                    "the server's form could not be passed on by codemode mcp serve",
                );
            };
            // Dropped when the run is told to stop: the question is then
            // cancelled on the client too.
            let asked = ask_client(&peer, params, timeout, std::future::pending()).await;
            match asked.unwrap_or(Err(ServiceError::TransportClosed)) {
                Ok(answer) => {
                    let action = match answer.action {
                        ElicitationAction::Accept => codemode::elicitation::ElicitationAction::Accept,
                        ElicitationAction::Decline => codemode::elicitation::ElicitationAction::Decline,
                        _ => codemode::elicitation::ElicitationAction::Cancel,
                    };
                    let content = answer.content.and_then(|c| match c {
                        Value::Object(map) => Some(map),
                        _ => None,
                    });
                    ElicitationReply::new(
                        codemode::elicitation::ElicitationAnswer::new(action, content),
                        by,
                        Some("answered in the MCP client".to_owned()),
                    )
                }
                Err(ServiceError::Timeout { .. }) => {
                    ElicitationReply::cancel(by, "no answer within the approval timeout")
                }
                Err(e) => ElicitationReply::decline(by, format!("the MCP client could not ask: {e}")),
            }
        })
    }
}
