//! The batch form of execute_tools (docs/BATCH.md): the three input shapes,
//! order under concurrency, the concurrency bound, fail-fast, approvals,
//! the deadline, malformed input, the call budget, and 1,000 calls to a
//! real MCP server.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode::{
    Approver, Engine, Limits, Policy, approval::Approval, approval::ApprovalFuture,
    approval::ApprovalRequest, batch::Batch, batch::BatchCall, batch::BatchItem, batch::BatchOptions,
    batch::ItemStatus, receipt::CallStatus, receipt::Caller, receipt::Decision, receipt::ErrorKind,
    receipt::RunStatus,
};
use serde_json::{Map, Value, json};

use crate::common::{Echo, Fail, Sleep, deadline, engine_with, workspace};

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// An engine over `ws` with the test tools (full access) whose `sleep`
/// tool's overlap counters the test keeps.
fn engine_with_sleep(ws: &tempfile::TempDir, limits: Limits) -> (Engine, Sleep) {
    let sleep = Sleep::new();
    let probe = Sleep { running: sleep.running.clone(), peak: sleep.peak.clone() };
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::full_access())
        .limits(limits)
        .tool(Echo)
        .tool(Fail)
        .tool(sleep)
        .build()
        .unwrap();
    (engine, probe)
}

fn sleeps(ms: &[u64]) -> Batch {
    Batch::of_tool("sleep", ms.iter().map(|ms| args(json!({ "ms": ms }))))
}

#[test]
fn the_three_input_shapes_run_through_execute_tools() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());

    let one = engine.execute_tools_blocking(&json!({"batch": {"tool": "echo", "arguments": {"a": 1}}}));
    assert_eq!(one.status, RunStatus::Completed, "{}", one.to_json_pretty());
    assert_eq!(one.value, json!([{"content": {"a": 1}, "metadata": null, "truncated": null}]));
    assert_eq!(one.calls.len(), 1);
    assert_eq!(one.calls[0].caller, Caller::Program);

    let list = engine.execute_tools_blocking(&json!({"batch": [
        {"tool": "echo", "arguments": {"i": 0}},
        {"tool": "read", "arguments": {"path": "a.txt"}},
        {"tool": "fail", "arguments": {"message": "boom"}},
        {"tool": "echo"},
    ]}));
    assert_eq!(list.status, RunStatus::Completed);
    let tools: Vec<&str> = list.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["echo", "read", "fail", "echo"]);
    assert_eq!(list.calls.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(list.value[0]["content"], json!({"i": 0}));
    assert!(list.value[1]["content"].as_str().unwrap().contains("alpha"));
    assert_eq!(list.value[2]["error"]["kind"], "failed");
    assert_eq!(list.value[2]["error"]["message"], "boom");
    assert_eq!(list.value[3]["content"], json!({}));
    assert_eq!(list.calls[2].status, CallStatus::Failed);

    let many = engine.execute_tools_blocking(&json!({"batch": {"tool": "echo",
        "arguments": [{"n": 1}, {"n": 2}, {"n": 3}]}}));
    assert_eq!(
        many.value.as_array().unwrap().iter().map(|v| v["content"]["n"].clone()).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(many.calls.len(), 3);

    // `code` still runs a program.
    // A field sent as null (strict function calling sends every field) is
    // absent.
    let nulled = engine
        .execute_tools_blocking(&json!({"code": null, "batch": {"tool": "echo", "arguments": {"n": 1}}}));
    assert_eq!(nulled.status, RunStatus::Completed, "{:?}", nulled.error);
    let program = engine.execute_tools_blocking(&json!({"code": "return 40 + 2", "batch": null}));
    assert_eq!(program.value, json!(42));
    let program = engine.execute_tools_blocking(&json!({"code": "return 40 + 2"}));
    assert_eq!(program.value, json!(42));
}

#[test]
fn malformed_batch_input_names_the_field_and_makes_no_call() {
    let ws = workspace();
    let (engine, probe) = engine_with_sleep(&ws, Limits::default());
    let bad = json!({"batch": [
        {"tool": "sleep", "arguments": {"ms": 1}},
        {"tool": "sleep", "arguments": {"ms": 1}},
        {"tool": "sleep", "arguments": {"ms": 1}},
        {"tool": "sleep", "arguments": "ms=1"},
    ]});
    let receipt = engine.execute_tools_blocking(&bad);
    assert_eq!(receipt.status, RunStatus::Failed);
    let error = receipt.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Syntax);
    assert!(
        error.message.contains("batch[3].arguments: must be an object, got a string"),
        "{}",
        error.message
    );
    assert!(receipt.calls.is_empty());
    assert_eq!(probe.peak.load(Ordering::SeqCst), 0, "a call ran");

    for (input, field) in [
        (json!({"batch": {"tool": "sleep", "arguments": [{"ms": 1}, 7]}}), "batch.arguments[1]"),
        (json!({"batch": [{"tool": "sleep", "args": {"ms": 1}}]}), "batch[0].args"),
        (json!({"batch": [{"arguments": {}}]}), "batch[0].tool"),
        (json!({"batch": []}), "batch:"),
        (json!({"code": "return 1", "batch": []}), "both `code` and `batch`"),
    ] {
        let receipt = engine.execute_tools_blocking(&input);
        let message = &receipt.error.as_ref().unwrap().message;
        assert!(message.contains(field), "{input}: {message}");
        assert!(receipt.calls.is_empty());
    }
    assert_eq!(probe.peak.load(Ordering::SeqCst), 0, "a call ran");
}

#[test]
fn results_keep_input_order_under_concurrency() {
    let ws = workspace();
    let (engine, _) = engine_with_sleep(&ws, Limits::default());
    // Later items finish first.
    let ms = [120, 90, 60, 30, 0, 45, 15];
    let mut run = engine.start_batch(sleeps(&ms), BatchOptions::new().concurrency(Some(7)).fail_fast(false));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (items, receipt) = rt.block_on(async {
        let mut items: Vec<BatchItem> = Vec::new();
        while let Some(item) = run.next_item().await {
            items.push(item);
        }
        (items, run.wait().await)
    });
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    let slept: Vec<u64> =
        receipt.value.as_array().unwrap().iter().map(|v| v["content"]["slept"].as_u64().unwrap()).collect();
    assert_eq!(slept, ms);
    // The receipt's seq follows the input.
    assert_eq!(receipt.calls.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6, 7]);
    // Every item was streamed once, with its seq and its own result.
    let mut indices: Vec<usize> = items.iter().map(|i| i.index).collect();
    indices.sort();
    assert_eq!(indices, [0, 1, 2, 3, 4, 5, 6]);
    for item in &items {
        assert_eq!(item.seq, Some(item.index as u64 + 1));
        assert_eq!(item.status, ItemStatus::Ok);
        assert_eq!(item.decision, Some(Decision::Auto));
        assert_eq!(item.result.as_ref().unwrap()["content"]["slept"], ms[item.index]);
    }
}

#[test]
fn at_most_the_concurrency_bound_is_in_flight() {
    let ws = workspace();
    let (engine, probe) = engine_with_sleep(&ws, Limits::default());
    let receipt = engine
        .execute_batch_blocking(sleeps(&[20; 24]), BatchOptions::new().concurrency(Some(3)).fail_fast(false));
    assert_eq!(receipt.status, RunStatus::Completed);
    assert_eq!(receipt.calls.len(), 24);
    let peak = probe.peak.load(Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "peak overlap {peak} with --concurrency 3");

    // The default is the engine's in-flight limit.
    let mut limits = Limits::default();
    limits.max_in_flight = 2;
    let (engine, probe) = engine_with_sleep(&ws, limits);
    let receipt = engine.execute_batch_blocking(sleeps(&[20; 12]), BatchOptions::default());
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::Ok));
    let peak = probe.peak.load(Ordering::SeqCst);
    assert!((1..=2).contains(&peak), "peak overlap {peak} with max_in_flight 2");
}

#[test]
fn a_failed_item_stops_the_others_only_with_fail_fast() {
    let ws = workspace();
    let (engine, _) = engine_with_sleep(&ws, Limits::default());
    let batch = Batch::new(vec![
        BatchCall::new("echo", args(json!({"i": 0}))),
        BatchCall::new("fail", args(json!({"message": "boom"}))),
        BatchCall::new("echo", args(json!({"i": 2}))),
        BatchCall::new("echo", args(json!({"i": 3}))),
    ]);
    let all = engine.execute_batch_blocking(batch.clone(), BatchOptions::default());
    assert_eq!(all.calls.len(), 4);
    assert_eq!(all.value[3]["content"]["i"], 3);

    let options = BatchOptions::new().concurrency(Some(1)).fail_fast(true);
    let mut run = engine.start_batch(batch, options);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (items, receipt) = rt.block_on(async {
        let mut items = Vec::new();
        while let Some(item) = run.next_item().await {
            items.push(item);
        }
        (items, run.wait().await)
    });
    assert_eq!(receipt.status, RunStatus::Completed);
    assert_eq!(receipt.calls.len(), 2, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value[1]["error"]["kind"], "failed");
    for i in [2, 3] {
        assert_eq!(receipt.value[i]["error"]["kind"], "not_started");
        assert!(receipt.value[i]["error"]["message"].as_str().unwrap().contains("fail-fast"));
        let item = items.iter().find(|it| it.index == i).unwrap();
        assert_eq!((item.status, item.seq, item.decision), (ItemStatus::NotStarted, None, None));
    }
    assert_eq!(items.len(), 4);
}

/// Denies writes to `denied.txt`, allows the rest; records every request.
#[derive(Clone, Default)]
struct DenyOne(Arc<Mutex<Vec<ApprovalRequest>>>);

impl Approver for DenyOne {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        let deny = request.arguments["path"] == "denied.txt";
        self.0.lock().unwrap().push(request);
        Box::pin(async move { Ok(if deny { Approval::deny("not that file") } else { Approval::allow() }) })
    }
}

#[test]
fn the_approver_sees_each_item_and_a_denied_item_does_not_stop_the_batch() {
    let ws = workspace();
    let approver = DenyOne::default();
    // The default policy: posture ask, so every write asks.
    let engine =
        crate::common::engine_builder().workspace(ws.path()).approver(approver.clone()).build().unwrap();
    let batch = Batch::of_tool(
        "write",
        ["one.txt", "denied.txt", "three.txt"].map(|p| args(json!({"path": p, "content": p}))),
    );
    let receipt = engine.execute_batch_blocking(batch, BatchOptions::default());
    assert_eq!(receipt.status, RunStatus::Completed);
    let mut asked: Vec<String> =
        approver.0.lock().unwrap().iter().map(|r| r.arguments["path"].as_str().unwrap().to_owned()).collect();
    asked.sort();
    assert_eq!(asked, ["denied.txt", "one.txt", "three.txt"]);
    let decisions: Vec<Decision> = receipt.calls.iter().map(|c| c.decision).collect();
    assert_eq!(decisions, [Decision::Approved, Decision::Denied, Decision::Approved]);
    assert_eq!(receipt.value[1]["error"]["kind"], "denied");
    assert!(receipt.value[1]["error"]["message"].as_str().unwrap().contains("not that file"));
    assert!(ws.path().join("one.txt").exists() && ws.path().join("three.txt").exists());
    assert!(!ws.path().join("denied.txt").exists());
    assert!(approver.0.lock().unwrap().iter().all(|r| r.caller == Caller::Program));
}

#[test]
fn the_deadline_ends_a_batch_with_running_calls_in_flight() {
    let ws = workspace();
    let (engine, _) = engine_with_sleep(&ws, deadline(400));
    let batch = Batch::new(vec![
        BatchCall::new("echo", args(json!({"i": 0}))),
        BatchCall::new("sleep", args(json!({"ms": 0}))),
        BatchCall::new("sleep", args(json!({"ms": 30_000}))),
        BatchCall::new("sleep", args(json!({"ms": 30_000}))),
        BatchCall::new("echo", args(json!({"i": 4}))),
    ]);
    let receipt =
        engine.execute_batch_blocking(batch, BatchOptions::new().concurrency(Some(2)).fail_fast(false));
    assert_eq!(receipt.status, RunStatus::TimedOut, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.error.as_ref().unwrap().kind, ErrorKind::Timeout);
    let statuses: Vec<CallStatus> = receipt.calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [CallStatus::Ok, CallStatus::Ok, CallStatus::InFlight, CallStatus::InFlight]);
    assert!(receipt.calls[2].note.as_deref().unwrap().contains("cancelled at the run deadline"));
    assert_eq!(receipt.value[0]["content"]["i"], 0);
    assert_eq!(receipt.value[2]["error"]["kind"], "cancelled");
    assert_eq!(receipt.value[4]["error"]["kind"], "not_started");
}

#[test]
fn cancelling_a_batch_leaves_running_calls_in_flight() {
    let ws = workspace();
    let (engine, probe) = engine_with_sleep(&ws, Limits::default());
    let mut run = engine.start_batch(sleeps(&[30_000, 30_000, 30_000]), BatchOptions::default());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let receipt = rt.block_on(async {
        while probe.running.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.cancel();
        let mut n = 0;
        while let Some(item) = run.next_item().await {
            assert_eq!(item.status, ItemStatus::InFlight);
            n += 1;
        }
        assert_eq!(n, 3);
        run.wait().await
    });
    assert_eq!(receipt.status, RunStatus::Cancelled);
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::InFlight));
}

#[test]
fn a_batch_over_the_call_budget_is_refused_whole() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.max_calls = 5;
    let (engine, probe) = engine_with_sleep(&ws, limits);
    let receipt = engine.execute_batch_blocking(sleeps(&[1; 6]), BatchOptions::default());
    assert_eq!(receipt.status, RunStatus::Failed);
    let error = receipt.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Limit);
    assert!(error.message.contains("6 calls, over the call budget of 5"), "{}", error.message);
    assert!(receipt.calls.is_empty());
    assert_eq!(probe.peak.load(Ordering::SeqCst), 0);
    // Exactly at the budget is fine.
    let receipt = engine.execute_batch_blocking(sleeps(&[1; 5]), BatchOptions::default());
    assert_eq!(receipt.status, RunStatus::Completed);
    assert_eq!(receipt.calls.len(), 5);
}

#[test]
fn a_batch_of_1000_calls_to_a_real_mcp_server_completes() {
    use crate::mcp_support::{config, node_server, options};
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers =
        json!({"everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]}});
    // 1,000 envelopes are over the default 16 KiB value bound.
    let mut limits = Limits::default();
    limits.value_bytes = 1 << 20;
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::full_access())
        .limits(limits)
        .mcp(config(servers), options(cache.path()))
        .build()
        .unwrap();
    let batch =
        Batch::of_tool("mcp__everything__echo", (0..1000).map(|i| args(json!({"message": format!("m{i}")}))));
    let receipt = engine.execute_batch_blocking(batch, BatchOptions::default());
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.render(&Default::default()));
    assert_eq!(receipt.calls.len(), 1000);
    let problems: Vec<_> = receipt.problem_calls().collect();
    assert!(problems.is_empty(), "{problems:?}");
    let values = receipt.value.as_array().unwrap();
    assert_eq!(values.len(), 1000);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(v["content"], format!("Echo: m{i}"));
    }
    engine.shutdown_mcp_blocking();
}

/// Regression: a call of an MCP tool that begins while another call is
/// still starting its server (the gate already allowed the server, the
/// catalog does not list its tools yet) waits for the start instead of
/// being refused as an unknown tool. A batch's first wave hit this.
#[test]
fn a_call_made_while_its_server_starts_waits_for_the_listing() {
    use crate::mcp_support::{config, node_server, options};
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers =
        json!({"everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]}});
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::full_access())
        .tool(Sleep::new())
        .mcp(config(servers), options(cache.path()))
        .build()
        .unwrap();
    // Item 0 starts the server (node takes a few hundred ms); item 2 begins
    // when item 1's 50 ms sleep ends, while the server is still starting.
    let batch = Batch::new(vec![
        BatchCall::new("mcp__everything__echo", args(json!({"message": "first"}))),
        BatchCall::new("sleep", args(json!({"ms": 50}))),
        BatchCall::new("mcp__everything__echo", args(json!({"message": "second"}))),
    ]);
    let receipt =
        engine.execute_batch_blocking(batch, BatchOptions::new().concurrency(Some(2)).fail_fast(false));
    assert_eq!(receipt.value[0]["content"], "Echo: first", "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value[2]["content"], "Echo: second", "{}", receipt.to_json_pretty());
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_batch_as_a_program_gives_the_batch_value() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let batch = Batch::from_value(&json!([
        {"tool": "echo", "arguments": {"i": 0}},
        {"tool": "read", "arguments": {"path": "a.txt"}},
        {"tool": "fail", "arguments": {"message": "boom"}},
        {"tool": "echo", "arguments": {"quote": "it's \"x\" </script>"}},
    ]))
    .unwrap();
    let as_batch = engine.execute_batch_blocking(batch.clone(), BatchOptions::default());
    let as_program = engine.execute_blocking(batch.as_program());
    assert_eq!(as_program.status, RunStatus::Completed, "{}", as_program.to_json_pretty());
    let (a, p) = (as_batch.value.as_array().unwrap(), as_program.value.as_array().unwrap());
    assert_eq!(a.len(), p.len());
    for i in [0, 1, 3] {
        assert_eq!(a[i], p[i], "item {i}");
    }
    assert_eq!(p[2]["error"]["kind"], "failed");
    assert_eq!(p[2]["error"]["seq"], 3);
    assert_eq!(p[2]["error"]["message"], "fail (call 3): boom");
    let seqs = |r: &codemode::Receipt| r.calls.iter().map(|c| (c.seq, c.tool.clone())).collect::<Vec<_>>();
    assert_eq!(seqs(&as_batch), seqs(&as_program));
}
