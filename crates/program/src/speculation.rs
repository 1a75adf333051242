//! A bound on the TypeScript parser's backtracking, checked before it runs.
//!
//! oxc's TypeScript parser, at a `<` after an expression, tries to read
//! type arguments (`f<T>(x)`); when that fails it rewinds and reads a
//! comparison. Inside the try, `(`, `{` and `[` start further tries
//! (function type or parenthesised type, mapped type, index signature,
//! object literal or pattern), and a `<` inside them starts another: the
//! text after a `<` that never closes is parsed again for each reading of
//! each enclosing `<`. Measured (docs/FUZZING.md), each such `<` at most
//! triples the work: `a<({[` repeated 15 times (75 bytes) took 4.2 GB and
//! 5.9 s. Nothing can stop the parser once it runs (its arena cannot be
//! capped without aborting the process on a failed `Vec` growth), so the
//! work is estimated from the text first and refused past a bound.
//!
//! The estimate scans the text once, skipping strings and comments: each
//! token costs `4^k`, where `k` is the number of `<` open around it. A `<`
//! opens unless it is `<<` or `<=`; it closes at a `>` (not `=>`), when its
//! bracket closes, and at what ends type arguments for the parser at its
//! own bracket level: `;`, an assignment's `=`, a statement's keyword
//! (`const`, `let`, `return`, `if`, ...), so that code without semicolons
//! does not keep its comparisons open. The factor
//! 4 is above the 3 measured, and a `<` counted open where the parser's try
//! ends early (a comparison) only overestimates. Ordinary programs stay
//! far below the bound: a 64 KiB TypeScript program with generics and
//! comparisons costs about its token count.

/// Estimated work past which a program is not parsed as TypeScript, in
/// token parses. The worst text measured that passes (`a<({[` x 9) parses
/// in about 30 ms and 8 MB (release build, two loaded cores).
pub(crate) const WORK_BOUND: u64 = 2_000_000;

/// How much one open `<` multiplies the cost of the tokens inside it.
const PER_OPEN_ANGLE: u64 = 4;

/// Why [`check`] refused a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooMuchBacktracking {
    /// Byte offset of the token at which the estimate passed the bound.
    pub at: usize,
    /// `<` open around that token.
    pub open_angles: u32,
}

impl TooMuchBacktracking {
    /// The run's error (kind `limit`), at the user's line and column, with
    /// JavaScript's parse error when the text was tried as JavaScript first.
    pub(crate) fn into_error(self, body: &str, js_error: Option<&super::SyntaxError>) -> super::RunError {
        let (line, col) = super::position::line_col(body, self.at as u32);
        let mut message = format!(
            "the program has {} `<` open at once here: TypeScript's parser would try each as type \
             arguments and again as a comparison, parsing the text after it over and over (an \
             estimated {} token parses or more, over the bound of {WORK_BOUND}); close each `<` \
             with `>`, or put spaces and parentheses around comparisons",
            self.open_angles,
            WORK_BOUND + 1,
        );
        if let Some(js) = js_error {
            message.push_str(&format!(
                "; as JavaScript it does not parse either: {} (line {}, column {})",
                js.message, js.line, js.column
            ));
        }
        let mut e = super::RunError::new(super::ErrorKind::Limit, message);
        e.line = Some(line);
        e.column = Some(super::position::char_column(body, line, col));
        e
    }
}

/// One bracket level: what closes it and the `<` open in it.
struct Level {
    closer: u8,
    angles: u32,
}

/// Checks that parsing `text` as TypeScript stays within [`WORK_BOUND`].
///
/// Errors: where the estimate passed the bound, and how many `<` were open
/// there.
pub(crate) fn check(text: &str) -> Result<(), TooMuchBacktracking> {
    let bytes = text.as_bytes();
    let mut levels = vec![Level { closer: 0, angles: 0 }];
    let mut open: u32 = 0;
    let mut work: u64 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        let start = i;
        i += 1;
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => continue,
            b'/' if next == Some(b'/') => {
                i = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p);
                continue;
            }
            b'/' if next == Some(b'*') => {
                i = find(bytes, i + 1, b"*/").map_or(bytes.len(), |p| p + 2);
                continue;
            }
            b'\'' | b'"' => i = string_end(bytes, i, b),
            b'`' => i = template_end(bytes, i, &mut levels),
            b'(' => levels.push(Level { closer: b')', angles: 0 }),
            b'[' => levels.push(Level { closer: b']', angles: 0 }),
            b'{' => levels.push(Level { closer: b'}', angles: 0 }),
            b')' | b']' | b'}' if levels.len() > 1 => {
                let level = levels.pop().expect("more than the root");
                open -= level.angles;
                if level.closer == b'`' {
                    // The end of a `${...}`: the template goes on.
                    i = template_end(bytes, i, &mut levels);
                }
            }
            b'<' if matches!(next, Some(b'<' | b'=')) => i += 1,
            b'<' => {
                levels.last_mut().expect("the root").angles += 1;
                open += 1;
            }
            b'=' if matches!(next, Some(b'>' | b'=')) => i += 1,
            b'=' => close_level(&mut levels, &mut open),
            b'>' => {
                let level = levels.last_mut().expect("the root");
                if level.angles > 0 {
                    level.angles -= 1;
                    open -= 1;
                }
            }
            b';' => close_level(&mut levels, &mut open),
            c if is_word_byte(c) => {
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                if STATEMENT_KEYWORDS.contains(&&text[start..i]) {
                    close_level(&mut levels, &mut open);
                }
            }
            _ => {}
        }
        work = work.saturating_add(PER_OPEN_ANGLE.saturating_pow(open));
        if work > WORK_BOUND {
            return Err(TooMuchBacktracking { at: start, open_angles: open });
        }
    }
    Ok(())
}

/// Keywords that begin a statement and cannot be part of a type: type
/// arguments end before them.
const STATEMENT_KEYWORDS: [&str; 14] = [
    "const", "let", "var", "return", "if", "else", "for", "while", "do", "switch", "throw", "try", "class",
    "await",
];

/// Whether `c` may be part of an identifier, keyword or number (any byte
/// of a non-ASCII character counts).
fn is_word_byte(c: u8) -> bool {
    c == b'_' || c == b'$' || c.is_ascii_alphanumeric() || c >= 0x80
}

/// Closes the `<` open at the innermost bracket level.
fn close_level(levels: &mut [Level], open: &mut u32) {
    let level = levels.last_mut().expect("the root level is never popped");
    *open -= level.angles;
    level.angles = 0;
}

/// Where `needle` starts at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| from + p)
}

/// The byte after the string that began before `i` with `quote` (or the
/// end of its line, for one left open).
fn string_end(bytes: &[u8], mut i: usize, quote: u8) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The byte after a template's text from `i` to its closing backquote, or
/// after a `${` that opens code (then a level closed by `}` is pushed, and
/// the scan goes on in code).
fn template_end(bytes: &[u8], mut i: usize, levels: &mut Vec<Level>) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'`' => return i + 1,
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                levels.push(Level { closer: b'`', angles: 0 });
                return i + 2;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzzers_find_and_its_family_are_refused_at_75_bytes() {
        for unit in ["a<({[", "({[a<", "{[a<(", "a<{["] {
            let e = check(&unit.repeat(15)).expect_err(unit);
            assert!(e.open_angles >= 8, "{unit}: {e:?}");
        }
    }

    #[test]
    fn ordinary_generics_comparisons_and_text_are_far_below_the_bound() {
        let program = "const m = new Map<string, Array<Promise<Set<number>>>>();\n\
                       for (let i = 0; i < n && j < (k < 3 ? 1 : 2); i++) { if (a < b) x = y >= z; }\n\
                       const html = \"<div><span><b><i>\" + `<p>${a < b}</p>` + '<<<<';\n\
                       // a comment with <<< and < < <\n\
                       /* and a block <a<b<c */ const f = <T,>(x: T): T => x;\n";
        assert_eq!(check(&program.repeat(300)), Ok(()));
    }

    #[test]
    fn a_template_with_code_inside_is_scanned_as_code() {
        // The `<` inside `${...}` are code; the ones in the text are not.
        let inside = format!("`{}`", "${a<({[".repeat(15));
        assert!(check(&inside).is_err());
        let text_only = format!("`{}`", "a<({[".repeat(15));
        assert_eq!(check(&text_only), Ok(()));
    }

    #[test]
    fn a_semicolon_or_a_closing_bracket_ends_the_open_angles_of_its_level() {
        assert_eq!(check(&"a < b;".repeat(10_000)), Ok(()));
        // Code without semicolons: an assignment or a statement's keyword
        // ends them too.
        assert_eq!(check(&"const ok = a < b\nx = c < d\nif (e) f()\n".repeat(3_000)), Ok(()));
        // But not a line break: type arguments may span lines.
        assert!(check(&"a<(\n{[\n".repeat(15)).is_err());
        assert_eq!(check(&"(a < b)".repeat(10_000)), Ok(()));
        assert_eq!(check(&"f(a < b, c < d)\n".repeat(2_000)), Ok(()));
    }
}
