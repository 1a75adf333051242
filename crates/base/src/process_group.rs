//! A child process started in a process group of its own, and the cleanup
//! of that group: the one implementation shared by the `bash` tool, the
//! before-call hooks, the `cmd:` approvers and the MCP stdio servers. Unix
//! only.
//!
//! - **Own session.** The caller spawns the child through [`in_new_session`]
//!   (`setsid` between fork and exec), so the child has no controlling
//!   terminal (it cannot open `/dev/tty`, read the user's terminal or push
//!   keystrokes into it with `TIOCSTI`) and leads a new process group whose
//!   id is its pid; and with `kill_on_drop(true)`, so the direct child is
//!   killed (and handed to tokio's orphan reaping) whenever its
//!   [`tokio::process::Child`] is dropped without having been waited for.
//!   Everything the child starts stays in the group unless it leaves it
//!   (`setsid`, `setpgid`); such a process is neither killed nor reaped here
//!   (only cgroups, or the bash sandbox's PID namespace, track it).
//! - **Kill.** [`ProcessGroup::kill`] sends SIGKILL to the whole group
//!   (`killpg`); a group that is already gone is fine.
//!   [`ProcessGroup::terminate`] ends a group that is still at work: SIGTERM,
//!   up to the kill grace ([`DEFAULT_KILL_GRACE`] unless
//!   [`ProcessGroup::with_kill_grace`] says otherwise) for the direct child
//!   to exit, so a nested codemode or a server can end its own children,
//!   then SIGKILL.
//! - **Reap.** [`ProcessGroup::reap`], once the direct child has been waited
//!   for (tokio reaps it, so its status is tokio's), collects the group's
//!   remaining members that are this process's children with
//!   `waitpid(-pgid, WNOHANG)`: the child's orphans, which this process
//!   inherits when it is PID 1 or a child subreaper. That call only ever
//!   collects processes of that group, never another child the host or
//!   tokio is waiting for. While any member is alive the group is killed
//!   again, polling every 5 ms, for at most the wait the caller gave
//!   [`ProcessGroup::new`]; then it gives up (logged at debug level). When
//!   this process is neither PID 1 nor a subreaper the orphans are PID 1's
//!   to reap, and the loop ends at once (`ECHILD`).
//! - **Drop guard.** Until [`ProcessGroup::reap`] has finished, dropping the
//!   [`ProcessGroup`] (the caller's future cancelled, or an early return)
//!   sends the group SIGTERM and, on the current tokio runtime if there is
//!   one, spawns a task that waits up to the kill grace for the direct child,
//!   sends SIGKILL, waits for the child and then reaps the group as above.
//!   Without a runtime (or when it is shutting down) the group gets SIGKILL
//!   at once and the child is dropped, and `kill_on_drop(true)` has tokio's
//!   orphan reaping collect it.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::process::Child;

use crate::DEFAULT_KILL_GRACE;

/// Makes `command`'s child start a new session (`setsid(2)` between fork
/// and exec): no controlling terminal, and a new process group whose id is
/// the child's pid. Do not combine with `process_group`: a group leader
/// cannot start a session.
pub fn in_new_session(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and calls
    // only setsid(2), which is async-signal-safe; it allocates nothing (an
    // `io::Error` from a raw OS error is a plain value) and takes no lock.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid().map(drop).map_err(|e| std::io::Error::from_raw_os_error(e as i32))
        })
    }
}

/// Makes `command`'s child (a hook, a `cmd:` approver) die when this
/// process does: `PR_SET_PDEATHSIG` with SIGKILL between fork and exec, and
/// a refusal to start when the parent is already gone. In their own
/// session, nothing else ties their lives to codemode's, so a SIGKILLed
/// codemode would leave them running. (The signal follows the spawning
/// thread: use it only for children spawned from the tool runtime's worker
/// threads, which live as long as the engine; not for MCP servers, which
/// may outlive the thread that started them.)
pub fn dying_with_parent(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    let parent = nix::unistd::getpid();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and calls
    // only prctl(2) and getppid(2), which are async-signal-safe; it
    // allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            Ok(())
        })
    }
}

/// How often a group whose members are still alive is killed again and
/// polled while it is reaped.
const REAP_POLL: Duration = Duration::from_millis(5);

/// A just-started child that leads a process group of its own (see the
/// module docs), with a drop guard that kills and reaps the group.
pub struct ProcessGroup {
    /// The direct child; `None` only once handed to the drop-time reaper.
    child: Option<Child>,
    /// The group id (the child's pid).
    pgid: Pid,
    /// How long [`ProcessGroup::reap`] keeps trying.
    reap_wait: Duration,
    /// Who owns the group (`"bash"`, `"hook"`, ...), for the debug log.
    owner: &'static str,
    /// Between SIGTERM and SIGKILL when the group is ended early.
    kill_grace: Duration,
    /// Whether the group may still have processes to kill and reap.
    armed: bool,
    /// Dropped only once the group is gone ([`ProcessGroup::keep_until_gone`]).
    kept: Option<Box<dyn std::any::Any + Send>>,
}

impl ProcessGroup {
    /// Takes charge of `child`, just spawned through [`in_new_session`] (or
    /// with `process_group(0)`) and `kill_on_drop(true)`. `owner` names it in the debug log; `reap_wait`
    /// bounds every reap of the group.
    ///
    /// `None` (and `child` is dropped, so killed) when the child has no pid
    /// any more (it was already waited for) or one out of range.
    pub fn new(child: Child, owner: &'static str, reap_wait: Duration) -> Option<ProcessGroup> {
        let pgid = Pid::from_raw(i32::try_from(child.id()?).ok()?);
        Some(ProcessGroup {
            child: Some(child),
            pgid,
            reap_wait,
            owner,
            kill_grace: DEFAULT_KILL_GRACE,
            armed: true,
            kept: None,
        })
    }

    /// Keeps `value` until the group is gone: dropped with the group once
    /// it is reaped, or, when the group is dropped early (a cancelled
    /// call), only after its grace, SIGKILL and reaping. What the group's
    /// processes use (a command's private temporary folder) is then never
    /// removed while one of them can still change it.
    pub fn keep_until_gone(mut self, value: impl Send + 'static) -> ProcessGroup {
        self.kept = Some(Box::new(value));
        self
    }

    /// Takes back what [`ProcessGroup::keep_until_gone`] kept, for a caller
    /// that knows by other means that no process of the group can use it
    /// any more (a sandboxed command's init killed and reaped everything
    /// else in its PID namespace before it reported the shell's status), so
    /// that it is released now rather than once the group is reaped.
    pub fn take_kept(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        self.kept.take()
    }

    /// Sets the grace period between SIGTERM and SIGKILL (default
    /// [`DEFAULT_KILL_GRACE`]).
    pub fn with_kill_grace(mut self, kill_grace: Duration) -> ProcessGroup {
        self.kill_grace = kill_grace;
        self
    }

    /// The direct child.
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the child is only taken on drop")
    }

    /// Sends SIGKILL to every process in the group.
    pub fn kill(&self) {
        kill_group(self.pgid);
    }

    /// Ends a group still at work: SIGTERM to every process in it, up to the
    /// kill grace for the direct child to exit, then SIGKILL to the group;
    /// returns the direct child's status. Adds at most the kill grace to the
    /// time the child takes to die.
    ///
    /// A child that has not made its group yet (the sandbox launcher
    /// starts its own session first thing, so there is a moment when no
    /// group has its pid) has run nothing of the command: it is killed at
    /// once instead of being given the grace.
    pub async fn terminate(&mut self) -> std::io::Result<std::process::ExitStatus> {
        if !signal_group(self.pgid, Signal::SIGTERM) {
            let _ = self.child().start_kill();
        }
        let grace = self.kill_grace;
        let exited = tokio::time::timeout(grace, self.child().wait()).await;
        kill_group(self.pgid);
        match exited {
            Ok(status) => status,
            Err(_) => self.child().wait().await,
        }
    }

    /// Reaps the group's remaining members that are this process's children
    /// (the direct child must have been waited for already), for at most the
    /// reap wait, then disarms the drop guard. If this future is dropped
    /// before it ends, the guard is still armed and finishes the job.
    pub async fn reap(&mut self) {
        reap_group(self.pgid, self.owner, self.reap_wait).await;
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (child, pgid, owner, reap_wait) = (self.child.take(), self.pgid, self.owner, self.reap_wait);
        let kept = self.kept.take();
        let grace = self.kill_grace;
        // SIGTERM, the grace, SIGKILL; reap the child first (so its status
        // is tokio's), then the rest of the group. Without a runtime: SIGKILL
        // now, and the child is dropped, so `kill_on_drop` hands it to
        // tokio's orphan reaping.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let mut child = child;
                if !signal_group(pgid, Signal::SIGTERM)
                    && let Some(child) = child.as_mut()
                {
                    // No group yet: nothing of the command ran (see
                    // `terminate`).
                    let _ = child.start_kill();
                }
                rt.spawn(async move {
                    if let Some(mut child) = child {
                        let _ = tokio::time::timeout(grace, child.wait()).await;
                        kill_group(pgid);
                        let _ = child.wait().await;
                    }
                    kill_group(pgid);
                    reap_group(pgid, owner, reap_wait).await;
                    drop(kept);
                });
            }
            Err(_) => kill_group(pgid),
        }
    }
}

/// Sends SIGKILL to process group `pgid`; a group that is already gone is
/// fine.
fn kill_group(pgid: Pid) {
    let _ = signal_group(pgid, Signal::SIGKILL);
}

/// Sends `signal` to process group `pgid`; whether a group has that id (a
/// group that is already gone is fine for the callers).
fn signal_group(pgid: Pid, signal: Signal) -> bool {
    nix::sys::signal::killpg(pgid, signal).is_ok()
}

/// Reaps every process of group `pgid` that is this process's child,
/// killing the group again while any is alive, for at most `reap_wait`.
/// Only processes of that group are ever collected.
async fn reap_group(pgid: Pid, owner: &str, reap_wait: Duration) {
    let give_up = tokio::time::Instant::now() + reap_wait;
    let members = Pid::from_raw(-pgid.as_raw());
    loop {
        match waitpid(members, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if tokio::time::Instant::now() >= give_up {
                    tracing::debug!(
                        pgid = pgid.as_raw(),
                        "{owner}: processes of the group outlived the reap wait"
                    );
                    return;
                }
                kill_group(pgid);
                tokio::time::sleep(REAP_POLL).await;
            }
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: no process of the group is our child any more.
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c script`, started as the callers start their children.
    fn start(script: &str) -> Child {
        let mut command = tokio::process::Command::new("sh");
        in_new_session(command.args(["-c", script]).kill_on_drop(true));
        command.spawn().unwrap()
    }

    #[tokio::test]
    async fn kill_ends_the_whole_group_and_reap_disarms() {
        let mut group =
            ProcessGroup::new(start("sleep 1000 & wait"), "test", Duration::from_secs(2)).unwrap();
        assert_eq!(group.child().id(), Some(group.pgid.as_raw() as u32));
        group.kill();
        let status = group.child().wait().await.unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9));
        group.reap().await;
        assert!(!group.armed);
        // Killing a group that is gone is fine.
        group.kill();
    }

    /// Polls until `path` exists (the shell's traps are set).
    async fn wait_for(path: &std::path::Path) {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn terminate_sends_sigterm_first_then_sigkill_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("cleaned");
        let ready = dir.path().join("ready");
        let script = format!(
            "trap 'echo yes > {}; exit 7' TERM; touch {}; sleep 1000 & wait",
            done.display(),
            ready.display()
        );
        let mut group = ProcessGroup::new(start(&script), "test", Duration::from_secs(2))
            .unwrap()
            .with_kill_grace(Duration::from_secs(5));
        wait_for(&ready).await;
        let status = group.terminate().await.unwrap();
        assert_eq!(status.code(), Some(7));
        assert_eq!(std::fs::read_to_string(&done).unwrap(), "yes\n");
        group.reap().await;

        let ignoring = dir.path().join("ignoring");
        let script = format!("trap '' TERM; touch {}; sleep 1000", ignoring.display());
        let mut group = ProcessGroup::new(start(&script), "test", Duration::from_secs(2))
            .unwrap()
            .with_kill_grace(Duration::from_millis(200));
        wait_for(&ignoring).await;
        let status = group.terminate().await.unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "killed after the grace");
        group.reap().await;
    }

    /// What a group keeps is dropped only once the group is gone, also
    /// when the group is dropped early with a process ignoring SIGTERM.
    #[tokio::test]
    async fn what_a_group_keeps_outlives_its_processes_when_it_is_dropped_early() {
        struct Guard(std::sync::Arc<std::sync::Mutex<Option<bool>>>, Pid);
        impl Drop for Guard {
            fn drop(&mut self) {
                // Whether the group's leader was still there (not reaped).
                let alive = nix::sys::signal::kill(self.1, None).is_ok();
                *self.0.lock().unwrap() = Some(alive);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let ignoring = dir.path().join("ignoring");
        let script = format!("trap '' TERM; touch {}; sleep 1000", ignoring.display());
        let child = start(&script);
        let pid = Pid::from_raw(child.id().unwrap() as i32);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let group = ProcessGroup::new(child, "test", Duration::from_secs(2))
            .unwrap()
            .with_kill_grace(Duration::from_millis(300))
            .keep_until_gone(Guard(seen.clone(), pid));
        wait_for(&ignoring).await;
        drop(group);
        assert_eq!(*seen.lock().unwrap(), None, "kept while the group's grace runs");
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while seen.lock().unwrap().is_none() {
            assert!(std::time::Instant::now() < until, "never dropped");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*seen.lock().unwrap(), Some(false), "dropped only once the group was gone");
    }

    #[tokio::test]
    async fn a_child_already_waited_for_has_no_group() {
        let mut child = start("exit 0");
        child.wait().await.unwrap();
        assert!(ProcessGroup::new(child, "test", Duration::ZERO).is_none());
    }
}
