//! The fast path: the program parsed as JavaScript inside the wrapper it
//! runs in.
//!
//! The parser sees exactly the text QuickJS will evaluate (a sloppy-mode
//! script, as QuickJS runs it), so parse and runtime agree on every rule.
//! The parse must give one statement, a call of the wrapper's async arrow
//! whose body ends at the wrapper's closing brace: a program that closes
//! the wrapper early (`throw x })(); (async () => { return 1`) gives another
//! shape and is refused.

use oxc_allocator::Allocator;
use oxc_ast::ast::{ArrowFunctionBody, Expression, FunctionBody, Statement};
use oxc_parser::{ParseOptions, Parser};
use oxc_span::SourceType;

use super::position::{Insert, Shifts, line_col};
use super::{SyntaxError, WRAP_PREFIX, WRAP_SUFFIX, describe};

/// The text inserted before a trailing expression statement.
pub(super) const RETURN: &str = "return ";

/// Wraps a JavaScript program, with `return ` before a trailing expression
/// statement. Returns the script and its insertions.
///
/// Errors: the parse error in the user's coordinates, or `None` when the
/// text parses but leaves the wrapper.
pub(super) fn wrap(arena: &Allocator, body: &str) -> Result<Wrapped, Option<SyntaxError>> {
    wrap_with(arena, body, true)
}

/// A wrapped program: the script, its insertions, and the tools the
/// program calls by name (found by [`wrap`] only).
pub(super) struct Wrapped {
    pub script: String,
    pub shifts: Shifts,
    pub uses: Vec<super::ToolUse>,
}

/// As [`wrap`], without looking for a trailing expression (the module path
/// already inserted its `return`).
pub(super) fn wrap_as_is(arena: &Allocator, body: &str) -> Result<Wrapped, Option<SyntaxError>> {
    wrap_with(arena, body, false)
}

/// [`wrap`] (`full`: a trailing expression gets `return `, and the tools
/// called by name are found) or [`wrap_as_is`].
fn wrap_with(arena: &Allocator, body: &str, full: bool) -> Result<Wrapped, Option<SyntaxError>> {
    let mut script = String::with_capacity(WRAP_PREFIX.len() + body.len() + WRAP_SUFFIX.len() + RETURN.len());
    script.push_str(WRAP_PREFIX);
    script.push_str(body);
    script.push_str(WRAP_SUFFIX);
    let mut uses = Vec::new();
    let insert_at = {
        let options = ParseOptions { preserve_parens: true, ..ParseOptions::default() };
        let parsed = Parser::new(arena, &script, SourceType::script()).with_options(options).parse();
        if let Some(d) = parsed.diagnostics.errors().next() {
            let offset = d.labels.first().map_or(0, |l| l.offset());
            let user = (offset as usize).saturating_sub(WRAP_PREFIX.len()).min(body.len());
            let (line, col) = line_col(body, user as u32);
            let col = super::position::char_column(body, line, col);
            return Err(Some(SyntaxError { message: describe(d), line, column: col }));
        }
        if parsed.panicked {
            return Err(None);
        }
        let Some(function) = wrapper_body(&parsed.program.body, script.len()) else {
            return Err(None);
        };
        // `import` and `export` parse here, but only a module may have them:
        // the module path edits or refuses them.
        if function.statements.iter().any(Statement::is_module_declaration) {
            return Err(None);
        }
        if full {
            let mut finder = super::tool_uses::Finder::new(WRAP_PREFIX.len() as u32);
            oxc_ast_visit::Visit::visit_function_body(&mut finder, function);
            uses = finder.finish(body);
        }
        match function.statements.last() {
            Some(Statement::ExpressionStatement(last)) if full => Some(last.span.start),
            _ => None,
        }
    };
    let mut shifts = Shifts::default();
    shifts.push(Insert { line: 1, at: 0, len: WRAP_PREFIX.len() as u32 });
    if let Some(at) = insert_at {
        let (line, col) = line_col(&script, at);
        script.insert_str(at as usize, RETURN);
        shifts.push(Insert { line, at: col, len: RETURN.len() as u32 });
    }
    Ok(Wrapped { script, shifts, uses })
}

/// The body of the wrapper's arrow function, if the script is exactly one
/// call of it with the body ending at the wrapper's own closing brace.
fn wrapper_body<'s, 'a>(statements: &'s [Statement<'a>], script_len: usize) -> Option<&'s FunctionBody<'a>> {
    let [Statement::ExpressionStatement(only)] = statements else { return None };
    let Expression::CallExpression(call) = &only.expression else { return None };
    if !call.arguments.is_empty() || call.optional {
        return None;
    }
    let mut callee = &call.callee;
    while let Expression::ParenthesizedExpression(p) = callee {
        callee = &p.expression;
    }
    let Expression::ArrowFunctionExpression(arrow) = callee else { return None };
    let ArrowFunctionBody::FunctionBody(body) = &arrow.body else { return None };
    // The suffix is "\n})()": the body's `}` is the suffix's.
    let closing = (script_len - WRAP_SUFFIX.len() + 2) as u32;
    (arrow.r#async && arrow.params.items.is_empty() && body.span.end == closing).then_some(&**body)
}
