//! Limits per MCP server and per tool (docs/LIMITS.md) against the real
//! fixture server process (tests/fixtures/mcp/misbehaving.py): a cap of
//! calls in flight seen at the server with each call's timeout starting
//! when it starts (`queued_ms` apart), starts spaced by a rate, and retries
//! of failures the server marks retryable or of transport failures of
//! tools safe to repeat. Wall-clock time is not asserted (that belongs to
//! benchmarks); what the server saw and the receipts are.

use std::path::Path;

use codemode::mcp::PoolOptions;
use codemode::policy::{CallLimits, pacing};
use codemode::receipt::{CallStatus, Receipt, RunStatus};
use codemode::{Engine, Policy, Program};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// An engine over the fixture server `fx` (entry `extra` merged in),
/// recording the calls' starts in `dir/starts`, with room for `in_flight`
/// calls of a run at once.
fn fixture_engine(dir: &Path, extra: Value, policy: Policy, in_flight: usize) -> Engine {
    let mut limits = codemode::Limits::default();
    limits.max_in_flight = in_flight;
    engine_with_limits(dir, extra, policy, limits)
}

/// [`fixture_engine`] with the run's `limits`.
fn engine_with_limits(dir: &Path, extra: Value, policy: Policy, limits: codemode::Limits) -> Engine {
    let mut server = json!({
        "command": "python3",
        "args": [fixture(), "normal"],
        "env": {
            "MCP_FIXTURE_PEAK": dir.join("peak").to_string_lossy(),
            "MCP_FIXTURE_STARTS": dir.join("starts").to_string_lossy(),
            "MCP_FIXTURE_VANISHED": dir.join("vanished").to_string_lossy(),
            "MCP_FIXTURE_PACING": "1",
        },
    });
    for (k, v) in extra.as_object().unwrap() {
        server[k] = v.clone();
    }
    let options = PoolOptions { cache_dir: Some(dir.join("cache")), ..options(&dir.join("cache")) };
    crate::common::engine_builder()
        .workspace(dir)
        .policy(policy)
        .limits(limits)
        .mcp(config(json!({"fx": server})), options)
        .build()
        .unwrap()
}

/// The calls' starts the server saw: (unix time, tool), in order.
fn starts(dir: &Path) -> Vec<(f64, String)> {
    let text = std::fs::read_to_string(dir.join("starts")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let (t, tool) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), tool.to_owned())
        })
        .collect()
}

fn run(engine: &Engine, program: &str) -> Receipt {
    let receipt = engine.execute_blocking(Program::new(program));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    receipt
}

#[test]
fn forty_calls_of_two_seconds_under_a_cap_of_eight_and_a_five_second_timeout_all_finish() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let engine =
        fixture_engine(&dir, json!({"max_in_flight": 8, "timeout_ms": 5000}), Policy::full_access(), 64);
    let receipt = run(
        &engine,
        "const ms = Array.from({length: 40}, () => 2000);
         return (await Promise.all(ms.map(ms => tools.mcp__fx__slow({ms})))).length",
    );
    assert_eq!(receipt.value, json!(40));
    assert_eq!(receipt.calls.len(), 40);
    // No call timed out: each call's timeout started when it did.
    for call in &receipt.calls {
        assert_eq!(call.status, CallStatus::Ok, "{call:?}");
        assert!(call.queued_ms.is_some(), "a call under a limit records its wait: {call:?}");
    }
    let peak: usize = std::fs::read_to_string(dir.join("peak")).unwrap().trim().parse().unwrap();
    assert!((2..=8).contains(&peak), "the server ran {peak} calls at once under a cap of 8");
    // Eight start at once; each of the other 32 waits for a 2 s call to
    // end (less the time the calls took to reach their limit one after
    // the other, behind the server's start: about 0.5 s on a loaded
    // machine), and the last ones for three more rounds.
    let mut waits: Vec<f64> = receipt.calls.iter().map(|c| c.queued_ms.unwrap()).collect();
    waits.sort_by(f64::total_cmp);
    assert!(waits[8..].iter().all(|w| *w >= 100.0), "waits: {waits:?}");
    assert!(waits[39] >= 3000.0, "the last calls wait several rounds: {waits:?}");
    assert!(receipt.calls.iter().all(|c| c.elapsed_ms >= c.queued_ms.unwrap()), "elapsed includes the wait");
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_tools_rate_spaces_its_starts_at_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let mut policy = Policy::full_access();
    let limits = CallLimits::new(None, Some(pacing::parse_rate(&json!(4)).unwrap()), None);
    policy
        .tools
        .insert("mcp__fx__echo".into(), codemode::policy::ToolSettings { limits, ..Default::default() });
    let engine = fixture_engine(&dir, json!({}), policy, 64);
    let receipt = run(
        &engine,
        "await Promise.all(Array.from({length: 12}, (_, i) => tools.mcp__fx__echo({text: String(i)})));
         return 1",
    );
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::Ok && c.queued_ms.is_some()));
    let times: Vec<f64> = starts(&dir).into_iter().filter(|(_, t)| t == "echo").map(|(t, _)| t).collect();
    assert_eq!(times.len(), 12);
    // At most rate + 1 starts in any one-second window (measured over
    // 0.9 s, so a message that took 100 ms longer on its way than the one
    // before does not count against the engine).
    for (i, start) in times.iter().enumerate() {
        let within = times[i..].iter().take_while(|t| **t < start + 0.9).count();
        assert!(within <= 5, "{within} starts within 1 s of {start} at a rate of 4: {times:?}");
    }
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_failure_the_server_marks_retryable_is_made_again_as_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let retry = json!({"attempts": 3, "base_delay_ms": 20, "max_delay_ms": 100});
    let engine = fixture_engine(&dir, json!({"retry": retry}), Policy::full_access(), 16);
    let receipt = run(&engine, "return (await tools.mcp__fx__flaky({})).content");
    assert_eq!(receipt.calls.len(), 1, "{}", receipt.to_json_pretty());
    let call = &receipt.calls[0];
    assert_eq!((call.status, call.attempts), (CallStatus::Ok, 3), "{call:?}");
    let seen = starts(&dir).into_iter().filter(|(_, t)| t == "flaky").count();
    assert_eq!(seen, 3, "the server saw each attempt");
    let json = serde_json::to_value(&receipt).unwrap();
    assert_eq!(json["calls"][0]["attempts"], json!(3));
    engine.shutdown_mcp_blocking();

    // Without a retry policy the same failure is the call's end.
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let engine = fixture_engine(&dir, json!({}), Policy::full_access(), 16);
    let receipt = run(&engine, "try { await tools.mcp__fx__flaky({}); } catch (e) { return e.message }");
    assert!(
        receipt.value.as_str().unwrap().contains("turned `tools/call` away for now"),
        "{}",
        receipt.value
    );
    assert_eq!(receipt.calls[0].attempts, 1);
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_transport_failure_is_made_again_only_for_a_tool_safe_to_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let retry = json!({"attempts": 3, "base_delay_ms": 20, "max_delay_ms": 100});
    let engine = fixture_engine(&dir, json!({"retry": retry}), Policy::full_access(), 16);
    // `vanish` may change something: the lost connection ends the call.
    let receipt = run(&engine, "try { await tools.mcp__fx__vanish({}); } catch (e) { return e.kind }");
    assert_eq!(receipt.value, json!("failed"));
    let call = &receipt.calls[0];
    assert_eq!((call.status, call.attempts), (CallStatus::Failed, 1), "{call:?}");
    assert_eq!(starts(&dir).iter().filter(|(_, t)| t == "vanish").count(), 1, "not sent again");
    // `vanish_ro` is read-only: the second attempt reaches the restarted server.
    let receipt = run(&engine, "return (await tools.mcp__fx__vanish_ro({})).content");
    let call = &receipt.calls[0];
    assert_eq!((call.status, call.attempts), (CallStatus::Ok, 2), "{}", receipt.to_json_pretty());
    assert_eq!(starts(&dir).iter().filter(|(_, t)| t == "vanish_ro").count(), 2);
    engine.shutdown_mcp_blocking();
}

#[test]
fn calls_still_waiting_for_a_slot_when_the_run_ends_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let mut limits = codemode::Limits::default();
    limits.deadline = std::time::Duration::from_secs(4);
    let engine = engine_with_limits(&dir, json!({"max_in_flight": 1}), Policy::full_access(), limits);
    // The server started first, by a run of its own: on a loaded machine
    // its start could take the measured run's whole deadline.
    run(&engine, "return await tools.mcp__fx__echo({})");
    let receipt = engine.execute_blocking(Program::new(
        "await Promise.all([1, 2, 3].map(() => tools.mcp__fx__slow({ms: 20000}))); return 1",
    ));
    assert_eq!(receipt.status, RunStatus::TimedOut, "{}", receipt.to_json_pretty());
    let started: Vec<bool> = receipt.calls.iter().map(|c| c.never_started).collect();
    assert_eq!(started.iter().filter(|n| **n).count(), 2, "{}", receipt.to_json_pretty());
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::InFlight));
    let slow = starts(&dir).into_iter().filter(|(_, tool)| tool == "slow").count();
    assert_eq!(slow, 1, "the server saw one call: {}", receipt.to_json_pretty());
    engine.shutdown_mcp_blocking();
}

/// The Python SDK's HTTP fixture on a free port, answering the first two
/// `tools/call` requests with HTTP 429 and `Retry-After: 1` (noted in
/// `called`); killed on drop.
struct BusyServer(std::process::Child, u16);

impl BusyServer {
    fn start(called: &Path) -> BusyServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new(root().join("tests/python/.venv/bin/python"))
            .arg(root().join("tests/fixtures/mcp/http_server.py"))
            .arg(port.to_string())
            .env("MCP_FIXTURE_BUSY", "2")
            .env("MCP_FIXTURE_CALLED", called)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = BusyServer(child, port);
        for _ in 0..1500 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the server did not listen on port {port}");
    }
}

impl Drop for BusyServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn http_429_with_retry_after_is_made_again_after_the_wait_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let called = dir.join("called");
    let server = BusyServer::start(&called);
    let url = format!("http://127.0.0.1:{}/mcp", server.1);
    let retry = json!({"attempts": 3, "base_delay_ms": 10, "max_delay_ms": 20});
    let servers = json!({"web": {"type": "http", "url": url, "retry": retry}});
    let options = PoolOptions { cache_dir: Some(dir.join("cache")), ..options(&dir.join("cache")) };
    let engine = crate::common::engine_builder()
        .workspace(&dir)
        .policy(Policy::full_access())
        .mcp(config(servers), options)
        .build()
        .unwrap();
    let receipt = run(&engine, "return (await tools.mcp__web__echo({message: 'hi'})).content");
    assert_eq!(receipt.value["result"], json!("Echo: hi"), "{}", receipt.to_json_pretty());
    let call = &receipt.calls[0];
    assert_eq!((call.status, call.attempts), (CallStatus::Ok, 3), "{call:?}");
    // Each retry waited the second `Retry-After` asked for, not 10 ms.
    assert!(call.elapsed_ms >= 2000.0, "{call:?}");
    let text = std::fs::read_to_string(&called).unwrap();
    assert_eq!(text.lines().filter(|l| *l == "busy").count(), 2, "{text}");
    // The connection stayed up: the server was not started again.
    let state = engine.mcp_servers().into_iter().find(|s| s.name == "web").unwrap().state;
    assert_eq!(state, codemode::mcp::ServerState::Running);
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_batch_goes_through_the_same_limits() {
    use codemode::batch::{Batch, BatchCall, BatchOptions};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let engine =
        fixture_engine(&dir, json!({"max_in_flight": 2, "timeout_ms": 1500}), Policy::full_access(), 16);
    let ms: serde_json::Map<String, Value> = json!({"ms": 1000}).as_object().unwrap().clone();
    let batch = Batch::new((0..6).map(|_| BatchCall::new("mcp__fx__slow", ms.clone())).collect());
    let receipt = engine.execute_batch_blocking(batch, BatchOptions::new().concurrency(Some(6)));
    assert_eq!(receipt.calls.len(), 6);
    assert!(receipt.calls.iter().all(|c| c.status == CallStatus::Ok), "{}", receipt.to_json_pretty());
    let peak: usize = std::fs::read_to_string(dir.join("peak")).unwrap().trim().parse().unwrap();
    assert!((1..=2).contains(&peak), "the server ran {peak} calls at once under a cap of 2");
    let waited = receipt.calls.iter().filter(|c| c.queued_ms.unwrap() >= 100.0).count();
    assert!(waited >= 2, "calls past the cap waited: {}", receipt.to_json_pretty());
    engine.shutdown_mcp_blocking();
}

/// A call waiting to be made again (a retry policy) when its run is told
/// to stop is not made again, even when the VM that would cut it is stuck
/// in work QuickJS does not interrupt (a loop of sorts of a large typed
/// array): the retry after the deadline never reaches the server.
#[test]
fn a_retry_due_after_the_deadline_of_a_stuck_program_is_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let config = json!({"mcpServers": {"fx": {
        "command": "python3",
        "args": [fixture(), "normal"],
        "env": {"MCP_FIXTURE_STARTS": dir.join("starts").to_string_lossy(), "MCP_FIXTURE_PACING": "1"},
        "retry": {"attempts": 4, "base_delay_ms": 6000, "max_delay_ms": 6000},
    }}});
    std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
    std::fs::write(
        dir.join("retry.js"),
        "tools.mcp__fx__flaky({});\nconst a = new Float64Array(1 << 20);\nfor (;;) a.sort();\n",
    )
    .unwrap();
    let args = [
        "run",
        "retry.js",
        "--mcp-config",
        "mcp.json",
        "--posture",
        "full-access",
        "--deadline",
        "2",
        "--json",
    ];
    let mut child = crate::cli::spawn(&args, &dir, &[]);
    drop(child.stdin.take());
    let status =
        crate::cli::exited_within(&mut child, 90, "the run was not answered at its deadline and a grace");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let seen = starts(&dir).into_iter().filter(|(_, t)| t == "flaky").count();
    assert_eq!(seen, 1, "only the attempt made before the deadline reached the server");
}
