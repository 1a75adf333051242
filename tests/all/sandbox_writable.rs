//! `[sandbox] writable` beyond the workspace, a git worktree, the command
//! cache and host IPC apart from the network (docs/SECURITY.md, "The bash
//! sandbox"), with real processes, real git and the real kernel.

use std::path::Path;
use std::process::Command;

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::sandbox::{SandboxProfile, SandboxSettings};
use codemode::{Engine, Policy};
use serde_json::{Value, json};

use crate::common::workspace;

/// An engine over `ws` (full access) with `writable` and the sandbox
/// `settings`; the build's error as text.
pub(crate) fn engine_with(ws: &Path, writable: &[&str], settings: SandboxSettings) -> Result<Engine, String> {
    let config = ConfigFile {
        sandbox: SandboxConfig {
            settings,
            writable: writable.iter().map(|w| (*w).to_owned()).collect(),
            ..SandboxConfig::default()
        },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    crate::common::engine_builder()
        .workspace(ws)
        .policy(Policy::full_access())
        .config(config)
        .build()
        .map_err(|e| e.to_string())
}

pub(crate) fn engine(ws: &Path, writable: &[&str]) -> Engine {
    engine_with(ws, writable, SandboxSettings::default()).expect("engine builds")
}

/// Runs `command`: `{exit_code, stdout, stderr}` and the metadata.
pub(crate) fn sh(engine: &Engine, command: &str) -> (Value, Value) {
    let out = engine.call_blocking("bash", &json!({"command": command, "timeout": 60}));
    assert!(out.is_ok(), "{command}: {:?}", out.error);
    let envelope = out.envelope.unwrap();
    (envelope["content"].clone(), envelope["metadata"].clone())
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository `root/main` with a linked worktree `root/wt`; the
/// worktree's canonical path.
pub(crate) fn worktree(root: &Path) -> std::path::PathBuf {
    let main = root.join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "first"]);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    root.join("wt").canonicalize().unwrap()
}

/// In a git worktree, `git commit` needs the repository's git folder,
/// outside the workspace: refused by default, with a note naming the fix
/// that works; with `writable = [".git"]` it commits.
#[test]
fn a_worktree_commits_once_git_is_writable() {
    let root = tempfile::tempdir().unwrap();
    let wt = worktree(root.path());
    let commit = "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m from-the-sandbox";

    let (content, metadata) = sh(&engine(&wt, &[]), commit);
    assert_ne!(content["exit_code"], 0, "{content}");
    assert!(content["stderr"].as_str().unwrap().contains("Read-only file system"), "{content}");
    let note = metadata["sandbox"]["note"].as_str().unwrap();
    assert!(note.contains("[sandbox] writable") && note.contains("worktree"), "{note}");

    let (content, _) = sh(&engine(&wt, &[".git"]), commit);
    assert_eq!(content["exit_code"], 0, "{content}");
    assert!(git(&wt, &["log", "--format=%s"]).starts_with("from-the-sandbox\n"));
}

/// A folder outside the workspace named in `writable` is writable (and
/// `~/` is the home folder); one not named stays read-only.
#[test]
fn a_folder_outside_named_writable_is_writable_and_no_other() {
    let ws = workspace();
    let (named, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let named_path = named.path().to_str().unwrap();
    let engine = engine(ws.path(), &[named_path]);
    let command =
        format!("echo a > {named_path}/a && echo named; echo b > {}/b && echo other", other.path().display());
    let (content, _) = sh(&engine, &command);
    assert_eq!(content["stdout"], "named\n", "{content}");
    assert_eq!(std::fs::read_to_string(named.path().join("a")).unwrap(), "a\n");
    assert!(!other.path().join("b").exists());
}

/// Each entry that cannot apply is refused when the engine is built,
/// naming the entry and what to do.
#[test]
fn entries_that_cannot_apply_are_refused_naming_them() {
    let ws = workspace();
    let ws = ws.path();
    let state = crate::common::state_home();
    std::fs::create_dir_all(&state).unwrap();
    let holding_state = state.parent().unwrap().to_str().unwrap().to_owned();
    let cases: [(&str, &str); 4] = [
        ("/no/such/folder", "does not exist; make it first"),
        ("docs", "which bash already writes under the workspace-write profile"),
        ("/", "is the root folder"),
        (&holding_state, "holds codemode's run state"),
    ];
    for (entry, says) in cases {
        let err =
            engine_with(ws, &[entry], SandboxSettings::default()).err().unwrap_or_else(|| panic!("{entry}"));
        assert!(err.contains(&format!("`{entry}`")) && err.contains(says), "{entry}: {err}");
    }
    // Under the read-only profile a folder of the workspace is writable
    // when named, and the rest of it stays read-only.
    let read_only = SandboxSettings { profile: SandboxProfile::ReadOnly, ..SandboxSettings::default() };
    let engine = engine_with(ws, &["docs"], read_only).unwrap();
    let (content, _) = sh(&engine, "echo x > docs/x && echo docs; echo y > y && echo root");
    assert_eq!(content["stdout"], "docs\n", "{content}");
}

/// A workspace file that is not trusted cannot widen what bash writes:
/// its `writable` is dropped (and said), the folder stays read-only.
#[test]
fn an_untrusted_workspace_files_writable_is_dropped() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let policy = format!("[sandbox]\nwritable = [{:?}]\n", outside.path());
    std::fs::write(ws.path().join("codemode.toml"), policy).unwrap();
    let program = format!(
        "return (await tools.bash({{command: 'echo x > {}/x && echo wrote || echo refused'}})).content.stdout",
        outside.path().display()
    );
    std::fs::write(ws.path().join("prog.js"), program).unwrap();
    let out = crate::cli::codemode(&["run", "prog.js", "--posture", "full-access"], "", ws.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#""refused\n""#);
    assert!(String::from_utf8_lossy(&out.stderr).contains("sandbox writable path"));
    assert!(!outside.path().join("x").exists());
}

/// Commands get a cache folder of their own per workspace, writable and
/// kept between runs, which the common tools' variables point into; the
/// user's own cache folder stays read-only.
#[test]
fn commands_get_a_cache_folder_kept_between_runs() {
    let ws = workspace();
    let (first, _) = sh(
        &engine(ws.path(), &[]),
        "mkdir -p \"$npm_config_cache\" && echo kept > \"$XDG_CACHE_HOME/probe\" && echo $XDG_CACHE_HOME; \
         echo $npm_config_cache $PIP_CACHE_DIR",
    );
    let lines: Vec<&str> = first["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 2, "{first}");
    let cache = Path::new(lines[0]);
    assert!(!cache.starts_with(ws.path()), "outside the workspace: {first}");
    assert_eq!(lines[1], format!("{0}/npm {0}/pip", lines[0]));
    let (second, _) = sh(&engine(ws.path(), &[]), "cat \"$XDG_CACHE_HOME/probe\"");
    assert_eq!(second["stdout"], "kept\n");
    assert!(cache.join("probe").exists());
    let _ = std::fs::remove_dir_all(cache);
}

/// The network and the host's Unix sockets are two settings: with the
/// network on, a daemon's socket is still refused until `host_ipc`.
#[test]
fn the_network_does_not_open_the_hosts_unix_sockets() {
    let ws = workspace();
    let (_daemon, command) = crate::sandbox::daemon_socket();
    let settings = |network, host_ipc| SandboxSettings { network, host_ipc, ..SandboxSettings::default() };
    for (network, host_ipc, says) in
        [(true, false, "refused\n"), (false, true, "connected\n"), (true, true, "connected\n")]
    {
        let engine = engine_with(ws.path(), &[], settings(network, host_ipc)).unwrap();
        assert_eq!(sh(&engine, &command).0["stdout"], says, "network {network}, host_ipc {host_ipc}");
    }
}
