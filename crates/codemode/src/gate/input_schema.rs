//! The `input_schema` step: the arguments match the tool's input schema (JSON Schema,
//! validated with the validator compiled when the catalog was built).

use super::{CallRequest, GateContext, Step, Verdict};

/// Refuses arguments that do not match the input schema, naming each place.
pub(crate) struct InputSchema;

impl Step for InputSchema {
    fn name(&self) -> &'static str {
        "input_schema"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut super::Preparation) -> Verdict {
        let Some(entry) = cx.entry(call.tool) else {
            return Verdict::Next;
        };
        let errors = entry.schema_errors(call.args);
        if errors.is_empty() { Verdict::Next } else { Verdict::Refuse(schema_mismatch(call.tool, &errors)) }
    }
}

/// Why arguments of `tool` that do not fit its input schema are refused,
/// from the schema errors (the gate's refusal and the admission check's
/// reason).
pub(crate) fn schema_mismatch(tool: &str, errors: &[String]) -> String {
    format!(
        "arguments do not match the input schema of `{}`: {}",
        crate::receipt::spill::cut_text(tool),
        errors.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};
    use serde_json::{Value, json};
    use std::sync::Arc;

    struct T;
    impl Tool for T {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(
                "t",
                "t",
                json!({
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                    "additionalProperties": false
                }),
            )
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    #[test]
    fn valid_arguments_pass_and_invalid_ones_say_where() {
        let catalog = Catalog::new(vec![Arc::new(T)]).unwrap();
        let policy = crate::gate::Policy::default();
        let cx = GateContext::for_test(&catalog, &policy);
        let check =
            |args: Value| InputSchema.check(&CallRequest::for_test("t", &args), &cx, &mut Default::default());
        assert_eq!(check(json!({"n": 1})), Verdict::Next);
        assert!(matches!(check(json!({"n": "one"})), Verdict::Refuse(r) if r.contains("/n")));
        assert!(matches!(check(json!({"n": 1, "extra": true})), Verdict::Refuse(r) if r.contains("extra")));
        // A native tool's optional property gets no leeway for a null.
        assert!(matches!(check(json!({"n": null})), Verdict::Refuse(_)));
    }

    /// A tool of an MCP server with a required `region` and an optional
    /// boolean `verbose`.
    struct Remote;
    impl Tool for Remote {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(
                "mcp__s__t",
                "t",
                json!({
                    "type": "object",
                    "properties": {"region": {"type": "string"}, "verbose": {"type": "boolean"}},
                    "required": ["region"]
                }),
            )
            .source(crate::catalog::ToolSource::Mcp { server: "s".into() })
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    #[test]
    fn a_null_for_an_optional_property_of_an_mcp_tool_counts_as_left_out() {
        let catalog = Catalog::new(vec![Arc::new(Remote)]).unwrap();
        let policy = crate::gate::Policy::default();
        let cx = GateContext::for_test(&catalog, &policy);
        let check = |args: Value| {
            InputSchema.check(&CallRequest::for_test("mcp__s__t", &args), &cx, &mut Default::default())
        };
        assert_eq!(check(json!({"region": "eu", "verbose": null})), Verdict::Next);
        // A required property is not optional; a wrong type is still wrong.
        assert!(matches!(check(json!({"region": null})), Verdict::Refuse(r) if r.contains("region")));
        assert!(
            matches!(check(json!({"region": "eu", "verbose": 1})), Verdict::Refuse(r) if r.contains("/verbose"))
        );
    }
}
