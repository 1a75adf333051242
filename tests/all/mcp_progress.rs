//! Progress of MCP tool calls (issue 35, item 3): a server's
//! `notifications/progress` reset the call's timeout, up to the server's
//! `max_total_timeout_ms`, and the receipt keeps the last one. Real
//! `codemode run` processes and real servers: server-everything's
//! `trigger-long-running-operation` (a report per step when the request
//! carries a progress token, which every codemode request does), and the
//! fixture's `slow` tool, which reports nothing.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp_support::{fixture, node_server};

/// Runs `program` with the config `servers`; the receipt. The tool lists
/// cache of its own: an HTTP server's listing is cached by its URL, and a
/// free port an earlier test's server had would bring that server's list.
fn run(ws: &Path, servers: Value, program: &str) -> Value {
    use std::io::Write as _;
    let file = ws.join("servers.json");
    std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let args = ["run", "-", "--json", "--mcp-config", file.to_str().unwrap()];
    let mut child = crate::cli::spawn(&args, ws, &[("XDG_CACHE_HOME", cache.path())]);
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no receipt ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// A program calling `tool` with `args`: its content, or `[kind, message]`.
fn call(tool: &str, args: Value) -> String {
    format!(
        "try {{ return (await tools.call({tool:?}, {args})).content; }} \
         catch (e) {{ return [e.kind, e.message]; }}"
    )
}

/// server-everything with a 2 s call timeout and `extra` settings.
fn everything(extra: Value) -> Value {
    let mut server =
        json!({"command": "node", "args": [node_server("server-everything")], "timeout_ms": 2000});
    server.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"everything": server})
}

/// A 4 s operation reporting progress every 0.5 s.
const LONG: &str = "mcp__everything__trigger-long-running-operation";

#[test]
fn progress_keeps_a_call_past_its_timeout_and_the_receipt_keeps_the_last() {
    let ws = crate::common::workspace();
    let r = run(ws.path(), everything(json!({})), &call(LONG, json!({"duration": 4, "steps": 8})));
    assert_eq!(r["status"], "completed", "{r:#}");
    let text = r["value"].to_string();
    assert!(text.contains("Long running operation completed"), "{r:#}");
    let c = &r["calls"][0];
    assert_eq!(c["status"], "ok", "{c:#}");
    assert!(c["elapsed_ms"].as_f64().unwrap() >= 4000.0, "{c:#}");
    assert_eq!(c["progress"]["progress"], 8.0, "{c:#}");
    assert_eq!(c["progress"]["total"], 8.0, "{c:#}");
    assert_eq!(c["progress"]["count"], 8, "{c:#}");
}

#[test]
fn a_call_reporting_no_progress_is_cut_at_its_timeout() {
    let ws = crate::common::workspace();
    let servers =
        json!({"fixture": {"command": "python3", "args": [fixture(), "normal"], "timeout_ms": 2000}});
    let r = run(ws.path(), servers, &call("mcp__fixture__slow", json!({"ms": 4000})));
    assert_eq!(r["value"][0], "timeout", "{r:#}");
    let c = &r["calls"][0];
    assert_eq!(c["status"], "failed", "{c:#}");
    let elapsed = c["elapsed_ms"].as_f64().unwrap();
    assert!((2000.0..4000.0).contains(&elapsed), "{c:#}");
    assert!(c.get("progress").is_none(), "{c:#}");
}

#[test]
fn progress_does_not_keep_a_call_past_the_servers_maximum_total() {
    let ws = crate::common::workspace();
    let servers = everything(json!({"max_total_timeout_ms": 3000}));
    let r = run(ws.path(), servers, &call(LONG, json!({"duration": 6, "steps": 12})));
    assert_eq!(r["value"][0], "timeout", "{r:#}");
    let message = r["value"][1].as_str().unwrap();
    assert!(
        message.contains("maximum total of 3000 ms") && message.contains("max_total_timeout_ms"),
        "{message}"
    );
    let c = &r["calls"][0];
    let elapsed = c["elapsed_ms"].as_f64().unwrap();
    assert!((3000.0..6000.0).contains(&elapsed), "{c:#}");
    // The progress it made before it was cut.
    assert!(c["progress"]["count"].as_u64().unwrap() >= 4, "{c:#}");
    assert_eq!(c["progress"]["total"], 12.0, "{c:#}");
}

/// server-everything over streamable HTTP on a free port, killed when
/// dropped.
struct HttpEverything(std::process::Child, u16);

impl HttpEverything {
    fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("node")
            .args([node_server("server-everything"), "streamableHttp".into()])
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = HttpEverything(child, port);
        for _ in 0..1500 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("server-everything did not listen on port {port}");
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn progress_over_streamable_http_keeps_the_call_and_the_receipt_keeps_the_last() {
    let ws = crate::common::workspace();
    let server = HttpEverything::start();
    let url = format!("http://127.0.0.1:{}/mcp", server.1);
    let servers = json!({"web": {"type": "http", "url": url, "timeout_ms": 2000}});
    let tool = "mcp__web__trigger-long-running-operation";
    let r = run(ws.path(), servers, &call(tool, json!({"duration": 3, "steps": 6})));
    assert_eq!(r["status"], "completed", "{r:#}");
    let c = &r["calls"][0];
    assert_eq!(c["status"], "ok", "{c:#}");
    assert_eq!(c["progress"]["progress"], 6.0, "{c:#}");
    assert_eq!(c["progress"]["count"], 6, "{c:#}");
}
