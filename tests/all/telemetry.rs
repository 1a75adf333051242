//! OpenTelemetry traces and counters, against a real OTLP receiver
//! (tests/fixtures/otlp_receiver.py decodes what the exporter sends with
//! the official protocol definitions, opentelemetry-proto) and a real
//! HTTP MCP server (tests/fixtures/mcp/http_server.py, the official Python
//! SDK) that records the trace context each `tools/call` carried.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_support::root;

/// A trace a caller started, as `TRACEPARENT` or a request's
/// `traceparent` names it.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// A child process killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The OTLP receiver, listening; its JSON lines go to `out`.
struct Receiver {
    _child: Reaped,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let (out, port_file) = (dir.join("otlp.jsonl"), dir.join("otlp.port"));
        let child = Command::new(python())
            .arg(root().join("tests/fixtures/otlp_receiver.py"))
            .args([&out, &port_file])
            .stdout(Stdio::null())
            .spawn()
            .expect("the receiver starts");
        let child = Reaped(child);
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "the OTLP receiver did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Receiver { _child: child, port, out }
    }

    /// What the exporter of a process given [`Receiver::env`] is told.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{}", self.port)),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "200".into()),
        ]
    }

    /// Every line received so far.
    fn lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// The spans received, once `want` of them have come (or 20 s passed).
    fn spans(&self, want: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans: Vec<Value> = self.lines().into_iter().filter(|l| l["kind"] == "span").collect();
            if spans.len() >= want || started.elapsed() > Duration::from_secs(20) {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last value received of counter `name` whose attributes include
    /// `attributes` (counters are cumulative: the last export has the sum).
    fn counter(&self, name: &str, attributes: Value) -> Option<i64> {
        let wanted = attributes.as_object().unwrap();
        self.lines()
            .into_iter()
            .filter(|l| l["kind"] == "metric" && l["name"] == name)
            .filter(|l| wanted.iter().all(|(k, v)| &l["attributes"][k] == v))
            .map(|l| l["value"].as_i64().unwrap())
            .next_back()
    }
}

fn python() -> PathBuf {
    root().join("tests/python/.venv/bin/python")
}

/// The fixture HTTP MCP server, recording the trace context of each
/// `tools/call` in `traces`.
fn http_server(traces: &Path) -> (Reaped, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(python())
        .arg(root().join("tests/fixtures/mcp/http_server.py"))
        .arg(port.to_string())
        .env("MCP_FIXTURE_TRACES", traces)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Reaped(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the fixture server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, port)
}

/// The trace context lines the fixture server recorded.
fn recorded(traces: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(traces).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Runs a program that reads a file, calls a tool that does not exist
/// (refused) and calls the fixture server's `echo` over HTTP, with `env`;
/// returns the receipt and what the server recorded.
fn traced_run(env: &[(&str, String)]) -> (Value, Vec<Value>) {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    // Outside the workspace: the server's record is not the program's.
    let record = tempfile::tempdir().unwrap();
    let traces = record.path().join("traces.jsonl");
    let (_server, port) = http_server(&traces);
    let mcp = ws.path().join("mcp.json");
    let config =
        json!({"mcpServers": {"web": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")}}});
    std::fs::write(&mcp, config.to_string()).unwrap();
    let program = ws.path().join("p.js");
    std::fs::write(
        &program,
        "const a = await tools.read({path: 'a.txt'});\n\
         let refused = null;\n\
         try { await tools.call('no_such_tool', {}); } catch (e) { refused = e.kind; }\n\
         const e = await tools.call('mcp__web__echo', {message: 'hi'});\n\
         return {a: a.content, refused, echo: e.content};\n",
    )
    .unwrap();
    // A schema cache of its own: another test's server `web` on the same
    // port (reused by the system) left a listing under the same name and
    // launch hash, whose tools this server does not have.
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .env("XDG_CACHE_HOME", cache.path())
        .env_remove("TRACEPARENT")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .arg("run")
        .arg(&program)
        .arg("--workspace")
        .arg(ws.path())
        .arg("--mcp-config")
        .arg(&mcp)
        .args(["--posture", "ask", "--approve", "allow", "--journal", "off", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let receipt: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(receipt["value"]["refused"], "refused", "{receipt:#}");
    assert_eq!(receipt["value"]["echo"]["result"], "Echo: hi", "{receipt:#}");
    (receipt, recorded(&traces))
}

/// A span by name.
fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

#[test]
fn a_run_is_one_span_with_a_child_per_call_and_its_mcp_call_carries_the_trace_on() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let mut env = receiver.env();
    env.push(("TRACEPARENT", format!("00-{TRACE}-{PARENT_SPAN}-01")));
    let (receipt, seen) = traced_run(&env);
    // The process flushes its spans and counters before it exits.
    let spans = receiver.spans(4);
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let run = named(&spans, "codemode.run");
    assert_eq!(run["traceId"], TRACE, "the run joins the caller's trace");
    assert_eq!(run["parentSpanId"], PARENT_SPAN, "the run's span is a child of TRACEPARENT's");
    assert_eq!(run["service"], "codemode");
    assert_eq!(run["attributes"]["codemode.run.id"], receipt["run_id"]);
    assert_eq!(run["attributes"]["codemode.run.status"], "completed");
    assert_eq!(run["attributes"]["codemode.run.calls"], 3);
    for span in spans.iter().filter(|s| s["name"] != "codemode.run") {
        assert_eq!(span["traceId"], TRACE);
        assert_eq!(span["parentSpanId"], run["spanId"], "each call's span is a child of the run's");
        assert!(
            span["startNs"].as_u64() >= run["startNs"].as_u64()
                && span["endNs"].as_u64() <= run["endNs"].as_u64()
        );
    }
    let read = named(&spans, "execute_tool read");
    assert_eq!(read["attributes"]["gen_ai.tool.name"], "read");
    assert_eq!(read["attributes"]["codemode.call.seq"], 1);
    assert_eq!(read["attributes"]["codemode.call.caller"], "program");
    assert_eq!(read["attributes"]["codemode.call.decision"], "auto");
    assert_eq!(read["attributes"]["codemode.gate.step"], "posture");
    assert_eq!(read["attributes"]["codemode.call.status"], "ok");
    assert_eq!(read["attributes"]["codemode.call.result_bytes"], receipt["calls"][0]["bytes"]);
    // A name the catalog does not have is the program's text: it is in
    // the receipt, never in a span (a program cannot send data out that way).
    let refused = named(&spans, "execute_tool");
    assert!(!serde_json::to_string(&spans).unwrap().contains("no_such_tool"), "{spans:#?}");
    assert_eq!(refused["attributes"]["gen_ai.tool.name"], Value::Null);
    assert_eq!(refused["attributes"]["codemode.call.decision"], "refused");
    assert_eq!(refused["attributes"]["codemode.gate.step"], "tool_exists", "the step that decided");
    assert_eq!(refused["attributes"]["error.type"], "refused");
    let echo = named(&spans, "execute_tool mcp__web__echo");
    assert_eq!(echo["attributes"]["codemode.call.status"], "ok");
    // Under `--posture ask`, the MCP tool (not read-only) was approved.
    assert_eq!(echo["attributes"]["codemode.call.decision"], "approved");
    assert_eq!(echo["attributes"]["codemode.gate.step"], "approval");
    assert!(echo["attributes"]["codemode.gate.later_steps_ms"].as_f64().is_some(), "{echo:#}");
    // The MCP server got the echo call's own span as its parent, in
    // `_meta` and in the HTTP header.
    let expected = format!("00-{TRACE}-{}-01", echo["spanId"].as_str().unwrap());
    assert_eq!(seen, vec![json!({"header": expected, "meta": expected})], "what the MCP server received");
    // Counters.
    let counter = |name: &str, attributes: Value| {
        let started = Instant::now();
        loop {
            if let Some(v) = receiver.counter(name, attributes.clone()) {
                return v;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no counter {name}: {:#?}",
                receiver.lines()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(counter("codemode.runs", json!({"codemode.run.status": "completed"})), 1);
    let ok = json!({"codemode.call.status": "ok", "codemode.call.decision": "auto"});
    assert_eq!(counter("codemode.calls", ok), 1);
    let approved = json!({"codemode.call.status": "ok", "codemode.call.decision": "approved"});
    assert_eq!(counter("codemode.calls", approved), 1);
    assert_eq!(counter("codemode.calls.refused", json!({"codemode.call.decision": "refused"})), 1);
}

#[test]
fn without_an_otlp_endpoint_nothing_is_exported_and_no_trace_context_goes_out() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let (_receipt, seen) = traced_run(&[]);
    assert_eq!(seen, vec![json!({"header": null, "meta": null})]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(receiver.lines().is_empty(), "{:#?}", receiver.lines());
    // A caller's trace alone is carried on (the run is part of it), and
    // still nothing is exported.
    let (_receipt, seen) = traced_run(&[("TRACEPARENT", format!("00-{TRACE}-{PARENT_SPAN}-01"))]);
    let header = seen[0]["header"].as_str().unwrap();
    assert!(header.starts_with(&format!("00-{TRACE}-")) && !header.contains(PARENT_SPAN), "{seen:?}");
    assert_eq!(seen[0]["meta"], seen[0]["header"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(receiver.lines().is_empty(), "{:#?}", receiver.lines());
}

#[test]
fn mcp_serve_runs_under_the_requests_traceparent_from_the_http_header_or_meta() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let ws = crate::common::workspace();
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let served = crate::serve_http::Served::start(&["--http", "127.0.0.1:0"], ws.path(), &env);
    let params = |meta: Value| {
        let mut m = crate::serve_http::modern_meta(false);
        for (k, v) in meta.as_object().unwrap() {
            m[k] = v.clone();
        }
        json!({"name": "execute_tools", "arguments": {"code": "return 1"}, "_meta": m})
    };
    let header_span = "1111111111111111";
    let traceparent = format!("00-{TRACE}-{header_span}-01");
    let reply = crate::serve_http::modern(
        &served.url,
        &[("traceparent", traceparent.as_str())],
        1,
        "tools/call",
        params(json!({})),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    // Not sampled by the client: the operator's export still takes the
    // run (a client cannot hide its runs from the traces).
    let meta_span = "2222222222222222";
    let in_meta = json!({"traceparent": format!("00-{TRACE}-{meta_span}-00")});
    let reply = crate::serve_http::modern(&served.url, &[], 2, "tools/call", params(in_meta));
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.spans(2);
    let parents: Vec<&str> = spans.iter().map(|s| s["parentSpanId"].as_str().unwrap()).collect();
    assert!(parents.contains(&header_span) && parents.contains(&meta_span), "{spans:#?}");
    assert!(spans.iter().all(|s| s["traceId"] == TRACE && s["name"] == "codemode.run"), "{spans:#?}");
}
