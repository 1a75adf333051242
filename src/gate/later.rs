//! Steps 8-11: the steps that may wait. They run on the tool runtime, only
//! for calls that a hook matches or that need an approval.
//!
//! 8. `before_call_hooks`: each hook whose pattern matches the tool name, in
//!    order; a block refuses, an `allow` or `ask` answer is kept for step 9,
//!    rewritten arguments are checked again (schema, escalation fields).
//! 9. `ask_and_posture`: does the call need an approval? (`ask_posture.rs`)
//! 10. `approval`: the approver decides while the run's deadline clock is
//!     paused; allow -> `approved`, deny -> `denied`, approver error ->
//!     `refused`.
//! 11. `after_approval`: if the posture narrowed while the call waited, the
//!     call is refused.

use std::path::Path;

use serde_json::Value;

use super::ask_posture::{HookVerdict, approval_reason};
use super::hooks::{HookDecision, HookInput, HookOutcome, hooks_for, run_hook};
use super::posture_epoch::PostureCell;
use super::{
    Answer, ApprovalRequest, Approver, CallRequest, GateContext, Policy, Preparation, recheck_rewrite,
};
use crate::catalog::{Annotations, Catalog};
use crate::receipt::{Caller, Decision};

/// Pauses and resumes the run's deadline clock around an approval.
pub(crate) trait ApprovalClock: Send + Sync {
    /// Stops the clock (pauses nest).
    fn pause(&self);
    /// Releases one pause.
    fn resume(&self);
}

/// A call that passed steps 1-7.
pub(crate) struct LaterCall<'a> {
    pub tool: &'a str,
    pub args: Value,
    pub caller: Caller,
    pub run_id: &'a str,
    pub seq: u64,
    pub workspace: &'a Path,
    pub prep: Preparation,
    pub annotations: &'a Annotations,
}

/// What steps 8-11 consult.
pub(crate) struct LaterContext<'a> {
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
    pub posture: &'a PostureCell,
    pub approver: &'a dyn Approver,
    pub clock: &'a dyn ApprovalClock,
}

/// The end of the gate for one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Final {
    /// Run the call with `args` (perhaps rewritten by a hook).
    Run { args: Value, decision: Decision, notes: Vec<String> },
    /// Refused by a hook, a rewrite check, an approver failure or a
    /// narrowed posture (decision `refused`).
    Refuse(String),
    /// Denied by the approver (decision `denied`).
    Deny(String),
}

/// Whether steps 8-11 have anything to do for a call: a hook matches it, or
/// it needs an approval with no hook involved.
pub(crate) fn needed(tool: &str, prep: &Preparation, policy: &Policy, posture: &PostureCell) -> bool {
    hooks_for(&policy.hooks, tool).next().is_some()
        || approval_reason(tool, prep, &HookVerdict::default(), posture.get().0).is_some()
}

/// Runs steps 8-11 in order.
pub(crate) async fn decide_rest(call: LaterCall<'_>, cx: LaterContext<'_>) -> Final {
    let LaterCall { tool, mut args, caller, run_id, seq, workspace, prep, annotations } = call;
    let posture_before = cx.posture.get().0;

    // 8. Before-call hooks.
    let mut verdict = HookVerdict::default();
    let mut notes = Vec::new();
    for hook in hooks_for(&cx.policy.hooks, tool) {
        let name = hook.command.first().map_or("?", String::as_str);
        let input = HookInput { tool, arguments: &args, caller, run_id, workspace };
        match run_hook(hook, &input).await {
            HookOutcome::Pass => {}
            HookOutcome::Block { reason } => {
                return Final::Refuse(format!("blocked by a before-call hook: {reason}"));
            }
            HookOutcome::Decide { decision, reason, arguments, context } => {
                if let Some(rewritten) = arguments {
                    let request =
                        CallRequest { tool, args: &rewritten, caller, calls_made: 0, primary: None };
                    let gcx = GateContext {
                        catalog: cx.catalog,
                        policy: cx.policy,
                        max_calls: usize::MAX,
                        posture: posture_before,
                        posture_at_start: None,
                    };
                    if let Some(why) = recheck_rewrite(&request, &gcx) {
                        return Final::Refuse(format!(
                            "the before-call hook `{name}` rewrote the arguments, and the rewrite is refused: {why}"
                        ));
                    }
                    args = rewritten;
                    notes.push(format!("arguments rewritten by the before-call hook `{name}`"));
                }
                if let Some(context) = context {
                    let kept = crate::receipt::spill::utf8_prefix(&context, 500);
                    let cut = if kept.len() < context.len() { " [cut]" } else { "" };
                    notes.push(format!("hook `{name}`: {kept}{cut}"));
                }
                match decision {
                    HookDecision::Allow => verdict.allow = true,
                    HookDecision::Ask => {
                        verdict.ask =
                            Some(reason.unwrap_or_else(|| format!("the hook `{name}` asks for approval")))
                    }
                }
            }
        }
    }

    // 9. Ask rules and posture.
    let Some(reason) = approval_reason(tool, &prep, &verdict, posture_before) else {
        return Final::Run { args, decision: Decision::Auto, notes };
    };

    // 10. Approval, with the deadline clock paused while it waits.
    let request = ApprovalRequest {
        tool: tool.to_owned(),
        arguments: args.clone(),
        caller,
        run_id: run_id.to_owned(),
        seq,
        reason,
        annotations: annotations.clone(),
        destructive: prep.destructive,
    };
    let answer = {
        let _paused = Paused::new(cx.clock);
        cx.approver.decide(request).await
    };
    match answer {
        Ok(approval) if approval.decision == Answer::Allow => {
            if let Some(why) = approval.reason {
                notes.push(format!("approved: {why}"));
            }
        }
        Ok(approval) => {
            return Final::Deny(approval.reason.unwrap_or_else(|| "denied by the approver".to_owned()));
        }
        Err(e) => return Final::Refuse(format!("the approver could not decide: {e}")),
    }

    // 11. After the approval: a posture that narrowed meanwhile refuses.
    let now = cx.posture.get().0;
    if now < posture_before {
        return Final::Refuse(format!(
            "the posture narrowed from {} to {} while the call waited for approval; make the call again",
            posture_before.as_str(),
            now.as_str()
        ));
    }
    Final::Run { args, decision: Decision::Approved, notes }
}

/// Keeps the clock paused while alive (also when the call is cancelled
/// mid-approval).
struct Paused<'a>(&'a dyn ApprovalClock);

impl<'a> Paused<'a> {
    fn new(clock: &'a dyn ApprovalClock) -> Self {
        clock.pause();
        Paused(clock)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}
