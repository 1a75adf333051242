//! `codemode mcp serve --http`: the real binary on a free loopback port (or
//! every interface), spoken to with curl as raw HTTP, in both protocol
//! eras; its protections (Origin, Host, bearer token); per-session engines
//! of 2025-11-25 sessions; a stop on SIGTERM; and two replicas sharing a
//! PostgreSQL journal store and a state key.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::mcp_support::{assert_gone, fixture, pids, wrapper};

/// A running `codemode mcp serve --http`.
pub struct Served {
    child: Child,
    /// The endpoint's URL from the line the server printed.
    pub url: String,
    /// Everything it wrote to stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `codemode mcp serve --http ADDR ARGS...` in `cwd` with `env`
    /// and waits for the line naming its URL.
    pub fn start(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Served {
        let mut child = spawn(args, cwd, env);
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut url = None;
        let mut line = String::new();
        while lines.read_line(&mut line).unwrap_or(0) > 0 {
            stderr.lock().unwrap().push_str(&line);
            if let Some(rest) = line.split("serving MCP on ").nth(1) {
                url = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
            line.clear();
        }
        let Some(url) = url else {
            let _ = child.wait();
            panic!("the server did not start:\n{}", stderr.lock().unwrap());
        };
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                collected.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Served { child, url, stderr }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap()
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits for the exit; its exit code.
    pub fn terminate(mut self) -> Option<i32> {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        self.child.wait().unwrap().code()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary with `args`, stderr piped.
fn spawn(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_codemode"))
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args(["mcp", "serve"])
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .env_remove("CODEMODE_SERVE_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// A workspace with `servers.json` configuring the fixture server `fx`
/// (tests/fixtures/mcp/misbehaving.py, `normal`), which writes its pids
/// to the returned file.
pub fn with_fixture_server() -> (tempfile::TempDir, std::path::PathBuf) {
    let ws = crate::common::workspace();
    let pid_file = ws.path().join("pids");
    let servers = json!({"mcpServers": {"fx": {
        "command": wrapper(),
        "args": ["python3", fixture(), "normal"],
        "env": {"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()},
    }}});
    std::fs::write(ws.path().join("servers.json"), servers.to_string()).unwrap();
    (ws, pid_file)
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// The header lines, as sent.
    pub headers: String,
    pub body: String,
}

impl Reply {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    /// The JSON-RPC response in the body: the body itself, or the SSE
    /// event carrying a result or an error.
    pub fn json(&self) -> Value {
        if let Ok(v) = serde_json::from_str::<Value>(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("result").is_some() || v.get("error").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC response in {}: {}", self.status, self.body))
    }
}

/// POSTs `body` to `url` with the headers MCP needs and `headers`.
pub fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> Reply {
    let mut all =
        vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    all.extend_from_slice(headers);
    request("POST", url, &all, Some(body))
}

/// An HTTP request with curl.
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Reply {
    let mut curl = Command::new("curl");
    curl.args(["-sS", "-i", "--max-time", "120", "-X", method, "-H", "Expect:"]);
    for (name, value) in headers {
        curl.arg("-H").arg(format!("{name}: {value}"));
    }
    if body.is_some() {
        curl.args(["--data-binary", "@-"]);
    }
    let mut child = curl.arg(url).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("curl runs");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(body) = body {
        stdin.write_all(body.to_string().as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "curl {method} {url} failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Reply { status, headers: head.to_owned(), body: body.to_owned() }
}

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// `initialize` (2025-11-25) and `notifications/initialized`: the session id.
pub fn open_session(url: &str, extra: &[(&str, &str)], capabilities: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": capabilities,
        "clientInfo": {"name": "curl", "version": "1"}}});
    let reply = post(url, extra, &init);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json()["result"]["protocolVersion"], LEGACY, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("a session id");
    let mut headers = extra.to_vec();
    headers.extend([("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", LEGACY)]);
    let done = post(url, &headers, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(done.status, 202, "{done:?}");
    session
}

/// A request in session `session`.
pub fn in_session(url: &str, session: &str, id: u64, method: &str, params: Value) -> Value {
    let headers = [("Mcp-Session-Id", session), ("MCP-Protocol-Version", LEGACY)];
    let reply = post(url, &headers, &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()
}

/// The `_meta` of a 2026-07-28 request from a client that declared form
/// elicitation (or none).
pub fn modern_meta(elicitation: bool) -> Value {
    let capabilities = if elicitation { json!({"elicitation": {"form": {}}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "1"},
    })
}

/// A 2026-07-28 request, with the headers the era needs.
pub fn modern(url: &str, extra: &[(&str, &str)], id: u64, method: &str, params: Value) -> Reply {
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name.as_str()));
    }
    headers.extend_from_slice(extra);
    post(url, &headers, &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// A 2026-07-28 `tools/call` of execute_tools with `arguments` and
/// `extra` params (inputResponses, requestState).
pub fn modern_call(url: &str, arguments: Value, extra: Value, elicitation: bool) -> Value {
    let mut params =
        json!({"name": "execute_tools", "arguments": arguments, "_meta": modern_meta(elicitation)});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    let reply = modern(url, &[], 7, "tools/call", params);
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()["result"].clone()
}

#[test]
fn a_2025_11_25_client_gets_a_session_lists_the_tools_and_runs_a_program() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("note.txt"), "hello over http\n").unwrap();
    let served = Served::start(&["--http", "127.0.0.1:0"], ws.path(), &[]);
    assert!(served.url.starts_with("http://127.0.0.1:") && served.url.ends_with("/mcp"), "{}", served.url);
    let session = open_session(&served.url, &[], json!({}));

    let listed = in_session(&served.url, &session, 2, "tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"execute_tools") && names.contains(&"tool_search"), "{names:?}");

    let code = "const r = await tools.call('read', {path: 'note.txt'}); return r.content;";
    let called = in_session(
        &served.url,
        &session,
        3,
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"code": code}}),
    );
    let result = &called["result"];
    assert_eq!(result["structuredContent"]["status"], "completed", "{called}");
    assert!(result["structuredContent"]["value"].as_str().unwrap().contains("hello over http"), "{called}");
    assert_eq!(result["isError"], false);

    // Another path is not the endpoint.
    let elsewhere = request("GET", &served.url.replace("/mcp", "/other"), &[], None);
    assert_eq!(elsewhere.status, 404, "{elsewhere:?}");
    assert!(elsewhere.body.contains("/mcp"), "{elsewhere:?}");

    // The session ends when the client deletes it.
    let headers = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", LEGACY)];
    let deleted = request("DELETE", &served.url, &headers, None);
    assert!((200..300).contains(&deleted.status), "{deleted:?}");
    let gone = post(&served.url, &headers, &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
    assert_eq!(gone.status, 404, "{gone:?}");

    assert_eq!(served.terminate(), Some(0), "SIGTERM stops the server cleanly");
}

#[test]
fn a_2026_07_28_client_discovers_and_calls_without_a_session() {
    let ws = crate::common::workspace();
    let served = Served::start(&["--http", "127.0.0.1:0"], ws.path(), &[]);
    let discovered = modern(&served.url, &[], 1, "server/discover", json!({"_meta": modern_meta(false)}));
    assert_eq!(discovered.status, 200, "{discovered:?}");
    let result = &discovered.json()["result"];
    assert!(result["supportedVersions"].as_array().unwrap().contains(&json!(MODERN)), "{result}");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(discovered.header("mcp-session-id").is_none(), "{discovered:?}");

    let result = modern_call(&served.url, json!({"code": "return 6 * 7"}), json!({}), false);
    assert_eq!(result["structuredContent"]["status"], "completed", "{result}");
    assert_eq!(result["structuredContent"]["value"], 42, "{result}");

    // Without the era's _meta the request is refused before it runs.
    let bare = modern(
        &served.url,
        &[],
        2,
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"code": "return 1"}}),
    );
    assert_eq!(bare.status, 400, "{bare:?}");
}

#[test]
fn a_foreign_origin_or_host_is_refused() {
    let ws = crate::common::workspace();
    let args = ["--http", "127.0.0.1:0", "--allow-origin", "https://app.example.com:443"];
    let served = Served::start(&args, ws.path(), &[]);
    let discover = |headers: &[(&str, &str)]| {
        modern(&served.url, headers, 1, "server/discover", json!({"_meta": modern_meta(false)}))
    };
    // A web page of another site (DNS rebinding, cross-origin requests).
    let evil = discover(&[("Origin", "http://evil.example")]);
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.body.contains("Origin"), "{evil:?}");
    let port = served.port().to_string();
    let loopback = format!("http://localhost:{port}");
    assert_eq!(discover(&[("Origin", loopback.as_str())]).status, 200);
    assert_eq!(discover(&[("Origin", "https://app.example.com")]).status, 200, "an allowed origin");
    // A name that is not this machine's.
    let host = format!("evil.example:{port}");
    let foreign = discover(&[("Host", host.as_str())]);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    assert!(foreign.body.contains("Host"), "{foreign:?}");
    // No Origin (not a browser) and a loopback Host pass.
    assert_eq!(discover(&[]).status, 200);
}

#[test]
fn beyond_loopback_a_bearer_token_is_required() {
    let ws = crate::common::workspace();
    let refused = spawn(&["--http", "0.0.0.0:0"], ws.path(), &[]).wait_with_output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--token-file") && err.contains("CODEMODE_SERVE_TOKEN"), "{err}");

    let token = "s3cret-token-0123456789abcdef";
    // Outside the workspace, where programs cannot read it.
    let outside = tempfile::tempdir().unwrap();
    let token_file = outside.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let token_file = token_file.to_str().unwrap();
    let args = ["--http", "0.0.0.0:0", "--token-file", token_file, "--allow-host", "mcp.example.com"];
    let served = Served::start(&args, ws.path(), &[]);
    assert!(served.url.starts_with("http://0.0.0.0:"), "{}", served.url);
    let url = format!("http://127.0.0.1:{}/mcp", served.port());
    let discover = |headers: &[(&str, &str)]| {
        modern(&url, headers, 1, "server/discover", json!({"_meta": modern_meta(false)}))
    };
    let missing = discover(&[]);
    assert_eq!(missing.status, 401, "{missing:?}");
    assert_eq!(missing.header("www-authenticate").as_deref(), Some(r#"Bearer realm="codemode""#));
    let wrong = discover(&[("Authorization", "Bearer s3cret-token-0123456789abcdeX")]);
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(wrong.header("www-authenticate").unwrap().contains("invalid_token"), "{wrong:?}");
    let bearer = format!("Bearer {token}");
    assert_eq!(discover(&[("Authorization", bearer.as_str())]).status, 200);
    // The public name a reverse proxy passes on is allowed with --allow-host.
    let host = format!("mcp.example.com:{}", served.port());
    assert_eq!(discover(&[("Authorization", bearer.as_str()), ("Host", host.as_str())]).status, 200);
    // The token is right but the name is not.
    let other = format!("other.example.com:{}", served.port());
    assert_eq!(discover(&[("Authorization", bearer.as_str()), ("Host", other.as_str())]).status, 403);
    let stderr = served.stderr();
    assert!(!stderr.contains(token), "the token leaked to stderr:\n{stderr}");

    // On loopback a token from the environment is required too.
    let served = Served::start(&["--http", "127.0.0.1:0"], ws.path(), &[("CODEMODE_SERVE_TOKEN", token)]);
    let discover = |headers: &[(&str, &str)]| {
        modern(&served.url, headers, 1, "server/discover", json!({"_meta": modern_meta(false)}))
    };
    assert_eq!(discover(&[]).status, 401);
    assert_eq!(discover(&[("Authorization", bearer.as_str())]).status, 200);
}

#[test]
fn each_2025_11_25_session_has_its_own_mcp_servers_ended_with_the_session() {
    let (ws, pid_file) = with_fixture_server();
    let args = ["--http", "127.0.0.1:0", "--mcp-config", "servers.json", "--posture", "full-access"];
    let served = Served::start(&args, ws.path(), &[]);
    let call = json!({"name": "execute_tools", "arguments": {"code": "return await tools.call('mcp__fx__echo', {text: 'hi'})"}});
    let first = open_session(&served.url, &[], json!({}));
    let ran = in_session(&served.url, &first, 2, "tools/call", call.clone());
    assert_eq!(ran["result"]["structuredContent"]["status"], "completed", "{ran}");
    let first_pids = pids(&pid_file);
    assert_eq!(first_pids.len(), 2, "wrapper and server of the first session");

    let second = open_session(&served.url, &[], json!({}));
    let ran = in_session(&served.url, &second, 2, "tools/call", call.clone());
    assert_eq!(ran["result"]["structuredContent"]["status"], "completed", "{ran}");
    let all = pids(&pid_file);
    assert_eq!(all.len(), 4, "the second session started its own server: {all:?}");

    // Closing the first session ends its server, not the second's.
    let headers = [("Mcp-Session-Id", first.as_str()), ("MCP-Protocol-Version", LEGACY)];
    let deleted = request("DELETE", &served.url, &headers, None);
    assert!((200..300).contains(&deleted.status), "{deleted:?}");
    assert_gone(&first_pids);
    let ran = in_session(&served.url, &second, 3, "tools/call", call);
    assert_eq!(ran["result"]["structuredContent"]["status"], "completed", "{ran}");
    assert_eq!(pids(&pid_file).len(), 4, "the second session's server kept running");

    // Stopping the server ends the rest.
    assert_eq!(served.terminate(), Some(0));
    assert_gone(&all[2..]);
}

/// A fresh schema in the test database, as a `--journal` URL; `None`
/// (loudly) when `CODEMODE_TEST_POSTGRES_URL` is not set, a failure under
/// CI (journal_postgres.rs makes it).
fn postgres_journal(test: &str) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(crate::journal_postgres::database(test)).map(|db| db.url.clone())
}

#[test]
fn an_approval_asked_on_one_replica_is_answered_on_another() {
    let Some(journal) = postgres_journal("replicas") else { return };
    let ws = crate::common::workspace();
    // The key is kept outside the workspace (a program could read it there).
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("state.key");
    std::fs::write(&key, "a shared key of replicas, 32 bytes or more\n").unwrap();
    let key = key.to_str().unwrap();
    let args = ["--http", "127.0.0.1:0", "--journal", &journal, "--state-key-file", key, "--posture", "ask"];
    let a = Served::start(&args, ws.path(), &[]);
    let b = Served::start(&args, ws.path(), &[]);
    let count = || std::fs::read_to_string(ws.path().join("count.txt")).unwrap_or_default().lines().count();
    let program = json!({"code": "return await tools.call('bash', {command: 'echo ran >> count.txt'})"});

    // Replica A: the run pauses, and the answer asks the person.
    let asked = modern_call(&a.url, program.clone(), json!({}), true);
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = &asked["inputRequests"]["approve"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert!(question["params"]["message"].as_str().unwrap().contains("echo ran >> count.txt"), "{asked}");
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert_eq!(count(), 0, "nothing ran before the person answered");

    // Replica B: the person accepted; the run resumes from the journal.
    let accept =
        json!({"inputResponses": {"approve": {"action": "accept", "content": {}}}, "requestState": state});
    let done = modern_call(&b.url, program.clone(), accept.clone(), true);
    assert_eq!(done["structuredContent"]["status"], "completed", "{done}");
    assert_eq!(done["structuredContent"]["calls"]["bash"]["ok"], 1, "{done}");
    assert_eq!(count(), 1, "the bash call ran once");

    // A declined approval: denied, not run.
    let asked = modern_call(&a.url, program.clone(), json!({}), true);
    let state = asked["requestState"].as_str().unwrap().to_owned();
    let decline = json!({"inputResponses": {"approve": {"action": "decline"}}, "requestState": state});
    let declined = modern_call(&b.url, program.clone(), decline, true);
    assert_eq!(declined["structuredContent"]["calls"]["bash"]["refused"], 1, "{declined}");
    assert!(
        declined["content"][0]["text"].as_str().unwrap().contains("declined by the person"),
        "{declined}"
    );
    assert_eq!(count(), 1, "a declined call did not run");

    // A tampered state: refused, nothing ran.
    let asked = modern_call(&a.url, program.clone(), json!({}), true);
    let state = asked["requestState"].as_str().unwrap().to_owned();
    let mut tampered: Vec<char> = state.chars().collect();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let forged = json!({"inputResponses": {"approve": {"action": "accept"}}, "requestState": tampered});
    let refused = modern_call(&b.url, program.clone(), forged, true);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(refused["content"][0]["text"].as_str().unwrap().contains("requestState"), "{refused}");
    // The real state, for other arguments: refused too.
    let other = json!({"code": "return await tools.call('bash', {command: 'echo other >> count.txt'})"});
    let moved = json!({"inputResponses": {"approve": {"action": "accept"}}, "requestState": state});
    let refused = modern_call(&b.url, other, moved, true);
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(count(), 1, "nothing ran on a refused state");

    // A client without elicitation: paused on A; a person decides with
    // `codemode approve` against the same database; the model's resume on
    // B goes on with that decision only.
    let paused = modern_call(&a.url, program.clone(), json!({}), false);
    let sc = &paused["structuredContent"];
    assert_eq!(sc["status"], "paused", "{paused}");
    let run_id = sc["run_id"].as_str().unwrap().to_owned();
    let early = modern_call(&b.url, json!({"resume": run_id}), json!({}), false);
    assert_eq!(early["structuredContent"]["status"], "paused", "{early}");
    assert_eq!(count(), 1, "a resume without a person's decision runs nothing");
    let ws_arg = ws.path().to_str().unwrap();
    let out = crate::cli::codemode(
        &["approve", &run_id, "--allow", "1", "--journal", &journal, "--workspace", ws_arg],
        "",
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let resumed = modern_call(&b.url, json!({"resume": run_id}), json!({}), false);
    assert_eq!(resumed["structuredContent"]["status"], "completed", "{resumed}");
    assert_eq!(count(), 2, "the approved call ran once, on replica B");
}

#[test]
fn sigterm_cancels_a_run_in_flight_and_saves_its_receipt() {
    let ws = crate::common::workspace();
    let served = Served::start(&["--http", "127.0.0.1:0", "--posture", "full-access"], ws.path(), &[]);
    let session = open_session(&served.url, &[], json!({}));
    let code =
        "return await tools.call('bash', {command: 'echo go > started; sleep 60; echo done > finished'})";
    let url = served.url.clone();
    let call = std::thread::spawn(move || {
        in_session(
            &url,
            &session,
            2,
            "tools/call",
            json!({"name": "execute_tools", "arguments": {"code": code}}),
        )
    });
    let started = ws.path().join("started");
    for _ in 0..2000 {
        if std::fs::read_to_string(&started).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(started.exists(), "the bash call started");
    assert_eq!(served.terminate(), Some(0), "the server stops cleanly");
    let answered = call.join().unwrap();
    let result = &answered["result"]["structuredContent"];
    assert_eq!(result["status"], "cancelled", "{answered}");
    let receipt = result["receipt_path"].as_str().expect("the receipt was saved");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(receipt).unwrap()).unwrap();
    assert_eq!(saved["status"], "cancelled");
    assert_ne!(saved["calls"][0]["status"], "ok", "{saved}");
    assert!(!ws.path().join("finished").exists(), "the bash call was cut");
}

#[test]
fn a_body_above_the_bound_is_refused_before_it_is_parsed() {
    let ws = crate::common::workspace();
    let served = Served::start(&["--http", "127.0.0.1:0"], ws.path(), &[]);
    let big = "x".repeat(codemode_serve::MAX_BODY_BYTES + 1);
    let params = json!({"name": "execute_tools", "arguments": {"code": big}, "_meta": modern_meta(false)});
    let refused = modern(&served.url, &[], 1, "tools/call", params);
    assert_eq!(refused.status, 413, "{}", refused.headers);
    let params =
        json!({"name": "execute_tools", "arguments": {"code": "return 1"}, "_meta": modern_meta(false)});
    assert_eq!(modern(&served.url, &[], 2, "tools/call", params).status, 200, "the server goes on");
}

#[test]
fn bad_http_options_exit_2_saying_what_to_give() {
    let ws = crate::common::workspace();
    let cases: [(&[&str], &str); 4] = [
        (&["--http", "localhost"], "IP:PORT"),
        (&["--http", "127.0.0.1:0", "--allow-origin", "app.example.com"], "scheme://host"),
        (&["--http", "127.0.0.1:0", "--token-file", "missing-token"], "--token-file missing-token"),
        (&["--token-file", "token"], "--http"),
    ];
    let outside = tempfile::tempdir().unwrap();
    let short = outside.path().join("short");
    std::fs::write(&short, "short").unwrap();
    for (args, says) in cases {
        let out = spawn(args, ws.path(), &[]).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = spawn(&["--http", "127.0.0.1:0", "--token-file", short.to_str().unwrap()], ws.path(), &[])
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 16") && !err.contains("short\n"), "{err}");
}

/// A `--token-file` inside the workspace is refused, as a
/// `--state-key-file` there is: a program could read the token (`read`,
/// `bash`) and call the server as the user.
#[test]
fn a_token_file_inside_the_workspace_is_refused() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("tok"), "a-token-of-enough-length-0123456789\n").unwrap();
    let workspace = ws.path().to_str().unwrap();
    let args = ["mcp", "serve", "--http", "127.0.0.1:0", "--token-file", "tok", "--workspace", workspace];
    let mut child = crate::cli::spawn(&args, ws.path(), &[]);
    drop(child.stdin.take());
    let mut status = None;
    for _ in 0..400 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the server started: {stderr}");
    assert!(stderr.contains("--token-file tok: the bearer token is inside the workspace"), "{stderr}");
}
