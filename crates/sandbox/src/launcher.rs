//! The sandbox launcher: the small `codemode-sandbox` binary, or the
//! `codemode` binary re-executed, run as `<binary> __sandbox-exec 4
//! spec-on-stdin` by the `bash` tool (a `LaunchSpec` as JSON on stdin,
//! [`spec_frame`]), before anything else in `main` runs. It is a fresh,
//! single-threaded process, so it may fork. Linux only.
//!
//! Three processes:
//!
//! 1. **The launcher** (the engine's child). It dies with the engine's
//!    tool thread (`PR_SET_PDEATHSIG`), starts a session of its own
//!    (`setsid`: no controlling terminal, a process group the engine ends
//!    as one; it stops if it can have none), blocks SIGTERM (the call's SIGTERM is for the
//!    shell; the launcher waits to report how the shell ended), unshares a
//!    user, mount, PID, IPC and (unless the network is allowed) network
//!    namespace, maps its own uid and gid into the user namespace, and forks.
//!    With the network off and the engine's network holder named in the
//!    spec, it first joins the holder's user and network namespace
//!    (`launcher/shared_network.rs`) and makes the others inside them, the
//!    user namespace included.
//! 2. **init**, PID 1 of the new PID namespace. It dies with the launcher
//!    (`PR_SET_PDEATHSIG`), makes the mount tree private, mounts a fresh
//!    `/proc`, bind-mounts the protected paths read-only, covers the hidden
//!    folders with an empty read-only tmpfs (binding the run's own spill
//!    folder back read-only), applies Landlock, writes the header line (what
//!    was applied, `Header`) to stdout, sets `SECBIT_NOROOT` (so a shell
//!    running as uid 0 gets no capabilities at `execve`), does not start
//!    the shell when the call's SIGTERM already came (the launcher and init
//!    catch SIGTERM, blocked, so the kernel queues it for init instead of
//!    dropping it; the launcher passes one it got before init existed on to
//!    init, and init one that comes around the fork on to the shell), forks the shell
//!    and reaps every process of the namespace until the shell ends. Then it
//!    kills and reaps every process left in the namespace, puts `/dev/null`
//!    in place of its stdin, stdout and stderr, reports the shell's wait
//!    status to the launcher through a pipe and waits for the launcher's
//!    exit to kill it (`PR_SET_PDEATHSIG`): the teardown of the namespaces
//!    (the mount tree, the network) then happens after the launcher has
//!    answered, off the call's way back.
//! 3. **The shell**: `bash -c COMMAND` (`/bin/sh` when no `bash` is on
//!    `PATH`) in the workspace, with the environment of the spec
//!    (`LaunchSpec::env`; the launcher's own when the spec has none). With
//!    `go_on_stdin` (a journaled run), its process waits
//!    for one byte on stdin before it executes the shell: the engine sends
//!    it once the call's `start` line is durable, so the sandbox is set up
//!    while the journal syncs (docs/JOURNAL.md, "What survives what").
//!    The shell's stdin is then `/dev/null` (the launcher's stdin carried
//!    the spec, and the go).
//!
//! The launcher ends, as soon as init reports, the way the shell ended:
//! the same exit code, or the same signal raised on itself (core dumps
//! off), so the engine sees the shell's status.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
#[cfg(target_os = "linux")]
use {
    nix::errno::Errno,
    nix::sched::{CloneFlags, unshare},
    nix::sys::signal::{SigSet, Signal},
    nix::sys::wait::{WaitStatus, waitpid},
    nix::unistd::{ForkResult, Pid},
    std::os::fd::OwnedFd,
    std::path::Path,
};

#[cfg(target_os = "linux")]
use super::SandboxProfile;

#[cfg(target_os = "linux")]
mod landlock_rules;
mod shared_network;
#[cfg(target_os = "linux")]
mod shell;
pub use shared_network::{HOLD_NETWORK, READY, SharedNetwork, stat_parent_and_start};

/// The hidden subcommand that runs the launcher.
pub const SUBCOMMAND: &str = "__sandbox-exec";

/// The protocol the engine and the launcher speak, given after
/// [`SUBCOMMAND`] (`__sandbox-exec 4 spec-on-stdin`). Protocol 2 added
/// `go_on_stdin`, which a launcher of protocol 1 would ignore (running the
/// command before its start is durable). Protocol 3 moved the spec from
/// the command line to stdin ([`spec_frame`]): on the command line,
/// `/proc/PID/cmdline` showed it (the command, the paths, the run id) to
/// every process of the user, and to the command itself as init's, and
/// init, which lingers until the launcher has exited, looked like the
/// command to `pgrep -f`. Protocol 4 moved the command's environment into
/// the spec ([`LaunchSpec::env`]), so that a launcher can be started
/// before the call it serves (the engine's spare launcher): one of
/// protocol 3 would give the shell its own (empty) environment. A launcher
/// of another protocol refuses the command line, and one of protocol 1
/// reads the number as its spec and refuses it too, so nothing runs under
/// rules a launcher does not know.
pub const PROTOCOL: &str = "4";

/// The argument after [`PROTOCOL`] that says the spec follows on stdin
/// (the other is [`HOLD_NETWORK`]).
pub const SPEC_ON_STDIN: &str = "spec-on-stdin";

/// The largest spec a launcher reads, in bytes (16 MiB): the command is
/// most of it.
pub const MAX_SPEC_BYTES: usize = 16 << 20;

/// The spec as the engine writes it on the launcher's stdin: its length
/// in bytes as 8 hexadecimal digits, then the spec as JSON. What follows
/// on stdin is the engine's go (`go_on_stdin`), or nothing.
///
/// # Errors
/// When a path of the spec is not UTF-8 (JSON cannot carry it; the
/// environment can, [`EnvText`]): the message names the path.
pub fn spec_frame(spec: &LaunchSpec) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(spec).map_err(|e| {
        let paths = std::iter::once(&spec.workspace)
            .chain([&spec.tmpdir])
            .chain(&spec.writable)
            .chain(&spec.protected)
            .chain(&spec.hidden)
            .chain(&spec.spill);
        match paths.into_iter().find(|p| p.to_str().is_none()) {
            Some(path) => format!(
                "the sandbox cannot be given the path {} (not UTF-8): rename it, or set `[sandbox] profile = \"off\"` \
                 under the full-access posture",
                path.display()
            ),
            None => format!("the sandbox's spec cannot be written: {e}"),
        }
    })?;
    let mut frame = format!("{:08x}", json.len()).into_bytes();
    frame.extend_from_slice(&json);
    Ok(frame)
}

/// The exit code of a launcher that could not confine or start the shell
/// (the header line says why).
pub const EXIT_SETUP_FAILED: u8 = 125;

/// What the engine asks the launcher to run, and how to confine it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The shell command (`bash -c COMMAND`).
    pub command: String,
    /// The workspace: the working directory, and writable under
    /// `workspace-write`.
    pub workspace: PathBuf,
    /// `workspace-write` or `read-only` ([`SandboxProfile::as_str`]).
    pub profile: String,
    /// Whether the network stays reachable (no network namespace).
    pub network: bool,
    /// Whether the command may open Unix sockets (the host's daemons,
    /// agents and terminal multiplexers); apart from `network`.
    #[serde(default)]
    pub host_ipc: bool,
    /// Folders outside the workspace made writable (`[sandbox] writable`
    /// of a trusted policy, the git folders of a worktree, the command
    /// cache), canonical and existing: bound writable before the
    /// protected paths and hidden folders are mounted over, so those stay
    /// as they are even beneath one of these.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Paths made read-only.
    pub protected: Vec<PathBuf>,
    /// Folders covered with an empty read-only tmpfs.
    pub hidden: Vec<PathBuf>,
    /// The run's own spill folder, bound back read-only when it is beneath
    /// a hidden folder and exists.
    pub spill: Option<PathBuf>,
    /// The call's private temporary folder (writable, `TMPDIR`).
    pub tmpdir: PathBuf,
    /// The engine's pid: a launcher whose parent is already another process
    /// exits at once.
    pub parent: i32,
    /// Whether the shell's process, once the sandbox is set up and it is
    /// forked, waits for one byte on stdin before it executes the shell
    /// (which then gets `/dev/null` as stdin): the engine sends it once
    /// the call's start is durable in the journal, and closes stdin
    /// without it when it will not be, so nothing runs. Setting up changes
    /// nothing outside the sandbox, so it overlaps with the journal's
    /// write.
    #[serde(default)]
    pub go_on_stdin: bool,
    /// With the network off: the engine's network holder, whose user and
    /// network namespaces the launcher joins instead of making its own
    /// (`launcher/shared_network.rs`); `None`, or a holder gone, and it
    /// makes them. A launcher of protocol 2 that predated the field made
    /// its own.
    #[serde(default)]
    pub shared_network: Option<SharedNetwork>,
    /// The shell's whole environment (the engine's filtered
    /// variables, the call's `TMPDIR` and the cache variables): the
    /// launcher's own is not passed on, so a launcher started before its
    /// call (with an empty environment) serves it as one started for it.
    /// `None` (a spec written by hand or by a test): the shell gets the
    /// launcher's environment. Each variable is a JSON string when it is
    /// UTF-8, else an array of its bytes ([`EnvText`]).
    #[serde(default)]
    pub env: Option<Vec<(EnvText, EnvText)>>,
}

/// One name or value of [`LaunchSpec::env`]: the environment of a Unix
/// process is bytes, most of them UTF-8. Written as a JSON string when it
/// is UTF-8, else as an array of its bytes, so that any environment
/// passes through exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvText {
    /// UTF-8 text.
    Text(String),
    /// Anything else, byte for byte.
    Bytes(Vec<u8>),
}

impl EnvText {
    /// `text` as it is written in a spec.
    #[cfg(unix)]
    pub fn from_os(text: &std::ffi::OsStr) -> Self {
        use std::os::unix::ffi::OsStrExt as _;
        match text.to_str() {
            Some(utf8) => EnvText::Text(utf8.to_owned()),
            None => EnvText::Bytes(text.as_bytes().to_vec()),
        }
    }

    /// The text again, as the process environment holds it.
    #[cfg(unix)]
    pub fn to_os(&self) -> std::ffi::OsString {
        use std::os::unix::ffi::OsStringExt as _;
        match self {
            EnvText::Text(text) => text.into(),
            EnvText::Bytes(bytes) => std::ffi::OsString::from_vec(bytes.clone()),
        }
    }
}

/// The first line the sandbox writes to stdout: what was applied, or why
/// nothing could be.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Header {
    /// The shell runs under this confinement.
    Sandbox(Applied),
    /// The shell does not run: no confinement could be applied, or the
    /// launcher failed.
    Error(String),
}

/// The confinement a call ran under (`metadata.sandbox` of the bash
/// result).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Applied {
    /// The profile's name.
    pub profile: String,
    /// The namespaces entered: some of `user`, `mount`, `pid`, `ipc`, `net`.
    pub namespaces: Vec<String>,
    /// `"abi N"` when Landlock is fully enforced, `"abi N, partially
    /// enforced"`, or `"none"`.
    pub landlock: String,
    /// What the profile asks for and the kernel did not give, each with its
    /// consequence. Empty when everything was applied.
    pub missing: Vec<String>,
}

/// Runs the launcher when the process was started as `codemode
/// __sandbox-exec PROTOCOL spec-on-stdin` (or `hold-network`): returns its exit code; `None` for any other
/// command line.
pub fn main_if_launcher() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != SUBCOMMAND {
        return None;
    }
    let protocol = args.next().and_then(|a| a.into_string().ok()).unwrap_or_default();
    if protocol != PROTOCOL {
        return Some(fail(&format!(
            "this sandbox launcher speaks protocol {PROTOCOL} and was given `{protocol}`: it is from another \
             codemode version; use the codemode-sandbox built with this codemode (install it beside codemode)"
        )));
    }
    let mode = args.next().and_then(|a| a.into_string().ok()).unwrap_or_default();
    #[cfg(target_os = "linux")]
    if mode == HOLD_NETWORK {
        return Some(shared_network::hold());
    }
    if mode != SPEC_ON_STDIN {
        return Some(fail(&format!(
            "{SUBCOMMAND} is internal to codemode's bash tool (bad spec: expected `{SPEC_ON_STDIN}` or \
             `{HOLD_NETWORK}` after the protocol, got `{mode}`)"
        )));
    }
    // While it waits for its spec (a spare launcher waits for the next
    // call), no process of the user but root reads its memory or ptraces
    // it: not dumpable, its `/proc` entries are root's. (Its stdin, a
    // socket from the engine, cannot be opened through `/proc/PID/fd/0`
    // at all.) Dumpable again once the spec is read: the user namespace's
    // maps are written through `/proc/self`.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
    let spec = spec_from_stdin();
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(true);
    Some(match spec {
        Ok(spec) => launch(&spec),
        Err(e) => fail(&format!("{SUBCOMMAND} is internal to codemode's bash tool (bad spec: {e})")),
    })
}

/// Reads the spec's frame ([`spec_frame`]) from stdin, byte for byte what
/// it holds and no further: the engine's go may follow, for the shell's
/// process to read. See [`read_spec_frame`].
fn spec_from_stdin() -> Result<LaunchSpec, String> {
    read_spec_frame(&mut RawStdin)
}

/// Reads one spec frame ([`spec_frame`]) from `input`: exactly its 8
/// length digits and that many bytes of JSON, nothing after them.
///
/// # Errors
/// When `input` ends first ("stdin ended before the whole spec"), the
/// length is not 8 hexadecimal digits or is above [`MAX_SPEC_BYTES`], or
/// the JSON is not a [`LaunchSpec`]; each message says which.
pub fn read_spec_frame(input: &mut impl std::io::Read) -> Result<LaunchSpec, String> {
    let read_exactly = |input: &mut dyn std::io::Read, buf: &mut [u8]| {
        input.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "stdin ended before the whole spec".to_owned(),
            _ => format!("cannot read the spec from stdin: {e}"),
        })
    };
    let mut length = [0u8; 8];
    read_exactly(input, &mut length)?;
    let length = std::str::from_utf8(&length)
        .ok()
        .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|digits| usize::from_str_radix(digits, 16).ok())
        .ok_or("the length before the spec is not 8 hexadecimal digits")?;
    if length > MAX_SPEC_BYTES {
        return Err(format!("a spec of {length} bytes is over the bound of {MAX_SPEC_BYTES}"));
    }
    let mut json = vec![0u8; length];
    read_exactly(input, &mut json)?;
    serde_json::from_slice(&json).map_err(|e| e.to_string())
}

/// The process's stdin read without a buffer (the standard library's
/// stdin reads ahead, and would take the engine's go with the spec): the
/// spec's frame, then the go byte (`shell::go_from_stdin`).
struct RawStdin;

impl std::io::Read for RawStdin {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::fd::AsFd as _;
        Ok(nix::unistd::read(std::io::stdin().as_fd(), buf)?)
    }
}

/// Writes `message` as an error header and returns the setup failure code.
fn fail(message: &str) -> ExitCode {
    write_header(&Header::Error(message.to_owned()));
    ExitCode::from(EXIT_SETUP_FAILED)
}

/// Writes the header line to stdout.
fn write_header(header: &Header) {
    let mut line = serde_json::to_vec(header).expect("the header serialises");
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&line);
    let _ = out.flush();
}

/// The launcher proper (process 1 of the module docs).
#[cfg(target_os = "linux")]
fn launch(spec: &LaunchSpec) -> ExitCode {
    let Some(profile) = SandboxProfile::parse(&spec.profile).filter(|p| *p != SandboxProfile::Off) else {
        return fail(&format!("unknown sandbox profile `{}`", spec.profile));
    };
    // glibc's own signals (32, 33), left ignored by the engine's
    // `posix_spawn`: at their default, as a shell started by a terminal
    // has them (and as the shell of `profile = "off"`).
    for signal in [32, 33] {
        default_action_raw(signal);
    }
    // Die with the engine's thread that started us; if the engine is
    // already gone, stop here.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if nix::unistd::getppid().as_raw() != spec.parent {
        return fail("the engine that started the sandbox is gone");
    }
    // A session of our own: no controlling terminal (the command cannot
    // open the person's `/dev/tty`), and a process group the engine ends
    // as one. The engine starts the launcher without a step between fork
    // and exec (so with `posix_spawn`), and the launcher makes the session
    // here; one started as a session leader already keeps its own.
    let me = nix::unistd::getpid();
    if nix::unistd::setsid().is_err() && nix::unistd::getsid(None).ok() != Some(me) {
        return fail("cannot start a session of its own (setsid failed and it leads none)");
    }
    // The call's SIGTERM is for the shell; the launcher stays to report how
    // the shell ended. Blocked, not ignored: init unblocks it for the shell.
    let mut term = SigSet::empty();
    term.add(Signal::SIGTERM);
    let _ = term.thread_block();
    // Caught (by a handler that does nothing), not left at its default: the
    // kernel drops a signal from outside a PID namespace to its init when
    // init has no handler, so without this a SIGTERM the call's group got
    // while init was still setting up (before the shell existed) was lost,
    // and the command ran to its end after its call timed out. init
    // inherits the handler and the mask; it passes such a SIGTERM on.
    catch_term();

    let mut applied = Applied { profile: profile.as_str().to_owned(), ..Applied::default() };
    enter_namespaces(spec, &mut applied);

    let (status_r, status_w) = match nix::unistd::pipe() {
        Ok(pipe) => pipe,
        Err(e) => return fail(&format!("cannot create a pipe: {e}")),
    };
    #[allow(unsafe_code)]
    // SAFETY: the launcher is single-threaded (it runs first thing in
    // `main`, before any runtime or thread is started), so the child may
    // run arbitrary code after fork.
    match unsafe { nix::unistd::fork() } {
        Err(e) => fail(&format!("cannot fork: {e}")),
        Ok(ForkResult::Child) => {
            drop(status_r);
            init(spec, profile, applied, status_w)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(status_w);
            // A SIGTERM for the group that came before init existed is
            // pending here only (pending signals are not inherited): init
            // gets it too, so that the shell does not start.
            if term_pending() {
                let _ = nix::sys::signal::kill(child, Signal::SIGTERM);
            }
            mirror(child, status_r)
        }
    }
}

/// Without Linux namespaces and Landlock there is no sandbox.
#[cfg(not(target_os = "linux"))]
fn launch(_: &LaunchSpec) -> ExitCode {
    fail("the bash sandbox needs Linux; set `[sandbox] profile = \"off\"` under the full-access posture")
}

/// Unshares the namespaces (with a user namespace, or without one when the
/// process is privileged) and maps the caller's uid and gid; records what
/// was entered and what is missing.
#[cfg(target_os = "linux")]
fn enter_namespaces(spec: &LaunchSpec, applied: &mut Applied) {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut base = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    // With the network off: the engine's network namespace when its
    // holder is still the process the engine started (its user namespace
    // joined on the way), else one of the call's own. When the join fails
    // half way, the launcher is in the holder's user namespace with the
    // same uid and gid, and makes the rest from there.
    let joined = !spec.network
        && spec
            .shared_network
            .as_ref()
            .is_some_and(|shared| shared_network::join(shared, spec.parent).is_ok());
    if !spec.network && !joined {
        base |= CloneFlags::CLONE_NEWNET;
    }
    let names = |user: bool| {
        let mut names: Vec<String> = Vec::new();
        if user {
            names.push("user".into());
        }
        names.extend(["mount", "pid", "ipc"].map(String::from));
        if !spec.network {
            names.push("net".into());
        }
        names
    };
    match unshare(CloneFlags::CLONE_NEWUSER | base) {
        Ok(()) => {
            applied.namespaces = names(true);
            if let Err(e) = map_ids(uid, gid) {
                applied.missing.push(format!("uid/gid map ({e}): files the command creates may be unowned"));
            }
        }
        Err(user_err) => match unshare(base) {
            Ok(()) => {
                applied.namespaces = names(false);
                applied.missing.push(format!("user namespace ({user_err}); the others were entered as root"));
            }
            Err(e) => applied.missing.push(format!(
                "namespaces (user namespace: {user_err}; without one: {e}): no PID namespace (processes \
                 that leave the session can outlive the call, the host's /proc is visible), no private \
                 mounts (protected paths are writable unless Landlock denies it, hidden folders are \
                 readable), {}",
                match (spec.network, joined) {
                    (true, _) => "network allowed anyway",
                    (false, true) => "the engine's network namespace",
                    (false, false) => "no network namespace",
                }
            )),
        },
    }
}

/// Maps `uid` and `gid` (the caller's before it made a user namespace) to
/// themselves in the user namespace just made, with `setgroups` denied.
#[cfg(target_os = "linux")]
fn map_ids(uid: nix::unistd::Uid, gid: nix::unistd::Gid) -> std::io::Result<()> {
    std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")))
}

/// init (process 2 of the module docs): never returns.
#[cfg(target_os = "linux")]
fn init(spec: &LaunchSpec, profile: SandboxProfile, mut applied: Applied, status_w: OwnedFd) -> ExitCode {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // The engine settled these paths without links on their way; one
    // reached through a link now was swapped since (by a command of
    // another session whose writable folder holds it): the mounts would
    // follow the link.
    if !unchanged(&spec.workspace) {
        return fail(&format!(
            "the workspace {} is reached through a link now: it was moved or replaced since the engine started",
            spec.workspace.display()
        ));
    }
    let checked;
    let spec = if spec.writable.iter().all(|p| unchanged(p)) {
        spec
    } else {
        let mut kept = spec.clone();
        kept.writable.retain(|p| {
            let same = unchanged(p);
            if !same {
                applied.missing.push(format!(
                    "writable folder {} (reached through a link now, or gone): writes there fail",
                    p.display()
                ));
            }
            same
        });
        checked = kept;
        &checked
    };
    let private_ptys = applied.namespaces.iter().any(|n| n == "mount")
        && super::mounts::mounts(spec, profile, &mut applied.missing);
    applied.landlock = landlock_rules::landlock(spec, profile, private_ptys, &mut applied.missing);
    // An empty session keyring of its own first (the filter below then
    // refuses keyctl to init too).
    if let Err(e) = shell::new_session_keyring() {
        applied.missing.push(format!(
            "a session keyring of its own ({e}): the command can read and add keys in codemode's session keyring"
        ));
    }
    if let Err(e) = super::ipc_filter::block_sockets(!spec.host_ipc, !spec.host_ipc || !spec.network) {
        applied.missing.push(format!(
            "the Unix socket filter ({e}): the command can connect to sockets with a path outside the sandbox"
        ));
    }
    if let Err(e) = super::ipc_filter::block_keyrings() {
        applied.missing.push(format!(
            "the keyring filter ({e}): the command can read and add keys in the user's keyrings, by their ids"
        ));
    }
    if !applied.namespaces.iter().any(|n| n == "pid") && applied.landlock == "none" {
        return fail(&format!(
            "no confinement can be applied to bash on this system: {}. Enable user namespaces or \
             Landlock, or run bash unconfined with `[sandbox] profile = \"off\"` in codemode.toml \
             (allowed only under the full-access posture)",
            applied.missing.join("; ")
        ));
    }
    write_header(&Header::Sandbox(applied));
    shell::no_root_capabilities();
    // A SIGTERM for the call's group that came before the shell exists is
    // pending here (blocked, caught): the shell is not started.
    if term_pending() {
        let _ = nix::unistd::write(&status_w, &encode(Ended::Signaled(Signal::SIGTERM as i32)));
        std::process::exit(0)
    }

    #[allow(unsafe_code)]
    // SAFETY: init is single-threaded (forked from the single-threaded
    // launcher), so the child may run arbitrary code after fork.
    match unsafe { nix::unistd::fork() } {
        Err(e) => fail(&format!("cannot fork the shell: {e}")),
        Ok(ForkResult::Child) => {
            drop(status_w);
            shell::exec_shell(spec)
        }
        Ok(ForkResult::Parent { child }) => {
            // One that came between the check above and the fork missed
            // the shell: passed on.
            if term_pending() {
                let _ = nix::sys::signal::kill(child, Signal::SIGTERM);
            }
            let status = reap_until(child);
            // Nothing of the command outlives its call: what the shell
            // left in the namespace is killed and reaped before the status
            // is reported.
            end_the_rest();
            let reported = nix::unistd::write(&status_w, &encode(status)).is_ok();
            if reported {
                // The launcher ends at once with the shell's status; its
                // exit kills init (`PR_SET_PDEATHSIG`, set before the
                // write, which fails when the launcher is already gone).
                // So the namespaces are torn down here, after the launcher
                // has answered, not on the call's way back.
                loop {
                    nix::unistd::pause();
                }
            }
            std::process::exit(0)
        }
    }
}

/// init, once the shell has ended: kills every other process of the PID
/// namespace and reaps them all, then hands its stdin, stdout and stderr
/// back (`/dev/null` in their place), so the engine sees the end of the
/// command's output as soon as the launcher has gone. Does nothing to
/// other processes when init is not PID 1 of a namespace of its own (no
/// PID namespace could be made): `kill(-1)` would then reach the host's.
#[cfg(target_os = "linux")]
fn end_the_rest() {
    if nix::unistd::getpid().as_raw() == 1 {
        let _ = nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
        // Until ECHILD: none left.
        while let Ok(_) | Err(Errno::EINTR) = wait_any() {}
    }
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
}

/// Whether `path` (absolute, canonical when the engine settled it) is
/// still reached without a link on its way.
#[cfg(target_os = "linux")]
fn unchanged(path: &Path) -> bool {
    std::fs::canonicalize(path).is_ok_and(|real| real == path)
}

/// How a process ended, from its raw wait status: real-time signals
/// (34-64) included, which nix's `WaitStatus` refuses (`EINVAL`).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy)]
enum Ended {
    Exited(i32),
    Signaled(i32),
}

/// `waitpid(-1, &status, 0)`: the pid of a child that changed state and
/// how it ended (`None`: stopped under ptrace, not ended).
///
/// # Errors
/// `ECHILD` when no child is left, `EINTR`.
#[cfg(target_os = "linux")]
fn wait_any() -> Result<(i32, Option<Ended>), Errno> {
    let mut status: libc::c_int = 0;
    #[allow(unsafe_code)]
    // SAFETY: waitpid writes one int into `status`, which outlives the call.
    let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
    if pid == -1 {
        return Err(Errno::last());
    }
    let ended = if libc::WIFSIGNALED(status) {
        Some(Ended::Signaled(libc::WTERMSIG(status)))
    } else if libc::WIFEXITED(status) {
        Some(Ended::Exited(libc::WEXITSTATUS(status)))
    } else {
        // Stopped under ptrace (init is the tracer of a child that asked
        // for it): not an end.
        None
    };
    Ok((pid, ended))
}

/// Reaps every child of init until `shell` ends; returns how it ended.
#[cfg(target_os = "linux")]
fn reap_until(shell: Pid) -> Ended {
    loop {
        match wait_any() {
            Ok((pid, Some(ended))) if pid == shell.as_raw() => return ended,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Ended::Exited(128 + (e as i32 & 0x7f)),
        }
    }
}

/// A shell's status as 8 bytes: kind (0 exited, 1 signalled) and value.
#[cfg(target_os = "linux")]
fn encode(ended: Ended) -> [u8; 8] {
    let (kind, value) = match ended {
        Ended::Signaled(signal) => (1u32, signal as u32),
        Ended::Exited(code) => (0, code as u32),
    };
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&kind.to_le_bytes());
    out[4..].copy_from_slice(&value.to_le_bytes());
    out
}

/// Waits for init's report of the shell's status, then ends the way the
/// shell did, without waiting for init to end (its exit, which tears the
/// namespaces down, follows the launcher's: see `init`). When init ends
/// without a report, ends with init's exit code.
#[cfg(target_os = "linux")]
fn mirror(init: Pid, status_r: OwnedFd) -> ExitCode {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(&status_r, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    if got < buf.len() {
        // init ended before the shell did, or failed before starting it.
        let init_status = loop {
            match waitpid(init, None) {
                Err(Errno::EINTR) => continue,
                other => break other,
            }
        };
        return match init_status {
            Ok(WaitStatus::Exited(_, code)) => ExitCode::from(code as u8),
            _ => raise(Signal::SIGKILL),
        };
    }
    let kind = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
    let value = u32::from_le_bytes(buf[4..].try_into().expect("4 bytes"));
    match (kind, Signal::try_from(value as i32)) {
        (1, Ok(signal)) => raise(signal),
        (1, Err(_)) => raise_real_time(value as i32),
        _ => ExitCode::from(value as u8),
    }
}

/// Ends the launcher with `signal` (default action, no core dump); falls
/// back to exit code 128 + signal for a signal whose default is to ignore.
#[cfg(target_os = "linux")]
fn raise(signal: Signal) -> ExitCode {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // Its default action again, so that raising it ends the launcher as it
    // ended the shell: SIGTERM is caught here (`catch_term`), SIGPIPE
    // ignored and SIGSEGV and SIGBUS caught by the Rust runtime (whose
    // handler returns on a signal that is not a stack overflow, and the
    // launcher would end with code 139 instead of by SIGSEGV).
    default_action(signal);
    let mut set = SigSet::empty();
    set.add(signal);
    let _ = nix::sys::signal::raise(signal);
    let _ = set.thread_unblock();
    ExitCode::from(128u8.wrapping_add(signal as i32 as u8))
}

/// Ends the launcher with `signal`, one nix has no name for (the real-time
/// signals 32-64), at its default action (to end the process); falls back
/// to exit code 128 + signal.
#[cfg(target_os = "linux")]
fn raise_real_time(signal: i32) -> ExitCode {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    default_action_raw(signal);
    #[allow(unsafe_code)]
    // SAFETY: kill sends a signal to this (single-threaded) process and
    // reads no memory; not raise(), which glibc refuses for 32 and 33.
    unsafe {
        libc::kill(libc::getpid(), signal);
    }
    ExitCode::from(128u8.wrapping_add(signal as u8))
}

/// `signal`'s default action again, by the raw `rt_sigaction` system call:
/// glibc's `sigaction` and `signal` refuse its own signals 32 and 33
/// (which its `posix_spawn` leaves ignored in the launcher, and a shell
/// would inherit ignored).
#[cfg(target_os = "linux")]
fn default_action_raw(signal: i32) {
    // The kernel's `struct sigaction` (handler, flags, restorer, mask on
    // x86_64 and aarch64): all zero is SIG_DFL with no flags, whatever the
    // order of its fields.
    let action = [0u64; 4];
    #[allow(unsafe_code)]
    // SAFETY: rt_sigaction reads the 32 bytes of `action`, which outlives
    // the call, and writes nothing (no old action asked for); the size of
    // a kernel sigset is 8 bytes.
    unsafe {
        libc::syscall(libc::SYS_rt_sigaction, signal, action.as_ptr(), std::ptr::null_mut::<u64>(), 8usize);
    }
}

/// Does nothing: SIGTERM is caught only so that the kernel queues it for
/// init instead of dropping it (see `launch`).
#[cfg(target_os = "linux")]
extern "C" fn ignore_signal(_: libc::c_int) {}

/// Catches SIGTERM with [`ignore_signal`] (it stays blocked).
#[cfg(target_os = "linux")]
fn catch_term() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, sigaction};
    let action = SigAction::new(SigHandler::Handler(ignore_signal), SaFlags::SA_RESTART, SigSet::empty());
    #[allow(unsafe_code)]
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    let _ = unsafe { sigaction(Signal::SIGTERM, &action) };
}

/// `signal`'s default action again.
#[cfg(target_os = "linux")]
fn default_action(signal: Signal) {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, sigaction};
    let action = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    #[allow(unsafe_code)]
    // SAFETY: the default action installs no code of ours.
    let _ = unsafe { sigaction(signal, &action) };
}

/// Whether a SIGTERM is pending (blocked and caught: see `launch`).
#[cfg(target_os = "linux")]
fn term_pending() -> bool {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    #[allow(unsafe_code)]
    // SAFETY: sigpending writes a whole sigset_t into `set`, which is read
    // only when it reports success; sigismember reads it.
    unsafe {
        libc::sigpending(set.as_mut_ptr()) == 0 && libc::sigismember(set.as_ptr(), libc::SIGTERM) == 1
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;

    use super::{EnvText, LaunchSpec};

    /// A path JSON cannot carry is an error naming it, not a panic (a
    /// `HOME` that is not UTF-8 puts one in the spec).
    #[test]
    fn a_spec_with_a_path_that_is_not_utf8_is_refused_naming_it() {
        let odd = std::path::PathBuf::from(OsStr::from_bytes(b"/tmp/caf\xe9-cache"));
        let spec = LaunchSpec {
            command: "true".into(),
            workspace: "/tmp".into(),
            profile: "workspace-write".into(),
            network: false,
            host_ipc: false,
            writable: vec![odd],
            protected: Vec::new(),
            hidden: Vec::new(),
            spill: None,
            tmpdir: "/tmp".into(),
            parent: 1,
            go_on_stdin: false,
            shared_network: None,
            env: None,
        };
        let error = super::spec_frame(&spec).unwrap_err();
        assert!(error.contains("/tmp/caf") && error.contains("not UTF-8"), "{error}");
    }

    /// A spec's environment passes through JSON exactly: UTF-8 as a
    /// string, anything else as its bytes.
    #[test]
    fn env_text_round_trips_through_json() {
        for bytes in [&b"plain"[..], b"caf\xc3\xa9", b"f\xffo", b""] {
            let text = EnvText::from_os(OsStr::from_bytes(bytes));
            let json = serde_json::to_string(&text).unwrap();
            let utf8 = std::str::from_utf8(bytes).is_ok();
            assert_eq!(json.starts_with('"'), utf8, "{json}");
            let back: EnvText = serde_json::from_str(&json).unwrap();
            assert_eq!(back.to_os().as_bytes(), bytes);
        }
    }
}
