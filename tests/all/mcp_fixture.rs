//! The MCP client pool against tests/fixtures/mcp/misbehaving.py: lazy
//! start, the connect check, the schema cache, pagination, results, and
//! each way a server can misbehave, with no process left after each test.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use codemode::Tool;
use codemode::mcp::{ConnectCheck, ConnectFuture, McpError, McpPool, PoolOptions, ServerState};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// The fixture in `mode` as server `fx`, recording pids (and notifications)
/// in `dir`; `extra` is merged into the server entry.
fn fx(dir: &Path, mode: &str, extra: Value) -> Value {
    let mut server = json!({
        "command": "python3",
        "args": [fixture(), mode],
        "env": {
            "MCP_FIXTURE_PIDS": dir.join("pids").to_string_lossy(),
            "MCP_FIXTURE_LOG": dir.join("log").to_string_lossy(),
        },
    });
    for (k, v) in extra.as_object().unwrap() {
        if k == "env" {
            for (ek, ev) in v.as_object().unwrap() {
                server["env"][ek] = ev.clone();
            }
        } else {
            server[k] = v.clone();
        }
    }
    json!({"fx": server})
}

fn names(tools: &[codemode::mcp::McpTool]) -> Vec<String> {
    tools.iter().map(|t| t.spec().name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_starts_nothing_until_connect_and_the_cache_serves_listings_without_starting() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({})), dir.path());
    let status = pool.servers();
    assert_eq!(status[0].state, ServerState::NotStarted);
    assert_eq!(status[0].tools, None);
    assert!(pool.cached_tools("fx").unwrap().is_none());
    assert!(pids(&dir.path().join("pids")).is_empty(), "a server started before connect");

    let tools = pool.connect("fx").await.unwrap();
    assert_eq!(tools.len(), 7);
    assert_eq!(pool.servers()[0].state, ServerState::Running);
    let started = pids(&dir.path().join("pids"));
    assert_eq!(started.len(), 1);
    pool.shutdown().await;
    assert_gone(&started);

    // A fresh pool with the same config lists from the cache, starting nothing.
    let again = crate::mcp_support::pool(fx(dir.path(), "normal", json!({})), dir.path());
    let cached = again.cached_tools("fx").unwrap().expect("cached listing");
    assert_eq!(names(&cached), names(&tools));
    assert_eq!(again.servers()[0].tools, Some(7));
    assert_eq!(pids(&dir.path().join("pids")).len(), 1);
    // A different launch config does not use that cache.
    let other = crate::mcp_support::pool(
        fx(dir.path(), "normal", json!({"args": [fixture(), "normal", "x"]})),
        dir.path(),
    );
    assert!(other.cached_tools("fx").unwrap().is_none());
}

struct Refuse;
impl ConnectCheck for Refuse {
    fn check(&self, server: &str, cx: Option<&codemode::tool::ToolContext>) -> ConnectFuture {
        let reason = format!("mcp_connect__{server} denied (call {:?})", cx.map(|c| c.seq));
        Box::pin(async move { Err(reason) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_starts_no_process() {
    let dir = tempfile::tempdir().unwrap();
    // Prime the cache so there is a tool to call.
    let primer = pool(fx(dir.path(), "normal", json!({})), dir.path());
    primer.connect("fx").await.unwrap();
    primer.shutdown().await;
    std::fs::remove_file(dir.path().join("pids")).unwrap();

    let options = PoolOptions { connect_check: Some(Arc::new(Refuse)), ..options(dir.path()) };
    let pool = McpPool::new(config(fx(dir.path(), "normal", json!({}))), options);
    let echo =
        pool.cached_tools("fx").unwrap().unwrap().into_iter().find(|t| t.tool_name() == "echo").unwrap();
    let err = echo.call(json!({"text": "hi"}), cx()).await.unwrap_err();
    assert!(err.message.contains("mcp_connect__fx denied (call Some(1))"), "{err}");
    let err = pool.connect("fx").await.unwrap_err();
    assert!(matches!(err, McpError::ConnectRefused { .. }), "{err}");
    assert!(!dir.path().join("pids").exists(), "a refused server was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_follows_pages_up_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(
        fx(dir.path(), "normal", json!({"args": [fixture(), "normal", "--page-size", "2"]})),
        dir.path(),
    );
    let tools = pool.connect("fx").await.unwrap();
    assert_eq!(tools.len(), 7, "{:?}", names(&tools));
    pool.shutdown().await;

    let options = PoolOptions { max_list_pages: 5, ..options(dir.path()) };
    let endless = McpPool::new(config(fx(dir.path(), "endless-pages", json!({}))), options);
    let err = endless.connect("fx").await.unwrap_err();
    assert!(matches!(err, McpError::TooManyPages { pages: 5, .. }), "{err}");
    assert!(matches!(endless.servers()[0].state, ServerState::Failed { .. }));
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_errors_structured_content_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({})), dir.path());
    let tools = pool.connect("fx").await.unwrap();
    let tool = |name: &str| tools.iter().find(|t| t.tool_name() == name).unwrap().clone();

    // Names that sanitise alike are distinct, and both call their own tool.
    let (dotted, spaced) = (tool("get.item"), tool("get item"));
    assert_ne!(dotted.spec().name, spaced.spec().name);
    assert!(dotted.spec().name.starts_with("mcp__fx__get_item_"));
    assert_eq!(dotted.call(json!({}), cx()).await.unwrap().content, json!("get.item"));
    assert_eq!(spaced.call(json!({}), cx()).await.unwrap().content, json!("get item"));

    let echo = tool("echo");
    assert_eq!(echo.spec().name, "mcp__fx__echo");
    assert_eq!(echo.spec().annotations.read_only, Some(true));
    let out = echo.call(json!({"text": "hi"}), cx()).await.unwrap();
    assert_eq!(out.content, json!({"text": "hi"}));
    assert_eq!(out.metadata.unwrap()["server"], "fx");

    let err = tool("fail").call(json!({}), cx()).await.unwrap_err();
    assert!(err.message.contains("failed: it failed on purpose"), "{err}");

    let typed = tool("typed");
    assert!(typed.spec().output_schema.is_some());
    assert_eq!(typed.call(json!({}), cx()).await.unwrap().content, json!({"n": 7}));
    let err = typed.call(json!({"bad": true}), cx()).await.unwrap_err();
    assert!(err.message.contains("does not match its outputSchema"), "{err}");

    let blocks = tool("blocks").call(json!({}), cx()).await.unwrap().content;
    assert_eq!(blocks[0], json!("plain words"));
    assert_eq!(blocks[1], json!({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}));
    assert_eq!(blocks[2]["resource"]["uri"], "file:///x.txt");

    let err = pool.call("fx", "echo", json!([1]), None, None).await.unwrap_err();
    assert!(matches!(err, McpError::Protocol { .. }), "{err}");
    let started = pids(&dir.path().join("pids"));
    pool.shutdown().await;
    assert_gone(&started);
    let err = echo.call(json!({}), cx()).await.unwrap_err();
    assert!(err.message.contains("shut down"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_exposes_and_allows_only_read_only_tools() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({"read_only": true})), dir.path());
    let tools = pool.connect("fx").await.unwrap();
    assert_eq!(names(&tools), ["mcp__fx__echo", "mcp__fx__slow"]);
    let err = pool.call("fx", "fail", json!({}), None, None).await.unwrap_err();
    assert!(matches!(err, McpError::NotReadOnly { .. }), "{err}");
    assert_eq!(pool.servers()[0].tools, Some(2));
    pool.shutdown().await;
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_fails_the_call_with_the_stderr_tail_and_the_next_use_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "crash", json!({})), dir.path());
    pool.connect("fx").await.unwrap();
    // Two calls pending when it crashes: both fail, neither waits for a timeout.
    let (a, b) = tokio::join!(
        pool.call("fx", "echo", json!({}), Some(Duration::from_secs(600)), None),
        pool.call("fx", "fail", json!({}), Some(Duration::from_secs(600)), None),
    );
    for err in [a.unwrap_err(), b.unwrap_err()] {
        let text = err.to_string();
        assert!(matches!(err, McpError::Stopped { .. }), "{text}");
        assert!(text.contains("exited with status 3"), "{text}");
        assert!(text.contains("crashing on purpose"), "{text}");
    }
    assert!(matches!(pool.servers()[0].state, ServerState::Failed { .. }));
    // The next use starts it again (after the backoff).
    let before = pids(&dir.path().join("pids")).len();
    let err = pool.call("fx", "echo", json!({}), None, None).await.unwrap_err();
    assert!(err.to_string().contains("status 3"), "{err}");
    let started = pids(&dir.path().join("pids"));
    assert_eq!(started.len(), before + 1);
    pool.shutdown().await;
    assert_gone(&started);
}

/// Waits (bounded) until the fixture has logged `n` notifications/cancelled.
fn cancelled(dir: &Path, n: usize) -> Vec<Value> {
    for _ in 0..500 {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        let found: Vec<Value> = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["method"] == "notifications/cancelled")
            .collect();
        if found.len() >= n {
            return found;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("fewer than {n} notifications/cancelled were received");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_is_cut_by_its_timeout_or_its_callers_deadline_and_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "hang", json!({"timeout_ms": 300})), dir.path());
    let err = pool.call("fx", "echo", json!({}), None, None).await.unwrap_err();
    assert!(matches!(err, McpError::CallTimeout { .. }), "{err}");
    assert!(err.to_string().contains("within 300 ms"), "{err}");
    let first = cancelled(dir.path(), 1);
    assert!(first[0]["params"]["requestId"].is_number(), "{first:?}");

    // The caller drops the call (a run deadline): cancelled too.
    let long = pool.call("fx", "echo", json!({}), Some(Duration::from_secs(600)), None);
    assert!(tokio::time::timeout(Duration::from_secs(1), long).await.is_err());
    let both = cancelled(dir.path(), 2);
    assert_ne!(both[0]["params"]["requestId"], both[1]["params"]["requestId"]);
    pool.shutdown().await;
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_is_reported_after_the_startup_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for Python to start and record its pid on a loaded
    // machine (at 500 ms it sometimes had not yet).
    let pool = pool(fx(dir.path(), "no-init", json!({"startup_timeout_ms": 2000})), dir.path());
    let err = pool.connect("fx").await.unwrap_err();
    assert!(matches!(err, McpError::StartupTimeout { .. }), "{err}");
    assert!(err.to_string().contains("within 2000 ms"), "{err}");
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "garbage", json!({})), dir.path());
    assert_eq!(pool.connect("fx").await.unwrap().len(), 7);
    let out = pool.call("fx", "echo", json!({"a": 1}), None, None).await.unwrap();
    assert_eq!(out.content, json!({"a": 1}));
    pool.shutdown().await;
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_limit_is_a_clear_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let options = PoolOptions { max_message_bytes: 1 << 20, ..options(dir.path()) };
    let pool = McpPool::new(config(fx(dir.path(), "huge", json!({}))), options);
    let err = pool.call("fx", "echo", json!({}), None, None).await.unwrap_err();
    assert!(matches!(err, McpError::MessageTooLarge { limit_bytes: 1048576, .. }), "{err}");
    assert!(err.to_string().contains("max_message_bytes"), "{err}");
    assert_gone(&pids(&dir.path().join("pids")));
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_leaving_a_child_holding_stdout_fails_at_once_and_the_child_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "spawn-exit", json!({})), dir.path());
    let err = pool.call("fx", "echo", json!({}), Some(Duration::from_secs(600)), None).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("exited with status 4"), "{text}");
    assert!(text.contains("leaving a child behind"), "{text}");
    let started = pids(&dir.path().join("pids"));
    assert_eq!(started.len(), 2, "server and its child");
    assert_gone(&started);
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_wrappers_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let server = json!({"fx": {
        "command": wrapper(),
        "args": ["python3", fixture(), "normal"],
        "env": {"MCP_FIXTURE_PIDS": dir.path().join("pids").to_string_lossy()},
    }});
    let pool = pool(server, dir.path());
    assert_eq!(pool.connect("fx").await.unwrap().len(), 7);
    let started = pids(&dir.path().join("pids"));
    assert_eq!(started.len(), 2, "wrapper and server");
    pool.shutdown().await;
    assert_gone(&started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_pool_ends_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({})), dir.path());
    pool.connect("fx").await.unwrap();
    drop(pool);
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_refreshes_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({"env": {"MCP_FIXTURE_LIST_CHANGED": "1"}})), dir.path());
    assert_eq!(pool.connect("fx").await.unwrap().len(), 7);
    let mut changes = pool.changes();
    let seen = *changes.borrow_and_update();
    pool.call("fx", "echo", json!({}), None, None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), changes.wait_for(|n| *n > seen)).await.unwrap().unwrap();
    let tools = pool.cached_tools("fx").unwrap().unwrap();
    assert!(names(&tools).contains(&"mcp__fx__extra".to_owned()), "{:?}", names(&tools));
    pool.shutdown().await;
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_disabled_servers_are_refused_without_starting() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(fx(dir.path(), "normal", json!({"disabled": true})), dir.path());
    assert_eq!(pool.servers()[0].state, ServerState::Disabled);
    assert!(matches!(pool.connect("fx").await, Err(McpError::Disabled { .. })));
    assert!(matches!(pool.connect("nope").await, Err(McpError::UnknownServer { .. })));
    assert!(!dir.path().join("pids").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_does_not_exist_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(json!({"x": {"command": "/nonexistent/mcp-server"}}), dir.path());
    let err = pool.connect("x").await.unwrap_err();
    assert!(matches!(err, McpError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/mcp-server"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_the_listing_is_reported_after_the_list_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let options = PoolOptions { list_timeout: Duration::from_millis(500), ..options(dir.path()) };
    let pool = McpPool::new(config(fx(dir.path(), "hang-list", json!({}))), options);
    let err = pool.connect("fx").await.unwrap_err();
    assert!(matches!(err, McpError::ListTimeout { .. }), "{err}");
    // The server that answered initialize but not tools/list is ended.
    assert_gone(&pids(&dir.path().join("pids")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_bounds_the_calls_a_server_runs_at_once() {
    for (limit, check) in [(Some(2), "bounded"), (None, "control")] {
        let dir = tempfile::tempdir().unwrap();
        let peak_file = dir.path().join("peak");
        let mut extra = json!({"env": {"MCP_FIXTURE_PEAK": peak_file.to_string_lossy()}});
        if let Some(n) = limit {
            extra["max_in_flight"] = json!(n);
        }
        let pool = pool(fx(dir.path(), "normal", extra), dir.path());
        pool.connect("fx").await.unwrap();
        let calls = (0..8).map(|_| pool.call("fx", "slow", json!({"ms": 200}), None, None));
        for result in futures::future::join_all(calls).await {
            assert!(result.is_ok(), "{result:?}");
        }
        let peak: usize = std::fs::read_to_string(&peak_file).unwrap().trim().parse().unwrap();
        match check {
            "bounded" => assert!((1..=2).contains(&peak), "peak {peak} with max_in_flight 2"),
            _ => assert!(peak > 2, "without a limit 8 calls of 200 ms overlapped only {peak} at a time"),
        }
        pool.shutdown().await;
        assert_gone(&pids(&dir.path().join("pids")));
    }
}
