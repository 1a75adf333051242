//! A stdio server's process: the command that starts it (in a session and
//! process group of its own), its stdout read through [`BoundedLines`],
//! its stderr drained into a [`Tail`], and the monitor task that owns the
//! group and publishes why the connection is down.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_base::process_group::ProcessGroup;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
use tokio::io::AsyncReadExt as _;
use tokio::sync::watch;

use super::bounded_lines::BoundedLines;
use super::handler::Handler;
use super::stdin_pipe::{StdinCloser, stdin_pipe};
use super::{
    Down, EXIT_GRACE, INHERITED_ENV, REAP_WAIT, STDERR_TAIL, STDIN_CLOSE_GRACE, Serving, Starting, set_once,
};
use crate::mcp::McpError;
use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::era::Probing;
use crate::mcp::lone_surrogates::Repaired;

/// The last bytes of a stream, and whether it has ended.
#[derive(Default)]
pub(crate) struct Tail {
    bytes: Mutex<VecDeque<u8>>,
    done: AtomicBool,
}

impl Tail {
    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().expect("tail lock");
        bytes.extend(chunk);
        let excess = bytes.len().saturating_sub(STDERR_TAIL);
        bytes.drain(..excess);
    }

    /// The kept bytes as text (lossy).
    pub(crate) fn text(&self) -> String {
        let bytes = self.bytes.lock().expect("tail lock");
        let (a, b) = bytes.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }

    /// The tail once stderr has ended (or after a short wait).
    pub(crate) async fn settled(&self) -> String {
        for _ in 0..50 {
            if self.done.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.text()
    }
}

/// The command that starts a stdio server: `command` with `args`, an
/// environment of [`INHERITED_ENV`] and `env`, in `cwd` when given, with
/// piped stdin, stdout and stderr, in a session of its own (no controlling
/// terminal), killed when dropped.
pub(super) fn command(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(INHERITED_ENV.iter().filter_map(|k| Some((*k, std::env::var_os(k)?))))
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // A session of its own: no controlling terminal.
    codemode_base::process_group::in_new_session(&mut cmd);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    cmd
}

/// Spawns `cmd` (server `server`), starts the monitor of its process group
/// and the drain of its stderr (into `starting`), and returns the
/// handshake with `handler` over its stdin and bounded stdout.
///
/// # Errors
/// [`McpError::Spawn`] naming the command as written.
pub(super) fn serve(
    server: &ServerConfig,
    mut cmd: tokio::process::Command,
    lifecycle: ClientLifecycleMode,
    handler: Handler,
    starting: &mut Starting,
) -> Result<Serving, McpError> {
    // The command as written (`${VAR}` unexpanded).
    let spawn_error = |message: String| McpError::Spawn {
        server: server.name.clone(),
        command: match &server.shown {
            Transport::Stdio { command, .. } => command.clone(),
            Transport::Http { .. } => String::new(),
        },
        message,
    };
    let mut child = cmd.spawn().map_err(|e| spawn_error(e.to_string()))?;
    let (stdin, closer) = stdin_pipe(child.stdin.take().expect("piped stdin"));
    let stdout = child.stdout.take().expect("piped stdout");
    let child_stderr = child.stderr.take().expect("piped stderr");
    let group = ProcessGroup::new(child, "mcp server", REAP_WAIT)
        .ok_or_else(|| spawn_error("the process ended before it could be watched".into()))?;
    tokio::spawn(drain(child_stderr, starting.stderr.clone()));
    let closed = Arc::new(tokio::sync::Notify::new());
    let oversized = Arc::new(AtomicBool::new(false));
    let stdout = BoundedLines::new(Repaired::new(stdout), starting.limit, oversized.clone(), closed.clone())
        .counting(starting.listing.notified.clone())
        .tapped(starting.listing_tap.clone());
    let flags = [oversized, stdout.too_deep_flag()];
    starting.monitor =
        Some(tokio::spawn(watch_process(group, closer, starting.down_tx.clone(), closed, flags)));
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin);
    Ok(Box::pin(handler.serve_with_lifecycle(Probing::new(transport), lifecycle)))
}

/// Reads `stderr` into `tail` until it ends.
async fn drain(mut stderr: tokio::process::ChildStderr, tail: Arc<Tail>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.push(&buf[..n]);
    }
    tail.done.store(true, Ordering::Release);
}

/// Owns the process group: ends it when the child exits, stdout closes or
/// the connection is stopped, and publishes the cause.
///
/// A process still running is ended in the order of the MCP
/// specification's stdio shutdown (lifecycle, "Shutdown"): its stdin is
/// closed first, then it has [`STDIN_CLOSE_GRACE`] to exit by itself
/// ([`EXIT_GRACE`] when it closed its stdout: it is ending already), then
/// SIGTERM, then SIGKILL after the kill grace.
async fn watch_process(
    mut group: ProcessGroup,
    stdin: StdinCloser,
    down_tx: Arc<watch::Sender<Option<Down>>>,
    closed: Arc<tokio::sync::Notify>,
    [oversized, too_deep]: [Arc<AtomicBool>; 2],
) {
    let mut down = down_tx.subscribe();
    let status = tokio::select! {
        status = group.child().wait() => status.ok(),
        // stdout ended: it is ending; a moment to exit by itself.
        () = closed.notified() => exit_on_eof(&mut group, &stdin, EXIT_GRACE).await,
        () = async { let _ = down.wait_for(Option::is_some).await; } => {
            exit_on_eof(&mut group, &stdin, STDIN_CLOSE_GRACE).await
        }
    };
    if status.is_some() {
        // It exited: whatever it left in its group dies with it.
        group.kill();
    } else {
        // Still running with its stdin closed: SIGTERM, so it can end its
        // own children, then SIGKILL after the kill grace.
        let _ = group.terminate().await;
    }
    let _ = group.child().wait().await;
    group.reap().await;
    let cause = if oversized.load(Ordering::Acquire) {
        Down::TooLarge
    } else if too_deep.load(Ordering::Acquire) {
        Down::TooDeep
    } else {
        match status {
            Some(status) => Down::Ended(describe(status)),
            None => Down::Ended("it closed its stdout".into()),
        }
    };
    down_tx.send_if_modified(|d| set_once(d, cause));
}

/// Closes the server's stdin and waits up to `grace` for it to exit: its
/// status, or `None` when it is still running.
async fn exit_on_eof(
    group: &mut ProcessGroup,
    stdin: &StdinCloser,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    stdin.close();
    tokio::time::timeout(grace, group.child().wait()).await.ok().and_then(Result::ok)
}

/// `exited with status 3` / `was killed by signal 9`.
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("the process exited with status {code}"),
        (None, Some(signal)) => format!("the process was killed by signal {signal}"),
        _ => "the process ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let tail = Tail::default();
        tail.push(&vec![b'a'; STDERR_TAIL]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("aend"));
    }
}
