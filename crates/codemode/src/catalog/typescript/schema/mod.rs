//! One JSON Schema document -> TypeScript type text, plus the named types
//! (`$defs`, a self-referenced root, MCP argument and result types) it
//! declares in its namespace ([`Scope`]).
//!
//! Keywords follow JSON Schema 2020-12 (Core §8.2.3 `$defs`/`$ref`,
//! Validation §6) and the draft-07 spellings still common in MCP servers
//! (`definitions`, `items` as an array, `additionalItems`); OpenAPI 3.0's
//! `nullable: true` is honoured too. What TypeScript cannot say becomes
//! `unknown` with a comment; nothing here fails or panics.
//!
//! This file holds the namespace and the entry point; the rendering is in
//! `keywords.rs` (a schema's keywords -> its type), `object.rs` (object and
//! array types), `references.rs` (`$ref`, definitions, cycles), `ty.rs`
//! (a rendered type, unions, intersections, literals) and `tags.rs`
//! (JSDoc descriptions and tags).

mod keywords;
mod object;
mod references;
mod tags;
mod ty;

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::Value;

use super::text::{jsdoc, pascal_name};
use object::is_plain_object;
use tags::{description, tags};
use ty::Ty;

/// Deeper nesting than this renders as `unknown` (guards the stack against
/// pathological schemas).
const MAX_DEPTH: usize = 48;

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
}
