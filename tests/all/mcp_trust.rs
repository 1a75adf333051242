//! Trust and secrets of MCP configurations (issue 11 items 1, 5, 7, 8, 9),
//! through the real engine and real server processes: a trusted file's
//! servers start without an approval (deny rules and hooks still apply),
//! an untrusted one's need it; two tools whose names sanitise alike both
//! get the hash suffix; `${VAR}` values never reach a message, a receipt or
//! an approval request; the connection's approval shows what runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codemode::mcp::McpConfig;
use codemode::{
    Engine, Policy, Program, approval::CommandApprover, policy::HookSpec, policy::Rule, receipt::RunStatus,
};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// The fixture server named `fixture` writing its pids to `pids`.
fn fixture_server(pids: &Path) -> Value {
    json!({"fixture": {"command": "python3", "args": [fixture(), "normal"],
                       "env": {"MCP_FIXTURE_PIDS": pids.to_string_lossy()}}})
}

/// An engine with the default policy (posture ask) and the default (deny)
/// approver unless `policy` and `approver` say otherwise.
fn engine(config: McpConfig, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    crate::common::engine_builder().workspace(ws).policy(policy).mcp(config, options(cache)).build().unwrap()
}

const ECHO: &str = r#"try { return (await tools.mcp__fixture__echo({text: "hi"})).content; }
                      catch (e) { return [e.kind, e.message]; }"#;

#[test]
fn a_trusted_file_starts_its_server_without_an_approval_under_ask() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pids_file = cache.path().join("pids");
    // Loaded from a file, as `--mcp-config` does: trusted, with its path.
    let file = ws.path().join("servers.json");
    std::fs::write(&file, json!({"mcpServers": fixture_server(&pids_file)}).to_string()).unwrap();
    let config = McpConfig::load(&file).unwrap();
    assert!(config.trusted);
    let source = config.source.clone().unwrap();
    assert_eq!(source, std::fs::canonicalize(&file).unwrap());
    let engine = engine(config, cache.path(), ws.path(), Policy::default());
    let r = engine.execute_blocking(Program::new(ECHO));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.value, json!({"text": "hi"}), "{}", r.to_json_pretty());
    assert_eq!(r.calls[0].decision, codemode::receipt::Decision::Auto);
    let note = r.calls[0].note.as_deref().unwrap_or_default();
    assert!(note.contains(&format!("trusted MCP configuration {}", source.display())), "{note}");
    let started = pids(&pids_file);
    drop(engine);
    assert_gone(&started);
}

#[test]
fn an_untrusted_file_needs_an_approval_to_start_a_server() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pids_file = cache.path().join("pids");
    let engine = engine(untrusted(fixture_server(&pids_file)), cache.path(), ws.path(), Policy::default());
    let r = engine.execute_blocking(Program::new(ECHO));
    assert_eq!(r.value[0], "denied", "{}", r.to_json_pretty());
    assert!(r.value[1].as_str().unwrap().contains("mcp_connect__fixture"), "{}", r.value);
    assert!(!pids_file.exists(), "an untrusted server started without approval");
}

#[test]
fn deny_rules_ask_rules_and_hooks_still_apply_to_a_trusted_file() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pids_file = cache.path().join("pids");
    let servers = fixture_server(&pids_file);
    // A deny rule refuses.
    let mut deny = Policy::default();
    deny.rules.deny.push(Rule::parse("mcp_connect__fixture").unwrap());
    let r =
        engine(config(servers.clone()), cache.path(), ws.path(), deny).execute_blocking(Program::new(ECHO));
    assert_eq!(r.value[0], "refused", "{}", r.to_json_pretty());
    assert!(r.value[1].as_str().unwrap().contains("deny rule `mcp_connect__fixture`"), "{}", r.value);
    // An ask rule asks (and the deny approver denies).
    let mut ask = Policy::default();
    ask.rules.ask.push(Rule::parse("mcp_connect__fixture").unwrap());
    let r =
        engine(config(servers.clone()), cache.path(), ws.path(), ask).execute_blocking(Program::new(ECHO));
    assert_eq!(r.value[0], "denied", "{}", r.to_json_pretty());
    // A hook matching the connection runs and blocks it.
    let hook = HookSpec {
        matcher: regex::Regex::new("^mcp_connect__fixture$").unwrap(),
        command: vec![root().join("tests/fixtures/hooks/block.sh").to_string_lossy().into_owned()],
        timeout: Duration::from_secs(10),
    };
    let hooked = Policy { hooks: vec![hook], ..Policy::default() };
    let r = engine(config(servers), cache.path(), ws.path(), hooked).execute_blocking(Program::new(ECHO));
    assert_eq!(r.value[0], "refused", "{}", r.to_json_pretty());
    assert!(r.value[1].as_str().unwrap().contains("no writes under secrets/"), "{}", r.value);
    assert!(!pids_file.exists(), "a refused server started");
}

#[test]
fn tools_whose_names_sanitise_alike_both_get_the_hash_and_keep_their_names() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let server = |name: &str, tool: &str| {
        json!({"command": "python3", "args": [fixture(), "normal"],
               "env": {"MCP_FIXTURE_TOOLS": tool, "MCP_FIXTURE_NAME": name}})
    };
    let servers = json!({"files_": server("files_", "read"), "files": server("files", "_read")});
    let listed = |engine: &Engine| -> Vec<String> {
        let mut names: Vec<String> = engine
            .tool_specs()
            .into_iter()
            .map(|s| s.name)
            .filter(|n| n.starts_with("mcp__files___read"))
            .collect();
        names.sort();
        names
    };
    let first = engine(config(servers.clone()), cache.path(), ws.path(), Policy::full_access());
    for server in ["files_", "files"] {
        let r = first.call_blocking(&format!("mcp_connect__{server}"), &json!({}));
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    let names = listed(&first);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&"mcp__files___read".to_owned()), "a plain name won: {names:?}");
    // Each name reaches its own server's tool.
    let mut answered = Vec::new();
    for name in &names {
        let r = first.execute_blocking(Program::new(format!("return (await tools['{name}']({{}})).content")));
        assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
        answered.push(r.value.as_str().unwrap().to_owned());
    }
    answered.sort();
    assert_eq!(answered, ["files/_read", "files_/read"]);
    drop(first);
    // Listing again (another engine, the servers started the other way
    // round) gives the same names.
    let second = engine(config(servers.clone()), cache.path(), ws.path(), Policy::full_access());
    for server in ["files", "files_"] {
        assert!(second.call_blocking(&format!("mcp_connect__{server}"), &json!({})).error.is_none());
    }
    assert_eq!(listed(&second), names);
    drop(second);
    // So does the schema cache, in an engine that starts nothing.
    let cached = engine(untrusted(servers), cache.path(), ws.path(), Policy::default());
    assert_eq!(listed(&cached), names);
    assert!(cached.mcp_servers().iter().all(|s| s.state == codemode::mcp::ServerState::NotStarted));
}

const SECRET: &str = "hunter2-Sekr1t-value";

/// A config whose launches hold `${SECRET}`, expanded to [`SECRET`].
fn secret_config(text: &Value, trusted: bool) -> McpConfig {
    let text = json!({"mcpServers": text}).to_string();
    let env = |name: &str| (name == "SECRET").then(|| SECRET.to_owned());
    McpConfig { trusted, ..McpConfig::parse(&text, Path::new("/"), &env).unwrap() }
}

/// Servers that fail to start, each quoting `${SECRET}` its own way: a
/// command that does not exist, a program that prints its arguments on
/// stderr and exits, one that never answers initialize, and a URL where
/// nothing listens (port 1).
fn failing_servers() -> Value {
    json!({
        "missing": {"command": "/no/such/${SECRET}/server", "args": ["--key=${SECRET}"]},
        "printer": {"command": "python3",
                    "args": ["-c", "import sys; sys.stderr.write('argv: ' + ' '.join(sys.argv)); sys.exit(3)",
                             "--key=${SECRET}"]},
        "silent": {"command": "python3", "args": [fixture(), "no-init", "${SECRET}"],
                   "startup_timeout_ms": 500},
        "web": {"url": "http://127.0.0.1:1/mcp?key=${SECRET}",
                "headers": {"Authorization": "Bearer ${SECRET}", "X-Api-Key": "literal-api-key-9f8e"}},
    })
}

#[test]
fn secrets_from_the_environment_stay_out_of_errors_and_receipts() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let engine =
        engine(secret_config(&failing_servers(), true), cache.path(), ws.path(), Policy::full_access());
    let r = engine.execute_blocking(Program::new(
        r#"const out = {};
           for (const s of ["missing", "printer", "silent", "web"]) {
             try { await tools[`mcp_connect__${s}`]({}); out[s] = "started"; }
             catch (e) { out[s] = e.message; }
           }
           return out;"#,
    ));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    // Each start failed, and says why with the launch as written.
    let message = |s: &str| r.value[s].as_str().unwrap().to_owned();
    assert!(message("missing").contains("/no/such/${SECRET}/server"), "{}", message("missing"));
    assert!(message("printer").contains("--key=${SECRET}"), "{}", message("printer"));
    assert!(message("silent").contains("did not complete the handshake"), "{}", message("silent"));
    assert!(message("web").contains("web"), "{}", message("web"));
    let receipt = r.to_json_pretty();
    let saved = std::fs::read_to_string(engine.save_receipt(&r).unwrap()).unwrap();
    let status: Vec<String> = engine.mcp_servers().iter().map(|s| format!("{:?}", s.state)).collect();
    for text in
        [&receipt, &saved, &status.join("\n"), &format!("{:?}", secret_config(&failing_servers(), true))]
    {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
        assert!(!text.contains("literal-api-key-9f8e"), "a header value leaked: {text}");
    }
    assert!(status.iter().all(|s| s.contains("Failed")), "{status:?}");
}

#[test]
fn a_cmd_approver_is_shown_the_command_line_with_secrets_as_written() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pids_file = cache.path().join("pids");
    let recorded = cache.path().join("request.json");
    let servers = json!({
        "fixture": {"command": "python3", "args": [fixture(), "normal", "--token=${SECRET}"],
                    "env": {"MCP_FIXTURE_PIDS": pids_file.to_string_lossy(), "TOKEN": "${SECRET}"},
                    "cwd": cache.path().to_string_lossy()},
        "web": {"url": "http://127.0.0.1:1/mcp?key=${SECRET}"},
    });
    let approver = CommandApprover::new(
        root().join("tests/fixtures/approvers/record.sh").to_string_lossy(),
        [recorded.to_string_lossy().into_owned()],
    );
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .approver(approver)
        .mcp(secret_config(&servers, false), options(cache.path()))
        .build()
        .unwrap();
    let r = engine.execute_blocking(Program::new(ECHO));
    assert_eq!(r.value, json!({"text": "hi"}), "{}", r.to_json_pretty());
    assert_eq!(r.calls[0].decision, codemode::receipt::Decision::Approved);
    let request: Value = serde_json::from_str(&std::fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(request["tool"], "mcp_connect__fixture");
    let cwd = std::fs::canonicalize(cache.path()).unwrap();
    assert_eq!(
        request["subject"],
        format!(
            "MCP_FIXTURE_PIDS={} TOKEN=${{SECRET}} python3 {} normal --token=${{SECRET}} (in {})",
            pids_file.display(),
            fixture(),
            cwd.display()
        )
    );
    // An HTTP server's approval shows its URL.
    let _ = engine.call_blocking("mcp_connect__web", &json!({}));
    let request: Value = serde_json::from_str(&std::fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(request["subject"], "http://127.0.0.1:1/mcp?key=${SECRET}");
    assert!(!request.to_string().contains(SECRET));
    let started = pids(&pids_file);
    drop(engine);
    assert_gone(&started);
}

/// A workspace with an (untrusted) `.mcp.json` whose fixture server's
/// arguments hold `${SECRET}`, and a program calling it.
fn secret_workspace() -> (tempfile::TempDir, PathBuf) {
    let ws = crate::common::workspace();
    let config = json!({"mcpServers": {
        "fixture": {"command": "python3", "args": [fixture(), "normal", "--token=${SECRET}"]},
        "broken": {"command": "python3",
                   "args": ["-c", "import sys; sys.stderr.write(' '.join(sys.argv)); sys.exit(3)", "${SECRET}"]},
        // Nothing listens there: rmcp logs the failed request's URL.
        "refused": {"url": "http://127.0.0.1:1/mcp?key=${SECRET}"},
    }});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    std::fs::write(
        ws.path().join("prog.js"),
        r#"try { await tools.mcp__refused__x({}); } catch (e) {}
           let broken; try { await tools.mcp_connect__broken({}); } catch (e) { broken = e.message; }
           try { return [(await tools.mcp__fixture__echo({text: "x"})).content, broken]; }
           catch (e) { return [e.kind, broken]; }"#,
    )
    .unwrap();
    let cache = ws.path().join("cache");
    (ws, cache)
}

#[test]
fn the_cli_keeps_secrets_out_of_its_output_and_the_saved_receipt() {
    let (ws, cache) = secret_workspace();
    let approver = format!("cmd:{}", root().join("tests/fixtures/approvers/allow.sh").display());
    let mut child = crate::cli::spawn(
        &["run", "prog.js", "--approve", &approver],
        ws.path(),
        &[("SECRET", Path::new(SECRET)), ("XDG_CACHE_HOME", &cache)],
    );
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let path = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("full receipt: "))
        .unwrap_or_else(|| panic!("no saved receipt: {stderr}"));
    let saved = std::fs::read_to_string(ws.path().join(path)).unwrap();
    let receipt: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(receipt["value"][0], json!({"text": "x"}), "{saved}");
    assert!(receipt["value"][1].as_str().unwrap().contains("${SECRET}"), "{saved}");
    for text in [&*stdout, &*stderr, &saved] {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
    }
}

#[cfg(unix)]
#[test]
fn the_terminal_prompt_shows_the_command_a_connection_runs() {
    let (ws, cache) = secret_workspace();
    let driver = root().join("tests/fixtures/approvers/drive_prompt.py");
    std::fs::write(
        ws.path().join("connect.js"),
        "try { await tools.mcp_connect__broken({}); } catch (e) { return e.message; }",
    )
    .unwrap();
    let out = std::process::Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(&driver)
        .args(["y", env!("CARGO_BIN_EXE_codemode"), "run", "connect.js"])
        .env("SECRET", SECRET)
        .env("XDG_CACHE_HOME", &cache)
        .current_dir(ws.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("approval needed for `mcp_connect__broken`"), "{shown}");
    let runs =
        shown.lines().find(|l| l.trim_start().starts_with("runs: ")).unwrap_or_else(|| panic!("{shown}"));
    assert!(runs.contains("python3 -c") && runs.contains("${SECRET}"), "{runs}");
    // The start was allowed, failed, and its error quotes `${SECRET}`.
    assert!(shown.contains("exited with status 3"), "{shown}");
    assert!(!shown.contains(SECRET), "the secret leaked: {shown}");
}

#[test]
fn the_cli_trusts_a_file_named_with_mcp_config_and_not_the_workspace_one() {
    let ws = crate::common::workspace();
    let cache = ws.path().join("cache");
    let pids_file = ws.path().join("pids");
    let text = json!({"mcpServers": fixture_server(&pids_file)}).to_string();
    std::fs::write(ws.path().join("servers.json"), &text).unwrap();
    std::fs::write(ws.path().join(".mcp.json"), &text).unwrap();
    let config = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let env = [("XDG_CACHE_HOME", cache.as_path()), ("XDG_CONFIG_HOME", config.path())];
        let mut child = crate::cli::spawn(args, ws.path(), &env);
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    };
    // The workspace's own file: starting the server needs an approval,
    // and without a terminal there is none.
    let out = run(&["mcp", "tools", "fixture"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!pids_file.exists(), "an untrusted workspace file started its server");
    // The same file named on the command line is the user's own.
    let out = run(&["mcp", "tools", "fixture", "--mcp-config", "servers.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("mcp__fixture__echo"));
    assert_gone(&pids(&pids_file));
    // Trusted with `codemode trust`, the workspace file starts its server;
    // any change revokes that.
    let out = run(&["trust"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&pids_file).unwrap();
    let out = run(&["mcp", "tools", "fixture"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(trusted)"));
    assert_gone(&pids(&pids_file));
    std::fs::remove_file(&pids_file).unwrap();
    std::fs::write(ws.path().join(".mcp.json"), format!("{text}\n")).unwrap();
    let out = run(&["mcp", "tools", "fixture"]);
    assert_eq!(out.status.code(), Some(1), "a changed file is untrusted again");
    assert!(String::from_utf8_lossy(&out.stderr).contains("codemode trust"));
    assert!(!pids_file.exists());
}

#[test]
fn a_program_cannot_rewrite_the_loaded_mcp_configuration() {
    let ws = crate::common::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let pids_file = root.join("pids");
    let text = json!({"mcpServers": fixture_server(&pids_file)}).to_string();
    let path = root.join(".mcp.json");
    std::fs::write(&path, &text).unwrap();
    let config = codemode::mcp::McpConfig::load(&path).unwrap();
    let e = crate::common::engine_builder()
        .workspace(&root)
        .policy(codemode::Policy::full_access())
        .mcp(config, codemode::mcp::PoolOptions::default())
        .build()
        .unwrap();
    let evil =
        json!({"mcpServers": {"fixture": {"command": "sh", "args": ["-c", "touch pwned"]}}}).to_string();
    let r = e.call_blocking("write", &json!({"path": ".mcp.json", "content": evil}));
    assert_eq!(r.call.status, codemode::receipt::CallStatus::Refused);
    assert!(r.call.error.unwrap().contains("the MCP configuration"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn files_an_mcp_server_runs_are_protected() {
    let ws = crate::common::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("srv")).unwrap();
    std::fs::write(root.join("srv/server.py"), "print('hi')\n").unwrap();
    let text = json!({"mcpServers": {"t": {"command": "python3", "args": ["srv/server.py"], "cwd": root}}});
    std::fs::write(root.join(".mcp.json"), text.to_string()).unwrap();
    let config = codemode::mcp::McpConfig::load(&root.join(".mcp.json")).unwrap();
    let e = crate::common::engine_builder()
        .workspace(&root)
        .policy(codemode::Policy::full_access())
        .mcp(config, codemode::mcp::PoolOptions::default())
        .build()
        .unwrap();
    for path in ["srv/server.py", "srv/helper.py"] {
        let r = e
            .call_blocking("write", &json!({"path": path, "content": "import os; os.system('touch pwned')"}));
        assert_eq!(r.call.status, codemode::receipt::CallStatus::Refused, "{path}");
        assert!(r.call.error.unwrap().contains("MCP server command"), "{path}");
    }
    assert_eq!(std::fs::read_to_string(root.join("srv/server.py")).unwrap(), "print('hi')\n");
}

/// A trusted server's `envFile` decides what it runs (`NODE_OPTIONS=--require
/// evil.js`): a program must not be able to rewrite it for a later run.
#[test]
fn the_env_file_of_a_server_is_protected() {
    let ws = crate::common::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::write(root.join(".env.mcp"), "GREETING=hello\n").unwrap();
    let text = json!({"mcpServers": {"t": {"command": "node", "args": ["server.js"],
                                            "envFile": "${workspaceFolder}/.env.mcp"}}});
    std::fs::write(root.join(".mcp.json"), text.to_string()).unwrap();
    let config = codemode::mcp::McpConfig::load_in(&root.join(".mcp.json"), Some(&root)).unwrap();
    let e = crate::common::engine_builder()
        .workspace(&root)
        .policy(codemode::Policy::full_access())
        .mcp(config, codemode::mcp::PoolOptions::default())
        .build()
        .unwrap();
    let evil = "NODE_OPTIONS=\"--require ./evil.js\"\n";
    let r = e.call_blocking("write", &json!({"path": ".env.mcp", "content": evil}));
    assert_eq!(r.call.status, codemode::receipt::CallStatus::Refused);
    let r = e.call_blocking("bash", &json!({"command": "echo 'NODE_OPTIONS=x' >> .env.mcp; cat .env.mcp"}));
    assert_eq!(r.envelope.unwrap()["content"]["stdout"], "GREETING=hello\n");
    assert_eq!(std::fs::read_to_string(root.join(".env.mcp")).unwrap(), "GREETING=hello\n");
}
