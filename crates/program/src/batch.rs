//! The batch form of `execute_tools` (DESIGN.md §7): tool calls without a
//! program.
//!
//! Three shapes, all parsed into one [`Batch`] (a list of calls in input
//! order):
//!
//! ```json
//! {"batch": {"tool": "read", "arguments": {"path": "a.txt"}}}
//! {"batch": [{"tool": "read", "arguments": {"path": "a.txt"}},
//!            {"tool": "grep_files", "arguments": {"pattern": "x"}}]}
//! {"batch": {"tool": "read", "arguments": [{"path": "a.txt"}, {"path": "b.txt"}]}}
//! ```
//!
//! `arguments` may be left out (the call gets `{}`). Anything else is a
//! [`BatchError`] naming the field (`batch[3].arguments: must be an object,
//! got a string`); nothing runs when the input is malformed. Whether the
//! tool exists and whether its arguments fit its schema is the gate's
//! business, per call, exactly as for a program's calls.

use serde_json::{Map, Value};

/// One call of a batch: a tool name and its arguments (a JSON object).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BatchCall {
    /// The tool name, exactly as in the catalog (`read`, `mcp__srv__tool`).
    pub tool: String,
    /// The arguments, a JSON object.
    pub arguments: Map<String, Value>,
}

impl BatchCall {
    /// A call of `tool` with `arguments`.
    pub fn new(tool: impl Into<String>, arguments: Map<String, Value>) -> Self {
        BatchCall { tool: tool.into(), arguments }
    }

    /// Parses one `{"tool", "arguments"}` object; `field` names it in
    /// errors (`batch[3]` gives `batch[3].arguments`; an empty `field`
    /// gives `arguments`).
    ///
    /// # Errors
    /// [`BatchError`] when `value` is not an object, has other keys, has no
    /// `tool` string, or has `arguments` that are not an object.
    pub fn from_value(value: &Value, field: &str) -> Result<BatchCall, BatchError> {
        let object = as_object(value, field, "a {\"tool\", \"arguments\"} object")?;
        check_keys(object, field)?;
        let tool = tool_of(object, field)?;
        let arguments = match object.get("arguments") {
            None => Map::new(),
            Some(v) => as_object(v, &sub(field, "arguments"), "an object")?.clone(),
        };
        Ok(BatchCall { tool, arguments })
    }
}

/// Calls to run without a program, in input order.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Batch {
    calls: Vec<BatchCall>,
}

impl Batch {
    /// A batch of `calls`, run in this order (the receipt's `seq` follows it).
    pub fn new(calls: Vec<BatchCall>) -> Self {
        Batch { calls }
    }

    /// The same tool over many argument objects.
    pub fn of_tool(tool: &str, arguments: impl IntoIterator<Item = Map<String, Value>>) -> Self {
        Batch::new(arguments.into_iter().map(|a| BatchCall::new(tool, a)).collect())
    }

    /// Parses the value of the `batch` field in one of its three shapes
    /// (module docs). Errors name fields from `batch`.
    ///
    /// # Errors
    /// [`BatchError`] naming the first malformed field; an empty list is an
    /// error too (a batch runs at least one call).
    pub fn from_value(value: &Value) -> Result<Batch, BatchError> {
        const FIELD: &str = "batch";
        match value {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(BatchError::new(
                        FIELD,
                        "is an empty list; give at least one {tool, arguments}",
                    ));
                }
                let calls = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| BatchCall::from_value(item, &format!("{FIELD}[{i}]")))
                    .collect::<Result<_, _>>()?;
                Ok(Batch::new(calls))
            }
            Value::Object(object) => {
                check_keys(object, FIELD)?;
                let tool = tool_of(object, FIELD)?;
                match object.get("arguments") {
                    Some(Value::Array(list)) => {
                        if list.is_empty() {
                            return Err(BatchError::new(
                                "batch.arguments",
                                "is an empty list; give at least one arguments object",
                            ));
                        }
                        let arguments = list
                            .iter()
                            .enumerate()
                            .map(|(i, a)| {
                                as_object(a, &format!("{FIELD}.arguments[{i}]"), "an object").cloned()
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        Ok(Batch::of_tool(&tool, arguments))
                    }
                    _ => Ok(Batch::new(vec![BatchCall::from_value(value, FIELD)?])),
                }
            }
            other => Err(BatchError::new(
                FIELD,
                format!("must be a {{tool, arguments}} object or a list of them, got {}", json_type(other)),
            )),
        }
    }

    /// The same calls as a program whose value has the batch's shape: each
    /// call's envelope or `{"error": {kind, message, tool, seq}}`, in input
    /// order (a `ToolError`'s message names the call: `bash (call 2): ...`).
    /// Unlike a batch, a program keeps a journal, so a call that needs an
    /// approval can pause the run for a person to decide (server mode runs
    /// a batch this way when its approvals cannot be asked while it runs).
    /// The calls run at once, up to the in-flight limit; the call budget and
    /// the deadline apply as to any program.
    pub fn as_program(&self) -> super::Program {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| serde_json::json!({"tool": c.tool, "arguments": c.arguments}))
            .collect();
        let calls = serde_json::to_string(&calls).expect("JSON values serialise");
        super::Program::named(
            "batch",
            format!(
                "const calls = {calls};\n\
                 return await Promise.all(calls.map(c => tools.call(c.tool, c.arguments).then(\n\
                 \x20 r => r,\n\
                 \x20 e => ({{error: {{kind: e.kind, message: e.message, tool: e.tool, seq: e.seq}}}}))));"
            ),
        )
    }

    /// The calls, in input order.
    pub fn calls(&self) -> &[BatchCall] {
        &self.calls
    }

    /// How many calls.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether there are no calls.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Adds a call at the end.
    pub fn push(&mut self, call: BatchCall) {
        self.calls.push(call);
    }
}

/// What `execute_tools` was given: a program (`{"code"}`) or a batch
/// (`{"batch"}`).
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteInput {
    /// `{"code": "..."}`.
    Program(super::Program),
    /// `{"batch": ...}`.
    Batch(Batch),
}

impl ExecuteInput {
    /// Parses `execute_tools`' input object: exactly one of `code` (a
    /// string) and `batch` (module docs).
    ///
    /// # Errors
    /// [`BatchError`] naming the field: not an object, both or neither of
    /// `code` and `batch`, another key, `code` not a string, or a malformed
    /// batch.
    pub fn from_value(input: &Value) -> Result<ExecuteInput, BatchError> {
        let object = as_object(input, "input", "an object with `code` or `batch`")?;
        if let Some(key) = object.keys().find(|k| !matches!(k.as_str(), "code" | "batch")) {
            return Err(BatchError::new(
                key.as_str(),
                "is not an input of execute_tools; give `code` (a program) or `batch` (tool calls)",
            ));
        }
        // `null` is absent: clients with strict function calling send every
        // field, the unused one as null.
        let given = |key: &str| object.get(key).filter(|v| !v.is_null());
        match (given("code"), given("batch")) {
            (Some(_), Some(_)) => Err(BatchError::new(
                "",
                "the input has both `code` and `batch`; give one: a program, or a batch of tool calls",
            )),
            (None, None) => Err(BatchError::new(
                "",
                "the input has neither `code` nor `batch`; give a program as `code` or tool calls as `batch`",
            )),
            (Some(Value::String(code)), None) => Ok(ExecuteInput::Program(super::Program::new(code.clone()))),
            (Some(other), None) => {
                Err(BatchError::new("code", format!("must be a string, got {}", json_type(other))))
            }
            (None, Some(batch)) => Batch::from_value(batch).map(ExecuteInput::Batch),
        }
    }
}

/// Malformed batch input: which field, and what is wrong with it.
/// Displays as `field: message`, or the message alone when the field is
/// empty (the whole value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct BatchError {
    /// The field at fault, as a path: `batch[3].arguments`,
    /// `batch.arguments[0]`, `batch.tool`, `line 7`.
    pub field: String,
    /// What is wrong and what to give instead.
    pub message: String,
}

impl BatchError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        BatchError { field: field.into(), message: message.into() }
    }
}

/// `value` as an object, else an error saying it must be `what`.
fn as_object<'a>(value: &'a Value, field: &str, what: &str) -> Result<&'a Map<String, Value>, BatchError> {
    value
        .as_object()
        .ok_or_else(|| BatchError::new(field, format!("must be {what}, got {}", json_type(value))))
}

/// Refuses keys other than `tool` and `arguments` (a typo such as `args`
/// would otherwise run the tool with no arguments).
fn check_keys(object: &Map<String, Value>, field: &str) -> Result<(), BatchError> {
    match object.keys().find(|k| !matches!(k.as_str(), "tool" | "arguments")) {
        Some(key) => Err(BatchError::new(
            sub(field, key),
            "is not a field of a batch call; a call has `tool` and `arguments`",
        )),
        None => Ok(()),
    }
}

fn tool_of(object: &Map<String, Value>, field: &str) -> Result<String, BatchError> {
    let at = sub(field, "tool");
    match object.get("tool") {
        None => Err(BatchError::new(at, "is missing; name the tool to call")),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(BatchError::new(at, "is empty; name the tool to call"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(BatchError::new(at, format!("must be a string, got {}", json_type(other)))),
    }
}

/// The path of `key` inside `field`.
fn sub(field: &str, key: &str) -> String {
    if field.is_empty() { key.to_owned() } else { format!("{field}.{key}") }
}

/// The JSON type of `value` with an article, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        Batch::from_value(&v).unwrap_err().to_string()
    }

    #[test]
    fn three_shapes() {
        let one = Batch::from_value(&json!({"tool": "echo", "arguments": {"a": 1}})).unwrap();
        assert_eq!(one.calls(), [BatchCall::new("echo", json!({"a": 1}).as_object().unwrap().clone())]);
        let list = Batch::from_value(&json!([{"tool": "a", "arguments": {}}, {"tool": "b"}])).unwrap();
        assert_eq!(list.calls().iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(list.calls()[1].arguments.is_empty());
        let many = Batch::from_value(&json!({"tool": "echo", "arguments": [{"i": 0}, {"i": 1}]})).unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(many.calls()[1].arguments["i"], 1);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = json!([{"tool": "a", "arguments": {}}, {"tool": "a"}, {"tool": "a"},
                         {"tool": "a", "arguments": "x"}]);
        assert_eq!(err(bad), "batch[3].arguments: must be an object, got a string");
        assert_eq!(
            err(json!({"tool": "a", "arguments": [{}, 2]})),
            "batch.arguments[1]: must be an object, got a number"
        );
        assert!(err(json!([{"tool": "a", "args": {}}])).starts_with("batch[0].args: is not a field"));
        assert!(err(json!([{"arguments": {}}])).starts_with("batch[0].tool: is missing"));
        assert!(err(json!({"tool": 3})).starts_with("batch.tool: must be a string, got a number"));
        assert!(err(json!({"tool": " "})).starts_with("batch.tool: is empty"));
        assert!(err(json!([])).starts_with("batch: is an empty list"));
        assert!(err(json!({"tool": "a", "arguments": []})).starts_with("batch.arguments: is an empty list"));
        assert!(err(json!("read")).starts_with("batch: must be a {tool, arguments} object or a list"));
        assert!(err(json!([3])).starts_with("batch[0]: must be a {\"tool\", \"arguments\"} object"));
    }

    #[test]
    fn execute_input_is_code_or_batch() {
        let p = ExecuteInput::from_value(&json!({"code": "return 1"})).unwrap();
        assert!(matches!(p, ExecuteInput::Program(p) if p.source() == "return 1"));
        let b = ExecuteInput::from_value(&json!({"batch": {"tool": "echo"}})).unwrap();
        assert!(matches!(b, ExecuteInput::Batch(b) if b.len() == 1));
        let e = |v: Value| ExecuteInput::from_value(&v).unwrap_err().to_string();
        assert!(e(json!({"code": "1", "batch": []})).contains("both `code` and `batch`"));
        assert!(e(json!({})).contains("neither `code` nor `batch`"));
        assert!(e(json!({"code": 1})).starts_with("code: must be a string"));
        assert!(e(json!({"cod": "x"})).starts_with("cod: is not an input of execute_tools"));
        assert!(e(json!([1])).starts_with("input: must be an object"));
        let line = BatchCall::from_value(&json!({"tool": "t", "arguments": []}), "").unwrap_err();
        assert_eq!(
            (line.field.as_str(), line.to_string().as_str()),
            ("arguments", "arguments: must be an object, got a list")
        );
        let whole = BatchCall::from_value(&json!(1), "").unwrap_err();
        assert_eq!(whole.to_string(), "must be a {\"tool\", \"arguments\"} object, got a number");
        assert_eq!(
            e(json!({"batch": [{"tool": "a", "arguments": 1}]})),
            "batch[0].arguments: must be an object, got a number"
        );
    }
}
