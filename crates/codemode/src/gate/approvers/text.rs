//! Untrusted text shown to a person in a prompt: made printable and cut
//! to a bound.

use serde_json::Value;

/// `value` as compact one-line JSON, made printable and cut to at most
/// about `max_chars` characters.
pub(crate) fn one_line_json(value: &Value, max_chars: usize) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|e| format!("<arguments not serialisable: {e}>"));
    bounded(&printable(&json), max_chars)
}

/// `text` cut to `max_chars` characters, saying how long it was when cut.
pub(crate) fn bounded(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_owned();
    }
    let suffix = format!("… ({total} chars)");
    let keep = max_chars.saturating_sub(suffix.chars().count());
    let mut cut: String = text.chars().take(keep).collect();
    cut.push_str(&suffix);
    cut
}

/// `text` with the characters [`hidden`] names replaced by `\uXXXX`,
/// so it shows as one inert line on a terminal.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&escape(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// What is escaped everywhere: the one rule of
/// [`codemode_base::display_text::is_unsafe`] (control characters, line and
/// paragraph separators, bidirectional formatting, zero-width characters).
pub(super) fn hidden(c: char) -> bool {
    codemode_base::display_text::is_unsafe(c)
}

/// `c` as `\uXXXX`.
pub(super) fn escape(c: char) -> String {
    format!("\\u{:04x}", u32::from(c))
}
