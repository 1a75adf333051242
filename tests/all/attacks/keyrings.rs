//! Two reviewers' breaks: a sandboxed command inherited codemode's session
//! keyring, and, once it had one of its own, could still link the user's
//! keyrings by their ids from `/proc/keys` (a user namespace does not
//! separate keyrings, and the uid is mapped to itself). Where codemode runs
//! in a login session with a keyring (`pam_keyinit`, the default on Fedora
//! and RHEL; Kerberos `KEYRING:` caches live there) a command could read
//! the person's keys and leave keys of its own for later calls and the
//! host. init now gives the command an empty session keyring, and a
//! seccomp filter refuses `keyctl`, `add_key` and `request_key`.

use std::io::Write as _;

/// Joins a new session keyring named `codemode-test-session`, adds the key
/// `host_secret` to it, then executes the rest of its arguments (x86_64
/// system call numbers: keyctl 250, add_key 248; KEY_SPEC_SESSION_KEYRING
/// is -3).
const IN_A_SESSION_KEYRING: &str = r#"import ctypes, os, sys
l = ctypes.CDLL(None, use_errno=True)
assert l.syscall(250, 1, b"codemode-test-session") > 0, os.strerror(ctypes.get_errno())
assert l.syscall(248, b"user", b"host_secret", b"TOPSECRET", 9, ctypes.c_int(-3)) > 0
os.execv(sys.argv[1], sys.argv[1:])
"#;

/// A shell command printing `True` when request_key(2) (249) finds the
/// user key `name` in the command's keyrings.
fn finds(name: &str) -> String {
    format!(
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.syscall(249, b\"user\", \
         b\"{name}\", None, 0) > 0)'"
    )
}

/// Finds the keyring named `codemode-test-session` in `/proc/keys`, links
/// it into the command's session keyring (keyctl 250, KEYCTL_LINK 8) and
/// reads the key `host_secret` through it (request_key 249, KEYCTL_READ
/// 11): prints what it read, or `False`.
const STEAL: &str = r#"python3 -c '
import ctypes
l = ctypes.CDLL(None, use_errno=True)
ring = [int(line.split()[0], 16) for line in open("/proc/keys") if "codemode-test-session" in line]
linked = bool(ring) and l.syscall(250, 8, ring[0], ctypes.c_int(-3)) == 0
key = l.syscall(249, b"user", b"host_secret", None, 0)
buf = ctypes.create_string_buffer(64)
n = l.syscall(250, 11, key, buf, 64) if key > 0 else -1
print(buf.raw[:n].decode() if n > 0 else False)'"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn a_command_does_not_get_codemode_s_session_keyring() {
    let ws = crate::common::workspace();
    let script = ws.path().join(".wrapper.py");
    std::fs::write(&script, IN_A_SESSION_KEYRING).unwrap();
    let add = "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.syscall(248, b\"user\", \
               b\"call_key\", b\"x\", 1, ctypes.c_int(-3)) > 0)'";
    let program = format!(
        "const out = async (command) => (await tools.bash({{command}})).content.stdout.trim(); \
         return [await out({}), await out({}), await out({}), await out({})];",
        serde_json::json!(finds("host_secret")),
        serde_json::json!(STEAL),
        serde_json::json!(add),
        serde_json::json!(finds("call_key")),
    );
    let cli = crate::cli::command(
        &["run", "-", "--json", "--posture", "full-access", "--approve", "allow"],
        ws.path(),
    );
    let mut wrapped = std::process::Command::new("python3");
    wrapped.arg(&script).arg(cli.get_program()).args(cli.get_args()).current_dir(ws.path());
    for (key, value) in cli.get_envs() {
        if let Some(value) = value {
            wrapped.env(key, value);
        }
    }
    let mut child = wrapped
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let receipt: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    assert_eq!(
        receipt["value"],
        serde_json::json!(["False", "False", "False", "False"]),
        "the host's key is not found, nor read through its keyring linked by id; no key can be added: {stderr}"
    );
}
