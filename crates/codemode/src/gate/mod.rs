//! The gate: one function decides every call, direct or nested.
//!
//! The steps run in the order of `docs/POLICY.md` (which numbers them;
//! the code names them); the first that decides ends it. The synchronous
//! steps implement [`Step`] and are listed in [`STEPS`]; they decide from
//! the call, the catalog and the policy alone, so most calls are decided
//! without waiting on anything. The steps that may wait (hooks run
//! programs, approvers ask someone) implement [`later::LaterStep`] and are
//! listed in [`later::LATER_STEPS`]; they run, in order, only when a hook
//! matches the tool or the call needs an approval.
//!
//! Why this order: cheap refusals that do not depend on the tool come first
//! (budget, direct-only, a changed posture, plan mode), then existence and
//! the arguments, so a refusal names the most basic thing wrong; then the
//! user's rules; then what the tool is (reader or writer); and only then
//! anything that runs a program or asks a person, so a call that is refused
//! anyway never reaches a hook or an approver.
//!
//! A refusal is a verdict recorded in the receipt, never an `Err` or a panic.

mod after_approval;
pub(crate) mod approval;
mod approval_wait;
pub(crate) mod approvers;
mod ask_posture;
mod before_call_hooks;
pub(crate) mod binding;
mod budget;
pub(crate) mod compensation;
mod direct_only;
pub(crate) mod elicitation;
pub(crate) mod git_includes;
pub(crate) mod git_metadata;
pub(crate) mod hooks;
mod input_schema;
pub(crate) mod later;
pub(crate) mod mode;
pub(crate) mod policy;
pub(crate) mod posture_epoch;
mod preparation;
pub(crate) mod primary;
pub(crate) mod protection;
pub(crate) mod rules;
mod run_grant;
mod tool_exists;

pub(crate) use direct_only::is_direct_only;
pub(crate) use input_schema::schema_mismatch;
pub(crate) use tool_exists::unknown_tool;

pub use approval::{
    Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError, RunChanges, RunGrantScope,
};
pub use approvers::{
    AllowApprover, BatchApprover, CommandApprover, DenyApprover, PauseApprover, PromptApprover,
    approver_from_spec, default_approver,
};
pub use elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest, NOT_ANSWERED_REASON};
pub use policy::{DEFAULT_HOOK_TIMEOUT, HookSpec, Mode, Policy, Posture, Rule, Rules, ToolSettings};
pub use run_grant::{RunGrant, RunGrants};

use serde_json::Value;

use crate::catalog::Catalog;
use crate::receipt::Caller;

/// One call as the gate sees it.
#[derive(Debug)]
pub(crate) struct CallRequest<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub caller: Caller,
    /// Calls the run made before this one (refused ones included).
    pub calls_made: usize,
    /// The tool's primary argument (bash's command, a file tool's path) in
    /// the spellings rules are matched against.
    pub primary: Option<&'a primary::Primary>,
}

/// What the gate may consult.
pub(crate) struct GateContext<'a> {
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
    /// Calls per run (`Limits::max_calls`).
    pub max_calls: usize,
    /// The engine's posture now.
    pub posture: Posture,
    /// The posture when the run started, when it has changed since.
    pub posture_at_start: Option<Posture>,
    /// Protected and hidden paths, and the run.
    pub guard: protection::Guard<'a>,
    /// The call's catalog entry when the caller has already looked it up
    /// (in `catalog`); steps read it through [`GateContext::entry`].
    pub known: Option<&'a crate::catalog::Entry>,
}

impl<'a> GateContext<'a> {
    /// The catalog entry of `tool`: the one already looked up when it is
    /// that tool's, else `catalog`'s.
    pub(crate) fn entry(&self, tool: &str) -> Option<&'a crate::catalog::Entry> {
        match self.known {
            Some(entry) if *entry.name == *tool => Some(entry),
            _ => self.catalog.get(tool),
        }
    }
}

/// What the rules and the preparation learn about a call, for the steps
/// after them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Preparation {
    /// The allow rule that covers the call: it needs no approval.
    pub allowed_by: Option<String>,
    /// Why the allow rules naming the tool do not cover the call, when some
    /// name it and none covers it (for the approval request and a denial).
    pub not_allowed_by: Option<String>,
    /// The ask rule that covers the call: it needs an approval.
    pub ask_rule: Option<String>,
    /// The tool declares itself read-only (`readOnlyHint: true`).
    pub reader: bool,
    /// The tool says it may destroy data (`destructiveHint: true`).
    pub destructive: bool,
}

/// A step's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// This step has nothing to say; ask the next.
    Next,
    /// Refuse the call; the reason goes to the program and the receipt.
    Refuse(String),
    /// Refuse the call and end the run: a run limit was reached.
    Exhausted(String),
}

/// One synchronous step of the gate.
pub(crate) trait Step: Sync {
    /// A unique, stable name, as listed in docs/POLICY.md (and in a
    /// traced call's span: telemetry/mod.rs).
    fn name(&self) -> &'static str;
    /// Decides, or passes to the next step; may note what it learnt in
    /// `prep`.
    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, prep: &mut Preparation) -> Verdict;
}

/// The synchronous steps, in the order they run.
pub(crate) static STEPS: &[&dyn Step] = &[
    // Before anything about the tool: the run's budget, then the names
    // that must never be called from inside a program.
    &budget::Budget,
    &direct_only::DirectOnly,
    // A posture change during the run refuses the rest of the run.
    &posture_epoch::PostureEpoch,
    // Plan mode refuses every tool that is not read-only.
    &mode::PlanMode,
    // The tool exists and this caller may call it.
    &tool_exists::ToolExists,
    // The arguments match the tool's input schema.
    &input_schema::InputSchema,
    // Deny rules (deny wins), then allow and ask rules.
    &rules::RuleLists,
    // Protected and hidden paths (an allow rule naming one lifts it), and
    // bash with the sandbox off outside full-access.
    &protection::ProtectedPaths,
    // What the tool is: reader or writer, destructive or not.
    &preparation::Preparing,
];

/// The outcome of the synchronous steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Early {
    /// Go on to the later steps with what was learnt.
    Continue(Preparation),
    /// Do not run the call: why, and the step that refused it (its name
    /// in docs/POLICY.md).
    Refuse(String, &'static str),
    /// Do not run the call, and end the run (error kind `limit`).
    Exhausted(String),
}

/// Runs the synchronous steps in order.
pub(crate) fn decide_early(call: &CallRequest<'_>, cx: &GateContext<'_>) -> Early {
    let mut prep = Preparation::default();
    for step in STEPS {
        match step.check(call, cx, &mut prep) {
            Verdict::Next => continue,
            Verdict::Refuse(reason) => return Early::Refuse(reason, step.name()),
            Verdict::Exhausted(reason) => return Early::Exhausted(reason),
        }
    }
    Early::Continue(prep)
}

/// `direct_only`, `input_schema`, `rules` and `protected_paths` again, for
/// arguments a hook rewrote: the rewrite must
/// not ask for escalation, must still match the schema, and is subject to
/// the rules like the original (a deny rule refuses it; allow and ask are
/// taken from the rewrite). Returns the rules' new findings.
pub(crate) fn recheck_rewrite(call: &CallRequest<'_>, cx: &GateContext<'_>) -> Result<Preparation, String> {
    let mut prep = Preparation::default();
    for step in [
        &direct_only::DirectOnly as &dyn Step,
        &input_schema::InputSchema,
        &rules::RuleLists,
        &protection::ProtectedPaths,
    ] {
        if let Verdict::Refuse(reason) = step.check(call, cx, &mut prep) {
            return Err(reason);
        }
    }
    Ok(prep)
}

#[cfg(test)]
impl<'a> GateContext<'a> {
    /// A context with the default policy and an unchanged posture.
    pub(crate) fn for_test(catalog: &'a Catalog, policy: &'a Policy) -> Self {
        static CONFINEMENT: std::sync::LazyLock<crate::sandbox::Confinement> =
            std::sync::LazyLock::new(|| {
                crate::sandbox::Confinement::for_workspace(std::path::Path::new("/ws"))
            });
        GateContext {
            catalog,
            policy,
            max_calls: 10,
            posture: policy.posture,
            posture_at_start: None,
            guard: protection::Guard { protections: &[], confinement: &CONFINEMENT, run_id: "test-run" },
            known: None,
        }
    }
}

#[cfg(test)]
impl<'a> CallRequest<'a> {
    /// A program's first call of `tool` with `args`.
    pub(crate) fn for_test(tool: &'a str, args: &'a Value) -> Self {
        CallRequest { tool, args, caller: Caller::Program, calls_made: 0, primary: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_unique_and_in_documented_order() {
        let names: Vec<&str> = STEPS.iter().map(|s| s.name()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate step names: {names:?}");
        assert_eq!(
            names,
            [
                "budget",
                "direct_only",
                "posture_epoch",
                "plan_mode",
                "tool_exists",
                "input_schema",
                "rules",
                "protected_paths",
                "preparation"
            ]
        );
        let all: Vec<&str> =
            names.iter().copied().chain(later::LATER_STEPS.iter().map(|s| s.name())).collect();
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/POLICY.md")).unwrap();
        let documented: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| ").and_then(|l| l.split(" | ").nth(1)))
            .filter_map(|cell| cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')))
            .collect();
        assert_eq!(documented, all, "docs/POLICY.md lists the steps in this order");
    }

    #[test]
    fn a_known_entry_answers_only_for_its_own_tool() {
        let catalog = Catalog::new(crate::tools::native()).unwrap();
        let policy = Policy::default();
        let read = catalog.get("read").unwrap();
        let cx = GateContext { known: Some(read), ..GateContext::for_test(&catalog, &policy) };
        assert!(std::ptr::eq(cx.entry("read").unwrap(), read));
        // Another name is looked up in the catalog, not answered with `read`.
        assert_eq!(cx.entry("write").unwrap().spec.name, "write");
        assert!(cx.entry("no_such_tool").is_none());
        let none = GateContext::for_test(&catalog, &policy);
        assert!(std::ptr::eq(none.entry("read").unwrap(), read));
    }
}
