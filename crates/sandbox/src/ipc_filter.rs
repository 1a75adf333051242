//! A seccomp filter that keeps a sandboxed command from opening Unix
//! sockets (docs/SECURITY.md, "The bash sandbox"). The network namespace
//! and Landlock stop TCP and abstract sockets, but a socket with a path
//! (`/tmp/tmux-0/default`, `/run/docker.sock`, an ssh-agent, the session
//! bus) would let a command type into a person's terminal multiplexer or
//! drive a daemon outside the sandbox. Landlock (ABI 7) does not cover
//! connecting to such a socket, so the filter refuses `socket(AF_UNIX, ..)`
//! (and `AF_VSOCK`, which a network namespace does not isolate: it reaches
//! the virtual machine's host) with `EACCES` (`socketpair`, which only links two ends in the same
//! process tree, still works) and `io_uring_setup` with `EPERM` (io_uring
//! can open and connect sockets without those system calls). `AF_UNIX`
//! is refused unless `[sandbox] host_ipc = true`, whether or not the
//! network is on; `AF_VSOCK` unless both `host_ipc` and `network` are
//! granted (a vsock is host IPC and leaves the machine alike).
//!
//! A second filter refuses the kernel's keyrings (`keyctl`, `add_key`,
//! `request_key`, with `ENOSYS`, as if the kernel had none, which programs
//! handle): a user namespace does not separate them, and with the uid
//! mapped to itself a command could link the user's keyrings (`_uid.N`,
//! a named session keyring) by their ids from `/proc/keys`, read their
//! keys and leave keys there for later calls and the host.
//!
//! `socketpair(AF_UNIX, ...)` of any type but stream and seqpacket is
//! refused with `AF_UNIX` sockets: a datagram pair (`SOCK_DGRAM`, or
//! `SOCK_RAW`, which the kernel makes one) can be disconnected and pointed
//! at any socket path. On
//! x86_64 every rule also covers the call's x32 number, which carries the
//! x86_64 architecture value.
//!
//! Built with `seccompiler` (rust-vmm), for the architecture the binary was
//! built for.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

/// Installs the filter on the calling thread (and what it execs): it
/// refuses `AF_UNIX` sockets when `unix`, `AF_VSOCK` sockets when
/// `vsock`, and `io_uring_setup` either way (io_uring opens sockets
/// without `socket`). Nothing when neither is asked. Needs
/// `no_new_privs`, which it sets.
///
/// # Errors
/// What failed, as text: the architecture is not supported, the filter
/// does not compile, or the kernel refused it.
pub(crate) fn block_sockets(unix: bool, vsock: bool) -> Result<(), String> {
    if !unix && !vsock {
        return Ok(());
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("{e:?}"))?;
    let families = [(unix, libc::AF_UNIX), (vsock, libc::AF_VSOCK)];
    let mut refused = Vec::new();
    for (_, family) in families.into_iter().filter(|(on, _)| *on) {
        let condition = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
            .map_err(|e| e.to_string())?;
        refused.push(SeccompRule::new(vec![condition]).map_err(|e| e.to_string())?);
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, refused);
    if unix {
        // A datagram pair can be disconnected (`connect(AF_UNSPEC)`), bound
        // and pointed at any socket path with `sendto`; `SOCK_RAW` is one
        // for AF_UNIX (the kernel makes it a datagram socket). Every type
        // but stream (1) and seqpacket (5), which cannot be connected
        // anew, is refused, whatever SOCK_CLOEXEC or SOCK_NONBLOCK is or'ed
        // in (the low 4 bits are the type).
        let mut pairs = Vec::new();
        for kind in
            (0..16u64).filter(|k| ![libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64].contains(k))
        {
            let family =
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)
                    .map_err(|e| e.to_string())?;
            let other = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(0xf), kind)
                .map_err(|e| e.to_string())?;
            pairs.push(SeccompRule::new(vec![family, other]).map_err(|e| e.to_string())?);
        }
        rules.insert(libc::SYS_socketpair, pairs);
    }
    let rules = with_x32(rules);
    let refuse_sockets =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EACCES as u32), arch)
            .map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    let rules = with_x32(rules);
    let refuse_io_uring =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
            .map_err(|e| e.to_string())?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    for filter in [refuse_sockets, refuse_io_uring] {
        let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
        seccompiler::apply_filter(&program).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Installs the filter that refuses `keyctl`, `add_key` and `request_key`
/// with `ENOSYS` on the calling thread (and what it execs). Needs
/// `no_new_privs`, which it sets.
///
/// # Errors
/// What failed, as text (see [`block_sockets`]).
pub(crate) fn block_keyrings() -> Result<(), String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("{e:?}"))?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key]
        .into_iter()
        .map(|call| (call, vec![]))
        .collect();
    let rules = with_x32(rules);
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch)
            .map_err(|e| e.to_string())?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// `rules` with, on x86_64, the same rules under each call's x32 number
/// (`__X32_SYSCALL_BIT | n`): an x32 call carries the x86_64 architecture
/// value, so a filter on the x86_64 numbers alone lets it through on a
/// kernel with x32 enabled.
fn with_x32(rules: BTreeMap<i64, Vec<SeccompRule>>) -> BTreeMap<i64, Vec<SeccompRule>> {
    if !cfg!(target_arch = "x86_64") {
        return rules;
    }
    /// `__X32_SYSCALL_BIT` of <asm/unistd.h>.
    const X32: i64 = 0x4000_0000;
    let x32: Vec<(i64, Vec<SeccompRule>)> =
        rules.iter().map(|(call, rule)| (call | X32, rule.clone())).collect();
    rules.into_iter().chain(x32).collect()
}
