//! One schema -> its type, keyword by keyword (JSON Schema Validation §6):
//! `$ref`, `const`/`enum`/`type`, then `anyOf`/`oneOf`/`allOf`, all
//! intersected, and OpenAPI's `nullable`.

use serde_json::{Map, Value};

use super::object::OBJECT_KEYWORDS;
use super::ty::{Ty, intersection, literal, union};
use super::{Doc, MAX_DEPTH};

/// Keywords that narrow a schema in ways TypeScript types cannot say; they
/// are left out (the type is wider than the schema).
const UNSUPPORTED: [&str; 6] = ["not", "if", "then", "else", "dependentSchemas", "dependencies"];

impl Doc<'_, '_> {
    /// The type of `schema` placed at indent level `indent`. `direct` is
    /// the cycle id of the named type being declared while no property or
    /// array item has been entered.
    pub(super) fn ty(&mut self, schema: &Value, indent: usize, direct: Option<usize>) -> Ty {
        if self.depth >= MAX_DEPTH {
            return Ty::unknown_because("nested too deeply");
        }
        self.depth += 1;
        let ty = self.ty_inner(schema, indent, direct);
        self.depth -= 1;
        ty
    }

    fn ty_inner(&mut self, schema: &Value, indent: usize, direct: Option<usize>) -> Ty {
        let s = match schema {
            Value::Bool(true) => return Ty::unknown(),
            Value::Bool(false) => return Ty::never(),
            Value::Object(s) => s,
            _ => return Ty::unknown_because("not a JSON Schema"),
        };
        let mut parts = self.reference_parts(s, indent, direct);
        if let Some(ty) = self.value_type(s, indent) {
            parts.push(ty);
        }
        self.composition_parts(s, indent, direct, &mut parts);
        if parts.is_empty() {
            let unsupported: Vec<&str> = UNSUPPORTED.iter().copied().filter(|k| s.contains_key(*k)).collect();
            if !unsupported.is_empty() {
                return Ty::unknown_because(&format!("{} is not expressible", unsupported.join("/")));
            }
        }
        let ty = intersection(parts);
        if s.get("nullable") == Some(&Value::Bool(true)) { union(vec![ty, Ty::atom("null")]) } else { ty }
    }

    /// The parts `$ref` gives (and `unknown` for the dynamic references
    /// this renderer does not follow).
    fn reference_parts(&mut self, s: &Map<String, Value>, indent: usize, direct: Option<usize>) -> Vec<Ty> {
        let mut parts = Vec::new();
        match s.get("$ref") {
            Some(Value::String(r)) => parts.push(self.reference(r, indent, direct)),
            Some(_) => parts.push(Ty::unknown_because("$ref is not a string")),
            None => {}
        }
        for kw in ["$dynamicRef", "$recursiveRef"] {
            if s.contains_key(kw) {
                parts.push(Ty::unknown_because(&format!("{kw} is not supported")));
            }
        }
        parts
    }

    /// The type the value keywords give: `const`, else `enum`, else `type`
    /// (or the object or array keywords that imply it); `None` without any.
    fn value_type(&mut self, s: &Map<String, Value>, indent: usize) -> Option<Ty> {
        if let Some(c) = s.get("const") {
            Some(literal(c))
        } else if let Some(e) = s.get("enum") {
            Some(match e {
                Value::Array(values) => union(values.iter().map(literal).collect()),
                _ => Ty::unknown_because("enum is not an array"),
            })
        } else if let Some(t) = s.get("type") {
            Some(match t {
                Value::String(name) => self.typed(s, name, indent),
                Value::Array(names) => {
                    let members = names
                        .iter()
                        .map(|n| match n {
                            Value::String(name) => self.typed(s, name, indent),
                            _ => Ty::unknown_because("a type that is not a string"),
                        })
                        .collect();
                    union(members)
                }
                _ => Ty::unknown_because("type is not a string or a list"),
            })
        } else if OBJECT_KEYWORDS.iter().any(|k| s.contains_key(*k)) {
            Some(self.typed(s, "object", indent))
        } else if ["items", "prefixItems", "additionalItems"].iter().any(|k| s.contains_key(*k)) {
            Some(self.typed(s, "array", indent))
        } else {
            None
        }
    }

    /// Adds the parts `anyOf` and `oneOf` (a union each) and `allOf` (each
    /// of its schemas) give to `parts`.
    fn composition_parts(
        &mut self,
        s: &Map<String, Value>,
        indent: usize,
        direct: Option<usize>,
        parts: &mut Vec<Ty>,
    ) {
        for kw in ["anyOf", "oneOf"] {
            match s.get(kw) {
                Some(Value::Array(list)) if !list.is_empty() => {
                    let members = list.iter().map(|x| self.ty(x, indent, direct)).collect();
                    parts.push(union(members));
                }
                Some(Value::Array(_)) | None => {}
                Some(_) => parts.push(Ty::unknown_because(&format!("{kw} is not an array"))),
            }
        }
        match s.get("allOf") {
            Some(Value::Array(list)) => {
                for x in list {
                    parts.push(self.ty(x, indent, direct));
                }
            }
            None => {}
            Some(_) => parts.push(Ty::unknown_because("allOf is not an array")),
        }
    }

    /// The type of one `type` name.
    fn typed(&mut self, s: &Map<String, Value>, name: &str, indent: usize) -> Ty {
        match name {
            "string" => Ty::atom("string"),
            "number" | "integer" => Ty::atom("number"),
            "boolean" => Ty::atom("boolean"),
            "null" => Ty::atom("null"),
            "object" => self.object(s, indent),
            "array" => self.array(s, indent),
            other => Ty::unknown_because(&format!("unknown type {other}")),
        }
    }
}
