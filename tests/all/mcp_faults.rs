//! MCP servers that misbehave, through the engine (and the binary): every
//! content block kept next to `structuredContent`, a `list_changed` sent
//! before an answer applied before the next call, relistings bounded and
//! coalesced, one failed start failing every call that waited on it, a
//! timeout of kind `timeout` wherever it is set, deep JSON failing at once,
//! and a tool whose schema does not compile shown as unavailable. Each
//! server is tests/fixtures/mcp/misbehaving.py in one of its modes.

use std::path::Path;

use codemode::mcp::PoolOptions;
use codemode::{Engine, Policy, Program, receipt::RunStatus};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// The fixture as server `fixture` in `mode`, with `env` and the other
/// server settings in `extra`.
fn fixture_server(mode: &str, env: Value, extra: Value) -> Value {
    let mut server = json!({"command": "python3", "args": [fixture(), mode], "env": env});
    for (k, v) in extra.as_object().unwrap() {
        server[k] = v.clone();
    }
    json!({ "fixture": server })
}

fn engine_for(servers: Value, cache: &Path, ws: &Path) -> Engine {
    engine_with(servers, cache, ws, Policy::full_access())
}

fn engine_with(servers: Value, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    let options = PoolOptions { cache_dir: Some(cache.to_owned()), ..options(cache) };
    crate::common::engine_builder()
        .workspace(ws)
        .policy(policy)
        .mcp(config(servers), options)
        .build()
        .unwrap()
}

fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file).map(|t| t.lines().count()).unwrap_or(0)
}

#[test]
fn every_block_survives_next_to_structured_content() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_MIXED": "1"}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new("return await tools.mcp__fixture__mixed({})"));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value["content"], json!({"n": 7}));
    // The image and the caption are kept; the text block that only repeats
    // structuredContent is not.
    assert_eq!(
        receipt.value["metadata"]["blocks"],
        json!([{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}, "a caption"]),
        "{}",
        receipt.value
    );
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_tool_added_with_list_changed_before_the_answer_is_callable_next() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_LIST_CHANGED": "before"}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new(
        "await tools.mcp__fixture__echo({text: 'a'}); return (await tools.mcp__fixture__extra({})).content",
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value, json!("extra"));
    engine.shutdown_mcp_blocking();
}

#[test]
fn list_changed_after_every_listing_costs_at_most_one_listing_per_call() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let listings = cache.path().join("listings");
    let servers =
        fixture_server("storm", json!({"MCP_FIXTURE_LISTINGS": listings.to_string_lossy()}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    // Five calls of a listed tool, three of a name the server never lists.
    let receipt = engine.execute_blocking(Program::new(
        r#"for (let i = 0; i < 5; i++) await tools.mcp__fixture__echo({text: String(i)});
           const unknown = [];
           for (let i = 0; i < 3; i++) {
             try { await tools.mcp__fixture__nope({}); unknown.push("ran"); }
             catch (e) { unknown.push(e.kind + ": " + e.message); }
           }
           return unknown;"#,
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    for refusal in receipt.value.as_array().unwrap() {
        let refusal = refusal.as_str().unwrap();
        assert!(refusal.starts_with("refused") && refusal.contains("does not list"), "{refusal}");
    }
    // A server answering every listing with list_changed is not listed in a
    // loop: the first listing, one the notification starts, then at most one
    // per call (8 calls). Give a loop time to show.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let count = lines(&listings);
    assert!((2..=10).contains(&count), "{count} listings");
    engine.shutdown_mcp_blocking();
    assert!(lines(&listings) <= 10, "listed again after the run");
}

#[test]
fn calls_waiting_on_a_failed_start_all_fail_with_it_at_once() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pids_file = cache.path().join("pids");
    let servers =
        fixture_server("die-at-start", json!({"MCP_FIXTURE_PIDS": pids_file.to_string_lossy()}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new(
        r#"const calls = [];
           for (let i = 0; i < 8; i++) calls.push(tools.mcp__fixture__echo({text: String(i)}));
           const settled = await Promise.allSettled(calls);
           return settled.map(s => s.status === "rejected" ? s.reason.kind + ": " + s.reason.message : "ran");"#,
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    let outcomes = receipt.value.as_array().unwrap();
    assert_eq!(outcomes.len(), 8);
    for outcome in outcomes {
        let outcome = outcome.as_str().unwrap();
        assert!(
            outcome.starts_with("failed") && outcome.contains("failing to start on purpose"),
            "{outcome}"
        );
    }
    assert_eq!(pids(&pids_file).len(), 1, "the server was started once per waiting call");
}

#[test]
fn a_call_timeout_is_kind_timeout_wherever_it_is_set() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let program = "try { await tools.mcp__fixture__echo({text: 'x'}); return 'ran'; } \
                   catch (e) { return [e.kind, e.message]; }";
    // In the MCP config (`timeout_ms`).
    let servers = fixture_server("hang", json!({}), json!({"timeout_ms": 300}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.value[0], "timeout", "{}", receipt.to_json_pretty());
    assert!(receipt.value[1].as_str().unwrap().contains("300 ms"), "{}", receipt.value);
    engine.shutdown_mcp_blocking();

    // In codemode.toml (the tool's `timeout_ms`).
    let cache = tempfile::tempdir().unwrap();
    let mut policy = Policy::full_access();
    policy.tools.insert(
        "mcp__fixture__echo".into(),
        codemode::policy::ToolSettings { timeout_ms: Some(300), ..Default::default() },
    );
    let servers = fixture_server("hang", json!({}), json!({}));
    let engine = engine_with(servers, cache.path(), ws.path(), policy);
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.value[0], "timeout", "{}", receipt.to_json_pretty());
    engine.shutdown_mcp_blocking();
}

#[test]
fn an_answer_nested_too_deeply_fails_at_once_and_says_so() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A timeout long enough that only an error saying what happened passes.
    let servers = fixture_server("deep", json!({}), json!({"timeout_ms": 60_000}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let program = "try { await tools.mcp__fixture__echo({text: 'x'}); return 'ran'; } \
                   catch (e) { return [e.kind, e.message]; }";
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.value[0], "failed", "{}", receipt.to_json_pretty());
    let message = receipt.value[1].as_str().unwrap();
    assert!(message.contains("nested more than 127 levels deep"), "{message}");
    engine.shutdown_mcp_blocking();

    // A listing nested too deeply: the start fails saying so.
    let cache = tempfile::tempdir().unwrap();
    let servers = fixture_server("deep-list", json!({}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.value[0], "failed", "{}", receipt.to_json_pretty());
    let message = receipt.value[1].as_str().unwrap();
    assert!(message.contains("nested more than 127 levels deep"), "{message}");
    engine.shutdown_mcp_blocking();
}

/// A line on the server's stdout that is not JSON and has an odd number of
/// `"` (a log line) does not leave the lone-surrogate repair inside a
/// string: the next answer, holding half a surrogate pair, is repaired and
/// read, not dropped as unparsable (its call waited for its timeout).
#[test]
fn an_answer_after_a_log_line_with_an_odd_number_of_quotes_is_read_at_once() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A timeout long enough that only an answer read at once passes.
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_HALF": "1"}), json!({"timeout_ms": 60_000}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let started = std::time::Instant::now();
    let program = "const a = await tools.mcp__fixture__half({}); \
                   const b = await tools.mcp__fixture__half({}); \
                   const c = await tools.mcp__fixture__echo({text: 'x'}); \
                   return [a.content, b.content, c.content];";
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value, json!(["a\u{FFFD}", "a\u{FFFD}", {"text": "x"}]));
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "took {:?}", started.elapsed());
    engine.shutdown_mcp_blocking();
}

/// A tool listed without `inputSchema` is read as taking an object
/// (MCP.md), and the server's other tools stay usable: rmcp's typed
/// `tools/list` refused the whole answer ("Unexpected response type").
#[test]
fn a_tool_without_an_input_schema_takes_an_object_and_the_others_still_work() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_NO_SCHEMA": "1"}), json!({}));
    let engine = engine_for(servers, cache.path(), ws.path());
    let receipt = engine.execute_blocking(Program::new(
        "const a = await tools.mcp__fixture__echo({text: 'x'}); \
         const b = await tools.mcp__fixture__no_schema({}); \
         let refused; try { await tools.mcp__fixture__no_schema([1]); } catch (e) { refused = e.kind; } \
         return [a.content, b.content, refused];",
    ));
    assert_eq!(receipt.value, json!([{"text": "x"}, "no_schema", "refused"]), "{}", receipt.to_json_pretty());
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_tool_whose_schema_does_not_compile_is_shown_as_unavailable() {
    let (ws, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_BAD_SCHEMA": "1"}), json!({}));
    let engine = engine_for(servers.clone(), cache.path(), ws.path());
    // The call's refusal says why.
    let receipt = engine.execute_blocking(Program::new(
        "try { await tools.mcp__fixture__bad_schema({x: 1}); return 'ran'; } \
         catch (e) { return [e.kind, e.message]; }",
    ));
    assert_eq!(receipt.value[0], "refused", "{}", receipt.to_json_pretty());
    let message = receipt.value[1].as_str().unwrap();
    assert!(message.contains("unavailable") && message.contains("not a valid JSON Schema"), "{message}");
    // Search shows it as unavailable, with why.
    let found = engine.call_blocking("tool_search", &json!({"query": "schema compile"}));
    let found = found.envelope.expect("search ran")["content"].clone();
    let unavailable = found["unavailable"].as_array().expect("an unavailable list");
    assert_eq!(unavailable[0]["name"], "mcp__fixture__bad_schema", "{found}");
    assert!(unavailable[0]["why"].as_str().unwrap().contains("not a valid JSON Schema"), "{found}");
    engine.shutdown_mcp_blocking();

    // `codemode mcp tools` says so too.
    let file = ws.path().join(".mcp.json");
    std::fs::write(&file, json!({ "mcpServers": servers }).to_string()).unwrap();
    let mut child = crate::cli::spawn(
        &["mcp", "tools", "fixture", "--approve", "allow", "--mcp-config", &file.to_string_lossy()],
        ws.path(),
        &[("XDG_CACHE_HOME", cache.path())],
    );
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unavailable: mcp__fixture__bad_schema"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("bad_schema"), "listed as callable");
    // Said once, not at every rebuild of the catalog.
    assert_eq!(stderr.matches("left out of the catalog").count(), 1, "{stderr}");
}
