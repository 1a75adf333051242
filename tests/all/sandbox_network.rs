//! The network namespace an engine's sandboxed bash calls share with the
//! network off (crates/codemode/src/sandbox/network_holder.rs): one per
//! engine, never the host's, made again when its holder ends.

use codemode::Engine;
use codemode::config::{ConfigFile, SandboxConfig};
use codemode::sandbox::{SandboxProfile, SandboxSettings};
use codemode::{Policy, Program};
use serde_json::json;

use crate::common::{builder, workspace};

/// What `/proc/self/ns/net` names (`net:[INODE]`), in the sandbox.
pub(crate) const NET_NS: &str = "readlink /proc/self/ns/net";

/// `net:[INODE]` of this test process: the host's network namespace.
pub(crate) fn host_net() -> String {
    std::fs::read_link("/proc/self/ns/net").unwrap().display().to_string()
}

/// A command that prints `connected` or `refused` as a TCP connection to
/// `port` on the host's loopback goes.
pub(crate) fn connect(port: u16) -> String {
    format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused")
}

fn engine(ws: &tempfile::TempDir) -> Engine {
    let config = ConfigFile {
        sandbox: SandboxConfig {
            settings: SandboxSettings {
                profile: SandboxProfile::WorkspaceWrite,
                network: false,
                host_ipc: false,
            },
            ..SandboxConfig::default()
        },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    builder(ws).config(config).build().expect("engine builds")
}

/// Each command's stdout, the commands run as bash calls of one program.
fn outputs(engine: &Engine, commands: &[&str]) -> Vec<String> {
    let calls: Vec<String> = commands
        .iter()
        .map(|c| format!("(await tools.bash({{command: {}}})).content.stdout.trim()", json!(c)))
        .collect();
    let receipt = engine.execute_blocking(Program::new(format!("return [{}];", calls.join(", "))));
    assert_eq!(receipt.status, codemode::receipt::RunStatus::Completed, "{:?}", receipt.error);
    serde_json::from_value(receipt.value).unwrap()
}

/// The holders this process started (the engines' children) of the
/// network namespace `net` (`net:[INODE]`), by pid.
fn holders(net: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid =
            stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_owned));
        let holds =
            std::fs::read_link(entry.path().join("ns/net")).is_ok_and(|l| l.display().to_string() == net);
        if String::from_utf8_lossy(&cmdline).contains("hold-network")
            && ppid.as_deref() == Some(me.as_str())
            && holds
        {
            found.push(pid);
        }
    }
    found
}

#[test]
fn an_engine_s_calls_share_a_network_namespace_that_is_neither_the_host_s_nor_another_engine_s() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ws1, ws2) = (workspace(), workspace());
    let (one, two) = (engine(&ws1), engine(&ws2));
    let first = outputs(&one, &[NET_NS, NET_NS, &connect(port)]);
    assert_eq!(first[0], first[1], "one engine's calls share one");
    assert_ne!(first[0], host_net(), "it is not the host's");
    assert_eq!(first[2], "refused", "the host's loopback is out of reach");
    let second = outputs(&two, &[NET_NS]);
    assert_ne!(second[0], first[0], "another engine has its own");
    assert_ne!(second[0], host_net());
}

#[test]
fn a_holder_that_ended_is_started_again_and_calls_stay_off_the_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = workspace();
    let engine = engine(&ws);
    let before = outputs(&engine, &[NET_NS]);
    let started = holders(&before[0]);
    assert!(!started.is_empty(), "a holder runs");
    for pid in &started {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    }
    let after = outputs(&engine, &[NET_NS, &connect(port)]);
    assert_ne!(after[0], before[0], "the old namespace is gone with its holder");
    assert_ne!(after[0], host_net());
    assert_eq!(after[1], "refused");
}

#[test]
fn dropping_the_engine_ends_its_holder() {
    let ws = workspace();
    let engine = engine(&ws);
    let net = outputs(&engine, &[NET_NS]).remove(0);
    assert_eq!(holders(&net).len(), 1, "one holder runs");
    drop(engine);
    assert_eq!(holders(&net), Vec::<i32>::new(), "the holder was ended and reaped with its engine");
}

/// Each call has a user namespace of its own inside the holder's: the
/// holder's (where the network namespace's owner is) is never a command's,
/// so a command has no capability over the shared network namespace
/// whatever happens to its own, and its user keyrings are its own.
#[test]
fn each_call_has_a_user_namespace_of_its_own_inside_the_holder_s() {
    let ws = workspace();
    let engine = engine(&ws);
    let said =
        outputs(&engine, &["readlink /proc/self/ns/user /proc/self/ns/net", "readlink /proc/self/ns/user"]);
    let (first_user, net) = said[0].split_once('\n').unwrap();
    assert_ne!(first_user, said[1], "two calls, two user namespaces");
    let holder = holders(net);
    assert_eq!(holder.len(), 1, "one holder of {net}");
    let holder_user =
        std::fs::read_link(format!("/proc/{}/ns/user", holder[0])).unwrap().display().to_string();
    assert_ne!(first_user, holder_user, "not the holder's");
    assert_ne!(said[1], holder_user, "not the holder's");
}

/// System V shared memory and message queues are the call's own (an IPC
/// namespace per call): a command sees none of the host's, and what it
/// makes is gone with it.
#[test]
fn a_call_has_an_ipc_namespace_of_its_own() {
    let host = |args: &[&str]| {
        let out =
            std::process::Command::new(args[0]).args(&args[1..]).output().expect("util-linux's ipcmk runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let segments = || std::fs::read_to_string("/proc/sysvipc/shm").unwrap().lines().count();
    let made = host(&["ipcmk", "-M", "4096"]);
    let id = made.trim().rsplit(' ').next().unwrap().to_owned();
    let before = segments();
    let ws = workspace();
    let said = outputs(
        &engine(&ws),
        &["tail -n +2 /proc/sysvipc/shm | wc -l", "ipcmk -M 4096 > /dev/null && echo made"],
    );
    host(&["ipcrm", "-m", &id]);
    assert_eq!(said, ["0", "made"], "the host's segment is not seen; the command makes its own");
    assert_eq!(segments(), before - 1, "the command's segment is not the host's (only ours was removed)");
}
