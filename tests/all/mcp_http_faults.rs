//! Streamable HTTP failures against real servers: server-everything (the
//! TypeScript SDK; answers an unknown session id with HTTP 400) and a small
//! Python SDK server (tests/fixtures/mcp/http_server.py; answers it with
//! HTTP 404), killed mid-call, killed while idle, restarted on the same port,
//! and absent. See docs/MCP.md, "Streamable HTTP failures".

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use codemode::mcp::{McpError, McpPool};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// Longer than any of these tests may take: a call that hangs fails as a
/// timeout, which the tests reject.
const CALL_TIMEOUT_MS: u64 = 60_000;

/// Which real server to run.
#[derive(Clone, Copy)]
enum Kind {
    Everything,
    Python,
}

/// A streamable HTTP MCP server on a fixed local port; killed and reaped on
/// drop.
struct Server {
    child: Child,
    port: u16,
    kind: Kind,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    fn start(kind: Kind, port: u16) -> Server {
        Server::start_with(kind, port, None)
    }

    /// `called`: the Python server's MCP_FIXTURE_CALLED file.
    fn start_with(kind: Kind, port: u16, called: Option<&Path>) -> Server {
        let mut cmd = match kind {
            Kind::Everything => {
                let mut cmd = Command::new("node");
                cmd.args([node_server("server-everything"), "streamableHttp".into()])
                    .env("PORT", port.to_string());
                cmd
            }
            Kind::Python => {
                let mut cmd = Command::new(root().join("tests/python/.venv/bin/python"));
                cmd.arg(root().join("tests/fixtures/mcp/http_server.py")).arg(port.to_string());
                if let Some(called) = called {
                    cmd.env("MCP_FIXTURE_CALLED", called);
                }
                cmd
            }
        };
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let server = Server { child, port, kind };
        for _ in 0..1500 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the server did not listen on port {port}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// SIGKILL, reaped: the server is gone without a word on the wire.
    fn kill(mut self) -> (Kind, u16) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.kind, self.port)
    }

    fn restart(self) -> Server {
        let (kind, port) = self.kill();
        Server::start(kind, port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn web(url: &str) -> Value {
    json!({"web": {"type": "http", "url": url, "timeout_ms": CALL_TIMEOUT_MS}})
}

/// A tool's text: server-everything answers with it, the Python SDK with
/// `{"result": text}` (its structured output).
async fn call(pool: &McpPool, tool: &str, args: Value) -> Result<Value, McpError> {
    let out = pool.call("web", tool, args, None, None).await?.content;
    Ok(out.get("result").cloned().unwrap_or(out))
}

async fn echo(pool: &McpPool, message: &str) -> Result<Value, McpError> {
    call(pool, "echo", json!({"message": message})).await
}

/// The pids of live processes whose command line contains `needle`.
fn processes(needle: &str) -> Vec<String> {
    let out = Command::new("ps").args(["-eo", "pid=,args="]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(needle)).map(str::to_owned).collect()
}

/// A failure of a call whose connection was lost: [`McpError::Stopped`]
/// (the tool's error is of kind `failed`), not a timeout, not a server's
/// answer.
fn assert_lost(err: &McpError, wanted: &str) {
    assert!(matches!(err, McpError::Stopped { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(wanted), "{text}");
    assert!(!text.contains("answered `"), "{text}");
    assert!(!text.contains("Transport") && !text.contains("Client error"), "{text}");
}

async fn killed_mid_call(kind: Kind, tool: &str, args: Value) {
    let marker = tempfile::tempdir().unwrap();
    let called = marker.path().join("called");
    let server = Server::start_with(kind, free_port(), Some(&called));
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(web(&url), dir.path());
    assert_eq!(echo(&pool, "before").await.unwrap(), json!("Echo: before"));

    let call = tokio::spawn({
        let pool = pool.clone();
        let tool = tool.to_owned();
        async move { pool.call("web", &tool, args, None, None).await }
    });
    // Let the call reach the server (the Python server says when; the
    // other is given a moment), then kill it.
    match kind {
        Kind::Python => tokio::task::spawn_blocking(move || {
            crate::common::wait_until_exists(&called, "the call did not reach the server")
        })
        .await
        .unwrap(),
        Kind::Everything => tokio::time::sleep(Duration::from_millis(1500)).await,
    }
    let server_pid = server.child.id();
    let (kind, port) = server.kill();
    let err = call.await.unwrap().unwrap_err();
    // An answer on an SSE stream (the TypeScript server) ends with the
    // stream; a plain JSON answer (the Python server, 2026-07-28) with the
    // connection.
    let wanted = match kind {
        Kind::Everything => "closed the stream before answering",
        Kind::Python => "was lost before the server answered",
    };
    assert_lost(&err, wanted);
    assert!(err.to_string().contains(&url), "{err}");
    assert!(!processes("").iter().any(|l| l.split_whitespace().next() == Some(&server_pid.to_string())));

    // While it is down: the new connection is refused, at once and clearly.
    let err = echo(&pool, "while down").await.unwrap_err();
    assert!(matches!(err, McpError::Initialize { .. }), "{err:?}");
    let refused = format!("cannot connect to {url} (connection refused): is the server running?");
    assert!(err.to_string().contains(&refused), "{err}");

    // Restarted on the same port: the next call works, on a new session.
    let _server = Server::start(kind, port);
    assert_eq!(echo(&pool, "after").await.unwrap(), json!("Echo: after"));
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_killed_mid_call_fails_the_call_and_the_next_call_reconnects() {
    killed_mid_call(Kind::Everything, "trigger-long-running-operation", json!({"duration": 30, "steps": 30}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_killed_mid_call_fails_the_call_and_the_next_call_reconnects() {
    killed_mid_call(Kind::Python, "sleep", json!({"seconds": 30})).await;
}

/// A server restarted while the client was idle no longer knows the
/// client's session: server-everything answers HTTP 400 ("No valid session
/// ID provided"), the Python SDK HTTP 404. Either way the client opens a new
/// session once and the call, which the server refused unread, is sent
/// again.
async fn restarted_while_idle(kind: Kind) {
    let server = Server::start(kind, free_port());
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(web(&server.url()), dir.path());
    assert_eq!(echo(&pool, "first").await.unwrap(), json!("Echo: first"));
    let _server = server.restart();
    assert_eq!(echo(&pool, "second").await.unwrap(), json!("Echo: second"));
    assert_eq!(echo(&pool, "third").await.unwrap(), json!("Echo: third"));
    if let Kind::Python = kind {
        // The new server ran each call once: no call was repeated.
        assert_eq!(call(&pool, "count", json!({})).await.unwrap(), json!("2"));
    }
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_restarted_answers_400_to_the_old_session_and_gets_a_new_one() {
    restarted_while_idle(Kind::Everything).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_restarted_answers_404_to_the_old_session_and_gets_a_new_one() {
    restarted_while_idle(Kind::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_running_is_a_clear_error() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(web(&url), dir.path());
    let err = pool.connect("web").await.unwrap_err();
    assert!(matches!(err, McpError::Initialize { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "cannot connect to {url} (connection refused): is the server running? check the server's `url` in the MCP configuration"
        )),
        "{text}"
    );
    assert!(!text.contains("Transport") && !text.contains("Client error"), "{text}");
}

/// An HTTP address that is not an MCP server (a plain HTTP server answering
/// a status), a host that does not resolve, an https URL to a plain HTTP
/// server: each start fails with one line saying what to check, never
/// rmcp's error chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_start_failures_say_what_to_check() {
    let port = free_port();
    let mut child = Command::new("python3")
        .arg(root().join("tests/fixtures/mcp/http_status.py"))
        .arg(port.to_string())
        .spawn()
        .unwrap();
    let base = format!("127.0.0.1:{port}");
    // Wait (a bound, not a timing) until it listens.
    for _ in 0..500 {
        if std::net::TcpStream::connect(&base).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let cases = [
        (format!("http://{base}/404/mcp"), "HTTP 404 Not Found from http://"),
        (format!("http://{base}/404/mcp"), "no MCP endpoint at that address; check the server's `url`"),
        (format!("http://{base}/403/mcp"), "HTTP 403 Forbidden from http://"),
        (format!("http://{base}/403/mcp"), "check the server's `headers` in the MCP configuration"),
        (format!("https://{base}/200/mcp"), "the TLS handshake with https://"),
        (
            "http://no-such-host.invalid/mcp".to_owned(),
            "cannot resolve the host of http://no-such-host.invalid/mcp",
        ),
    ];
    for (url, wanted) in cases {
        let dir = tempfile::tempdir().unwrap();
        let err = pool(web(&url), dir.path()).connect("web").await.unwrap_err().to_string();
        assert!(err.contains(wanted), "{url}: {err}");
        assert!(err.contains(&url), "{url}: {err}");
        for raw in ["Transport", "Client error", "Send message error", "server/discover"] {
            assert!(!err.contains(raw), "{url}: {err}");
        }
    }
    // 401: a sign-in, not a failure to connect.
    let dir = tempfile::tempdir().unwrap();
    let err = pool(web(&format!("http://{base}/401/mcp")), dir.path()).connect("web").await.unwrap_err();
    assert!(err.to_string().contains("codemode mcp login web"), "{err}");
    let _ = child.kill();
    let _ = child.wait();
}

/// A server gone while the client was idle: the next call's POST is
/// refused, and the call fails at once saying so; the connection is marked
/// down, so the call after the restart opens a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_server_gone_while_idle_fails_at_once_and_says_so() {
    let server = Server::start(Kind::Everything, free_port());
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(web(&url), dir.path());
    assert_eq!(echo(&pool, "first").await.unwrap(), json!("Echo: first"));
    let (kind, port) = server.kill();
    let err = echo(&pool, "gone").await.unwrap_err();
    assert_lost(&err, &format!("cannot connect to {url} (connection refused): is the server running?"));
    assert!(matches!(pool.servers()[0].state, codemode::mcp::ServerState::Failed { .. }));
    let _server = Server::start(kind, port);
    assert_eq!(echo(&pool, "back").await.unwrap(), json!("Echo: back"));
    pool.shutdown().await;
}

/// Through the CLI: a program whose call loses its server catches an error
/// of kind `failed` saying what happened, well before the call's timeout.
#[test]
fn a_program_sees_a_lost_server_as_a_failed_call_that_says_what_happened() {
    let ws = crate::common::workspace();
    let called = ws.path().join("called");
    let server = Server::start_with(Kind::Python, free_port(), Some(&called));
    let url = server.url();
    std::fs::write(ws.path().join("servers.json"), json!({"mcpServers": web(&url)}).to_string()).unwrap();
    let program = r#"
        try { await tools.call("mcp__web__sleep", {seconds: 30}); return "answered"; }
        catch (e) { return {kind: e.kind, message: e.message}; }
    "#;
    let cache = ws.path().join("cache");
    let args = ["run", "-", "--json", "--approve", "allow", "--mcp-config", "servers.json"];
    let mut child = crate::cli::spawn(&args, ws.path(), &[("XDG_CACHE_HOME", cache.as_path())]);
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    crate::common::wait_until_exists(&called, "the call did not reach the server");
    let _ = server.kill();
    let out = child.wait_with_output().unwrap();
    let receipt: Value = serde_json::from_slice(&out.stdout).expect("--json prints the receipt");
    assert_eq!(receipt["status"], "completed", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(receipt["value"]["kind"], "failed", "{receipt}");
    let message = receipt["value"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "MCP server `web` stopped: the connection to {url} was lost before the server answered"
        )),
        "{message}"
    );
    assert_eq!(receipt["calls"][0]["status"], "failed", "{receipt}");
}

/// Through the CLI, one shared tool-list cache: server-everything on a
/// port, its list cached by the first run; then the Python server on the
/// same URL. A tool only the new server has is reached (the cached list is
/// another server's), where a stdio server's cached list would refuse it
/// without a start; a name neither has is still refused, from the new
/// server's own list.
#[test]
fn another_server_at_a_cached_url_is_connected_for_a_tool_the_cached_list_lacks() {
    let ws = crate::common::workspace();
    let port = free_port();
    let server = Server::start(Kind::Everything, port);
    std::fs::write(ws.path().join("servers.json"), json!({"mcpServers": web(&server.url())}).to_string())
        .unwrap();
    let cache = ws.path().join("cache");
    let run = |program: &str| -> Value {
        let args = ["run", "-", "--json", "--approve", "allow", "--mcp-config", "servers.json"];
        let mut child = crate::cli::spawn(&args, ws.path(), &[("XDG_CACHE_HOME", cache.as_path())]);
        child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no receipt ({e}): {}", String::from_utf8_lossy(&out.stderr)))
    };
    let first = run(r#"return (await tools.call("mcp__web__echo", {message: "a"})).content;"#);
    assert_eq!(first["status"], "completed", "{first:#}");
    let _ = server.kill();
    let _server = Server::start(Kind::Python, port);
    let second = run(r#"const n = await tools.call("mcp__web__count", {});
           let other;
           try { await tools.call("mcp__web__nowhere", {}); other = "ran"; } catch (e) { other = [e.kind, e.message]; }
           return {count: n.content, other};"#);
    assert_eq!(second["status"], "completed", "{second:#}");
    assert_eq!(second["calls"][0]["status"], "ok", "{second:#}");
    assert_eq!(second["value"]["other"][0], "refused", "{second:#}");
    let message = second["value"]["other"][1].as_str().unwrap();
    assert!(message.contains("unknown tool `mcp__web__nowhere`"), "{message}");
}
