//! Whether a program's text holds no program at all.

/// Whether `source` holds no program: only whitespace, `//` and `/* */`
/// comments, and markdown fence lines (```` ```js ````). Such a program is
/// refused rather than run for a `null` ([`crate::normalise`], and the
/// CLI before it builds an engine): it is almost always a mistake (an
/// empty file, a model's answer that lost its code).
pub fn is_blank(source: &str) -> bool {
    let mut rest = source.trim_start_matches('\u{feff}');
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return true;
        }
        if let Some(after) = rest.strip_prefix("//") {
            // A `//` comment ends at any JavaScript line terminator
            // (ECMA-262, "Line Terminators"): LF, CR, U+2028, U+2029.
            rest = after.split_once(['\n', '\r', '\u{2028}', '\u{2029}']).map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            match after.split_once("*/") {
                Some((_, r)) => rest = r,
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix("```") {
            // A fence line: the backticks and a language's name, nothing
            // else (```` ```return 1``` ```` is code on one line).
            let (line, next) = after.split_once('\n').unwrap_or((after, ""));
            let name = line.trim_end();
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.')) {
                return false;
            }
            rest = next;
        } else {
            return false;
        }
    }
}

/// What a refusal of a blank program says, after "the program" and what
/// names it.
pub const BLANK_PROGRAM: &str = "is empty (only whitespace and comments); write JavaScript or TypeScript whose \
     last expression or `return` is the value, e.g. `return await tools.read({path: \"README.md\"})`";

#[cfg(test)]
mod tests {
    #[test]
    fn blank_programs_are_whitespace_comments_and_fences() {
        for blank in ["", "  \n\t", "// nothing\n", "/* a */ // b", "```js\n// x\n```\n", "\u{feff}\n"] {
            assert!(super::is_blank(blank), "{blank:?}");
        }
        for program in [
            "1",
            "/* a */ x",
            "// a\nreturn 1",
            "/* open",
            "```js\nreturn 2\n```",
            "//a\rreturn 1",
            "//a\u{2028}1",
            "```return 1```",
        ] {
            assert!(!super::is_blank(program), "{program:?}");
        }
    }
}
