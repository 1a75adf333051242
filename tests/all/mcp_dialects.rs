//! MCP config files as other clients write them (docs/MCP.md,
//! "Configuration files"), each read by the real binary from a
//! real-looking file and ending in a real server started and called:
//! Claude Desktop, Cursor, VS Code (comments, trailing commas, inputs,
//! envFile), Windsurf (`serverUrl`), Zed (`context_servers`), Cline
//! (`disabledTools`, `autoApprove`, `timeout`); the warnings about keys
//! without effect; an untrusted file's `autoApprove` (it must not approve);
//! tools that run only as MCP tasks (hidden, with why).

use std::io::Write as _;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::cli::spawn;
use crate::mcp_support::{node_server, time_server};

/// Runs the binary in `ws` with `stdin`, `env` added.
fn codemode(args: &[&str], stdin: &str, ws: &Path, env: &[(&str, &Path)]) -> Output {
    let mut child = spawn(args, ws, env);
    // A command that ends before it reads its input closes the pipe.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

/// Runs `program` with `args` added and returns the receipt and stderr.
fn run(program: &str, args: &[&str], ws: &Path, env: &[(&str, &Path)]) -> (Value, String) {
    let mut all = vec!["run", "-", "--json"];
    all.extend_from_slice(args);
    let out = codemode(&all, program, ws, env);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let receipt: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("no receipt: {stderr}"));
    (receipt, stderr)
}

/// A program calling `tool` with `args`, returning its content or
/// `[error kind, message]`.
fn call(tool: &str, args: Value) -> String {
    format!(
        "try {{ return (await tools.call({tool:?}, {args})).content; }} \
         catch (e) {{ return [e.kind, e.message]; }}"
    )
}

fn everything() -> String {
    node_server("server-everything")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn claude_desktop_config() {
    let ws = crate::common::workspace();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    let memory = dir.path().join("memory.jsonl");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "memory": {"command": "node", "args": [node_server("server-memory")],
                       "env": {"MEMORY_FILE_PATH": memory}}
        }, "globalShortcut": "Ctrl+Space"})
        .to_string(),
    )
    .unwrap();
    let (r, stderr) =
        run(&call("mcp__memory__read_graph", json!({})), &["--mcp-config", path(&file)], ws.path(), &[]);
    assert_eq!(r["status"], "completed", "{stderr}\n{r:#}");
    assert_eq!(r["value"]["entities"], json!([]), "{r:#}");
}

#[test]
fn cursor_file_is_found_in_the_workspace_and_announced() {
    let ws = crate::common::workspace();
    std::fs::create_dir(ws.path().join(".cursor")).unwrap();
    std::fs::write(
        ws.path().join(".cursor/mcp.json"),
        json!({"mcpServers": {"everything": {"command": "node", "args": [everything()]}}}).to_string(),
    )
    .unwrap();
    // Untrusted: the connection needs an approval (given here).
    let program = call("mcp__everything__echo", json!({"message": "from cursor"}));
    let (r, stderr) = run(&program, &["--approve", "allow"], ws.path(), &[]);
    assert_eq!(r["value"], "Echo: from cursor", "{stderr}\n{r:#}");
    assert!(stderr.contains(".cursor/mcp.json") && stderr.contains("not trusted"), "{stderr}");
    // Not approved, it does not start.
    let record = tempfile::tempdir().unwrap();
    let env = [("XDG_CONFIG_HOME", record.path())];
    let (r, _) = run(&program, &["--approve", "deny"], ws.path(), &env);
    assert_eq!(r["value"][0], "denied", "{r:#}");
    // `codemode trust` records the file itself; then it starts unasked.
    let out = codemode(&["trust", path(ws.path())], "", ws.path(), &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains(".cursor/mcp.json"), "{out:?}");
    let (r, stderr) = run(&program, &["--approve", "deny"], ws.path(), &env);
    assert_eq!(r["value"], "Echo: from cursor", "{stderr}\n{r:#}");
    assert!(stderr.contains(".cursor/mcp.json (trusted)"), "{stderr}");
}

/// A `.vscode/mcp.json` as VS Code writes it: comments, trailing commas,
/// `inputs`, `${workspaceFolder}`, `${input:ID}`, `envFile`.
fn vscode_file(ws: &Path) {
    std::fs::create_dir(ws.join(".vscode")).unwrap();
    std::fs::write(ws.join(".env"), "# dotenv\nFROM_ENV_FILE=envfile-value-123\n").unwrap();
    let text = format!(
        r#"{{
  // Inputs are prompted for by VS Code; codemode reads CODEMODE_INPUT_<ID>.
  "inputs": [
    {{"type": "promptString", "id": "api-token", "description": "Everything API token", "password": true}},
    {{"type": "promptString", "id": "greeting", "default": "hello",}},
  ],
  "servers": {{
    /* the reference server */
    "everything": {{
      "type": "stdio",
      "command": "node",
      "args": ["{server}"],
      "env": {{"API_TOKEN": "${{input:api-token}}", "GREETING": "${{input:greeting}}",
               "WS": "${{workspaceFolder}}"}},
      "envFile": "${{workspaceFolder}}/.env",
    }},
  }},
}}
"#,
        server = everything()
    );
    std::fs::write(ws.join(".vscode/mcp.json"), text).unwrap();
}

#[test]
fn vscode_file_with_comments_inputs_and_env_file() {
    let ws = crate::common::workspace();
    vscode_file(ws.path());
    let program = "const r = await tools.call('mcp__everything__get-env', {}); \
                   return typeof r.content === 'string' ? JSON.parse(r.content) : r.content;";
    let token = [("CODEMODE_INPUT_API_TOKEN", Path::new("token-from-input"))];
    let (r, stderr) = run(program, &["--approve", "allow"], ws.path(), &token);
    assert_eq!(r["status"], "completed", "{stderr}\n{r:#}");
    let env = &r["value"];
    assert_eq!(env["API_TOKEN"], "token-from-input", "{env:#}");
    assert_eq!(env["GREETING"], "hello");
    assert_eq!(env["FROM_ENV_FILE"], "envfile-value-123");
    let ws_real = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(env["WS"], path(&ws_real));
    assert!(stderr.contains(".vscode/mcp.json"), "{stderr}");

    // Without a value for the input: a clear error naming it, nothing run.
    let out = codemode(&["run", "-", "--approve", "allow"], program, ws.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("input `api-token` (Everything API token) has no value")
            && err.contains("CODEMODE_INPUT_API_TOKEN"),
        "{err}"
    );
}

#[test]
fn env_file_and_input_values_are_redacted_from_errors() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("secrets.env"), "API_TOKEN=envfile-secret-123\n").unwrap();
    let file = ws.path().join("servers.json");
    std::fs::write(
        &file,
        json!({"inputs": [{"type": "promptString", "id": "key", "password": true}],
               "servers": {"leaky": {"command": "sh",
                   "args": ["-c", "echo token=$API_TOKEN key=$KEY >&2; exit 3"],
                   "env": {"KEY": "${input:key}"}, "envFile": "secrets.env"}}})
        .to_string(),
    )
    .unwrap();
    let key = [("CODEMODE_INPUT_KEY", Path::new("input-secret-456"))];
    let (r, stderr) =
        run(&call("mcp__leaky__anything", json!({})), &["--mcp-config", path(&file)], ws.path(), &key);
    let text = r.to_string() + &stderr;
    assert!(
        r["value"][1].as_str().unwrap_or_default().contains("token=[redacted] key=${input:key}"),
        "{r:#}"
    );
    assert!(!text.contains("envfile-secret-123") && !text.contains("input-secret-456"), "{text}");
}

#[test]
fn windsurf_server_url() {
    let server = crate::mcp_servers::HttpServer::start();
    let ws = crate::common::workspace();
    let file = ws.path().join("mcp_config.json");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    std::fs::write(&file, json!({"mcpServers": {"remote": {"serverUrl": url}}}).to_string()).unwrap();
    let program = call("mcp__remote__echo", json!({"message": "over serverUrl"}));
    let (r, stderr) = run(&program, &["--mcp-config", path(&file), "--approve", "allow"], ws.path(), &[]);
    assert_eq!(r["value"], "Echo: over serverUrl", "{stderr}\n{r:#}");
}

#[test]
fn zed_settings_with_context_servers_in_both_shapes() {
    let ws = crate::common::workspace();
    let file = ws.path().join("settings.json");
    let text = format!(
        r#"// Zed settings
{{
  "theme": "One Dark",
  "buffer_font_size": 15,
  "context_servers": {{
    "time": {{"source": "custom", "command": "{time}", "args": ["--local-timezone", "UTC"], "env": {{}}}},
    "time-old": {{"command": {{"path": "{time}", "args": ["--local-timezone", "UTC"], "env": {{}}}},
                  "settings": {{}}}},
  }},
}}"#,
        time = time_server()
    );
    std::fs::write(&file, text).unwrap();
    let program = "const a = await tools.call('mcp__time__get_current_time', {timezone: 'UTC'}); \
                   const b = await tools.call('mcp__time-old__get_current_time', {timezone: 'UTC'}); \
                   return [a.content.timezone, b.content.timezone];";
    let (r, stderr) = run(program, &["--mcp-config", path(&file), "--approve", "allow"], ws.path(), &[]);
    assert_eq!(r["value"], json!(["UTC", "UTC"]), "{stderr}\n{r:#}");
    // Zed's `settings` (for extensions) has no effect here: one warning.
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("has no effect")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("`settings`") && lines[0].contains("time-old"), "{stderr}");
}

/// Cline's file: the trusted `autoApprove` tool runs without an approval,
/// the `disabledTools` one is hidden and refused saying so, any other
/// writer still asks (denied here); `timeout` and unknown keys.
#[test]
fn cline_settings_with_disabled_tools_auto_approve_and_timeout() {
    let ws = crate::common::workspace();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cline_mcp_settings.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "memory": {"command": "node", "args": [node_server("server-memory")],
                       "env": {"MEMORY_FILE_PATH": dir.path().join("m.jsonl")},
                       "transportType": "stdio", "timeout": 30, "disabled": false,
                       "autoApprove": ["create_entities"], "disabledTools": ["delete_entities"],
                       "description": "notes", "networkTimeout": 5},
            "off": {"command": "node", "args": ["nowhere.js"], "disabled": true, "description": "x"}
        }})
        .to_string(),
    )
    .unwrap();
    let program = r#"
        const out = {};
        for (const [tool, args] of [
            ["mcp__memory__create_entities", {entities: [{name: "a", entityType: "t", observations: []}]}],
            ["mcp__memory__delete_entities", {entityNames: ["a"]}],
            ["mcp__memory__add_observations", {observations: [{entityName: "a", contents: ["x"]}]}],
        ]) {
            try { await tools.call(tool, args); out[tool] = "ok"; }
            catch (e) { out[tool] = [e.kind, e.message]; }
        }
        return out;"#;
    let (r, stderr) = run(program, &["--mcp-config", path(&file), "--approve", "deny"], ws.path(), &[]);
    let v = &r["value"];
    assert_eq!(v["mcp__memory__create_entities"], "ok", "{stderr}\n{r:#}");
    assert_eq!(v["mcp__memory__delete_entities"][0], "refused", "{r:#}");
    let why = v["mcp__memory__delete_entities"][1].as_str().unwrap();
    assert!(why.contains("disabledTools") && why.contains("cline_mcp_settings.json"), "{why}");
    assert_eq!(v["mcp__memory__add_observations"][0], "denied", "{r:#}");
    // One warning per key, naming the file and the servers.
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("has no effect")).collect();
    assert_eq!(warned.len(), 2, "{stderr}");
    assert!(warned.iter().any(|l| l.contains("`description` (servers memory, off)")), "{stderr}");
    assert!(warned.iter().all(|l| l.contains("cline_mcp_settings.json")), "{stderr}");
    // The hidden tool is not listed.
    let out =
        codemode(&["mcp", "tools", "memory", "--json", "--mcp-config", path(&file)], "", ws.path(), &[]);
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> =
        listing["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"mcp__memory__create_entities") && !names.contains(&"mcp__memory__delete_entities")
    );
    assert_eq!(listing["hidden"][0]["name"], "mcp__memory__delete_entities", "{listing:#}");
}

/// The attack: a workspace's own `.mcp.json` that auto-approves a writer
/// tool of its server. Untrusted, that list is ignored (with a warning)
/// and the call still asks; once `codemode trust`ed, it applies.
#[test]
fn an_untrusted_workspace_file_cannot_auto_approve_its_tools() {
    let ws = crate::common::workspace();
    let record = tempfile::tempdir().unwrap();
    let memory = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join(".mcp.json"),
        json!({"mcpServers": {"memory": {"command": "node", "args": [node_server("server-memory")],
                                         "env": {"MEMORY_FILE_PATH": memory.path().join("m.jsonl")},
                                         "autoApprove": ["create_entities"]}}})
        .to_string(),
    )
    .unwrap();
    // The user's own policy lets the server start; the tool call is left
    // to the file's autoApprove.
    let policy = memory.path().join("policy.toml");
    std::fs::write(&policy, "[rules]\nallow = [\"mcp_connect__memory\"]\n").unwrap();
    let program = call(
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "a", "entityType": "t", "observations": []}]}),
    );
    let args = ["--config", path(&policy), "--approve", "deny"];
    let env = [("XDG_CONFIG_HOME", record.path())];
    let (r, stderr) = run(&program, &args, ws.path(), &env);
    assert_eq!(r["value"][0], "denied", "an untrusted file approved its own tool: {stderr}\n{r:#}");
    assert!(
        stderr.lines().any(|l| l.contains("`autoApprove`/`alwaysAllow`") && l.contains("not trusted")),
        "{stderr}"
    );
    let out = codemode(&["trust", path(ws.path())], "", ws.path(), &env);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("allow mcp__memory__create_entities"), "{out:?}");
    let (r, stderr) = run(&program, &args, ws.path(), &env);
    assert_eq!(r["status"], "completed", "{stderr}\n{r:#}");
    assert!(r["value"][0] != "denied" && r["calls"][0]["status"] == "ok", "{stderr}\n{r:#}");
}

/// server-everything's `simulate-research-query` declares
/// `execution.taskSupport: "required"`: hidden, with why, in `mcp tools`
/// and `mcp list`, and a call says why.
#[test]
fn tools_that_run_only_as_tasks_are_hidden_with_a_note() {
    let ws = crate::common::workspace();
    let file = ws.path().join("servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"everything": {"command": "node", "args": [everything()]}}}).to_string(),
    )
    .unwrap();
    let hidden = task_tool_hidden(&file, ws.path());
    let task = hidden.iter().find(|h| h["name"] == "mcp__everything__simulate-research-query").unwrap();
    assert!(task["why"].as_str().unwrap().contains("taskSupport"), "{task}");
    let out = codemode(&["mcp", "tools", "everything", "--mcp-config", path(&file)], "", ws.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("hidden: mcp__everything__simulate-research-query"), "{stderr}");

    // `mcp list` counts it as hidden (from the schema cache).
    let out = codemode(&["mcp", "list", "--json", "--mcp-config", path(&file)], "", ws.path(), &[]);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    assert!(rows[0]["hidden"].as_u64().unwrap() >= 1, "{rows:#}");

    let program = call("mcp__everything__simulate-research-query", json!({"topic": "x"}));
    let (r, stderr) = run(&program, &["--mcp-config", path(&file), "--approve", "allow"], ws.path(), &[]);
    assert_eq!(r["value"][0], "refused", "{stderr}\n{r:#}");
    assert!(r["value"][1].as_str().unwrap().contains("MCP task"), "{r:#}");
}

/// `codemode mcp tools everything --json` with `file`: asserts
/// server-everything's task-only tool is not listed (and `echo` is), and
/// returns the `hidden` entries.
fn task_tool_hidden(file: &std::path::Path, ws: &std::path::Path) -> Vec<Value> {
    let out = codemode(&["mcp", "tools", "everything", "--json", "--mcp-config", path(file)], "", ws, &[]);
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    let names: Vec<&str> =
        listing["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    assert!(!names.contains(&"mcp__everything__simulate-research-query"), "{names:?}");
    listing["hidden"].as_array().unwrap().clone()
}

/// Over streamable HTTP too: the task-only tool is seen in the server's
/// streamed `tools/list` answer and hidden.
#[test]
fn task_only_tools_of_an_http_server_are_hidden_too() {
    let server = crate::mcp_servers::HttpServer::start();
    let ws = crate::common::workspace();
    let file = ws.path().join("servers.json");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    std::fs::write(&file, json!({"mcpServers": {"everything": {"url": url}}}).to_string()).unwrap();
    let hidden = task_tool_hidden(&file, ws.path());
    assert!(hidden.iter().any(|h| h["name"] == "mcp__everything__simulate-research-query"), "{hidden:?}");
}

/// Issue 35, item 5: a `.mcp.json` entry with `url` and `headers` nested
/// under `transport` (a shape codemode does not read) is skipped with a
/// warning naming the key and the server; a program calling no MCP tool
/// runs, and the other servers work.
#[test]
fn an_entry_with_its_transport_nested_is_skipped_with_a_warning() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join(".mcp.json"),
        json!({"mcpServers": {
            "remote": {"transport": {"type": "http", "url": "https://example.invalid/mcp",
                                     "headers": {"Authorization": "Bearer x"}}},
            "everything": {"command": "node", "args": [everything()]}
        }})
        .to_string(),
    )
    .unwrap();
    let (r, stderr) = run("return 1 + 1;", &[], ws.path(), &[]);
    assert_eq!(r["status"], "completed", "{stderr}\n{r:#}");
    assert!(
        stderr.contains("server `remote` is skipped") && stderr.contains("its `transport` is a shape"),
        "{stderr}"
    );
    assert!(!stderr.contains("needs a `command`"), "{stderr}");
    let program = call("mcp__everything__echo", json!({"message": "still here"}));
    let (r, stderr) = run(&program, &["--approve", "allow"], ws.path(), &[]);
    assert_eq!(r["value"], "Echo: still here", "{stderr}\n{r:#}");
    // `codemode mcp list` says it too, and lists the others.
    let out = codemode(&["mcp", "list"], "", ws.path(), &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("server `remote` is skipped"), "{stderr}");
    assert!(stdout.contains("everything") && !stdout.contains("remote"), "{stdout}");
}

/// Issue 35, item 5: VS Code's `"type": "sse"` (the legacy HTTP+SSE
/// transport) is named as unsupported in a warning, and the run goes on.
#[test]
fn a_vscode_sse_server_is_named_unsupported_and_skipped() {
    let ws = crate::common::workspace();
    std::fs::create_dir(ws.path().join(".vscode")).unwrap();
    let text = r#"{
  // as VS Code writes it
  "servers": {
    "old": {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"X-Key": "k"}},
  },
}"#;
    std::fs::write(ws.path().join(".vscode/mcp.json"), text).unwrap();
    let out = codemode(&["run", "-", "--json"], "return 'ran';", ws.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["value"], "ran");
    assert!(
        stderr.contains("server `old` is skipped: `type` is \"sse\"")
            && stderr.contains("legacy HTTP+SSE transport")
            && stderr.contains("does not support"),
        "{stderr}"
    );
}
