//! Object and array schemas -> object types (properties, an index
//! signature for `additionalProperties`/`patternProperties`) and array or
//! tuple types (`items`, `prefixItems`, draft-07 `additionalItems`).

use serde_json::{Map, Value};

use super::Doc;
use super::tags::{description, tags};
use super::ty::{EMPTY_OBJECT, OPEN_OBJECT, Ty, union};
use crate::catalog::typescript::text::{jsdoc, property_key};

/// The members TypeScript's `Object` interface gives every object.
const OBJECT_PROTOTYPE: [&str; 7] = [
    "constructor",
    "toString",
    "toLocaleString",
    "valueOf",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
];

/// Keywords that make a schema without `type` an object schema.
pub(super) const OBJECT_KEYWORDS: [&str; 4] =
    ["properties", "additionalProperties", "patternProperties", "required"];

/// The known properties of an object schema, rendered as members.
struct Properties {
    /// One `name: type;` member each (after its JSDoc), indented, in
    /// [`property_order`].
    members: Vec<String>,
    /// Their types, in the same order.
    types: Vec<Ty>,
    /// Whether any member has JSDoc.
    documented: bool,
    /// Whether any member is optional.
    any_optional: bool,
}

impl Doc<'_, '_> {
    /// An object type: known properties (required ones first, in the order
    /// of `required`), then an index signature for `additionalProperties` /
    /// `patternProperties` schemas.
    pub(super) fn object(&mut self, s: &Map<String, Value>, indent: usize) -> Ty {
        let properties = self.properties(s, indent);
        let signature = self.index_signature(s, indent, &properties);
        let Properties { mut members, documented, .. } = properties;
        members.extend(signature);
        let closed = s.get("additionalProperties") == Some(&Value::Bool(false));
        object_text(members, documented, closed, indent)
    }

    /// The members for `properties` and `required`, at indent level
    /// `indent + 1`.
    fn properties(&mut self, s: &Map<String, Value>, indent: usize) -> Properties {
        let empty = Map::new();
        let props = match s.get("properties") {
            Some(Value::Object(p)) => p,
            _ => &empty,
        };
        let required: Vec<&str> = match s.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let pad = "  ".repeat(indent + 1);
        let mut out =
            Properties { members: Vec::new(), types: Vec::new(), documented: false, any_optional: false };
        for name in property_order(&required, props) {
            let optional = !required.contains(&name);
            out.any_optional |= optional;
            let (ty, doc) = self.property(name, props.get(name), optional, indent, &pad);
            out.documented |= !doc.is_empty();
            out.members.push(format!(
                "{doc}{pad}{}{}: {};",
                property_key(name),
                if optional { "?" } else { "" },
                ty.text
            ));
            out.types.push(ty);
        }
        out
    }

    /// The type and JSDoc (empty when none) of property `name`, whose
    /// schema is `sub` (`None`: only `required` names it).
    fn property(
        &mut self,
        name: &str,
        sub: Option<&Value>,
        optional: bool,
        indent: usize,
        pad: &str,
    ) -> (Ty, String) {
        let (ty, doc) = match sub {
            Some(sub) => {
                let ty = self.ty(sub, indent + 1, None);
                let doc = match sub.as_object() {
                    Some(m) => jsdoc(description(m), &tags(m), pad),
                    None => String::new(),
                };
                (ty, doc)
            }
            None => (Ty::unknown(), String::new()),
        };
        // Every object has Object.prototype's members in TypeScript's
        // eyes, so an optional `toString?: string` would reject every
        // object literal that leaves it out.
        if optional && OBJECT_PROTOTYPE.contains(&name) {
            let was = if ty.text.contains('\n') || ty.text.len() > 40 { "a value" } else { ty.text.as_str() };
            return (Ty::unknown_because(&format!("{was}; the name clashes with Object.prototype")), doc);
        }
        (ty, doc)
    }

    /// The `[key: string]: T;` member for `patternProperties` and
    /// `additionalProperties` schemas, when there are any; `T` admits the
    /// known properties' types too.
    fn index_signature(
        &mut self,
        s: &Map<String, Value>,
        indent: usize,
        properties: &Properties,
    ) -> Option<String> {
        let mut extra: Vec<Ty> = Vec::new();
        if let Some(Value::Object(patterns)) = s.get("patternProperties") {
            for sub in patterns.values() {
                extra.push(self.ty(sub, indent + 1, None));
            }
        }
        match s.get("additionalProperties") {
            Some(sub @ Value::Object(m)) if !m.is_empty() => extra.push(self.ty(sub, indent + 1, None)),
            Some(Value::Bool(true)) | Some(Value::Object(_)) if !extra.is_empty() => {
                extra.push(Ty::unknown())
            }
            _ => {}
        }
        if extra.is_empty() {
            return None;
        }
        // TypeScript requires every known property to fit the index
        // signature, so the signature's type also admits theirs.
        let mut all = extra;
        if !properties.types.is_empty() {
            all.extend(properties.types.iter().cloned());
            if properties.any_optional {
                all.push(Ty::atom("undefined"));
            }
        }
        let mut sig = union(all);
        if !properties.members.is_empty() && (sig.text.contains('\n') || sig.text.len() > 80) {
            sig = Ty::unknown();
        }
        Some(format!("{}[key: string]: {};", "  ".repeat(indent + 1), sig.text))
    }

    /// An array or tuple type.
    pub(super) fn array(&mut self, s: &Map<String, Value>, indent: usize) -> Ty {
        let (prefix, rest) = match (s.get("prefixItems"), s.get("items")) {
            (Some(Value::Array(prefix)), items) => (Some(prefix), items),
            (_, Some(Value::Array(prefix))) => (Some(prefix), s.get("additionalItems")),
            (_, items) => (None, items),
        };
        let Some(prefix) = prefix else {
            return match rest {
                None => Ty::atom("unknown[]"),
                Some(items) => Ty::atom(format!("{}[]", self.ty(items, indent, None).tight())),
            };
        };
        let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let mut elements: Vec<String> = Vec::new();
        for (i, item) in prefix.iter().enumerate() {
            let ty = self.ty(item, indent, None);
            if (i as u64) < min { elements.push(ty.text) } else { elements.push(format!("{}?", ty.tight())) }
        }
        match rest {
            Some(Value::Bool(false)) => {}
            None | Some(Value::Bool(true)) => elements.push("...unknown[]".into()),
            Some(items) => elements.push(format!("...{}[]", self.ty(items, indent, None).tight())),
        }
        Ty::atom(format!("[{}]", elements.join(", ")))
    }
}

/// The property names in member order: those in `required` first (in its
/// order), then the rest of `properties`, each once.
fn property_order<'a>(required: &[&'a str], props: &'a Map<String, Value>) -> Vec<&'a str> {
    let mut order: Vec<&str> = Vec::new();
    for name in required.iter().copied().chain(props.keys().map(String::as_str)) {
        if !order.contains(&name) {
            order.push(name);
        }
    }
    order
}

/// The object type with `members` placed at indent level `indent`: a
/// record type without members (`Record<string, never>` when `closed`), on
/// one line when short and undocumented, else a block.
fn object_text(members: Vec<String>, documented: bool, closed: bool, indent: usize) -> Ty {
    if members.is_empty() {
        return Ty::atom(if closed { EMPTY_OBJECT } else { OPEN_OBJECT });
    }
    let one_line: Vec<&str> = members.iter().map(|m| m.trim_start()).collect();
    let joined = one_line.join(" ");
    if !documented && !joined.contains('\n') && joined.len() + indent * 2 <= 70 {
        return Ty::atom(format!("{{ {} }}", joined.strip_suffix(';').unwrap_or(&joined)));
    }
    Ty::atom(format!("{{\n{}\n{}}}", members.join("\n"), "  ".repeat(indent)))
}

/// Whether `schema` is nothing but an object type (so it may be declared as
/// an interface).
pub(super) fn is_plain_object(schema: &Value) -> bool {
    let Some(s) = schema.as_object() else { return false };
    let composite =
        ["$ref", "const", "enum", "anyOf", "oneOf", "allOf", "nullable", "$dynamicRef", "$recursiveRef"];
    if composite.iter().any(|k| s.contains_key(*k)) {
        return false;
    }
    match s.get("type") {
        Some(Value::String(t)) => t == "object",
        None => OBJECT_KEYWORDS.iter().any(|k| s.contains_key(*k)),
        _ => false,
    }
}
