//! The steps of the gate that may wait, listed in [`LATER_STEPS`]: they run
//! on the tool runtime, only for calls that a hook matches or that need an
//! approval, after the synchronous [`STEPS`](super::STEPS). Each is a
//! [`LaterStep`]: `before_call_hooks`, `ask_and_posture`, `approval`,
//! `after_approval` (docs/POLICY.md numbers them).

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
use crate::journal::record::BoundObject;
use crate::receipt::{Caller, Decision};

pub(crate) use super::approval_wait::{ApprovalClock, unless_told_to_stop};

/// A call that passed the synchronous steps.
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

/// What the later steps consult.
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
        /// The object the call's path named when the approver was asked:
        /// an allow on resume holds for it alone.
        bound: Option<Box<BoundObject>>,
    },
}

/// Whether the later steps have anything to do for a call: a hook matches it, or
/// it needs an approval with no hook involved.
pub(crate) fn needed(tool: &str, prep: &Preparation, policy: &Policy, posture: &PostureCell) -> bool {
    hooks_for(&policy.hooks, tool).next().is_some()
        || approval_reason(tool, prep, &HookVerdict::default(), posture.get().0).is_some()
}

/// The steps that may wait, in the order they run (their numbers are in
/// docs/POLICY.md; a test checks the names against it). Hooks come first
/// because they may rewrite the call or answer `allow`/`ask`, which the
/// approval question depends on; the approval comes after deciding whether
/// one is needed; the posture is checked again once it is given.
pub(crate) static LATER_STEPS: &[&dyn LaterStep] =
    &[&BeforeCallHooks, &AskAndPosture, &ApprovalStep, &AfterApproval];

/// A call going through the later steps: what each step may read and
/// change.
pub(crate) struct InProgress<'a> {
    pub call: LaterCall<'a>,
    /// The posture when the later steps began.
    pub posture_before: super::Posture,
    /// The hooks' answers (`allow`, `ask`), for the approval question.
    pub verdict: HookVerdict,
    /// Notes for the receipt (hook rewrites, the approver's reason).
    pub notes: Vec<String>,
    /// Why the call needs an approval, once `ask_and_posture` found it
    /// does.
    pub reason: Option<String>,
    /// What an approval for the rest of the run would cover.
    pub run_grant: Option<RunGrantScope>,
    /// The object the call's path named when the approver was asked
    /// (`binding.rs`): the call runs after the approval only while its
    /// path still names it.
    pub bound: Option<BoundObject>,
}

/// What a later step says.
pub(crate) enum Flow {
    /// Go on to the next step.
    Next,
    /// The gate is done with the call.
    Done(Final),
}

/// The future a later step returns.
pub(crate) type StepFuture<'s> = std::pin::Pin<Box<dyn std::future::Future<Output = Flow> + Send + 's>>;

/// One step of the gate that may wait (hooks run programs, approvers ask
/// someone).
pub(crate) trait LaterStep: Sync {
    /// A unique, stable name, as listed in docs/POLICY.md (and in a
    /// traced call's span: telemetry/mod.rs).
    fn name(&self) -> &'static str;
    /// Decides, or passes to the next step; may change the call in
    /// progress (a hook's rewrite, notes).
    fn run<'s>(&'s self, call: &'s mut InProgress<'_>, cx: &'s LaterContext<'_>) -> StepFuture<'s>;
}

/// Runs the later steps in order; a call no step decided runs, approved.
/// Also gives the name of the step that decided: the one that ended the
/// steps, or for a call they let run, `approval` when it was asked and
/// `before_call_hooks` when a hook's `allow` spared it.
pub(crate) async fn decide_rest(call: LaterCall<'_>, cx: LaterContext<'_>) -> (Final, &'static str) {
    let posture_before = cx.posture.get().0;
    let mut state = InProgress {
        call,
        posture_before,
        verdict: HookVerdict::default(),
        notes: Vec::new(),
        reason: None,
        run_grant: None,
        bound: None,
    };
    // Whether `ask_and_posture` found an approval needed (the approval
    // step takes its reason).
    let mut asked = false;
    for step in LATER_STEPS {
        if let Flow::Done(end) = step.run(&mut state, &cx).await {
            return (end, step.name());
        }
        asked |= state.reason.is_some();
    }
    let InProgress { call, notes, .. } = state;
    if !call.prep.reader {
        call.changes.record(call.tool, call.subject.as_deref());
    }
    let step = if asked { "approval" } else { "before_call_hooks" };
    (Final::Run { args: call.args, decision: Decision::Approved, notes }, step)
}

/// Before-call hooks: each hook whose pattern matches the tool name, in
/// order; a block refuses, an `allow` or `ask` answer is kept for the
/// approval question, rewritten arguments are checked again.
struct BeforeCallHooks;

impl LaterStep for BeforeCallHooks {
    fn name(&self) -> &'static str {
        "before_call_hooks"
    }

    fn run<'s>(&'s self, state: &'s mut InProgress<'_>, cx: &'s LaterContext<'_>) -> StepFuture<'s> {
        Box::pin(async move {
            let call = &mut state.call;
            let hooked = HookedCall {
                tool: call.tool,
                args: std::mem::take(&mut call.args),
                caller: call.caller,
                run_id: call.run_id,
                workspace: call.workspace,
            };
            let protections = (cx.protections, cx.confinement);
            // A call of a run told to stop never runs: its hooks do not
            // start, and one running is ended (as the run's end would end
            // it), instead of running on for the overrun watch's grace.
            let hooks = unless_told_to_stop(cx.clock, || {
                before_call_hooks::run(hooked, cx.catalog, cx.policy, state.posture_before, protections)
            });
            let Some(hooked) = hooks.await else {
                return std::future::pending().await;
            };
            match hooked {
                Hooked::Blocked(reason) => Flow::Done(Final::Refuse(reason)),
                Hooked::Passed { args, verdict, notes, rules } => {
                    if let Some(rules) = rules {
                        // The rules' findings on the rewritten call replace
                        // those on the original.
                        call.prep.allowed_by = rules.allowed_by;
                        call.prep.not_allowed_by = rules.not_allowed_by;
                        call.prep.ask_rule = rules.ask_rule;
                        call.subject = cx
                            .catalog
                            .get(call.tool)
                            .and_then(|e| super::primary::of(&e.spec, &args, call.workspace))
                            .map(|p| p.subject().to_owned());
                    }
                    call.args = args;
                    state.verdict = verdict;
                    state.notes = notes;
                    Flow::Next
                }
            }
        })
    }
}

/// Ask rules and posture: does the call need an approval? One that does
/// not runs now, `auto`.
struct AskAndPosture;

impl LaterStep for AskAndPosture {
    fn name(&self) -> &'static str {
        "ask_and_posture"
    }

    fn run<'s>(&'s self, state: &'s mut InProgress<'_>, _cx: &'s LaterContext<'_>) -> StepFuture<'s> {
        let call = &mut state.call;
        let Some(reason) = approval_reason(call.tool, &call.prep, &state.verdict, state.posture_before)
        else {
            if !call.prep.reader {
                call.changes.record(call.tool, call.subject.as_deref());
            }
            let end = Final::Run {
                args: std::mem::take(&mut call.args),
                decision: Decision::Auto,
                notes: std::mem::take(&mut state.notes),
            };
            return Box::pin(std::future::ready(Flow::Done(end)));
        };
        state.run_grant =
            (!asked_every_time(&call.prep, &state.verdict)).then(|| RunGrantScope::now(call.changes));
        state.reason = Some(reason);
        Box::pin(std::future::ready(Flow::Next))
    }
}

/// The approval: the approver decides while the program waits (the run's
/// deadline clock knows); allow -> `approved`, deny -> `denied`, approver
/// error -> `refused`, pause -> the run pauses on the call.
struct ApprovalStep;

impl LaterStep for ApprovalStep {
    fn name(&self) -> &'static str {
        "approval"
    }

    fn run<'s>(&'s self, state: &'s mut InProgress<'_>, cx: &'s LaterContext<'_>) -> StepFuture<'s> {
        Box::pin(async move {
            let call = &mut state.call;
            let reason = state.reason.take().unwrap_or_default();
            // What the path names now is what the person sees and what the
            // approval binds to.
            if let Some(primary) = cx
                .catalog
                .get(call.tool)
                .and_then(|e| super::primary::of(&e.spec, &call.args, call.workspace))
                .filter(|p| !p.command)
            {
                call.subject = Some(primary.subject().to_owned());
                state.bound = super::binding::of_primary(&primary, call.workspace);
                // A path that resolves to nothing (a link to nowhere, a
                // loop) names no object to show or to bind: asking would
                // approve whatever the link names later.
                if state.bound.is_none() {
                    return Flow::Done(Final::Refuse(super::binding::unbindable(&primary.written)));
                }
            }
            let request = ApprovalRequest {
                tool: call.tool.to_owned(),
                arguments: call.args.clone(),
                caller: call.caller,
                run_id: call.run_id.to_owned(),
                seq: call.seq,
                reason: reason.clone(),
                subject: call.subject.clone(),
                annotations: call.annotations.clone(),
                destructive: call.prep.destructive,
                run_grant: state.run_grant.take(),
                batch: None,
            };
            // A denial or a failed approver says first which allow rule the
            // user may have meant, and why it did not cover the call: the
            // approver's own reason (no terminal, `--approve deny`) is not
            // the whole story.
            let because =
                |answer: String| match (&call.prep.not_allowed_by, reason.starts_with("the allow rule")) {
                    (Some(why), true) => format!("{why}, and {answer}"),
                    _ => answer,
                };
            // The approver command runs outside the sandbox: a file it
            // names that a tool call created during this run must not run.
            if let Some(file) =
                super::protection::file_appeared(cx.protections, super::protection::NamedBy::Approver)
            {
                return Flow::Done(Final::Refuse(format!(
                    "the approver was not asked: `{}`, a file the approver command names, did not exist when the \
                     engine was built and exists now (a tool call may have created it); check the file, then \
                     start a new run",
                    file.display()
                )));
            }
            match approval_wait::ask(cx.approver, cx.clock, request).await {
                Approved::Yes(why) => {
                    state.notes.extend(why.map(|w| format!("approved: {w}")));
                    Flow::Next
                }
                Approved::Denied(answer) => Flow::Done(Final::Deny(because(answer))),
                Approved::Failed(answer) => Flow::Done(Final::Refuse(because(answer))),
                Approved::Pause(why) => {
                    let mut notes = std::mem::take(&mut state.notes);
                    notes.extend(why.map(|w| format!("paused: {w}")));
                    let args = std::mem::take(&mut call.args);
                    // A resume replays what the run read before the
                    // pause: the bytes of the file a call would change
                    // are recorded now, and an allow on resume holds only
                    // while they stay so.
                    let changes = cx.catalog.get(call.tool).is_some_and(|e| !e.spec.is_read_only());
                    let bound = state.bound.take().map(|mut bound| {
                        if changes {
                            bound.content =
                                Some(crate::journal::files_seen::bound_content(&bound, call.workspace));
                        }
                        Box::new(bound)
                    });
                    Flow::Done(Final::Pause { args, reason, subject: call.subject.clone(), notes, bound })
                }
            }
        })
    }
}

/// After the approval: a posture that narrowed while the call waited
/// refuses it, and so does a path that no longer names the object the
/// approval was given for.
struct AfterApproval;

impl LaterStep for AfterApproval {
    fn name(&self) -> &'static str {
        "after_approval"
    }

    fn run<'s>(&'s self, state: &'s mut InProgress<'_>, cx: &'s LaterContext<'_>) -> StepFuture<'s> {
        let call = &state.call;
        let moved = || {
            let bound = state.bound.as_ref()?;
            let spec = &cx.catalog.get(call.tool)?.spec;
            super::binding::check(bound, spec, &call.args, call.workspace).err()
        };
        let flow = match after_approval::narrowed(state.posture_before, cx.posture.get().0).or_else(moved) {
            Some(reason) => Flow::Done(Final::Refuse(reason)),
            None => Flow::Next,
        };
        Box::pin(std::future::ready(flow))
    }
}
