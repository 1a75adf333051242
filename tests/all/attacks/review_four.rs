//! A fourth reviewer's breaks of the bash sandbox, each with its defence:
//! a Unix datagram pair pointed at a socket outside (the filter refused
//! `socket(AF_UNIX)` only), the filters' calls under their x32 numbers,
//! the host's POSIX shared memory in `/dev/shm`, a second procfs (a
//! chroot's) showing every host process, and the host's devices (as root:
//! raw disks past the covers of the hidden folders, consoles' text).

use crate::sandbox::{default_engine, stdout};

/// A datagram pair (`SOCK_DGRAM`, or `SOCK_RAW`, which the kernel makes
/// one for AF_UNIX: a fifth reviewer's bypass), disconnected
/// (`connect(AF_UNSPEC)`), bound in TMPDIR and sent to a daemon's socket
/// outside the sandbox: the pair is refused (EACCES), so nothing arrives;
/// a stream pair still works.
#[test]
fn a_datagram_pair_cannot_reach_a_socket_outside() {
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("daemon.sock");
    let daemon = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    daemon.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
    let command = format!(
        r#"python3 -c '
import ctypes, os, socket
for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, kind)
    except OSError as e:
        print("refused", e.errno)
    else:
        ctypes.CDLL(None).connect(a.fileno(), (ctypes.c_ushort * 1)(0), 2)
        a.bind(os.environ["TMPDIR"] + "/back" + str(kind) + ".sock")
        a.sendto(b"from inside", "{}")
        print("sent")
s, t = socket.socketpair()
s.send(b"x"); print("stream", t.recv(1).decode())'"#,
        path.display()
    );
    let ws = crate::common::workspace();
    let said = stdout(&default_engine(&ws), &command);
    let mut buf = [0u8; 64];
    let arrived = daemon.recv(&mut buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned());
    assert_eq!(arrived, None, "nothing reaches the daemon: {said}");
    assert_eq!(said, format!("refused {0}\nrefused {0}\nstream x\n", libc::EACCES));
}

/// `socket(AF_UNIX)` under its x32 number is refused by the filter
/// (EACCES), not passed to the kernel (which says ENOSYS where x32 is off,
/// and opens the socket where it is on).
#[cfg(target_arch = "x86_64")]
#[test]
fn the_filters_hold_for_x32_numbers() {
    let command = "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
                   r = l.syscall(0x40000000 | 41, 1, 1, 0); print(r, ctypes.get_errno())'";
    let ws = crate::common::workspace();
    assert_eq!(stdout(&default_engine(&ws), command), format!("-1 {}\n", libc::EACCES));
}

/// A shared memory object of this user's in `/dev/shm` is not readable.
#[test]
fn the_host_s_shared_memory_is_not_readable() {
    let name = format!("codemode-test-{}", std::process::id());
    let object = std::path::Path::new("/dev/shm").join(&name);
    std::fs::write(&object, "shared secret").unwrap();
    let ws = crate::common::workspace();
    let said = stdout(&default_engine(&ws), &format!("cat /dev/shm/{name} 2>/dev/null || echo unreadable"));
    std::fs::remove_file(&object).unwrap();
    assert_eq!(said, "unreadable\n");
}

/// A procfs mounted elsewhere (here in a mount namespace of the test's
/// own) shows the call's processes only: this test process is not there.
#[test]
fn a_second_procfs_shows_no_host_process() {
    let other = tempfile::tempdir().unwrap();
    let point = other.path().canonicalize().unwrap();
    let at = point.display();
    let me = std::process::id();
    let command =
        format!("test -e {at}/{me} && echo seen || echo unseen; test -e {at}/1/cmdline && echo own");
    let said = super::launch_after_mounts(r#"mount -t proc proc "$1""#, "true", &point, &command);
    assert_eq!(said, "unseen\nown\n");
}

/// The command's /dev holds the harmless devices, its own terminals and
/// the links into /proc/self/fd, nothing of the host's (a raw disk, a
/// console, `/dev/kmsg`); what it holds works.
#[test]
fn dev_holds_only_the_harmless_devices() {
    let ws = crate::common::workspace();
    let said = stdout(
        &default_engine(&ws),
        "ls -A /dev | tr '\\n' ' '; echo; echo x > /dev/null && cat <(echo substituted) && head -c 3 /dev/urandom | wc -c",
    );
    assert_eq!(
        said, "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \nsubstituted\n3\n",
        "{said}"
    );
}

/// Left by the fourth review, closed since: the launcher's spec (the
/// command, the workspace's and the state folder's paths, the run id) was
/// its command-line argument, so `/proc/1/cmdline` showed it to the
/// command (init is a fork of the launcher), and the launcher's to every
/// process of the user. The spec now comes on the launcher's stdin: init's
/// command line, and every launcher's, is the subcommand and protocol only.
#[test]
fn the_launcher_s_spec_is_on_no_command_line() {
    let ws = crate::common::workspace();
    let marker = format!("spec-marker-{}", std::process::id());
    let command = format!(": {marker}; tr '\\0' ' ' < /proc/1/cmdline");
    let said = stdout(&default_engine(&ws), &command);
    let ws_path = ws.path().canonicalize().unwrap();
    let expected = format!(" __sandbox-exec {} spec-on-stdin ", codemode::sandbox::launcher::PROTOCOL);
    assert!(said.ends_with(&expected), "init's command line: {said}");
    assert!(!said.contains(&marker) && !said.contains(&*ws_path.to_string_lossy()), "{said}");
}

/// The call's own terminal, when it makes one (`script` here), can be
/// written and read through `/dev/tty` (a sixth review: Landlock let it be
/// read only, so programs that prompt on `/dev/tty` failed); the command
/// has no terminal of the host's to reach (its own session).
#[test]
fn dev_tty_is_the_command_s_own_terminal_only() {
    let ws = crate::common::workspace();
    let said = stdout(
        &default_engine(&ws),
        "echo x > /dev/tty 2>/dev/null || echo no-terminal; script -qec 'echo on-its-own > /dev/tty' /dev/null | tr -d '\\r'",
    );
    assert_eq!(said, "no-terminal\non-its-own\n");
}

/// The call's own `/dev/shm` is writable (a fifth review: Python's
/// `multiprocessing` pools and shared memory failed with EACCES); what is
/// made there is the call's own, gone with it: the host's `/dev/shm` does
/// not get it.
#[test]
fn shared_memory_of_the_call_s_own_works_and_stays_in_the_call() {
    let ws = crate::common::workspace();
    let name = format!("codemode-own-{}", std::process::id());
    let command = format!(
        "python3 -c 'import multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))' && \
         python3 -c 'from multiprocessing import shared_memory as s; x = s.SharedMemory(\"{name}\", create=True, size=1 << 20); \
         x.buf[0] = 7; print(x.buf[0]); x.close()' && ls /dev/shm"
    );
    let said = stdout(&default_engine(&ws), &command);
    assert_eq!(said, format!("[1, 2]\n7\n{name}\n"));
    assert!(!std::path::Path::new("/dev/shm").join(&name).exists(), "the object reached the host's /dev/shm");
}
