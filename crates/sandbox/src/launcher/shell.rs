//! The shell's process (process 3 of the launcher's module docs), from
//! its fork by init to the `execve` of the shell: its signals back to
//! their defaults, the workspace as its folder, no inherited descriptor
//! but stdin, stdout and stderr, and, in a journaled run, the engine's go.

use std::ffi::CString;
use std::process::ExitCode;

use nix::errno::Errno;
use nix::sys::signal::SigSet;

use super::{EXIT_SETUP_FAILED, LaunchSpec, default_action};

/// The shell (process 3 of the module docs): never returns.
#[cfg(target_os = "linux")]
pub(super) fn exec_shell(spec: &LaunchSpec) -> ExitCode {
    // SIGTERM back to its default before it is unblocked, so one pending or
    // arriving now ends the shell before it runs anything; SIGPIPE too,
    // which the Rust runtime ignores and an `execve` would pass on ignored
    // (`yes | head -1` would end `yes` with EPIPE instead of SIGPIPE).
    default_action(nix::sys::signal::Signal::SIGTERM);
    default_action(nix::sys::signal::Signal::SIGPIPE);
    let _ = SigSet::all().thread_unblock();
    if let Err(e) = std::env::set_current_dir(&spec.workspace) {
        eprintln!("codemode sandbox: cannot enter the workspace {}: {e}", spec.workspace.display());
        std::process::exit(126);
    }
    close_inherited_fds();
    if let Some(env) = &spec.env {
        set_environment(env);
    }
    // Everything up to here changes nothing outside the sandbox; the
    // command itself waits for the engine's go.
    if spec.go_on_stdin && !go_from_stdin() {
        // The engine will not have the command run (its start could not be
        // made durable, or the call ended): nothing starts.
        std::process::exit(i32::from(EXIT_SETUP_FAILED))
    }
    // stdin held the spec (and the go): the command reads nothing.
    if let Err(e) = stdin_from_dev_null() {
        eprintln!("codemode sandbox: cannot put /dev/null on the command's stdin: {e}");
        std::process::exit(i32::from(EXIT_SETUP_FAILED))
    }
    let arg = |s: &str| CString::new(s).unwrap_or_default();
    let argv = |shell: &str| [arg(shell), arg("-c"), arg(&spec.command)];
    let bash_err = nix::unistd::execvp(&arg("bash"), &argv("bash")).unwrap_err();
    let sh_err = nix::unistd::execv(&arg("/bin/sh"), &argv("/bin/sh")).unwrap_err();
    eprintln!("codemode sandbox: cannot start bash ({bash_err}) or /bin/sh ({sh_err})");
    std::process::exit(127)
}

/// Makes `env` this process's whole environment, for the
/// shell it executes next (`execvp` passes it on and searches its `PATH`).
/// A name that is empty or holds `=` or NUL, or a value with NUL, cannot
/// be in an environment and is left out (the engine's filter never sends
/// one).
#[cfg(target_os = "linux")]
fn set_environment(env: &[(super::EnvText, super::EnvText)]) {
    let settable = |name: &std::ffi::OsStr, value: &std::ffi::OsStr| {
        use std::os::unix::ffi::OsStrExt as _;
        !name.is_empty()
            && !name.as_bytes().iter().any(|&b| b == b'=' || b == 0)
            && !value.as_bytes().contains(&0)
    };
    let old: Vec<std::ffi::OsString> = std::env::vars_os().map(|(name, _)| name).collect();
    for name in old {
        #[allow(unsafe_code)]
        // SAFETY: the shell's process is single-threaded (forked from
        // init, itself forked from the single-threaded launcher): no other
        // thread reads the environment meanwhile.
        unsafe {
            std::env::remove_var(name)
        };
    }
    for (name, value) in env {
        let (name, value) = (name.to_os(), value.to_os());
        if settable(&name, &value) {
            #[allow(unsafe_code)]
            // SAFETY: as above, single-threaded.
            unsafe {
                std::env::set_var(name, value)
            };
        }
    }
}

/// Marks every descriptor above stderr close-on-exec, so descriptors that
/// whatever started codemode passed on (without close-on-exec) do not
/// reach the command: it gets stdin, stdout and stderr only. One
/// `close_range(2)` (`CLOSE_RANGE_CLOEXEC`, Linux 5.11); on an older
/// kernel, each descriptor listed in `/proc/self/fd`.
#[cfg(target_os = "linux")]
fn close_inherited_fds() {
    #[allow(unsafe_code)]
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on
    // descriptors; it reads and writes no memory of this process.
    let done = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if done == 0 {
        return;
    }
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::BorrowedFd;
    let Ok(mut dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<i32> = dir
        .by_ref()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        #[allow(unsafe_code)]
        // SAFETY: the fd was listed as open in /proc/self/fd just now, and
        // this process is single-threaded (forked from init), so nothing
        // closes it while it is borrowed here; the listing's own fd stays
        // open too, until `dir` is dropped below.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
    drop(dir);
}

/// Waits for the engine's go (one byte on stdin). `false` when stdin ends
/// without it.
#[cfg(target_os = "linux")]
fn go_from_stdin() -> bool {
    use std::io::Read as _;
    super::RawStdin.read_exact(&mut [0u8; 1]).is_ok()
}

/// Puts `/dev/null` on stdin, in place of the engine's socket (or pipe).
#[cfg(target_os = "linux")]
fn stdin_from_dev_null() -> std::io::Result<()> {
    let null = std::fs::File::open("/dev/null")?;
    nix::unistd::dup2_stdin(null).map_err(std::io::Error::from)
}

/// Gives the calling process (init, before it forks the shell) a new,
/// empty session keyring: `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`.
/// Without it the command inherits codemode's session keyring (a login
/// session's, with `pam_keyinit`: Kerberos tickets, other keys of the
/// person's), which a user namespace does not separate, and keys it added
/// there would stay for later calls and the host. A kernel without
/// keyrings (`ENOSYS`) has nothing to share.
///
/// # Errors
/// The `errno` of `keyctl` otherwise (e.g. the user's key quota is full).
#[cfg(target_os = "linux")]
pub(super) fn new_session_keyring() -> Result<(), Errno> {
    /// `KEYCTL_JOIN_SESSION_KEYRING` of <linux/keyctl.h>.
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    #[allow(unsafe_code)]
    // SAFETY: keyctl(KEYCTL_JOIN_SESSION_KEYRING) with a null name reads
    // no memory of the process; it only replaces its session keyring.
    let done = unsafe {
        libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>())
    };
    match done {
        -1 if Errno::last() == Errno::ENOSYS => Ok(()),
        -1 => Err(Errno::last()),
        _ => Ok(()),
    }
}

/// Sets `SECBIT_NOROOT` (locked), so that a shell running as uid 0 in the
/// user namespace gets no capabilities at `execve` and cannot undo the
/// mounts. Harmless when it fails: then the process has no `CAP_SETPCAP`,
/// so no namespace of its own to be root in.
#[cfg(target_os = "linux")]
pub(super) fn no_root_capabilities() {
    #[allow(unsafe_code)]
    // SAFETY: prctl(PR_SET_SECUREBITS) takes integers only and touches no
    // memory of the process.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECUREBITS,
            (libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED) as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}
