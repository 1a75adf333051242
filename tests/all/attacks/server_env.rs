//! Break 4 of the adversarial review of issue 30: a trusted MCP stdio
//! server's `env` names workspace folders (`PYTHONPATH=lib`) whose code it
//! loads outside the sandbox. Each workspace path a path-like variable
//! names is pinned (a file) or protected for the whole run (a folder),
//! and `codemode trust` notes the folders (docs/SECURITY.md, "Protected
//! paths").

use std::path::Path;

use super::run;

/// A stdio MCP server with one tool, `echo`; it imports `json`, which
/// `PYTHONPATH=lib` would let `lib/json.py` shadow.
const SERVER: &str = r#"import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m.get("method") == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
    elif m.get("method") == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        r = {"content": [{"type": "text", "text": "hi"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

/// A workspace whose `.mcp.json` runs `srv/server.py` with
/// `PYTHONPATH=lib`, trusted in `config`; what `codemode trust` printed.
fn trusted_server(ws: &Path, config: &Path) -> String {
    std::fs::create_dir(ws.join("srv")).unwrap();
    std::fs::write(ws.join("srv/server.py"), SERVER).unwrap();
    let mcp = serde_json::json!({"mcpServers": {"srv": {
        "command": "python3", "args": ["srv/server.py"], "env": {"PYTHONPATH": "lib"}
    }}});
    std::fs::write(ws.join(".mcp.json"), mcp.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_codemode"))
        .args(["trust"])
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .env("XDG_CONFIG_HOME", config)
        .current_dir(ws)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A module that leaves `mark` when imported.
fn planted(mark: &Path) -> String {
    format!("open({:?}, 'w').write('ran')\n", mark.display().to_string())
}

/// A program that writes `lib/json.py` with the write tool, then with bash
/// (copying `evil`); what each did.
fn plant(evil: &Path) -> String {
    let copy = format!("mkdir -p lib && cp {} lib/json.py", evil.display());
    format!(
        "const out = [];
         try {{ await tools.write({{path: 'lib/json.py', content: 'x = 1\\n'}}); out.push('wrote'); }}
         catch (e) {{ out.push(e.kind + ': ' + e.message); }}
         try {{ const r = await tools.bash({{command: {copy:?}}}); out.push('bash ' + r.content.exit_code); }}
         catch (e) {{ out.push(e.kind + ': ' + e.message); }}
         return out;"
    )
}

const CALL: &str =
    "try { await tools.call('mcp__srv__echo', {}); return 'called'; } catch (e) { return e.message; }";

#[test]
fn a_folder_a_trusted_servers_pythonpath_names_is_protected_and_noted() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mark = outside.path().join("mark");
    let evil = outside.path().join("json.py");
    std::fs::write(&evil, planted(&mark)).unwrap();
    std::fs::create_dir(ws.path().join("lib")).unwrap();
    let said = trusted_server(ws.path(), config.path());
    let note = said.lines().find(|l| l.contains("note:")).unwrap_or_else(|| panic!("{said}"));
    assert!(note.contains("PYTHONPATH") && note.contains("folder lib"), "{note}");

    // Writes allowed unasked, bash allowed: neither reaches `lib/`.
    let policy = outside.path().join("policy.toml");
    std::fs::write(&policy, "[rules]\nallow = [\"bash\"]\n").unwrap();
    let args = ["run", "-", "--json", "--posture", "auto-review", "--approve", "deny", "--config"];
    let args: Vec<&str> = args.into_iter().chain([policy.to_str().unwrap()]).collect();
    let (value, stderr) = run(&args, &plant(&evil), ws.path(), config.path());
    assert!(value[0].as_str().is_some_and(|s| s.contains("is protected")), "{value} {stderr}");
    assert_ne!(value[1], "bash 0", "{value} {stderr}");
    assert!(!ws.path().join("lib/json.py").exists(), "{value}");

    // The trusted server starts and runs none of it.
    let (value, stderr) = run(&["run", "-", "--json", "--approve", "allow"], CALL, ws.path(), config.path());
    assert_eq!(value, "called", "{stderr}");
    assert!(!mark.exists(), "a module a program planted ran in the trusted server");
}

#[test]
fn the_workspace_servers_env_folders_stay_protected_when_another_mcp_config_is_loaded() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("lib")).unwrap();
    trusted_server(ws.path(), config.path());
    let other = outside.path().join("mcp.json");
    std::fs::write(&other, r#"{"mcpServers": {}}"#).unwrap();
    let args = ["run", "-", "--json", "--posture", "auto-review", "--mcp-config", other.to_str().unwrap()];
    let (value, stderr) = run(&args, &plant(&outside.path().join("none")), ws.path(), config.path());
    assert!(value[0].as_str().is_some_and(|s| s.contains("is protected")), "{value} {stderr}");
}

#[test]
fn a_missing_folder_a_servers_pythonpath_names_cannot_be_made_to_run() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mark = outside.path().join("mark");
    let evil = outside.path().join("json.py");
    std::fs::write(&evil, planted(&mark)).unwrap();
    let said = trusted_server(ws.path(), config.path());
    assert!(said.contains("pins lib (missing)"), "{said}");

    // `lib/` does not exist, so the sandbox cannot mount it read-only:
    // bash may make it, but the server does not start in this run, nor
    // in the next (the pin changed).
    let policy = outside.path().join("policy.toml");
    std::fs::write(&policy, "[rules]\nallow = [\"bash\"]\n").unwrap();
    let program = format!(
        "const a = await (async () => {{ {} }})(); return [a, await (async () => {{ {CALL} }})()];",
        plant(&evil)
    );
    let args = ["run", "-", "--json", "--approve", "allow", "--config", policy.to_str().unwrap()];
    let (value, stderr) = run(&args, &program, ws.path(), config.path());
    assert!(!mark.exists(), "a module a program planted ran in the trusted server: {value} {stderr}");
    assert!(
        value[1].as_str().is_some_and(|s| s.contains("did not exist when the engine was built")),
        "{value}"
    );
    // The next run (no approval for an untrusted server's start) neither.
    let (value, stderr) = run(&["run", "-", "--json", "--approve", "deny"], CALL, ws.path(), config.path());
    assert_ne!(value, "called", "{stderr}");
    assert!(!mark.exists(), "a module a program planted ran in the next run");
}
