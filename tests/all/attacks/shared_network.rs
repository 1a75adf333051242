//! The engine's network holder is named to each launcher by its pid. A
//! holder that died leaves its pid free; were another process to take it,
//! one in a user and network namespace of its own (a rootless container
//! with its own network, another tool's sandbox, another user's process
//! when the engine runs as root), a launcher joining "the holder" would put
//! its command in that process's namespaces: on its network, and, when
//! that user namespace is another user's, in reach of that user's ptrace.
//! Inode numbers do not tell the two apart: the kernel gives a freed
//! namespace's number to the next one made (a reviewer saw every holder of
//! a run, and an `unshare -Urn` started after, get the same two numbers).
//! A launcher reads the holder's `/proc` entry through one descriptor and
//! joins only the engine's child with the start time the engine saw.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::sandbox_network::{NET_NS, connect, host_net};

/// Runs the launcher with `command` and a holder named by `shared`; the
/// command's stdout (after the header line).
fn launch_with_holder(command: &str, shared: Value) -> String {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut spec = super::launcher_spec(command, ws.path(), tmp.path(), std::process::id().into());
    spec["shared_network"] = shared;
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_codemode"));
    launcher.args(["__sandbox-exec", codemode::sandbox::launcher::PROTOCOL, "spec-on-stdin"]);
    let out = crate::common::run_launcher(launcher, &spec);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (header, rest) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(header.contains("\"sandbox\""), "the sandbox was applied: {header}");
    rest.trim().to_owned()
}

/// A process in a user and network namespace of its own, started by
/// `sh` (not this process's child) when `grandchild`: what could hold a
/// dead holder's pid. Returns it (to be killed), its pid and what its
/// `/proc` entry says: its user and network namespaces' inode numbers,
/// and its start time.
fn stranger(grandchild: bool) -> (std::process::Child, u32, u64, u64, u64) {
    let unshare = "unshare --user --map-current-user --net sleep 60";
    let mut child = if grandchild {
        Command::new("sh").args(["-c", &format!("{unshare} & echo $!; wait")]).stdout(Stdio::piped()).spawn()
    } else {
        Command::new("sh").args(["-c", &format!("echo $$; exec {unshare}")]).stdout(Stdio::piped()).spawn()
    }
    .expect("sh and unshare (util-linux) run");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)
        .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    let ino = |kind: &str| -> Option<u64> {
        let link = std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok()?;
        let own = std::fs::read_link(format!("/proc/self/ns/{kind}")).ok()?;
        (link != own).then(|| {
            link.display().to_string().trim_end_matches(']').rsplit('[').next().unwrap().parse().unwrap()
        })
    };
    for _ in 0..300 {
        if let (Some(user), Some(net)) = (ino("user"), ino("net")) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let (_, start) = codemode::sandbox::launcher::stat_parent_and_start(&stat).unwrap();
            return (child, pid, user, net, start);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("unshare did not make its namespaces");
}

/// The launcher named `claimed` as the holder: the command is on neither
/// the stranger's network (`net_ns`) nor the host's, nor its loopback.
fn never_joined(claimed: Value, net_ns: u64) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let said = launch_with_holder(&format!("{NET_NS}; {}", connect(port)), claimed);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert_ne!(lines[0], format!("net:[{net_ns}]"), "the command is not on the stranger's network");
    assert_ne!(lines[0], host_net(), "nor on the host's");
    assert_eq!(lines[1], "refused", "the host's loopback is out of reach");
}

/// The stranger has the holder's pid and the very inode numbers the engine
/// saw (as the kernel reuses them), but started at another time.
#[test]
fn a_pid_taken_over_with_the_same_namespace_numbers_is_never_joined() {
    let (mut other, pid, user_ns, net_ns, start) = stranger(false);
    let claimed = json!({"pid": pid, "user_ns": user_ns, "net_ns": net_ns, "start_time": start + 1});
    never_joined(claimed, net_ns);
    let _ = other.kill();
    let _ = other.wait();
}

/// The stranger matches in everything the engine saw but is not the
/// engine's child.
#[test]
fn a_process_that_is_not_the_engine_s_child_is_never_joined() {
    let (mut sh, pid, user_ns, net_ns, start) = stranger(true);
    let claimed = json!({"pid": pid, "user_ns": user_ns, "net_ns": net_ns, "start_time": start});
    never_joined(claimed, net_ns);
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
    let _ = sh.kill();
    let _ = sh.wait();
}
