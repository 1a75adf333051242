//! `$ref` resolution (JSON Schema Core §8.2.3): where a reference leads
//! (the root, a `$defs`/`definitions` entry, another place inlined), the
//! names definitions get and share between documents, and the cycles of
//! direct references TypeScript rejects as circular.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::ty::Ty;
use super::{DefSet, Doc, MAX_DEPTH};
use crate::catalog::typescript::text::pascal_name;

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

impl<'v> Doc<'_, 'v> {
    /// The definitions of the document, as an existing set of the scope
    /// when an earlier document had identical ones.
    pub(super) fn def_set(&mut self) -> Option<usize> {
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
    pub(super) fn refers_to_root(&self, v: &Value, depth: usize) -> bool {
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

    pub(super) fn def_schema(&self, key: &str) -> Option<&'v Value> {
        self.root.pointer(key)
    }

    /// The bare name of the definition at `key`, given (and queued for
    /// declaration) on first use.
    pub(super) fn def_name(&mut self, key: &str) -> String {
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
    pub(super) fn find_cycles(&self) -> HashMap<String, usize> {
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

    /// The type `$ref` `r` stands for: a qualified name (the root or a
    /// definition), the target inlined, or `unknown` with the reason
    /// (circular, recursive, unsupported).
    pub(super) fn reference(&mut self, r: &str, indent: usize, direct: Option<usize>) -> Ty {
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
