//! The `input_required` round trip of a 2026-07-28 client (MCP multi
//! round-trip requests): the question about a paused run's pending calls,
//! and the decisions the client's retry brings back (docs/SERVE.md,
//! "Approvals", route 2).

use rmcp::model::{ElicitRequest, InputRequest, InputRequests, InputRequiredResult, InputResponses};
use serde_json::Value;

use codemode::Receipt;
use codemode::approval::{RunGrant, RunGrants};
use codemode::display_text::visible;
use codemode::journal::Decided;

use super::pausing::PausingApprover;
use super::question::{self, Asked};
use super::request_state::{ApprovalState, StateSigner};

/// The key of the one input request: the question listing the pending
/// calls.
pub(crate) const INPUT_KEY: &str = "approve";

/// `input_required` for `receipt`, a run paused by `approver` with calls
/// pending: one form elicitation listing them (as many as one question
/// shows; the rest stay pending and are asked on the next round), and
/// the state, sealed by `signer` for a retry with `bound` arguments,
/// naming them, the tools already granted and those the question offers.
/// `None` when the state would be too long to be read back (the run
/// stays paused for `codemode approve`, as the paused result says).
pub(crate) fn ask(
    receipt: &Receipt,
    approver: &PausingApprover,
    signer: &StateSigner,
    bound: &Value,
) -> Option<InputRequiredResult> {
    let run_id = receipt.run_id.as_str();
    let offer = |seq: u64| approver.grantable(seq);
    let asked: Vec<Asked<'_>> = receipt
        .pending
        .iter()
        .map(|p| Asked {
            tool: &p.tool,
            subject: p.subject.as_deref(),
            arguments: &p.arguments,
            reason: &p.reason,
            seq: p.seq,
            reach: offer(p.seq)
                .and_then(|t| RunGrant::of_tool(run_id, &t))
                .map(|g| g.reach(&visible(g.tool()))),
        })
        .collect();
    let asked = &asked[..question::fitting(&asked, run_id)];
    let mut offered: Vec<String> = asked.iter().filter_map(|a| offer(a.seq)).collect();
    offered.sort();
    offered.dedup();
    let state = ApprovalState {
        run_id: run_id.to_owned(),
        seqs: asked.iter().map(|a| a.seq).collect(),
        granted: approver.granted_tools(),
        offered,
    };
    let sealed = signer.seal(&state, bound);
    if sealed.len() > super::arguments::MAX_REQUEST_STATE_BYTES {
        return None;
    }
    let params = question::question(run_id, asked)?;
    let mut requests = InputRequests::new();
    requests.insert(INPUT_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)));
    Some(InputRequiredResult::new(Some(requests), Some(sealed)))
}

/// What the person's answer in `responses` decides for the calls `state`
/// names: the same decision for each (accept allows them all, decline or
/// cancel denies them all, no answer denies them), and the grants the
/// resumed run holds (those of `state`, with the offered tools when the
/// answer accepts and ticks the rest of the run). `client` names the
/// client in reasons.
pub(crate) fn answered(
    state: &ApprovalState,
    responses: Option<&InputResponses>,
    client: &str,
) -> (Vec<(u64, Decided)>, RunGrants) {
    let response = responses.and_then(|r| r.get(INPUT_KEY));
    let action = response.and_then(|r| r.get("action")).and_then(Value::as_str);
    let decided = match action {
        Some("accept") => Decided::Allow,
        Some("decline") => Decided::Deny(format!("declined by the person in {client}")),
        Some("cancel") => Decided::Deny(format!("the person dismissed the approval in {client}")),
        _ => Decided::Deny(format!("{client} sent no answer for this call's approval")),
    };
    let rest_of_run = decided.allows() && question::rest_of_run(response.and_then(|r| r.get("content")));
    let mut grants = RunGrants::default();
    let offered = state.offered.iter().filter(|_| rest_of_run);
    for tool in state.granted.iter().chain(offered) {
        if let Some(grant) = RunGrant::of_tool(&state.run_id, tool) {
            grants.hold(grant);
        }
    }
    (state.seqs.iter().map(|&seq| (seq, decided.clone())).collect(), grants)
}
