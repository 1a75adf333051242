//! The catalog digest and canonical JSON.
//!
//! Digest (DESIGN.md §6): SHA-256 over, per tool in catalog order, the name,
//! a 0x01 byte, the description, a 0x01 byte, the canonical JSON of the input
//! schema, and a newline. An empty catalog hashes the empty string.

use codemode_base::json_text::write_canonical_bytes;
use sha2::{Digest, Sha256};

use super::ToolSpec;

/// The lower-case hex catalog digest of `specs`, in the order given.
pub(crate) fn catalog_digest<'a>(specs: impl Iterator<Item = &'a ToolSpec>) -> String {
    let mut hasher = Sha256::new();
    let mut buf = Vec::new();
    for spec in specs {
        hasher.update(spec.name.as_bytes());
        hasher.update([0x01]);
        hasher.update(spec.description.as_bytes());
        hasher.update([0x01]);
        buf.clear();
        write_canonical_bytes(&spec.input_schema, &mut buf);
        hasher.update(&buf);
        hasher.update(b"\n");
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) use codemode_base::json_text::canonical_len;

#[cfg(test)]
mod tests {
    use super::*;
    use codemode_base::json_text::canonical_json;
    use serde_json::Value;
    use serde_json::json;

    #[test]
    fn empty_catalog_hashes_the_empty_string() {
        assert_eq!(
            catalog_digest(std::iter::empty()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let v: Value = serde_json::from_str(r#"{ "b": [1, {"z": 1, "a": "x"}], "a": null }"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":null,"b":[1,{"a":"x","z":1}]}"#);
    }

    /// A fixed catalog of three tools. Its digest below was computed
    /// outside the crate (Python's hashlib over `json.dumps(schema,
    /// sort_keys=True, separators=(",", ":"), ensure_ascii=False)`), so the
    /// test pins the format of DESIGN.md §6, not just this code's output.
    fn fixed_catalog() -> Vec<ToolSpec> {
        vec![
            ToolSpec::new(
                "read",
                "Read a file.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ),
            ToolSpec::new(
                "mcp__time__get_current_time",
                "Get current time in a specific timezone",
                json!({"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA timezone name, e.g. 'Europe/Warsaw' — ü"}}, "required": ["timezone"]}),
            ),
            ToolSpec::new("empty", "", json!({})),
        ]
    }

    const FIXED_DIGEST: &str = "b8ab1d159b27ede12a7b4c602bad48c8df3a9d7f7b8d9ee9f901b704d52e42c3";

    #[test]
    fn the_digest_of_a_fixed_catalog_is_pinned() {
        assert_eq!(catalog_digest(fixed_catalog().iter()), FIXED_DIGEST);
    }

    #[test]
    fn one_character_of_one_schema_changes_the_digest_and_key_order_does_not() {
        let mut reordered = fixed_catalog();
        // Same schema, keys written in the opposite order at every level.
        reordered[0].input_schema = serde_json::from_str(
            r#"{"required":["path"],"properties":{"limit":{"minimum":1,"type":"integer"},"path":{"type":"string"}},"type":"object"}"#,
        )
        .unwrap();
        assert_eq!(catalog_digest(reordered.iter()), FIXED_DIGEST);

        let mut changed = fixed_catalog();
        changed[1].input_schema["properties"]["timezone"]["description"] =
            json!("IANA timezone name, e.g. 'Europe/Warsaw' — u");
        assert_ne!(catalog_digest(changed.iter()), FIXED_DIGEST);
        let mut renamed = fixed_catalog();
        renamed[0].input_schema["required"] = json!(["pat"]);
        assert_ne!(catalog_digest(renamed.iter()), FIXED_DIGEST);
        // Catalog order is part of the digest.
        let mut swapped = fixed_catalog();
        swapped.swap(0, 2);
        assert_ne!(catalog_digest(swapped.iter()), FIXED_DIGEST);
    }

    #[test]
    fn digest_ignores_key_order_but_not_content() {
        let a = ToolSpec::new("t", "d", json!({"type": "object", "properties": {}}));
        let b =
            ToolSpec::new("t", "d", serde_json::from_str(r#"{"properties":{},"type":"object"}"#).unwrap());
        let c = ToolSpec::new("t", "d", json!({"type": "object", "properties": {"x": {}}}));
        assert_eq!(catalog_digest([&a].into_iter()), catalog_digest([&b].into_iter()));
        assert_ne!(catalog_digest([&a].into_iter()), catalog_digest([&c].into_iter()));
    }
}
