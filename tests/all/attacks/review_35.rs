//! Review of issue 35 (`[sandbox] writable` outside the workspace, a
//! worktree's git folders, the command cache, host IPC). Each test is a
//! way a program widened what bash may write beyond what the user named.

use std::path::Path;
use std::process::Command;

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::{Engine, Policy};
use serde_json::{Value, json};

use crate::sandbox_writable::{engine, worktree};

/// Runs `command` in the sandbox: `{exit_code, stdout, stderr}`.
fn sh(engine: &Engine, command: &str) -> Value {
    crate::sandbox_writable::sh(engine, command).0
}

/// Whether the next engine over `wt` with the same `writable = [".git"]`
/// (an engine that refuses to build is a defence too) lets bash write in
/// `victim`.
fn next_build_writes(wt: &Path, victim: &Path) -> bool {
    if let Ok(second) = crate::sandbox_writable::engine_with(wt, &[".git"], Default::default()) {
        sh(&second, &format!("echo pwned > {}/authorized_keys", victim.display()));
    }
    victim.join("authorized_keys").exists()
}

/// `writable = [".git"]` lifts the worktree's `.git` file for bash, and
/// the folders that file names were granted at the next build whatever
/// they are: a program rewrote it to `gitdir: <any folder>` (here a
/// stand-in for `~/.ssh` or `~/.config/git`) and the next engine over the
/// same workspace and the same policy let bash write there.
#[test]
fn a_rewritten_git_file_does_not_grant_another_folder_at_the_next_build() {
    let root = tempfile::tempdir().unwrap();
    let wt = worktree(root.path());
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let first = engine(&wt, &[".git"]);
    let out = sh(&first, &format!("printf 'gitdir: {}\\n' > .git", victim.display()));
    assert_eq!(out["exit_code"], 0, "the .git file is writable for bash: {out}");
    drop(first);
    // The next session: the same user policy.
    assert!(!next_build_writes(&wt, &victim), "bash wrote a folder the user never named");
}

/// The same through the worktree git folder's `commondir` file, which
/// lies in a folder `writable = [".git"]` makes writable.
#[test]
fn a_rewritten_commondir_does_not_grant_another_folder_at_the_next_build() {
    let root = tempfile::tempdir().unwrap();
    let wt = worktree(root.path());
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let commondir = root.path().canonicalize().unwrap().join("main/.git/worktrees/wt/commondir");
    let first = engine(&wt, &[".git"]);
    let out = sh(&first, &format!("printf '{}\\n' > {}", victim.display(), commondir.display()));
    assert_eq!(out["exit_code"], 0, "commondir is writable for bash: {out}");
    drop(first);
    assert!(!next_build_writes(&wt, &victim), "bash wrote a folder the user never named");
}

/// The launcher binds each writable folder by path, following links, at
/// every call. `writable = [".git"]` in a worktree binds the repository's
/// `.git` and, inside it, `.git/worktrees/wt`: one command moved
/// `worktrees` aside (only `wt` is a mount point) and put a link to
/// another folder in its place; the next command of the same engine could
/// write that folder.
#[test]
fn a_link_swapped_in_for_a_writable_folder_is_not_followed_at_the_next_call() {
    let root = tempfile::tempdir().unwrap();
    let wt = worktree(root.path());
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let git = root.path().canonicalize().unwrap().join("main/.git");
    let engine = engine(&wt, &[".git"]);
    let swap = format!(
        "cd {} && mv worktrees worktrees.old && mkdir worktrees && ln -s {} worktrees/wt",
        git.display(),
        victim.display()
    );
    // Refused (`worktrees` is pinned as a mount point) or done: either way
    // the next call must not write the link's target.
    let _ = sh(&engine, &swap);
    sh(&engine, &format!("echo pwned > {}/authorized_keys", victim.display()));
    assert!(!victim.join("authorized_keys").exists(), "bash wrote a folder the user never named");
}

/// Under `workspace-write` a writable folder may hold the workspace (the
/// docs' `/tmp`). The workspace itself is a mount point and cannot be
/// moved, but a folder between it and the writable folder could: one
/// command replaced `<writable>/a` with a folder whose `ws` is a link,
/// and the next command's workspace (bound writable, Landlock's rule,
/// the shell's working folder) was the link's target.
#[test]
fn a_folder_between_a_writable_folder_and_the_workspace_cannot_be_swapped() {
    let outer = tempfile::tempdir().unwrap();
    let outer_path = outer.path().canonicalize().unwrap();
    let ws = outer_path.join("a/ws");
    std::fs::create_dir_all(&ws).unwrap();
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let engine = engine(&ws, &[outer_path.to_str().unwrap()]);
    let swap =
        format!("cd {} && mv a a.old && mkdir a && ln -s {} a/ws", outer_path.display(), victim.display());
    // Refused (the folder is pinned) or done: either way the next call
    // must not write the link's target.
    let _ = sh(&engine, &swap);
    let _ = engine.call_blocking("bash", &json!({"command": "echo pwned > authorized_keys", "timeout": 60}));
    assert!(!victim.join("authorized_keys").exists(), "bash wrote a folder the user never named");
}

/// A decisive folder that does not exist yet is known by its path as
/// written (`$XDG_CONFIG_HOME/codemode`, the trust record's folder),
/// and a writable folder by its resolved path. With the config folder a
/// link (dotfiles: `~/.config -> ~/dotfiles/config`) and `writable`
/// naming the link's target, the check saw no overlap, and a command
/// wrote a trust record for the workspace's own `codemode.toml`: the
/// next run would apply the program's file whole.
#[test]
fn a_writable_folder_reached_by_another_path_does_not_hold_a_missing_trust_record() {
    let ws = crate::common::workspace();
    let home = tempfile::tempdir().unwrap();
    let real = home.path().canonicalize().unwrap().join("dotfiles-config");
    std::fs::create_dir(&real).unwrap();
    let config_home = home.path().join("config");
    std::os::unix::fs::symlink(&real, &config_home).unwrap();
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("posture = \"full-access\"\n[sandbox]\nwritable = [{:?}]\n", real.display().to_string()),
    )
    .unwrap();
    let record = real.join("codemode/trusted.json");
    let program = format!(
        "try {{ return await tools.bash({{command: {:?}}}); }} catch (e) {{ return e.message; }}",
        format!("mkdir -p {0}/codemode && echo '{{}}' > {0}/codemode/trusted.json", real.display())
    );
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--config", policy.to_str().unwrap()],
        ws.path(),
        &[("XDG_CONFIG_HOME", &config_home)],
    );
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !record.exists(),
        "bash wrote the trust record: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sandbox.writable") && stderr.contains("holds"), "refused, naming why: {stderr}");
}

/// Under `read-only` a folder of the workspace may be named writable, and
/// such an entry skipped the checks a folder outside gets. "Of the
/// workspace" was judged on the path as written, so a checkout's link
/// (`build -> /`) or `..` turned the user's `writable = ["build"]` into
/// any folder at all, the root included: bash wrote outside everything
/// the user named.
#[test]
fn a_workspace_entry_that_resolves_outside_is_checked_as_outside() {
    use codemode::sandbox::{SandboxProfile, SandboxSettings};
    let ws = crate::common::workspace();
    std::os::unix::fs::symlink("/", ws.path().join("build")).unwrap();
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let settings = SandboxSettings { profile: SandboxProfile::ReadOnly, ..SandboxSettings::default() };
    for entry in ["build", "../../../../../../../../.."] {
        let config = ConfigFile {
            sandbox: SandboxConfig { settings, writable: vec![entry.into()], ..SandboxConfig::default() },
            ..ConfigFile::with_policy(Policy::full_access())
        };
        let built = crate::common::engine_builder()
            .workspace(ws.path())
            .policy(Policy::full_access())
            .config(config)
            .build();
        if let Ok(engine) = built {
            sh(&engine, &format!("echo pwned > {}/x", victim.display()));
        }
        assert!(!victim.join("x").exists(), "`{entry}`: bash wrote a folder the user never named");
    }
}

/// `host_ipc = true` grants the host's Unix sockets, not the network: it
/// also lifted the refusal of `AF_VSOCK` (which a network namespace does
/// not isolate: it reaches a virtual machine's host) and of io_uring, so
/// with the network off a command could still open a vsock.
#[test]
fn host_ipc_without_the_network_keeps_vsock_closed() {
    use codemode::sandbox::SandboxSettings;
    let ws = crate::common::workspace();
    let settings = SandboxSettings { host_ipc: true, ..SandboxSettings::default() };
    let config = ConfigFile {
        sandbox: SandboxConfig { settings, ..SandboxConfig::default() },
        ..ConfigFile::with_policy(Policy::full_access())
    };
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::full_access())
        .config(config)
        .build()
        .unwrap();
    let probe = "python3 -c 'import socket\ntry:\n socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(\"vsock\")\nexcept OSError as e: print(e.errno)\ntry:\n socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print(\"unix\")\nexcept OSError as e: print(e.errno)'";
    let out = sh(&engine, probe);
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(stdout.ends_with("unix\n"), "host_ipc opens Unix sockets: {out}");
    assert!(!stdout.starts_with("vsock"), "a vsock opened with the network off: {out}");
}

/// Pins hold within one sandbox's mounts only: a command of another
/// session whose writable folder holds this workspace's parent could
/// move that parent aside and leave the workspace a link to another
/// folder, which this session's next call bound writable as its
/// workspace. The launcher refuses a workspace reached through a link.
#[test]
fn another_sessions_command_cannot_swap_this_workspace_for_a_link() {
    let outer = tempfile::tempdir().unwrap();
    let outer_path = outer.path().canonicalize().unwrap();
    let ws = outer_path.join("b/ws");
    std::fs::create_dir_all(&ws).unwrap();
    let other = crate::common::workspace();
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let this = engine(&ws, &[]);
    let theirs = engine(other.path(), &[outer_path.to_str().unwrap()]);
    let swap =
        format!("cd {} && mv b b.old && mkdir b && ln -s {} b/ws", outer_path.display(), victim.display());
    let out = sh(&theirs, &swap);
    assert_eq!(out["exit_code"], 0, "the other session's grant covers {}: {out}", outer_path.display());
    let _ = this.call_blocking("bash", &json!({"command": "echo pwned > authorized_keys", "timeout": 60}));
    assert!(!victim.join("authorized_keys").exists(), "bash wrote a folder the user never named");
}

/// The command cache is `$XDG_CACHE_HOME/codemode/commands/<digest>`,
/// made when missing and bound writable by its resolved path. A link
/// planted at that place (by a command of another session whose
/// writable folder holds `$XDG_CACHE_HOME`) made the folder it leads to
/// writable for this workspace's commands.
#[test]
fn a_link_planted_as_the_command_cache_is_not_bound() {
    let ws = crate::common::workspace();
    let ws_path = ws.path().canonicalize().unwrap();
    let cache_home = tempfile::tempdir().unwrap();
    let victim = tempfile::tempdir().unwrap();
    let victim = victim.path().canonicalize().unwrap();
    let digest = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' '{}' | sha256sum | cut -c1-16", ws_path.display()))
        .output()
        .unwrap();
    let digest = String::from_utf8(digest.stdout).unwrap().trim().to_owned();
    let commands = cache_home.path().join("codemode/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::os::unix::fs::symlink(&victim, commands.join(&digest)).unwrap();
    let policy = cache_home.path().join("policy.toml");
    std::fs::write(&policy, "posture = \"full-access\"\n").unwrap();
    let program = "try { return await tools.bash({command: 'echo pwned > \"$XDG_CACHE_HOME/authorized_keys\"'}); } \
                   catch (e) { return e.message; }";
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--config", policy.to_str().unwrap()],
        &ws_path,
        &[("XDG_CACHE_HOME", cache_home.path())],
    );
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !victim.join("authorized_keys").exists(),
        "bash wrote through a planted cache link: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// "What decides calls" covered the files hooks, approvers and servers
/// run only beneath the workspace: a hook kept outside it (the user's
/// `~/bin/guard.sh`, named by a `--config` policy) lay in a folder
/// `writable` could name, and a command rewrote the script that runs
/// unconfined before each later call.
#[test]
fn a_hook_script_outside_the_workspace_is_not_made_writable() {
    let ws = crate::common::workspace();
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().canonicalize().unwrap().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let guard = bin.join("guard.sh");
    std::fs::write(&guard, "#!/bin/sh\nexit 0\n").unwrap();
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "posture = \"full-access\"\n[sandbox]\nwritable = [{:?}]\n\n[[hooks.before_call]]\nmatch = \"^read$\"\ncommand = [\"sh\", {:?}]\n",
            bin.display().to_string(),
            guard.display().to_string()
        ),
    )
    .unwrap();
    let program = format!(
        "try {{ return await tools.bash({{command: {:?}}}); }} catch (e) {{ return e.message; }}",
        format!("echo 'echo planted' >> {}", guard.display())
    );
    let mut child =
        crate::cli::spawn(&["run", "-", "--json", "--config", policy.to_str().unwrap()], ws.path(), &[]);
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        std::fs::read_to_string(&guard).unwrap(),
        "#!/bin/sh\nexit 0\n",
        "bash rewrote the hook: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sandbox.writable") && stderr.contains("holds"), "{stderr}");
}

/// The same for an MCP stdio server whose script lies outside the
/// workspace (`node ~/mcp/server.js` in the user's own MCP file): the
/// folder holding it was not what decides calls, so `writable` could
/// name it and a command rewrote the code the server runs unconfined at
/// its next start.
#[test]
fn an_mcp_servers_script_outside_the_workspace_is_not_made_writable() {
    let ws = crate::common::workspace();
    let home = tempfile::tempdir().unwrap();
    let mcp = home.path().canonicalize().unwrap().join("mcp");
    std::fs::create_dir(&mcp).unwrap();
    let server = mcp.join("server.js");
    std::fs::write(&server, "// the server\n").unwrap();
    let mcp_file = home.path().join("mcp.json");
    std::fs::write(
        &mcp_file,
        serde_json::to_string(&json!({"mcpServers": {"notes": {"command": "node", "args": [server]}}}))
            .unwrap(),
    )
    .unwrap();
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("posture = \"full-access\"\n[sandbox]\nwritable = [{:?}]\n", mcp.display().to_string()),
    )
    .unwrap();
    let program = format!(
        "try {{ return await tools.bash({{command: {:?}}}); }} catch (e) {{ return e.message; }}",
        format!("echo 'planted()' >> {}", server.display())
    );
    let args = [
        "run",
        "-",
        "--json",
        "--config",
        policy.to_str().unwrap(),
        "--mcp-config",
        mcp_file.to_str().unwrap(),
    ];
    let mut child = crate::cli::spawn(&args, ws.path(), &[]);
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        std::fs::read_to_string(&server).unwrap(),
        "// the server\n",
        "bash rewrote the server's script: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sandbox.writable") && stderr.contains("a file an MCP server runs"), "{stderr}");
}
