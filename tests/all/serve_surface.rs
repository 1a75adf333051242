//! What a model sees of `codemode mcp serve` with three reference MCP
//! servers configured (server-everything, server-filesystem,
//! server-memory), through the official TypeScript SDK client (issue 32,
//! items 1-3): the native tools' signature lines within the 6 KiB list,
//! MCP output schemas in `tool_search` results and the rule for an MCP
//! result's `content`, and a `tool_search` that neither claims nor does
//! activation.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp_support::node_server;
use crate::serve_clients::{client, clients};

/// A workspace and an MCP config (outside it, so trusted) naming the
/// three servers; `HOME` is a fresh folder, so no schema cache knows their
/// tools (the longest description: each server "not started").
struct ThreeServers {
    ws: tempfile::TempDir,
    config: tempfile::TempDir,
}

impl ThreeServers {
    fn new() -> ThreeServers {
        let ws = crate::common::workspace();
        std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        let config = tempfile::tempdir().unwrap();
        let servers = json!({"mcpServers": {
            "everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]},
            "filesystem": {"command": "node", "args": [node_server("server-filesystem"), ws.path()]},
            "memory": {"command": "node", "args": [node_server("server-memory")],
                       "env": {"MEMORY_FILE_PATH": config.path().join("memory.jsonl")}},
        }});
        std::fs::write(config.path().join("mcp.json"), servers.to_string()).unwrap();
        ThreeServers { ws, config }
    }

    fn mcp_config(&self) -> String {
        self.config.path().join("mcp.json").display().to_string()
    }

    /// The `server` of a client plan: `codemode mcp serve` here.
    fn server(&self) -> Value {
        json!({
            "command": env!("CARGO_BIN_EXE_codemode"),
            "args": ["mcp", "serve", "--workspace", self.ws.path(), "--mcp-config", self.mcp_config()],
            "env": {
                "PATH": std::env::var("PATH").unwrap_or_default(),
                "HOME": self.config.path(),
                "XDG_CONFIG_HOME": self.config.path().join("no-trust-record"),
                "XDG_CACHE_HOME": self.config.path().join("cache"),
                "XDG_STATE_HOME": crate::common::XDG_STATE,
            },
        })
    }

    /// Each native tool's name and argument names, as `codemode tools
    /// --json` gives them (the tools' own input schemas), deprecated ones
    /// left out as the lines leave them out.
    fn native_tools(&self) -> Vec<(String, Vec<String>)> {
        let out = Command::new(env!("CARGO_BIN_EXE_codemode"))
            .args(["tools", "--json", "--workspace"])
            .arg(self.ws.path())
            .env("HOME", self.config.path())
            .env("XDG_STATE_HOME", crate::common::XDG_STATE)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["source"] == "native")
            .map(|t| {
                // Every argument but a deprecated alternative (bash's `timeout_ms`).
                let args = t["input_schema"]["properties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(_, schema)| schema["deprecated"] != true)
                    .map(|(name, _)| name.clone())
                    .collect();
                (t["name"].as_str().unwrap().to_owned(), args)
            })
            .collect()
    }

    fn path(&self) -> &Path {
        self.ws.path()
    }
}

fn descriptions(listed: &Value) -> (String, String) {
    let text = |i: usize| listed["listed"][i]["description"].as_str().unwrap().to_owned();
    (text(0), text(1))
}

#[test]
fn the_served_list_gives_each_native_tool_a_signature_line_within_6_kib() {
    let Some(dir) = clients() else { return };
    let three = ThreeServers::new();
    let natives = three.native_tools();
    let names: Vec<&str> = natives.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["read", "write", "edit", "file_search", "grep_files", "bash"]);
    let plan = json!({"server": three.server(), "steps": [{"list": true}]});
    let out = client(&dir, "v1", &plan);
    let listed = &out.steps[0];
    assert_eq!(listed["tools"], json!(["execute_tools", "tool_search"]));
    let bytes = listed["bytes"].as_u64().unwrap();
    assert!(bytes <= codemode_serve::LIST_BUDGET as u64, "tools/list is {bytes} bytes");
    let (execute, _) = descriptions(listed);
    // All three servers named, none started yet.
    for server in ["everything", "filesystem", "memory"] {
        assert!(execute.contains(&format!("{server} (not started: mcp_connect__{server})")), "{execute}");
    }
    for (name, args) in &natives {
        let line = execute
            .lines()
            .find(|l| l.starts_with(&format!("{name}({{")))
            .unwrap_or_else(|| panic!("no signature line for {name}:\n{execute}"));
        for arg in args {
            assert!(
                line.contains(&format!("{arg}: ")) || line.contains(&format!("{arg}?: ")),
                "{arg}: {line}"
            );
        }
    }
    // Result shapes: content types and metadata keys.
    assert!(execute.contains("read({path: string"), "{execute}");
    assert!(execute.contains("}): string; metadata {path, format, next_offset, eof"), "{execute}");
    assert!(execute.contains("{exit_code: number|null, stdout: string, stderr: string"), "{execute}");
    // What a first program got wrong without it (playing the model): read's
    // numbered lines and its window.
    assert!(execute.contains("// 'lines' numbers lines; JSON.parse needs 'text'."), "{execute}");
    assert!(execute.contains("64 KiB a call: go on at next_offset"), "{execute}");
    // Nothing is said to be declared below when nothing is.
    assert!(!execute.contains("declared below"), "{execute}");
    // The rule for an MCP tool's content, with and without structuredContent.
    assert!(execute.contains("`content` is its structuredContent when it gives one"), "{execute}");
    assert!(execute.contains("a value when it is a JSON object or array, else a string"), "{execute}");
}

#[test]
fn tool_search_shows_output_schemas_and_activates_nothing() {
    let Some(dir) = clients() else { return };
    let three = ThreeServers::new();
    std::fs::write(three.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let read_notes = format!(
        "const r = await tools.mcp__filesystem__read_text_file({{path: {:?}}}); \
         return {{type: typeof r.content, text: r.content.content}}",
        three.path().join("notes.txt").display().to_string()
    );
    let plan = json!({"server": three.server(), "steps": [
        {"list": true},
        {"call": {"name": "tool_search", "arguments": {"query": "filesystem read text file", "limit": 3}}},
        {"list": true},
        {"call": {"name": "mcp__filesystem__read_text_file",
                  "arguments": {"path": three.path().join("notes.txt")}}},
        {"call": {"name": "execute_tools", "arguments": {"code": read_notes}}},
    ]});
    let out = client(&dir, "v1", &plan);
    let (_, search) = descriptions(&out.steps[0]);
    assert!(!search.contains("adds the deferred matches") && !search.contains("activated"), "{search}");
    assert!(search.contains("output_schema"), "{search}");

    // The search started server-filesystem and found its tool, with the
    // shape of its content; it activated nothing.
    let found = out.structured(1);
    let tool = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__filesystem__read_text_file")
        .unwrap_or_else(|| panic!("{found}"));
    assert_eq!(tool["output_schema"]["properties"]["content"]["type"], "string", "{tool}");
    for key in ["activated", "evicted_tool_references", "unavailable_tool_references"] {
        assert!(found.get(key).is_none(), "{key}: {found}");
    }
    // The list is the same two tools, and the found tool is not callable
    // directly (as nothing said it would be).
    assert_eq!(out.steps[2]["tools"], json!(["execute_tools", "tool_search"]));
    let direct = &out.steps[3];
    assert!(direct["error"].as_str().is_some_and(|e| e.contains("unknown tool")), "{direct}");
    // From a program it is called by name, and its content is its
    // structuredContent, as the description and output_schema say.
    let s = out.structured(4);
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["value"], json!({"type": "object", "text": "alpha\nbeta\n"}), "{s}");
}
