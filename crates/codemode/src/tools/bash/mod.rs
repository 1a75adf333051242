//! `bash {command, timeout?, timeout_ms?, description?}`: one foreground shell command in
//! the workspace, returning its exit code and a bounded tail of its output.
//!
//! # How a command runs
//!
//! - `bash -c <command>`, or `/bin/sh -c <command>` only when no `bash` is
//!   found on the filtered `PATH`. The working directory is the workspace
//!   root; stdin is `/dev/null`; stdout and stderr are pipes.
//! - Under a confining profile (`workspace-write`, the default, or
//!   `read-only`) the shell runs in the OS sandbox: the engine starts the
//!   sandbox launcher (`codemode-sandbox __sandbox-exec 4 spec-on-stdin`,
//!   the spec on its stdin; see
//!   `sandbox/launcher.rs`, found as `sandbox/locate.rs` says), which enters
//!   new namespaces, mounts, applies Landlock and runs the shell as a child
//!   of the new PID namespace's init; its first stdout line (a JSON header,
//!   not part of the output) says what was applied, and becomes
//!   `metadata.sandbox`. Each call gets a private temporary folder
//!   (`TMPDIR`, `private_tmp.rs`), removed after the call. Under `off` the shell is the
//!   engine's child, unconfined, and `metadata.sandbox` is
//!   `{"profile": "off"}`.
//! - Either way the engine's child starts a new session (`setsid`; the
//!   shell between fork and exec, the launcher itself first thing, so that
//!   the engine starts it with `posix_spawn`): no
//!   controlling terminal, and a process group of its own whose id is the
//!   child's pid. Background jobs of a non-interactive shell stay in that
//!   group; under the sandbox, processes that leave it (`setsid`, `set -m`)
//!   are still in the PID namespace, which ends with the shell.
//! - One foreground command: when the shell exits, every process left in its
//!   group is killed with SIGKILL (under the sandbox the namespace is gone
//!   already), and reading stops, so nothing outlives the call and a
//!   background child holding the pipe cannot hang it.
//! - `timeout` is in seconds, as every other time a user sets (`--deadline`,
//!   `--tool-timeout`, an MCP server's `timeout`): default 120, at most 600,
//!   fractions allowed; `timeout_ms` gives it in milliseconds instead (not
//!   both; the schema says so and the code checks it again). At the timeout
//!   the whole group gets SIGTERM, then SIGKILL after the kill grace
//!   (`Confinement::kill_grace`), the shell is reaped, and the call fails
//!   with a `ToolError` of kind `timeout` saying it timed out and carrying
//!   the last 4 KiB of each stream (the error goes into the receipt, so it
//!   is kept smaller than the result's tails).
//! - Cancellation (the call's future dropped: run deadline, host cancel, the
//!   engine's per-tool backstop) ends the group from a drop guard (SIGTERM,
//!   the grace, SIGKILL) and reaps it on the tool runtime; the direct child
//!   is also `kill_on_drop`.
//! - `description` is for display (approval prompts, logs) and is never
//!   executed or passed to the command.
//!
//! # Result
//!
//! Content `{exit_code, stdout, stderr}` plus `signal` (e.g. `"SIGKILL"`)
//! when the shell was killed by a signal, in which case `exit_code` is
//! `null`. A non-zero exit is a successful call: the program decides what it
//! means. Metadata `{stdout_bytes, stderr_bytes, stdout_truncated,
//! stderr_truncated, elapsed_ms}`, where the byte counts are the totals the
//! command wrote.
//!
//! # Limits
//!
//! - Each stream keeps only its last 16 KiB (cut at a UTF-8 character
//!   boundary; invalid UTF-8 is replaced by U+FFFD), read into a bounded
//!   buffer while the command runs: a command printing 50 MB costs at most
//!   80 KiB per stream in memory (the tail buffer, trimmed whenever it passes
//!   32 KiB, plus one 32 KiB read).
//! - After the shell exits and its group is killed, the pipes are drained for
//!   at most 250 ms; a process that left the group (`setsid`, `setpgid`) and
//!   still holds a pipe is not waited for. Under `off` such a process is
//!   also not killed: the group is the unit of cleanup there (only cgroups
//!   could track it); under the sandbox the PID namespace ends it.
//! - The engine's per-tool timeout for `bash` is set above the 600,000 ms
//!   maximum so the command's own `timeout` governs; the run deadline still
//!   cancels a call.
//!
//! # Environment filter
//!
//! The command does not inherit the engine's environment. It gets only:
//! `PATH` (`/usr/local/bin:/usr/bin:/bin` when unset), `HOME`, `USER`,
//! `LOGNAME`, `SHELL`, `TERM`, `TZ`, `TMPDIR` (under the sandbox: the call's
//! private folder) and the POSIX and glibc locale variables by exact name
//! (`LANG`, `LANGUAGE`, `LC_ALL`, `LC_CTYPE`, ...: [`PASSED_VARS`]; an
//! `LC_SECRET` does not pass) when set; `PWD` set to the workspace root; and
//! `CODEMODE=1`. Everything else is
//! dropped: API tokens, cloud credentials (`AWS_*`, `GOOGLE_*`, ...),
//! `SSH_AUTH_SOCK`, `BASH_ENV` and `ENV` (which a non-interactive shell would
//! source), `LD_PRELOAD` and the like.
//!
//! # Reaping
//!
//! Under the sandbox, init (PID 1 of the namespace) kills and reaps
//! everything the command started before it reports the shell's status,
//! and the launcher, the engine's child, ends as soon as it has that
//! report; init, holding nothing of the command, is then killed by the
//! launcher's exit and tears the namespaces down off the call's way back
//! (reaped in the background when it is the engine's to reap). Under `off`:
//! the shell is the engine's child and is reaped by tokio. The processes it
//! leaves behind are orphans once it exits, so they are reparented to the
//! nearest child subreaper or to PID 1, and after the group is killed the
//! tool reaps whatever of the group is its own child with `waitpid(-pgid,
//! WNOHANG)` (bounded by a 2 s wait). That call only collects processes of
//! that group, never another child the host or tokio is waiting for, so it
//! is safe; it reaps the command's orphans when the engine runs as PID 1 (a
//! container entry point) or when the host made itself a subreaper
//! (`nix::sys::prctl::set_child_subreaper(true)`, no `unsafe`). Otherwise
//! PID 1 reaps them: every process is dead when the call returns, but a
//! killed orphan can stay a zombie until PID 1 collects it (on the machine
//! this was built on, PID 1 reaps orphans about every 1.7 s; an init that
//! never reaps would keep them). The tool does not make the process a
//! subreaper itself: that is process-wide and permanent, and would make every
//! orphan in the host's process tree (an MCP server's grandchild, a daemon
//! that left the group with `setsid`) a zombie of the host that nothing
//! reaps, where PID 1 would have. The group handling (own group, kill, reap,
//! drop guard) is shared with the hooks and the `cmd:` approvers
//! (`process_group.rs`).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};
use crate::sandbox::{Confinement, SandboxProfile};
use codemode_sandbox::launcher::{Header, LaunchSpec};

mod pipes;
#[cfg(unix)]
mod private_tmp;
#[cfg(unix)]
mod start;

#[cfg_attr(not(unix), allow(unused_imports))]
use pipes::Tail;
#[cfg(unix)]
use pipes::wait_reading;
#[cfg(unix)]
use start::start_command;

/// The timeout when the call gives none, in milliseconds.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The largest timeout accepted, in milliseconds (600 s).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// The engine's per-tool timeout for `bash`: a backstop above the largest
/// `timeout`, so the command's own timeout is what fires.
const ENGINE_TIMEOUT_MS: u64 = MAX_TIMEOUT_MS + 10_000;
/// Bytes of each stream kept in the result (the tail).
const TAIL_BYTES: usize = 16 << 10;
/// Bytes of each stream quoted in a timeout error.
const ERROR_TAIL_BYTES: usize = 4 << 10;
/// Bytes read from a pipe at once.
#[cfg_attr(not(unix), allow(dead_code))]
const READ_CHUNK: usize = 32 << 10;
/// How long the pipes are drained after the shell exited and its group was
/// killed.
#[cfg(unix)]
const DRAIN_GRACE: Duration = Duration::from_millis(250);
/// How long the tool waits for the killed group's processes to be reaped.
#[cfg(unix)]
const REAP_WAIT: Duration = Duration::from_secs(2);
/// Variables passed through to the command when set: the basics and the
/// locale variables of POSIX (XBD 8.2) and glibc (`locale(7)`), by exact
/// name (an `LC_` prefix would let any `LC_SECRET` through).
const PASSED_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TZ",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
];
/// The longest header line the sandbox launcher writes before the
/// command's output.
#[cfg(unix)]
const HEADER_LIMIT: usize = 64 << 10;
/// `PATH` when the engine's environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The `bash` tool.
pub(crate) struct Bash;

/// The arguments; `description` is display-only and not read.
#[derive(Deserialize)]
struct Args {
    /// The command line given to `bash -c`.
    command: String,
    /// Seconds before the command is killed.
    timeout: Option<f64>,
    /// The same in milliseconds (not with `timeout`).
    timeout_ms: Option<u64>,
}

impl Tool for Bash {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "bash",
            "Run one foreground shell command (`bash -c`) in the workspace root, stdin empty, with a \
             filtered environment. Returns {exit_code, stdout, stderr} with the last 16 KiB of each \
             stream; a non-zero exit is a result, not an error. Background processes are killed when \
             the command exits. At `timeout` seconds (default 120, max 600; or `timeout_ms`) the whole \
             process group is killed and the call fails with a ToolError of kind \"timeout\". In the \
             sandbox (on by default) the command has no network unless `[sandbox] network = true`, and \
             writes only where the sandbox lets it (the workspace, not its .git); metadata.sandbox says \
             how it ran.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "description": "Shell command to run"},
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_TIMEOUT_MS / 1000,
                        "description": "Seconds before it is killed (default 120, at most 600)"
                    },
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_TIMEOUT_MS,
                        "deprecated": true,
                        "description": "The timeout in milliseconds instead (not with `timeout`)"
                    },
                    "description": {"type": "string", "description": "What it does, in a few words (display only)"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::bash())
        .read_only(false)
        .primary_argument(crate::catalog::PrimaryArgument::Text("command".into()))
        .timeout_ms(ENGINE_TIMEOUT_MS)
        .waiting_for_durable_start()
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            let timeout = timeout_of(args.timeout, args.timeout_ms)?;
            // The engine polls a tool's future once on the VM thread; starting
            // a process there would block it, so yield first and start on the
            // tool runtime.
            tokio::task::yield_now().await;
            run(&args.command, &cx.confinement, &cx.run_id, timeout, cx.durable_start.clone()).await
        })
    }
}

/// The call's timeout: `timeout` seconds or `timeout_ms` milliseconds, or
/// the default (120 s).
///
/// # Errors
/// Both are given, or the one given is not above zero or is over 600 s
/// ([`MAX_TIMEOUT_MS`]).
fn timeout_of(secs: Option<f64>, ms: Option<u64>) -> Result<Duration, ToolError> {
    let max_secs = MAX_TIMEOUT_MS / 1000;
    match (secs, ms) {
        (Some(_), Some(_)) => {
            Err(ToolError::new("give either `timeout` (seconds) or `timeout_ms` (milliseconds), not both"))
        }
        (Some(s), None) if s > 0.0 && s <= max_secs as f64 => Ok(Duration::from_secs_f64(s)),
        (Some(s), None) => Err(ToolError::new(format!(
            "`timeout` is {s} seconds; give above 0 to {max_secs} seconds (default {}), or \
             `timeout_ms` for milliseconds",
            DEFAULT_TIMEOUT_MS / 1000
        ))),
        (None, Some(ms @ 1..=MAX_TIMEOUT_MS)) => Ok(Duration::from_millis(ms)),
        (None, Some(ms)) => Err(ToolError::new(format!(
            "`timeout_ms` is {ms}; give 1 to {MAX_TIMEOUT_MS} milliseconds, or `timeout` in seconds"
        ))),
        (None, None) => Ok(Duration::from_millis(DEFAULT_TIMEOUT_MS)),
    }
}

/// The command's environment: the variables of `vars` that pass the filter
/// (see the module docs), `PWD` set to `workspace`, and `CODEMODE=1`.
#[cfg_attr(not(unix), allow(dead_code))]
fn filter_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
    workspace: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> =
        vars.filter(|(k, _)| k.to_str().is_some_and(|k| PASSED_VARS.contains(&k))).collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("PWD".into(), workspace.as_os_str().to_owned()));
    env.push(("CODEMODE".into(), "1".into()));
    env
}

/// Runs `command` under `confinement` (its workspace, sandbox profile and
/// kill grace) and `timeout`; see the module docs.
#[cfg(unix)]
async fn run(
    command: &str,
    confinement: &Confinement,
    run_id: &str,
    timeout: Duration,
    durable_start: Option<crate::catalog::DurableStart>,
) -> Result<ToolOutput, ToolError> {
    use tokio::time::Instant;

    use codemode_base::process_group::ProcessGroup;

    let started = Instant::now();
    let deadline = started + timeout;
    let workspace = confinement.workspace.as_path();
    let mut env = filter_env(std::env::vars_os(), workspace);
    let sandboxed = confinement.sandbox.profile != SandboxProfile::Off;
    // Without a sandbox there is nothing to set up first: the shell starts
    // once the call's start is durable.
    let durable_start = match durable_start {
        Some(gate) if !sandboxed => {
            may_start(gate).await?;
            None
        }
        other => other,
    };
    // `tmp`: the call's private temporary folder, removed when dropped.
    let start::Started { mut child, tmp, spec_frame, input: mut stdin, spare_of } =
        start_command(command, confinement, run_id, &mut env, durable_start.is_some())?;
    if let Some(frame) = spec_frame {
        // Written at once unless the socket's buffer is full; a launcher
        // that died meanwhile (the write fails) or hangs (time runs out)
        // is seen below, when it ends or is ended.
        let written = write_spec(stdin.as_mut(), &frame, deadline).await;
        if !written && let Some(launcher) = spare_of {
            // The spare died after it was taken, before it read anything:
            // nothing ran, and the call gets a launcher of its own.
            let own = crate::sandbox::start_launcher(&launcher, workspace).map_err(|e| {
                ToolError::new(format!("cannot start the sandbox launcher {}: {e}", launcher.display()))
            })?;
            (child, stdin) = (own.child, Some(own.input));
            write_spec(stdin.as_mut(), &frame, deadline).await;
        }
        // The next call's launcher is started now, on another worker, so
        // that it is ready for a call that follows this one at once.
        confinement.spare_launcher.prepare_next();
    }
    if let Some(gate) = durable_start {
        // The launcher sets the sandbox up meanwhile, then waits for this.
        let go = may_start(gate).await;
        if go.is_ok() && Instant::now() >= deadline {
            // Its time ran out while the journal synced: it never starts.
            return Err(ToolError::timeout(format!(
                "the command timed out after {} s before it started (while its start was made durable in \
                 the journal); give a larger `timeout`",
                timeout.as_secs_f64()
            )));
        }
        if go.is_ok()
            && let Some(mut stdin) = stdin.take()
        {
            use tokio::io::AsyncWriteExt as _;
            // A launcher that died meanwhile is seen below, when it ends.
            let _ = stdin.write_all(b"g").await;
        }
        go?;
    }
    // Nothing more for the launcher (and, without a sandbox, no stdin).
    drop(stdin);
    let mut group = ProcessGroup::new(child, "bash", REAP_WAIT)
        .ok_or_else(|| ToolError::new("the shell exited before it could be tracked"))?
        .with_kill_grace(confinement.kill_grace);
    if let Some(tmp) = tmp {
        // The private TMPDIR outlives every process that can use it, also
        // when the call is cancelled (its cleanup follows no link, but a
        // command still running could add to the folder as it goes).
        group = group.keep_until_gone(tmp);
    }
    let (mut out, mut err) = (Tail::new(TAIL_BYTES), Tail::new(TAIL_BYTES));
    let mut header = sandboxed.then(Vec::new);
    let (status, timed_out) = wait_reading(&mut group, deadline, &mut header, &mut out, &mut err).await;
    let ended = status
        .map_err(|e| ToolError::new(format!("waiting for the shell failed: {e}")))
        .and_then(|status| Ok((status, sandbox_applied(header.as_deref(), timed_out, status, &err)?)));
    if sandboxed && !timed_out {
        // The launcher ended once init reported the shell's status, after
        // init had killed and reaped the rest of the namespace; init itself
        // may still be tearing the namespaces down (the launcher's exit
        // kills it): what of the group is ours to reap is reaped off the
        // call's way back. In a PID namespace of its own no process of the
        // command is left, so its TMPDIR goes now, before the call returns
        // (also when the engine's process ends right after); without one,
        // only once the group is gone.
        let in_own_pid_namespace =
            matches!(&ended, Ok((_, Some(applied))) if applied.namespaces.iter().any(|n| n == "pid"));
        let tmp = if in_own_pid_namespace { group.take_kept() } else { None };
        tokio::spawn(async move { group.reap().await });
        if let Some(mut tmp) = tmp.and_then(|kept| kept.downcast::<private_tmp::PrivateTmp>().ok())
            && !tmp.remove_if_empty()
        {
            // What the command left there (any number of files) is removed
            // off the runtime's workers.
            let _ = tokio::task::spawn_blocking(move || drop(tmp)).await;
        }
    } else {
        group.reap().await;
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (status, applied) = ended?;
    if timed_out {
        return Err(timed_out_error(timeout, confinement.kill_grace, &out, &err));
    }
    Ok(command_output(status, applied, sandboxed, &out, &err, elapsed_ms))
}

/// Writes the launcher's spec `frame` on its stdin, giving up at
/// `deadline`; `false` when the write failed (the launcher is gone), `true`
/// when it was written or time ran out (what follows sees the launcher
/// end or ends it).
#[cfg(unix)]
async fn write_spec(
    stdin: Option<&mut tokio::net::UnixStream>,
    frame: &[u8],
    deadline: tokio::time::Instant,
) -> bool {
    use tokio::io::AsyncWriteExt as _;
    let Some(socket) = stdin else { return false };
    !matches!(tokio::time::timeout_at(deadline, socket.write_all(frame)).await, Ok(Err(_)))
}

/// Waits for the call's start to be durable in the journal.
///
/// # Errors
/// When it will not be: the command must not start.
#[cfg(unix)]
async fn may_start(gate: crate::catalog::DurableStart) -> Result<(), ToolError> {
    if gate.wait().await {
        Ok(())
    } else {
        Err(ToolError::new("the command was not started: the journal could not record the call's start"))
    }
}

/// The confinement the launcher's `header` line says it applied (`None`
/// without a sandbox, or when time ran out before the line came); an
/// error when the command did not run (the launcher's error, or the
/// launcher ended with `status` before starting it: `err`'s last bytes).
#[cfg(unix)]
fn sandbox_applied(
    header: Option<&[u8]>,
    timed_out: bool,
    status: std::process::ExitStatus,
    err: &Tail,
) -> Result<Option<codemode_sandbox::launcher::Applied>, ToolError> {
    match header.map(parse_header) {
        None => Ok(None),
        Some(Some(Header::Sandbox(applied))) => Ok(Some(applied)),
        Some(Some(Header::Error(message))) => {
            // A launcher of protocol 1 reads the protocol number as its
            // spec; a spec cut short is something else.
            let cut_short = message.contains("stdin ended") || message.contains("cannot read the spec");
            let hint = if message.contains("bad spec") && !cut_short {
                " (a codemode-sandbox from another codemode version? use the one built with this codemode)"
            } else {
                ""
            };
            Err(ToolError::new(format!("the command did not run: {message}{hint}")))
        }
        Some(None) if timed_out => Ok(None),
        Some(None) => {
            let (text, _) = err.text(ERROR_TAIL_BYTES);
            Err(ToolError::new(format!(
                "the sandbox launcher ended ({status}) before starting the command{}",
                if text.is_empty() { String::new() } else { format!(": {text}") }
            )))
        }
    }
}

/// The error of a command that ran out of `timeout`, with the last bytes
/// of its output.
#[cfg(unix)]
fn timed_out_error(timeout: Duration, kill_grace: Duration, out: &Tail, err: &Tail) -> ToolError {
    let mut message = format!(
        "the command timed out after {} s and its process group was ended (SIGTERM, then SIGKILL \
         after {} ms); give a larger `timeout` (in seconds, at most {}) or do less in one call",
        timeout.as_secs_f64(),
        kill_grace.as_millis(),
        MAX_TIMEOUT_MS / 1000
    );
    for (name, tail) in [("stdout", out), ("stderr", err)] {
        let (text, cut) = tail.text(ERROR_TAIL_BYTES);
        if !text.is_empty() {
            let which = if cut { "last bytes of " } else { "" };
            message.push_str(&format!("\n--- {which}{name} ---\n{text}"));
        }
    }
    ToolError::timeout(message)
}

/// The result of a command that ran to its end: its exit code (and
/// signal), the last bytes of its output, and metadata (byte counts,
/// whether cut, `elapsed_ms`, the sandbox `applied`).
#[cfg(unix)]
fn command_output(
    status: std::process::ExitStatus,
    applied: Option<codemode_sandbox::launcher::Applied>,
    sandboxed: bool,
    out: &Tail,
    err: &Tail,
    elapsed_ms: u64,
) -> ToolOutput {
    use std::os::unix::process::ExitStatusExt as _;
    let (stdout, stdout_truncated, stdout_lines) = out.lines(TAIL_BYTES);
    let (stderr, stderr_truncated, stderr_lines) = err.lines(TAIL_BYTES);
    let cut = output_cut([
        ("stdout", out.total, stdout.len(), stdout_truncated, stdout_lines),
        ("stderr", err.total, stderr.len(), stderr_truncated, stderr_lines),
    ]);
    let mut content = json!({"exit_code": status.code(), "stdout": stdout, "stderr": stderr});
    if let Some(signal) = status.signal() {
        content["signal"] = json!(signal_name(signal));
    }
    let mut sandbox = match applied {
        Some(applied) => serde_json::to_value(applied).expect("the header serialises"),
        None => json!({"profile": SandboxProfile::Off.as_str()}),
    };
    if let Some(note) = refusal_note(sandboxed, &stderr) {
        sandbox["note"] = json!(note);
    }
    ToolOutput::with_metadata(
        content,
        json!({
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "stdout_truncated": stdout_truncated,
            "stderr_truncated": stderr_truncated,
            "elapsed_ms": elapsed_ms,
            "sandbox": sandbox,
        }),
    )
    .cut(cut)
}

/// The envelope's `truncated` when a stream kept only its tail: per stream
/// `(name, bytes written, bytes kept, cut, kept from a line start)`.
fn output_cut(streams: [(&str, u64, usize, bool, bool); 2]) -> Option<crate::receipt::Truncation> {
    let cut: Vec<String> = streams
        .iter()
        .filter(|s| s.3)
        .map(|(name, total, kept, _, at_line)| {
            let from = if *at_line { "whole lines" } else { "from mid-line (its last line alone is longer)" };
            format!("{name}: its last {kept} of {total} bytes, {from}")
        })
        .collect();
    if cut.is_empty() {
        return None;
    }
    let total: u64 = streams.iter().map(|s| s.1).sum();
    let kept: usize = streams.iter().map(|s| s.2).sum();
    let how = format!(
        "{}; each stream keeps its last {} KiB: to get all of it, write it to a file in the workspace \
         (`cmd > out.txt`) and read that",
        cut.join("; "),
        TAIL_BYTES >> 10
    );
    Some(crate::receipt::Truncation::by_tool(Some(total), kept as u64, how))
}

/// What to tell the program when a sandboxed command's stderr shows the
/// kernel refusing what the sandbox refuses, since `Read-only file system`
/// alone does not say why.
#[cfg(unix)]
fn refusal_note(sandboxed: bool, stderr: &str) -> Option<&'static str> {
    const READ_ONLY: [&str; 2] = ["Read-only file system", "Device or resource busy"];
    const DENIED: [&str; 2] = ["Permission denied", "Operation not permitted"];
    if !sandboxed {
        None
    } else if READ_ONLY.iter().any(|m| stderr.contains(m)) {
        Some(
            "the sandbox keeps everything outside the workspace and $TMPDIR read-only, and in it the \
             protected paths (.git, the policy and MCP files, files hooks, approvers and MCP servers \
             run); caches go to $XDG_CACHE_HOME, which is writable. To let bash write a folder outside \
             the workspace (`/tmp`, `~/.cargo/registry`) or a protected path (`.git`, which in a git \
             worktree also covers the repository's git folder), the user adds it to `[sandbox] writable` \
             in a trusted codemode.toml or a --config file (docs/SECURITY.md, \"The bash sandbox\")",
        )
    } else if DENIED.iter().any(|m| stderr.contains(m)) {
        Some(
            "the sandbox allows writes only inside the workspace, $TMPDIR, $XDG_CACHE_HOME and the \
             folders `[sandbox] writable` names; no network unless `[sandbox] network = true`, and no \
             Unix sockets (the host's daemons and agents) unless `[sandbox] host_ipc = true`, each set \
             in a trusted codemode.toml or a --config file (docs/SECURITY.md); the refusal may be the \
             sandbox's",
        )
    } else {
        None
    }
}

/// Without Unix process groups there is no safe way to run a command.
#[cfg(not(unix))]
async fn run(
    _: &str,
    _: &Confinement,
    _: &str,
    _: Duration,
    _: Option<crate::catalog::DurableStart>,
) -> Result<ToolOutput, ToolError> {
    Err(ToolError::new("the bash tool runs on Unix only"))
}

/// The launcher's header line (without its newline), if it is one.
#[cfg(unix)]
fn parse_header(line: &[u8]) -> Option<Header> {
    serde_json::from_slice(line).ok()
}

/// The name of signal `signal` (`"SIGKILL"`), or its number as text.
#[cfg(unix)]
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(|_| signal.to_string(), |s| s.as_str().to_owned())
}

#[cfg(test)]
mod tests;
