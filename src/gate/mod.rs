//! The gate: one function decides every call, direct or nested.
//!
//! Each step is a small unit implementing [`Step`]; [`Gate::decide`] runs
//! them in the order of [`STEPS`] and the first that decides ends it. The
//! order follows DESIGN.md §5 and `docs/POLICY.md`: cheap refusals that do
//! not depend on the tool come first (budget, direct-only), then existence,
//! then the arguments, so a refusal names the most basic thing wrong.
//! Policy steps (mode, rules, hooks, postures, approvals) slot in after
//! input validation.
//!
//! A refusal is a verdict recorded in the receipt, never an `Err` or a panic.

pub(crate) mod approval;
mod budget;
mod direct_only;
mod input_schema;
pub(crate) mod policy;
mod tool_exists;

pub use approval::{Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError};
pub use policy::{DEFAULT_HOOK_TIMEOUT, HookSpec, Mode, Policy, Posture, Rule, Rules, ToolSettings};

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
}

/// What the gate may consult.
pub(crate) struct GateContext<'a> {
    pub catalog: &'a Catalog,
    /// Calls per run (`Limits::max_calls`).
    pub max_calls: usize,
}

/// A step's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// This step has nothing to say; ask the next.
    Next,
    /// Allow the call; later steps are not asked (policy steps use it).
    #[allow(dead_code)]
    Allow,
    /// Refuse the call; the reason goes to the program and the receipt.
    Refuse(String),
    /// Refuse the call and end the run: a run limit was reached.
    Exhausted(String),
}

/// One step of the gate.
pub(crate) trait Step: Sync {
    /// A unique, stable name, as listed in docs/POLICY.md.
    #[allow(dead_code)] // read by tests and, later, by receipts of policy decisions
    fn name(&self) -> &'static str;
    /// Decides, or passes to the next step.
    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>) -> Verdict;
}

/// Every step, in the order they run.
pub(crate) static STEPS: &[&dyn Step] = &[
    // 1. Before anything about the tool: the run's budget, then the names
    //    that must never be called from inside a program.
    &budget::Budget,
    &direct_only::DirectOnly,
    // 4. The tool exists and this caller may call it.
    &tool_exists::ToolExists,
    // 5. The arguments match the tool's input schema.
    &input_schema::InputSchema,
];

/// The gate's decision for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GateDecision {
    /// Run the call.
    Allow,
    /// Do not run the call.
    Refuse(String),
    /// Do not run the call, and end the run (error kind `limit`).
    Exhausted(String),
}

/// Runs the steps in order; a call no step decides is allowed (the engine's
/// default posture is full access until policy steps are configured).
pub(crate) fn decide(call: &CallRequest<'_>, cx: &GateContext<'_>) -> GateDecision {
    for step in STEPS {
        match step.check(call, cx) {
            Verdict::Next => continue,
            Verdict::Allow => return GateDecision::Allow,
            Verdict::Refuse(reason) => return GateDecision::Refuse(reason),
            Verdict::Exhausted(reason) => return GateDecision::Exhausted(reason),
        }
    }
    GateDecision::Allow
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
        assert_eq!(names, ["budget", "direct_only", "tool_exists", "input_schema"]);
    }
}
