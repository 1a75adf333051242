//! A bash call whose timeout fires while the sandbox launcher is still
//! setting up, before the shell exists. Three windows: before the launcher
//! has made its session (the engine starts it with `posix_spawn`, and it
//! calls `setsid` first thing), the SIGTERM to the group finds no group;
//! after, and before init exists, it is pending in the launcher only
//! (which blocks it; pending signals are not inherited by init); once init
//! exists, the kernel drops a signal from outside its PID namespace unless
//! init catches it. In each the call waited out the kill grace while the
//! command ran, and finished its work after the call was reported as
//! timed out. Now a child with no group yet is killed at once
//! (`ProcessGroup::terminate`); the launcher and init catch SIGTERM (kept
//! blocked), the launcher passes one it got before init existed on to
//! init, and init does not start the shell when one is pending, or passes
//! one that came around the fork on to the shell (`launcher.rs`).

use serde_json::json;

use crate::common::workspace;
use crate::tool_bash::{bash, engine};

#[test]
fn a_command_timed_out_before_its_session_existed_never_runs() {
    let ws = workspace();
    let engine = engine(&ws);
    let marker = ws.path().join("ran-after-timeout");
    // Timeouts of 1 to 60 ms, so that some fire while the launcher is
    // still starting and some while init sets up the sandbox (where each
    // window falls depends on the build and the machine). Sequential: the
    // marker is checked after the last. Twice over: each window is a few
    // milliseconds wide.
    for ms in (1..=60).chain(1..=60) {
        let timeout = f64::from(ms) / 1000.0;
        let command = "sleep 0.3; echo ran >> ran-after-timeout";
        let out = bash(&engine, json!({"command": command, "timeout": timeout}));
        let error = out.error.expect("the call times out");
        assert!(error["message"].as_str().unwrap().contains("timed out"), "{error}");
    }
    // Longer than the command would take, shorter than the kill grace (2 s).
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(!marker.exists(), "a command reported as timed out ran to its end");
}
