//! Untrusted text shown to a person on one line: a command, a path, a
//! log line a program wrote. Line breaks and characters that change how
//! the rest of a line reads are written as escapes, so such text cannot
//! start a line of its own (a forged `decide:` or `why it asks:`) or
//! reorder what follows it.

use std::borrow::Cow;

/// Whether `c` must not reach a person raw: control characters (C0, DEL,
/// C1 such as U+0085 NEXT LINE), the Unicode line and paragraph
/// separators (U+2028, U+2029), bidirectional formatting (U+061C, U+200E,
/// U+200F, U+202A..U+202E, U+2066..U+2069; Unicode TR9) and invisible
/// characters (U+200B..U+200D, U+2060, U+FEFF).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

/// `text` with `\n` and `\r` written as `\n`, `\r` and every other
/// [`is_unsafe`] character as `\u{hex}` (lower case, as Rust and the CLI's
/// stderr write them: `\u{1b}`); borrowed when there was none.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text (as `serde_json` writes it, compact or pretty) with every
/// [`is_unsafe`] character that `serde_json` leaves raw (DEL, C1 controls,
/// line separators, bidirectional and invisible characters, which can only
/// stand inside strings) written as a JSON `\uXXXX` escape: the same JSON
/// value, still valid JSON, inert on a terminal. Newlines (the layout of
/// pretty JSON) stay; every other C0 control is already escaped by
/// `serde_json` inside strings and never appears outside them. Every
/// [`is_unsafe`] character is in the Basic Multilingual Plane, so one
/// `\uXXXX` each suffices.
pub fn in_json(json: &str) -> Cow<'_, str> {
    let escaped = |c: char| c != '\n' && is_unsafe(c);
    if !json.chars().any(escaped) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_and_reordering_characters_are_escaped() {
        assert_eq!(one_line("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(one_line("a\nb\rc"), "a\\nb\\rc");
        assert_eq!(one_line("x\u{2028}why: ok\u{0085}y"), "x\\u{2028}why: ok\\u{85}y");
        assert_eq!(one_line("ab\u{202E}cd\u{200B}"), "ab\\u{202e}cd\\u{200b}");
        assert_eq!(one_line("\u{1b}]0;t\u{7}"), "\\u{1b}]0;t\\u{7}");
    }

    #[test]
    fn json_keeps_its_value_and_validity() {
        let value =
            serde_json::json!({"a\u{202e}": ["\u{1b}]52;c;x\u{7}", "x\u{2028}y\u{85}\u{7f}\u{200b}"]});
        for text in [serde_json::to_string(&value).unwrap(), serde_json::to_string_pretty(&value).unwrap()] {
            let shown = in_json(&text);
            assert!(!shown.chars().any(|c| c != '\n' && is_unsafe(c)), "{shown}");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&shown).unwrap(), value);
        }
        assert!(matches!(in_json("{\n  \"a\": 1\n}"), Cow::Borrowed(_)));
    }
}
