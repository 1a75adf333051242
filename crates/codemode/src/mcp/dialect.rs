//! The MCP configuration files other clients write, read into one shape
//! (docs/MCP.md, "Configuration files"):
//!
//! - `{"mcpServers": {...}}`: Claude Desktop and Claude Code, Cursor,
//!   Windsurf (`serverUrl` for an HTTP server's URL), Cline and Roo Code
//!   (`transportType`, `alwaysAllow`, `disabledTools`, `timeout` in
//!   seconds);
//! - `{"servers": {...}, "inputs": [...]}`: VS Code's `.vscode/mcp.json`
//!   (`type: "stdio" | "http" | "sse"`, `envFile`, `${input:ID}`);
//! - `{"context_servers": {...}}`: Zed's `settings.json`, entries either
//!   `{"command": "...", "args": [...], "env": {...}}` or the older
//!   `{"command": {"path": "...", "args": [...], "env": {...}}}`.
//!
//! The text is JSONC (JSON with `//` and `/* */` comments and trailing
//! commas, as VS Code and Zed write their files), read by the
//! `jsonc-parser` crate. Each entry is rewritten to codemode's own keys
//! ([`normalise`]); keys no dialect gives an effect in codemode are
//! collected so the caller can warn about them once each.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::config::ConfigError;

/// The keys of a server entry that have an effect in codemode, after
/// [`normalise`] (which maps `serverUrl`, `transportType`, `alwaysAllow`
/// and Zed's `command` object onto them).
const KNOWN: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "timeout_ms",
    "max_total_timeout_ms",
    "startup_timeout_ms",
    "read_only",
    "disabled",
    "max_in_flight",
    "rate",
    "retry",
    "scope",
    "envFile",
    "disabledTools",
    "autoApprove",
    "timeout",
    "oauth",
    "roots",
];

/// One VS Code input (`inputs[]`: `{"type": "promptString", "id",
/// "description", "password", "default"}`), referred to as `${input:ID}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Input {
    /// Its `description`, quoted in the error when it has no value.
    pub(crate) description: Option<String>,
    /// Its `default` (a `pickString`'s too), used when the environment
    /// does not give a value.
    pub(crate) default: Option<String>,
    /// `password: true`: even its default is a secret.
    pub(crate) password: bool,
}

/// A config file's servers and inputs, in the order of the file's keys
/// (serde_json's map order: by name).
pub(crate) struct Document {
    /// Each server's name and its entry as written.
    pub(crate) servers: Vec<(String, Value)>,
    /// VS Code's inputs by `id`.
    pub(crate) inputs: BTreeMap<String, Input>,
}

/// Parses JSONC `text` (comments and trailing commas allowed; nothing
/// looser).
///
/// # Errors
/// [`ConfigError::Syntax`] with the parser's message, line, column and
/// byte offset.
pub(crate) fn parse_text(text: &str) -> Result<Value, ConfigError> {
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    jsonc_parser::parse_to_serde_value::<Value>(text, &options)
        .map_err(|e| ConfigError::Syntax { message: format!("{e} (byte {})", e.range().start) })
}

/// The servers object of `top`: `mcpServers`, else `servers` (VS Code),
/// else `context_servers` (Zed), with VS Code's `inputs`.
///
/// # Errors
/// [`ConfigError::Syntax`] when `top` has none of them, or one is not an
/// object; [`ConfigError::Field`] (server `inputs`) for a malformed input.
pub(crate) fn document(top: &Value) -> Result<Document, ConfigError> {
    let syntax = |message: String| ConfigError::Syntax { message };
    let Some(top) = top.as_object() else {
        return Err(syntax("the top level is not an object".into()));
    };
    let mut found: Vec<(&str, &Value)> = ["mcpServers", "servers", "context_servers"]
        .iter()
        .filter_map(|k| top.get(*k).map(|v| (*k, v)))
        .collect();
    // An empty list beside a full one is no conflict.
    if found.len() > 1 {
        let full: Vec<(&str, &Value)> =
            found.iter().copied().filter(|(_, v)| v.as_object().is_none_or(|o| !o.is_empty())).collect();
        found = if full.is_empty() { found[..1].to_vec() } else { full };
    }
    let (key, servers) = match found.as_slice() {
        [] => return Err(syntax("no `mcpServers`, `servers` or `context_servers` object".into())),
        [one] => *one,
        [(a, _), (b, _), ..] => {
            return Err(syntax(format!(
                "both `{a}` and `{b}` hold servers; codemode reads one list per file: keep one"
            )));
        }
    };
    let Some(servers) = servers.as_object() else {
        return Err(syntax(format!("`{key}` is not an object")));
    };
    let servers = servers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Document { servers, inputs: inputs(top.get("inputs"))? })
}

fn inputs(raw: Option<&Value>) -> Result<BTreeMap<String, Input>, ConfigError> {
    let err = |field: String, message: &str| ConfigError::Field {
        server: "inputs".into(),
        field,
        message: message.to_owned(),
    };
    let Some(raw) = raw else { return Ok(BTreeMap::new()) };
    let Some(list) = raw.as_array() else {
        return Err(err("inputs".into(), "must be an array of {\"id\", \"type\", ...} objects"));
    };
    let mut out = BTreeMap::new();
    for (i, input) in list.iter().enumerate() {
        let Some(id) = input.get("id").and_then(Value::as_str) else {
            return Err(err(format!("inputs[{i}].id"), "every input needs a string `id`"));
        };
        let default = match input.get("default") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(err(format!("inputs[{i}].default"), "must be a string")),
        };
        out.insert(
            id.to_owned(),
            Input {
                description: input.get("description").and_then(Value::as_str).map(str::to_owned),
                default,
                password: input.get("password").and_then(Value::as_bool) == Some(true),
            },
        );
    }
    Ok(out)
}

/// `entry` (server `name`) rewritten to codemode's keys, and the keys it
/// holds that have no effect in codemode (left in the entry; serde skips
/// them):
///
/// - `serverUrl` (Windsurf) becomes `url`; `transportType` (Cline) becomes
///   `type`; `alwaysAllow` (Cline, Roo Code) joins `autoApprove`;
/// - Zed's `command: {"path", "args", "env"}` becomes `command`, `args`,
///   `env`; Zed's `source: "custom"` is dropped (`"extension"` is an error:
///   codemode runs no Zed extension).
///
/// An entry that is not an object is returned as it is (the caller's
/// deserialisation says what is wrong with it).
///
/// # Errors
/// [`ConfigError::Field`] when two spellings of one key are both given, or
/// for a Zed extension server.
pub(crate) fn normalise(name: &str, entry: &Value) -> Result<(Value, Vec<String>), ConfigError> {
    let Some(entry) = entry.as_object() else { return Ok((entry.clone(), Vec::new())) };
    let mut entry: Map<String, Value> = entry.clone();
    rename_aliases(name, &mut entry)?;
    merge_always_allow(name, &mut entry)?;
    zed_enabled(name, &mut entry)?;
    zed_source(name, &mut entry)?;
    zed_command_object(name, &mut entry)?;
    let unknown = entry.keys().filter(|k| !KNOWN.contains(&k.as_str())).cloned().collect();
    Ok((Value::Object(entry), unknown))
}

/// The `type` values codemode reads (compared in lower case).
const KNOWN_TYPES: &[&str] = &["stdio", "http", "streamable-http", "streamablehttp", "streamable_http"];

/// Why the entry `entry` (after [`normalise`]) names no transport codemode
/// can use, naming the key at fault; `None` when it does. Such an entry is
/// skipped with a warning, not an error, so one server written for another
/// client does not stop the file (and every run of the workspace):
///
/// - `type: "sse"`: the legacy HTTP+SSE transport (MCP 2024-11-05), which
///   codemode does not support;
/// - a `type` string codemode does not know;
/// - neither `command` (stdio) nor `url` (HTTP) where codemode reads them,
///   as in an entry with `url` and `headers` nested under `transport`
///   (named: the keys it holds that codemode does not read).
pub(crate) fn unusable(entry: &Value) -> Option<String> {
    let entry = entry.as_object()?;
    let kind = entry.get("type").and_then(Value::as_str).map(str::to_ascii_lowercase);
    match kind.as_deref() {
        Some("sse") => {
            return Some(
                "`type` is \"sse\", the legacy HTTP+SSE transport (MCP 2024-11-05), which codemode does \
                 not support; if the server also speaks streamable HTTP, give that endpoint as `url` with \
                 `\"type\": \"http\"`"
                    .into(),
            );
        }
        Some(other) if !KNOWN_TYPES.contains(&other) => {
            return Some(format!(
                "`type` is {:?}, a transport codemode does not know (it reads \"stdio\" and \"http\")",
                other
            ));
        }
        _ => {}
    }
    if entry.contains_key("command") || entry.contains_key("url") {
        return None;
    }
    let odd: Vec<String> =
        entry.keys().filter(|k| !KNOWN.contains(&k.as_str())).map(|k| format!("`{k}`")).collect();
    let base = "it has neither `command` (a stdio server) nor `url` (an HTTP server) at the top of its entry";
    Some(match odd.as_slice() {
        [] => format!("{base}; give one to use it"),
        [one] => {
            format!("{base}; its {one} is a shape codemode does not read: write `command` or `url` beside it")
        }
        more => format!(
            "{base}; its {} are a shape codemode does not read: write `command` or `url` at the top",
            more.join(", ")
        ),
    })
}

/// [`ConfigError::Field`] of server `name`'s `field`.
fn field_error(name: &str, field: &str, message: String) -> ConfigError {
    ConfigError::Field { server: name.to_owned(), field: field.to_owned(), message }
}

/// Windsurf's `serverUrl` becomes `url`, Cline's `transportType` `type`.
///
/// # Errors
/// The alias, when both spellings are given.
fn rename_aliases(name: &str, entry: &mut Map<String, Value>) -> Result<(), ConfigError> {
    for (alias, key) in [("serverUrl", "url"), ("transportType", "type")] {
        if let Some(value) = entry.remove(alias) {
            if entry.contains_key(key) {
                return Err(field_error(name, alias, format!("give either `{alias}` or `{key}`, not both")));
            }
            entry.insert(key.to_owned(), value);
        }
    }
    Ok(())
}

/// Cline's and Roo Code's `alwaysAllow` joins `autoApprove`.
///
/// # Errors
/// `alwaysAllow`, when the two are not both lists.
fn merge_always_allow(name: &str, entry: &mut Map<String, Value>) -> Result<(), ConfigError> {
    let Some(allow) = entry.remove("alwaysAllow") else { return Ok(()) };
    match (entry.remove("autoApprove"), allow) {
        (None, allow) => {
            entry.insert("autoApprove".into(), allow);
        }
        (Some(Value::Array(mut a)), Value::Array(b)) => {
            a.extend(b);
            entry.insert("autoApprove".into(), Value::Array(a));
        }
        _ => {
            return Err(field_error(
                name,
                "alwaysAllow",
                "`alwaysAllow` and `autoApprove` must be lists of tool names".into(),
            ));
        }
    }
    Ok(())
}

/// Zed's `"enabled": false` is codemode's `"disabled": true`.
///
/// # Errors
/// `enabled`, when it is not a boolean or `disabled` is given too.
fn zed_enabled(name: &str, entry: &mut Map<String, Value>) -> Result<(), ConfigError> {
    let Some(enabled) = entry.remove("enabled") else { return Ok(()) };
    match (enabled, entry.contains_key("disabled")) {
        (Value::Bool(_), true) => {
            Err(field_error(name, "enabled", "give either `enabled` or `disabled`, not both".into()))
        }
        (Value::Bool(enabled), false) => {
            entry.insert("disabled".into(), Value::Bool(!enabled));
            Ok(())
        }
        _ => Err(field_error(name, "enabled", "must be true or false".into())),
    }
}

/// Zed's `source`: `"custom"` is dropped, and so is `"extension"` when the
/// entry gives its own `command` (it then runs as custom).
///
/// # Errors
/// `source`, for an extension's entry without a `command`.
fn zed_source(name: &str, entry: &mut Map<String, Value>) -> Result<(), ConfigError> {
    match entry.get("source").and_then(Value::as_str) {
        // An extension's entry that gives its own command runs as custom.
        Some("custom") | Some("extension") if entry.contains_key("command") => {
            entry.remove("source");
        }
        Some("custom") => {
            entry.remove("source");
        }
        Some("extension") => {
            return Err(field_error(
                name,
                "source",
                "this Zed context server comes from a Zed extension, which codemode cannot run; \
                 give its `command` (and `args`) instead"
                    .into(),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Zed's older shape `{"command": {"path", "args", "env"}}` becomes
/// `command`, `args` and `env`; other keys of the object are kept as
/// `command.KEY` (and warned about as unknown).
///
/// # Errors
/// `args` or `env` given both inside `command` and beside it, or
/// `command.path` missing.
fn zed_command_object(name: &str, entry: &mut Map<String, Value>) -> Result<(), ConfigError> {
    let Some(Value::Object(command)) = entry.get("command").cloned() else { return Ok(()) };
    for key in ["args", "env"] {
        if command.contains_key(key) && entry.contains_key(key) {
            return Err(field_error(
                name,
                key,
                format!("give `{key}` either inside `command` or beside it, not both"),
            ));
        }
    }
    let Some(path) = command.get("path") else {
        return Err(field_error(
            name,
            "command.path",
            "a `command` object needs the program's `path`".into(),
        ));
    };
    entry.insert("command".into(), path.clone());
    for (key, value) in command {
        match key.as_str() {
            "path" => {}
            "args" | "env" => {
                entry.insert(key, value);
            }
            other => {
                entry.insert(format!("command.{other}"), value);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_with_two_server_lists_is_refused_naming_both() {
        let top = json!({"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"command": "y"}}});
        let err = document(&top).err().expect("refused").to_string();
        assert!(err.contains("`mcpServers`") && err.contains("`servers`"), "{err}");
        let top = json!({"mcpServers": {}, "servers": {"b": {"command": "y"}}});
        assert_eq!(document(&top).unwrap().servers.len(), 1);
        // Zed's `enabled: false`.
        let (e, _) = normalise("z", &json!({"command": "x", "enabled": false})).unwrap();
        assert_eq!(e, json!({"command": "x", "disabled": true}));
        let (e, _) = normalise("z", &json!({"source": "extension", "command": "x"})).unwrap();
        assert_eq!(e, json!({"command": "x"}));
    }

    #[test]
    fn jsonc_comments_and_trailing_commas_parse_and_errors_say_where() {
        let text = "{\n  // a comment\n  \"servers\": {/* x */ \"a\": {\"command\": \"x\",},},\n}";
        assert_eq!(parse_text(text).unwrap(), json!({"servers": {"a": {"command": "x"}}}));
        let err = parse_text("{\n  \"a\": 'x'\n}").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("byte"), "{err}");
        let err = parse_text("{\"a\": [1 2]}").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn the_three_top_level_shapes_and_inputs() {
        for key in ["mcpServers", "servers", "context_servers"] {
            let doc = document(&json!({key: {"s": {"command": "x"}}, "theme": "dark"})).unwrap();
            assert_eq!(doc.servers.len(), 1);
        }
        let doc = document(&json!({"servers": {}, "inputs": [
            {"type": "promptString", "id": "key", "description": "API key", "password": true},
            {"type": "pickString", "id": "region", "options": ["eu", "us"], "default": "eu"}
        ]}))
        .unwrap();
        assert!(doc.inputs["key"].password && doc.inputs["key"].default.is_none());
        assert_eq!(doc.inputs["region"].default.as_deref(), Some("eu"));
        assert!(matches!(document(&json!({"other": {}})), Err(ConfigError::Syntax { .. })));
        assert!(matches!(document(&json!({"servers": {}, "inputs": [{"type": "promptString"}]})),
            Err(ConfigError::Field { field, .. }) if field == "inputs[0].id"));
    }

    #[test]
    fn entries_are_rewritten_to_codemode_keys() {
        let (e, unknown) =
            normalise("w", &json!({"serverUrl": "https://h/mcp", "description": "d"})).unwrap();
        assert_eq!(e, json!({"url": "https://h/mcp", "description": "d"}));
        assert_eq!(unknown, ["description"]);
        let (e, _) = normalise(
            "c",
            &json!({"command": "x", "alwaysAllow": ["a"], "autoApprove": ["b"], "transportType": "stdio"}),
        )
        .unwrap();
        assert_eq!(e, json!({"command": "x", "autoApprove": ["b", "a"], "type": "stdio"}));
        let (e, unknown) =
            normalise("z", &json!({"source": "custom", "command": {"path": "p", "args": ["1"], "env": {"A": "b"}}, "settings": {}}))
                .unwrap();
        assert_eq!(e, json!({"command": "p", "args": ["1"], "env": {"A": "b"}, "settings": {}}));
        assert_eq!(unknown, ["settings"]);
        for bad in [
            json!({"url": "a", "serverUrl": "b"}),
            json!({"source": "extension"}),
            json!({"command": {"args": []}}),
            json!({"command": {"path": "p", "args": []}, "args": []}),
        ] {
            assert!(matches!(normalise("s", &bad), Err(ConfigError::Field { .. })), "{bad}");
        }
    }
}
