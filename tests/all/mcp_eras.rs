//! Both MCP protocol eras against real servers: server-everything (TS SDK
//! 1.x, 2025-11-25), mcp-server-time (Python mcp 2.3, 2026-07-28) and a
//! TS SDK v2 server (tests/node/servers/v2_fixture.mjs, 2026-07-28 over
//! stdio and streamable HTTP). The era is detected and kept in the schema
//! cache; server requests (elicitation, roots) reach the calling tool
//! call's elicitor in both eras.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use codemode::mcp::{Era, McpPool, McpTool, PoolOptions};
use codemode::{
    Tool, elicitation::Elicitation, elicitation::ElicitationAction, elicitation::ElicitationAnswer,
    elicitation::ElicitationFuture, elicitation::ElicitationMode, elicitation::Elicitor, tool::ToolContext,
};
use serde_json::{Map, Value, json};

use crate::mcp_support::*;

/// Answers every question the same way, and keeps the questions.
struct Answering {
    action: ElicitationAction,
    seen: Mutex<Vec<Elicitation>>,
}

impl Answering {
    fn new(action: ElicitationAction) -> Arc<Answering> {
        Arc::new(Answering { action, seen: Mutex::new(Vec::new()) })
    }

    fn seen(&self) -> Vec<Elicitation> {
        self.seen.lock().unwrap().clone()
    }
}

impl Elicitor for Answering {
    /// Accept fills the form with the schema's defaults.
    fn elicit(&self, question: Elicitation) -> ElicitationFuture {
        let content = match (&question.mode, self.action) {
            (ElicitationMode::Form { requested_schema }, ElicitationAction::Accept) => {
                let props = requested_schema["properties"].as_object().cloned().unwrap_or_default();
                let defaults: Map<String, Value> =
                    props.into_iter().filter_map(|(k, p)| Some((k, p.get("default")?.clone()))).collect();
                Some(defaults)
            }
            _ => None,
        };
        self.seen.lock().unwrap().push(question);
        let answer = ElicitationAnswer::new(self.action, content);
        Box::pin(async move { answer })
    }
}

fn cx_with(elicitor: &Arc<Answering>, workspace: &Path) -> ToolContext {
    let mut cx = ToolContext::new(workspace.to_owned(), "test-run", 1, codemode::receipt::Caller::Program);
    cx.elicitor = Some(elicitor.clone() as Arc<dyn Elicitor>);
    cx
}

fn find<'a>(tools: &'a [McpTool], name: &str) -> &'a McpTool {
    tools.iter().find(|t| t.tool_name() == name).unwrap_or_else(|| {
        panic!("no tool {name} in {:?}", tools.iter().map(McpTool::tool_name).collect::<Vec<_>>())
    })
}

fn v2_fixture() -> String {
    root().join("tests/node/servers/v2_fixture.mjs").to_string_lossy().into_owned()
}

/// A stdio server whose stdin (what codemode sends) is also appended to
/// `log`.
fn logged(log: &Path, command: &str, args: &[&str]) -> Value {
    let mut all = vec!["-c".to_owned(), "tee -a \"$0\" | \"$@\"".to_owned(), log.display().to_string()];
    all.push(command.to_owned());
    all.extend(args.iter().map(|a| (*a).to_owned()));
    json!({"command": "sh", "args": all})
}

/// The JSON-RPC requests in a log, in order.
fn requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect()
}

fn pool_in(servers: Value, cache: &Path, workspace: &Path) -> McpPool {
    McpPool::new(config(servers), PoolOptions { workspace: Some(workspace.to_owned()), ..options(cache) })
}

fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_is_initialised_at_2025_11_25_and_remembered_as_legacy() {
    let (cache, _) = canonical_tempdir();
    let (_ws, workspace) = canonical_tempdir();
    let log = cache.path().join("sent.jsonl");
    let everything = node_server("server-everything");
    let servers = json!({"everything": logged(&log, "node", &[&everything, "stdio"])});

    let pool = pool_in(servers.clone(), cache.path(), &workspace);
    assert_eq!(pool.servers()[0].era, None);
    let tools = pool.connect("everything").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy));
    let sent = requests(&log);
    let methods: Vec<&str> = sent.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(&methods[..2], ["server/discover", "initialize"], "{methods:?}");
    assert_eq!(sent[1]["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        sent[1]["params"]["capabilities"],
        json!({"elicitation": {"form": {}, "url": {}}, "roots": {}}),
        "declared capabilities"
    );
    // With the capabilities declared, the elicitation and roots tools show.
    for name in ["trigger-elicitation-request", "get-roots-list"] {
        find(&tools, name);
    }
    pool.shutdown().await;

    // Next time the cache says legacy: no probe.
    std::fs::remove_file(&log).unwrap();
    let pool = pool_in(servers, cache.path(), &workspace);
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy), "the era comes from the cache");
    pool.connect("everything").await.unwrap();
    let methods: Vec<String> =
        requests(&log).iter().map(|m| m["method"].as_str().unwrap().to_owned()).collect();
    assert_eq!(methods[0], "initialize", "{methods:?}");
    assert!(!methods.iter().any(|m| m == "server/discover"), "{methods:?}");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_elicitation_and_roots_reach_the_calling_tool_call() {
    let (cache, _) = canonical_tempdir();
    let (_ws, workspace) = canonical_tempdir();
    let pool = pool_in(
        json!({"everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]}}),
        cache.path(),
        &workspace,
    );
    let tools = pool.connect("everything").await.unwrap();

    let accept = Answering::new(ElicitationAction::Accept);
    let out = find(&tools, "trigger-elicitation-request").call(json!({}), cx_with(&accept, &workspace)).await;
    let text = out.unwrap().content.to_string();
    let seen = accept.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].server, "everything");
    assert_eq!(seen[0].message, "Please provide inputs for the following fields:");
    let ElicitationMode::Form { requested_schema } = &seen[0].mode else { panic!("{seen:?}") };
    assert_eq!(requested_schema["properties"]["integer"]["default"], 42);
    // The server got the defaults back.
    assert!(text.contains("It was a dark and stormy night.") && text.contains("42"), "{text}");

    let decline = Answering::new(ElicitationAction::Decline);
    let out =
        find(&tools, "trigger-elicitation-request").call(json!({}), cx_with(&decline, &workspace)).await;
    let text = out.unwrap().content.to_string();
    assert_eq!(decline.seen().len(), 1);
    assert!(text.to_lowercase().contains("decline"), "{text}");

    // The root is the calling tool call's workspace (or the pool's, when
    // the server asks outside a call: the same folder here).
    let out = find(&tools, "get-roots-list").call(json!({}), cx_with(&accept, &workspace)).await.unwrap();
    let text = out.content.to_string();
    assert!(text.contains(&file_uri(&workspace)), "{text}");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_speaks_the_modern_era() {
    let (cache, _) = canonical_tempdir();
    let log = cache.path().join("sent.jsonl");
    let pool = pool_in(json!({"time": logged(&log, &time_server(), &[])}), cache.path(), cache.path());
    let tools = pool.connect("time").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Modern));
    let out = find(&tools, "get_current_time").call(json!({"timezone": "UTC"}), cx()).await.unwrap();
    assert_eq!(out.content["timezone"], "UTC", "{:?}", out.content);
    let sent = requests(&log);
    assert_eq!(sent[0]["method"], "server/discover");
    assert!(!sent.iter().any(|m| m["method"] == "initialize"), "{sent:?}");
    for request in &sent {
        let meta = &request["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{request}");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "codemode", "{request}");
        assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object(), "{request}");
    }
    pool.shutdown().await;
    let again = pool_in(json!({"time": logged(&log, &time_server(), &[])}), cache.path(), cache.path());
    assert_eq!(again.servers()[0].era, Some(Era::Modern), "the era comes from the cache");
}

/// A tool's text content parsed as JSON (the pool may have parsed it).
fn json_of(content: Value) -> Value {
    match content {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    }
}

/// The v2 fixture's modern tools, over whichever transport `pool` uses.
async fn modern_round_trips(pool: &McpPool, server: &str, workspace: &Path) {
    let tools = pool.connect(server).await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Modern));

    let envelope = json_of(find(&tools, "envelope").call(json!({}), cx()).await.unwrap().content);
    let meta = &envelope["envelope"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{envelope}");
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "codemode", "{envelope}");
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}, "url": {}}, "roots": {}}),
        "{envelope}"
    );

    let accept = Answering::new(ElicitationAction::Accept);
    let out = find(&tools, "ask_name").call(json!({}), cx_with(&accept, workspace)).await.unwrap();
    assert_eq!(out.content, json!("hello Ada"));
    let seen = accept.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].server.as_str(), seen[0].message.as_str()), (server, "What is your name?"));
    let ElicitationMode::Form { requested_schema } = &seen[0].mode else { panic!("{seen:?}") };
    assert_eq!(requested_schema["properties"]["name"]["default"], "Ada");

    let decline = Answering::new(ElicitationAction::Decline);
    let out = find(&tools, "ask_name").call(json!({}), cx_with(&decline, workspace)).await.unwrap();
    assert_eq!(out.content, json!("declined"));
    // No elicitor: declined.
    let out = find(&tools, "ask_name").call(json!({}), cx()).await.unwrap();
    assert_eq!(out.content, json!("declined"));

    let out = find(&tools, "open_page").call(json!({}), cx_with(&accept, workspace)).await.unwrap();
    assert_eq!(out.content, json!("accept"));
    assert!(
        matches!(&accept.seen()[1].mode, ElicitationMode::Url { url, .. } if url == "https://example.test/sign-in"),
        "{:?}",
        accept.seen()
    );

    let out = find(&tools, "roots").call(json!({}), cx_with(&accept, workspace)).await.unwrap();
    let roots = json_of(out.content);
    assert_eq!(roots[0]["uri"], file_uri(workspace), "{roots}");

    let error = find(&tools, "sample").call(json!({}), cx_with(&accept, workspace)).await.unwrap_err();
    assert!(error.to_string().contains("sampling"), "{error}");

    // A server that never completes is cut after the round bound.
    let error = find(&tools, "forever").call(json!({}), cx()).await.unwrap_err().to_string();
    assert!(error.contains(&format!("after {} rounds", codemode::mcp::MAX_INPUT_ROUNDS)), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_sdk_v2_server_over_stdio_drives_input_required_rounds() {
    let (cache, _) = canonical_tempdir();
    let (_ws, workspace) = canonical_tempdir();
    let pool = pool_in(json!({"v2": {"command": "node", "args": [v2_fixture()]}}), cache.path(), &workspace);
    modern_round_trips(&pool, "v2", &workspace).await;
    // Half a surrogate pair, escaped as JSON.stringify writes it: read as
    // U+FFFD, not dropped as unparsable (the call, which the engine would
    // time, would never be answered).
    let tools = pool.connect("v2").await.unwrap();
    let call = find(&tools, "half_emoji").call(json!({}), cx());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), call)
        .await
        .expect("the answer was dropped")
        .unwrap();
    assert_eq!(out.content, json!("a\u{FFFD}"));
    pool.shutdown().await;
}

/// The v2 fixture over streamable HTTP, killed on drop.
struct HttpFixture {
    child: std::process::Child,
    port: u16,
}

impl HttpFixture {
    fn start() -> HttpFixture {
        let mut child = std::process::Command::new("node")
            .args([v2_fixture(), "--http".into()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok());
        HttpFixture { child, port: port.unwrap_or_else(|| panic!("fixture said {line:?}")) }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_sdk_v2_server_over_streamable_http_drives_input_required_rounds() {
    let server = HttpFixture::start();
    let (cache, _) = canonical_tempdir();
    let (_ws, workspace) = canonical_tempdir();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let pool = pool_in(json!({"v2web": {"type": "http", "url": url}}), cache.path(), &workspace);
    modern_round_trips(&pool, "v2web", &workspace).await;
    // Over HTTP, half a surrogate pair is not repaired: the answer fails
    // at once, saying why (not on its timeout).
    let tools = pool.connect("v2web").await.unwrap();
    let error = find(&tools, "half_emoji").call(json!({}), cx()).await.unwrap_err().to_string();
    assert!(error.contains("could not parse JSON response") && error.contains("hex escape"), "{error}");
    // The next use connects again.
    let tools = pool.connect("v2web").await.unwrap();
    let envelope = json_of(find(&tools, "envelope").call(json!({}), cx()).await.unwrap().content);
    assert!(envelope["envelope"].is_object(), "{envelope}");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unsupported_server_requests_get_errors_and_the_connection_goes_on() {
    let (cache, _) = canonical_tempdir();
    let pool = pool_in(
        json!({"bad": {"command": "python3", "args": [fixture(), "hostile"]}}),
        cache.path(),
        cache.path(),
    );
    let tools = pool.connect("bad").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy));
    let accept = Answering::new(ElicitationAction::Accept);
    let out = find(&tools, "hostile").call(json!({}), cx_with(&accept, cache.path())).await.unwrap();
    let answers = json_of(out.content);
    // The malformed elicitation never reached the elicitor: an invalid
    // request error; sampling: method not found.
    assert_eq!(answers["sample"], -32601, "{answers}");
    assert!(answers["bad-elicit"].as_i64().is_some_and(|c| c < 0), "{answers}");
    assert!(accept.seen().is_empty(), "{:?}", accept.seen());
    let out = find(&tools, "echo").call(json!({"still": "here"}), cx()).await.unwrap();
    assert_eq!(json_of(out.content), json!({"still": "here"}));
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_answering_discover_with_an_empty_result_is_initialised_on_the_same_process() {
    let (cache, _) = canonical_tempdir();
    let pids = cache.path().join("pids");
    let servers = json!({"old": {
        "command": "python3",
        "args": [fixture(), "empty-discover"],
        "env": {"MCP_FIXTURE_PIDS": pids.display().to_string()},
    }});
    let pool = pool_in(servers, cache.path(), cache.path());
    let tools = pool.connect("old").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy));
    let out = find(&tools, "echo").call(json!({"a": 1}), cx()).await.unwrap();
    assert_eq!(json_of(out.content), json!({"a": 1}));
    // The fallback used the same process: no restart.
    assert_eq!(self::pids(&pids).len(), 1, "{:?}", self::pids(&pids));
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_remembered_as_legacy_that_refuses_initialize_is_probed_again() {
    let (cache, _) = canonical_tempdir();
    let servers = json!({"v2": {"command": "node", "args": [v2_fixture(), "--modern-only"]}});
    let pool = pool_in(servers.clone(), cache.path(), cache.path());
    pool.connect("v2").await.unwrap();
    pool.shutdown().await;
    // Make the cache remember it as legacy (as if it was upgraded since).
    let file = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"));
    let file = file.expect("a cache file");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"era\": \"modern\""), "{text}");
    std::fs::write(&file, text.replace("\"era\": \"modern\"", "\"era\": \"legacy\"")).unwrap();

    let pool = pool_in(servers, cache.path(), cache.path());
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy));
    let tools = pool.connect("v2").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Modern));
    let envelope = json_of(find(&tools, "envelope").call(json!({}), cx()).await.unwrap().content);
    assert_eq!(envelope["envelope"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    pool.shutdown().await;
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"era\": \"modern\""), "the cache was corrected: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_over_streamable_http_falls_back_and_elicits() {
    let server = crate::mcp_servers::HttpServer::start();
    let port = server.port;
    let (cache, _) = canonical_tempdir();
    let (_ws, workspace) = canonical_tempdir();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let pool = pool_in(json!({"web": {"type": "http", "url": url}}), cache.path(), &workspace);
    let tools = pool.connect("web").await.unwrap();
    assert_eq!(pool.servers()[0].era, Some(Era::Legacy));
    let accept = Answering::new(ElicitationAction::Accept);
    let out = find(&tools, "trigger-elicitation-request").call(json!({}), cx_with(&accept, &workspace)).await;
    let text = out.unwrap().content.to_string();
    assert_eq!(accept.seen().len(), 1);
    assert!(text.contains("It was a dark and stormy night."), "{text}");
    pool.shutdown().await;
}

/// server-filesystem takes the client's roots in place of the folders its
/// command line names: by default it serves the workspace; a server
/// configured with `"roots": false` is offered none and keeps its folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_false_keeps_a_filesystem_servers_own_folder() {
    let (_dir, workspace) = canonical_tempdir();
    let (_notes_dir, notes) = canonical_tempdir();
    let cache = tempfile::tempdir().unwrap();
    let fs = crate::mcp_support::node_server("server-filesystem");
    let servers = json!({
        "offered": {"command": "node", "args": [fs, notes.to_string_lossy()]},
        "withheld": {"command": "node", "args": [fs, notes.to_string_lossy()], "roots": false},
    });
    let pool = pool_in(servers, cache.path(), &workspace);
    let elicitor = Answering::new(ElicitationAction::Decline);
    let mut allowed = Vec::new();
    for server in ["offered", "withheld"] {
        let tools = pool.connect(server).await.unwrap();
        let tool = find(&tools, "list_allowed_directories");
        // The server asks for the roots after it is initialized and takes
        // them in when the answer comes, so its first answers may still
        // show its own folder: asked again for up to 5 s.
        let mut listed = String::new();
        for _ in 0..50 {
            let out = tool.call(json!({}), cx_with(&elicitor, &workspace)).await.unwrap();
            listed = out.content.to_string();
            if server == "withheld" || listed.contains(&*workspace.to_string_lossy()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        allowed.push(listed);
    }
    let (offered, withheld) = (&allowed[0], &allowed[1]);
    assert!(offered.contains(&*workspace.to_string_lossy()), "{offered}");
    assert!(withheld.contains(&*notes.to_string_lossy()), "{withheld}");
    assert!(!withheld.contains(&*workspace.to_string_lossy()), "{withheld}");
    pool.shutdown().await;
}
