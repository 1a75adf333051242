//! Compiling a tool's JSON Schema into a validator.
//!
//! References to other documents (`"$ref": "https://..."`) are never
//! fetched: a schema from an MCP server must not make codemode reach the
//! network or read files (MCP 2026-07-28, SEP-2106: clients must not
//! dereference network URIs in a tool's schema). Such a reference accepts
//! any value in codemode's check (the server validates its own arguments);
//! references inside the document (`#/$defs/...`) are resolved as usual.

use serde_json::Value;

/// A validator for `schema`. External `$ref`s accept anything (see the
/// module docs); other errors are the schema's own (an invalid keyword
/// value, an unknown `$schema` draft), as `jsonschema`'s message.
pub(crate) fn validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options().with_retriever(AcceptAnything).build(schema).map_err(|e| e.to_string())
}

/// Answers every external reference with the schema that accepts any value.
struct AcceptAnything;

impl jsonschema::Retrieve for AcceptAnything {
    fn retrieve(
        &self,
        _uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Value::Bool(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_external_reference_accepts_anything_and_fetches_nothing() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"userId": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
            "properties": {
                "id": {"$ref": "#/$defs/userId"},
                "profile": {"$ref": "http://127.0.0.1:9/canary/profile-schema.json"}
            },
            "required": ["id"]
        });
        let v = validator(&schema).unwrap();
        assert!(v.is_valid(&json!({"id": "ada", "profile": {"anything": [1, 2]}})));
        // The local reference still applies.
        assert!(!v.is_valid(&json!({"id": "Not Valid!"})));
        assert!(!v.is_valid(&json!({})));
    }

    #[test]
    fn a_broken_schema_is_still_an_error() {
        assert!(validator(&json!({"type": 12})).is_err());
    }
}
