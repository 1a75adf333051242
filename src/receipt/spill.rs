//! Bounding results and return values, with spillover to disk.
//!
//! A value over its bound keeps a UTF-8-safe prefix; every byte of the whole
//! is written first, atomically (temp file + rename), to a spill file under
//! `<spill_root>/<run_id>/`. The size of a value is the byte length of a
//! string, or of the compact JSON text of anything else.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Truncation;

/// A value after bounding.
#[derive(Debug)]
pub(crate) struct Bounded {
    /// The value to hand on: unchanged, or the kept prefix as a string.
    pub value: Value,
    /// Size of the whole in bytes.
    pub bytes: u64,
    /// What was cut, when anything was.
    pub truncated: Option<Truncation>,
    /// Why the spill file could not be written, when it could not.
    pub spill_error: Option<String>,
}

/// Where a spilled value goes and how it is named.
#[derive(Debug, Clone)]
pub(crate) struct SpillTarget<'a> {
    pub root: &'a Path,
    pub run_id: &'a str,
    /// File name without extension, e.g. `call-3` or `value`.
    pub stem: &'a str,
}

/// A value measured against its bound.
#[derive(Debug)]
pub(crate) enum Measured {
    /// It fits: the value, its size, and its compact JSON when it is not a
    /// string (so callers need not serialise it again).
    Fits { value: Value, bytes: u64, json: Option<String> },
    /// It does not: its whole text (the string, or the JSON) and the spill
    /// file's extension.
    Over { text: String, ext: &'static str },
}

/// Measures `value` against `limit` bytes, serialising it at most once.
pub(crate) fn measure(value: Value, limit: usize) -> Measured {
    match value {
        Value::String(s) if s.len() <= limit => {
            Measured::Fits { bytes: s.len() as u64, value: Value::String(s), json: None }
        }
        Value::String(s) => Measured::Over { text: s, ext: "txt" },
        other => {
            let text = serde_json::to_string(&other).unwrap_or_default();
            if text.len() <= limit {
                Measured::Fits { bytes: text.len() as u64, value: other, json: Some(text) }
            } else {
                Measured::Over { text, ext: "json" }
            }
        }
    }
}

/// Keeps `value` whole when it fits in `limit` bytes; otherwise writes it to
/// a spill file and returns a UTF-8-safe prefix of its text.
pub(crate) fn bound(value: Value, limit: usize, target: SpillTarget<'_>) -> Bounded {
    match measure(value, limit) {
        Measured::Fits { value, bytes, .. } => Bounded { value, bytes, truncated: None, spill_error: None },
        Measured::Over { text, ext } => spill(text, ext, limit, target),
    }
}

/// Writes the whole `text` to a spill file (blocking I/O) and keeps a
/// UTF-8-safe prefix of at most `limit` bytes.
pub(crate) fn spill(text: String, ext: &str, limit: usize, target: SpillTarget<'_>) -> Bounded {
    let (spill_path, spill_error) = match write_spill(&target, ext, text.as_bytes()) {
        Ok(path) => (Some(path.display().to_string()), None),
        Err(e) => (None, Some(format!("could not write the spill file: {e}"))),
    };
    let bytes = text.len() as u64;
    let kept = utf8_prefix(&text, limit).len();
    let truncated = Truncation { original_bytes: bytes, kept_bytes: kept as u64, spill_path };
    let mut text = text;
    text.truncate(kept);
    Bounded { value: Value::String(text), bytes, truncated: Some(truncated), spill_error }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character
/// boundary.
pub(crate) fn utf8_prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Writes `bytes` to `<root>/<run_id>/<stem>.<ext>` atomically and returns
/// the path.
fn write_spill(target: &SpillTarget<'_>, ext: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = target.root.join(target.run_id);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.{ext}", target.stem));
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(std::path::absolute(&path).unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(root: &Path) -> SpillTarget<'_> {
        SpillTarget { root, run_id: "r1", stem: "call-1" }
    }

    #[test]
    fn small_values_pass_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let b = bound(json!({"a": 1}), 100, target(dir.path()));
        assert_eq!(b.value, json!({"a": 1}));
        assert_eq!(b.bytes, 7);
        assert!(b.truncated.is_none());
        assert!(!dir.path().join("r1").exists());
    }

    #[test]
    fn long_strings_keep_a_utf8_safe_prefix_and_spill_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let s = "é".repeat(10); // 20 bytes
        let b = bound(Value::String(s.clone()), 5, target(dir.path()));
        assert_eq!(b.value, Value::String("éé".into()));
        let t = b.truncated.unwrap();
        assert_eq!((t.original_bytes, t.kept_bytes), (20, 4));
        let spilled = std::fs::read_to_string(t.spill_path.unwrap()).unwrap();
        assert_eq!(spilled, s);
    }

    #[test]
    fn structured_values_spill_their_json() {
        let dir = tempfile::tempdir().unwrap();
        let v = json!({"list": [1, 2, 3, 4, 5, 6, 7, 8, 9]});
        let b = bound(v.clone(), 8, target(dir.path()));
        assert_eq!(b.value, Value::String("{\"list\":".into()));
        let path = b.truncated.unwrap().spill_path.unwrap();
        assert!(path.ends_with("call-1.json"));
        let back: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn an_unwritable_spill_root_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let b = bound(Value::String("abcdef".into()), 3, target(&file));
        assert_eq!(b.value, Value::String("abc".into()));
        assert!(b.truncated.unwrap().spill_path.is_none());
        assert!(b.spill_error.unwrap().contains("spill file"));
    }
}
