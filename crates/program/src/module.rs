//! The module path: the program parsed as a TypeScript module (TypeScript
//! is a superset of the JavaScript programs that reach this path), and the
//! module syntax a program may use turned into what a function body allows.
//!
//! - `import type ...` (and imports of types only) are blanked out;
//!   any other `import` is an error: there is no module loader.
//! - `export default <expr>` becomes `return <expr>`: `export default` is 14
//!   bytes, `return` and 8 spaces too, so no column moves. When the value
//!   starts on a later line, `return (` is inserted and `)` after the value,
//!   as a bare `return` would end at the line break.
//! - `export` before a declaration (`export const x = 1`) is blanked out;
//!   the declaration stays. `export type { .. }` is blanked out.
//! - `export { .. }`, `export * from`, `export =` are errors: they have no
//!   meaning without a module system.
//! - A trailing expression statement gets `return ` before it.
//!
//! Every edit keeps line breaks, so lines stay the user's; inserted text is
//! recorded in a [`Shifts`].

use oxc_allocator::Allocator;
use oxc_ast::ast::{ExportDefaultDeclarationKind, ImportDeclaration, ImportDeclarationSpecifier, Statement};
use oxc_parser::{ParseOptions, Parser};
use oxc_span::{GetSpan, SourceType};

use super::javascript::RETURN;
use super::position::{Insert, Shifts, char_column, line_col};
use super::{SyntaxError, describe};

/// The program after its module syntax was edited.
#[derive(Debug)]
pub(super) struct Edited {
    pub text: String,
    pub shifts: Shifts,
    /// An import or export was edited (the text may now be plain JavaScript).
    pub changed_syntax: bool,
    /// The tools the program calls by name, from this parse.
    pub uses: Vec<super::ToolUse>,
}

/// Why the module path refused a program.
#[derive(Debug)]
pub(super) enum Refusal {
    /// It does not parse as a TypeScript module.
    Parse(SyntaxError),
    /// It parses, but uses module syntax a program cannot have.
    Module(SyntaxError),
}

/// One change to the text, at a byte offset of the original.
#[derive(Debug)]
enum Edit {
    /// Replace `[start, end)` by spaces (line breaks kept), with `word` written
    /// over its first bytes.
    Blank { start: u32, end: u32, word: &'static str },
    /// Insert text before `at`.
    Insert { at: u32, text: &'static str },
}

/// The source type of the module parse.
pub(super) fn source_type() -> SourceType {
    SourceType::ts().with_module(true)
}

/// The parse options of the module parse: top-level `return` is allowed,
/// as the program is a function body.
pub(super) fn parse_options() -> ParseOptions {
    ParseOptions { allow_return_outside_function: true, ..ParseOptions::default() }
}

/// The program of the user's text `user` parsed as a TypeScript module in
/// `arena`, as a failed run's position is looked up (throw_site.rs,
/// fault_site.rs); `None` when it does not parse without errors.
pub(super) fn parse_clean<'a>(arena: &'a Allocator, user: &'a str) -> Option<oxc_ast::ast::Program<'a>> {
    let parsed = Parser::new(arena, user, source_type()).with_options(parse_options()).parse();
    (!parsed.panicked && parsed.diagnostics.errors().next().is_none()).then_some(parsed.program)
}

/// Parses `body` as a TypeScript module and edits its module syntax.
///
/// Errors: a parse error, or module syntax a program cannot have, in the
/// user's coordinates.
pub(super) fn edit(arena: &Allocator, body: &str) -> Result<Edited, Refusal> {
    let error = |message: String, offset: u32| {
        let (line, col) = line_col(body, offset);
        SyntaxError { message, line, column: char_column(body, line, col) }
    };
    let parsed = Parser::new(arena, body, source_type()).with_options(parse_options()).parse();
    if let Some(d) = parsed.diagnostics.errors().next() {
        return Err(Refusal::Parse(error(describe(d), d.labels.first().map_or(0, |l| l.offset()))));
    }
    let mut edits = Vec::new();
    let statements = &parsed.program.body;
    for statement in statements.iter() {
        if let Err((message, offset)) = statement_edits(body, statement, &mut edits) {
            return Err(Refusal::Module(error(message, offset)));
        }
    }
    let changed_syntax = !edits.is_empty();
    if let Some(Statement::ExpressionStatement(last)) = statements.last() {
        edits.push(Edit::Insert { at: last.span.start, text: RETURN });
    }
    let mut finder = super::tool_uses::Finder::new(0);
    oxc_ast_visit::Visit::visit_program(&mut finder, &parsed.program);
    let mut edited = apply(body, edits, changed_syntax);
    edited.uses = finder.finish(body);
    Ok(edited)
}

/// Adds to `edits` those `statement` of `body` needs (none unless it is an
/// import or an export). `Err`: module syntax a program cannot have, what
/// to say and at which byte offset.
fn statement_edits(
    body: &str,
    statement: &Statement<'_>,
    edits: &mut Vec<Edit>,
) -> Result<(), (String, u32)> {
    match statement {
        Statement::ImportDeclaration(d) => {
            if !types_only(d) {
                return Err((
                    format!(
                        "`import` is not available: programs have no module loader, so `{}` cannot be \
                         loaded. Call tools with `await tools.call(name, args)` (or `tools.<name>(args)`) \
                         instead; `import type` is fine in TypeScript",
                        d.source.value
                    ),
                    d.span.start,
                ));
            }
            edits.push(Edit::Blank { start: d.span.start, end: d.span.end, word: "" });
        }
        Statement::ExportDefaultDeclaration(d) => {
            let value = d.declaration.span().start;
            if matches!(d.declaration, ExportDefaultDeclarationKind::TSInterfaceDeclaration(_)) {
                edits.push(Edit::Blank { start: d.span.start, end: value, word: "" });
            } else if body[d.span.start as usize..value as usize].contains('\n') {
                edits.push(Edit::Insert { at: d.span.start, text: "return (" });
                edits.push(Edit::Blank { start: d.span.start, end: value, word: "" });
                edits.push(Edit::Insert { at: d.declaration.span().end, text: ")" });
            } else {
                edits.push(Edit::Blank { start: d.span.start, end: value, word: "return" });
            }
        }
        Statement::ExportDeclaration(d) => {
            edits.push(Edit::Blank {
                start: d.span.start,
                end: d.span.start + "export".len() as u32,
                word: "",
            });
        }
        Statement::ExportNamedDeclaration(d) if d.export_kind.is_type() => {
            edits.push(Edit::Blank { start: d.span.start, end: d.span.end, word: "" });
        }
        Statement::ExportFromDeclaration(d) if d.export_kind.is_type() => {
            edits.push(Edit::Blank { start: d.span.start, end: d.span.end, word: "" });
        }
        Statement::ExportAllDeclaration(d) if d.export_kind.is_type() => {
            edits.push(Edit::Blank { start: d.span.start, end: d.span.end, word: "" });
        }
        Statement::ExportNamedDeclaration(_)
        | Statement::ExportFromDeclaration(_)
        | Statement::ExportAllDeclaration(_)
        | Statement::TSExportAssignment(_)
        | Statement::TSNamespaceExportDeclaration(_) => {
            return Err((
                "this `export` needs a module system, and programs have none: give the program's \
                 value with `return <value>` or `export default <value>` (`export` before a \
                 declaration is allowed and ignored)"
                    .to_owned(),
                statement.span().start,
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Whether import `d` imports types only (`import type`, or every
/// specifier a `type` one), so it can be blanked out.
fn types_only(d: &ImportDeclaration<'_>) -> bool {
    d.import_kind.is_type() || d.specifiers.as_ref().is_some_and(|s| !s.is_empty() && s.iter().all(of_a_type))
}

/// Whether import specifier `s` imports a type (`import { type T }`).
fn of_a_type(s: &ImportDeclarationSpecifier<'_>) -> bool {
    matches!(s, ImportDeclarationSpecifier::ImportSpecifier(s) if s.import_kind.is_type())
}

/// Applies `edits` (in statement order, so by offset) to `body`.
fn apply(body: &str, mut edits: Vec<Edit>, changed_syntax: bool) -> Edited {
    // Inserts at an offset go before a blank starting there.
    edits.sort_by_key(|e| match e {
        Edit::Insert { at, .. } => (*at, 0),
        Edit::Blank { start, .. } => (*start, 1),
    });
    let mut text = String::with_capacity(body.len() + 16);
    let mut shifts = Shifts::default();
    let mut done = 0usize;
    for edit in &edits {
        match edit {
            Edit::Insert { at, text: inserted } => {
                text.push_str(&body[done..*at as usize]);
                done = *at as usize;
                let (line, col) = line_col(&text, text.len() as u32);
                shifts.push(Insert { line, at: col, len: inserted.len() as u32 });
                text.push_str(inserted);
            }
            Edit::Blank { start, end, word } => {
                text.push_str(&body[done..*start as usize]);
                let blanked = &body[*start as usize..*end as usize];
                text.push_str(word);
                for c in blanked[word.len().min(blanked.len())..].chars() {
                    match c {
                        '\n' | '\r' => text.push(c),
                        // Keep the byte length, so byte columns stay.
                        c => (0..c.len_utf8()).for_each(|_| text.push(' ')),
                    }
                }
                done = *end as usize;
            }
        }
    }
    text.push_str(&body[done..]);
    Edited { text, shifts, changed_syntax, uses: Vec::new() }
}
