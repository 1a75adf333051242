//! `tool_search` and MCP servers never listed (nothing live, nothing in the
//! schema cache): an MCP-focused search starts them through the gate
//! (`mcp_connect__<server>`), bounded in number, and searches their real
//! schemas; an unrelated search starts nothing; every result names the
//! servers still unlisted and why (docs/CATALOG.md, "MCP servers not
//! listed yet").

use std::path::Path;

use codemode::mcp::{PoolOptions, ServerState};
use codemode::{Engine, Policy, Program, policy::Rule, receipt::RunStatus};
use serde_json::{Value, json};

use crate::mcp_support::*;

fn engine(servers: Value, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    let options = PoolOptions { cache_dir: Some(cache.to_owned()), ..options(cache) };
    crate::common::engine_builder()
        .workspace(ws)
        .policy(policy)
        .mcp(config(servers), options)
        .build()
        .unwrap()
}

fn everything() -> Value {
    json!({"command": "node", "args": [node_server("server-everything")]})
}

fn state(engine: &Engine, server: &str) -> ServerState {
    engine.mcp_servers().into_iter().find(|s| s.name == server).unwrap().state
}

/// A program's `tool_search` result (the run must complete).
fn program_search(engine: &Engine, query: &str) -> (Value, codemode::Receipt) {
    let receipt = engine.execute_blocking(Program::new(format!(
        "return (await tools.call('tool_search', {{query: {query:?}, limit: 10}})).content;"
    )));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    (receipt.value.clone(), receipt)
}

fn names(result: &Value) -> Vec<String> {
    result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// `unlisted_servers` as `{name: (state, why)}`.
fn unlisted(result: &Value) -> std::collections::BTreeMap<String, (String, String)> {
    result["unlisted_servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let text = |k: &str| s[k].as_str().unwrap().to_owned();
                    (text("name"), (text("state"), text("why")))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_mcp_focused_search_starts_an_unlisted_server_and_finds_its_tools() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let engine = engine(json!({"everything": everything()}), cache.path(), ws.path(), Policy::full_access());
    assert_eq!(state(&engine, "everything"), ServerState::NotStarted);
    // "add two numbers" matches no listed tool well (read only has
    // "numbers"): the search starts the server and finds its `get-sum`.
    let (result, receipt) = program_search(&engine, "add two numbers");
    assert_eq!(names(&result)[0], "mcp__everything__get-sum", "{result}");
    assert_eq!(result["started_servers"], json!(["everything"]), "{result}");
    assert!(result.get("unlisted_servers").is_none(), "{result}");
    assert_eq!(state(&engine, "everything"), ServerState::Running);
    let note = receipt.calls[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("started MCP server `everything`"), "{note}");
    // A program's search activates nothing.
    assert!(result.get("activated").is_none(), "{result}");
    assert!(!engine.listed_tools().iter().any(|s| s.name.starts_with("mcp__")));
    // The tool it found is callable with its real schema.
    let r = engine.execute_blocking(Program::new(
        "return (await tools['mcp__everything__get-sum']({a: 2, b: 3})).content;",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    assert!(r.value.to_string().contains('5'), "{}", r.value);
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_direct_search_naming_a_server_starts_only_that_one_and_activates_its_matches() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = json!({
        "time": {"command": time_server()},
        "everything": everything(),
    });
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let out = engine.call_blocking("tool_search", &json!({"query": "current time", "limit": 3}));
    assert!(out.is_ok(), "{out:?}");
    let result = &out.envelope.as_ref().unwrap()["content"];
    assert_eq!(result["started_servers"], json!(["time"]), "{result}");
    assert!(names(result).contains(&"mcp__time__get_current_time".to_owned()), "{result}");
    assert!(result["activated"].as_array().unwrap().contains(&json!("mcp__time__get_current_time")));
    // The server it did not name stays unstarted and is named as such.
    assert_eq!(state(&engine, "everything"), ServerState::NotStarted);
    let left = unlisted(result);
    assert_eq!(left.keys().collect::<Vec<_>>(), ["everything"], "{result}");
    assert_eq!(left["everything"].0, "not_started");
    assert!(left["everything"].1.contains("mcp_connect__everything"), "{:?}", left["everything"]);
    engine.shutdown_mcp_blocking();
}

#[test]
fn an_unrelated_search_starts_nothing_and_names_the_unlisted_servers() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let engine = engine(json!({"everything": everything()}), cache.path(), ws.path(), Policy::full_access());
    let (result, receipt) = program_search(&engine, "read a file");
    assert_eq!(names(&result)[0], "read", "{result}");
    assert_eq!(state(&engine, "everything"), ServerState::NotStarted);
    assert!(result.get("started_servers").is_none(), "{result}");
    assert_eq!(unlisted(&result)["everything"].0, "not_started", "{result}");
    assert!(receipt.calls[0].note.is_none(), "{:?}", receipt.calls[0]);
}

#[test]
fn a_denied_connect_rule_keeps_the_server_unstarted_and_the_search_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut policy = Policy::full_access();
    policy.rules.deny.push(Rule::parse("mcp_connect__everything").unwrap());
    let engine = engine(json!({"everything": everything()}), cache.path(), ws.path(), policy);
    let (result, _) = program_search(&engine, "mcp add two numbers");
    assert_eq!(state(&engine, "everything"), ServerState::NotStarted);
    assert!(!names(&result).iter().any(|n| n.starts_with("mcp__")), "{result}");
    let (state_, why) = &unlisted(&result)["everything"];
    assert_eq!(state_, "refused", "{result}");
    assert!(why.contains("deny rule `mcp_connect__everything`"), "{why}");
}

#[test]
fn a_server_that_fails_to_start_is_named_with_its_reason_and_the_others_still_start() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = json!({
        "broken": {"command": "/no/such/server"},
        "time": {"command": time_server()},
    });
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let (result, _) = program_search(&engine, "mcp servers");
    assert_eq!(result["started_servers"], json!(["time"]), "{result}");
    let left = unlisted(&result);
    assert_eq!(left.keys().collect::<Vec<_>>(), ["broken"], "{result}");
    assert_eq!(left["broken"].0, "failed");
    assert!(left["broken"].1.contains("/no/such/server"), "{:?}", left["broken"]);
    engine.shutdown_mcp_blocking();
}

#[test]
fn one_search_starts_at_most_three_servers() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers: serde_json::Map<String, Value> =
        (1..=4).map(|i| (format!("gone{i}"), json!({"command": format!("/no/such/server{i}")}))).collect();
    let engine = engine(Value::Object(servers), cache.path(), ws.path(), Policy::full_access());
    let (result, _) = program_search(&engine, "mcp");
    let left = unlisted(&result);
    let states: Vec<&str> = left.values().map(|(s, _)| s.as_str()).collect();
    assert_eq!(states, ["failed", "failed", "failed", "over_bound"], "{result}");
    assert!(left["gone4"].1.contains("at most 3"), "{:?}", left["gone4"]);
    // Naming the fourth starts it (and only it).
    let (result, _) = program_search(&engine, "gone4");
    let left = unlisted(&result);
    assert_eq!(left["gone4"].0, "failed", "{result}");
    assert!(left["gone4"].1.contains("/no/such/server4"), "{:?}", left["gone4"]);
}

/// Servers a rule denies do not use up a search's places, and a server
/// whose start failed is tried after the others: denied and failing
/// servers cannot keep a working one from ever starting.
#[test]
fn denied_and_failing_servers_do_not_starve_the_others() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut policy = Policy::full_access();
    policy.rules.deny.push(Rule::parse("mcp_connect__d1").unwrap());
    policy.rules.deny.push(Rule::parse("mcp_connect__d2").unwrap());
    let mut servers = serde_json::Map::new();
    for d in ["d1", "d2"] {
        servers.insert(d.into(), json!({"command": time_server()}));
    }
    for i in 1..=3 {
        servers.insert(format!("gone{i}"), json!({"command": format!("/no/such/server{i}")}));
    }
    servers.insert("time".into(), json!({"command": time_server()}));
    let engine = engine(Value::Object(servers), cache.path(), ws.path(), policy);
    let (result, _) = program_search(&engine, "mcp");
    let left = unlisted(&result);
    let state_of = |left: &std::collections::BTreeMap<String, (String, String)>, s: &str| left[s].0.clone();
    assert_eq!(state_of(&left, "d1"), "refused", "{result}");
    assert_eq!(state_of(&left, "d2"), "refused", "{result}");
    for g in ["gone1", "gone2", "gone3"] {
        assert_eq!(state_of(&left, g), "failed", "the denied servers took no place: {result}");
    }
    assert_eq!(state_of(&left, "time"), "over_bound", "{result}");
    // The next search tries the server that never failed first.
    let (result, _) = program_search(&engine, "mcp");
    assert_eq!(result["started_servers"], json!(["time"]), "{result}");
    let left = unlisted(&result);
    assert!(!left.contains_key("time"), "{result}");
    assert_eq!(state_of(&left, "gone3"), "over_bound", "{result}");
    // What discovery adds is part of the declared result shape.
    let envelope = json!({"content": result, "metadata": null, "truncated": null});
    let wrong = crate::tool_shapes::check(&engine.tool_specs(), "tool_search", &envelope);
    assert!(wrong.is_empty(), "{wrong:?}");
    engine.shutdown_mcp_blocking();
}

#[test]
fn the_cli_search_finds_a_fresh_servers_tool() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let file = ws.path().join("servers.json");
    std::fs::write(&file, json!({"mcpServers": {"everything": everything()}}).to_string()).unwrap();
    let args = ["search", "add two numbers", "--mcp-config", "servers.json", "--json"];
    let child = crate::cli::spawn(&args, ws.path(), &[("XDG_CACHE_HOME", cache.path())]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&result)[0], "mcp__everything__get-sum", "{result}");
    assert_eq!(result["started_servers"], json!(["everything"]));
}

/// Allows every approval, counting those asked for `mcp_connect__*`.
struct ConnectApprover(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl codemode::Approver for ConnectApprover {
    fn decide(&self, request: codemode::approval::ApprovalRequest) -> codemode::approval::ApprovalFuture {
        if request.tool.starts_with("mcp_connect__") {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Box::pin(async move { Ok(codemode::approval::Approval::allow()) })
    }
}

#[test]
fn an_untrusted_servers_start_by_a_search_is_approved_once_and_the_receipt_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::default())
        .approver(ConnectApprover(asked.clone()))
        .mcp(untrusted(json!({"time": {"command": time_server()}})), options(cache.path()))
        .build()
        .unwrap();
    let (result, receipt) = program_search(&engine, "time zones");
    assert_eq!(result["started_servers"], json!(["time"]), "{result}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        receipt.calls[0].decision,
        codemode::receipt::Decision::Approved,
        "{}",
        receipt.to_json_pretty()
    );
    // Listed now: a second search asks nothing and names no unlisted server.
    let (result, _) = program_search(&engine, "time zones");
    assert!(result.get("unlisted_servers").is_none() && result.get("started_servers").is_none(), "{result}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_server_still_starting_at_the_end_of_the_budget_is_given_up_and_named() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    // It never answers `initialize`; its own startup timeout is longer than
    // the search's budget.
    let servers = json!({"mute": {
        "command": "python3", "args": [fixture(), "no-init"], "startup_timeout_ms": 60000,
        "env": {"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()},
    }});
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let (result, _) = program_search(&engine, "mcp");
    let left = unlisted(&result);
    assert_eq!(left["mute"].0, "timed_out", "{result}");
    assert!(left["mute"].1.contains("10 s budget"), "{:?}", left["mute"]);
    // Given up: its process is gone without waiting for its own timeout.
    assert_gone(&pids(&pid_file));
    engine.shutdown_mcp_blocking();
}
