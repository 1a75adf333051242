//! Running a hook's process: started in its own process group, fed the
//! call, its answer read within bounds, and stopped with its group at the
//! timeout (Unix only).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::{Exit, Finished, STDERR_LIMIT, STDOUT_LIMIT};
use codemode_base::process_group::ProcessGroup;

/// How long the pipes are drained after the hook exited and its group was
/// killed.
const DRAIN_GRACE: Duration = Duration::from_millis(100);
/// How long to wait for the hook itself after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(1);
/// How long to try reaping the killed group's orphans.
const REAP_WAIT: Duration = Duration::from_millis(200);

/// Runs the hook to its end, or to `timeout`; `Err` is the reason to block
/// (after "hook `X` ").
pub(super) async fn run_process(
    program: &str,
    args: &[String],
    workspace: &Path,
    payload: &[u8],
    timeout: Duration,
) -> Result<Finished, String> {
    let now = Instant::now();
    // A timeout too large for the clock means none (about 30 years).
    let deadline = now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400));
    let mut group = spawn_hook(program, args, workspace)?;
    let (status, output) = talk(&mut group, payload, deadline, timeout).await?;
    group.reap().await;

    let status = status.map_err(|e| format!("could not be waited for ({e}); the call is blocked"))?;
    let exit = {
        use std::os::unix::process::ExitStatusExt as _;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => return Err(format!("ended in an unknown way ({status}); the call is blocked")),
        }
    };
    let stdout = match output.stdout {
        Some(Ok(stdout)) => stdout,
        // Stdout went over the limit while draining.
        Some(Err(TooLarge)) => return Err(too_large()),
        None => {
            return Err("exited, but a process it started still holds its stdout, so its answer is \
                        incomplete; the call is blocked"
                .to_owned());
        }
    };
    let (stderr, stderr_cut) = output.stderr.unwrap_or_default();
    Ok(Finished { exit, stdout, stderr, stderr_cut })
}

/// Starts `program` with `args` in `workspace`, in a new session (its own
/// process group) that dies with this process, its three pipes piped.
/// `Err` is the reason to block.
fn spawn_hook(program: &str, args: &[String], workspace: &Path) -> Result<ProcessGroup, String> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let spawned = codemode_base::process_group::dying_with_parent(
        codemode_base::process_group::in_new_session(&mut command),
    )
    .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(e) => return Err(start_error(program, workspace, &e)),
    };
    ProcessGroup::new(child, "hook", REAP_WAIT)
        .ok_or_else(|| "exited before it could be tracked; the call is blocked".to_owned())
}

/// What was read from the hook's stdout and stderr; `None` for a pipe not
/// read to its end.
struct Output {
    stdout: Option<Result<Vec<u8>, TooLarge>>,
    stderr: Option<(Vec<u8>, bool)>,
}

/// Feeds the hook `payload` and reads its answer until it exits, passes
/// `deadline` or answers too much, then stops its group ([`stop_group`])
/// and drains the pipes for at most [`DRAIN_GRACE`]. The hook's exit
/// status and what was read; `Err` is the reason to block.
async fn talk(
    group: &mut ProcessGroup,
    payload: &[u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<(std::io::Result<ExitStatus>, Output), String> {
    let feeding = feed(group.child().stdin.take(), payload);
    let reading_out = read_stdout(group.child().stdout.take());
    let reading_err = read_stderr(group.child().stderr.take());
    tokio::pin!(feeding, reading_out, reading_err);
    let mut stdout: Option<Result<Vec<u8>, TooLarge>> = None;
    let mut stderr: Option<(Vec<u8>, bool)> = None;
    let mut fed = false;

    let ended = loop {
        tokio::select! {
            status = group.child().wait() => break Ended::Exited(status),
            out = &mut reading_out, if stdout.is_none() => {
                let too_large = out.is_err();
                stdout = Some(out);
                if too_large {
                    break Ended::TooLarge;
                }
            }
            err = &mut reading_err, if stderr.is_none() => stderr = Some(err),
            () = &mut feeding, if !fed => fed = true,
            () = sleep_until(deadline) => break Ended::TimedOut,
        }
    };
    let status = stop_group(group, ended, timeout).await?;

    // Every process of the group is dead, so the pipes close as soon as they
    // are drained, unless a process left the group and holds one.
    if stdout.is_none() || stderr.is_none() {
        let _ = tokio::time::timeout(DRAIN_GRACE, async {
            if stdout.is_none() {
                stdout = Some((&mut reading_out).await);
            }
            if stderr.is_none() {
                stderr = Some((&mut reading_err).await);
            }
        })
        .await;
    }
    Ok((status, Output { stdout, stderr }))
}

/// Stops the hook's group as `ended` says. The hook has exited (what it
/// left running is killed): its exit status. Or it must stop now
/// (SIGTERM, the grace period, then SIGKILL for its whole group): `Err`
/// is the reason to block (it timed out after `timeout`, or answered too
/// much).
async fn stop_group(
    group: &mut ProcessGroup,
    ended: Ended,
    timeout: Duration,
) -> Result<std::io::Result<ExitStatus>, String> {
    match ended {
        Ended::Exited(_) => group.kill(),
        Ended::TimedOut | Ended::TooLarge => {
            let _ =
                tokio::time::timeout(codemode_base::DEFAULT_KILL_GRACE + KILL_WAIT, group.terminate()).await;
        }
    }

    match ended {
        Ended::Exited(status) => Ok(status),
        Ended::TimedOut | Ended::TooLarge => {
            // SIGKILL was sent after the grace; the wait is short unless the
            // process is stuck in the kernel, and then the group's drop guard
            // waits for it and reaps the group in the background.
            let reaped = tokio::time::timeout(KILL_WAIT, group.child().wait()).await.is_ok();
            if reaped {
                group.reap().await;
            }
            Err(match ended {
                Ended::TooLarge => too_large(),
                _ => format!(
                    "timed out after {} ms; its processes were killed and the call is blocked",
                    timeout.as_millis()
                ),
            })
        }
    }
}

/// The reason for an answer over [`STDOUT_LIMIT`].
fn too_large() -> String {
    format!("answer too large: more than {STDOUT_LIMIT} bytes on stdout; the call is blocked")
}

/// Why the wait loop ended.
enum Ended {
    /// The hook exited (or waiting for it failed).
    Exited(std::io::Result<std::process::ExitStatus>),
    /// The timeout passed.
    TimedOut,
    /// Stdout went over [`STDOUT_LIMIT`].
    TooLarge,
}

/// Stdout went over [`STDOUT_LIMIT`].
#[derive(Debug)]
struct TooLarge;

/// The reason a hook could not start.
fn start_error(program: &str, workspace: &Path, error: &std::io::Error) -> String {
    if !workspace.is_dir() {
        return format!(
            "could not start: the workspace {} is not a directory ({error}); the call is blocked",
            workspace.display()
        );
    }
    let what = match error.kind() {
        std::io::ErrorKind::NotFound => format!("program `{program}` was not found"),
        std::io::ErrorKind::PermissionDenied => format!("program `{program}` is not executable"),
        _ => error.to_string(),
    };
    format!("could not start: {what}; the call is blocked")
}

/// Writes the input to the hook's stdin, then closes it. Errors are ignored:
/// a hook that exits without reading its input (a broken pipe) may still
/// answer.
async fn feed(stdin: Option<tokio::process::ChildStdin>, payload: &[u8]) {
    use tokio::io::AsyncWriteExt as _;
    let Some(mut stdin) = stdin else { return };
    let _ = stdin.write_all(payload).await;
    let _ = stdin.shutdown().await;
}

/// Reads stdout to its end: `Err` as soon as it passes [`STDOUT_LIMIT`].
/// A read error ends the stream.
async fn read_stdout(stdout: Option<tokio::process::ChildStdout>) -> Result<Vec<u8>, TooLarge> {
    use tokio::io::AsyncReadExt as _;
    let mut buf = Vec::new();
    let Some(stdout) = stdout else { return Ok(buf) };
    let _ = stdout.take(STDOUT_LIMIT as u64 + 1).read_to_end(&mut buf).await;
    if buf.len() > STDOUT_LIMIT { Err(TooLarge) } else { Ok(buf) }
}

/// Reads stderr to its end, keeping the first [`STDERR_LIMIT`] bytes, and
/// whether there was more.
async fn read_stderr(stderr: Option<tokio::process::ChildStderr>) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = Vec::new();
    let Some(mut stderr) = stderr else { return (buf, false) };
    let _ = (&mut stderr).take(STDERR_LIMIT as u64).read_to_end(&mut buf).await;
    let rest = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await.unwrap_or(0);
    (buf, rest > 0)
}
