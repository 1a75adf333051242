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
        match cx.entry(call.tool).and_then(|entry| plan_refusal(cx.policy.mode, entry, call.tool)) {
            Some(reason) => Verdict::Refuse(reason),
            None => Verdict::Next,
        }
    }
}

/// Why `mode` refuses every call of `tool` (catalog entry `entry`), if it
/// does: plan mode refuses a tool that is not read-only. The admission
/// check asks it too, so a program that names such a tool is refused
/// before it runs anything.
pub(crate) fn plan_refusal(mode: Mode, entry: &crate::catalog::Entry, tool: &str) -> Option<String> {
    if mode != Mode::Plan {
        return None;
    }
    // Starting an MCP server changes nothing by itself, and plan mode
    // needs it for the server's read-only tools; the posture still
    // decides whether it needs an approval.
    if entry.spec.source == ToolSource::Synthetic && starts_programs(tool) {
        return None;
    }
    (!entry.spec.is_read_only())
        .then(|| format!("plan mode refuses `{tool}`: only read-only tools run in plan mode"))
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
