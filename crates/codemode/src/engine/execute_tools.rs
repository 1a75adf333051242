//! The model-facing description of `execute_tools`: what a program may do,
//! what a call returns, how calls fail, and the TypeScript declarations of
//! the tools listed now.
//!
//! `execute_tools` is not in the catalog (a program cannot start another
//! program); it is the tool a host shows the model, built from the
//! engine's limits and listed tools. Its size is measured in
//! docs/PERFORMANCE.md.

use serde_json::json;

use crate::catalog::{ToolSource, ToolSpec};
use codemode_base::limits::Limits;

/// The name of the code-mode tool a host shows the model.
pub const EXECUTE_TOOLS: &str = "execute_tools";

/// What a model is told in plan mode, before the listed tools (which are
/// then only the read-only ones).
pub(crate) const PLAN_MODE_LINE: &str = "Plan mode: only read-only tools run (the others are refused and not listed); plan, do not change anything.\n";

/// How `execute_tools`' description gives the listed tools
/// ([`Engine::execute_tools_spec_with`]), largest first.
///
/// [`Engine::execute_tools_spec_with`]: crate::Engine::execute_tools_spec_with
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolsShown {
    /// Their TypeScript declarations (what `codemode types` prints).
    Declarations,
    /// One line per tool, `tool_search` left out (the tool a host lists
    /// beside `execute_tools`): arguments, content type and metadata keys
    /// (`crate::tool::signature_line`).
    Signatures,
    /// Their names only.
    Names,
}

/// The text giving `tools` in form `shown`, ending the description.
pub(crate) fn tools_text(tools: &[ToolSpec], shown: ToolsShown) -> String {
    match shown {
        ToolsShown::Declarations => crate::catalog::declarations(tools),
        ToolsShown::Signatures => {
            let lines: Vec<String> = tools
                .iter()
                .filter(|s| s.name != crate::catalog::TOOL_SEARCH)
                .map(|spec| match crate::tools::signature_note(&spec.name) {
                    Some(note) if spec.source == crate::catalog::ToolSource::Native => {
                        format!("{} // {note}", crate::catalog::signature_line(spec))
                    }
                    _ => crate::catalog::signature_line(spec),
                })
                .collect();
            format!("Tools, as NAME(ARGS): CONTENT; metadata {{KEYS}}:\n{}", lines.join("\n"))
        }
        ToolsShown::Names => {
            let names: Vec<&str> = tools.iter().map(|s| s.name.as_str()).collect();
            format!(
                "Tools: {}. Their input schemas and descriptions come with `tools.search(name)` (or `tool_search`).",
                names.join(", ")
            )
        }
    }
}

/// The `execute_tools` spec for `limits`, naming the MCP `servers` (name
/// and tool count when known) and counting `more` not named, with
/// `declarations` (TypeScript for the listed tools) at the end of its
/// description.
pub(crate) fn execute_tools_spec(
    limits: &Limits,
    servers: &[(String, Option<usize>)],
    more: usize,
    declarations: &str,
) -> ToolSpec {
    let description = format!(
        "Run one JavaScript or TypeScript program that calls tools. The program is an async function body: `return` its result (JSON). Its only way \
out is `await tools.<name>(args)` (= `tools.call(name, args)`); `tools.search(query)` finds other tools; \
call them by exact name. Use `Promise.all` for independent calls (at most {in_flight} \
run at once). A call resolves to `{{content, metadata, truncated}}` (content cut by the tool or at {result_kib} \
KiB has `truncated` saying how to get the rest) or rejects with a ToolError whose `kind` is \"denied\", \
\"refused\", \"failed\", \"timeout\" or \"cancelled\"; catch it to carry on. `console.log` goes to the receipt. No imports, fetch, timers, files or processes \
except through tools. Limits: {deadline} s, {calls} calls, {mem} MiB. The receipt keeps the value \
({value_kib} KiB), logs and decisions. To call tools without a program, \
give `batch` instead of `code`: `{{tool, arguments}}`, a list of them, or `{{tool, arguments: [..]}}`; \
the value is each call's envelope or `{{error}}`, in order.\n\n{mcp}{declarations}",
        mcp = mcp_line(servers, more),
        in_flight = limits.max_in_flight,
        result_kib = limits.result_bytes / 1024,
        deadline = limits.deadline.as_secs_f64(),
        calls = limits.max_calls,
        mem = limits.memory_bytes >> 20,
        value_kib = limits.value_bytes / 1024,
    );
    ToolSpec::new(
        EXECUTE_TOOLS,
        description,
        json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The program: JavaScript or TypeScript, optionally in a markdown fence."
                },
                "batch": {
                    "description": "Instead of code: tool calls without a program.",
                    "anyOf": [
                        {"$ref": "#/$defs/call"},
                        {"type": "array", "items": {"$ref": "#/$defs/call"}, "minItems": 1},
                        {
                            "type": "object",
                            "properties": {
                                "tool": {"type": "string"},
                                "arguments": {"type": "array", "items": {"type": "object"}, "minItems": 1}
                            },
                            "required": ["tool", "arguments"],
                            "additionalProperties": false
                        }
                    ]
                }
            },
            "additionalProperties": false,
            "$defs": {
                "call": {
                    "type": "object",
                    "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
                    "required": ["tool"],
                    "additionalProperties": false
                }
            }
        }),
    )
    .source(ToolSource::Synthetic)
    .destructive(true)
}

/// One line naming the MCP servers whose tools are deferred (and counting
/// `more` not named), or nothing.
fn mcp_line(servers: &[(String, Option<usize>)], more: usize) -> String {
    if servers.is_empty() && more == 0 {
        return String::new();
    }
    let mut named: Vec<String> = servers
        .iter()
        .map(|(name, tools)| match tools {
            Some(n) => format!("{name} ({n} tools)"),
            None => format!("{name} (not started: {})", crate::mcp::naming::connect_name(name)),
        })
        .collect();
    if more > 0 {
        named.push(format!("and {more} more, whose tools tools.search finds"));
    }
    format!(
        "MCP servers (their tools: mcp__<server>__<tool>): {}. {}\n\n",
        named.join(", "),
        crate::mcp::CONTENT_RULE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_carries_the_limits_and_declarations() {
        let spec = execute_tools_spec(&Limits::default(), &[], 0, "declare const x: 1;");
        let d = &spec.description;
        for needle in [
            "at most 16 run at once",
            "at 100 KiB has `truncated`",
            "Limits: 60 s, 1000 calls, 64 MiB",
            "the value (16 KiB)",
            "\"denied\"",
            "\"refused\"",
            "\"failed\"",
            "\"timeout\"",
            "\"cancelled\"",
            "tools.search(query)",
        ] {
            assert!(d.contains(needle), "missing {needle:?} in {d}");
        }
        assert!(d.ends_with("in order.\n\ndeclare const x: 1;"));
        assert!(d.contains("give `batch` instead of `code`"));
        let props = spec.input_schema["properties"].as_object().unwrap();
        assert_eq!(props.keys().collect::<Vec<_>>(), ["code", "batch"]);
    }

    #[test]
    fn signature_lines_give_every_native_tool_with_its_argument_names() {
        let specs: Vec<ToolSpec> = crate::tools::native().iter().map(|t| t.spec()).collect();
        let text = tools_text(&specs, ToolsShown::Signatures);
        eprintln!("{} bytes:\n{text}", text.len());
        for spec in &specs {
            let line = text.lines().find(|l| l.starts_with(&format!("{}(", spec.name)));
            let line = line.unwrap_or_else(|| panic!("no line for {}: {text}", spec.name));
            // Every argument but a deprecated alternative (bash's `timeout_ms`).
            let properties = spec.input_schema["properties"].as_object().unwrap();
            for arg in properties.iter().filter(|(_, s)| s["deprecated"] != true).map(|(k, _)| k) {
                assert!(
                    line.contains(&format!("{arg}:")) || line.contains(&format!("{arg}?:")),
                    "{arg}: {line}"
                );
            }
        }
    }

    #[test]
    fn mcp_servers_are_named_with_their_tool_counts() {
        let servers = [("files".to_owned(), Some(14)), ("memory".to_owned(), None)];
        let d = execute_tools_spec(&Limits::default(), &servers, 0, "").description;
        assert!(d.contains("files (14 tools), memory (not started: mcp_connect__memory)"), "{d}");
    }
}
