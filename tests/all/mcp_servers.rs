//! The MCP client pool against the real reference servers installed by
//! .ci/run: server-everything (stdio and streamable HTTP),
//! server-filesystem, server-memory (node) and mcp-server-time (Python).

use std::path::Path;
use std::time::Duration;

use codemode::mcp::{McpError, McpTool};
use codemode::{Tool, tool::Loading, tool::ToolSource};
use serde_json::{Value, json};

use crate::mcp_support::*;

fn find<'a>(tools: &'a [McpTool], name: &str) -> &'a McpTool {
    tools.iter().find(|t| t.tool_name() == name).unwrap_or_else(|| {
        panic!("no tool {name} in {:?}", tools.iter().map(McpTool::tool_name).collect::<Vec<_>>())
    })
}

fn everything() -> Value {
    json!({"everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_lists_calls_and_carries_annotations_and_structured_content() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(everything(), dir.path());
    let tools = pool.connect("everything").await.unwrap();
    assert!(tools.len() >= 10, "{} tools", tools.len());

    let echo = find(&tools, "echo");
    let spec = echo.spec();
    assert_eq!(spec.name, "mcp__everything__echo");
    assert_eq!(spec.source, ToolSource::Mcp { server: "everything".into() });
    assert_eq!(spec.loading, Loading::Deferred);
    assert_eq!(
        (
            spec.annotations.read_only,
            spec.annotations.destructive,
            spec.annotations.idempotent,
            spec.annotations.open_world
        ),
        (Some(true), Some(false), Some(true), Some(false))
    );
    assert_eq!(spec.input_schema["properties"]["message"]["type"], "string");
    let out = echo.call(json!({"message": "hello"}), cx()).await.unwrap();
    assert_eq!(out.content, json!("Echo: hello"));

    let sum = find(&tools, "get-sum").call(json!({"a": 2, "b": 40}), cx()).await.unwrap();
    assert!(sum.content.as_str().unwrap().contains("42"), "{:?}", sum.content);

    let structured = find(&tools, "get-structured-content");
    assert!(structured.spec().output_schema.is_some());
    let weather = structured.call(json!({"location": "Chicago"}), cx()).await.unwrap().content;
    assert_eq!(weather["temperature"], 36);
    assert_eq!(weather["conditions"], "Light rain / drizzle");

    let image = find(&tools, "get-tiny-image").call(json!({}), cx()).await.unwrap().content;
    let blocks = image.as_array().expect("several blocks");
    assert!(blocks.iter().any(|b| b["type"] == "image" && b["mimeType"] == "image/png"), "{image}");

    // An invalid argument is an isError result: a failed call.
    let err = pool.call("everything", "get-sum", json!({"a": "two", "b": 1}), None, None).await.unwrap_err();
    assert!(matches!(err, McpError::ToolFailed { .. }), "{err}");

    // A slow call cut by its timeout.
    let err = pool
        .call(
            "everything",
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 3}),
            Some(Duration::from_millis(300)),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::CallTimeout { .. }), "{err}");
    // The connection is still usable afterwards.
    assert_eq!(echo.call(json!({"message": "again"}), cx()).await.unwrap().content, json!("Echo: again"));
    pool.shutdown().await;
}

/// server-everything in streamable HTTP mode on a free local port, killed
/// and reaped on drop.
pub struct HttpServer {
    child: std::process::Child,
    pub port: u16,
}

impl HttpServer {
    pub fn start() -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("node")
            .args([node_server("server-everything"), "streamableHttp".into()])
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = HttpServer { child, port };
        for _ in 0..1000 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("server-everything did not listen on port {port}");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let server = HttpServer::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let pool = pool(json!({"web": {"type": "http", "url": url, "headers": {"X-Test": "1"}}}), dir.path());
    assert_eq!(pool.servers()[0].transport, "http");
    let tools = pool.connect("web").await.unwrap();
    assert_eq!(find(&tools, "echo").spec().name, "mcp__web__echo");
    let out = find(&tools, "echo").call(json!({"message": "over http"}), cx()).await.unwrap();
    assert_eq!(out.content, json!("Echo: over http"));
    let weather = pool
        .call("web", "get-structured-content", json!({"location": "New York"}), None, None)
        .await
        .unwrap();
    assert_eq!(weather.content["humidity"], 82);
    let err = pool
        .call(
            "web",
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 3}),
            Some(Duration::from_millis(300)),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::CallTimeout { .. }), "{err}");
    pool.shutdown().await;
    drop(server);

    // A server that is not there is an error, not a wait.
    let gone = crate::mcp_support::pool(json!({"web": {"url": url, "startup_timeout_ms": 5000}}), dir.path());
    let err = gone.connect("web").await.unwrap_err();
    assert!(matches!(err, McpError::Initialize { .. } | McpError::StartupTimeout { .. }), "{err}");
}

fn files_and_memory(root: &Path, memory: &Path) -> Value {
    json!({
        "files": {"command": "node", "args": [node_server("server-filesystem"), root.to_string_lossy()]},
        "memory": {"command": "node", "args": [node_server("server-memory")],
                   "env": {"MEMORY_FILE_PATH": memory.to_string_lossy()}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_and_memory_compose_through_their_tools() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("root")).unwrap();
    let root = dir.path().join("root").canonicalize().unwrap();
    std::fs::write(root.join("team.txt"), "ada: engineer\ngrace: admiral\n").unwrap();
    let memory = dir.path().join("memory.jsonl");
    let pool = pool(files_and_memory(&root, &memory), dir.path());
    let files = pool.connect("files").await.unwrap();
    let mem = pool.connect("memory").await.unwrap();

    // Annotations as the servers declare them.
    assert_eq!(find(&files, "read_text_file").spec().annotations.read_only, Some(true));
    let write = find(&files, "write_file").spec();
    assert_eq!((write.annotations.read_only, write.annotations.destructive), (Some(false), Some(true)));
    assert!(find(&mem, "create_entities").spec().output_schema.is_some());

    // Read a file with one server, record it in the other, read it back.
    let path = root.join("team.txt").to_string_lossy().into_owned();
    let text = find(&files, "read_text_file").call(json!({"path": path}), cx()).await.unwrap().content;
    let text =
        text["content"].as_str().map(str::to_owned).unwrap_or_else(|| text.as_str().unwrap().to_owned());
    let entities: Vec<Value> = text
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(name, role)| json!({"name": name, "entityType": "person", "observations": [role]}))
        .collect();
    assert_eq!(entities.len(), 2);
    let created =
        find(&mem, "create_entities").call(json!({"entities": entities}), cx()).await.unwrap().content;
    assert_eq!(created["entities"].as_array().unwrap().len(), 2);
    let found = find(&mem, "search_nodes").call(json!({"query": "admiral"}), cx()).await.unwrap().content;
    let names: Vec<&str> =
        found["entities"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["grace"]);

    // Write the graph back through the filesystem server; outside its root is an isError.
    let summary = format!("{names:?}");
    let out = root.join("found.txt").to_string_lossy().into_owned();
    find(&files, "write_file").call(json!({"path": out, "content": summary}), cx()).await.unwrap();
    assert_eq!(std::fs::read_to_string(root.join("found.txt")).unwrap(), "[\"grace\"]");
    let err = find(&files, "read_text_file").call(json!({"path": "/etc/hostname"}), cx()).await.unwrap_err();
    assert!(err.message.contains("failed"), "{err}");
    assert!(memory.exists());
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_time_server() {
    let dir = tempfile::tempdir().unwrap();
    let pool =
        pool(json!({"time": {"command": time_server(), "args": ["--local-timezone", "UTC"]}}), dir.path());
    let tools = pool.connect("time").await.unwrap();
    let now = find(&tools, "get_current_time").call(json!({"timezone": "UTC"}), cx()).await.unwrap().content;
    assert_eq!(now["timezone"], "UTC");
    assert!(now["datetime"].as_str().unwrap().contains('T'), "{now}");
    let converted = find(&tools, "convert_time")
        .call(json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}), cx())
        .await
        .unwrap()
        .content;
    assert!(converted["target"]["datetime"].as_str().unwrap().contains("21:00"), "{converted}");
    let err = pool
        .call("time", "get_current_time", json!({"timezone": "Not/AZone"}), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::ToolFailed { .. } | McpError::Protocol { .. }), "{err}");
    pool.shutdown().await;
}
