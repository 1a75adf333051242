//! The tools `codemode mcp serve` lists (docs/SERVE.md, "The surface").
//!
//! The default surface is two tools: `execute_tools` (a program, a batch,
//! or the resume of a paused run) and `tool_search`. Its `tools/list`
//! result stays within [`LIST_BUDGET`] bytes of JSON: `execute_tools`'
//! description gives the native tools as TypeScript declarations while
//! they fit, else as one signature line each (arguments, content type,
//! metadata keys), else by name; then it names fewer MCP servers. MCP
//! servers' tools are deferred: programs find them with `tools.search` and
//! call them by name. `tool_search` searches as a program does: it
//! activates nothing, so this list never changes. With `--direct-tools`,
//! the native tools are listed too, each called through the same gate.

use std::collections::BTreeSet;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use codemode::Engine;
use codemode::run::ToolsShown;
use codemode::{ToolSpec, tool::ToolSource};

/// Most bytes of the default surface's `tools/list` result (its `tools`
/// array as compact JSON).
pub const LIST_BUDGET: usize = 6 << 10;

pub use super::arguments::RESUME;

/// The listed tools: the default surface, then (with `direct`) the native
/// tools.
pub(crate) fn tools(engine: &Engine, direct: &BTreeSet<String>) -> Vec<Tool> {
    let search = engine.tool_specs().into_iter().find(|s| s.name == codemode::tool::TOOL_SEARCH);
    let surface = |shown: ToolsShown, servers_named: Option<usize>| {
        let mut tools = vec![execute_tools(engine, shown, servers_named)];
        tools.extend(search.as_ref().map(tool_search));
        tools
    };
    // Smaller until it fits: declarations, then signature lines, then
    // names; with each of the last two, naming fewer MCP servers (the
    // others counted).
    let mut listed = surface(ToolsShown::Declarations, None);
    'fit: for shown in [ToolsShown::Signatures, ToolsShown::Names] {
        if list_bytes(&listed) <= LIST_BUDGET {
            break;
        }
        let mut named = None;
        loop {
            listed = surface(shown, named);
            let left = named.unwrap_or_else(|| engine.mcp_servers().len());
            if list_bytes(&listed) <= LIST_BUDGET {
                break 'fit;
            }
            if left == 0 {
                break;
            }
            named = Some(left / 2);
        }
    }
    for spec in engine.tool_specs() {
        if direct.contains(&spec.name) {
            listed.push(mcp_tool(&spec, None));
        }
    }
    listed
}

/// `tool_search` as this server lists it: its description without the
/// sentence on activation (a search here activates nothing).
fn tool_search(spec: &ToolSpec) -> Tool {
    let mut spec = spec.clone();
    spec.description = spec.description.replace(codemode::tool::TOOL_SEARCH_ACTIVATION, "");
    mcp_tool(&spec, None)
}

/// The names of the native tools (those `--direct-tools` lists), but in
/// plan mode only the read-only ones.
pub(crate) fn native_names(engine: &Engine) -> BTreeSet<String> {
    engine.usable_tools().into_iter().filter(|s| s.source == ToolSource::Native).map(|s| s.name).collect()
}

/// Bytes of `tools` as the `tools` array of a `tools/list` result.
pub(crate) fn list_bytes(tools: &[Tool]) -> usize {
    serde_json::to_vec(tools).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// `execute_tools`, with the resume field, the output schema and
/// annotations.
fn execute_tools(engine: &Engine, shown: ToolsShown, servers_named: Option<usize>) -> Tool {
    let spec = engine.execute_tools_spec_with(shown, servers_named);
    let mut schema = spec.input_schema.clone();
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            RESUME.to_owned(),
            json!({
                "type": "string",
                "description": "A paused run's run_id, to go on with the user's decisions."
            }),
        );
        // A run answered `running`: its answer says what `wait` and
        // `cancel` do; `rollback` undoes a run's file changes (SERVE.md).
        for field in [super::long_runs::WAIT, super::long_runs::CANCEL, super::rollback::ROLLBACK] {
            props.insert(field.to_owned(), json!({"type": "string"}));
        }
    }
    let description = format!(
        "{}\n\nA call needing approval goes to the user; if it cannot, the run pauses and the result says how the user decides, then call {{\"resume\": run_id}}.",
        spec.description
    );
    let mut spec = spec;
    spec.description = description;
    spec.input_schema = schema;
    mcp_tool(&spec, Some(without_descriptions(super::result::output_schema())))
}

/// `schema` without its `description`s: the output schema is what a host
/// checks `structuredContent` against, and the receipt text a model reads
/// says the same; its descriptions would take from the list's budget what
/// the native tools' signatures need. (docs/SERVE.md, "Results", describes
/// each field.)
fn without_descriptions(mut schema: Value) -> Value {
    fn strip(schema: &mut Value) {
        let Some(map) = schema.as_object_mut() else { return };
        map.remove("description");
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            properties.values_mut().for_each(strip);
        }
        for key in ["items", "additionalProperties"] {
            if let Some(sub) = map.get_mut(key) {
                strip(sub);
            }
        }
    }
    strip(&mut schema);
    schema
}

/// `spec` as an MCP tool, with `output_schema` when given. The result
/// shapes of native tools and `tool_search` are not advertised: their
/// content is not always an object (MCP's `outputSchema` describes
/// `structuredContent`, an object), and direct calls answer with text.
fn mcp_tool(spec: &ToolSpec, output_schema: Option<Value>) -> Tool {
    let a = &spec.annotations;
    let mut annotations = Map::new();
    let mut hint = |key: &str, value: Option<bool>| {
        if let Some(v) = value {
            annotations.insert(key.to_owned(), json!(v));
        }
    };
    hint("readOnlyHint", a.read_only);
    hint("destructiveHint", a.destructive.or((spec.name == codemode::run::EXECUTE_TOOLS).then_some(true)));
    hint("idempotentHint", a.idempotent);
    hint("openWorldHint", a.open_world.or((spec.name == codemode::run::EXECUTE_TOOLS).then_some(true)));
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": object_schema(&spec.input_schema),
        "annotations": annotations,
    });
    if let Some(schema) = output_schema {
        tool["outputSchema"] = object_schema(&schema);
    }
    serde_json::from_value(tool).expect("an MCP tool parses from its own fields")
}

/// `schema` when it is a JSON object, else an empty object schema (MCP
/// requires `type: object` at the root of tool schemas).
fn object_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(_) => schema.clone(),
        _ => json!({"type": "object"}),
    }
}

/// The tool `name` is listed by this surface.
pub(crate) fn is_listed(name: &str, direct: &BTreeSet<String>) -> bool {
    name == codemode::run::EXECUTE_TOOLS || name == codemode::tool::TOOL_SEARCH || direct.contains(name)
}
