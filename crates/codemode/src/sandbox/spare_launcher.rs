//! The engine's spare sandbox launcher: one launcher process started ahead
//! of the next sandboxed bash call, waiting for its spec, so that a call
//! does not wait for a process to be started and loaded (about half of
//! what the sandbox adds to a call; docs/PERFORMANCE.md, W9).
//!
//! A launcher knows nothing of its call until it reads the spec on its
//! stdin (`codemode_sandbox::launcher::LaunchSpec`, the command's
//! environment included): it is started with an empty environment, in the
//! workspace, the way [`start_launcher`] starts every launcher, and does
//! nothing but wait on that read. Its stdin is a socket (no process can
//! open it through `/proc/PID/fd/0`), and it is not dumpable while it
//! waits (docs/SECURITY.md says what is not defended). Every step of the
//! sandbox (namespaces, mounts, Landlock, the filters) is made per call
//! after the spec came. What a process inherits from the one that starts
//! it and a host may change while the engine runs (resource limits, the
//! cgroup, the umask, credentials and capabilities, CPU affinity, nice,
//! the scheduling policy, the I/O priority, the OOM score:
//! [`process_settings`]) is read when a spare starts, and a
//! call uses the spare only when they read the same then, so that a
//! spare confines its call as a launcher started for it would.
//!
//! The first sandboxed call of an engine starts its launcher itself; once
//! a call's launcher has its spec, [`SpareLauncher::prepare_next`] starts
//! the next call's on the tool runtime, beside that call (so that it is
//! ready for a call that follows at once). A call takes the spare
//! when one of its launcher is waiting, alive and not stopped, else starts
//! its own (the spare is then killed); one that dies after it was taken,
//! before its spec is written, is replaced too. The spare is killed
//! and reaped when the engine's [`Confinement`](super::Confinement) is
//! dropped, and, blocked on its stdin, it ends by itself when the engine's
//! process ends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One engine's spare launcher (none until its first sandboxed call).
/// Clones share it.
#[derive(Clone, Default)]
pub struct SpareLauncher(Arc<Mutex<Spare>>);

/// A spare launcher waiting for its spec.
struct Waiting {
    /// The launcher it runs.
    launcher: PathBuf,
    launched: Launched,
    /// [`process_settings`] when it was started.
    settings: Option<String>,
}

/// A launcher process and the engine's end of its stdin.
pub(crate) struct Launched {
    /// The launcher (`kill_on_drop`), its stdout and stderr piped.
    pub child: tokio::process::Child,
    /// The engine's end of the socket pair that is the launcher's stdin:
    /// the spec goes there, then the go. A socket, not a pipe: another
    /// process cannot open it through `/proc/PID/fd/0` (`ENXIO`), however
    /// early it tries.
    pub input: tokio::net::UnixStream,
}

#[derive(Default)]
struct Spare {
    /// The launcher and workspace of the last call: what the next spare is
    /// started as.
    last: Option<(PathBuf, PathBuf)>,
    /// The spare, waiting for its spec.
    waiting: Option<Waiting>,
    /// A spare is being started.
    starting: bool,
}

impl SpareLauncher {
    /// A launcher for a call, and whether it is the spare: the spare when
    /// one of `launcher` is waiting, alive and not stopped, and started
    /// under the [`process_settings`] this thread has now; else one started
    /// now (in `workspace`, [`start_launcher`]). Remembers `launcher` and
    /// `workspace` for [`SpareLauncher::prepare_next`].
    ///
    /// # Errors
    /// When no launcher can be started (the `io::Error` of the spawn).
    pub(crate) fn take_or_start(
        &self,
        launcher: &Path,
        workspace: &Path,
    ) -> std::io::Result<(Launched, bool)> {
        let spare = {
            let mut spare = self.lock();
            spare.last = Some((launcher.to_path_buf(), workspace.to_path_buf()));
            spare.waiting.take()
        };
        if let Some(mut spare) = spare
            && spare.launcher == launcher
            && spare.settings.is_some()
            && spare.settings == process_settings()
            && waiting_still(&mut spare.launched.child)
        {
            return Ok((spare.launched, true));
        }
        // None, another launcher's, one started under other settings, or
        // one that ended or was stopped: dropping it kills it
        // (`kill_on_drop`), and one is started for the call.
        Ok((start_launcher(launcher, workspace)?, false))
    }

    /// Starts a spare for the next call on the current tokio runtime, as
    /// the last call's launcher, unless one is waiting or starting, or no
    /// call has taken a launcher yet. A spare that cannot be started is not
    /// retried until the next call ends; that call starts its own.
    pub(crate) fn prepare_next(&self) {
        let (launcher, workspace) = {
            let mut spare = self.lock();
            if spare.waiting.is_some() || spare.starting {
                return;
            }
            let Some(last) = spare.last.clone() else { return };
            spare.starting = true;
            last
        };
        let this = self.clone();
        // Started on a worker of the tool runtime, as a call's launcher is:
        // the launcher dies with the thread that started it
        // (`PR_SET_PDEATHSIG`, set once it has its spec), and the runtime's
        // workers live as long as it does.
        tokio::spawn(async move {
            let settings = process_settings();
            let started = start_launcher(&launcher, &workspace);
            let mut spare = this.lock();
            spare.starting = false;
            match started {
                Ok(launched) if spare.waiting.is_none() => {
                    spare.waiting = Some(Waiting { launcher, launched, settings })
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("no spare sandbox launcher: {e}"),
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Spare> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `child` is still waiting as it was started: not ended, not
/// stopped (a spare stopped from outside would hold its call until its
/// timeout), and traced by no process (one that attached in the instants
/// after its start, before it made itself not dumpable, could make its
/// system calls read another spec).
fn waiting_still(child: &mut tokio::process::Child) -> bool {
    if !matches!(child.try_wait(), Ok(None)) {
        return false;
    }
    let Some(pid) = child.id() else { return false };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find_map(|line| line.strip_prefix(name)).map(|value| value.trim_start().to_owned())
    };
    let running = field("State:").is_some_and(|state| state.starts_with(['S', 'R', 'D']));
    running && field("TracerPid:").as_deref() == Some("0")
}

/// What a process inherits from the thread that starts it and a host may
/// change while the engine runs, as text to compare: the resource limits
/// and the cgroup (`/proc/self/limits`, `/proc/self/cgroup`), the OOM
/// score adjustment, and of this thread the umask, credentials,
/// capabilities, `no_new_privs`, seccomp mode, CPU and memory-node
/// affinity (`/proc/thread-self/status`), nice and the scheduling policy
/// and real-time priority (`stat`) and the I/O priority (`ioprio_get`).
/// `None` when one cannot be read (no spare is used then).
fn process_settings() -> Option<String> {
    const STATUS_LINES: [&str; 13] = [
        "Umask:",
        "Uid:",
        "Gid:",
        "Groups:",
        "NoNewPrivs:",
        "Seccomp:",
        "CapInh:",
        "CapPrm:",
        "CapEff:",
        "CapBnd:",
        "CapAmb:",
        "Cpus_allowed_list:",
        "Mems_allowed_list:",
    ];
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut text = String::new();
    for path in ["/proc/self/limits", "/proc/self/cgroup", "/proc/self/oom_score_adj"] {
        text.push_str(&read(path)?);
    }
    let status = read("/proc/thread-self/status")?;
    for line in status.lines().filter(|l| STATUS_LINES.iter().any(|name| l.starts_with(name))) {
        text.push_str(line);
        text.push('\n');
    }
    // Fields 19 (nice), 40 (real-time priority) and 41 (policy) of
    // `stat`: the 17th, 38th and 39th after the command's parenthesis.
    let stat = read("/proc/thread-self/stat")?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    for index in [16, 37, 38] {
        text.push_str(fields.get(index)?);
        text.push(' ');
    }
    text.push_str(&io_priority()?.to_string());
    Some(text)
}

/// This thread's I/O priority (`ioprio_get(IOPRIO_WHO_PROCESS, 0)`), which
/// a process started from it inherits.
fn io_priority() -> Option<i64> {
    /// `IOPRIO_WHO_PROCESS` of <linux/ioprio.h>.
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    #[allow(unsafe_code)]
    // SAFETY: ioprio_get takes two integers and reads or writes no memory
    // of the process.
    let priority = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0 as libc::c_long) };
    (priority >= 0).then_some(priority)
}

/// Starts the sandbox `launcher` as `<launcher> __sandbox-exec PROTOCOL
/// spec-on-stdin`, in `workspace`, with an empty environment (the
/// command's is in its spec), one end of a Unix socket pair as stdin (for
/// the spec, then the go; [`Launched::input`] is the other), stdout and
/// stderr piped, killed on drop. Nothing runs between fork and exec (the
/// launcher makes its session itself), so the standard library starts it
/// with `posix_spawn` (a `vfork`-like clone that neither copies the
/// engine's page tables nor makes its memory copy-on-write), about 0.7 ms
/// less than a `fork` of the engine (docs/PERFORMANCE.md, W9). Until the
/// launcher's `setsid`, a signal to its group finds none: `kill_on_drop`
/// still ends it by pid.
///
/// # Errors
/// The socket pair's or the spawn's.
pub(crate) fn start_launcher(launcher: &Path, workspace: &Path) -> std::io::Result<Launched> {
    use std::process::Stdio;

    use codemode_sandbox::launcher::{PROTOCOL, SPEC_ON_STDIN, SUBCOMMAND};
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let input = tokio::net::UnixStream::from_std(ours)?;
    let mut cmd = tokio::process::Command::new(launcher);
    cmd.args([SUBCOMMAND, PROTOCOL, SPEC_ON_STDIN])
        .current_dir(workspace)
        .env_clear()
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // `cmd`, holding the launcher's end, is dropped on return: the
    // launcher's is then the only one, and it reads the end of its stdin
    // when the engine drops `input`.
    Ok(Launched { child: cmd.spawn()?, input })
}

impl Drop for Spare {
    /// Kills the spare and reaps it (it dies at once: it is blocked on a
    /// read), waiting at most 50 ms; one not reaped by then is left to the
    /// runtime's reaper (`kill_on_drop`).
    fn drop(&mut self) {
        if let Some(Waiting { launched: Launched { mut child, .. }, .. }) = self.waiting.take() {
            let _ = child.start_kill();
            for _ in 0..50 {
                if !matches!(child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

impl std::fmt::Debug for SpareLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let spare = self.lock();
        match &spare.waiting {
            Some(w) => write!(f, "SpareLauncher({} pid {:?})", w.launcher.display(), w.launched.child.id()),
            None => f.write_str("SpareLauncher(none)"),
        }
    }
}

/// Two are equal when they are the same (clones of one engine's).
impl PartialEq for SpareLauncher {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SpareLauncher {}
