//! A retry policy makes a tool be called more than once for one call of a
//! program. A workspace's own `codemode.toml` (a cloned repository's, or
//! one a program wrote) is not the person's: an untrusted one loses its
//! `[tools.NAME] retry`, so it cannot multiply the calls a program makes of
//! a server's tool; its `max_in_flight` and `rate` stay, since they only
//! slow calls down (docs/SECURITY.md, "Limits per server and per tool").

use crate::cli::codemode;

/// The fixture server as `fx` in `servers.json`, with `flaky` failing
/// retryably twice before it succeeds.
fn workspace_with_server(toml: &str) -> tempfile::TempDir {
    let ws = crate::common::workspace();
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/misbehaving.py");
    let config = serde_json::json!({"mcpServers": {"fx": {"command": "python3", "args": [server, "normal"],
        "env": {"MCP_FIXTURE_PACING": "1"}}}});
    std::fs::write(ws.path().join("servers.json"), config.to_string()).unwrap();
    std::fs::write(ws.path().join("codemode.toml"), toml).unwrap();
    ws
}

const PROGRAM: &str = "try { await tools.mcp__fx__flaky({}); return 'ok'; } catch (e) { return e.kind; }";
const RETRY: &str = "[tools.mcp__fx__flaky]\nretry = { attempts = 5, base_delay_ms = 10 }\n";

/// The attack: the workspace's file asks for five attempts of every call
/// of `flaky`. The call is made once.
#[test]
fn an_untrusted_workspace_file_cannot_make_a_call_be_made_again() {
    let ws = workspace_with_server(RETRY);
    let args = ["run", "-", "--approve", "allow", "--mcp-config", "servers.json", "--json"];
    let out = codemode(&args, PROGRAM, ws.path());
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["value"], "failed", "{receipt}");
    assert_eq!(receipt["calls"][0].get("attempts"), None, "made once: {receipt}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 tool retry policy"), "the notice names what it ignores: {stderr}");
}

/// The same file named by the person (`--config`) applies.
#[test]
fn the_persons_own_policy_makes_a_call_be_made_again() {
    let ws = workspace_with_server("");
    let mine = tempfile::tempdir().unwrap();
    let config = mine.path().join("codemode.toml");
    std::fs::write(&config, RETRY).unwrap();
    let config = config.to_string_lossy().into_owned();
    let args =
        ["run", "-", "--approve", "allow", "--mcp-config", "servers.json", "--config", &config, "--json"];
    let out = codemode(&args, PROGRAM, ws.path());
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["value"], "ok", "{receipt}");
    assert_eq!(receipt["calls"][0]["attempts"], 3, "{receipt}");
}
