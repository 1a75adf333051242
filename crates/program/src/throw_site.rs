//! The `throw` statement an error position falls in.
//!
//! QuickJS places an error at the last source position it recorded before
//! the error object was made: for `throw new TypeError(`${s.slice(0, 10)}`)`
//! that is the call of `slice` inside the argument, not the `throw`. A
//! position inside a `throw` statement's argument is therefore reported at
//! the statement's start. The user's text is parsed again (only when a run
//! fails) as a TypeScript module that may `return` at its top level, which
//! accepts every program but sloppy-mode oddities (`with`, octal literals);
//! for those the position is left as QuickJS gave it. The parse is held to
//! the same bounds as normalising: a text whose TypeScript parse would
//! backtrack past the bound is not parsed (a JavaScript program may be one:
//! `a<({[b]:1})` is a comparison), and a deeply nested one is parsed on a
//! large stack.

use oxc_allocator::Allocator;
use oxc_ast::ast::ThrowStatement;
use oxc_ast_visit::Visit;

use super::position::{char_column, line_col};

/// The (line, column) of the start of the innermost `throw` statement whose
/// argument holds the user's (`line`, `column`) (1-based, column in
/// characters), or `None` when no argument holds it or `user` does not
/// parse.
pub(crate) fn throw_statement_start(user: &str, line: u32, column: u32) -> Option<(u32, u32)> {
    let offset = byte_offset(user, line, column)?;
    super::speculation::check(user).ok()?;
    let start = if super::needs_large_stack(user) {
        super::on_large_stack(|| throw_containing(user, offset)).ok()??
    } else {
        throw_containing(user, offset)
    }?;
    let (line, col) = line_col(user, start);
    Some((line, char_column(user, line, col)))
}

/// The start of the innermost `throw` statement whose argument holds
/// `offset` in `user`, parsed as a TypeScript module.
fn throw_containing(user: &str, offset: u32) -> Option<u32> {
    let arena = Allocator::default();
    let program = super::module::parse_clean(&arena, user)?;
    let mut finder = Finder { offset, found: None };
    finder.visit_program(&program);
    finder.found
}

/// The byte offset in `text` of (`line`, `column`), both 1-based, the
/// column in characters; `None` past the end of the line or the text.
pub(crate) fn byte_offset(text: &str, line: u32, column: u32) -> Option<u32> {
    let start: usize = text.split_inclusive('\n').take(line.checked_sub(1)? as usize).map(str::len).sum();
    let rest = text.get(start..)?;
    let line_text = rest.split('\n').next()?;
    let within = match line_text.char_indices().nth(column.checked_sub(1)? as usize) {
        Some((at, _)) => at,
        None => return None,
    };
    u32::try_from(start + within).ok()
}

/// Finds the innermost `throw` whose argument spans `offset`.
struct Finder {
    offset: u32,
    found: Option<u32>,
}

impl<'a> Visit<'a> for Finder {
    fn visit_throw_statement(&mut self, it: &ThrowStatement<'a>) {
        use oxc_span::GetSpan as _;
        let argument = it.argument.span();
        if argument.start <= self.offset && self.offset < argument.end {
            // Visited outer first: an inner throw (in a function inside
            // the argument) replaces it.
            self.found = Some(it.span.start);
        }
        oxc_ast_visit::walk::walk_throw_statement(self, it);
    }
}

#[cfg(test)]
mod tests {
    use super::throw_statement_start as at;

    #[test]
    fn a_position_in_a_throws_argument_moves_to_the_throw() {
        let src = "const s = \"abcdefghijklmnop\";\n  throw new TypeError(`${s.slice(0, 10)}`);\n";
        // `slice` is at line 2, column 28.
        assert_eq!(at(src, 2, 28), Some((2, 3)));
        assert_eq!(at(src, 2, 13), Some((2, 3)), "the constructor too");
        assert_eq!(at(src, 1, 11), None, "outside any throw");
        assert_eq!(at(src, 2, 3), None, "the throw keyword itself is not in the argument");
    }

    #[test]
    fn typescript_top_level_return_and_inner_throws_are_handled() {
        let src = "const n: number = 1;\nif (n) { throw f(() => { throw new Error(g()) }); }\nreturn n;";
        assert_eq!(at(src, 2, 42), Some((2, 26)), "the inner throw wins");
        assert_eq!(at(src, 2, 16), Some((2, 10)));
        // Characters, not bytes, on both sides.
        assert_eq!(at("é; throw new Error(x())", 1, 20), Some((1, 4)));
        // Text that does not parse leaves the position alone.
        assert_eq!(at("throw (", 1, 7), None);
    }
}
