//! The catalog digest and canonical JSON.
//!
//! Digest (DESIGN.md §6): SHA-256 over, per tool in catalog order, the name,
//! a 0x01 byte, the description, a 0x01 byte, the canonical JSON of the input
//! schema, and a newline. An empty catalog hashes the empty string.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ToolSpec;

/// The lower-case hex catalog digest of `specs`, in the order given.
pub(crate) fn catalog_digest<'a>(specs: impl Iterator<Item = &'a ToolSpec>) -> String {
    let mut hasher = Sha256::new();
    let mut buf = String::new();
    for spec in specs {
        hasher.update(spec.name.as_bytes());
        hasher.update([0x01]);
        hasher.update(spec.description.as_bytes());
        hasher.update([0x01]);
        buf.clear();
        write_canonical(&spec.input_schema, &mut buf);
        hasher.update(buf.as_bytes());
        hasher.update(b"\n");
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` as canonical JSON: object keys sorted by their UTF-8 bytes, no
/// whitespace, strings and numbers as serde_json writes them.
#[cfg(test)]
pub(crate) fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
