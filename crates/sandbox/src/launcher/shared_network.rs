//! One network namespace for every sandboxed command of an engine.
//!
//! Making a network namespace is the dearest step of a sandboxed call
//! (about 0.5 ms of kernel work, and as much again to tear it down). With
//! the network off, an engine's commands do not need one each: nothing can
//! be reached from it but its own loopback, and a command's processes end
//! with its call (its PID namespace). So the engine starts one holder, a
//! launcher process run as `__sandbox-exec 2 hold-network`, that makes a
//! user and a network namespace, maps the caller's uid and gid, says
//! `ready` and waits for its stdin to close; each launcher then joins that
//! user and network namespace ([`join`]) and makes its own mount and PID
//! namespace inside, as before.
//!
//! A launcher joins only namespaces whose inode numbers are the ones the
//! engine saw when the holder said `ready` ([`SharedNetwork`]): a holder
//! that died and whose pid another process took is never mistaken for it
//! (the launcher makes a namespace of its own instead, as without a
//! holder).

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

/// The holder the engine started: its pid and the inode numbers of its
/// user and network namespaces (`/proc/PID/ns/user`, `/proc/PID/ns/net`),
/// read by the engine once the holder said [`READY`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct SharedNetwork {
    /// The holder's pid (in the engine's PID namespace).
    pub pid: i32,
    /// The inode of its user namespace.
    pub user_ns: u64,
    /// The inode of its network namespace.
    pub net_ns: u64,
}

/// The holder (`__sandbox-exec 2 hold-network`): makes a user and a network
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

/// Joins the holder's user and network namespaces when they are still the
/// ones the engine saw (inode numbers). On an error the launcher may be in
/// the holder's user namespace already (with the same uid and gid) and
/// makes its own namespaces from there.
#[cfg(target_os = "linux")]
pub(super) fn join(shared: &SharedNetwork) -> Result<(), String> {
    let open = |kind: &str, ino: u64| {
        let file = std::fs::File::open(format!("/proc/{}/ns/{kind}", shared.pid))
            .map_err(|e| format!("the holder's {kind} namespace: {e}"))?;
        let seen = file.metadata().map_err(|e| format!("the holder's {kind} namespace: {e}"))?.ino();
        if seen != ino {
            return Err(format!("pid {} holds another {kind} namespace now", shared.pid));
        }
        Ok(file)
    };
    let user = open("user", shared.user_ns)?;
    let net = open("net", shared.net_ns)?;
    setns(user.as_fd(), CloneFlags::CLONE_NEWUSER).map_err(|e| format!("joining its user namespace: {e}"))?;
    setns(net.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| format!("joining its network namespace: {e}"))
}
