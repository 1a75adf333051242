//! The `tool_exists` step: the tool exists and this caller may call it.

use super::{CallRequest, GateContext, Step, Verdict};

/// Refuses unknown names (suggesting the nearest ones) and callers the tool
/// does not allow (`ToolSpec::allowed_callers`).
pub(crate) struct ToolExists;

impl Step for ToolExists {
    fn name(&self) -> &'static str {
        "tool_exists"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut super::Preparation) -> Verdict {
        let Some(entry) = cx.entry(call.tool) else {
            return Verdict::Refuse(unknown_tool(cx.catalog, call.tool));
        };
        let allowed = cx
            .policy
            .tools
            .get(call.tool)
            .and_then(|t| t.allowed_callers.as_deref())
            .unwrap_or(&entry.spec.allowed_callers);
        if !allowed.contains(&call.caller) {
            let caller = match call.caller {
                crate::receipt::Caller::Program => "a program",
                crate::receipt::Caller::Direct => "a direct call",
            };
            return Verdict::Refuse(format!("`{}` cannot be called from {caller}", call.tool));
        }
        Verdict::Next
    }
}

/// Why a call of `tool`, which `catalog` does not have, is refused: the
/// name, then the nearest names, or every name when none is near and
/// there are few (the gate's refusal and the admission check's reason).
pub(crate) fn unknown_tool(catalog: &crate::catalog::Catalog, tool: &str) -> String {
    let near = catalog.suggest(tool);
    let hint = if near.is_empty() {
        let names: Vec<&str> = catalog.specs().map(|s| s.name.as_str()).collect();
        if names.len() <= 24 {
            format!("the tools are {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        } else {
            format!("there are {} tools; check the name", names.len())
        }
    } else {
        format!("did you mean {}?", near.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
    };
    let name = crate::receipt::spill::cut_text(tool);
    format!("unknown tool `{name}`: {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};
    use crate::receipt::Caller;
    use serde_json::{Value, json};
    use std::sync::Arc;

    struct T(&'static str, &'static [Caller]);
    impl Tool for T {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(self.0, "t", json!({"type": "object"})).allowed_callers(self.1)
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    fn check(tool: &str, caller: Caller) -> Verdict {
        let catalog = Catalog::new(vec![
            Arc::new(T("read", &[Caller::Program, Caller::Direct])),
            Arc::new(T("host_only", &[Caller::Direct])),
        ])
        .unwrap();
        let policy = crate::gate::Policy::default();
        let cx = GateContext::for_test(&catalog, &policy);
        let args = json!({});
        ToolExists.check(
            &CallRequest { caller, ..CallRequest::for_test(tool, &args) },
            &cx,
            &mut Default::default(),
        )
    }

    #[test]
    fn unknown_names_suggest_the_nearest() {
        let v = check("raed", Caller::Program);
        assert!(
            matches!(&v, Verdict::Refuse(r) if r.contains("unknown tool `raed`") && r.contains("`read`")),
            "{v:?}"
        );
    }

    #[test]
    fn allowed_callers_are_enforced() {
        assert_eq!(check("read", Caller::Program), Verdict::Next);
        assert_eq!(check("host_only", Caller::Direct), Verdict::Next);
        assert!(
            matches!(check("host_only", Caller::Program), Verdict::Refuse(r) if r.contains("from a program"))
        );
    }
}
