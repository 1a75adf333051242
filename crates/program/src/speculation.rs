//! A bound on the parsers' backtracking, checked before they run.
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
//!
//! Both parsers, JavaScript's too, also try a `(` in an expression as an
//! arrow function's parameters, and TypeScript a `(x): T =>` in a
//! conditional as an arrow function with a return type; those tries are
//! counted as well ([`check_as`]), and the JavaScript parse is checked with
//! them alone.

/// Estimated work past which a program is not parsed, in token parses.
/// The worst texts measured that pass parse in 6-64 ms and 8-44 MB
/// (`a<({[` x 9: 30 ms; `a?(x):T=>` x 300: 64 ms; release build, two
/// loaded cores).
pub(crate) const WORK_BOUND: u64 = 2_000_000;

/// How much one open `<` multiplies the cost of the tokens inside it.
const PER_OPEN_ANGLE: u64 = 4;

/// What one arrow-function try open around a token adds to its cost
/// (times the `<` factor): the try parses the token once, and the reading
/// after the rewind once more, building its syntax tree each time (a token
/// parse here costs about four of a type-argument try's, measured).
const PER_ARROW_TRY: u64 = 4;

/// Why [`check`] refused a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooMuchBacktracking {
    /// Byte offset of the token at which the estimate passed the bound.
    pub at: usize,
    /// `<` open around that token.
    pub open_angles: u32,
    /// Arrow-function tries open around that token.
    pub arrow_tries: u32,
}

impl TooMuchBacktracking {
    /// The run's error (kind `limit`), at the user's line and column, with
    /// JavaScript's parse error when the text was tried as JavaScript first.
    pub(crate) fn into_error(self, body: &str, js_error: Option<&super::SyntaxError>) -> super::RunError {
        let (line, col) = super::position::line_col(body, self.at as u32);
        let mut message = if self.open_angles > 0 {
            format!(
                "the program has {} `<` open at once here: TypeScript's parser would try each as \
                 type arguments and again as a comparison, parsing the text after it over and over \
                 (an estimated {} token parses or more, over the bound of {WORK_BOUND}); close each \
                 `<` with `>`, or put spaces and parentheses around comparisons",
                self.open_angles,
                WORK_BOUND + 1,
            )
        } else {
            format!(
                "the program has {} parenthesised expressions open at once here that the parser \
                 would first try as arrow-function parameters, parsing the text inside each again \
                 (an estimated {} token parses or more, over the bound of {WORK_BOUND}); nest fewer \
                 parentheses, or name the inner values with `const`",
                self.arrow_tries,
                WORK_BOUND + 1,
            )
        };
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

/// One bracket level: what closes it, the `<` and arrow-function tries
/// open in it, and the conditional expressions (`?`) waiting for their `:`.
struct Level {
    closer: u8,
    angles: u32,
    tries: u32,
    questions: u32,
    /// A `)` followed by `:` in a conditional's first branch: a `=>` next
    /// makes it an arrow function with a return type, which the parser
    /// reads to the end of its body and then may rewind (TypeScript).
    armed: bool,
}

impl Level {
    fn new(closer: u8, tries: u32) -> Self {
        Level { closer, angles: 0, tries, questions: 0, armed: false }
    }
}

/// Which parser the estimate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// The script parse: arrow-function tries only.
    JavaScript,
    /// The TypeScript parse: type-argument tries too.
    TypeScript,
}

/// Checks that parsing `text` as TypeScript stays within [`WORK_BOUND`].
///
/// Errors: where the estimate passed the bound, and how many `<` were open
/// there.
pub(crate) fn check(text: &str) -> Result<(), TooMuchBacktracking> {
    check_as(text, Dialect::TypeScript)
}

/// Checks that parsing `text` with `dialect`'s parser stays within
/// [`WORK_BOUND`].
///
/// Besides the type-argument tries (TypeScript), both parsers try a `(`
/// in an expression as an arrow function's parameters when the token after
/// it may start one (a name, `{`, `[`, `...`), and on failure rewind and
/// read it as an expression. A failed try is not tried again, but the text
/// inside it is parsed once more for each try around it: `(a=` repeated
/// 2,000 times (8 KB) took 1 s and 260 MB. TypeScript also tries `(x): T =>`
/// in a conditional's first branch as an arrow function with a return
/// type, body included, and rewinds when no `:` follows the body. Each try
/// open around a token adds [`PER_ARROW_TRY`] parses of it, times the `<`
/// factor. A call's or a statement's parentheses are not tries.
pub(crate) fn check_as(text: &str, dialect: Dialect) -> Result<(), TooMuchBacktracking> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        ts: dialect == Dialect::TypeScript,
        levels: vec![Level::new(0, 0)],
        open: 0,
        trying: 0,
        after_operand: false,
        after_paren: false,
    };
    let mut work: u64 = 0;
    let mut i = 0;
    while i < text.len() {
        let start = i;
        let Some(next) = scanner.token(start) else {
            i = scanner.skip_trivia(start);
            continue;
        };
        i = next;
        let cost = PER_OPEN_ANGLE.saturating_pow(scanner.open);
        work = work.saturating_add(cost.saturating_mul(1 + PER_ARROW_TRY * u64::from(scanner.trying)));
        if work > WORK_BOUND {
            return Err(TooMuchBacktracking {
                at: start,
                open_angles: scanner.open,
                arrow_tries: scanner.trying,
            });
        }
    }
    Ok(())
}

/// The scan's state: the bracket levels, the `<` and tries open in all of
/// them, and what the last token was.
struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    ts: bool,
    levels: Vec<Level>,
    open: u32,
    trying: u32,
    /// The last token ends an operand or names a statement: a `(` after it
    /// is a call, parameters or a condition, not a try.
    after_operand: bool,
    /// The last token was a `)`.
    after_paren: bool,
}

impl Scanner<'_> {
    /// The byte after the white space or comment at `i` (which is one).
    fn skip_trivia(&self, i: usize) -> usize {
        let bytes = self.bytes;
        match (bytes[i], bytes.get(i + 1)) {
            (b'/', Some(b'/')) => line_end(bytes, i),
            (b'/', Some(b'*')) => find(bytes, i + 2, b"*/").map_or(bytes.len(), |p| p + 2),
            _ => i + 1,
        }
    }

    /// Reads the token at `start` and returns the byte after it; `None`
    /// for white space and comments, which cost nothing and leave the
    /// state as it is.
    fn token(&mut self, start: usize) -> Option<usize> {
        let bytes = self.bytes;
        let b = bytes[start];
        let next = bytes.get(start + 1).copied();
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') || (b == b'/' && matches!(next, Some(b'/' | b'*'))) {
            return None;
        }
        let was_operand = std::mem::take(&mut self.after_operand);
        let was_paren = std::mem::take(&mut self.after_paren);
        let mut i = start + 1;
        match b {
            b'\'' | b'"' => {
                i = string_end(bytes, i, b);
                self.after_operand = true;
            }
            b'`' => {
                i = template_end(bytes, i, &mut self.levels);
                self.after_operand = true;
            }
            b'(' => {
                let tries = u32::from(!was_operand && may_start_parameters(bytes, i));
                self.trying += tries;
                self.levels.push(Level::new(b')', tries));
            }
            b'[' => self.levels.push(Level::new(b']', 0)),
            b'{' => self.levels.push(Level::new(b'}', 0)),
            b')' | b']' | b'}' if self.levels.len() > 1 => i = self.close_bracket(b, i),
            b'<' if matches!(next, Some(b'<' | b'=')) => i += 1,
            b'<' if self.ts => {
                self.level().angles += 1;
                self.open += 1;
            }
            b'=' if next == Some(b'>') => {
                i += 1;
                if std::mem::take(&mut self.level().armed) {
                    self.level().tries += 1;
                    self.trying += 1;
                }
            }
            b'=' if next == Some(b'=') => i += 1,
            b'=' => close_level(&mut self.levels, &mut self.open, &mut self.trying, false),
            b'?' if matches!(next, Some(b'?')) => i += 1,
            b'?' if next == Some(b'.') && !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => i += 1,
            b'?' => self.level().questions += 1,
            b':' => {
                let ts = self.ts;
                let level = self.level();
                if level.questions > 0 {
                    level.questions -= 1;
                    level.armed |= ts && was_paren;
                }
            }
            b',' => self.level().armed = false,
            b'>' if self.levels.last().is_some_and(|l| l.angles > 0) => {
                self.level().angles -= 1;
                self.open -= 1;
            }
            b';' => close_level(&mut self.levels, &mut self.open, &mut self.trying, true),
            c if is_word_byte(c) => i = self.word(start),
            _ => {}
        }
        Some(i)
    }

    /// Closes the innermost level at its closing bracket `b` (the byte
    /// before `i`); returns where the scan goes on.
    fn close_bracket(&mut self, b: u8, mut i: usize) -> usize {
        let level = self.levels.pop().expect("more than the root");
        self.open -= level.angles;
        self.trying -= level.tries;
        if level.closer == b'`' {
            // The end of a `${...}`: the template goes on.
            i = template_end(self.bytes, i, &mut self.levels);
        }
        self.after_operand = true;
        self.after_paren = b == b')';
        i
    }

    /// Reads the word (a name, keyword or number) at `start`; returns the
    /// byte after it.
    fn word(&mut self, start: usize) -> usize {
        let mut i = start + 1;
        while i < self.bytes.len() && is_word_byte(self.bytes[i]) {
            i += 1;
        }
        let word = &self.text[start..i];
        if STATEMENT_KEYWORDS.contains(&word) {
            close_level(&mut self.levels, &mut self.open, &mut self.trying, false);
        }
        self.after_operand = !EXPRESSION_KEYWORDS.contains(&word);
        i
    }

    /// The innermost bracket level.
    fn level(&mut self) -> &mut Level {
        self.levels.last_mut().expect("the root level is never popped")
    }
}

/// Keywords that begin a statement and cannot be part of a type: type
/// arguments end before them.
const STATEMENT_KEYWORDS: [&str; 14] = [
    "const", "let", "var", "return", "if", "else", "for", "while", "do", "switch", "throw", "try", "class",
    "await",
];

/// Keywords after which a `(` begins an expression (so may be tried as
/// arrow-function parameters); after any other word it is a call's, a
/// declaration's parameters or a statement's condition.
const EXPRESSION_KEYWORDS: [&str; 16] = [
    "return",
    "typeof",
    "void",
    "delete",
    "await",
    "yield",
    "case",
    "in",
    "of",
    "instanceof",
    "new",
    "throw",
    "else",
    "do",
    "extends",
    "async",
];

/// Whether the text at `i` (after a `(`) may begin arrow-function
/// parameters the parser cannot rule out at once: a name, a pattern
/// (`{`, `[`) or a rest parameter (`...`).
fn may_start_parameters(bytes: &[u8], mut i: usize) -> bool {
    while bytes.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'{' | b'[' | b'.') => true,
        Some(&c) => is_word_byte(c) && !c.is_ascii_digit(),
        None => false,
    }
}

/// Whether `c` may be part of an identifier, keyword or number (any byte
/// of a non-ASCII character counts).
fn is_word_byte(c: u8) -> bool {
    c == b'_' || c == b'$' || c.is_ascii_alphanumeric() || c >= 0x80
}

/// Closes the `<` open at the innermost bracket level, and at the end of
/// a statement (`statement_end`) its arrow-function tries and conditionals.
fn close_level(levels: &mut [Level], open: &mut u32, trying: &mut u32, statement_end: bool) {
    let level = levels.last_mut().expect("the root level is never popped");
    *open -= level.angles;
    level.angles = 0;
    if statement_end {
        *trying -= level.tries;
        level.tries = 0;
        level.questions = 0;
        level.armed = false;
    }
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
            b'\n' | b'\r' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Where the line that `i` is on ends: at the first line terminator of
/// JavaScript after it (`\n`, `\r`, U+2028, U+2029), or the end. A line
/// comment ends there for the parsers: ending it only at `\n` hid the rest
/// of a text with `\r` line ends from the estimate (found by fuzzing).
fn line_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < bytes.len() {
        match bytes[j] {
            b'\n' | b'\r' => return j,
            0xE2 if bytes.get(j + 1) == Some(&0x80) && matches!(bytes.get(j + 2), Some(0xA8 | 0xA9)) => {
                return j;
            }
            _ => j += 1,
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
                levels.push(Level::new(b'`', 0));
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
            assert!(e.open_angles >= 6, "{unit}: {e:?}");
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
    fn a_line_comment_ends_at_every_line_terminator() {
        // The fuzzer's find: a `//` comment ended by `\r` alone hid the
        // rest of the text from the estimate.
        for end in ["\n", "\r", "\r\n", "\u{2028}", "\u{2029}"] {
            let text = format!("// a comment{end}{}", "a<({[".repeat(15));
            assert!(check(&text).is_err(), "{end:?}");
        }
        // A string may hold U+2028 and U+2029, not `\n` or `\r`.
        for end in ["\n", "\r", "\r\n"] {
            let string = format!("'an open string{end}{}", "a<({[".repeat(15));
            assert!(check(&string).is_err(), "{end:?}");
        }
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

    #[test]
    fn nested_parentheses_tried_as_arrow_parameters_are_refused() {
        // Each `(a=` is tried as an arrow function's parameters, fails at
        // the end of its text, and is read again: quadratic (8 KB took 1 s
        // and 260 MB; 32 KB, 19 s and 4 GB), in both parsers.
        let nested = format!("{}1{}", "(a=".repeat(2_000), ")".repeat(2_000));
        for dialect in [Dialect::JavaScript, Dialect::TypeScript] {
            let e = check_as(&nested, dialect).expect_err("nested tries");
            assert!(e.arrow_tries > 100 && e.open_angles == 0, "{e:?}");
        }
        // 250 tries around a long expression: 61 KB took 1.5 s and 1.3 GB.
        let wide = format!("{}{}{}", "(a=".repeat(250), ["1"; 30_000].join("+"), ")".repeat(250));
        assert!(check_as(&wide, Dialect::JavaScript).is_err());
        // TypeScript: `(x): T =>` in a conditional's first branch, its body
        // read and rewound (18 KB took 3.3 s and 1.7 GB).
        let conditional = "a?(x):T=>".repeat(2_000) + "1";
        assert!(check_as(&conditional, Dialect::TypeScript).is_err());
        assert_eq!(check_as(&conditional, Dialect::JavaScript), Ok(()));
    }

    #[test]
    fn calls_callbacks_and_conditionals_are_far_below_the_bound() {
        let program = "describe(name, async () => {\n\
                       const rows = await tools.call('db', { sql: q }).then((r) => r.rows)\n\
                       for (const { id, tags } of rows.filter(({ n }) => n > 0)) {\n\
                       if (id < 10) out.push(id ? (tags ?? []).map((t, i) => [t, i]) : null)\n\
                       const f = (x: number, ...rest: T[]): string => x ? g(x) : h(x)\n\
                       const k = a ? (y): number => y : (z) => z\n\
                       }\n\
                       })\n";
        for dialect in [Dialect::JavaScript, Dialect::TypeScript] {
            assert_eq!(check_as(&program.repeat(200), dialect), Ok(()));
            // Nested twenty deep, the whole program inside.
            let deep =
                format!("{}{}{}", "f(async (a) => {\n".repeat(20), program.repeat(100), "})\n".repeat(20));
            assert_eq!(check_as(&deep, dialect), Ok(()));
        }
    }
}
