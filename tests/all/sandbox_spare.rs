//! The engine's spare sandbox launcher (crates/codemode's
//! `sandbox/spare_launcher.rs`): started once a sandboxed call has ended,
//! it waits for the next call's spec with an empty environment, serves
//! that call as a launcher started for it would (the call's own `TMPDIR`
//! and environment, from the spec), is replaced when it died, and is
//! killed and reaped with its engine. Real processes, found in `/proc`
//! by what only this test's engine has: the engine's workspace as their
//! folder.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::workspace;
use crate::sandbox::{default_engine, stdout};

/// The live (not zombie) children of this process that are sandbox
/// launchers started in `ws` (the engine's workspace, canonical).
fn launchers_in(ws: &Path) -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") || fields.get(1) != Some(&me.as_str()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        if String::from_utf8_lossy(&cmdline).contains("__sandbox-exec") && cwd.as_deref() == Some(ws) {
            found.push(pid);
        }
    }
    found
}

/// Waits (at most 10 s, a bound) until exactly one launcher of `ws` is
/// there other than `not`; returns it.
fn the_spare(ws: &Path, not: Option<i32>) -> i32 {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<i32> = launchers_in(ws).into_iter().filter(|p| Some(*p) != not).collect();
        if let [spare] = found[..] {
            return spare;
        }
        assert!(Instant::now() < give_up, "no spare launcher in {} (found {found:?})", ws.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An engine over a fresh workspace (the default sandbox) that has made
/// one call, and the spare it then started: (workspace, its canonical
/// path, engine, spare's pid).
fn engine_with_a_spare() -> (tempfile::TempDir, std::path::PathBuf, codemode::Engine, i32) {
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let engine = default_engine(&ws);
    stdout(&engine, "true");
    let spare = the_spare(&ws_path, None);
    (ws, ws_path, engine, spare)
}

/// A call (timeout 10 s) runs and says `said` without taking `spare`,
/// which is then ended (at most 10 s, a bound).
fn a_call_passes_the_spare_by(engine: &codemode::Engine, ws: &Path, spare: i32, said: &str) {
    let out = engine.call_blocking("bash", &json!({"command": format!("echo {said}"), "timeout": 10}));
    assert!(out.is_ok(), "{:?}", out.error);
    assert_eq!(out.envelope.unwrap()["content"]["stdout"], format!("{said}\n"));
    let give_up = Instant::now() + Duration::from_secs(10);
    while launchers_in(ws).contains(&spare) {
        assert!(Instant::now() < give_up, "the spare {spare} was left");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A launcher taken by a call is the call's: its own `TMPDIR` and the
/// engine's environment come in the spec, and the waiting process holds
/// none of it. A spare killed from outside is replaced; the engine's drop
/// ends the last one.
#[test]
fn the_next_call_takes_the_spare_launcher_with_its_own_tmpdir_and_environment() {
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let engine = default_engine(&ws);
    let say = r#"printf '%s|%s|%s' "$TMPDIR" "${CODEMODE-unset}" "${PATH:+path}""#;
    let first = stdout(&engine, say);
    let spare = the_spare(&ws_path, None);
    let environ = std::fs::read(format!("/proc/{spare}/environ")).unwrap();
    assert!(
        environ.is_empty(),
        "a waiting launcher holds an environment: {}",
        String::from_utf8_lossy(&environ)
    );

    let second = stdout(&engine, say);
    let (first_tmp, second_tmp) = (first.split('|').next().unwrap(), second.split('|').next().unwrap());
    assert!(second_tmp.contains("codemode-bash-") && first_tmp != second_tmp, "{first} then {second}");
    assert!(second.ends_with("|1|path"), "the call's environment came in its spec: {second}");
    // The spare served that call (it ended with it), and the next is there.
    let next = the_spare(&ws_path, Some(spare));
    assert!(!launchers_in(&ws_path).contains(&spare), "the spare {spare} is still waiting");

    // One that died is not used: the call starts its own.
    crate::common::send_signal("KILL", next as u32);
    assert_eq!(stdout(&engine, "echo after-a-dead-spare"), "after-a-dead-spare\n");

    let last = the_spare(&ws_path, Some(next));
    drop(engine);
    let left = launchers_in(&ws_path);
    assert!(left.is_empty(), "launchers outlived their engine: {left:?}");
    // Reaped too, not left a zombie of this process.
    let stat = std::fs::read_to_string(format!("/proc/{last}/stat")).unwrap_or_default();
    let ours = stat.rsplit_once(')').is_some_and(|(_, rest)| {
        rest.split_whitespace().nth(1) == Some(std::process::id().to_string().as_str())
    });
    assert!(!ours, "the last spare {last} was not reaped: {stat}");
}

/// The launcher gives the command the spec's environment, byte for byte
/// (a value that is not UTF-8 included), and nothing of its own.
#[test]
fn a_spec_s_environment_is_the_command_s_whole_environment() {
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let spec: Value = json!({
        "command": r#"printf '%s|%s|' "${LAUNCHER_ONLY-unset}" "$ONLY_IN_SPEC"; printf '%s' "$BYTES" | od -An -tx1"#,
        "workspace": ws_path,
        "profile": "workspace-write",
        "network": false,
        "protected": [],
        "hidden": [],
        "spill": null,
        "tmpdir": tmp.path(),
        "parent": std::process::id(),
        "env": [["PATH", "/usr/bin:/bin"], ["ONLY_IN_SPEC", "yes"], ["BYTES", [0x66, 0xff, 0x6f]]],
    });
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_codemode"));
    launcher.env("LAUNCHER_ONLY", "leaked").args([
        "__sandbox-exec",
        codemode::sandbox::launcher::PROTOCOL,
        "spec-on-stdin",
    ]);
    let out = crate::common::run_launcher(launcher, &spec);
    let text = String::from_utf8_lossy(&out.stdout);
    let (header, said) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(header.contains("\"sandbox\""), "{header} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.split_whitespace().collect::<Vec<_>>(), ["unset|yes|", "66", "ff", "6f"], "{said}");
}

/// A spare stopped from outside (SIGSTOP) is not given the call, which
/// would then wait out its timeout: the call starts its own, and the
/// stopped one is killed.
#[test]
fn a_stopped_spare_is_not_used() {
    let (_ws, ws_path, engine, spare) = engine_with_a_spare();
    crate::common::send_signal("STOP", spare as u32);
    a_call_passes_the_spare_by(&engine, &ws_path, spare, "after-a-stopped-spare");
}

/// A host that lowers the engine's resource limits (or moves it to
/// another cgroup, changes its umask, ...) while a spare waits: the next
/// command runs under the new limits, as one started for it would; the
/// spare, started under the old ones, is not used. `codemode run`, its
/// limit lowered from outside with `prlimit(1)` while its second call
/// waits.
#[test]
fn a_spare_started_before_the_engine_s_limits_changed_is_not_used() {
    let ws = workspace();
    let program = ws.path().join("limits.js");
    std::fs::write(
        &program,
        "await tools.bash({command: 'true'});\n\
         await tools.bash({command: 'touch waiting; while [ ! -e go ]; do sleep 0.02; done'});\n\
         return (await tools.bash({command: 'ulimit -n'})).content.stdout.trim();\n",
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .current_dir(ws.path())
        .args(["run", "--posture", "full-access", "--deadline", "60"])
        .arg(&program)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_until_exists(&ws.path().join("waiting"), "the second call");
    let lowered = Command::new("prlimit")
        .args(["--pid", &child.id().to_string(), "--nofile=321:321"])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(lowered.success());
    std::fs::write(ws.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.trim(), "\"321\"", "{said} {}", String::from_utf8_lossy(&out.stderr));
}

/// While a launcher waits for its spec (a spare, for as long as the
/// engine's next call takes to come), another process of the same user
/// cannot open its stdin through `/proc/PID/fd/0` and write a spec there
/// first. The launcher, the pipe on its stdin and the other process are
/// all `nobody`'s (`setpriv`, as root; skipped otherwise): root can open
/// any process's descriptors, and a pipe only its owner.
#[test]
fn another_process_of_the_user_cannot_write_to_a_waiting_launcher() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root, to run the launcher and the other process as `nobody`");
        return;
    }
    let as_nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"];
    // The pipe is made by nobody's shell; its end (after 3 s) is the
    // launcher's end of stdin.
    let script = format!(
        "sleep 3 | exec \"$0\" __sandbox-exec {} spec-on-stdin",
        codemode::sandbox::launcher::PROTOCOL
    );
    let launcher = Command::new("setpriv")
        .args(as_nobody)
        .args(["sh", "-c", &script, env!("CARGO_BIN_EXE_codemode")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux) runs");
    // The launcher is a child of that shell, waiting on its stdin.
    let shell = launcher.id().to_string();
    let give_up = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (fields.get(1) == Some(&shell.as_str())
                && fields.first() == Some(&"S")
                && String::from_utf8_lossy(&cmdline).contains("__sandbox-exec"))
            .then(|| entry.file_name().to_string_lossy().into_owned())
        });
        if let Some(pid) = found {
            break pid;
        }
        assert!(Instant::now() < give_up, "the launcher did not start waiting");
        std::thread::sleep(Duration::from_millis(10));
    };
    let writer = Command::new("setpriv")
        .args(as_nobody)
        .args(["sh", "-c", "printf 'ffffffff' > \"/proc/$1/fd/0\"", "sh", &pid])
        .output()
        .unwrap();
    let out = launcher.wait_with_output().unwrap();
    let header = String::from_utf8_lossy(&out.stdout);
    assert!(!writer.status.success(), "another process wrote to the launcher's stdin: {header}");
    assert!(
        String::from_utf8_lossy(&writer.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&writer.stderr)
    );
    // It saw only its own stdin: it ended before any spec.
    assert!(header.contains("stdin ended before the whole spec"), "{header}");
}

/// A waiting launcher's stdin is a socket, which no process can open
/// through `/proc/PID/fd/0` (`ENXIO`): not even root, nor a process of the
/// user that tries in the instants after the launcher's start, before it
/// makes itself not dumpable (a second review of issue 36 did, and wrote
/// its own spec into an engine's spare in 3 of 3 tries). The spare serves
/// the next call as before.
#[test]
fn no_process_opens_a_waiting_launcher_s_stdin() {
    let (_ws, ws_path, engine, spare) = engine_with_a_spare();
    let opened = std::fs::OpenOptions::new().write(true).open(format!("/proc/{spare}/fd/0"));
    match opened {
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {}
        // Not root: the launcher, not dumpable, refuses first.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !nix::unistd::geteuid().is_root() => {}
        other => panic!("the spare's stdin was opened from outside: {other:?}"),
    }
    assert_eq!(stdout(&engine, "echo still-served"), "still-served\n");
    assert!(!launchers_in(&ws_path).contains(&spare), "the spare did not serve the call");
}

/// A spare some process traces (one that attached in the instants after
/// its start, before it made itself not dumpable, and could then make its
/// system calls read another spec: a third review of issue 36 did, as a
/// process of the user) is not given the call: the call starts its own.
/// The test seizes the spare itself (`PTRACE_SEIZE`, as its parent),
/// tracing its forks: a spare given the call would stop at its fork of
/// init, and the call would wait out its timeout.
#[test]
fn a_traced_spare_is_not_used() {
    let (_ws, ws_path, engine, spare) = engine_with_a_spare();
    #[allow(unsafe_code)]
    // SAFETY: PTRACE_SEIZE takes a pid and two words, the second its
    // options; it reads and writes no memory of this process.
    let seized =
        unsafe { libc::ptrace(libc::PTRACE_SEIZE, spare, 0usize, libc::PTRACE_O_TRACEFORK as usize) };
    assert_eq!(seized, 0, "PTRACE_SEIZE of the spare: {}", std::io::Error::last_os_error());
    let status = std::fs::read_to_string(format!("/proc/{spare}/status")).unwrap();
    assert!(!status.contains("TracerPid:\t0\n"), "{status}");
    a_call_passes_the_spare_by(&engine, &ws_path, spare, "after-a-traced-spare");
}
