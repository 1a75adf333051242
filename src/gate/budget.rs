//! Step 1a: the run's call budget (`Limits::max_calls`).

use super::{CallRequest, GateContext, Step, Verdict};

/// Refuses the call past the budget and ends the run; a program that makes
/// that many calls is runaway, and going on would only grow the receipt.
pub(crate) struct Budget;

impl Step for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>) -> Verdict {
        if call.calls_made >= cx.max_calls {
            Verdict::Exhausted(format!(
                "call budget exhausted: a run may make {} tool calls (Limits::max_calls); \
                 batch work into fewer calls or raise the limit",
                cx.max_calls
            ))
        } else {
            Verdict::Next
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::receipt::Caller;
    use serde_json::json;

    #[test]
    fn the_call_past_the_budget_ends_the_run() {
        let catalog = Catalog::new(vec![]).unwrap();
        let cx = GateContext { catalog: &catalog, max_calls: 2 };
        let args = json!({});
        let call = |n| CallRequest { tool: "x", args: &args, caller: Caller::Program, calls_made: n };
        assert_eq!(Budget.check(&call(1), &cx), Verdict::Next);
        assert!(matches!(Budget.check(&call(2), &cx), Verdict::Exhausted(r) if r.contains("2 tool calls")));
    }
}
