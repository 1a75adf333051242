//! What the program was doing where it failed, read from its text: the
//! expression at an error's position and, where the text alone says so,
//! what that expression holds (a tool call's promise, its result, or a
//! part of the result's content).
//!
//! QuickJS's own messages name neither (`TypeError: not a function`), so
//! the engine asks here when a run fails, and words a hint from the answer.
//! Everything here is a reading of the text that cannot be wrong about the
//! program: where the text leaves a doubt (a chained call `f(x)(y)`, two
//! members of the same name around one position, a variable assigned more
//! than once, a `tools` the program declared itself), the answer is
//! `None` rather than a guess. The text is parsed only when a run fails,
//! within the bounds of normalising (`speculation.rs`, the large stack).

use oxc_allocator::Allocator;
use oxc_ast::AstKind;
use oxc_ast::ast::{
    Argument, BindingPattern, CallExpression, Expression, IdentifierReference, ObjectPropertyKind,
    PropertyKey, VariableDeclarator,
};
use oxc_semantic::{Semantic, SemanticBuilder};
use oxc_span::{GetSpan, Span};

use super::PositionMap;
use super::position::char_column;

/// What kind of failure to look for at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// `TypeError: not a function`: the call whose callee is at the
    /// position.
    NotAFunction,
    /// `TypeError: value is not iterable`: the `for ... of` or spread whose
    /// iterated value is at the position.
    NotIterable,
    /// `TypeError: cannot read property 'NAME' of undefined` (or `null`):
    /// the one member access `.NAME` around the position.
    PropertyOfNothing {
        /// The property read.
        property: String,
    },
    /// A `SyntaxError` thrown by `JSON.parse`: the `JSON.parse(...)` call
    /// around the position.
    JsonParse,
}

/// The expression a failure was about, as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Site {
    /// Its text (white space runs made one space, long texts cut with
    /// `…`): the callee that was not a function, the value that was not
    /// iterable, the value whose property was read, `JSON.parse`'s
    /// argument.
    pub expression: String,
    /// When the expression is a member access `OBJECT.NAME`: the object's
    /// text and the name.
    pub member: Option<(String, String)>,
    /// What the object of [`Site::member`] (or, without one, the expression
    /// itself) is known to hold.
    pub origin: Option<Origin>,
}

/// What an expression holds, as its text says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The promise of a tool call that was not awaited.
    Promise(ToolCall),
    /// The result of an awaited tool call: `{content, metadata,
    /// truncated}`.
    Result(ToolCall),
    /// A part of an awaited call's `content`: the keys from `content` down
    /// (empty for `content` itself).
    Content(ToolCall, Vec<String>),
}

/// A call of a tool as the program's text makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The tool's name, when the text says it (`tools.read(...)`,
    /// `tools.call("read", ...)`; `tools.search` is `tool_search`).
    pub tool: Option<String>,
    /// The call's text (cut as [`Site::expression`]).
    pub text: String,
    /// The arguments, when they are an object literal with only named
    /// keys: each key with its value when that is a string literal.
    pub arguments: Option<Vec<(String, Option<String>)>>,
}

/// Longest expression text kept, in characters.
const TEXT_CHARS: usize = 60;
/// Most bindings followed from a name to what it holds.
const DEPTH: u32 = 16;

impl PositionMap {
    /// The expression that `fault` at the user's (`line`, `column`) was
    /// about (1-based, column in characters, as
    /// [`PositionMap::user_position`] gives), or `None` when the text does
    /// not say for sure or does not parse.
    pub fn fault_site(&self, fault: &Fault, line: u32, column: u32) -> Option<Site> {
        let offset = super::throw_site::byte_offset(&self.user, line, column)?;
        with_semantic(&self.user, |text, semantic| find(text, semantic, fault, offset))
    }

    /// Where the program calls `tool`, (line, column) as
    /// [`PositionMap::fault_site`] takes them, when its text calls it in
    /// exactly one place and names every tool it calls (no
    /// `tools.call(name)` with a computed name, no `tools` passed around
    /// or indexed): a `ToolError` that reached the program where no frame
    /// of it was on the stack (a call that ended later) was thrown there.
    pub fn only_call_site(&self, tool: &str) -> Option<(u32, u32)> {
        let start = with_semantic(&self.user, |text, semantic| only_call_of(text, semantic, tool))?;
        let (line, col) = super::position::line_col(&self.user, start);
        Some((line, char_column(&self.user, line, col)))
    }
}

/// Runs `f` on `user` parsed (as `throw_site.rs` parses it) with its
/// scopes; `None` when it does not parse or is over the parse bounds.
fn with_semantic<R: Send>(user: &str, f: impl Fn(&str, &Semantic<'_>) -> Option<R> + Sync) -> Option<R> {
    super::speculation::check(user).ok()?;
    let run = || {
        let arena = Allocator::default();
        let program = arena.alloc(super::module::parse_clean(&arena, user)?);
        let semantic = SemanticBuilder::new().with_build_nodes(true).build(program).semantic;
        f(user, &semantic)
    };
    if super::needs_large_stack(user) { super::on_large_stack(run).ok()?? } else { run() }
}

/// [`PositionMap::fault_site`] on the parsed text.
fn find(text: &str, semantic: &Semantic<'_>, fault: &Fault, offset: u32) -> Option<Site> {
    let reader = Reader { text, semantic };
    match fault {
        Fault::NotAFunction => reader.not_a_function(offset),
        Fault::NotIterable => reader.not_iterable(offset),
        Fault::PropertyOfNothing { property } => reader.property_of_nothing(property, offset),
        Fault::JsonParse => reader.json_parse(offset),
    }
}

/// Reads sites and origins out of one parsed text.
struct Reader<'s, 'a> {
    text: &'s str,
    semantic: &'s Semantic<'a>,
}

impl<'a> Reader<'_, 'a> {
    /// The innermost call holding `offset`, unless another call of the
    /// same function holds it too: QuickJS places a call where it recorded
    /// a position last, in its callee or its arguments, so in
    /// `f(a.b())` or `a.b(1)(2)` the position alone does not tell the
    /// calls apart.
    fn not_a_function(&self, offset: u32) -> Option<Site> {
        let mut calls: Vec<(&'a Expression<'a>, Span)> = Vec::new();
        let mut functions: Vec<Span> = Vec::new();
        for node in self.semantic.nodes().iter() {
            match node.kind() {
                AstKind::CallExpression(c) => calls.push((&c.callee, c.span)),
                AstKind::NewExpression(c) => calls.push((&c.callee, c.span)),
                AstKind::TaggedTemplateExpression(t) => calls.push((&t.tag, t.span)),
                AstKind::Function(f) => functions.push(f.span),
                AstKind::ArrowFunctionExpression(f) => functions.push(f.span),
                _ => {}
            }
        }
        calls.retain(|(_, span)| span.start <= offset && offset < span.end);
        let (callee, call) = *calls.iter().min_by_key(|(_, span)| span.size())?;
        // A function between an outer call and this one: the outer call
        // is not running in the frame that failed.
        let apart = |outer: Span| {
            functions.iter().any(|f| {
                outer.start <= f.start && f.end <= outer.end && f.start <= call.start && call.end <= f.end
            })
        };
        if calls.iter().any(|&(_, other)| other != call && !apart(other)) {
            return None;
        }
        let inner = callee.get_inner_expression();
        if matches!(inner, Expression::CallExpression(_) | Expression::NewExpression(_)) {
            return None;
        }
        Some(self.site(inner))
    }

    /// The `for ... of` or spread whose iterated value holds `offset`
    /// (the innermost).
    fn not_iterable(&self, offset: u32) -> Option<Site> {
        let iterated = self
            .semantic
            .nodes()
            .iter()
            .filter_map(|node| match node.kind() {
                AstKind::ForOfStatement(f) => Some(&f.right),
                AstKind::SpreadElement(s) => Some(&s.argument),
                _ => None,
            })
            .filter(|e| e.span().start <= offset && offset < e.span().end)
            .min_by_key(|e| e.span().size())?;
        let inner = iterated.get_inner_expression();
        Some(Site { expression: self.text_of(inner.span()), member: None, origin: self.origin(inner, 0) })
    }

    /// The one member access `.property` whose text holds `offset`; the
    /// site is its object, the value that was `undefined` or `null`.
    fn property_of_nothing(&self, property: &str, offset: u32) -> Option<Site> {
        let mut found = self.semantic.nodes().iter().filter_map(|node| match node.kind() {
            AstKind::StaticMemberExpression(m) if m.property.name == property => Some((&m.object, m.span)),
            AstKind::ComputedMemberExpression(m)
                if m.static_property_name().is_some_and(|p| p == property) =>
            {
                Some((&m.object, m.span))
            }
            _ => None,
        });
        let mut holding = found.by_ref().filter(|(_, span)| span.start <= offset && offset < span.end);
        let (object, _) = holding.next()?;
        if holding.next().is_some() {
            return None;
        }
        Some(self.site(object.get_inner_expression()))
    }

    /// The innermost `JSON.parse(...)` call holding `offset`; the site is
    /// its first argument.
    fn json_parse(&self, offset: u32) -> Option<Site> {
        let call = self
            .semantic
            .nodes()
            .iter()
            .filter_map(|node| match node.kind() {
                AstKind::CallExpression(c) if c.callee.is_specific_member_access("JSON", "parse") => Some(c),
                _ => None,
            })
            .filter(|c| c.span.start <= offset && offset < c.span.end)
            .min_by_key(|c| c.span.size())?;
        // `JSON.parse(JSON.parse(x))`: the position does not tell them apart.
        let nested = self.semantic.nodes().iter().any(|node| {
            matches!(node.kind(), AstKind::CallExpression(c) if c.span != call.span
                && c.callee.is_specific_member_access("JSON", "parse")
                && c.span.start <= call.span.start && call.span.end <= c.span.end)
        });
        if nested {
            return None;
        }
        let argument = call.arguments.first()?.as_expression()?.get_inner_expression();
        Some(Site {
            expression: self.text_of(argument.span()),
            member: None,
            origin: self.origin(argument, 0),
        })
    }

    /// The site of `expression`: with its object's origin when it is a
    /// member access with a name, else with its own.
    fn site(&self, expression: &'a Expression<'a>) -> Site {
        let text = self.text_of(expression.span());
        if let Some(member) = expression.as_member_expression()
            && let Some(name) = member.static_property_name()
        {
            let object = member.object().get_inner_expression();
            return Site {
                expression: text,
                member: Some((self.text_of(object.span()), name.to_owned())),
                origin: self.origin(object, 0),
            };
        }
        Site { expression: text, member: None, origin: self.origin(expression, 0) }
    }

    /// What `expression` holds, when its text says: a tool call (a
    /// promise), `await` of one (its result), `.content` of a result and
    /// the keys below it, or a name bound once to one of these.
    fn origin(&self, expression: &'a Expression<'a>, depth: u32) -> Option<Origin> {
        if depth > DEPTH {
            return None;
        }
        match expression.get_inner_expression() {
            Expression::AwaitExpression(a) => match self.origin(&a.argument, depth + 1)? {
                Origin::Promise(call) => Some(Origin::Result(call)),
                _ => None,
            },
            Expression::CallExpression(c) => self.tool_call(c).map(Origin::Promise),
            Expression::Identifier(id) => {
                let symbol = self.semantic.scoping().get_reference(id.reference_id.get()?).symbol_id()?;
                self.bound(symbol, depth)
            }
            e => {
                let member = e.as_member_expression()?;
                let name = member.static_property_name()?;
                below(self.origin(member.object(), depth + 1)?, name)
            }
        }
    }

    /// What the variable `symbol` holds: it is declared once, never
    /// assigned again, as a name (`const r = ...`) or as one key of an
    /// object pattern (`const {content} = ...`).
    fn bound(&self, symbol: oxc_semantic::SymbolId, depth: u32) -> Option<Origin> {
        let scoping = self.semantic.scoping();
        if scoping.symbol_is_mutated(symbol) || !scoping.symbol_redeclarations(symbol).is_empty() {
            return None;
        }
        let AstKind::VariableDeclarator(VariableDeclarator { id, init: Some(init), .. }) =
            self.semantic.symbol_declaration(symbol).kind()
        else {
            return None;
        };
        match id {
            BindingPattern::BindingIdentifier(b) if b.symbol_id.get() == Some(symbol) => {
                self.origin(init, depth + 1)
            }
            BindingPattern::ObjectPattern(pattern) => {
                let key = pattern.properties.iter().find_map(|p| match &p.value {
                    BindingPattern::BindingIdentifier(b)
                        if b.symbol_id.get() == Some(symbol) && !p.computed =>
                    {
                        p.key.static_name()
                    }
                    _ => None,
                })?;
                below(self.origin(init, depth + 1)?, &key)
            }
            _ => None,
        }
    }

    /// The call `c` when it is `tools.NAME(args)`, `tools.call("NAME",
    /// args)` or `tools.search(...)` on the global `tools`.
    fn tool_call(&self, c: &'a CallExpression<'a>) -> Option<ToolCall> {
        let Expression::StaticMemberExpression(m) = c.callee.get_inner_expression() else { return None };
        if !self.is_global_tools(&m.object) {
            return None;
        }
        let (tool, arguments) = match m.property.name.as_str() {
            "call" => (string_literal(c.arguments.first()), c.arguments.get(1)),
            "search" => (Some("tool_search".to_owned()), None),
            name => (Some(name.to_owned()), c.arguments.first()),
        };
        Some(ToolCall { tool, text: self.text_of(c.span), arguments: arguments.and_then(literal_keys) })
    }

    /// `expression` is the identifier `tools`, not declared by the program.
    fn is_global_tools(&self, expression: &Expression<'a>) -> bool {
        let Expression::Identifier(id) = expression.get_inner_expression() else { return false };
        id.name == "tools" && self.is_global(id)
    }

    /// `id` names a global: nothing in the program declares it.
    fn is_global(&self, id: &IdentifierReference<'_>) -> bool {
        id.reference_id.get().is_some_and(|r| self.semantic.scoping().get_reference(r).symbol_id().is_none())
    }

    /// The text of `span`, white space runs made one space, cut at
    /// [`TEXT_CHARS`] characters.
    fn text_of(&self, span: Span) -> String {
        let raw = self.text.get(span.start as usize..span.end as usize).unwrap_or_default();
        let one_line = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() <= TEXT_CHARS {
            return one_line;
        }
        let cut: String = one_line.chars().take(TEXT_CHARS - 1).collect();
        format!("{cut}…")
    }
}

/// What `.name` of a value of `origin` holds: a result's `content`, or a
/// key below it.
fn below(origin: Origin, name: &str) -> Option<Origin> {
    match origin {
        Origin::Result(call) if name == "content" => Some(Origin::Content(call, Vec::new())),
        Origin::Content(call, mut path) => {
            path.push(name.to_owned());
            Some(Origin::Content(call, path))
        }
        _ => None,
    }
}

/// The value of a string literal argument.
fn string_literal(argument: Option<&Argument<'_>>) -> Option<String> {
    match argument?.as_expression()?.get_inner_expression() {
        Expression::StringLiteral(s) => Some(s.value.to_string()),
        _ => None,
    }
}

/// The keys of an object literal argument with only named keys, each with
/// its value when that is a string literal.
fn literal_keys(argument: &Argument<'_>) -> Option<Vec<(String, Option<String>)>> {
    let Expression::ObjectExpression(object) = argument.as_expression()?.get_inner_expression() else {
        return None;
    };
    let mut keys = Vec::new();
    for property in &object.properties {
        let ObjectPropertyKind::ObjectProperty(p) = property else { return None };
        if p.computed && !matches!(p.key, PropertyKey::StringLiteral(_)) {
            return None;
        }
        let value = match p.value.get_inner_expression() {
            Expression::StringLiteral(s) => Some(s.value.to_string()),
            _ => None,
        };
        keys.push((p.key.static_name()?.into_owned(), value));
    }
    Some(keys)
}

/// The start of the one call of `tool` in the text, when every use of the
/// global `tools` is a call naming its tool.
fn only_call_of(text: &str, semantic: &Semantic<'_>, tool: &str) -> Option<u32> {
    let reader = Reader { text, semantic };
    let nodes = semantic.nodes();
    let mut found = None;
    for node in nodes.iter() {
        let AstKind::IdentifierReference(id) = node.kind() else { continue };
        if id.name != "tools" || !reader.is_global(id) {
            continue;
        }
        // `tools.NAME` as the callee of a call, and nothing else.
        let member = nodes.parent_node(node.id());
        let AstKind::StaticMemberExpression(m) = member.kind() else { return None };
        let AstKind::CallExpression(call) = nodes.parent_kind(member.id()) else { return None };
        if call.callee.span() != m.span {
            return None;
        }
        if reader.tool_call(call)?.tool? == tool {
            if found.is_some() {
                return None;
            }
            found = Some(call.span.start);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{Fault, Origin, Site, ToolCall};
    use crate::{Program, normalise};

    /// The site of `fault` at the first character of `at` in `src` (one
    /// line).
    fn site(src: &str, fault: Fault, at: &str) -> Option<Site> {
        let positions = normalise(&Program::new(src)).unwrap().positions;
        let column = src[..src.find(at).unwrap()].chars().count() as u32 + 1;
        positions.fault_site(&fault, 1, column)
    }

    fn call(tool: &str, text: &str, arguments: &[(&str, Option<&str>)]) -> ToolCall {
        ToolCall {
            tool: Some(tool.to_owned()),
            text: text.to_owned(),
            arguments: Some(arguments.iter().map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned))).collect()),
        }
    }

    #[test]
    fn a_callee_is_named_with_what_its_object_holds() {
        let read = call("read_file", "tools.read_file({path: \"a\"})", &[("path", Some("a"))]);
        let src = "const r = await tools.read_file({path: \"a\"}); return r.content.trim();";
        let s = site(src, Fault::NotAFunction, ".trim").unwrap();
        assert_eq!(s.expression, "r.content.trim");
        assert_eq!(s.member, Some(("r.content".into(), "trim".into())));
        assert_eq!(s.origin, Some(Origin::Content(read.clone(), vec![])));
        // The result itself, destructuring, and a key below content.
        let src = "const r = await tools.read_file({path: \"a\"}); r.map(x => x);";
        assert_eq!(
            site(src, Fault::NotAFunction, ".map").unwrap().origin,
            Some(Origin::Result(read.clone()))
        );
        let src = "const {content} = await tools.read_file({path: \"a\"}); content.items.map(x => x);";
        let s = site(src, Fault::NotAFunction, ".map").unwrap();
        assert_eq!(s.origin, Some(Origin::Content(read.clone(), vec!["items".into()])));
        // A promise not awaited.
        let src = "const p = tools.read_file({path: \"a\"}); p.content.trim();";
        let s = site(src, Fault::PropertyOfNothing { property: "trim".into() }, "p.content").unwrap();
        assert_eq!((s.expression.as_str(), s.origin), ("p.content", Some(Origin::Promise(read))));
    }

    #[test]
    fn doubt_gives_no_site_or_no_origin() {
        // A chained call, a call in another's arguments: QuickJS may put
        // both calls at one place.
        assert_eq!(site("const a = {b() { return 1 }}; a.b(1)(2);", Fault::NotAFunction, ".b"), None);
        assert_eq!(site("const a = {}; f(a.b(1));", Fault::NotAFunction, ".b"), None);
        // ... but not a call in a function passed to another.
        let s = site("[1].forEach(x => x.go());", Fault::NotAFunction, ".go").unwrap();
        assert_eq!(s.expression, "x.go");
        // Where QuickJS puts a call with a function argument.
        let s = site("const r = {}; r.map(f => f);", Fault::NotAFunction, "f =>").unwrap();
        assert_eq!(s.expression, "r.map");
        // Assigned again; a `tools` of the program's own; a computed name.
        for src in [
            "let r = await tools.read({path: \"a\"}); r = 1; r.map(x => x);",
            "const tools = {read: async () => 1}; const r = await tools.read({}); r.map(x => x);",
        ] {
            let s = site(src, Fault::NotAFunction, ".map").unwrap();
            assert_eq!((s.expression.as_str(), s.origin), ("r.map", None), "{src}");
        }
        let src = "const n = \"read\"; const r = await tools.call(n, {}); r.map(x => x);";
        let s = site(src, Fault::NotAFunction, ".map").unwrap();
        assert!(matches!(s.origin, Some(Origin::Result(ToolCall { tool: None, .. }))), "{s:?}");
        // Two reads of `.c` around one position.
        assert_eq!(
            site("const a = {}; a.c.c;", Fault::PropertyOfNothing { property: "c".into() }, "a.c"),
            None
        );
    }

    #[test]
    fn iterated_values_and_json_parse_arguments_are_found() {
        let list = call("list", "tools.list()", &[]);
        let list = ToolCall { arguments: None, ..list };
        let src = "const r = await tools.list(); for (const x of r) {}";
        let s = site(src, Fault::NotIterable, "r) {}").unwrap();
        assert_eq!((s.expression.as_str(), s.origin), ("r", Some(Origin::Result(list.clone()))));
        let src = "const r = await tools.list(); return [...r];";
        assert_eq!(site(src, Fault::NotIterable, "r]").unwrap().origin, Some(Origin::Result(list)));
        let src = "const r = await tools.read({path: \"a.json\"}); return JSON.parse(r.content);";
        let s = site(src, Fault::JsonParse, "r.content").unwrap();
        let read = call("read", "tools.read({path: \"a.json\"})", &[("path", Some("a.json"))]);
        assert_eq!((s.expression.as_str(), s.origin), ("r.content", Some(Origin::Content(read, vec![]))));
    }

    #[test]
    fn the_only_call_of_a_tool_is_found_when_every_call_names_its_tool() {
        let at =
            |src: &str, tool: &str| normalise(&Program::new(src)).unwrap().positions.only_call_site(tool);
        let src = "for (const p of [\"a\", \"b\"]) {\n  await tools.read({path: p});\n}";
        assert_eq!(at(src, "read"), Some((2, 9)));
        assert_eq!(at(src, "write"), None);
        assert_eq!(at("await tools.read({}); await tools.read({});", "read"), None, "two calls");
        assert_eq!(at("await tools.read({}); await tools.call(t, {});", "read"), None, "a computed name");
        assert_eq!(at("await tools.read({}); const t = tools;", "read"), None, "tools passed around");
        assert_eq!(at("await tools.read({}); await tools.call(\"write\", {});", "read"), Some((1, 7)));
    }
}
