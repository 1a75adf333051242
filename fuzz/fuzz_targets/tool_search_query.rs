//! `tool_search` (crates/codemode/src/catalog/tool_search.rs, search.rs) over a real catalog: the
//! tools of the reference MCP servers as they list them (tests/fixtures/schemas/*.json), plus two
//! left out (a bad name, a taken name) that searches show as `unavailable`.
//!
//! Input: JSON arguments `{query, mode?, limit?}` when it starts with `{`; otherwise the first byte
//! picks the mode (bm25, regex, an unknown one), whether the call is direct, and the limit
//! (0 to 63, so some are out of range), and the rest is the query.
//!
//! Property: no panic; a search that answers holds at most `limit` tools (5 when not given) and at
//! most `limit` unavailable ones, and activates only tools it found; a query over
//! `MAX_QUERY_CHARS` (1000) characters is refused; the time of every input stays within
//! libFuzzer's `-timeout`.
#![no_main]

use std::sync::OnceLock;

use codemode::fuzzing::SearchCatalog;
use codemode::{ToolSpec, tool::Loading, tool::ToolSource};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const FIXTURES: &[(&str, &str)] = &[
    ("everything", include_str!("../../tests/fixtures/schemas/everything.json")),
    ("fetch", include_str!("../../tests/fixtures/schemas/fetch.json")),
    ("filesystem", include_str!("../../tests/fixtures/schemas/filesystem.json")),
    ("git", include_str!("../../tests/fixtures/schemas/git.json")),
    ("memory", include_str!("../../tests/fixtures/schemas/memory.json")),
    ("sequential-thinking", include_str!("../../tests/fixtures/schemas/sequential-thinking.json")),
    ("time", include_str!("../../tests/fixtures/schemas/time.json")),
];

fn catalog() -> &'static SearchCatalog {
    static CATALOG: OnceLock<SearchCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut specs = Vec::new();
        for (server, text) in FIXTURES {
            let fixture: Value = serde_json::from_str(text).expect("fixture JSON");
            for tool in fixture["tools"].as_array().expect("fixture tools") {
                let name = format!("mcp__{server}__{}", tool["name"].as_str().unwrap_or("?"));
                let description = tool["description"].as_str().unwrap_or("");
                let spec = ToolSpec::new(name, description, tool["inputSchema"].clone())
                    .source(ToolSource::Mcp { server: (*server).to_owned() })
                    .loading(Loading::Deferred);
                specs.push(spec);
            }
        }
        let mut taken = specs[0].clone();
        taken.description = "a second tool of the same name: left out".to_owned();
        let bad = ToolSpec::new("bad name!", "a tool with an invalid name, read a file", json!({"type": "object"}));
        specs.extend([taken, bad]);
        SearchCatalog::new(specs)
    })
}

/// The arguments and whether the call is direct.
fn input(data: &[u8]) -> Option<(Value, bool)> {
    if data.first() == Some(&b'{') {
        return Some((serde_json::from_slice(data).ok()?, false));
    }
    let (&first, rest) = data.split_first()?;
    let query = String::from_utf8_lossy(rest).into_owned();
    let mode = ["bm25", "regex", "regex", "fuzzy"][usize::from(first & 3)];
    let mut args = json!({"query": query, "mode": mode});
    let limit = first >> 3;
    if limit > 0 {
        args["limit"] = json!(limit * 2);
    }
    Some((args, first & 4 != 0))
}

fuzz_target!(|data: &[u8]| {
    let Some((args, direct)) = input(data) else { return };
    let catalog = catalog();
    let _ = catalog.mcp_focus(&args, &["time".to_owned(), "unlisted-server".to_owned()]);
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(5) as usize;
    let query_chars = args.get("query").and_then(Value::as_str).map(|q| q.chars().count());
    let Ok(out) = catalog.search(args, direct) else { return };
    assert!(query_chars.is_some_and(|n| n <= 1000), "a query over 1000 characters was searched");
    let tools = out["tools"].as_array().expect("tools is a list");
    assert!(tools.len() <= limit, "{} tools for limit {limit}", tools.len());
    let unavailable = out.get("unavailable").and_then(Value::as_array).map_or(0, Vec::len);
    assert!(unavailable <= limit, "{unavailable} unavailable for limit {limit}");
    if let Some(activated) = out.get("activated").and_then(Value::as_array) {
        for name in activated {
            assert!(tools.iter().any(|t| t["name"] == *name), "activated {name} was not found");
        }
    }
});
