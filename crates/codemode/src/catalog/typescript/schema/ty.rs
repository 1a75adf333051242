//! A rendered TypeScript type ([`Ty`]) and how types combine: unions,
//! intersections and literal types of JSON values.

use serde_json::Value;

use super::MAX_DEPTH;
use crate::catalog::typescript::text::{comment_safe, property_key, string_literal};

/// The type of an object schema that says nothing about its properties.
pub(super) const OPEN_OBJECT: &str = "Record<string, unknown>";
/// The type of an object schema that admits no property.
pub(super) const EMPTY_OBJECT: &str = "Record<string, never>";

/// A rendered type and its outer form (so callers add parentheses where
/// TypeScript needs them).
#[derive(Debug, Clone)]
pub(in crate::catalog::typescript) struct Ty {
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
    pub(super) fn atom(text: impl Into<String>) -> Ty {
        Ty { text: text.into(), kind: Kind::Atom }
    }

    pub(super) fn unknown() -> Ty {
        Ty { text: "unknown".into(), kind: Kind::Unknown }
    }

    pub(super) fn unknown_because(why: &str) -> Ty {
        Ty { text: format!("unknown /* {} */", comment_safe(why)), kind: Kind::Unknown }
    }

    pub(super) fn never() -> Ty {
        Ty { text: "never".into(), kind: Kind::Never }
    }

    /// The text, in parentheses when it is a union or intersection (or
    /// carries a comment), for use before `[]` or `?`.
    pub(super) fn tight(&self) -> String {
        let commented = self.kind == Kind::Unknown && self.text != "unknown";
        if matches!(self.kind, Kind::Union | Kind::Intersection) || commented {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }

    /// An object type written as a block (`{ ... }`).
    pub(super) fn is_block(&self) -> bool {
        self.kind == Kind::Atom && self.text.starts_with('{')
    }
}

/// `A | B | ...`: `unknown` when a member is, `never` members left out,
/// repeated members once.
pub(super) fn union(members: Vec<Ty>) -> Ty {
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

/// `A & B & ...`: `never` when a part is, `unknown` parts left out (the
/// first commented one stands alone when nothing else is left), repeated
/// parts once.
pub(super) fn intersection(parts: Vec<Ty>) -> Ty {
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

/// A literal type for a JSON value (`const`, `enum` members).
pub(super) fn literal(v: &Value) -> Ty {
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
