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

mod lexical;

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
    /// The text has more `/` than [`MAX_READINGS`] allows that may each be
    /// a division or begin a regular expression.
    pub ambiguous: bool,
}

/// How many readings of a text the estimate follows at most, one more for
/// each `/` that TypeScript's parser may read either way (after a `>` that
/// may close type arguments: `a<b>/c/` divides `a<b>` by `c`, while
/// `a < 1 + 2 > /c/` compares with a regular expression). Each reading is
/// a scan of the rest of the text.
const MAX_READINGS: u32 = 16;

impl TooMuchBacktracking {
    /// The run's error (kind `limit`), at the user's line and column, with
    /// JavaScript's parse error when the text was tried as JavaScript first.
    pub(crate) fn into_error(self, body: &str, js_error: Option<&super::SyntaxError>) -> super::RunError {
        let (line, col) = super::position::line_col(body, self.at as u32);
        let mut message = if self.ambiguous {
            format!(
                "the program has more than {MAX_READINGS} `/` right after a `>` that may close type \
                 arguments, each of which TypeScript may read as a division or as the start of a \
                 regular expression; put a space or parentheses around such a division, or write \
                 the regular expression with `new RegExp(...)`"
            )
        } else if self.open_angles > 0 {
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
#[derive(Clone)]
struct Level {
    closer: u8,
    angles: u32,
    tries: u32,
    questions: u32,
    /// A `)` followed by `:` in a conditional's first branch: a `=>` next
    /// makes it an arrow function with a return type, which the parser
    /// reads to the end of its body and then may rewind (TypeScript).
    armed: bool,
    /// A statement begins after this level closes: a block's `{...}`, or
    /// the condition `(...)` of `if`, `while`, `for` or `with`. A `/`
    /// there starts a regular expression; after any other closing bracket
    /// it is a division.
    statement_after: bool,
}

impl Level {
    fn new(closer: u8, tries: u32, statement_after: bool) -> Self {
        Level { closer, angles: 0, tries, questions: 0, armed: false, statement_after }
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
///
/// The scan tells a regular expression from a division the way the parser
/// does, by what comes before the `/` (see [`Previous`]): a quote,
/// backquote or `//` inside a regular expression read as code would start
/// a string, template or comment and hide the code after it.
pub(crate) fn check_as(text: &str, dialect: Dialect) -> Result<(), TooMuchBacktracking> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        ts: dialect == Dialect::TypeScript,
        levels: vec![Level::new(0, 0, true)],
        open: 0,
        trying: 0,
        previous: Previous::Statement,
        pending_body: None,
    };
    let mut readings = 1;
    scanner.scan(0, 0, &mut readings).map(|_| ())
}

/// What the token before the current one was, as far as the parser's
/// reading of the next one depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Previous {
    /// A statement begins here (the start, after `;`, a block's `{` or
    /// `}`, a condition's `)`, `else`, `do`, `try`, `finally`): `/` starts
    /// a regular expression, `{` a block.
    Statement,
    /// An operand ended (a name, number, string, template, regular
    /// expression, `]`, an object's `}`): `/` divides, `(` is a call, `{`
    /// a body (`interface A {`).
    Operand,
    /// A `)` that is not a condition's: an operand, and `{` after it is a
    /// function's or method's body.
    CloseParen,
    /// `if`, `while`, `for`, `with` (and `for await`): the `(` next is a
    /// condition.
    Head,
    /// `.` or `?.`: the word next is a property's name, never a keyword.
    Dot,
    /// `=>`: `{` is a function's body.
    Arrow,
    /// `:` of a label or a type annotation (`{` is a block or a type), or
    /// of an object's property or a conditional (`{` is an object).
    Colon { block: bool },
    /// A `>` that may close type arguments (TypeScript): a `/` after it
    /// divides when they are type arguments and begins a regular
    /// expression when the `<` was a comparison; both are followed.
    ClosedAngle,
    /// An operator, an opening bracket, `,` or a keyword an expression
    /// follows (`return`, `typeof`, ...): `/` starts a regular expression,
    /// `{` an object.
    Operator,
}

impl Previous {
    /// Whether an operand ended: a `/` next divides.
    fn is_operand(self) -> bool {
        matches!(self, Previous::Operand | Previous::CloseParen)
    }
}

/// The scan's state: the bracket levels, the `<` and tries open in all of
/// them, and what the last token was.
#[derive(Clone)]
struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    ts: bool,
    levels: Vec<Level>,
    open: u32,
    trying: u32,
    previous: Previous,
    /// After `function`, `class`, `interface` or `enum`: the bracket depth
    /// it was at, and whether its body is a block (a declaration: a
    /// statement begins after it) or an expression (`x = function () {}`).
    /// Taken by the next `{` at that depth outside type arguments.
    pending_body: Option<(usize, bool)>,
}

impl Scanner<'_> {
    /// Scans from byte `from` to the end with `work` done so far; returns
    /// the work at the end. A `/` that may be read either way is followed
    /// both ways, the second reading on a copy of the state (`readings`
    /// counts them all).
    fn scan(&mut self, from: usize, mut work: u64, readings: &mut u32) -> Result<u64, TooMuchBacktracking> {
        let mut i = from;
        while i < self.text.len() {
            let start = i;
            if self.previous == Previous::ClosedAngle
                && self.bytes[start] == b'/'
                && !lexical::is_trivia(b'/', self.bytes.get(start + 1).copied())
            {
                *readings += 1;
                if *readings > MAX_READINGS {
                    return Err(self.refusal(start, true));
                }
                let mut dividing = self.clone();
                dividing.previous = Previous::Operand;
                dividing.scan(start, work, readings)?;
            }
            let Some(next) = self.token(start) else {
                i = lexical::skip_trivia(self.bytes, start);
                continue;
            };
            i = next;
            let cost = PER_OPEN_ANGLE.saturating_pow(self.open);
            work = work.saturating_add(cost.saturating_mul(1 + PER_ARROW_TRY * u64::from(self.trying)));
            if work > WORK_BOUND {
                return Err(self.refusal(start, false));
            }
        }
        Ok(work)
    }

    /// Why the text is refused at byte `at`.
    fn refusal(&self, at: usize, ambiguous: bool) -> TooMuchBacktracking {
        TooMuchBacktracking { at, open_angles: self.open, arrow_tries: self.trying, ambiguous }
    }

    /// Reads the token at `start` and returns the byte after it; `None`
    /// for white space and comments, which cost nothing and leave the
    /// state as it is.
    fn token(&mut self, start: usize) -> Option<usize> {
        let bytes = self.bytes;
        let b = bytes[start];
        let next = bytes.get(start + 1).copied();
        if lexical::is_trivia(b, next) {
            return None;
        }
        let previous = std::mem::replace(&mut self.previous, Previous::Operator);
        let mut i = start + 1;
        match b {
            b'\'' | b'"' => {
                i = lexical::string_end(bytes, i, b);
                self.previous = Previous::Operand;
            }
            b'`' => {
                i = template_end(bytes, i, &mut self.levels);
                self.previous = Previous::Operand;
            }
            b'/' if previous.is_operand() => {}
            b'/' => {
                i = lexical::regex_end(bytes, i);
                self.previous = Previous::Operand;
            }
            b'(' => {
                let tries = u32::from(
                    !previous.is_operand() && previous != Previous::Head && may_start_parameters(bytes, i),
                );
                self.trying += tries;
                self.levels.push(Level::new(b')', tries, previous == Previous::Head));
            }
            b'[' => self.levels.push(Level::new(b']', 0, false)),
            b'{' => self.open_brace(previous),
            b')' | b']' | b'}' if self.levels.len() > 1 => i = self.close_bracket(b, i),
            b'<' if matches!(next, Some(b'<' | b'=')) => i += 1,
            b'<' if self.ts => {
                self.level().angles += 1;
                self.open += 1;
            }
            b'=' => i = self.equals_sign(next, i),
            b'+' | b'-' if next == Some(b) => {
                // `a++ / b` divides: a postfix `++` or `--` ends an operand.
                i += 1;
                if previous.is_operand() {
                    self.previous = Previous::Operand;
                }
            }
            // TypeScript's non-null assertion (`a! / b`) ends an operand.
            b'!' if self.ts && previous.is_operand() && next != Some(b'=') => {
                self.previous = Previous::Operand
            }
            b'.' if bytes.get(i..i + 2) == Some(b"..") => i += 2,
            b'.' => self.previous = Previous::Dot,
            b'?' if matches!(next, Some(b'?')) => i += 1,
            b'?' if next == Some(b'.') && !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i += 1;
                self.previous = Previous::Dot;
            }
            b'?' => self.level().questions += 1,
            b':' => self.colon(previous),
            b',' => self.level().armed = false,
            b'>' if self.levels.last().is_some_and(|l| l.angles > 0) => {
                self.level().angles -= 1;
                self.open -= 1;
                self.previous = Previous::ClosedAngle;
            }
            b';' => {
                self.end_pending_body();
                close_level(&mut self.levels, &mut self.open, &mut self.trying, true);
                self.previous = Previous::Statement;
            }
            c if lexical::is_word_byte(c) => i = self.word(start, previous),
            _ => {}
        }
        Some(i)
    }

    /// A `=` (before byte `i`): an arrow, a comparison or an assignment;
    /// returns the byte after it.
    fn equals_sign(&mut self, next: Option<u8>, i: usize) -> usize {
        match next {
            Some(b'>') => {
                self.previous = Previous::Arrow;
                if std::mem::take(&mut self.level().armed) {
                    self.level().tries += 1;
                    self.trying += 1;
                }
                i + 1
            }
            Some(b'=') => i + 1,
            _ => {
                self.end_pending_body();
                close_level(&mut self.levels, &mut self.open, &mut self.trying, false);
                i
            }
        }
    }

    /// A `{`: a block or a body (a statement begins after it closes), or
    /// an object (an operand ends there).
    fn open_brace(&mut self, previous: Previous) {
        let depth = self.levels.len();
        let in_type_arguments = self.level().angles > 0;
        let block = match self.pending_body {
            // Not a type's `{` (`function f(): { a: T } {`, `(): {} => {`).
            Some((at, block))
                if at == depth
                    && !in_type_arguments
                    && !matches!(previous, Previous::Colon { .. } | Previous::Arrow) =>
            {
                self.pending_body = None;
                block
            }
            _ => match previous {
                Previous::Statement | Previous::Arrow | Previous::Operand | Previous::CloseParen => true,
                Previous::Head | Previous::Dot | Previous::ClosedAngle | Previous::Operator => false,
                Previous::Colon { block } => block,
            },
        };
        self.levels.push(Level::new(b'}', 0, block));
        if block {
            self.previous = Previous::Statement;
        }
    }

    /// A `:`: a conditional's second branch, an object's property value, a
    /// label or a type annotation.
    fn colon(&mut self, previous: Previous) {
        let ts = self.ts;
        let level = self.level();
        let block = if level.questions > 0 {
            level.questions -= 1;
            level.armed |= ts && previous == Previous::CloseParen;
            false
        } else {
            // In an object (`{ a: {} }`) a value; elsewhere a label or a type.
            level.closer != b'}' || level.statement_after
        };
        self.previous = Previous::Colon { block };
    }

    /// Closes the innermost level at its closing bracket `b` (the byte
    /// before `i`); returns where the scan goes on.
    fn close_bracket(&mut self, b: u8, mut i: usize) -> usize {
        let level = self.levels.pop().expect("more than the root");
        self.open -= level.angles;
        self.trying -= level.tries;
        if self.pending_body.is_some_and(|(at, _)| at > self.levels.len()) {
            self.pending_body = None;
        }
        self.previous = if level.closer == b'`' {
            // The end of a `${...}`: the template goes on.
            i = template_end(self.bytes, i, &mut self.levels);
            Previous::Operand
        } else if level.statement_after {
            Previous::Statement
        } else if b == b')' {
            Previous::CloseParen
        } else {
            Previous::Operand
        };
        i
    }

    /// Reads the word (a name, keyword or number) at `start`; returns the
    /// byte after it.
    fn word(&mut self, start: usize, previous: Previous) -> usize {
        let i = lexical::word_end(self.bytes, start);
        let word = &self.text[start..i];
        self.previous = Previous::Operand;
        if previous == Previous::Dot {
            // A property's name (`a.if`, `b.return`), whatever its spelling.
            return i;
        }
        if STATEMENT_KEYWORDS.contains(&word) {
            self.end_pending_body();
            close_level(&mut self.levels, &mut self.open, &mut self.trying, false);
        }
        let depth = self.levels.len();
        match word {
            "if" | "while" | "for" | "with" => self.previous = Previous::Head,
            "await" if previous == Previous::Head => self.previous = Previous::Head,
            "else" | "do" | "try" | "finally" => self.previous = Previous::Statement,
            "function" | "class" => self.pending_body = Some((depth, previous == Previous::Statement)),
            "interface" | "enum" | "namespace" if lexical::name_follows(self.bytes, i) => {
                self.pending_body = Some((depth, true));
            }
            _ if EXPRESSION_KEYWORDS.contains(&word) => self.previous = Previous::Operator,
            _ => {}
        }
        i
    }

    /// Forgets a `function` or `class` whose body did not follow (an
    /// overload's or a declared function's signature ends at `;` or `=`).
    fn end_pending_body(&mut self) {
        if self.pending_body.is_some_and(|(at, _)| at == self.levels.len()) {
            self.pending_body = None;
        }
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
        Some(&c) => lexical::is_word_byte(c) && !c.is_ascii_digit(),
        None => false,
    }
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

/// The byte after a template's text from `i` to its closing backquote, or
/// after a `${` that opens code (then a level closed by `}` is pushed, and
/// the scan goes on in code).
fn template_end(bytes: &[u8], mut i: usize, levels: &mut Vec<Level>) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'`' => return i + 1,
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                levels.push(Level::new(b'`', 0, false));
                return i + 2;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests;
