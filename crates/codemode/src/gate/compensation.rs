//! The call that undoes another, named in policy for a rollback
//! (`[tools."NAME"] compensate = { tool = "...", args = { ... } }`,
//! docs/POLICY.md): its arguments are a template over the original call's
//! arguments and result.
//!
//! The template rule: in `args`, every string is looked at, at any depth
//! (in arrays and tables too). A string that is exactly one placeholder,
//! `"{args.PATH}"` or `"{result.PATH}"`, becomes the value found there, of
//! any type; placeholders inside other text become the value's text (a
//! string as it is, anything else as JSON). `PATH` is keys and array
//! indices joined by `.` (`{result.id}`, `{args.entities.0.name}`). Any
//! other value goes as it is. `{{` and `}}` write a literal brace. A
//! placeholder naming nothing makes the compensation fail to be made, and
//! the rollback names the call as not undone.

use serde_json::Value;

/// A compensating call: `tool`, with `args` as a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compensation {
    /// The tool that undoes the call (an exact name).
    pub tool: String,
    /// The arguments, a JSON object whose strings may hold placeholders.
    pub args: serde_json::Map<String, Value>,
}

impl Compensation {
    /// The compensating call's arguments for a call made with `args` that
    /// returned `result` (its result's content).
    ///
    /// # Errors
    /// A placeholder names nothing in the call, or is not of the form.
    pub fn arguments(&self, args: &Value, result: &Value) -> Result<Value, String> {
        expand(&Value::Object(self.args.clone()), args, result)
    }

    /// Checks the template's placeholders are well formed (a policy is
    /// refused when not).
    ///
    /// # Errors
    /// The first bad placeholder, saying what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.tool.is_empty() {
            return Err("`tool` is empty: name the tool that undoes the call".to_owned());
        }
        check_value(&Value::Object(self.args.clone()))
    }
}

fn check_value(template: &Value) -> Result<(), String> {
    match template {
        Value::String(text) => pieces(text).map(|_| ()),
        Value::Array(items) => items.iter().try_for_each(check_value),
        Value::Object(map) => map.values().try_for_each(check_value),
        _ => Ok(()),
    }
}

fn expand(template: &Value, args: &Value, result: &Value) -> Result<Value, String> {
    Ok(match template {
        Value::String(text) => {
            let parts = pieces(text)?;
            if let [Piece::Place(root, path)] = parts.as_slice() {
                return lookup(root, path, args, result).cloned();
            }
            let mut out = String::new();
            for part in parts {
                match part {
                    Piece::Text(t) => out.push_str(&t),
                    Piece::Place(root, path) => match lookup(&root, &path, args, result)? {
                        Value::String(s) => out.push_str(s),
                        other => out.push_str(&other.to_string()),
                    },
                }
            }
            Value::String(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| expand(v, args, result)).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), expand(v, args, result)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// A piece of a template string.
enum Piece {
    Text(String),
    /// `{ROOT.PATH}`: `args` or `result`, and the path's parts.
    Place(String, Vec<String>),
}

fn pieces(text: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        literal.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{").or_else(|| tail.strip_prefix("}}")) {
            literal.push(tail.as_bytes()[0] as char);
            rest = after;
            continue;
        }
        if tail.starts_with('}') {
            return Err(format!("`{text}`: a lone `}}` (write `}}}}` for a brace)"));
        }
        let end = tail.find('}').ok_or_else(|| format!("`{text}`: a `{{` without its `}}`"))?;
        let inner = &tail[1..end];
        let mut parts = inner.split('.');
        let root = parts.next().unwrap_or_default();
        if root != "args" && root != "result" {
            return Err(format!("`{{{inner}}}` in `{text}`: a placeholder starts with `args` or `result`"));
        }
        if !literal.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut literal)));
        }
        out.push(Piece::Place(root.to_owned(), parts.map(str::to_owned).collect()));
        rest = &tail[end + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() || out.is_empty() {
        out.push(Piece::Text(literal));
    }
    Ok(out)
}

fn lookup<'a>(root: &str, path: &[String], args: &'a Value, result: &'a Value) -> Result<&'a Value, String> {
    let mut at = if root == "args" { args } else { result };
    for key in path {
        let next = match at {
            Value::Object(map) => map.get(key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        at = next
            .ok_or_else(|| format!("`{{{root}.{}}}` names nothing in the call's {root}", path.join(".")))?;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn comp(args: Value) -> Compensation {
        Compensation { tool: "t".into(), args: args.as_object().unwrap().clone() }
    }

    #[test]
    fn placeholders_take_values_whole_or_as_text() {
        let c = comp(json!({"id": "{result.id}", "repo": "{args.repo}", "names": ["{args.e.0.name}"],
            "note": "undo {result.id} of {{x}}", "n": 3}));
        let out = c.arguments(&json!({"repo": "r", "e": [{"name": "a"}]}), &json!({"id": 7})).unwrap();
        assert_eq!(out, json!({"id": 7, "repo": "r", "names": ["a"], "note": "undo 7 of {x}", "n": 3}));
        let missing = c.arguments(&json!({}), &json!({})).unwrap_err();
        assert!(missing.contains("names nothing"), "{missing}");
        assert!(comp(json!({"x": "{other.id}"})).check().is_err());
        assert!(comp(json!({"x": "{args.id"})).check().is_err());
        assert!(comp(json!({"x": ["{result}"]})).check().is_ok());
    }
}

#[cfg(test)]
mod config_tests {
    use crate::config::ConfigFile;
    use serde_json::json;

    const FILE: &str = r#"
[tools."mcp__srv__create_issue"]
compensate = { tool = "mcp__srv__delete_issue", args = { id = "{result.id}", repo = "{args.repo}" } }
"#;

    #[test]
    fn a_compensation_is_read_checked_and_dropped_from_an_untrusted_file() {
        let file = ConfigFile::from_toml(FILE, None).unwrap();
        let c = file.policy.tools["mcp__srv__create_issue"].compensate.clone().unwrap();
        assert_eq!(c.tool, "mcp__srv__delete_issue");
        assert_eq!(
            c.arguments(&json!({"repo": "r"}), &json!({"id": 9})).unwrap(),
            json!({"id": 9, "repo": "r"})
        );
        let bad = FILE.replace("{result.id}", "{reslt.id}");
        let e = ConfigFile::from_toml(&bad, None).unwrap_err().to_string();
        assert!(e.contains("compensate") && e.contains("starts with `args` or `result`"), "{e}");
        let (kept, dropped) = file.without_grants();
        assert!(kept.policy.tools["mcp__srv__create_issue"].compensate.is_none());
        assert!(dropped.iter().any(|d| d.contains("compensating call")), "{dropped:?}");
    }
}
