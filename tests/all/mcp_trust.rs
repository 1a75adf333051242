//! Trust and secrets of MCP configurations (issue 11 items 1, 5, 7, 8, 9),
//! through the real engine and real server processes: a trusted file's
//! servers start without an approval (deny rules and hooks still apply),
//! an untrusted one's need it; two tools whose names sanitise alike both
//! get the hash suffix; `${VAR}` values never reach a message, a receipt or
//! an approval request; the connection's approval shows what runs.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codemode::mcp::McpConfig;
use codemode::{Engine, Policy, Program, policy::HookSpec, policy::Rule, receipt::RunStatus};
use serde_json::{Value, json};

use crate::mcp_support::*;

/// The fixture server named `fixture` writing its pids to `pids`.
pub(crate) fn fixture_server(pids: &Path) -> Value {
    json!({"fixture": {"command": "python3", "args": [fixture(), "normal"],
                       "env": {"MCP_FIXTURE_PIDS": pids.to_string_lossy()}}})
}

/// An engine with the default policy (posture ask) and the default (deny)
/// approver unless `policy` and `approver` say otherwise.
pub(crate) fn engine(config: McpConfig, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    crate::common::engine_builder().workspace(ws).policy(policy).mcp(config, options(cache)).build().unwrap()
}

pub(crate) const ECHO: &str = r#"try { return (await tools.mcp__fixture__echo({text: "hi"})).content; }
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

pub(crate) const SECRET: &str = "hunter2-Sekr1t-value";

/// A config whose launches hold `${SECRET}`, expanded to [`SECRET`].
pub(crate) fn secret_config(text: &Value, trusted: bool) -> McpConfig {
    let text = json!({"mcpServers": text}).to_string();
    let env = |name: &str| (name == "SECRET").then(|| SECRET.to_owned());
    McpConfig { trusted, ..McpConfig::parse(&text, Path::new("/"), &env).unwrap() }
}

/// Servers that fail to start, each quoting `${SECRET}` its own way: a
/// command that does not exist, a program that prints its arguments on
/// stderr and exits, one that never answers initialize, and a URL where
/// nothing listens (port 1).
pub(crate) fn failing_servers() -> Value {
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

/// A workspace with an (untrusted) `.mcp.json` whose fixture server's
/// arguments hold `${SECRET}`, and a program calling it.
fn secret_workspace() -> (tempfile::TempDir, PathBuf) {
    let ws = crate::common::workspace();
    let config = json!({"mcpServers": {
        "fixture": {"command": "python3", "args": [fixture(), "normal", "--token=${SECRET}"]},
        // A script, not inline code: an untrusted file's server whose
        // files cannot be known is not started at all.
        "broken": {"command": "python3", "args": ["broken.py", "${SECRET}"]},
        // Nothing listens there: rmcp logs the failed request's URL.
        "refused": {"url": "http://127.0.0.1:1/mcp?key=${SECRET}"},
    }});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    std::fs::write(
        ws.path().join("broken.py"),
        "import sys; sys.stderr.write(' '.join(sys.argv)); sys.exit(3)\n",
    )
    .unwrap();
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
    assert!(runs.contains("python3 broken.py") && runs.contains("${SECRET}"), "{runs}");
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
