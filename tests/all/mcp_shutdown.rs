//! The end of a stdio server's session, seen from the server (issue 35,
//! item 4): the MCP specification's order, stdin closed first, then a
//! grace to exit, then SIGTERM, then SIGKILL. Real `codemode run`
//! processes and real fixture servers (tests/fixtures/mcp/misbehaving.py,
//! which records what it saw in order).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::codemode;
use crate::mcp_support::{assert_gone, fixture, pids};

/// A fixture server recording its end in `ends`, and its pid in `pids`.
fn server(ends: &Path, pids: &Path, stubborn: bool) -> Value {
    json!({"command": "python3", "args": [fixture(), "normal"],
           "env": {"MCP_FIXTURE_SHUTDOWN": ends, "MCP_FIXTURE_PIDS": pids,
                   "MCP_FIXTURE_STUBBORN": if stubborn { "1" } else { "0" }}})
}

/// Runs a program calling `echo` on each of `names` with the config
/// `servers`; returns how long the command took.
fn run_calling(ws: &Path, servers: Value, names: &[String]) -> Duration {
    let file = ws.join("servers.json");
    std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
    let calls: Vec<String> =
        names.iter().map(|n| format!("tools.call('mcp__{n}__echo', {{text: '{n}'}})")).collect();
    let program = format!("return (await Promise.all([{}])).length;", calls.join(", "));
    let started = Instant::now();
    let out = codemode(&["run", "-", "--json", "--mcp-config", file.to_str().unwrap()], &program, ws);
    let took = started.elapsed();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // The receipt (stdout) says which call failed and why.
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}\nstdout: {stdout}");
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["value"], names.len(), "{receipt:#}");
    took
}

fn ends(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[test]
fn five_stdio_servers_see_their_stdin_close_before_any_signal() {
    let ws = crate::common::workspace();
    let pid_file = ws.path().join("pids");
    let names: Vec<String> = (1..=5).map(|i| format!("s{i}")).collect();
    let servers: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), server(&ws.path().join(n), &pid_file, false))).collect();
    run_calling(ws.path(), Value::Object(servers), &names);
    for name in &names {
        // stdin closed, its 0.3 s of cleanup done, and no SIGTERM at all.
        assert_eq!(ends(&ws.path().join(name)), ["eof", "clean"], "server {name}");
    }
    assert_gone(&pids(&pid_file));
}

#[test]
fn a_server_that_ignores_its_stdin_closing_gets_sigterm_then_sigkill() {
    let ws = crate::common::workspace();
    let pid_file = ws.path().join("pids");
    let (stubborn, polite) = (ws.path().join("stubborn"), ws.path().join("polite"));
    let servers =
        json!({"stubborn": server(&stubborn, &pid_file, true), "polite": server(&polite, &pid_file, false)});
    let took = run_calling(ws.path(), servers, &["stubborn".into(), "polite".into()]);
    // Its stdin closed first; SIGTERM only after the grace; it ignored
    // that too, and SIGKILL ended it (nothing after `sigterm`).
    assert_eq!(ends(&stubborn), ["eof", "sigterm"]);
    assert_eq!(ends(&polite), ["eof", "clean"]);
    assert_gone(&pids(&pid_file));
    // The grace (2 s) and the kill grace (2 s) passed: a lower bound, not
    // a timing.
    assert!(took >= codemode::mcp::STDIN_CLOSE_GRACE, "{took:?}");
}
