//! The `plan_mode` step: Plan mode refuses every tool that is not read-only.
//!
//! Read-only means the tool declares `readOnlyHint: true` (native `read`,
//! `file_search`, `grep_files`; MCP tools that say so). `write`, `edit`,
//! `bash` and every tool that does not declare itself read-only are
//! refused, directly and inside programs. The one exception is
//! `mcp_connect__<server>`: starting a server is how plan mode reaches its
//! read-only tools (the posture still decides its approval).

use super::ask_posture::starts_programs;
use super::{CallRequest, GateContext, Mode, Preparation, Step, Verdict};
use crate::catalog::ToolSource;

/// Refuses writers in plan mode.
pub(crate) struct PlanMode;

impl Step for PlanMode {
    fn name(&self) -> &'static str {
        "plan_mode"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut Preparation) -> Verdict {
        if cx.policy.mode != Mode::Plan {
            return Verdict::Next;
        }
        match cx.entry(call.tool) {
            // Starting an MCP server changes nothing by itself, and plan mode
            // needs it for the server's read-only tools; the posture still
            // decides whether it needs an approval.
            Some(entry) if entry.spec.source == ToolSource::Synthetic && starts_programs(call.tool) => {
                Verdict::Next
            }
            Some(entry) if !entry.spec.is_read_only() => Verdict::Refuse(format!(
                "plan mode refuses `{}`: only read-only tools run in plan mode",
                call.tool
            )),
            _ => Verdict::Next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Policy;

    #[test]
    fn plan_refuses_writers_and_lets_readers_through() {
        let catalog = crate::catalog::Catalog::new(crate::tools::native()).unwrap();
        let plan = Policy { mode: Mode::Plan, ..Policy::default() };
        let work = Policy::default();
        let args = serde_json::json!({});
        for (tool, refused) in
            [("write", true), ("edit", true), ("bash", true), ("read", false), ("grep_files", false)]
        {
            let call = CallRequest::for_test(tool, &args);
            let v = PlanMode.check(&call, &GateContext::for_test(&catalog, &plan), &mut Default::default());
            assert_eq!(matches!(v, Verdict::Refuse(_)), refused, "{tool}");
            let v = PlanMode.check(&call, &GateContext::for_test(&catalog, &work), &mut Default::default());
            assert_eq!(v, Verdict::Next, "{tool} in work mode");
        }
    }
}
