//! The tool calls a program names literally, found in the parse that
//! normalising already made (no second parse): what the engine's admission
//! check compares with the catalog before the program's first call
//! (docs/RECEIPTS.md, "Admission").
//!
//! A call is taken when its tool's name is written out:
//! `tools.NAME(args)`, `tools["NAME"](args)` and `tools.call("NAME", args)`
//! (a template without `${}` counts as a string). Its arguments are known
//! as far as they are literal: an object literal's keys, and each key's
//! value when it is JSON written out (strings, numbers, `true`, `false`,
//! `null`, arrays and objects of those). Anything computed is left to the
//! gate, part by part:
//!
//! - a name that is not a literal (`tools[name]`, `tools.call(n, ..)`) is
//!   not taken;
//! - arguments that are not an object literal (a variable, a spread
//!   argument) are [`Arguments::Unknown`];
//! - a spread or a computed key in the object makes it
//!   [`ArgumentObject::open`] (it may hold keys not listed), and a value
//!   that is not literal JSON (`path: p`) is `None`: its key is there, its
//!   value unknown; a key written before a spread may be overwritten by
//!   it, so its value is unknown too;
//! - a getter, setter, method or `__proto__:` makes the whole object
//!   [`Arguments::Unknown`].
//!
//! Nothing is taken from a program that may not mean the engine's `tools`
//! by that name: one that declares a binding named `tools` anywhere, uses
//! `with`, or calls `eval` directly (which may declare one). A call whose
//! failure the program handles where it makes it is taken with
//! [`ToolUse::handled`] set: inside the block of a `try` that has a
//! `catch`, the object of a `.catch(..)` or of a `.then(..)` with a
//! rejection handler, or inside `Promise.allSettled(..)` or
//! `Promise.any(..)` (a program may probe for a tool that way).

use oxc_ast::ast::{
    Argument, ArrayExpressionElement, BindingIdentifier, CallExpression, Expression, ObjectExpression,
    ObjectPropertyKind, PropertyKey, PropertyKind, TryStatement, UnaryOperator, WithStatement,
};
use oxc_ast_visit::Visit;
use serde_json::{Map, Value};

/// One call of a tool named literally in the program.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolUse {
    /// The tool's name as written (`read`, `mcp__srv__tool`).
    pub tool: String,
    /// Where the name is written in the user's program: line 1-based.
    pub line: u32,
    /// Column 1-based, in characters.
    pub column: u32,
    /// The call's arguments, as far as they are literal.
    pub arguments: Arguments,
    /// The program handles a failure of this call where it makes it
    /// (module docs): the call may be a probe, and a refusal is the
    /// program's to catch.
    pub handled: bool,
}

/// A literal call's arguments.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Arguments {
    /// Not an object literal (a variable, a call, a spread argument): not
    /// known before the call.
    Unknown,
    /// An object literal (no argument at all is `{}`, as the call sends).
    Object(ArgumentObject),
}

/// The keys of an object literal given as a call's arguments.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ArgumentObject {
    /// The keys the object surely has, in source order (a key written
    /// twice once, where last written), each with its value when that is
    /// literal JSON, `None` when computed.
    pub keys: Vec<(String, Option<Value>)>,
    /// The object may hold keys not in `keys` (a spread, a computed key).
    pub open: bool,
}

/// Arrays and objects nested deeper than this in an argument are not
/// taken as literal: the value stays small to build, check and drop.
const MAX_LITERAL_DEPTH: usize = 32;

/// Names a `tools.NAME` reads that are not tools (prelude.js): its own
/// `call` and `search`, the promise and JSON hooks, and
/// `Object.prototype`'s names.
const NOT_TOOLS: &[&str] = &[
    "call",
    "search",
    "then",
    "toJSON",
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

/// Finds the literal tool calls under the nodes handed to its `Visit`
/// methods; offsets are the parsed text's, `base` bytes after the user's.
pub(crate) struct Finder {
    base: u32,
    /// Each call found, with the byte offset of its name in the user's text.
    found: Vec<(u32, ToolUse)>,
    /// How many handlers the node being visited is inside.
    handled: u32,
    /// `tools` may not be the engine's: nothing is taken.
    unsure: bool,
}

impl Finder {
    /// A finder for a text parsed with `base` bytes before the user's.
    pub(crate) fn new(base: u32) -> Finder {
        Finder { base, found: Vec::new(), handled: 0, unsure: false }
    }

    /// The calls found, with positions in `user` (the user's text).
    pub(crate) fn finish(self, user: &str) -> Vec<ToolUse> {
        if self.unsure {
            return Vec::new();
        }
        let mut found = self.found;
        found.sort_by_key(|(offset, _)| *offset);
        let mut lines = LineCursor::new(user);
        found
            .into_iter()
            .map(|(offset, mut used)| {
                (used.line, used.column) = lines.position(offset);
                used
            })
            .collect()
    }

    /// Takes `call` if it calls a tool named literally.
    fn take(&mut self, call: &CallExpression<'_>) {
        let Some((name, at, args)) = literal_call(call) else { return };
        let arguments = match args {
            None => Arguments::Object(ArgumentObject::default()),
            Some(Argument::SpreadElement(_)) => Arguments::Unknown,
            Some(arg) => match arg.to_expression().get_inner_expression() {
                Expression::ObjectExpression(object) => argument_object(object),
                _ => Arguments::Unknown,
            },
        };
        let used = ToolUse { tool: name, line: 0, column: 0, arguments, handled: self.handled > 0 };
        self.found.push((at.saturating_sub(self.base), used));
    }

    /// Visits `expression` as code whose failure the program handles.
    fn visit_handled(&mut self, expression: &Expression<'_>) {
        self.handled += 1;
        self.visit_expression(expression);
        self.handled -= 1;
    }
}

impl<'a> Visit<'a> for Finder {
    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if self.unsure {
            return;
        }
        if it.callee.is_specific_id("eval") {
            self.unsure = true;
            return;
        }
        self.take(it);
        let callee = it.callee.get_inner_expression();
        let handles_rejection = match callee {
            Expression::StaticMemberExpression(m) => {
                m.property.name == "catch" || (m.property.name == "then" && it.arguments.len() >= 2)
            }
            _ => false,
        };
        if handles_rejection && let Expression::StaticMemberExpression(m) = callee {
            self.visit_handled(&m.object);
            self.visit_arguments(&it.arguments);
            return;
        }
        if callee.is_specific_member_access("Promise", "allSettled")
            || callee.is_specific_member_access("Promise", "any")
        {
            self.handled += 1;
            self.visit_arguments(&it.arguments);
            self.handled -= 1;
            return;
        }
        oxc_ast_visit::walk::walk_call_expression(self, it);
    }

    fn visit_try_statement(&mut self, it: &TryStatement<'a>) {
        if it.handler.is_none() {
            return oxc_ast_visit::walk::walk_try_statement(self, it);
        }
        self.handled += 1;
        self.visit_block_statement(&it.block);
        self.handled -= 1;
        if let Some(handler) = &it.handler {
            self.visit_catch_clause(handler);
        }
        if let Some(finalizer) = &it.finalizer {
            self.visit_block_statement(finalizer);
        }
    }

    fn visit_binding_identifier(&mut self, it: &BindingIdentifier<'a>) {
        if it.name == "tools" {
            self.unsure = true;
        }
    }

    fn visit_with_statement(&mut self, _: &WithStatement<'a>) {
        self.unsure = true;
    }
}

/// The tool name `call` names literally, the offset of the name, and the
/// argument that holds its arguments (`None`: no argument, `{}`).
fn literal_call<'s, 'a>(call: &'s CallExpression<'a>) -> Option<(String, u32, Option<&'s Argument<'a>>)> {
    let (property, at) = tools_member(call.callee.get_inner_expression())?;
    if property != "call" {
        if NOT_TOOLS.contains(&property) {
            return None;
        }
        return Some((property.to_owned(), at, call.arguments.first()));
    }
    let first = call.arguments.first()?;
    if first.is_spread() {
        return None;
    }
    let name = first.to_expression().get_inner_expression();
    let text = string_of(name)?;
    use oxc_span::GetSpan as _;
    Some((text.to_owned(), name.span().start, call.arguments.get(1)))
}

/// `tools.NAME` or `tools["NAME"]`: the name and where it is written.
fn tools_member<'s>(callee: &'s Expression<'_>) -> Option<(&'s str, u32)> {
    match callee {
        Expression::StaticMemberExpression(m) if m.object.is_specific_id("tools") => {
            Some((m.property.name.as_str(), m.property.span.start))
        }
        Expression::ComputedMemberExpression(m) if m.object.is_specific_id("tools") => {
            let key = m.expression.get_inner_expression();
            use oxc_span::GetSpan as _;
            Some((string_of(key)?, key.span().start))
        }
        _ => None,
    }
}

/// The text of a string literal or of a template without `${}`.
fn string_of<'s>(expression: &'s Expression<'_>) -> Option<&'s str> {
    match expression {
        Expression::StringLiteral(s) => Some(s.value.as_str()),
        Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
            t.quasis.first()?.value.cooked.as_ref().map(|c| c.as_str())
        }
        _ => None,
    }
}

/// What an object literal given as arguments says.
fn argument_object(object: &ObjectExpression<'_>) -> Arguments {
    let mut out = ArgumentObject::default();
    for property in &object.properties {
        let property = match property {
            ObjectPropertyKind::SpreadProperty(_) => {
                // It may overwrite any key written before it.
                out.open = true;
                for (_, value) in &mut out.keys {
                    *value = None;
                }
                continue;
            }
            ObjectPropertyKind::ObjectProperty(p) => p,
        };
        if property.kind != PropertyKind::Init || property.method {
            return Arguments::Unknown;
        }
        if !property.computed && !property.shorthand && property.key.is_specific_static_name("__proto__") {
            return Arguments::Unknown;
        }
        let Some(key) = key_name(&property.key) else {
            out.open = true;
            continue;
        };
        let value = literal(&property.value, 0);
        out.keys.retain(|(k, _)| *k != key);
        out.keys.push((key, value));
    }
    Arguments::Object(out)
}

/// A property key's name when it is written out (an identifier, a string,
/// a whole number), computed or not.
fn key_name(key: &PropertyKey<'_>) -> Option<String> {
    match key {
        PropertyKey::StaticIdentifier(id) => Some(id.name.as_str().to_owned()),
        PropertyKey::PrivateIdentifier(_) => None,
        _ => match key.to_expression().get_inner_expression() {
            Expression::NumericLiteral(n) => whole(n.value).map(|i| i.to_string()),
            other => string_of(other).map(str::to_owned),
        },
    }
}

/// `value` as an integer when it is a whole number JSON and JavaScript
/// agree on (below 2^53).
fn whole(value: f64) -> Option<i64> {
    const SAFE: f64 = 9_007_199_254_740_992.0;
    (value.fract() == 0.0 && value.abs() < SAFE).then_some(value as i64)
}

/// `expression` as JSON, when it is JSON written out.
fn literal(expression: &Expression<'_>, depth: usize) -> Option<Value> {
    if depth > MAX_LITERAL_DEPTH {
        return None;
    }
    match expression.get_inner_expression() {
        Expression::NullLiteral(_) => Some(Value::Null),
        Expression::BooleanLiteral(b) => Some(Value::Bool(b.value)),
        Expression::NumericLiteral(n) => number(n.value),
        Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
            match u.argument.get_inner_expression() {
                Expression::NumericLiteral(n) => number(-n.value),
                _ => None,
            }
        }
        Expression::ArrayExpression(a) => {
            let mut items = Vec::with_capacity(a.elements.len());
            for element in &a.elements {
                match element {
                    ArrayExpressionElement::SpreadElement(_) | ArrayExpressionElement::Elision(_) => {
                        return None;
                    }
                    e => items.push(literal(e.to_expression(), depth + 1)?),
                }
            }
            Some(Value::Array(items))
        }
        Expression::ObjectExpression(o) => {
            let mut map = Map::new();
            for property in &o.properties {
                let ObjectPropertyKind::ObjectProperty(p) = property else { return None };
                if p.kind != PropertyKind::Init
                    || p.method
                    || (!p.computed && p.key.is_specific_static_name("__proto__"))
                {
                    return None;
                }
                map.insert(key_name(&p.key)?, literal(&p.value, depth + 1)?);
            }
            Some(Value::Object(map))
        }
        other => string_of(other).map(|s| Value::String(s.to_owned())),
    }
}

/// A number as JSON writes it: whole numbers as integers, and nothing for
/// what JSON has no number for.
fn number(value: f64) -> Option<Value> {
    if let Some(i) = whole(value) {
        return Some(Value::from(i));
    }
    serde_json::Number::from_f64(value).map(Value::Number)
}

/// Turns increasing byte offsets of a text into (line, column) positions,
/// 1-based, columns in characters, reading the text once.
struct LineCursor<'t> {
    text: &'t str,
    /// The line and the byte its line starts at, of the last position.
    line: u32,
    line_start: usize,
}

impl<'t> LineCursor<'t> {
    fn new(text: &'t str) -> Self {
        LineCursor { text, line: 1, line_start: 0 }
    }

    fn position(&mut self, offset: u32) -> (u32, u32) {
        let offset = (offset as usize).min(self.text.len());
        if offset < self.line_start {
            (self.line, self.line_start) = (1, 0);
        }
        let mut at = self.line_start;
        for (i, b) in self.text.as_bytes()[self.line_start..offset].iter().enumerate() {
            if *b == b'\n' {
                self.line += 1;
                at = self.line_start + i + 1;
            }
        }
        self.line_start = at;
        let column = self.text.get(at..offset).map_or(0, |s| s.chars().count());
        (self.line, column as u32 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Program, normalise};
    use serde_json::json;

    fn uses(source: &str) -> Vec<ToolUse> {
        normalise(&Program::new(source)).unwrap().tool_uses
    }

    fn object(keys: &[(&str, Option<Value>)], open: bool) -> Arguments {
        let keys = keys.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        Arguments::Object(ArgumentObject { keys, open })
    }

    #[test]
    fn the_three_forms_are_found_with_the_names_position() {
        let found = uses(
            "const a = await tools.read({path: \"a.txt\"});\n  await tools[\"grep_files\"]({pattern: `x`});\n\
             tools.call('write', {path: 'b', content: 'c'}); tools.readd()",
        );
        let names: Vec<(&str, u32, u32)> =
            found.iter().map(|u| (u.tool.as_str(), u.line, u.column)).collect();
        assert_eq!(names, [("read", 1, 23), ("grep_files", 2, 15), ("write", 3, 12), ("readd", 3, 55)]);
        assert_eq!(found[0].arguments, object(&[("path", Some(json!("a.txt")))], false));
        assert_eq!(found[3].arguments, object(&[], false), "no argument is {{}}");
        assert!(found.iter().all(|u| !u.handled));
    }

    #[test]
    fn literal_values_are_json_and_computed_ones_are_not() {
        let found = uses(
            "const p = 'x'; tools.read({path: p, limit: -5, offset: 2.5, deep: {a: [1, null, true]}, \
             n: 1e400, s: `a${p}`, 'quoted': 1, 7: 0, u: undefined})",
        );
        let expected = object(
            &[
                ("path", None),
                ("limit", Some(json!(-5))),
                ("offset", Some(json!(2.5))),
                ("deep", Some(json!({"a": [1, null, true]}))),
                ("n", None),
                ("s", None),
                ("quoted", Some(json!(1))),
                ("7", Some(json!(0))),
                ("u", None),
            ],
            false,
        );
        assert_eq!(found[0].arguments, expected);
        if let Arguments::Object(o) = &found[0].arguments {
            assert!(o.keys[1].1.as_ref().unwrap().is_i64(), "whole numbers are integers");
        }
    }

    #[test]
    fn spreads_and_computed_keys_open_the_object() {
        let found =
            uses("const o = {}, k = 'a'; tools.read({path: 1, ...o, limit: 2}); tools.read({[k]: 1, b: 2})");
        assert_eq!(found[0].arguments, object(&[("path", None), ("limit", Some(json!(2)))], true));
        assert_eq!(found[1].arguments, object(&[("b", Some(json!(2)))], true));
        // A computed key written out is a key.
        assert_eq!(
            uses("tools.read({['path']: 'a'})")[0].arguments,
            object(&[("path", Some(json!("a")))], false)
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_literal_are_unknown() {
        for source in [
            "const a = {}; tools.read(a)",
            "const a = [{}]; tools.read(...a)",
            "tools.read({get path() { return 'x' }})",
            "tools.read({f() {}})",
            "tools.read({__proto__: {path: 'x'}})",
            "tools.call('read', 'a.txt')",
        ] {
            assert_eq!(uses(source)[0].arguments, Arguments::Unknown, "{source}");
        }
    }

    #[test]
    fn dynamic_names_and_other_members_are_not_taken() {
        for source in [
            "const n = 'read'; tools[n]({})",
            "const n = 'read'; tools.call(n, {})",
            "tools.call(`re${'ad'}`, {})",
            "tools.search('files')",
            "tools.toString()",
            "other.read({})",
            "const f = tools.read; f({})",
        ] {
            assert!(uses(source).is_empty(), "{source}");
        }
    }

    #[test]
    fn nothing_is_taken_where_tools_may_be_another_binding() {
        for source in [
            "const tools = {read() {}}; tools.readd({})",
            "function f(tools) { return tools.x() } tools.readd({})",
            "try { } catch (tools) { } tools.readd({})",
            "with ({}) { tools.readd({}) }",
            "eval('1'); tools.readd({})",
        ] {
            assert!(uses(source).is_empty(), "{source}");
        }
        // A property named `tools` is no binding.
        assert_eq!(uses("const o = {tools: 1}; tools.readd({})").len(), 1);
    }

    #[test]
    fn calls_whose_failure_is_handled_where_made_are_marked() {
        let handled = |source: &str| uses(source).iter().map(|u| u.handled).collect::<Vec<_>>();
        assert_eq!(handled("try { await tools.a() } catch { } await tools.b()"), [true, false]);
        assert_eq!(handled("try { await tools.a() } finally { }"), [false]);
        assert_eq!(handled("await tools.a().catch(() => null); tools.b().then(r => r)"), [true, false]);
        assert_eq!(handled("tools.a().then(r => r, e => null)"), [true]);
        assert_eq!(
            handled("await Promise.allSettled([tools.a(), tools.b()]); Promise.all([tools.c()])"),
            [true, true, false]
        );
        assert_eq!(handled("try { } catch { await tools.a() }"), [false], "a catch block is not handled");
    }

    #[test]
    fn typescript_and_module_programs_are_searched_in_the_users_text() {
        let source =
            "const n: number = 1;\nexport default await tools.read({path: 'a' as string, limit: n!});";
        let found = uses(source);
        assert_eq!((found[0].tool.as_str(), found[0].line, found[0].column), ("read", 2, 28));
        assert_eq!(found[0].arguments, object(&[("path", Some(json!("a"))), ("limit", None)], false));
    }

    #[test]
    fn columns_count_characters() {
        let found = uses("const é = 'ü'; tools.rëad({})");
        assert_eq!((found[0].line, found[0].column), (1, 22));
    }
}
