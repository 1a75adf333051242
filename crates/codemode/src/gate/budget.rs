//! Step 1a: the run's call budget (`Limits::max_calls`; `--max-calls`,
//! `[limits] max_calls`).

use super::{CallRequest, GateContext, Step, Verdict};

/// Refuses the call past the budget and ends the run; a program that makes
/// that many calls is runaway, and going on would only grow the receipt.
pub(crate) struct Budget;

impl Step for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut super::Preparation) -> Verdict {
        if call.calls_made >= cx.max_calls {
            Verdict::Exhausted(format!(
                "call budget exhausted: a run may make {} tool calls; batch work into fewer calls \
                 or raise the limit ({})",
                cx.max_calls,
                codemode_base::limit_settings::setting("max_calls")
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
        let policy = crate::gate::Policy::default();
        let cx = GateContext { max_calls: 2, ..GateContext::for_test(&catalog, &policy) };
        let args = json!({});
        let call =
            |n| CallRequest { calls_made: n, caller: Caller::Program, ..CallRequest::for_test("x", &args) };
        let check = |n| Budget.check(&call(n), &cx, &mut Default::default());
        assert_eq!(check(1), Verdict::Next);
        assert!(matches!(check(2), Verdict::Exhausted(r) if r.contains("2 tool calls")));
    }
}
