//! The engine's network holder is named to each launcher by its pid. A
//! holder that died leaves its pid free; were another process to take it,
//! one in a user and network namespace of the same user (a rootless
//! container with its own network, another tool's sandbox), a launcher
//! joining "the holder" would put its command on that network. A launcher
//! joins only namespaces whose inode numbers are the ones the engine saw
//! when its holder started: here the pid is such a process's, and the
//! command gets a network namespace of its own. (One on the host's network
//! could not be joined anyway: once in another user namespace, the launcher
//! has no right over the host's network namespace.)

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::sandbox_network::{NET_NS, connect, host_net};

/// Runs the launcher with `command` and a holder named by `shared`; the
/// command's stdout (after the header line).
fn launch_with_holder(command: &str, shared: Value) -> String {
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let spec = json!({
        "command": command,
        "workspace": ws_path,
        "profile": "workspace-write",
        "network": false,
        "protected": [],
        "hidden": [],
        "spill": null,
        "tmpdir": tmp.path().canonicalize().unwrap(),
        "parent": std::process::id(),
        "shared_network": shared,
    });
    let out = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .args(["__sandbox-exec", "2", &spec.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (header, rest) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(header.contains("\"sandbox\""), "the sandbox was applied: {header}");
    rest.trim().to_owned()
}

#[test]
fn a_pid_taken_by_a_process_with_namespaces_of_its_own_is_never_joined() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A process in a user and network namespace of this user: what could
    // hold a dead holder's pid.
    let mut other = Command::new("unshare")
        .args(["--user", "--map-current-user", "--net", "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .expect("unshare (util-linux) runs");
    let pid = other.id();
    let ino = |kind: &str| {
        for _ in 0..200 {
            let link = std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap();
            let own = std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
            if link != own {
                let text = link.display().to_string();
                return text.trim_end_matches(']').rsplit('[').next().unwrap().parse::<u64>().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("unshare did not make its user namespace");
    };
    let (user_ns, net_ns) = (ino("user"), ino("net"));
    // The engine saw other namespaces (its holder's): the inode numbers
    // differ from this process's.
    let claimed = json!({"pid": pid, "user_ns": user_ns + 1, "net_ns": net_ns + 1});
    let said = launch_with_holder(&format!("{NET_NS}; {}", connect(port)), claimed);
    let _ = other.kill();
    let _ = other.wait();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert_ne!(lines[0], format!("net:[{net_ns}]"), "the command is not on the other process's network");
    assert_ne!(lines[0], host_net(), "nor on the host's");
    assert_eq!(lines[1], "refused", "the host's loopback is out of reach");
}
