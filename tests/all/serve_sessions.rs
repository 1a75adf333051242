//! The life of `--http` sessions and upstream servers under load
//! (docs/SERVE.md, "Sessions"): an idle session ends with its upstream
//! servers; a busy one does not; at `--max-sessions` the session idle
//! longest makes room; an upstream server idle past `--upstream-idle`
//! stops and its next call starts it again.

use serde_json::{Value, json};

use crate::mcp_support::{assert_gone, pids};
use crate::serve_http::{Served, in_session, open_session, post, request, with_fixture_server};

const LEGACY: &str = "2025-11-25";

/// Runs a program calling the fixture's echo in `session`; asserts it
/// completed.
fn call_echo(url: &str, session: &str, id: u64) {
    let call = json!({"name": "execute_tools", "arguments": {"code": "return await tools.call('mcp__fx__echo', {text: 'hi'})"}});
    let ran = in_session(url, session, id, "tools/call", call);
    assert_eq!(ran["result"]["structuredContent"]["status"], "completed", "{ran}");
}

/// The HTTP status of a `tools/list` in `session`.
fn status_in(url: &str, session: &str) -> u16 {
    let headers = [("Mcp-Session-Id", session), ("MCP-Protocol-Version", LEGACY)];
    post(url, &headers, &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}})).status
}

/// Waits (at most 30 s) until `session` is unknown to the server: 404, as
/// the MCP spec says for a session that ended.
fn wait_ended(url: &str, session: &str) {
    for _ in 0..300 {
        let headers = [("Mcp-Session-Id", session), ("MCP-Protocol-Version", LEGACY)];
        let probe = request("GET", url, &[headers[0], headers[1], ("Accept", "text/event-stream")], None);
        if probe.status == 404 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("session {session} did not end");
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}})
}

/// Starts, in a thread, a program in `session` whose write asks the person
/// (posture ask): with no GET stream open, the question waits until
/// `--approval-timeout`, the call in flight all along. Returns the thread,
/// which ends with the call's answer.
fn asking_call(url: &str, session: &str) -> std::thread::JoinHandle<Value> {
    let (url, session) = (url.to_owned(), session.to_owned());
    std::thread::spawn(move || {
        let call = json!({"name": "execute_tools", "arguments": {"code": "await tools.write({path: 'a.txt', content: 'x'}); return 1"}});
        in_session(&url, &session, 5, "tools/call", call)
    })
}

#[test]
fn an_idle_session_ends_with_its_upstream_server_and_its_next_request_gets_404() {
    let (ws, pid_file) = with_fixture_server();
    let args = ["--http", "127.0.0.1:0", "--mcp-config", "servers.json", "--posture", "full-access"];
    let served = Served::start(&[&args[..], &["--session-idle", "1"]].concat(), ws.path(), &[]);
    let session = open_session(&served.url, &[], json!({}));
    call_echo(&served.url, &session, 2);
    let started = pids(&pid_file);
    assert_eq!(started.len(), 2, "wrapper and server of the session");
    // Nobody returns: the session ends, and its server with it.
    wait_ended(&served.url, &session);
    assert_gone(&started);
    assert_eq!(status_in(&served.url, &session), 404);
    // A new session works as before.
    let again = open_session(&served.url, &[], json!({}));
    call_echo(&served.url, &again, 2);
}

#[test]
fn a_session_with_a_question_waiting_is_not_ended_while_an_idle_one_is() {
    let ws = crate::common::workspace();
    let args = ["--http", "127.0.0.1:0", "--session-idle", "1", "--approval-timeout", "4"];
    let served = Served::start(&args, ws.path(), &[]);
    let busy = open_session(&served.url, &[], json!({"elicitation": {"form": {}}}));
    let idle = open_session(&served.url, &[], json!({}));
    let asking = asking_call(&served.url, &busy);
    wait_ended(&served.url, &idle);
    // The asking call is answered (denied at the approval timeout) in its
    // session, which is still there.
    let answered = asking.join().unwrap();
    assert!(answered["result"]["structuredContent"]["status"].is_string(), "{answered}");
    assert_eq!(status_in(&served.url, &busy), 200, "the busy session was ended");
}

#[test]
fn at_the_bound_the_oldest_idle_session_ends_to_make_room() {
    // Clients that leave without DELETE are common; opening sessions in a
    // loop grew the server without end (the serve_http_request fuzz
    // target), and refusing new ones at the bound locked newcomers out.
    let ws = crate::common::workspace();
    let served = Served::start(&["--http", "127.0.0.1:0", "--max-sessions", "2"], ws.path(), &[]);
    let first = open_session(&served.url, &[], json!({}));
    let second = open_session(&served.url, &[], json!({}));
    // The first is used again: the second is now the one idle longest.
    assert_eq!(status_in(&served.url, &first), 200);
    let third = open_session(&served.url, &[], json!({}));
    assert_eq!(status_in(&served.url, &second), 404, "the oldest idle session made room");
    assert_eq!(status_in(&served.url, &first), 200);
    assert_eq!(status_in(&served.url, &third), 200);
}

#[test]
fn at_the_bound_with_every_session_busy_an_initialize_gets_503() {
    let ws = crate::common::workspace();
    let args = ["--http", "127.0.0.1:0", "--max-sessions", "1", "--approval-timeout", "4"];
    let served = Served::start(&args, ws.path(), &[]);
    let busy = open_session(&served.url, &[], json!({"elicitation": {"form": {}}}));
    let asking = asking_call(&served.url, &busy);
    // Let the call reach the server (it then waits for the approval).
    std::thread::sleep(std::time::Duration::from_secs(1));
    let refused = post(&served.url, &[], &initialize());
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.body.contains("--max-sessions 1") && refused.body.contains("every one"), "{refused:?}");
    assert_eq!(refused.header("retry-after").as_deref(), Some("60"), "{refused:?}");
    asking.join().unwrap();
    // Once the call answered, the session is idle and makes room.
    open_session(&served.url, &[], json!({}));
    assert_eq!(status_in(&served.url, &busy), 404);
}

#[test]
fn an_upstream_server_idle_past_the_setting_stops_and_the_next_call_starts_it_again() {
    let (ws, pid_file) = with_fixture_server();
    let args = ["--http", "127.0.0.1:0", "--mcp-config", "servers.json", "--posture", "full-access"];
    let served = Served::start(&[&args[..], &["--upstream-idle", "1"]].concat(), ws.path(), &[]);
    let session = open_session(&served.url, &[], json!({}));
    call_echo(&served.url, &session, 2);
    let first = pids(&pid_file);
    assert_eq!(first.len(), 2, "wrapper and server");
    assert_gone(&first);
    // The session goes on; its next call starts the server again.
    call_echo(&served.url, &session, 3);
    let all = pids(&pid_file);
    assert_eq!(all.len(), 4, "started again: {all:?}");
    assert_eq!(served.terminate(), Some(0));
    assert_gone(&all[2..]);
}

#[test]
fn bad_idle_settings_exit_2_saying_what_to_give() {
    let ws = crate::common::workspace();
    for (flag, value) in [
        ("--session-idle", "0"),
        ("--session-idle", "0.001"),
        ("--upstream-idle", "soon"),
        ("--upstream-idle", "0"),
        ("--upstream-idle", "0.5"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_codemode"))
            .args(["mcp", "serve", "--workspace"])
            .arg(ws.path())
            .args(["--http", "127.0.0.1:0", flag, value])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains("seconds"), "{flag} {value}: {stderr}");
    }
}
