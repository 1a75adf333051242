//! Steps 8-11: the steps that may wait. They run on the tool runtime, only
//! for calls that a hook matches or that need an approval.
//!
//! 8. `before_call_hooks`: each hook whose pattern matches the tool name, in
//!    order; a block refuses, an `allow` or `ask` answer is kept for step 9,
//!    rewritten arguments are checked again (schema, escalation fields).
//! 9. `ask_and_posture`: does the call need an approval? (`ask_posture.rs`)
//! 10. `approval`: the approver decides while the program waits (the run's
//!     deadline clock stops while the run waits on nothing else); allow ->
//!     `approved`, deny -> `denied`, approver error -> `refused`.
//! 11. `after_approval`: if the posture narrowed while the call waited, the
//!     call is refused.

use std::path::Path;

use serde_json::Value;

use super::after_approval;
use super::approval_wait::{self, Approved};
use super::ask_posture::{HookVerdict, approval_reason, asked_every_time};
use super::before_call_hooks::{self, Hooked, HookedCall};
use super::hooks::hooks_for;
use super::posture_epoch::PostureCell;
use super::{ApprovalRequest, Approver, Policy, Preparation, RunChanges, RunGrantScope};
use crate::catalog::{Annotations, Catalog};
use crate::receipt::{Caller, Decision};

pub(crate) use super::approval_wait::ApprovalClock;

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
    /// What the call acts on (its primary argument as the tool sees it).
    pub subject: Option<String>,
    /// The run's calls that may have changed files: a call let run that is
    /// not read-only is noted there.
    pub changes: &'a RunChanges,
}

/// What steps 8-11 consult.
pub(crate) struct LaterContext<'a> {
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
    pub posture: &'a PostureCell,
    pub approver: &'a dyn Approver,
    pub clock: &'a dyn ApprovalClock,
    /// Protected paths, for a hook's rewritten arguments.
    pub protections: &'a [super::protection::Protection],
    /// Hidden paths and the sandbox, for a hook's rewritten arguments.
    pub confinement: &'a crate::sandbox::Confinement,
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
    /// Left for later by the approver: the run pauses on the call, which
    /// runs with `args` if it is allowed on resume.
    Pause {
        /// The arguments after any hook rewrite.
        args: Value,
        /// Why the call needs a decision (the approval request's reason).
        reason: String,
        /// What the call acts on.
        subject: Option<String>,
        /// Notes so far (hook rewrites).
        notes: Vec<String>,
    },
}

/// Whether steps 8-11 have anything to do for a call: a hook matches it, or
/// it needs an approval with no hook involved.
pub(crate) fn needed(tool: &str, prep: &Preparation, policy: &Policy, posture: &PostureCell) -> bool {
    hooks_for(&policy.hooks, tool).next().is_some()
        || approval_reason(tool, prep, &HookVerdict::default(), posture.get().0).is_some()
}

/// Runs steps 8-11 in order.
pub(crate) async fn decide_rest(call: LaterCall<'_>, cx: LaterContext<'_>) -> Final {
    let LaterCall { tool, args, caller, run_id, seq, workspace, mut prep, annotations, mut subject, changes } =
        call;
    let posture_before = cx.posture.get().0;

    // 8. Before-call hooks.
    let hooked = HookedCall { tool, args, caller, run_id, workspace };
    let (args, verdict, mut notes) = match before_call_hooks::run(
        hooked,
        cx.catalog,
        cx.policy,
        posture_before,
        (cx.protections, cx.confinement),
    )
    .await
    {
        Hooked::Blocked(reason) => return Final::Refuse(reason),
        Hooked::Passed { args, verdict, notes, rules } => {
            if let Some(rules) = rules {
                // The rules' findings on the rewritten call replace those
                // on the original.
                prep.allowed_by = rules.allowed_by;
                prep.not_allowed_by = rules.not_allowed_by;
                prep.ask_rule = rules.ask_rule;
                subject = cx
                    .catalog
                    .get(tool)
                    .and_then(|e| super::primary::of(&e.spec, &args, workspace))
                    .map(|p| p.subject().to_owned());
            }
            (args, verdict, notes)
        }
    };

    // 9. Ask rules and posture.
    let Some(reason) = approval_reason(tool, &prep, &verdict, posture_before) else {
        if !prep.reader {
            changes.record(tool, subject.as_deref());
        }
        return Final::Run { args, decision: Decision::Auto, notes };
    };
    let run_grant = (!asked_every_time(&prep, &verdict)).then(|| RunGrantScope::now(changes));

    // 10. Approval; the clock knows the call waits.
    let request = ApprovalRequest {
        tool: tool.to_owned(),
        arguments: args.clone(),
        caller,
        run_id: run_id.to_owned(),
        seq,
        reason,
        subject,
        annotations: annotations.clone(),
        destructive: prep.destructive,
        run_grant,
    };
    let (reason, subject) = (request.reason.clone(), request.subject.clone());
    // A denial or a failed approver says first which allow rule the user
    // may have meant, and why it did not cover the call: the approver's
    // own reason (no terminal, `--approve deny`) is not the whole story.
    let because = |answer: String| match (&prep.not_allowed_by, reason.starts_with("the allow rule")) {
        (Some(why), true) => format!("{why}, and {answer}"),
        _ => answer,
    };
    match approval_wait::ask(cx.approver, cx.clock, request).await {
        Approved::Yes(why) => notes.extend(why.map(|w| format!("approved: {w}"))),
        Approved::Denied(answer) => return Final::Deny(because(answer)),
        Approved::Failed(answer) => return Final::Refuse(because(answer)),
        Approved::Pause(why) => {
            notes.extend(why.map(|w| format!("paused: {w}")));
            return Final::Pause { args, reason, subject, notes };
        }
    }

    // 11. After the approval: a posture that narrowed meanwhile refuses.
    if let Some(reason) = after_approval::narrowed(posture_before, cx.posture.get().0) {
        return Final::Refuse(reason);
    }
    if !prep.reader {
        changes.record(tool, subject.as_deref());
    }
    Final::Run { args, decision: Decision::Approved, notes }
}
