//! What a schema's JSDoc says: its `description` and tags for the
//! constraints TypeScript types cannot carry (`@integer`, `@format`,
//! bounds, `@pattern`, `@default`, `@deprecated`).

use serde_json::{Map, Value};

/// The schema's `description`, or empty.
pub(super) fn description(s: &Map<String, Value>) -> &str {
    s.get("description").and_then(Value::as_str).unwrap_or("")
}

/// JSDoc tags for the constraints worth a reader's attention.
pub(super) fn tags(s: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let integer = match s.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer {
        out.push("@integer".to_owned());
    }
    if let Some(Value::String(f)) = s.get("format") {
        out.push(format!("@format {f}"));
    }
    for kw in [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    ] {
        if let Some(v @ Value::Number(_)) = s.get(kw) {
            out.push(format!("@{kw} {v}"));
        }
    }
    if let Some(Value::String(p)) = s.get("pattern")
        && p.len() <= 80
    {
        out.push(format!("@pattern {p}"));
    }
    if let Some(d) = s.get("default") {
        let text = d.to_string();
        if text.len() <= 80 {
            out.push(format!("@default {text}"));
        }
    }
    if s.get("deprecated") == Some(&Value::Bool(true)) {
        out.push("@deprecated".to_owned());
    }
    out
}
