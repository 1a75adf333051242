//! JSON text made by JavaScript, read with serde_json.
//!
//! `JSON.stringify` writes a lone UTF-16 surrogate (half of a character,
//! which a JS string may hold) as an escape like `\ud800`; serde_json
//! rightly refuses those, since no Rust string can hold them. [`parse`]
//! replaces each unpaired surrogate escape with U+FFFD (the replacement
//! character) and keeps everything else as it is.
//!
//! serde_json reads at most [`MAX_DEPTH`] levels of arrays and objects (a
//! guard of its recursive parser); JavaScript builds deeper values
//! freely. Deeper text is [`JsonTextError::TooDeep`], which says so, rather
//! than serde_json's "recursion limit exceeded".

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

/// The deepest nesting of arrays and objects [`parse`] reads: serde_json's
/// recursion limit (128 levels; a value at level 128 is refused, so 127
/// levels of containers around a scalar is the most).
pub const MAX_DEPTH: usize = 127;

/// Why JSON text from JavaScript could not be read.
#[derive(Debug)]
pub enum JsonTextError {
    /// Arrays and objects nest `depth` levels, over [`MAX_DEPTH`].
    TooDeep {
        /// Levels of arrays and objects at the deepest point.
        depth: usize,
    },
    /// Not JSON (serde_json's message says where).
    Invalid(serde_json::Error),
}

impl fmt::Display for JsonTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonTextError::TooDeep { depth } => write!(
                f,
                "arrays and objects nest {depth} levels deep, over the limit of {MAX_DEPTH}; flatten the value \
                 or pass its deep part as a string (JSON.stringify)"
            ),
            JsonTextError::Invalid(e) => write!(f, "not valid JSON: {e}"),
        }
    }
}

impl std::error::Error for JsonTextError {}

/// Parses JSON text from JavaScript; unpaired surrogate escapes become
/// U+FFFD.
///
/// # Errors
/// [`JsonTextError::TooDeep`] when arrays and objects nest deeper than
/// [`MAX_DEPTH`]; [`JsonTextError::Invalid`] when the text is not JSON even
/// after the repair.
pub fn parse(text: &str) -> Result<Value, JsonTextError> {
    let e = match serde_json::from_str(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    // Only a failed parse pays for the scan.
    let depth = nesting_depth(text);
    if depth > MAX_DEPTH {
        return Err(JsonTextError::TooDeep { depth });
    }
    match repair_lone_surrogates(text) {
        Cow::Owned(fixed) => serde_json::from_str(&fixed).map_err(JsonTextError::Invalid),
        Cow::Borrowed(_) => Err(JsonTextError::Invalid(e)),
    }
}

/// The deepest nesting of `[` and `{` in `text`, outside strings.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut in_string = false;
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match (in_string, b) {
            (true, b'\\') => {
                bytes.next();
            }
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// `text` with every `\uXXXX` escape of an unpaired surrogate replaced by
/// `\ufffd`; borrowed when there was none.
fn repair_lone_surrogates(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let hex = |at: usize| -> Option<u16> {
        let digits = text.get(at..at + 4)?;
        u16::from_str_radix(digits, 16).ok()
    };
    let escape_at = |at: usize| -> Option<u16> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u')).then(|| hex(at + 2)).flatten()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match escape_at(i) {
            Some(high @ 0xD800..=0xDBFF) if matches!(escape_at(i + 6), Some(0xDC00..=0xDFFF)) => {
                let _ = high;
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..i]);
                o.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            // Any other escape (including `\\`) is two characters or a
            // non-surrogate `\u` escape; skip it whole.
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
        None => Cow::Borrowed(text),
    }
}

/// `value` as canonical JSON: object keys sorted by their UTF-8 bytes, no
/// whitespace, strings and numbers as serde_json writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// The length in bytes of `value` as canonical JSON.
pub fn canonical_len(value: &Value) -> usize {
    let mut out = Vec::new();
    write_canonical_bytes(value, &mut out);
    out.len()
}

/// Appends `value` as canonical JSON ([`canonical_json`]) to `out`.
pub fn write_canonical(value: &Value, out: &mut String) {
    let mut bytes = Vec::new();
    write_canonical_bytes(value, &mut bytes);
    // serde_json writes UTF-8 only.
    out.push_str(&String::from_utf8_lossy(&bytes));
}

/// Appends `value` as canonical JSON ([`canonical_json`]) to `out`, as
/// UTF-8 bytes: what a digest hashes, with no allocation per key or
/// scalar.
pub fn write_canonical_bytes(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing to a vector cannot fail; a string always serializes.
                let _ = serde_json::to_writer(&mut *out, key);
                out.push(b':');
                write_canonical_bytes(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical_bytes(item, out);
            }
            out.push(b']');
        }
        scalar => {
            // As for keys: a JSON scalar always serializes.
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level_and_escapes_as_serde_json() {
        let v = json!({"b": [1, {"z": "\u{1}\"é", "a": 2.5}], "a": null, "é": true, "Z": -0});
        let expected = r#"{"Z":0,"a":null,"b":[1,{"a":2.5,"z":"\u0001\"é"}],"é":true}"#;
        assert_eq!(canonical_json(&v), expected);
        assert_eq!(canonical_len(&v), expected.len());
        let mut bytes = b"x".to_vec();
        write_canonical_bytes(&v, &mut bytes);
        assert_eq!(&bytes[1..], expected.as_bytes());
    }

    #[test]
    fn unpaired_surrogates_become_replacement_characters() {
        assert_eq!(parse(r#""a\ud800b""#).unwrap(), json!("a\u{fffd}b"));
        assert_eq!(parse(r#"{"s":"\udfff\udfff"}"#).unwrap(), json!({"s": "\u{fffd}\u{fffd}"}));
        assert_eq!(parse(r#""\ud83d""#).unwrap(), json!("\u{fffd}"));
    }

    #[test]
    fn pairs_and_other_escapes_are_kept() {
        assert_eq!(parse(r#""\ud83d\ude00""#).unwrap(), json!("😀"));
        assert_eq!(parse(r#""\\ud800""#).unwrap(), json!("\\ud800"));
        assert_eq!(parse(r#""\u00e9\n""#).unwrap(), json!("é\n"));
    }

    #[test]
    fn text_that_is_not_json_still_fails() {
        assert!(matches!(parse("{"), Err(JsonTextError::Invalid(_))));
        assert!(matches!(parse(r#""\ud800"#), Err(JsonTextError::Invalid(_))));
    }

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn nesting_up_to_the_limit_is_read_and_deeper_says_how_deep() {
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        let e = parse(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(matches!(e, JsonTextError::TooDeep { depth } if depth == MAX_DEPTH + 1), "{e}");
        let deep_object = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
        let e = parse(&deep_object).unwrap_err().to_string();
        assert!(e.contains("nest 200 levels deep, over the limit of 127"), "{e}");
    }

    #[test]
    fn brackets_inside_strings_do_not_count_as_nesting() {
        assert_eq!(nesting_depth(r#"["[[[", {"k\"[": "{{"}]"#), 2);
        assert_eq!(nesting_depth(r#""\\" ["#), 1);
    }
}
