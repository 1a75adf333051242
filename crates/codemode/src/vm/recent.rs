//! The last few results the program got, kept so that a run that fails on
//! a result's shape (`r.content.trim` when `content` is an object) can say
//! what the result held (`vm/hints.rs`).
//!
//! Keeping costs a call no copy: the result's JSON text, which the VM has
//! just read, is moved here instead of being dropped, and the oldest goes
//! when more than [`KEPT`] are kept. It is parsed only when a run fails.

use std::collections::{HashMap, VecDeque};

use serde_json::Value as Json;

/// How many results are kept.
const KEPT: usize = 8;
/// Longest result text kept, in bytes: a larger one is described only as
/// what its first byte says.
const KEPT_BYTES: usize = 256 << 10;
/// Most keys named in a description.
const KEYS_SHOWN: usize = 8;

/// One result as the program got it.
#[derive(Debug)]
enum Kept {
    /// Text content: a string.
    Text,
    /// The envelope's JSON.
    Json(String),
}

/// The last results of the run's calls that succeeded, and how many
/// succeeded per tool.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    kept: VecDeque<(u64, String, Kept)>,
    succeeded: HashMap<String, u32>,
}

/// What the last result of a tool held at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Described {
    /// `a string`, `an object with keys `a`, `b``, `undefined`, ...
    pub what: String,
    /// The call whose result it is.
    pub seq: u64,
    /// How many calls of the tool succeeded in the run.
    pub calls: u32,
}

impl Recent {
    /// Keeps call `seq` of `tool`'s result: its `payload` (the envelope's
    /// JSON), or with `text` a text content.
    pub(crate) fn keep(&mut self, seq: u64, tool: &str, payload: String, text: bool) {
        match self.succeeded.get_mut(tool) {
            Some(n) => *n += 1,
            None => {
                self.succeeded.insert(tool.to_owned(), 1);
            }
        }
        let kept = match () {
            _ if text => Kept::Text,
            _ if payload.len() > KEPT_BYTES => return self.forget(tool),
            _ => Kept::Json(payload),
        };
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back((seq, tool.to_owned(), kept));
    }

    /// Drops what is kept of `tool` (its last result is not kept).
    fn forget(&mut self, tool: &str) {
        self.kept.retain(|(_, t, _)| t != tool);
    }

    /// What the content of `tool`'s last result held at `path` (keys from
    /// `content` down), when that result is kept.
    pub(crate) fn describe(&self, tool: &str, path: &[String]) -> Option<Described> {
        let (seq, _, kept) = self.kept.iter().rev().find(|(_, t, _)| t == tool)?;
        let calls = self.succeeded.get(tool).copied().unwrap_or(1);
        let what = match kept {
            Kept::Text if path.is_empty() => "a string".to_owned(),
            Kept::Text => return None,
            Kept::Json(text) => {
                let value: Json = serde_json::from_str(text).ok()?;
                let mut at = value.get("content")?;
                for key in path {
                    match at {
                        Json::Object(map) => match map.get(key) {
                            Some(v) => at = v,
                            None => return Some(Described { what: "undefined".into(), seq: *seq, calls }),
                        },
                        _ => return None,
                    }
                }
                describe(at)
            }
        };
        Some(Described { what, seq: *seq, calls })
    }
}

/// A JSON value in a few words: its type, an array's length, an object's
/// first keys.
pub(crate) fn describe(value: &Json) -> String {
    match value {
        Json::Null => "null".into(),
        Json::Bool(_) => "a boolean".into(),
        Json::Number(_) => "a number".into(),
        Json::String(_) => "a string".into(),
        Json::Array(items) => match items.len() {
            1 => "an array of 1 item".into(),
            n => format!("an array of {n} items"),
        },
        Json::Object(map) if map.is_empty() => "an empty object".into(),
        Json::Object(map) => {
            let shown: Vec<String> = map.keys().take(KEYS_SHOWN).map(|k| format!("`{k}`")).collect();
            let more = match map.len().saturating_sub(KEYS_SHOWN) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let word = if map.len() == 1 { "key" } else { "keys" };
            format!("an object with {word} {}{more}", shown.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    #[test]
    fn the_last_result_of_a_tool_is_described_at_a_path() {
        let mut recent = Recent::default();
        recent.keep(1, "fs", r#"{"content":{"content":"x"},"metadata":null,"truncated":null}"#.into(), false);
        let d = recent.describe("fs", &[]).unwrap();
        assert_eq!((d.what.as_str(), d.seq, d.calls), ("an object with key `content`", 1, 1));
        assert_eq!(recent.describe("fs", &["content".into()]).unwrap().what, "a string");
        assert_eq!(recent.describe("fs", &["nope".into()]).unwrap().what, "undefined");
        assert_eq!(recent.describe("fs", &["content".into(), "x".into()]), None);
        recent.keep(2, "fs", r#"{"content":[1,2]}"#.into(), false);
        let d = recent.describe("fs", &[]).unwrap();
        assert_eq!((d.what.as_str(), d.seq, d.calls), ("an array of 2 items", 2, 2));
        recent.keep(3, "read", "{}".into(), true);
        assert_eq!(recent.describe("read", &[]).unwrap().what, "a string");
        assert_eq!(recent.describe("other", &[]), None);
        // Only the last few are kept.
        for seq in 4..20 {
            recent.keep(seq, "echo", r#"{"content":1}"#.into(), false);
        }
        assert_eq!(recent.describe("fs", &[]), None);
        assert_eq!(recent.describe("echo", &[]).unwrap().what, "a number");
    }
}
