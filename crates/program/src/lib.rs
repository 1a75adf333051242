//! codemode-program: programs and their normalisation before they run
//! (docs/DESIGN.md §2). A leaf of the workspace: it knows nothing of the
//! VM, the gate or receipts; the engine turns a [`NormaliseError`] into
//! the receipt's error.
//!
//! A program is the body of an async function: top-level `await` and
//! `return` work. [`normalise`] turns what the user sent into the script the
//! VM evaluates, with a [`PositionMap`] back to the user's lines and columns:
//!
//! 1. a surrounding markdown fence is stripped (`fence.rs`);
//! 2. the body is parsed, with a real parser (oxc), as JavaScript inside the
//!    very wrapper it will run in (`javascript.rs`): the fast path, where
//!    the script is the user's text plus the wrapper and a `return ` before a
//!    trailing expression;
//! 3. otherwise it is parsed as a TypeScript module (`module.rs`): `import`
//!    is refused, `export default` becomes `return`, `export` before a
//!    declaration is dropped, then either the edited text is JavaScript
//!    after all (step 2 again) or it is TypeScript, which `typescript.rs`
//!    turns into JavaScript with a source map.
//!
//! Whatever runs was checked by the parser as one whole body, so a program
//! cannot close the wrapper and run code outside it.
//!
//! Before each parse, `speculation/` bounds the work it may take: oxc's
//! parsers backtrack at each `(` that may open arrow-function parameters
//! and, TypeScript's, at each `<` that may open type arguments, and nested
//! tries multiply (docs/LIMITS.md, "Before the VM"). Texts that nest
//! deeply are parsed on a thread with a large stack (`on_large_stack`).

mod batch;
mod blank;
mod fault_site;
mod fence;
mod javascript;
mod module;
mod position;
mod speculation;
mod throw_site;
mod tool_uses;
mod typescript;

use std::cell::RefCell;

pub use batch::{Batch, BatchCall, BatchError, ExecuteInput};
pub use blank::{BLANK_PROGRAM, is_blank};
pub use fault_site::{Fault, Origin, Site, ToolCall};
use oxc_allocator::Allocator;
pub use position::PositionMap;
pub use tool_uses::{ArgumentObject, Arguments, ToolUse};

/// What kind of failure a [`NormaliseError`] is; the receipt's
/// `error.kind` of the same name (docs/RECEIPTS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NormaliseErrorKind {
    /// The program does not parse, or uses a form codemode refuses
    /// (`import`, a fence naming another language): `syntax`.
    Syntax,
    /// The program is nested too deeply to parse: `stack`.
    Stack,
    /// Parsing the program would take more work than the bound of
    /// `speculation/` allows (the parsers' backtracking): `limit`.
    Limit,
    /// The parser itself failed: `internal` (a bug).
    Internal,
}

/// Why a program could not be normalised: a kind, a message, and where in
/// the user's text (line 1-based; column 1-based, in characters) when a
/// parser said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct NormaliseError {
    /// What kind of failure.
    pub kind: NormaliseErrorKind,
    /// What was wrong, for a person.
    pub message: String,
    /// The user's line, 1-based.
    pub line: Option<u32>,
    /// The user's column, 1-based, in characters.
    pub column: Option<u32>,
}

impl NormaliseError {
    /// An error of `kind` without a position.
    pub fn new(kind: NormaliseErrorKind, message: impl Into<String>) -> Self {
        NormaliseError { kind, message: message.into(), line: None, column: None }
    }
}

use NormaliseErrorKind as ErrorKind;
type RunError = NormaliseError;

/// The text put before a JavaScript program's first line. JavaScript runs in
/// sloppy mode, as a script does.
pub(crate) const WRAP_PREFIX: &str = "(async () => {";
/// The text put before the JavaScript generated from a TypeScript program:
/// TypeScript is parsed as a module, and modules are strict.
pub(crate) const STRICT_WRAP_PREFIX: &str = "(async () => {\"use strict\";";
/// The text put after the program's last line.
pub(crate) const WRAP_SUFFIX: &str = "\n})()";

/// A program to run: JavaScript or TypeScript source and the name used in
/// stack traces.
///
/// The source may be wrapped in a markdown fence (```` ```js ````,
/// ```` ```ts ````, ...). It is TypeScript when its fence says so, when its
/// name ends in `.ts`, `.mts` or `.cts`, or when it does not parse as
/// JavaScript but does as TypeScript. `export default <expr>` and a trailing
/// expression statement give the program's value; `import` is an error
/// (there is no module loader: tools are called with `tools.call`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    source: String,
    name: String,
    path: Option<std::path::PathBuf>,
    input: Option<serde_json::Value>,
}

/// The largest input a program takes ([`Program::with_input`]), as compact
/// JSON text: 1 MiB. A larger one is refused when the run starts (error
/// kind `limit`); keep large data in files the program reads.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

impl Program {
    /// A program named `program.js`.
    pub fn new(source: impl Into<String>) -> Self {
        Program::named("program.js", source)
    }

    /// A program with a name for stack traces (usually its file name; a name
    /// ending in `.ts`, `.mts` or `.cts` makes the program TypeScript).
    /// Characters other than letters, digits, `.`, `_` and `-` are replaced
    /// by `_`.
    pub fn named(name: impl Into<String>, source: impl Into<String>) -> Self {
        let name: String = name
            .into()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
            .collect();
        let name = if name.is_empty() { "program.js".to_owned() } else { name };
        Program { source: source.into(), name, path: None, input: None }
    }

    /// Notes the file the program was read from. Its journal records the
    /// path, so `codemode resume` can refuse to go on when the file has
    /// changed since the run paused (docs/JOURNAL.md). Default: none.
    pub fn with_path(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        let path = path.into();
        self.path = Some(std::path::absolute(&path).unwrap_or(path));
        self
    }

    /// The file the program was read from, when [`Program::with_path`]
    /// named one.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Gives the program an input: the global `input` holds this value
    /// (parsed afresh from its JSON in the run's VM) when the program
    /// starts. The run's journal records it, so a resume hands the program
    /// the same value. Without one, `input` is not defined (`typeof input`
    /// is `"undefined"`). At most [`MAX_INPUT_BYTES`] of compact JSON.
    /// Default: none.
    pub fn with_input(mut self, input: serde_json::Value) -> Self {
        self.input = Some(input);
        self
    }

    /// The input [`Program::with_input`] gave, if any.
    pub fn input(&self) -> Option<&serde_json::Value> {
        self.input.as_ref()
    }

    /// The source as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The name used in stack traces.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The language the name says, if it says one.
    fn named_language(&self) -> Option<Language> {
        let lower = self.name.to_ascii_lowercase();
        [".ts", ".mts", ".cts"].iter().any(|e| lower.ends_with(e)).then_some(Language::TypeScript)
    }
}

/// The language of a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Language {
    JavaScript,
    TypeScript,
}

/// The script the VM evaluates and where its positions come from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Normalised {
    /// The wrapped program: evaluating it gives the program's promise.
    pub script: String,
    /// Positions in `script` back to the user's lines and columns.
    pub positions: PositionMap,
    /// The tool calls the program names literally, in source order, from
    /// the parse that checked it (`tool_uses.rs`): what an admission
    /// check compares with the catalog before the first call. Empty when
    /// the program may not mean the engine's `tools` by that name.
    pub tool_uses: Vec<ToolUse>,
}

/// A syntax error found by a parser, in the user's coordinates (line
/// 1-based, column 1-based in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub message: String,
    pub line: u32,
    pub column: u32,
}

impl SyntaxError {
    fn into_run_error(self) -> RunError {
        let mut e = RunError::new(ErrorKind::Syntax, self.message);
        e.line = Some(self.line);
        e.column = Some(self.column);
        e
    }
}

thread_local! {
    /// One arena per thread, reset for each program, so parsing a small
    /// program allocates nothing once the thread has parsed one.
    static ARENA: RefCell<Allocator> = RefCell::new(Allocator::default());
}

/// Arena memory kept between programs at most; a larger arena (after a
/// large TypeScript program) is dropped rather than kept by the VM thread.
const ARENA_KEEP_BYTES: usize = 4 << 20;

/// Runs `f` with this thread's arena, emptied first.
fn with_arena<R>(f: impl FnOnce(&Allocator) -> R) -> R {
    ARENA.with(|cell| {
        let mut arena = cell.borrow_mut();
        arena.reset();
        let out = f(&arena);
        if arena.capacity() > ARENA_KEEP_BYTES {
            *arena = Allocator::default();
        }
        out
    })
}

/// Normalises `program` into the script to evaluate.
///
/// Errors are kind `syntax`, with the user's line and column: a parse error
/// (from the TypeScript parse when the program looks like TypeScript), an
/// `import`, an `export` form that needs a module system, a fence naming
/// another language.
pub fn normalise(program: &Program) -> Result<Normalised, RunError> {
    let at_start = |m: String| {
        let mut e = RunError::new(ErrorKind::Syntax, m);
        e.line = Some(1);
        e.column = Some(1);
        e
    };
    // (A fence names its language first: `python` is refused for that.)
    let (body, fenced) = fence::strip(program.source()).map_err(at_start)?;
    if is_blank(&body) {
        return Err(at_start(format!("the program {BLANK_PROGRAM}")));
    }
    let language = fenced.or_else(|| program.named_language());
    let error = match normalise_text(&body, language) {
        Err(e) if e.kind == ErrorKind::Syntax => e,
        done => return done,
    };
    // Models often wrap the code in prose ("Here is the program: ```js ...
    // ``` It returns ..."), or leave a fence unclosed: when the whole text
    // does not parse, the first fenced block alone may.
    if let Some((code, fenced)) = fence::extract(program.source())
        && let Ok(normalised) = normalise_text(&code, fenced.or(language))
    {
        return Ok(normalised);
    }
    Err(error)
}

/// Normalises a program's text (fences already handled).
fn normalise_text(body: &str, language: Option<Language>) -> Result<Normalised, RunError> {
    if needs_large_stack(body) {
        return normalise_deep(body, language);
    }
    with_arena(|arena| normalise_body(arena, body, language))
}

/// Whether parsing `text` may recurse deeper than a VM thread's stack
/// allows, so that it must run [`on_large_stack`].
pub(crate) fn needs_large_stack(text: &str) -> bool {
    bracket_depth(text) > DEEP_NESTING || nesting_operators(text) > DEEP_NESTING
}

/// Bracket depth past which the parser runs on a thread of its own with a
/// large stack: oxc's parser and transformer recurse once per level, and
/// 10,000 nested parentheses (20 KB, well under the source limit) would
/// overflow a VM thread's stack and abort the process.
const DEEP_NESTING: usize = 256;
/// Stack of that thread, bytes (reserved, touched only as deep as needed):
/// enough for the deepest nesting the source limit allows.
const DEEP_STACK_BYTES: usize = 1 << 30;

/// The greatest nesting of `(`, `[`, `{` and `<` in `text`, counted
/// without parsing (strings and comments included), so never below the
/// real depth.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// How many `=`, `?` and `:` `text` holds (strings and comments
/// included): the parsers recurse once per level of assignments (`a=b=c`),
/// arrow functions (`x=>y=>z`), conditionals (`a?b:c?d:e`) and labels
/// (`a:b:c`) too, which need no brackets; 16,000 of them in a row (32 KB)
/// overflowed an 8 MiB stack and aborted the process. A program with more
/// of them than [`DEEP_NESTING`], nested or not, is parsed on the large
/// stack.
fn nesting_operators(text: &str) -> usize {
    text.bytes().filter(|b| matches!(b, b'=' | b'?' | b':')).count()
}

/// [`normalise_body`] on a thread with a large stack, for deeply nested
/// programs (QuickJS then reports nesting past its own stack limit as kind
/// `stack`).
fn normalise_deep(body: &str, language: Option<Language>) -> Result<Normalised, RunError> {
    match on_large_stack(|| normalise_body(&Allocator::default(), body, language)) {
        Ok(Some(result)) => result,
        Ok(None) => {
            Err(RunError::new(ErrorKind::Internal, "the parser failed on this program; this is a bug"))
        }
        Err(e) => Err(RunError::new(
            ErrorKind::Stack,
            format!("the program is nested too deeply to parse (no thread for it: {e})"),
        )),
    }
}

/// Runs `f` on a thread of its own with a [`DEEP_STACK_BYTES`] stack and
/// waits for it: `Ok(None)` when `f` panicked, an error when no thread
/// could be made.
pub(crate) fn on_large_stack<R: Send>(f: impl FnOnce() -> R + Send) -> std::io::Result<Option<R>> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("codemode-deep-parse".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, f)
            .map(|thread| thread.join().ok())
    })
}

fn normalise_body(arena: &Allocator, body: &str, language: Option<Language>) -> Result<Normalised, RunError> {
    // The fast path: JavaScript, parsed inside its wrapper.
    let js_error = if language == Some(Language::TypeScript) {
        None
    } else {
        speculation::check_as(body, speculation::Dialect::JavaScript)
            .map_err(|e| e.into_error(body, None))?;
        match javascript::wrap(arena, body) {
            Ok(javascript::Wrapped { script, shifts: runtime, uses }) => {
                let positions = PositionMap { runtime, user: body.to_owned(), ..PositionMap::default() };
                return Ok(Normalised { script, positions, tool_uses: uses });
            }
            Err(e) => e,
        }
    };
    // A module: imports, exports, a trailing expression; maybe TypeScript.
    speculation::check(body).map_err(|e| e.into_error(body, js_error.as_ref()))?;
    let module = match module::edit(arena, body) {
        Ok(m) => m,
        Err(module::Refusal::Parse(ts_error)) => return Err(pick(js_error, ts_error).into_run_error()),
        Err(module::Refusal::Module(e)) => return Err(e.into_run_error()),
    };
    let mut positions = PositionMap { edits: module.shifts, user: body.to_owned(), ..PositionMap::default() };
    if module.changed_syntax
        && language != Some(Language::TypeScript)
        && let Ok(wrapped) = javascript::wrap_as_is(arena, &module.text)
    {
        positions.runtime = wrapped.shifts;
        return Ok(Normalised { script: wrapped.script, positions, tool_uses: module.uses });
    }
    let (script, runtime, mapped) =
        typescript::transform(arena, &module.text).map_err(|(message, offset)| {
            let (line, column) = positions.edited_offset(&module.text, offset);
            SyntaxError { message, line, column }.into_run_error()
        })?;
    positions.runtime = runtime;
    positions.mapped = Some(Box::new(mapped));
    Ok(Normalised { script, positions, tool_uses: module.uses })
}

/// The more helpful of the two parse errors: the one further into the
/// program (TypeScript's when the program uses types, since JavaScript's
/// parser stops at the first annotation), JavaScript's on a tie.
fn pick(js: Option<SyntaxError>, ts: SyntaxError) -> SyntaxError {
    match js {
        Some(js) if (js.line, js.column) >= (ts.line, ts.column) => js,
        _ => ts,
    }
}

/// Writes a parser diagnostic as a message for users: the parser's text,
/// and its help when it has one.
pub(crate) fn describe(d: &oxc_diagnostics::OxcDiagnostic) -> String {
    let mut m = d.message.to_string();
    if let Some(help) = &d.help {
        m.push_str(" (");
        m.push_str(help);
        m.push(')');
    }
    m
}

#[cfg(test)]
mod tests;
