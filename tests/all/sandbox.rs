//! The bash sandbox with real processes and the real kernel: no controlling
//! terminal (bash and approver children), every descendant ends with the
//! call, writes confined by profile, protected paths read-only, hidden
//! folders unreadable, no network by default, the engine's environment
//! invisible, no capabilities, what was applied in the metadata, and
//! SIGTERM before SIGKILL.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::sandbox::{SandboxProfile, SandboxSettings};
use codemode::{Engine, Policy, Program, receipt::RunStatus, run::CallOutcome};
use serde_json::{Value, json};

use crate::common::{builder, workspace};

/// An engine over `ws` (full access) with the sandbox `settings`.
fn engine(ws: &tempfile::TempDir, profile: SandboxProfile, network: bool) -> Engine {
    let config = ConfigFile {
        sandbox: SandboxConfig {
            settings: SandboxSettings { profile, network, host_ipc: false },
            ..SandboxConfig::default()
        },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    builder(ws).config(config).build().expect("engine builds")
}

/// The default sandbox (`workspace-write`, no network).
pub(crate) fn default_engine(ws: &tempfile::TempDir) -> Engine {
    engine(ws, SandboxProfile::WorkspaceWrite, false)
}

/// Runs `command`; returns `{exit_code, stdout, stderr}` and the metadata.
fn sh(engine: &Engine, command: &str) -> (Value, Value) {
    let out: CallOutcome = engine.call_blocking("bash", &json!({"command": command, "timeout": 60}));
    assert!(out.is_ok(), "{command}: {:?}", out.error);
    let envelope = out.envelope.unwrap();
    (envelope["content"].clone(), envelope["metadata"].clone())
}

/// The stdout of `command`.
pub(crate) fn stdout(engine: &Engine, command: &str) -> String {
    sh(engine, command).0["stdout"].as_str().unwrap().to_owned()
}

/// A `sleep` argument no other process has (see tool_bash.rs).
pub(crate) fn marker() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("2000.{}{:03}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// Live host processes whose command line contains `marker`.
fn running_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if String::from_utf8_lossy(&cmdline).contains(marker) && !zombie {
            found.push(pid);
        }
    }
    found
}

/// Polls until no live process has `marker` in its command line; panics
/// after 5 s.
pub(crate) fn assert_gone(marker: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = running_with(marker);
        if alive.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "still running: {alive:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_metadata_says_what_confinement_was_applied() {
    let ws = workspace();
    let (content, meta) = sh(&default_engine(&ws), "true");
    assert_eq!(content["exit_code"], json!(0));
    let sandbox = &meta["sandbox"];
    assert_eq!(sandbox["profile"], json!("workspace-write"), "{meta}");
    assert_eq!(sandbox["namespaces"], json!(["user", "mount", "pid", "ipc", "net"]), "{meta}");
    assert!(sandbox["landlock"].as_str().unwrap().starts_with("abi "), "{meta}");
    assert_eq!(sandbox["missing"], json!([]), "{meta}");

    let (_, meta) = sh(&engine(&ws, SandboxProfile::Off, false), "true");
    assert_eq!(meta["sandbox"], json!({"profile": "off"}));
}

#[test]
fn workspace_write_confines_writes_to_the_workspace_and_tmpdir() {
    let ws = workspace();
    let beside = tempfile::tempdir().unwrap();
    let engine = default_engine(&ws);
    let outside = beside.path().join("escaped");
    let out = stdout(
        &engine,
        &format!(
            "touch {} && echo outside-written; echo in > inside.txt && echo inside-written; \
             echo t > \"$TMPDIR/t\" && echo tmp-written; echo \"$TMPDIR\"",
            outside.display()
        ),
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("inside-written"), "{out}");
    assert_eq!(lines.next(), Some("tmp-written"), "{out}");
    let tmpdir = lines.next().unwrap();
    assert!(!outside.exists());
    assert_eq!(std::fs::read_to_string(ws.path().join("inside.txt")).unwrap(), "in\n");
    assert!(!Path::new(tmpdir).starts_with(ws.path()) && !Path::new(tmpdir).exists(), "removed: {tmpdir}");
}

#[test]
fn read_only_allows_writes_only_to_tmpdir() {
    let ws = workspace();
    let engine = engine(&ws, SandboxProfile::ReadOnly, false);
    let out = stdout(
        &engine,
        "echo in > inside.txt && echo inside-written; echo x >> a.txt && echo appended; \
         echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; cat a.txt | head -1",
    );
    assert_eq!(out, "t\nalpha\n");
    assert!(!ws.path().join("inside.txt").exists());
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "alpha\nbeta\ngamma\n");
}

#[test]
fn protected_paths_are_read_only_and_other_runs_are_hidden() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let other_run = ws.path().join(".codemode/runs/r-other");
    std::fs::create_dir_all(&other_run).unwrap();
    std::fs::write(other_run.join("spill.txt"), "other run's secret").unwrap();
    let engine = default_engine(&ws);
    let out = stdout(
        &engine,
        "echo '[evil]' >> .git/config && echo git-written; rm -f .git/config && echo git-removed; \
         cat .codemode/runs/r-other/spill.txt; ls -A .codemode; \
         echo x > .codemode/new && echo codemode-written; cat .git/config",
    );
    assert_eq!(out, "[core]\n", "only the read of .git/config succeeds");
    assert_eq!(std::fs::read_to_string(ws.path().join(".git/config")).unwrap(), "[core]\n");
    assert!(!ws.path().join(".codemode/new").exists());
}

#[test]
fn a_missing_codemode_folder_cannot_be_replaced_by_a_file_to_turn_receipts_off() {
    let ws = workspace();
    assert!(!ws.path().join(".codemode").exists());
    let engine = default_engine(&ws);
    let out =
        stdout(&engine, "rm -rf .codemode 2>/dev/null; echo x > .codemode && echo replaced; ls -A .codemode");
    assert_eq!(out, "", "the folder exists, hidden and read-only");
    assert!(ws.path().join(".codemode").is_dir());
    let receipt = engine.execute_blocking(codemode::Program::new("return 1;"));
    assert!(engine.save_receipt(&receipt).is_ok(), "receipts can still be saved");
}

/// A launcher spec (`LaunchSpec` as JSON) running `command` in `ws`
/// (canonical) under `workspace-write`, no network, with `protected`.
fn launch_spec(
    command: &str,
    ws: &std::path::Path,
    protected: &[std::path::PathBuf],
    tmp: &std::path::Path,
) -> Value {
    json!({
        "command": command,
        "workspace": ws,
        "profile": "workspace-write",
        "network": false,
        "protected": protected,
        "hidden": [],
        "spill": null,
        "tmpdir": tmp,
        "parent": std::process::id(),
    })
}

/// A file listed in the confinement's protected paths, through the launcher
/// itself (the engine computes that list from the policy).
#[test]
fn a_listed_protected_file_is_read_only_through_the_launcher() {
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let spec = launch_spec(
        "echo x >> a.txt && echo protected-written; echo y >> docs/guide.md && echo other-written",
        &ws_path,
        &[ws_path.join("a.txt")],
        tmp.path(),
    );
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_codemode"));
    launcher.env("XDG_STATE_HOME", crate::common::XDG_STATE).args([
        "__sandbox-exec",
        codemode::sandbox::launcher::PROTOCOL,
        "spec-on-stdin",
    ]);
    let out = crate::common::run_launcher(launcher, &spec);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["sandbox"]["missing"], json!([]), "{header}");
    assert_eq!(lines.collect::<Vec<_>>(), ["other-written"], "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "alpha\nbeta\ngamma\n");
}

#[test]
fn the_command_has_no_capabilities_and_cannot_undo_the_mounts() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    let engine = default_engine(&ws);
    let out = stdout(
        &engine,
        "grep -E '^Cap(Prm|Eff):' /proc/self/status; umount .git 2>/dev/null && echo unmounted",
    );
    assert_eq!(out, "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n");
}

#[test]
fn the_network_is_off_by_default_and_on_when_allowed() {
    let ws = workspace();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command =
        format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused");
    assert_eq!(stdout(&default_engine(&ws), &command), "refused\n");
    assert_eq!(stdout(&engine(&ws, SandboxProfile::WorkspaceWrite, true), &command), "connected\n");
}

/// A daemon's Unix socket outside the workspace, listening (kept while the
/// returned folder and listener live), and a command that prints
/// `connected` or `refused` as its connect goes.
pub(crate) fn daemon_socket() -> ((tempfile::TempDir, std::os::unix::net::UnixListener), String) {
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let command = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}')\" 2>/dev/null \
         && echo connected || echo refused",
        path.display()
    );
    ((outside, listener), command)
}

/// A Unix socket with a path outside the workspace (a terminal
/// multiplexer's, a daemon's) cannot be reached with the network off:
/// through it a command could type into a person's terminal.
#[test]
fn unix_sockets_outside_are_unreachable_with_the_network_off() {
    let ws = workspace();
    let (_daemon, connect) = daemon_socket();
    let command = format!(
        "{connect}; python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'x'); \
         print(b.recv(1).decode())\""
    );
    let (content, metadata) = sh(&default_engine(&ws), &command);
    assert_eq!(content["stdout"], "refused\nx\n", "socketpair still works: {content}");
    let vsock = "python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)' 2>/dev/null \
                 && echo vsock || echo no-vsock";
    assert_eq!(stdout(&default_engine(&ws), vsock), "no-vsock\n");
    assert!(!metadata["sandbox"]["missing"].to_string().contains("socket filter"), "{metadata}");
    // The network on does not open them (`host_ipc` does:
    // sandbox_writable.rs).
    let open = engine(&ws, SandboxProfile::WorkspaceWrite, true);
    assert_eq!(stdout(&open, &command), "refused\nx\n");
}

#[test]
fn sigterm_comes_first_and_sigkill_after_the_grace() {
    let ws = workspace();
    let engine = default_engine(&ws);
    let m = marker();
    // A command that cleans up on SIGTERM gets to do it.
    let out = engine.call_blocking(
        "bash",
        &json!({"command": format!("trap 'echo cleaned > cleaned.txt; exit 3' TERM; sleep {m} & wait"),
                "timeout": 3}),
    );
    let message = out.error.expect("timed out")["message"].as_str().unwrap().to_owned();
    assert!(message.contains("timed out after 3 s"), "{message}");
    assert_eq!(std::fs::read_to_string(ws.path().join("cleaned.txt")).unwrap(), "cleaned\n");
    assert_gone(&m);

    // One that ignores SIGTERM is killed after the grace period.
    let m = marker();
    let r = engine.execute_blocking(Program::new(format!(
        "try {{ await tools.bash({{command: \"trap '' TERM; sleep {m}\", timeout: 0.5}}); return 'ran'; }} \
         catch (e) {{ return e.message; }}"
    )));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert!(r.value.as_str().unwrap().contains("timed out after 0.5 s"), "{}", r.value);
    assert_gone(&m);
}

/// Runs `codemode ARGS` on a pseudo-terminal (its controlling terminal);
/// returns what it printed.
pub(crate) fn on_a_terminal(ws: &Path, args: &[&str]) -> String {
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let out = Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(driver)
        .arg("n")
        .arg(env!("CARGO_BIN_EXE_codemode"))
        .args(args)
        .current_dir(ws)
        .output()
        .expect("python3 runs the pseudo-terminal driver");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn without_a_launcher_the_call_fails_and_nothing_runs() {
    let ws = workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args(["call", "bash", r#"{"command": "touch ran"}"#, "--posture", "full-access"])
        .current_dir(ws.path())
        .env(codemode::sandbox::LAUNCHER_ENV, "/nonexistent/codemode")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/nonexistent/codemode") && message.contains("CODEMODE_SANDBOX_LAUNCHER"),
        "{v}"
    );
    assert!(!ws.path().join("ran").exists());
}

#[test]
fn a_run_reads_its_own_spill_files_but_no_other_runs() {
    let ws = workspace();
    let mut limits = codemode::Limits::default();
    limits.result_bytes = 1000;
    let engine = builder(&ws).policy(Policy::full_access()).limits(limits).build().unwrap();
    let spill = "const r = await tools.blob({bytes: 5000}); const p = r.truncated.spill_path;";
    let earlier = engine.execute_blocking(Program::new(format!("{spill} return p;")));
    let earlier = earlier.value.as_str().unwrap_or_else(|| panic!("{:?}", earlier.error)).to_owned();
    let r = engine.execute_blocking(Program::new(format!(
        "{spill} const b = await tools.bash({{command: `wc -c < '${{p}}'; echo x >> '${{p}}' && echo written; \
         cat '{earlier}' && echo read-earlier; ls \"$(dirname '${{p}}')/..\" | wc -l`}}); return b.content.stdout;"
    )));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!("5000\n1\n"), "own spill file readable, read-only; the earlier run's hidden");
}

/// The state folder reached through a symbolic link (a home folder
/// behind a link, as on image-based systems): the sandbox hides the folder
/// by both names and still binds the run's own spill folder back.
#[test]
fn a_run_reads_its_own_spill_files_when_the_state_folder_is_behind_a_link() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    std::fs::create_dir(state.path().join("real")).unwrap();
    std::os::unix::fs::symlink(state.path().join("real"), state.path().join("link")).unwrap();
    let mut limits = codemode::Limits::default();
    limits.result_bytes = 1000;
    let engine = builder(&ws)
        .policy(Policy::full_access())
        .limits(limits)
        .state_dir(state.path().join("link"))
        .build()
        .unwrap();
    let spill = "const r = await tools.blob({bytes: 5000}); const p = r.truncated.spill_path;";
    let earlier = engine.execute_blocking(Program::new(format!("{spill} return p;")));
    let earlier = earlier.value.as_str().unwrap_or_else(|| panic!("{:?}", earlier.error)).to_owned();
    // The earlier run's file by the link's name and by the real one.
    let earlier_real = earlier.replace("/link/", "/real/");
    assert_ne!(earlier, earlier_real);
    let r = engine.execute_blocking(Program::new(format!(
        "{spill} const b = await tools.bash({{command: `wc -c < '${{p}}'; echo x >> '${{p}}' && echo written; \
         cat '{earlier}' && echo read-earlier; cat '{earlier_real}' && echo read-earlier-real; \
         ls \"$(dirname '${{p}}')/..\" | wc -l`}}); return b.content.stdout;"
    )));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!("5000\n1\n"), "own spill file readable, read-only; the earlier run's hidden");
}

#[test]
fn sandbox_writable_lifts_a_protection_for_bash_only() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let config = ConfigFile {
        sandbox: SandboxConfig { writable: vec![".git".into()], ..SandboxConfig::default() },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    let engine = builder(&ws).config(config).build().unwrap();
    let out = stdout(&engine, "echo '[user]' >> .git/config && echo git-written");
    assert_eq!(out, "git-written\n");
    assert_eq!(std::fs::read_to_string(ws.path().join(".git/config")).unwrap(), "[core]\n[user]\n");
    let write = engine.call_blocking("write", &json!({"path": ".git/config", "content": "x"}));
    assert!(!write.is_ok(), "writable lifts the protection for bash, not for write");
    // .codemode stays read-only and hidden.
    let out = stdout(&engine, "echo x > .codemode/x && echo codemode-written");
    assert_eq!(out, "");
}

#[test]
fn the_hosts_terminals_are_not_reachable_but_the_command_has_its_own() {
    use std::io::BufRead as _;
    // A terminal on the host: a pseudo-terminal held open by a process.
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import os, pty, time\nm, s = pty.openpty()\nprint(os.ttyname(s), flush=True)\ntime.sleep(30)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let host_tty = line.trim().to_owned();
    assert!(host_tty.starts_with("/dev/pts/"), "{host_tty}");
    let ws = workspace();
    let command = format!(
        "ls -A /dev/pts | tr '\\n' ' '; test -e {host_tty} && echo host-visible; \
         script -qc 'echo own-pty' /dev/null | tr -d '\\r'"
    );
    let (content, metadata) = sh(&default_engine(&ws), &command);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(content["stdout"], "ptmx own-pty\n", "{content}");
    assert!(!metadata["sandbox"]["missing"].to_string().contains("/dev/pts"), "{metadata}");
}

/// Descriptors codemode was started with (not close-on-exec) do not reach
/// the sandboxed command: it has stdin, stdout and stderr only.
#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    let ws = workspace();
    let out = Command::new("bash").env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg("-c")
        .arg(format!(
            "exec 7</etc/hostname; echo '{{\"command\": \"ls /proc/self/fd\"}}' > /dev/null; \
             {} call bash '{{\"command\": \"ls /proc/self/fd | tr \\\"\\\\n\\\" \\\" \\\"\"}}' --posture full-access",
            env!("CARGO_BIN_EXE_codemode")
        ))
        .current_dir(ws.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    let listed = v["content"]["stdout"].as_str().unwrap_or_else(|| panic!("{v}"));
    // ls itself opens the listing (one more fd); 7 must not be there.
    let fds: Vec<&str> = listed.split_whitespace().collect();
    assert!(!fds.contains(&"7"), "fd 7 reached the command: {fds:?}");
    assert!(fds.len() <= 4, "{fds:?}");
}

/// A write the sandbox refuses says why in `metadata.sandbox.note`.
#[test]
fn a_refused_write_says_why() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let engine = default_engine(&ws);
    let (_, metadata) = sh(&engine, "echo x >> .git/config");
    let note = metadata["sandbox"]["note"].as_str().unwrap_or_else(|| panic!("{metadata}"));
    assert!(note.contains("read-only") && note.contains("writable"), "{note}");
    let (_, metadata) = sh(&engine, "echo fine");
    assert!(metadata["sandbox"].get("note").is_none(), "{metadata}");
}

/// Landlock does not cover permissions, timestamps or extended attributes:
/// the host's mounts are read-only in the sandbox, so a command cannot
/// chmod a file outside the workspace (as root: any file).
#[test]
fn files_outside_keep_their_permissions_and_timestamps() {
    use std::os::unix::fs::PermissionsExt as _;
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "x").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    let command = format!(
        "chmod 4777 {v} 2>/dev/null && echo chmodded; touch -d 2001-01-01 {v} 2>/dev/null && echo touched; \
         chmod +x a.txt && echo inside-ok; echo ok > /dev/null && echo devnull-ok",
        v = victim.display()
    );
    let (content, metadata) = sh(&default_engine(&ws), &command);
    assert_eq!(content["stdout"], "inside-ok\ndevnull-ok\n", "{content}");
    assert_eq!(metadata["sandbox"]["missing"], json!([]), "{metadata}");
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(after.permissions().mode() & 0o7777, 0o600);
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
}

/// A folder that holds a protected path cannot be renamed away (the
/// protected path would go with it and a fresh copy take its place).
#[test]
fn a_folder_holding_a_protected_path_cannot_be_renamed() {
    let ws = workspace();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("tools/hooks")).unwrap();
    std::fs::write(root.join("tools/hooks/guard.sh"), "exit 0\n").unwrap();
    std::fs::write(
        root.join("policy.toml"),
        "posture = \"full-access\"\n[[hooks.before_call]]\nmatch = \"^read$\"\ncommand = [\"sh\", \"tools/hooks/guard.sh\"]\n",
    )
    .unwrap();
    let config = ConfigFile::load(&root.join("policy.toml")).unwrap();
    let engine = builder(&ws).config(config).build().unwrap();
    let out = stdout(
        &engine,
        "mv tools tools.old 2>/dev/null && echo moved; mkdir -p tools/hooks 2>/dev/null; \
         echo 'touch pwned' > tools/hooks/guard.sh 2>/dev/null && echo replaced; echo done",
    );
    assert_eq!(out, "done\n");
    assert_eq!(std::fs::read_to_string(root.join("tools/hooks/guard.sh")).unwrap(), "exit 0\n");
    assert!(!root.join("tools.old").exists());
}

/// The command's private TMPDIR is private: mode 0700.
#[test]
fn the_private_tmpdir_is_only_the_users() {
    let ws = workspace();
    assert_eq!(stdout(&default_engine(&ws), "stat -c %a \"$TMPDIR\""), "700\n");
}

/// The user's MCP login tokens (`$XDG_CONFIG_HOME/codemode/oauth`) are
/// hidden from commands: a program could otherwise `cat` a bearer token and
/// return it to the model.
#[test]
fn mcp_login_tokens_are_hidden_from_commands() {
    let ws = workspace();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("codemode/oauth");
    std::fs::create_dir_all(&tokens).unwrap();
    std::fs::write(tokens.join("0123.json"), r#"{"access_token":"SECRET-BEARER-TOKEN"}"#).unwrap();
    let program = format!(
        "const r = await tools.bash({{command: 'cat {dir}/0123.json; ls -A {dir}; echo done'}});\nreturn r.content.stdout;",
        dir = tokens.display()
    );
    let mut child = crate::cli::spawn(
        &["run", "-", "--posture", "full-access", "--journal", "off"],
        ws.path(),
        &[("XDG_CONFIG_HOME", config.path())],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let value: String = serde_json::from_str(&stdout).expect("the value, printed as JSON");
    assert_eq!(value.trim(), "done", "the folder is empty to the command: {stderr}");
    assert!(!stderr.contains("SECRET-BEARER-TOKEN"));
    // The file is still there for codemode itself.
    assert!(std::fs::read_to_string(tokens.join("0123.json")).unwrap().contains("SECRET-BEARER-TOKEN"));
}

/// The token folder reached through a link (a dotfiles setup: the config
/// folder links into the workspace) is hidden by its resolved path too.
#[test]
fn mcp_login_tokens_behind_a_linked_config_folder_are_hidden_from_tools() {
    let ws = workspace();
    let tokens = ws.path().join("dotfiles/config/codemode/oauth");
    std::fs::create_dir_all(&tokens).unwrap();
    std::fs::write(tokens.join("0123.json"), r#"{"access_token":"SECRET-BEARER-TOKEN"}"#).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("config");
    std::os::unix::fs::symlink(ws.path().join("dotfiles/config"), &link).unwrap();
    let program = "const r = []; \
         try { r.push((await tools.read({path: 'dotfiles/config/codemode/oauth/0123.json'})).content); } \
         catch (e) { r.push(e.kind); } \
         r.push((await tools.grep_files({pattern: 'SECRET', path: 'dotfiles'})).content); \
         return JSON.stringify(r);";
    let mut child = crate::cli::spawn(
        &["run", "-", "--posture", "full-access", "--journal", "off"],
        ws.path(),
        &[("XDG_CONFIG_HOME", link.as_path())],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("refused"), "{stdout}");
    assert!(!stdout.contains("SECRET-BEARER-TOKEN") && !stderr.contains("SECRET-BEARER-TOKEN"), "{stdout}");
}

/// The fourth review of issue 36: a launcher that does not know
/// `go_on_stdin` (one of an earlier codemode) would run the command at
/// once, before its start is durable. The engine and the launcher name
/// their protocol: a launcher given another refuses and runs nothing (one
/// of protocol 1 reads the number as its spec and refuses it too). Since
/// protocol 3 the spec comes on stdin: the command lines of earlier
/// engines (the spec as an argument) are refused too. Since protocol 4 the
/// command's environment is in the spec: one of protocol 3 would give a
/// spare launcher's empty environment to the command.
#[test]
fn a_launcher_given_another_protocol_runs_nothing() {
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let spec = launch_spec("touch ran", &ws_path, &[], tmp.path());
    let launcher = |args: &[&str]| {
        let mut launcher = Command::new(env!("CARGO_BIN_EXE_codemode"));
        launcher.args(args);
        crate::common::run_launcher(launcher, &spec)
    };
    let header = |out: &std::process::Output| -> Value {
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap()
    };
    for protocol in ["1", "2", "3", "5"] {
        let out = launcher(&["__sandbox-exec", protocol, "spec-on-stdin"]);
        let header = header(&out);
        assert!(header["error"].as_str().is_some_and(|e| e.contains("protocol 4")), "{header}");
        assert_eq!(out.status.code(), Some(125));
    }
    // The command lines of earlier engines: the spec where the protocol
    // goes (protocol 1), or after it (protocol 2), or after this protocol.
    let text = spec.to_string();
    for args in [
        vec!["__sandbox-exec", &text],
        vec!["__sandbox-exec", "2", &text],
        vec!["__sandbox-exec", "3", &text],
        vec!["__sandbox-exec", "4", &text],
    ] {
        let out = launcher(&args);
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(header(&out)["error"].is_string(), "{args:?}");
    }
    assert!(!ws_path.join("ran").exists(), "a launcher ran a command of another protocol");
}

/// What comes on the launcher's stdin is bounded and checked before
/// anything runs: a length that is not 8 hexadecimal digits, one over the
/// bound (16 MiB), stdin ending before the spec does, or JSON that is not
/// a spec each end the launcher with its setup failure and an error
/// saying what was wrong.
#[test]
fn a_launcher_given_a_bad_frame_on_stdin_runs_nothing() {
    use std::io::Write as _;
    let ws = workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let spec = launch_spec("touch ran", &ws_path, &[], tmp.path()).to_string();
    let cut = &spec[..spec.len() / 2];
    let frames: [(Vec<u8>, &str); 5] = [
        (b"0000zz12{}".to_vec(), "8 hexadecimal digits"),
        (format!("{:08x}", 17 << 20).into_bytes(), "over the bound"),
        (format!("{:08x}{cut}", spec.len()).into_bytes(), "stdin ended"),
        (format!("{:08x}{{\"command\": 1}}", 14).into_bytes(), "bad spec"),
        (Vec::new(), "stdin ended"),
    ];
    for (frame, said) in frames {
        let mut child = Command::new(env!("CARGO_BIN_EXE_codemode"))
            .args(["__sandbox-exec", codemode::sandbox::launcher::PROTOCOL, "spec-on-stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(&frame);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(out.status.code(), Some(125), "{header}");
        assert!(header["error"].as_str().is_some_and(|e| e.contains(said)), "{said}: {header}");
    }
    assert!(!ws_path.join("ran").exists(), "a launcher ran a command from a bad frame");
}
