//! Ranking quality of `tool_search` on a fixed catalog of real tools: the
//! native tools plus every tool of the reference MCP servers, as they list
//! them (tests/fixtures/schemas/*.json, captured from the real servers by
//! tests/fixtures/schemas/capture.py).
//!
//! The queries are written the way a model asks; each names the tools that
//! answer it (several when more than one would do).

use codemode::{
    Engine, Tool, ToolSpec, tool::Annotations, tool::Loading, tool::ToolContext, tool::ToolFuture,
    tool::ToolOutput, tool::ToolSource,
};
use serde_json::{Value, json};

/// A real MCP server's tool, as listed, registered as a deferred tool.
struct Listed(ToolSpec);

impl Tool for Listed {
    fn spec(&self) -> ToolSpec {
        self.0.clone()
    }
    fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
    }
}

const SERVERS: &[&str] =
    &["everything", "filesystem", "memory", "time", "git", "fetch", "sequential-thinking"];

fn fixture_tools() -> Vec<Listed> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/schemas");
    let mut out = Vec::new();
    for server in SERVERS {
        let text = std::fs::read_to_string(format!("{dir}/{server}.json"))
            .unwrap_or_else(|e| panic!("fixture {server}.json: {e}; run tests/fixtures/schemas/capture.py"));
        let fixture: Value = serde_json::from_str(&text).unwrap();
        for tool in fixture["tools"].as_array().unwrap() {
            let annotations: Annotations =
                serde_json::from_value(tool.get("annotations").cloned().unwrap_or(json!({})))
                    .unwrap_or_default();
            let name = format!("mcp__{}__{}", server, tool["name"].as_str().unwrap());
            let mut spec =
                ToolSpec::new(name, tool["description"].as_str().unwrap_or(""), tool["inputSchema"].clone())
                    .source(ToolSource::Mcp { server: (*server).to_owned() })
                    .loading(Loading::Deferred);
            spec.annotations = annotations;
            spec.output_schema = tool.get("outputSchema").cloned();
            out.push(Listed(spec));
        }
    }
    out
}

fn engine() -> (Engine, tempfile::TempDir) {
    let ws = crate::common::workspace();
    let mut b = crate::common::engine_builder().workspace(ws.path()).policy(codemode::Policy::full_access());
    for t in fixture_tools() {
        b = b.tool(t);
    }
    (b.build().unwrap(), ws)
}

fn top(engine: &Engine, query: &str, limit: usize) -> Vec<String> {
    let out = engine.call_blocking("tool_search", &json!({"query": query, "limit": limit}));
    let content = &out.envelope.unwrap_or_else(|| panic!("{query}: {:?}", out.error))["content"];
    content["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_fixed_catalog_has_sixty_real_tools() {
    let (engine, _ws) = engine();
    assert!(engine.tool_specs().len() >= 60, "{}", engine.tool_specs().len());
}

#[test]
fn model_style_queries_find_the_right_tool_in_the_top_three() {
    let (engine, _ws) = engine();
    let cases: &[(&str, &[&str])] = &[
        ("read a file", &["read", "mcp__filesystem__read_text_file", "mcp__filesystem__read_file"]),
        ("list directory", &["mcp__filesystem__list_directory"]),
        ("store a memory", &["mcp__memory__create_entities", "mcp__memory__add_observations"]),
        ("what time is it in Tokyo", &["mcp__time__get_current_time"]),
        ("convert a time between timezones", &["mcp__time__convert_time"]),
        ("search file contents for a regex", &["grep_files"]),
        ("find files by name", &["file_search", "mcp__filesystem__search_files"]),
        ("run a shell command", &["bash"]),
        ("write text to a file", &["write", "mcp__filesystem__write_file"]),
        ("replace text in a file", &["edit", "mcp__filesystem__edit_file"]),
        ("create a folder", &["mcp__filesystem__create_directory"]),
        ("move or rename a file", &["mcp__filesystem__move_file"]),
        ("add two numbers", &["mcp__everything__get-sum"]),
        ("echo a message back", &["mcp__everything__echo"]),
        ("file size and modification time", &["mcp__filesystem__get_file_info"]),
        ("show the whole knowledge graph", &["mcp__memory__read_graph"]),
        ("delete an entity from memory", &["mcp__memory__delete_entities"]),
        ("link two entities with a relation", &["mcp__memory__create_relations"]),
        ("show the git commit history", &["mcp__git__git_log"]),
        ("fetch a web page", &["mcp__fetch__fetch"]),
        ("stage files for commit", &["mcp__git__git_add"]),
        ("think step by step through a problem", &["mcp__sequential-thinking__sequentialthinking"]),
        // Written after the synonym list was settled, never tuned on.
        ("get the current date and time", &["mcp__time__get_current_time"]),
        ("list branches", &["mcp__git__git_branch"]),
        ("see what changed in the working tree", &["mcp__git__git_status", "mcp__git__git_diff_unstaged"]),
        ("read several files at once", &["mcp__filesystem__read_multiple_files"]),
        ("look up nodes in the knowledge graph", &["mcp__memory__search_nodes", "mcp__memory__open_nodes"]),
        ("return a tiny image", &["mcp__everything__get-tiny-image"]),
        ("switch to another branch", &["mcp__git__git_checkout"]),
        ("undo staged changes", &["mcp__git__git_reset"]),
    ];
    let mut misses = Vec::new();
    for (query, wanted) in cases {
        let got = top(&engine, query, 3);
        if !got.iter().any(|g| wanted.contains(&g.as_str())) {
            misses.push(format!("{query:?}: wanted one of {wanted:?}, got {got:?}"));
        }
    }
    let hits = cases.len() - misses.len();
    eprintln!("tool_search top-3 hits: {hits} of {}", cases.len());
    assert!(
        hits * 10 >= cases.len() * 9,
        "{hits}/{} in the top 3; misses:\n{}",
        cases.len(),
        misses.join("\n")
    );
}

#[test]
fn exact_names_rank_that_tool_first() {
    let (engine, _ws) = engine();
    // Every tool but tool_search itself, which search never shows.
    for spec in engine.tool_specs().into_iter().filter(|s| s.name != "tool_search") {
        let got = top(&engine, &spec.name, 1);
        assert_eq!(got, std::slice::from_ref(&spec.name), "query {:?}", spec.name);
    }
}

#[test]
fn regex_mode_finds_every_tool_of_a_server() {
    let (engine, _ws) = engine();
    let out = engine
        .call_blocking("tool_search", &json!({"query": "^mcp__memory__", "mode": "regex", "limit": 50}));
    let content = &out.envelope.unwrap()["content"];
    assert_eq!(content["tools"].as_array().unwrap().len(), 9);
}
