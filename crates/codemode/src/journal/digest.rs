//! What a resume must find unchanged: the program, the catalog, the policy
//! and the limits, each as a digest (and, for the policy and limits, the
//! canonical JSON the digest is over, so a refusal can say what changed).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use codemode_base::limits::Limits;

/// SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in d {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The limits as a JSON object of numbers (durations in milliseconds).
pub(crate) fn limits_json(l: &Limits) -> Value {
    json!({
        "memory_bytes": l.memory_bytes,
        "stack_bytes": l.stack_bytes,
        "source_bytes": l.source_bytes,
        "max_calls": l.max_calls,
        "max_in_flight": l.max_in_flight,
        "deadline_ms": l.deadline.as_millis() as u64,
        "tool_timeout_ms": l.tool_timeout.as_millis() as u64,
        "result_bytes": l.result_bytes,
        "value_bytes": l.value_bytes,
        "spill_bytes": l.spill_bytes,
        "log_lines": l.log_lines,
        "log_bytes": l.log_bytes,
    })
}

/// The digest of `value` as canonical JSON (keys sorted, no whitespace):
/// the same whatever order the object's keys were inserted in, and the
/// same bytes serde_json wrote for such a value before objects kept their
/// insertion order, so journals written then still match.
pub(crate) fn json_sha256(value: &Value) -> String {
    let mut bytes = Vec::new();
    codemode_base::json_text::write_canonical_bytes(value, &mut bytes);
    sha256_hex(&bytes)
}

/// The top-level keys of two JSON objects whose values differ, each as
/// `key: old -> new`.
pub(crate) fn differences(old: &Value, new: &Value) -> Vec<String> {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return if old == new { Vec::new() } else { vec![format!("{old} -> {new}")] };
    };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or_else(|| "(none)".to_owned(), |v| v.to_string());
            format!("{k}: {} -> {}", show(old.get(k)), show(new.get(k)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_digest_does_not_depend_on_key_order() {
        let a = json!({"mode": "work", "sandbox": {"profile": "x", "network": false}});
        let b = json!({"sandbox": {"network": false, "profile": "x"}, "mode": "work"});
        assert_eq!(json_sha256(&a), json_sha256(&b));
        // The bytes digested are the sorted compact text, as before objects
        // kept their order: older journals' digests still match.
        assert_eq!(
            json_sha256(&a),
            sha256_hex(br#"{"mode":"work","sandbox":{"network":false,"profile":"x"}}"#)
        );
    }

    #[test]
    fn limits_differences_name_the_field() {
        let a = Limits::default();
        let mut b = Limits::default();
        b.max_calls = a.max_calls + 1;
        let d = differences(&limits_json(&a), &limits_json(&b));
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("max_calls: "), "{d:?}");
    }
}
