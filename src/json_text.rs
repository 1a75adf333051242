//! JSON text made by JavaScript, read with serde_json.
//!
//! `JSON.stringify` writes a lone UTF-16 surrogate (half of a character,
//! which a JS string may hold) as an escape like `\ud800`; serde_json
//! rightly refuses those, since no Rust string can hold them. [`parse`]
//! replaces each unpaired surrogate escape with U+FFFD (the replacement
//! character) and keeps everything else as it is.

use std::borrow::Cow;

use serde_json::Value;

/// Parses JSON text from JavaScript; unpaired surrogate escapes become
/// U+FFFD.
///
/// # Errors
/// The text is not JSON even after that repair.
pub(crate) fn parse(text: &str) -> serde_json::Result<Value> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(e) => match repair_lone_surrogates(text) {
            Cow::Owned(fixed) => serde_json::from_str(&fixed),
            Cow::Borrowed(_) => Err(e),
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(parse("{").is_err());
        assert!(parse(r#""\ud800"#).is_err());
    }
}
