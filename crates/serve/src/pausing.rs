//! The approver of the routes that pause (a 2026-07-28 client's
//! `input_required`, a client without elicitation): every approval pauses
//! for a person to decide after the run, but for the calls an earlier
//! answer for the rest of the run covers (carried in the signed
//! `requestState`, request_state.rs), which it allows.

use std::sync::Mutex;

use codemode::Approver;
use codemode::approval::{Approval, ApprovalFuture, ApprovalRequest, RunGrant, RunGrants};
use codemode::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};

/// Pauses every approval the grants it holds do not cover; declines the
/// questions an upstream MCP server asks during a call (this client is
/// not asked while a run goes on).
pub(crate) struct PausingApprover {
    /// The client's name, for reasons in the receipt.
    client: String,
    /// What earlier answers for the rest of the run allowed.
    grants: RunGrants,
    /// The calls it paused that an answer for the rest of the run could
    /// cover after a pause (by seq, with their tool): none of a tool that
    /// starts programs ([`RunGrant::of_tool`]), none an ask rule or a
    /// hook's `ask` sent.
    grantable: Mutex<Vec<(u64, String)>>,
}

impl PausingApprover {
    /// An approver holding `grants`; `client` names the client in reasons.
    pub fn new(client: String, grants: RunGrants) -> PausingApprover {
        PausingApprover { client, grants, grantable: Mutex::default() }
    }

    /// The tools the grants it holds are for.
    pub fn granted_tools(&self) -> Vec<String> {
        self.grants.iter().map(|g| g.tool().to_owned()).collect()
    }

    /// The tool an answer for the rest of the run on paused call `seq`
    /// would grant, if one may.
    pub fn grantable(&self, seq: u64) -> Option<String> {
        let grantable = self.grantable.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        grantable.iter().find(|(s, _)| *s == seq).map(|(_, tool)| tool.clone())
    }
}

impl Approver for PausingApprover {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        if self.grants.cover_request(&request) {
            let reason = format!("allowed by the person in {} for the rest of the run", self.client);
            return Box::pin(std::future::ready(Ok(Approval::allow().with_reason(reason))));
        }
        if RunGrant::of(&request).is_some_and(|g| !g.per_subject()) {
            let mut grantable = self.grantable.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            grantable.push((request.seq, request.tool.clone()));
        }
        Box::pin(std::future::ready(Ok(Approval::pause())))
    }

    fn elicit(&self, _request: ElicitationRequest) -> ElicitationReplyFuture {
        Box::pin(std::future::ready(ElicitationReply::decline(
            "codemode mcp serve",
            "this MCP client cannot be asked questions while a run goes on (it declared no elicitation, or \
             speaks MCP 2026-07-28, whose requests carry no server questions mid-call); the question was declined",
        )))
    }
}
