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
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            match after.split_once("*/") {
                Some((_, r)) => rest = r,
                None => return false,
            }
        } else if rest.starts_with("```") {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
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
        for program in ["1", "/* a */ x", "// a\nreturn 1", "/* open", "```js\nreturn 2\n```"] {
            assert!(!super::is_blank(program), "{program:?}");
        }
    }
}
