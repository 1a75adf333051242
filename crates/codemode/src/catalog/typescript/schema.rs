//! One JSON Schema document -> TypeScript type text, plus the named types
//! (`$defs`, a self-referenced root, MCP argument and result types) it
//! declares in its namespace ([`Scope`]).
//!
//! Keywords follow JSON Schema 2020-12 (Core §8.2.3 `$defs`/`$ref`,
//! Validation §6) and the draft-07 spellings still common in MCP servers
//! (`definitions`, `items` as an array, `additionalItems`); OpenAPI 3.0's
//! `nullable: true` is honoured too. What TypeScript cannot say becomes
//! `unknown` with a comment; nothing here fails or panics.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value};

use super::text::{comment_safe, jsdoc, pascal_name, property_key, string_literal};

/// Deeper nesting than this renders as `unknown` (guards the stack against
/// pathological schemas).
const MAX_DEPTH: usize = 48;

/// Keywords that narrow a schema in ways TypeScript types cannot say; they
/// are left out (the type is wider than the schema).
const UNSUPPORTED: [&str; 6] = ["not", "if", "then", "else", "dependentSchemas", "dependencies"];

/// A rendered type and its outer form (so callers add parentheses where
/// TypeScript needs them).
#[derive(Debug, Clone)]
pub(super) struct Ty {
    /// The type text; multi-line object types are indented for where they
    /// are placed.
    pub text: String,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Atom,
    Unknown,
    Never,
    Union,
    Intersection,
}

impl Ty {
    fn atom(text: impl Into<String>) -> Ty {
        Ty { text: text.into(), kind: Kind::Atom }
    }

    fn unknown() -> Ty {
        Ty { text: "unknown".into(), kind: Kind::Unknown }
    }

    fn unknown_because(why: &str) -> Ty {
        Ty { text: format!("unknown /* {} */", comment_safe(why)), kind: Kind::Unknown }
    }

    fn never() -> Ty {
        Ty { text: "never".into(), kind: Kind::Never }
    }

    /// The text, in parentheses when it is a union or intersection (or
    /// carries a comment), for use before `[]` or `?`.
    fn tight(&self) -> String {
        let commented = self.kind == Kind::Unknown && self.text != "unknown";
        if matches!(self.kind, Kind::Union | Kind::Intersection) || commented {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }

    /// An object type written as a block (`{ ... }`).
    fn is_block(&self) -> bool {
        self.kind == Kind::Atom && self.text.starts_with('{')
    }
}

fn union(members: Vec<Ty>) -> Ty {
    let mut kept: Vec<Ty> = Vec::new();
    for m in members {
        match m.kind {
            Kind::Unknown => return m,
            Kind::Never => {}
            _ => {
                if !kept.iter().any(|k| k.text == m.text) {
                    kept.push(m);
                }
            }
        }
    }
    match kept.len() {
        0 => Ty::never(),
        1 => kept.pop().unwrap_or_else(Ty::never),
        _ => Ty {
            text: kept.iter().map(|k| k.text.as_str()).collect::<Vec<_>>().join(" | "),
            kind: Kind::Union,
        },
    }
}

fn intersection(parts: Vec<Ty>) -> Ty {
    let mut kept: Vec<Ty> = Vec::new();
    let mut because: Option<Ty> = None;
    for p in parts {
        match p.kind {
            Kind::Never => return p,
            Kind::Unknown => {
                if because.is_none() && p.text != "unknown" {
                    because = Some(p);
                }
            }
            _ => {
                if !kept.iter().any(|k| k.text == p.text) {
                    kept.push(p);
                }
            }
        }
    }
    // `{type: "object"}` beside other parts adds nothing a reader needs.
    if kept.len() > 1 {
        kept.retain(|k| k.text != OPEN_OBJECT);
    }
    match kept.len() {
        0 => because.unwrap_or_else(Ty::unknown),
        1 => kept.pop().unwrap_or_else(Ty::unknown),
        _ => Ty {
            text: kept
                .iter()
                .map(|k| if k.kind == Kind::Union { format!("({})", k.text) } else { k.text.clone() })
                .collect::<Vec<_>>()
                .join(" & "),
            kind: Kind::Intersection,
        },
    }
}

const OPEN_OBJECT: &str = "Record<string, unknown>";
const EMPTY_OBJECT: &str = "Record<string, never>";

/// One `declare namespace`: its name, the names taken in it, and the
/// declarations rendered into it.
pub(super) struct Scope {
    /// The namespace's identifier, e.g. `mcp__memory`.
    pub ns: String,
    used: HashSet<String>,
    /// The declarations, each indented by two spaces and ending in a newline.
    pub decls: String,
    def_sets: Vec<DefSet>,
}

/// The `$defs`/`definitions` of one or more documents with identical
/// definitions: definition key -> declared name. A name is given (and the
/// definition declared) on first reference.
struct DefSet {
    /// Canonical JSON of the definitions; `None` when they cannot be shared
    /// (they refer to their document's root).
    key: Option<String>,
    names: HashMap<String, String>,
}

impl Scope {
    pub(super) fn new(ns: String) -> Scope {
        Scope { ns, used: HashSet::new(), decls: String::new(), def_sets: Vec::new() }
    }

    /// A name not yet taken in this namespace: `base`, else `base2`, ...
    pub(super) fn alloc(&mut self, base: &str) -> String {
        let mut name = base.to_owned();
        let mut n = 2;
        while self.used.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.used.insert(name.clone());
        name
    }

    fn qualified(&self, name: &str) -> String {
        format!("{}.{}", self.ns, name)
    }
}

/// How a document's root is placed.
pub(super) enum Root<'n> {
    /// Declared as a named type with this base name (MCP argument and
    /// result types).
    Named(&'n str),
    /// Written inline where it is used, unless the schema refers to its
    /// own root (`"$ref": "#"`); then declared under this base name.
    Inline(&'n str),
}

/// Renders the document `root` for use at indent level `indent`,
/// declaring its named types in `scope`; returns the type to write where
/// it is used (a qualified name or an inline type).
pub(super) fn render_document(scope: &mut Scope, root: &Value, placement: Root<'_>, indent: usize) -> Ty {
    let mut doc = Doc::new(scope, root);
    let root_named = match placement {
        Root::Named(base) => Some(base),
        Root::Inline(base) => doc.refers_to_root(root, 0).then_some(base),
    };
    let ty = match root_named {
        Some(base) => {
            let name = doc.scope.alloc(&pascal_name(base));
            doc.root_name = Some(name.clone());
            doc.declare(&name, root, "");
            Ty::atom(doc.scope.qualified(&name))
        }
        None => doc.ty(root, indent, None),
    };
    while let Some(key) = doc.queue.pop_front() {
        let name = doc.def_name(&key);
        if let Some(schema) = doc.def_schema(&key) {
            doc.declare(&name, schema, &key);
        }
    }
    ty
}

/// Where a `$ref` leads.
enum Target<'v> {
    /// The document root (`#`).
    Root,
    /// A definition: its canonical pointer (`/$defs/X`).
    Def(String),
    /// Another place in the document, rendered inline.
    Inline(String, &'v Value),
    /// Not something this renderer follows; the reason.
    Unsupported(String),
}

/// The rendering of one schema document.
struct Doc<'s, 'v> {
    scope: &'s mut Scope,
    root: &'v Value,
    /// Index of this document's definitions in `scope.def_sets`.
    set: Option<usize>,
    /// The bare name of the root, when it is declared.
    root_name: Option<String>,
    /// Named types (root `""` and definition pointers) that take part in a
    /// cycle of direct references (through unions, intersections and
    /// aliases, not object properties or array items), by cycle id.
    cycles: HashMap<String, usize>,
    /// Definitions named but not declared yet.
    queue: VecDeque<String>,
    /// Local non-definition pointers being inlined (cycle guard).
    inlining: Vec<String>,
    depth: usize,
}

impl<'s, 'v> Doc<'s, 'v> {
    fn new(scope: &'s mut Scope, root: &'v Value) -> Doc<'s, 'v> {
        let mut doc = Doc {
            scope,
            root,
            set: None,
            root_name: None,
            cycles: HashMap::new(),
            queue: VecDeque::new(),
            inlining: Vec::new(),
            depth: 0,
        };
        doc.set = doc.def_set();
        doc.cycles = doc.find_cycles();
        doc
    }

    /// The definitions of the document, as an existing set of the scope
    /// when an earlier document had identical ones.
    fn def_set(&mut self) -> Option<usize> {
        let mut defs = Map::new();
        for kw in ["$defs", "definitions"] {
            if let Some(Value::Object(m)) = self.root.get(kw)
                && !m.is_empty()
            {
                defs.insert(kw.to_owned(), Value::Object(m.clone()));
            }
        }
        if defs.is_empty() {
            return None;
        }
        let defs = Value::Object(defs);
        let key = (!self.refers_to_root(&defs, 0)).then(|| defs.to_string());
        if key.is_some()
            && let Some(i) = self.scope.def_sets.iter().position(|s| s.key == key)
        {
            return Some(i);
        }
        self.scope.def_sets.push(DefSet { key, names: HashMap::new() });
        Some(self.scope.def_sets.len() - 1)
    }

    /// Whether any `$ref` inside `v` leads to the document root.
    fn refers_to_root(&self, v: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref")
                    && matches!(self.resolve(r), Target::Root)
                {
                    return true;
                }
                m.values().any(|x| self.refers_to_root(x, depth + 1))
            }
            Value::Array(a) => a.iter().any(|x| self.refers_to_root(x, depth + 1)),
            _ => false,
        }
    }

    fn resolve(&self, r: &str) -> Target<'v> {
        let Some(fragment) = r.strip_prefix('#') else {
            return Target::Unsupported(format!("$ref {r} points outside this schema"));
        };
        let pointer = percent_decode(fragment);
        if pointer.is_empty() {
            return Target::Root;
        }
        if !pointer.starts_with('/') {
            return Target::Unsupported(format!("$ref {r} names an anchor"));
        }
        let tokens: Vec<String> =
            pointer[1..].split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
        if tokens.len() == 2
            && (tokens[0] == "$defs" || tokens[0] == "definitions")
            && self.root.get(&tokens[0]).and_then(|d| d.get(&tokens[1])).is_some()
        {
            let canonical = format!("/{}/{}", tokens[0], tokens[1].replace('~', "~0").replace('/', "~1"));
            return Target::Def(canonical);
        }
        match self.root.pointer(&pointer) {
            Some(target) => Target::Inline(pointer, target),
            None => Target::Unsupported(format!("$ref {r} does not resolve")),
        }
    }

    fn def_schema(&self, key: &str) -> Option<&'v Value> {
        self.root.pointer(key)
    }

    /// The bare name of the definition at `key`, given (and queued for
    /// declaration) on first use.
    fn def_name(&mut self, key: &str) -> String {
        let Some(set) = self.set else { return "never".into() };
        if let Some(name) = self.scope.def_sets[set].names.get(key) {
            return name.clone();
        }
        let last = key.rsplit('/').next().unwrap_or(key).replace("~1", "/").replace("~0", "~");
        let name = self.scope.alloc(&pascal_name(&last));
        self.scope.def_sets[set].names.insert(key.to_owned(), name.clone());
        self.queue.push_back(key.to_owned());
        name
    }

    /// Named types on a cycle of direct references: `type A = B | null;
    /// type B = A[] | A` is fine through `[]` but not through `| A`, which
    /// TypeScript rejects as circular; such references become `unknown`.
    fn find_cycles(&self) -> HashMap<String, usize> {
        let mut nodes: Vec<(String, &Value)> = vec![(String::new(), self.root)];
        for kw in ["$defs", "definitions"] {
            if let Some(Value::Object(m)) = self.root.get(kw) {
                for (k, v) in m {
                    nodes.push((format!("/{kw}/{}", k.replace('~', "~0").replace('/', "~1")), v));
                }
            }
        }
        let index: HashMap<&str, usize> =
            nodes.iter().enumerate().map(|(i, (k, _))| (k.as_str(), i)).collect();
        let edges: Vec<Vec<usize>> = nodes
            .iter()
            .map(|(_, v)| {
                let mut out = Vec::new();
                self.direct_refs(v, &mut out, &mut Vec::new(), 0);
                out.iter().filter_map(|k| index.get(k.as_str()).copied()).collect()
            })
            .collect();
        let reach: Vec<HashSet<usize>> = (0..nodes.len())
            .map(|start| {
                let mut seen = HashSet::new();
                let mut stack = edges[start].clone();
                while let Some(n) = stack.pop() {
                    if seen.insert(n) {
                        stack.extend(&edges[n]);
                    }
                }
                seen
            })
            .collect();
        let mut cycles = HashMap::new();
        for (i, (key, _)) in nodes.iter().enumerate() {
            if reach[i].contains(&i) {
                let id =
                    (0..nodes.len()).find(|&j| reach[i].contains(&j) && reach[j].contains(&i)).unwrap_or(i);
                cycles.insert(key.clone(), id);
            }
        }
        cycles
    }

    /// The named types `v` refers to directly (not under a property or
    /// array item), as keys (`""` for the root).
    fn direct_refs(&self, v: &Value, out: &mut Vec<String>, inlined: &mut Vec<String>, depth: usize) {
        let Some(m) = v.as_object() else { return };
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            match self.resolve(r) {
                Target::Root => out.push(String::new()),
                Target::Def(key) => out.push(key),
                Target::Inline(pointer, target) if !inlined.contains(&pointer) => {
                    inlined.push(pointer);
                    self.direct_refs(target, out, inlined, depth + 1);
                }
                _ => {}
            }
        }
        for kw in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(list)) = m.get(kw) {
                for x in list {
                    self.direct_refs(x, out, inlined, depth + 1);
                }
            }
        }
    }

    /// Declares `name` in the namespace: an interface for a plain object
    /// schema, else a type alias.
    fn declare(&mut self, name: &str, schema: &Value, key: &str) {
        let direct = self.cycles.get(key).copied();
        let doc = match schema.as_object() {
            Some(m) => jsdoc(description(m), &tags(m), "  "),
            None => String::new(),
        };
        let ty = self.ty(schema, 1, direct);
        let text = if is_plain_object(schema) && ty.is_block() {
            format!("{doc}  interface {name} {}\n", ty.text)
        } else {
            format!("{doc}  type {name} = {};\n", ty.text)
        };
        self.scope.decls.push_str(&text);
    }

    /// The type of `schema` placed at indent level `indent`. `direct` is
    /// the cycle id of the named type being declared while no property or
    /// array item has been entered.
    fn ty(&mut self, schema: &Value, indent: usize, direct: Option<usize>) -> Ty {
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
        if let Some(c) = s.get("const") {
            parts.push(literal(c));
        } else if let Some(e) = s.get("enum") {
            match e {
                Value::Array(values) => parts.push(union(values.iter().map(literal).collect())),
                _ => parts.push(Ty::unknown_because("enum is not an array")),
            }
        } else if let Some(t) = s.get("type") {
            match t {
                Value::String(name) => parts.push(self.typed(s, name, indent)),
                Value::Array(names) => {
                    let members = names
                        .iter()
                        .map(|n| match n {
                            Value::String(name) => self.typed(s, name, indent),
                            _ => Ty::unknown_because("a type that is not a string"),
                        })
                        .collect();
                    parts.push(union(members));
                }
                _ => parts.push(Ty::unknown_because("type is not a string or a list")),
            }
        } else if OBJECT_KEYWORDS.iter().any(|k| s.contains_key(*k)) {
            parts.push(self.typed(s, "object", indent));
        } else if ["items", "prefixItems", "additionalItems"].iter().any(|k| s.contains_key(*k)) {
            parts.push(self.typed(s, "array", indent));
        }
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
        if parts.is_empty() {
            let unsupported: Vec<&str> = UNSUPPORTED.iter().copied().filter(|k| s.contains_key(*k)).collect();
            if !unsupported.is_empty() {
                return Ty::unknown_because(&format!("{} is not expressible", unsupported.join("/")));
            }
        }
        let ty = intersection(parts);
        if s.get("nullable") == Some(&Value::Bool(true)) { union(vec![ty, Ty::atom("null")]) } else { ty }
    }

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

    fn reference(&mut self, r: &str, indent: usize, direct: Option<usize>) -> Ty {
        let key = match self.resolve(r) {
            Target::Root => String::new(),
            Target::Def(key) => key,
            Target::Inline(pointer, target) => {
                if self.inlining.contains(&pointer) {
                    return Ty::unknown_because(&format!("recursive $ref {r}"));
                }
                self.inlining.push(pointer);
                let ty = self.ty(target, indent, direct);
                self.inlining.pop();
                return ty;
            }
            Target::Unsupported(why) => return Ty::unknown_because(&why),
        };
        if direct.is_some() && self.cycles.get(&key).copied() == direct {
            return Ty::unknown_because(&format!("circular $ref {r}"));
        }
        if key.is_empty() {
            return match &self.root_name {
                Some(name) => Ty::atom(self.scope.qualified(name)),
                None => Ty::unknown_because("$ref to the root"),
            };
        }
        let name = self.def_name(&key);
        Ty::atom(self.scope.qualified(&name))
    }

    /// An object type: known properties (required ones first, in the order
    /// of `required`), then an index signature for `additionalProperties` /
    /// `patternProperties` schemas.
    fn object(&mut self, s: &Map<String, Value>, indent: usize) -> Ty {
        let empty = Map::new();
        let props = match s.get("properties") {
            Some(Value::Object(p)) => p,
            _ => &empty,
        };
        let required: Vec<&str> = match s.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut order: Vec<&str> = Vec::new();
        for name in required.iter().copied().chain(props.keys().map(String::as_str)) {
            if !order.contains(&name) {
                order.push(name);
            }
        }
        let pad = "  ".repeat(indent + 1);
        let mut members: Vec<String> = Vec::new();
        let mut member_types: Vec<Ty> = Vec::new();
        let mut documented = false;
        let mut any_optional = false;
        for name in order {
            let optional = !required.contains(&name);
            any_optional |= optional;
            let (ty, doc) = match props.get(name) {
                Some(sub) => {
                    let ty = self.ty(sub, indent + 1, None);
                    let doc = match sub.as_object() {
                        Some(m) => jsdoc(description(m), &tags(m), &pad),
                        None => String::new(),
                    };
                    (ty, doc)
                }
                None => (Ty::unknown(), String::new()),
            };
            // Every object has Object.prototype's members in TypeScript's
            // eyes, so an optional `toString?: string` would reject every
            // object literal that leaves it out.
            let ty = if optional && OBJECT_PROTOTYPE.contains(&name) {
                let was =
                    if ty.text.contains('\n') || ty.text.len() > 40 { "a value" } else { ty.text.as_str() };
                Ty::unknown_because(&format!("{was}; the name clashes with Object.prototype"))
            } else {
                ty
            };
            documented |= !doc.is_empty();
            members.push(format!(
                "{doc}{pad}{}{}: {};",
                property_key(name),
                if optional { "?" } else { "" },
                ty.text
            ));
            member_types.push(ty);
        }

        let mut extra: Vec<Ty> = Vec::new();
        if let Some(Value::Object(patterns)) = s.get("patternProperties") {
            for sub in patterns.values() {
                extra.push(self.ty(sub, indent + 1, None));
            }
        }
        let closed = s.get("additionalProperties") == Some(&Value::Bool(false));
        match s.get("additionalProperties") {
            Some(sub @ Value::Object(m)) if !m.is_empty() => extra.push(self.ty(sub, indent + 1, None)),
            Some(Value::Bool(true)) | Some(Value::Object(_)) if !extra.is_empty() => {
                extra.push(Ty::unknown())
            }
            _ => {}
        }
        if !extra.is_empty() {
            // TypeScript requires every known property to fit the index
            // signature, so the signature's type also admits theirs.
            let mut all = extra;
            if !member_types.is_empty() {
                all.extend(member_types.iter().cloned());
                if any_optional {
                    all.push(Ty::atom("undefined"));
                }
            }
            let mut sig = union(all);
            if !members.is_empty() && (sig.text.contains('\n') || sig.text.len() > 80) {
                sig = Ty::unknown();
            }
            members.push(format!("{pad}[key: string]: {};", sig.text));
        }

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

    /// An array or tuple type.
    fn array(&mut self, s: &Map<String, Value>, indent: usize) -> Ty {
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
const OBJECT_KEYWORDS: [&str; 4] = ["properties", "additionalProperties", "patternProperties", "required"];

/// Whether `schema` is nothing but an object type (so it may be declared as
/// an interface).
fn is_plain_object(schema: &Value) -> bool {
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

/// A literal type for a JSON value (`const`, `enum` members).
fn literal(v: &Value) -> Ty {
    literal_at(v, 0)
}

fn literal_at(v: &Value, depth: usize) -> Ty {
    if depth > MAX_DEPTH {
        return Ty::unknown_because("nested too deeply");
    }
    let inner = |x: &Value| literal_at(x, depth + 1).text;
    match v {
        Value::String(s) => Ty::atom(string_literal(s)),
        Value::Array(items) => {
            Ty::atom(format!("[{}]", items.iter().map(inner).collect::<Vec<_>>().join(", ")))
        }
        Value::Object(m) if m.is_empty() => Ty::atom(EMPTY_OBJECT),
        Value::Object(m) => Ty::atom(format!(
            "{{ {} }}",
            m.iter()
                .map(|(k, x)| format!("{}: {}", property_key(k), inner(x)))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        other => Ty::atom(other.to_string()),
    }
}

/// The schema's `description`, or empty.
pub(super) fn description(s: &Map<String, Value>) -> &str {
    s.get("description").and_then(Value::as_str).unwrap_or("")
}

/// JSDoc tags for the constraints worth a reader's attention.
pub(super) fn tags(s: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let integer = match s.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer {
        out.push("@integer".to_owned());
    }
    if let Some(Value::String(f)) = s.get("format") {
        out.push(format!("@format {f}"));
    }
    for kw in [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    ] {
        if let Some(v @ Value::Number(_)) = s.get(kw) {
            out.push(format!("@{kw} {v}"));
        }
    }
    if let Some(Value::String(p)) = s.get("pattern")
        && p.len() <= 80
    {
        out.push(format!("@pattern {p}"));
    }
    if let Some(d) = s.get("default") {
        let text = d.to_string();
        if text.len() <= 80 {
            out.push(format!("@default {text}"));
        }
    }
    if s.get("deprecated") == Some(&Value::Bool(true)) {
        out.push("@deprecated".to_owned());
    }
    out
}

/// `%XX` escapes of a URI fragment decoded (RFC 3986 §2.1); invalid escapes
/// are kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
