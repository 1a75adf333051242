//! A bash call whose timeout fires before the sandbox launcher has made
//! its session (the engine starts the launcher with `posix_spawn`, and the
//! launcher calls `setsid` first thing, so for a moment no process group
//! has its pid): the SIGTERM to the group finds none. Without the defence
//! the call waited out the kill grace while the launcher went on to run
//! the command, which finished its work after the call was reported as
//! timed out. Now a child with no group yet is killed at once: nothing of
//! the command has run (`ProcessGroup::terminate`).

use serde_json::json;

use crate::common::workspace;
use crate::tool_bash::{bash, engine};

#[test]
fn a_command_timed_out_before_its_session_existed_never_runs() {
    let ws = workspace();
    let engine = engine(&ws);
    let marker = ws.path().join("ran-after-timeout");
    // Tiny timeouts, so some fire while the launcher is still starting
    // (the first call, with a cold launcher, nearly always does).
    for _ in 0..10 {
        let out =
            bash(&engine, json!({"command": "sleep 0.3; echo ran >> ran-after-timeout", "timeout": 0.001}));
        let error = out.error.expect("the call times out");
        assert!(error["message"].as_str().unwrap().contains("timed out"), "{error}");
    }
    // Longer than the command would take, shorter than the kill grace (2 s).
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(!marker.exists(), "a command reported as timed out ran to its end");
}
