//! One network namespace for every sandboxed command of an engine.
//!
//! Making a network namespace is the dearest step of a sandboxed call
//! (about 0.5 ms of kernel work, and as much again to tear it down). With
//! the network off, an engine's commands do not need one each: nothing can
//! be reached from it but its own loopback, and a command's processes end
//! with its call (its PID namespace). So the engine starts one holder, a
//! launcher process run as `__sandbox-exec 4 hold-network`, that makes a
//! user and a network namespace, maps the caller's uid and gid, says
//! `ready` and waits for its stdin to close; each launcher then joins that
//! user and network namespace ([`join`]) and makes the call's own user,
//! mount, PID and IPC namespaces inside.
//!
//! A launcher joins only the namespaces of the process the engine started:
//! it opens `/proc/PID` once and reads everything through that descriptor,
//! which stops working when that process is gone (a pid taken over later
//! is a different `/proc` entry), and it checks that the process is the
//! engine's child with the start time the engine read when the holder
//! said `ready` (a pid and its start time name one process for the life of
//! the system; inode numbers of namespaces do not: the kernel gives a
//! freed number to the next namespace made). The command then gets a user
//! namespace of its own inside the holder's (no capability over the
//! holder's network namespace), and its own mount, PID and IPC namespaces.

#[cfg(target_os = "linux")]
use {
    nix::sched::{CloneFlags, setns, unshare},
    std::io::Write as _,
    std::os::fd::AsFd,
    std::os::unix::fs::MetadataExt as _,
    std::process::ExitCode,
};

use serde::{Deserialize, Serialize};

/// The spec that makes a launcher the network holder.
pub const HOLD_NETWORK: &str = "hold-network";

/// The line the holder writes once its namespaces are made.
pub const READY: &str = "ready";

/// The holder the engine started, as the engine read it once the holder
/// said [`READY`]: its pid, its start time and the inode numbers of its
/// user and network namespaces (`/proc/PID/ns/user`, `/proc/PID/ns/net`).
/// A launcher joins only the process all of these still describe.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct SharedNetwork {
    /// The holder's pid (in the engine's PID namespace).
    pub pid: i32,
    /// The inode of its user namespace.
    pub user_ns: u64,
    /// The inode of its network namespace.
    pub net_ns: u64,
    /// When it started: field 22 of `/proc/PID/stat` (clock ticks after
    /// boot).
    pub start_time: u64,
}

/// The parent pid (field 4) and start time (field 22) in the text of a
/// `/proc/PID/stat`; `None` when it does not parse. The command name
/// (field 2, in parentheses) may hold spaces and parentheses: fields are
/// counted after its last `)`.
pub fn stat_parent_and_start(stat: &str) -> Option<(i32, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (the state).
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The holder (`__sandbox-exec 4 hold-network`): makes a user and a network
/// namespace, maps the caller's uid and gid, writes [`READY`] on stdout
/// and waits until stdin closes (the engine dropped it, or ended). Exit
/// 0; [`super::EXIT_SETUP_FAILED`] with an error line when the namespaces
/// cannot be made.
#[cfg(target_os = "linux")]
pub(super) fn hold() -> ExitCode {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if let Err(e) = unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET) {
        return super::fail(&format!("cannot make a user and network namespace: {e}"));
    }
    if let Err(e) = super::map_ids(uid, gid) {
        return super::fail(&format!("cannot map the uid and gid: {e}"));
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{READY}").and_then(|()| out.flush()).is_err() {
        return ExitCode::from(super::EXIT_SETUP_FAILED);
    }
    let stdin = std::io::stdin();
    let mut byte = [0u8; 64];
    // Until the engine closes stdin (or ends).
    while let Ok(1..) | Err(nix::errno::Errno::EINTR) = nix::unistd::read(stdin.as_fd(), &mut byte) {}
    ExitCode::SUCCESS
}

/// Joins the holder's user and network namespaces when the holder is
/// still the process the engine started: `parent`'s child, with the start
/// time and namespaces the engine saw. On an error after the first
/// `setns`, the launcher is in the holder's user namespace (with the same
/// uid and gid) and makes its own namespaces from there.
#[cfg(target_os = "linux")]
pub(super) fn join(shared: &SharedNetwork, parent: i32) -> Result<(), String> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;

    // Everything below is read through this one descriptor: once the
    // holder is gone, it reads nothing, whoever has its pid now.
    let proc =
        std::fs::File::open(format!("/proc/{}", shared.pid)).map_err(|e| format!("the holder: {e}"))?;
    let open = |name: &str| {
        openat(proc.as_fd(), name, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
            .map(std::fs::File::from)
            .map_err(|e| format!("the holder's {name}: {e}"))
    };
    let user = open("ns/user")?;
    let net = open("ns/net")?;
    let mut stat = String::new();
    std::io::Read::read_to_string(&mut open("stat")?, &mut stat)
        .map_err(|e| format!("the holder's stat: {e}"))?;
    if stat_parent_and_start(&stat) != Some((parent, shared.start_time)) {
        return Err(format!("pid {} is not the holder the engine started", shared.pid));
    }
    for (file, kind, ino) in [(&user, "user", shared.user_ns), (&net, "net", shared.net_ns)] {
        let seen = file.metadata().map_err(|e| format!("the holder's {kind} namespace: {e}"))?.ino();
        if seen != ino {
            return Err(format!("the holder's {kind} namespace is another one now"));
        }
    }
    setns(user.as_fd(), CloneFlags::CLONE_NEWUSER).map_err(|e| format!("joining its user namespace: {e}"))?;
    setns(net.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| format!("joining its network namespace: {e}"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_parent_and_start_time_are_read_after_the_command_name() {
        let stat = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 50 x";
        assert_eq!(stat_parent_and_start(stat), Some((17, 98765)));
        assert_eq!(stat_parent_and_start("4242 (cut"), None);
        assert_eq!(stat_parent_and_start("4242 (a) S 17"), None);
    }

    #[test]
    fn this_process_s_stat_parses() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (parent, start) = stat_parent_and_start(&stat).unwrap();
        assert_eq!(parent, std::os::unix::process::parent_id() as i32);
        assert!(start > 0);
    }
}
