//! The result shapes of the native tools and `tool_search`: the JSON
//! Schemas of each tool's `content` ([`ToolSpec::output_schema`]) and
//! `metadata` ([`ToolSpec::metadata_schema`]), which `codemode types`
//! renders as named TypeScript types (`ToolResult<codemode.GrepMatch[],
//! codemode.GrepFilesMetadata>`). Named shapes are `$defs` of their
//! document, so each becomes one declared type. docs/TOOL_CONTRACT.md
//! describes the same shapes; tests/all/tool_shapes.rs runs every tool and
//! validates what it returns against these schemas.
//!
//! [`ToolSpec::output_schema`]: crate::catalog::ToolSpec::output_schema
//! [`ToolSpec::metadata_schema`]: crate::catalog::ToolSpec::metadata_schema

use serde_json::{Map, Value, json};

// The schemas are put together by moving values into maps: `json!` with a
// `Value` inside it serializes a copy of that value and drops the
// original, which cost about 0.5M instructions at every start of the
// engine (docs/PERFORMANCE.md).

/// A JSON object of `entries`, in their order, the values moved in.
fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<String, Value>>())
}

/// `schema` (an object) with `$defs` of `defs` added.
fn with_defs<const N: usize>(mut schema: Value, defs: [(&str, Value); N]) -> Value {
    if let Value::Object(fields) = &mut schema {
        fields.insert("$defs".to_owned(), map(defs));
    }
    schema
}

/// A document that is the named type `name`, defined as `schema`.
fn named(name: &str, schema: Value) -> Value {
    map([("$ref", Value::String(format!("#/$defs/{name}"))), ("$defs", map([(name, schema)]))])
}

/// An object with these properties, all required unless listed in
/// `optional`.
fn object(properties: Value, optional: &[&str]) -> Value {
    let required: Vec<Value> = properties
        .as_object()
        .map(|p| {
            p.keys().filter(|k| !optional.contains(&k.as_str())).map(|k| Value::String(k.clone())).collect()
        })
        .unwrap_or_default();
    map([("type", Value::from("object")), ("properties", properties), ("required", Value::Array(required))])
}

/// `null` metadata: the tool has none.
fn no_metadata() -> Value {
    json!({"type": "null"})
}

/// Counts, sizes and offsets are integers, declared `number` (what
/// TypeScript has) to keep the declarations short.
const INT: &str = "number";

/// `read`: the text (numbered lines, or as it is in format `text`); metadata
/// where to continue.
pub(crate) fn read() -> (Value, Value) {
    let metadata = object(
        json!({
            "path": {"type": "string"},
            "format": {"enum": ["lines", "text"]},
            "next_offset": {"type": [INT, "null"], "description": "Pass as offset to read on; null at the end"},
            "eof": {"type": "boolean"},
            "total_bytes": {"type": INT},
            "offset": {"type": INT},
            "start_line": {"type": INT},
            "end_line": {"type": [INT, "null"]},
            "total_lines": {"type": INT}
        }),
        &["offset", "start_line", "end_line", "total_lines"],
    );
    (json!({"type": "string"}), named("ReadMetadata", metadata))
}

/// `write`: what was written.
pub(crate) fn write() -> (Value, Value) {
    let result = object(
        json!({"path": {"type": "string"}, "bytes": {"type": INT}, "created": {"type": "boolean"}}),
        &[],
    );
    (named("WriteResult", result), no_metadata())
}

/// `edit`: what was applied.
pub(crate) fn edit() -> (Value, Value) {
    let result =
        object(json!({"path": {"type": "string"}, "edits": {"type": INT}, "bytes": {"type": INT}}), &[]);
    (named("EditResult", result), no_metadata())
}

/// `file_search`: relative paths, best first.
pub(crate) fn file_search() -> (Value, Value) {
    let metadata = object(
        json!({
            "matches": {"type": INT},
            "returned": {"type": INT},
            "truncated": {"type": "boolean"},
            "walk_stopped_at": {"type": [INT, "null"]}
        }),
        &[],
    );
    (json!({"type": "array", "items": {"type": "string"}}), named("FileSearchMetadata", metadata))
}

/// `grep_files`: one entry per match (or per file).
pub(crate) fn grep_files() -> (Value, Value) {
    let hit = object(
        json!({
            "path": {"type": "string"},
            "line": {"type": INT},
            "text": {"type": "string"},
            "before": {"type": "array", "items": {"type": "string"}},
            "after": {"type": "array", "items": {"type": "string"}},
            "count": {"type": INT, "description": "Output count: the file's matching lines"}
        }),
        &["before", "after", "count"],
    );
    let metadata = object(
        json!({
            "output": {"enum": ["matches", "files", "count"]},
            "returned": {"type": INT},
            "matches": {"type": [INT, "null"], "description": "Matching lines in all files; null for output files"},
            "files": {"type": INT},
            "offset": {"type": INT},
            "next_offset": {"type": [INT, "null"], "description": "Pass as offset for the next page; null at the end"},
            "truncated": {"type": "boolean"},
            "page_bytes_cut": {"type": "boolean", "description": "The page's size in bytes, not limit, ended it"},
            "walk_stopped_at": {"type": [INT, "null"]}
        }),
        &[],
    );
    let content =
        with_defs(json!({"type": "array", "items": {"$ref": "#/$defs/GrepMatch"}}), [("GrepMatch", hit)]);
    (content, named("GrepFilesMetadata", metadata))
}

/// `bash`: exit code and output tails.
pub(crate) fn bash() -> (Value, Value) {
    let result = object(
        json!({
            "exit_code": {"type": [INT, "null"], "description": "null when a signal ended the command"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "signal": {"type": "string"}
        }),
        &["signal"],
    );
    let sandbox = object(
        json!({
            "profile": {"type": "string"},
            "namespaces": {"type": "array", "items": {"type": "string"}},
            "landlock": {"type": "string"},
            "missing": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"}
        }),
        &["namespaces", "landlock", "missing", "note"],
    );
    let metadata = object(
        json!({
            "stdout_bytes": {"type": INT},
            "stderr_bytes": {"type": INT},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "elapsed_ms": {"type": INT},
            "sandbox": {"$ref": "#/$defs/BashSandbox"}
        }),
        &[],
    );
    let metadata = with_defs(
        json!({"$ref": "#/$defs/BashMetadata"}),
        [("BashMetadata", metadata), ("BashSandbox", sandbox)],
    );
    (named("BashResult", result), metadata)
}

/// `tool_search`: the tools found (and, called directly, what changed in
/// the tool list). Open to further fields.
pub(crate) fn tool_search() -> (Value, Value) {
    let found = object(
        json!({
            "name": {"type": "string"},
            "description": {"type": "string"},
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object", "description": "The shape of the result's content, when the tool declares one"},
            "annotations": {"type": "object", "properties": {
                "readOnlyHint": {"type": "boolean"}, "destructiveHint": {"type": "boolean"},
                "idempotentHint": {"type": "boolean"}, "openWorldHint": {"type": "boolean"}}},
            "source": {"type": "string", "description": "native, mcp:<server> or synthetic"}
        }),
        &["output_schema"],
    );
    let unavailable = object(
        json!({"name": {"type": "string"}, "description": {"type": "string"}, "why": {"type": "string"}}),
        &[],
    );
    let unlisted = object(
        json!({
            "name": {"type": "string"},
            "state": {"enum": ["not_started", "refused", "denied", "failed", "over_bound", "timed_out", "started"]},
            "why": {"type": "string"}
        }),
        &[],
    );
    let result = object(
        json!({
            "tools": {"type": "array", "items": {"$ref": "#/$defs/FoundTool"}},
            "unavailable": {"type": "array", "items": {"$ref": "#/$defs/UnavailableTool"}},
            "started_servers": {"type": "array", "items": {"type": "string"},
                "description": "MCP servers this search started (docs/CATALOG.md)"},
            "unlisted_servers": {"type": "array", "items": {"$ref": "#/$defs/UnlistedServer"},
                "description": "Configured MCP servers still not listed, and why"}
        }),
        &["unavailable", "started_servers", "unlisted_servers"],
    );
    let content = with_defs(
        json!({"$ref": "#/$defs/ToolSearchResult"}),
        [
            ("ToolSearchResult", result),
            ("FoundTool", found),
            ("UnavailableTool", unavailable),
            ("UnlistedServer", unlisted),
        ],
    );
    (content, no_metadata())
}
