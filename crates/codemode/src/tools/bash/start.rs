//! Starting a command: the shell, in a new session with the filtered
//! environment only, or the sandbox launcher (the engine's spare, or one
//! started for the call) with its spec, which carries that environment.

use std::ffi::OsString;
use std::path::Path;

use codemode_sandbox::launcher::EnvText;

use super::{Confinement, LaunchSpec, SandboxProfile, ToolError};

/// A command started: its process, the sandboxed command's private
/// temporary folder (removed when dropped), and the spec the launcher
/// waits for on its stdin.
pub(super) struct Started {
    /// The shell, or the sandbox launcher.
    pub child: tokio::process::Child,
    /// The sandboxed command's `TMPDIR`.
    pub tmp: Option<super::private_tmp::PrivateTmp>,
    /// The launcher's spec as it reads it from stdin
    /// (`codemode_sandbox::launcher::spec_frame`), for the caller to write
    /// there (the launcher does nothing until it has it); `None` without a
    /// sandbox.
    pub spec_frame: Option<Vec<u8>>,
    /// The engine's end of the launcher's stdin, for the spec and the go
    /// (`sandbox/spare_launcher.rs`, `Launched::input`); `None` without a
    /// sandbox.
    pub input: Option<tokio::net::UnixStream>,
    /// The launcher, when `child` is the engine's spare of it: if the
    /// spare died since it was taken (its spec cannot be written), the
    /// call starts one of its own.
    pub spare_of: Option<std::path::PathBuf>,
}

/// Starts `command` as `confinement` says, with `env`: the shell itself
/// when the sandbox is off (`/bin/sh` when there is no `bash`), else the
/// sandbox launcher, whose stdin is a socket for its spec and, with
/// `go_on_stdin`, then the go: the launcher sets the sandbox up and waits
/// for one byte there before it starts the shell
/// (`LaunchSpec::go_on_stdin`); the shell itself is started only when
/// the command may run.
pub(super) fn start_command(
    command: &str,
    confinement: &Confinement,
    run_id: &str,
    env: &mut Vec<(OsString, OsString)>,
    go_on_stdin: bool,
) -> Result<Started, ToolError> {
    let workspace = confinement.workspace.as_path();
    if confinement.sandbox.profile == SandboxProfile::Off {
        let child = match spawn("bash", command, workspace, env) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && workspace.is_dir() => {
                spawn("/bin/sh", command, workspace, env)
            }
            other => other,
        }
        .map_err(|e| ToolError::new(format!("cannot start the shell: {e}")))?;
        return Ok(Started { child, tmp: None, spec_frame: None, input: None, spare_of: None });
    }
    start_sandboxed(command, confinement, run_id, env, go_on_stdin)
}

/// Starts the sandbox launcher for `command`: finds the launcher, makes
/// the command's private temporary folder (its `TMPDIR` in `env`) and the
/// hidden folders inside the workspace, and takes the engine's spare
/// launcher or starts one; the caller hands it its spec (`env` in it).
fn start_sandboxed(
    command: &str,
    confinement: &Confinement,
    run_id: &str,
    env: &mut Vec<(OsString, OsString)>,
    go_on_stdin: bool,
) -> Result<Started, ToolError> {
    let workspace = confinement.workspace.as_path();
    let launcher = match &confinement.launcher {
        Some(launcher) => launcher.clone(),
        None => crate::sandbox::find_launcher().map_err(ToolError::new)?,
    };
    // Made where the engine settled when it was built, never through a
    // link (`private_tmp.rs`).
    let tmp = super::private_tmp::PrivateTmp::make(confinement)?;
    let tmpdir = tmp.path().to_path_buf();
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
    // A hidden folder that does not exist yet could not be covered, and
    // the command could put a file where receipts go: make it first.
    for hidden in confinement.hidden.iter().filter(|h| h.starts_with(workspace)) {
        std::fs::create_dir_all(hidden).map_err(|e| {
            ToolError::new(format!("cannot create {} before sandboxing: {e}", hidden.display()))
        })?;
    }
    if let Some(cache) = &confinement.command_cache {
        point_caches_at(cache, env);
    }
    let spec = LaunchSpec {
        command: command.to_owned(),
        workspace: workspace.to_path_buf(),
        profile: confinement.sandbox.profile.as_str().to_owned(),
        network: confinement.sandbox.network,
        host_ipc: confinement.sandbox.host_ipc,
        writable: confinement.writable.clone(),
        protected: confinement.protected_for("bash"),
        hidden: confinement.hidden.clone(),
        spill: Some(confinement.own_spill_folder(run_id)),
        tmpdir,
        parent: std::process::id() as i32,
        go_on_stdin,
        shared_network: if confinement.sandbox.network {
            None
        } else {
            confinement.network_holder.shared(&launcher)
        },
        env: Some(
            env.iter().map(|(name, value)| (EnvText::from_os(name), EnvText::from_os(value))).collect(),
        ),
    };
    let spec_frame = codemode_sandbox::launcher::spec_frame(&spec).map_err(ToolError::new)?;
    let (launched, spare) = confinement.spare_launcher.take_or_start(&launcher, workspace).map_err(|e| {
        ToolError::new(format!("cannot start the sandbox launcher {}: {e}", launcher.display()))
    })?;
    let spare_of = spare.then_some(launcher);
    Ok(Started {
        child: launched.child,
        tmp: Some(tmp),
        spec_frame: Some(spec_frame),
        input: Some(launched.input),
        spare_of,
    })
}

/// The cache variables a sandboxed command gets, each a folder beneath
/// the workspace's command cache (the user's own cache folders are
/// read-only in the sandbox): `(variable, subfolder)`, `""` for the cache
/// itself.
const CACHE_VARIABLES: [(&str, &str); 7] = [
    ("XDG_CACHE_HOME", ""),
    ("npm_config_cache", "npm"),
    ("PIP_CACHE_DIR", "pip"),
    ("UV_CACHE_DIR", "uv"),
    ("YARN_CACHE_FOLDER", "yarn"),
    ("GOCACHE", "go-build"),
    ("DENO_DIR", "deno"),
];

/// Points [`CACHE_VARIABLES`] at `cache` in `env`, replacing what the
/// environment had.
fn point_caches_at(cache: &Path, env: &mut Vec<(OsString, OsString)>) {
    env.retain(|(k, _)| !CACHE_VARIABLES.iter().any(|(name, _)| k == name));
    for (name, sub) in CACHE_VARIABLES {
        let folder = if sub.is_empty() { cache.to_path_buf() } else { cache.join(sub) };
        env.push((name.into(), folder.into_os_string()));
    }
}

/// Starts `shell -c command` in a new session (`setsid` between fork and
/// exec), with `env` only.
fn spawn(
    shell: &str,
    command: &str,
    workspace: &Path,
    env: &[(OsString, OsString)],
) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(shell);
    cmd.arg("-c").arg(command);
    prepare(&mut cmd, workspace, env);
    codemode_base::process_group::in_new_session(&mut cmd).spawn()
}

/// Sets `cmd` to run in `workspace` with `env` only, stdin `/dev/null`,
/// stdout and stderr piped, killed on drop.
fn prepare(cmd: &mut tokio::process::Command, workspace: &Path, env: &[(OsString, OsString)]) {
    use std::process::Stdio;
    cmd.current_dir(workspace)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
}
