//! Step 1b: names that are never callable from inside a program.
//!
//! Some tools only make sense as a direct decision of the model or user:
//! nesting a program (`execute_tools`), delegating (`agent`, `workflow`),
//! asking the user, interactive shells, and MCP sign-in. Calls that carry
//! sandbox-escalation fields are refused too. Names compare ignoring ASCII
//! case, so `Execute_Tools` is refused like `execute_tools`.

use super::{CallRequest, GateContext, Step, Verdict};
use crate::receipt::Caller;

/// Tool names refused inside programs (compared ignoring case).
pub(crate) const DIRECT_ONLY_NAMES: &[&str] =
    &["execute_tools", "agent", "workflow", "request_user_input", "interactive_shell", "mcp__authenticate"];

/// Argument fields that ask for wider sandbox permissions.
const ESCALATION_FIELDS: &[&str] = &["sandbox_permissions", "with_escalated_permissions"];

/// Refuses direct-only tools and escalation requests from programs.
pub(crate) struct DirectOnly;

impl Step for DirectOnly {
    fn name(&self) -> &'static str {
        "direct_only"
    }

    fn check(&self, call: &CallRequest<'_>, _: &GateContext<'_>, _: &mut super::Preparation) -> Verdict {
        if call.caller != Caller::Program {
            return Verdict::Next;
        }
        if is_direct_only(call.tool) {
            return Verdict::Refuse(format!(
                "`{}` is direct-only: it cannot be called from inside a program; \
                 return what you have and make that call directly",
                call.tool
            ));
        }
        if let Some(field) =
            ESCALATION_FIELDS.iter().find(|f| call.args.get(**f).is_some_and(|v| !v.is_null()))
        {
            return Verdict::Refuse(format!(
                "the argument `{field}` asks for sandbox escalation, which a program cannot do; \
                 make that call directly"
            ));
        }
        Verdict::Next
    }
}

/// Whether `name` is direct-only: a listed name, or any MCP server's
/// `authenticate` tool, ignoring ASCII case.
pub(crate) fn is_direct_only(name: &str) -> bool {
    let starts =
        |p: &str| name.len() >= p.len() && name.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    let ends = |p: &str| {
        name.len() >= p.len() && name.as_bytes()[name.len() - p.len()..].eq_ignore_ascii_case(p.as_bytes())
    };
    DIRECT_ONLY_NAMES.iter().any(|d| d.eq_ignore_ascii_case(name))
        || (starts("mcp__") && ends("__authenticate"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use serde_json::json;

    fn check(tool: &str, args: serde_json::Value, caller: Caller) -> Verdict {
        let catalog = Catalog::new(vec![]).unwrap();
        let policy = crate::gate::Policy::default();
        let cx = GateContext::for_test(&catalog, &policy);
        DirectOnly.check(
            &CallRequest { caller, ..CallRequest::for_test(tool, &args) },
            &cx,
            &mut Default::default(),
        )
    }

    #[test]
    fn direct_only_names_are_refused_in_programs_ignoring_case() {
        for name in ["execute_tools", "EXECUTE_TOOLS", "Agent", "workflow", "mcp__github__Authenticate"] {
            assert!(matches!(check(name, json!({}), Caller::Program), Verdict::Refuse(_)), "{name}");
        }
    }

    #[test]
    fn direct_callers_and_ordinary_tools_pass() {
        assert_eq!(check("agent", json!({}), Caller::Direct), Verdict::Next);
        assert_eq!(check("read", json!({"path": "a"}), Caller::Program), Verdict::Next);
        assert_eq!(check("mcp__auth__read", json!({}), Caller::Program), Verdict::Next);
    }

    #[test]
    fn escalation_fields_are_refused() {
        let v = check(
            "bash",
            json!({"command": "ls", "sandbox_permissions": "danger-full-access"}),
            Caller::Program,
        );
        assert!(matches!(v, Verdict::Refuse(r) if r.contains("sandbox_permissions")));
    }
}
