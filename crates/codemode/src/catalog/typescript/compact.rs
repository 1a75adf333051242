//! One-line signatures of tools, for a model's tool list where the full
//! declarations do not fit (`codemode mcp serve`, docs/SERVE.md "The
//! surface"): `read({path: string, offset?: number}): string; metadata
//! {path, next_offset, eof}`.
//!
//! Rendered from the same JSON Schemas as the declarations (input, output
//! and metadata schemas), so a line cannot drift from the tool. A reduced
//! TypeScript: no comments, `$ref`s to the document's `$defs` inlined,
//! string literals in single quotes (no escaping in JSON), and metadata
//! given by its keys only (`?` when optional). What the subset cannot say
//! is `unknown`.

use serde_json::{Map, Value};

use super::text::property_key;
use crate::catalog::ToolSpec;

/// Nesting deeper than this (objects in objects, resolved `$ref`s) is
/// written `{...}`: a line stays short whatever the schema.
const MAX_DEPTH: usize = 3;

/// `spec` as one line: `name(ARGS): CONTENT`, then `; metadata {KEYS}`
/// when the tool declares metadata other than `null`. `ARGS` is the input
/// schema, `CONTENT` the output schema (`unknown` without one).
pub fn signature_line(spec: &ToolSpec) -> String {
    let args = compact_type(&spec.input_schema);
    let content = spec.output_schema.as_ref().map_or_else(|| "unknown".to_owned(), compact_type);
    let mut line = format!("{}({args}): {content}", spec.name);
    if let Some(keys) = spec.metadata_schema.as_ref().and_then(metadata_keys) {
        line.push_str("; metadata {");
        line.push_str(&keys.join(", "));
        line.push('}');
    }
    line
}

/// `schema` (a whole document: its `$ref`s point into it) as a TypeScript
/// type on one line.
pub fn compact_type(schema: &Value) -> String {
    Render { root: schema }.ty(schema, 0)
}

/// The keys of a metadata document's object (`key?` when optional), or
/// `None` when it declares no object (`null`: the tool has no metadata).
fn metadata_keys(schema: &Value) -> Option<Vec<String>> {
    let object = Render { root: schema }.resolve(schema)?.as_object()?;
    let properties = object.get("properties")?.as_object()?;
    let required = required(object);
    Some(
        properties
            .keys()
            .map(|k| if required.contains(&k.as_str()) { k.clone() } else { format!("{k}?") })
            .collect(),
    )
}

fn required(object: &Map<String, Value>) -> Vec<&str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).collect())
}

/// The rendering of one document.
struct Render<'v> {
    root: &'v Value,
}

impl<'v> Render<'v> {
    /// `schema` with its `$ref` (to `#`, `#/$defs/X` or `#/definitions/X`)
    /// followed, a few steps at most; `None` for a reference that does not
    /// resolve.
    fn resolve(&self, mut schema: &'v Value) -> Option<&'v Value> {
        for _ in 0..8 {
            let Some(pointer) = schema.get("$ref").and_then(Value::as_str) else { return Some(schema) };
            schema = self.root.pointer(pointer.strip_prefix('#')?)?;
        }
        None
    }

    fn ty(&self, schema: &'v Value, depth: usize) -> String {
        let Some(schema) = self.resolve(schema) else { return "unknown".into() };
        let s = match schema {
            Value::Object(s) => s,
            Value::Bool(false) => return "never".into(),
            _ => return "unknown".into(),
        };
        if let Some(c) = s.get("const") {
            return literal(c);
        }
        if let Some(Value::Array(values)) = s.get("enum") {
            return union(values.iter().map(literal).collect());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = s.get(key) {
                return union(options.iter().map(|o| self.ty(o, depth)).collect());
            }
        }
        match s.get("type") {
            Some(Value::String(t)) => self.of_type(t, s, depth),
            Some(Value::Array(types)) => {
                union(types.iter().filter_map(Value::as_str).map(|t| self.of_type(t, s, depth)).collect())
            }
            _ if s.contains_key("properties") => self.of_type("object", s, depth),
            _ if s.contains_key("items") => self.of_type("array", s, depth),
            _ => "unknown".into(),
        }
    }

    fn of_type(&self, t: &str, s: &'v Map<String, Value>, depth: usize) -> String {
        match t {
            "string" | "boolean" | "null" => t.to_owned(),
            "number" | "integer" => "number".into(),
            "array" => {
                let item = s.get("items").map_or_else(|| "unknown".to_owned(), |i| self.ty(i, depth + 1));
                if item.contains('|') { format!("({item})[]") } else { format!("{item}[]") }
            }
            "object" => self.object(s, depth),
            _ => "unknown".into(),
        }
    }

    fn object(&self, s: &'v Map<String, Value>, depth: usize) -> String {
        let properties = s.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty());
        let Some(properties) = properties else {
            return match s.get("additionalProperties") {
                Some(extra @ Value::Object(_)) => format!("Record<string, {}>", self.ty(extra, depth + 1)),
                _ => "object".into(),
            };
        };
        if depth >= MAX_DEPTH {
            return "{...}".into();
        }
        let required = required(s);
        // A deprecated property (JSON Schema 2019-09 `deprecated`, an
        // alternative kept for old callers) is not offered in a line.
        let members: Vec<String> = properties
            .iter()
            .filter(|(_, v)| v.get("deprecated") != Some(&Value::Bool(true)))
            .map(|(k, v)| {
                let optional = if required.contains(&k.as_str()) { "" } else { "?" };
                format!("{}{optional}: {}", property_key(k), self.ty(v, depth + 1))
            })
            .collect();
        format!("{{{}}}", members.join(", "))
    }
}

/// A literal type: strings in single quotes, other values as JSON.
fn literal(value: &Value) -> String {
    match value {
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(_) | Value::Object(_) => "unknown".into(),
        other => other.to_string(),
    }
}

/// `a|b|c`, each once, in order; `never` when empty.
fn union(mut options: Vec<String>) -> String {
    let mut seen = Vec::new();
    options.retain(|o| {
        let new = !seen.contains(o);
        seen.push(o.clone());
        new
    });
    if options.is_empty() { "never".into() } else { options.join("|") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_render_on_one_line() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["a", "b'c"]},
                "n": {"type": ["integer", "null"]},
                "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                "any": {},
                "map": {"type": "object", "additionalProperties": {"type": "boolean"}}
            },
            "required": ["path"],
            "$defs": {"Item": {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}}
        });
        assert_eq!(
            compact_type(&schema),
            "{path: string, mode?: 'a'|'b\\'c', n?: number|null, items?: {a: 1}[], any?: unknown, \
             map?: Record<string, boolean>}"
        );
        let deep = json!({"properties": {"a": {"properties": {"b": {"properties": {"c": {
            "properties": {"d": {"type": "string"}}}}}}}}});
        assert_eq!(compact_type(&deep), "{a?: {b?: {c?: {...}}}}");
        assert_eq!(compact_type(&json!({"$ref": "#/nowhere"})), "unknown");
        assert_eq!(compact_type(&json!({"anyOf": [{"type": "string"}, {"type": "string"}]})), "string");
    }

    #[test]
    fn a_line_has_arguments_content_and_metadata_keys() {
        let spec = ToolSpec::new("t", "d", json!({"type": "object", "properties": {"x": {"type": "string"}}}))
            .result_schemas((
                json!({"type": "array", "items": {"type": "string"}}),
                json!({"$ref": "#/$defs/M", "$defs": {"M": {"type": "object",
                    "properties": {"eof": {"type": "boolean"}, "at": {"type": "number"}}, "required": ["eof"]}}}),
            ));
        assert_eq!(signature_line(&spec), "t({x?: string}): string[]; metadata {eof, at?}");
        let bare = ToolSpec::new("u", "d", json!({"type": "object"}));
        assert_eq!(signature_line(&bare), "u(object): unknown");
    }
}
