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
