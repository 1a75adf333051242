//! [`BatchApprover`]: the approver of the runs of one batch
//! (`codemode batch --program`, docs/BATCH.md "Approvals"), so a person is
//! asked once per distinct question rather than once per line.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::super::approval::{Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError};
use super::super::elicitation::{ElicitationReplyFuture, ElicitationRequest};
use super::super::run_grant::RunGrant;

/// Wraps the approver of a batch's runs. It marks each request with the
/// batch's id ([`ApprovalRequest::batch`]), so the prompt's `a` ("allow
/// the rest") reaches every run of the batch; and where the policy allows
/// (a call only the posture sends to approval, of a tool that starts no
/// programs: not an ask rule's or a hook's call, which is asked every
/// time, and not `bash` or a server start, whose approval depends on what
/// its run changed), it answers a question identical to one already
/// answered in the batch (same tool, arguments, subject and reason) with
/// that answer, without asking again. Identical questions asked at once
/// wait for the one answer. A `pause` is never reused: each such line
/// pauses and is decided on its own. Elicitations go to the inner
/// approver unchanged.
pub struct BatchApprover {
    inner: Arc<dyn Approver>,
    batch_id: String,
    /// Each distinct question's answer, once given.
    answered: Mutex<HashMap<String, Arc<OnceCell<First>>>>,
}

/// The answer to a question, and the run and call it was first asked for.
type First = (Approval, String, u64);

impl BatchApprover {
    /// The approver of the runs of batch `batch_id`, asking `inner`.
    pub fn new(inner: Arc<dyn Approver>, batch_id: impl Into<String>) -> BatchApprover {
        BatchApprover { inner, batch_id: batch_id.into(), answered: Mutex::default() }
    }

    /// The key of a question whose answer may be reused; `None` when it
    /// must be asked each time.
    fn reusable(request: &ApprovalRequest) -> Option<String> {
        RunGrant::of(request).filter(|g| !g.per_subject())?;
        let arguments = serde_json::to_string(&request.arguments).ok()?;
        Some(format!(
            "{}\u{0}{arguments}\u{0}{}\u{0}{}",
            request.tool,
            request.subject.as_deref().unwrap_or(""),
            request.reason
        ))
    }
}

impl std::fmt::Debug for BatchApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchApprover").field("batch_id", &self.batch_id).finish_non_exhaustive()
    }
}

impl Approver for BatchApprover {
    fn decide(&self, mut request: ApprovalRequest) -> ApprovalFuture {
        request.batch = Some(self.batch_id.clone());
        let Some(key) = BatchApprover::reusable(&request) else { return self.inner.decide(request) };
        let cell = self.answered.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let (run_id, seq) = (request.run_id.clone(), request.seq);
            let first = cell
                .get_or_try_init(|| async {
                    match inner.decide(request).await {
                        Ok(a) if a.decision != Answer::Pause => Ok((a, run_id.clone(), seq)),
                        other => Err(other),
                    }
                })
                .await;
            let (approval, first_run, first_seq) = match first {
                Ok(got) => got.clone(),
                Err(not_kept) => return not_kept,
            };
            if first_run == run_id && first_seq == seq {
                return Ok(approval);
            }
            let why = approval.reason.clone().unwrap_or_else(|| {
                if approval.decision == Answer::Allow { "allowed" } else { "denied" }.to_owned()
            });
            let reason = format!(
                "{why} (the same question, asked once for this batch at run {first_run} call {first_seq})"
            );
            Ok::<Approval, ApproverError>(Approval { reason: Some(reason), ..approval })
        })
    }

    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        self.inner.elicit(request)
    }

    fn named_files(&self) -> Vec<std::path::PathBuf> {
        self.inner.named_files()
    }
}
