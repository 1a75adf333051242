//! A child process started in a process group of its own, and the cleanup
//! of that group: the one implementation shared by the `bash` tool, the
//! before-call hooks, the `cmd:` approvers and the MCP stdio servers. Unix
//! only.
//!
//! - **Own group.** The caller spawns the child with `process_group(0)`, so
//!   the group id is the child's pid, and with `kill_on_drop(true)`, so the
//!   direct child is killed (and handed to tokio's orphan reaping) whenever
//!   its [`tokio::process::Child`] is dropped without having been waited
//!   for. Everything the child starts stays in the group unless it leaves it
//!   (`setsid`, `setpgid`); such a process is neither killed nor reaped here
//!   (only cgroups could track it).
//! - **Kill.** [`ProcessGroup::kill`] sends SIGKILL to the whole group
//!   (`killpg`); a group that is already gone is fine.
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
//!   kills the group and, on the current tokio runtime if there is one,
//!   spawns a task that waits for the direct child and then reaps the group
//!   as above. Without a runtime (or when it is shutting down) the child is
//!   dropped instead, and `kill_on_drop(true)` has tokio's orphan reaping
//!   collect it.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::process::Child;

/// How often a group whose members are still alive is killed again and
/// polled while it is reaped.
const REAP_POLL: Duration = Duration::from_millis(5);

/// A just-started child that leads a process group of its own (see the
/// module docs), with a drop guard that kills and reaps the group.
pub(crate) struct ProcessGroup {
    /// The direct child; `None` only once handed to the drop-time reaper.
    child: Option<Child>,
    /// The group id (the child's pid).
    pgid: Pid,
    /// How long [`ProcessGroup::reap`] keeps trying.
    reap_wait: Duration,
    /// Who owns the group (`"bash"`, `"hook"`, ...), for the debug log.
    owner: &'static str,
    /// Whether the group may still have processes to kill and reap.
    armed: bool,
}

impl ProcessGroup {
    /// Takes charge of `child`, just spawned with `process_group(0)` and
    /// `kill_on_drop(true)`. `owner` names it in the debug log; `reap_wait`
    /// bounds every reap of the group.
    ///
    /// `None` (and `child` is dropped, so killed) when the child has no pid
    /// any more (it was already waited for) or one out of range.
    pub(crate) fn new(child: Child, owner: &'static str, reap_wait: Duration) -> Option<ProcessGroup> {
        let pgid = Pid::from_raw(i32::try_from(child.id()?).ok()?);
        Some(ProcessGroup { child: Some(child), pgid, reap_wait, owner, armed: true })
    }

    /// The direct child.
    pub(crate) fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the child is only taken on drop")
    }

    /// Sends SIGKILL to every process in the group.
    pub(crate) fn kill(&self) {
        kill_group(self.pgid);
    }

    /// Reaps the group's remaining members that are this process's children
    /// (the direct child must have been waited for already), for at most the
    /// reap wait, then disarms the drop guard. If this future is dropped
    /// before it ends, the guard is still armed and finishes the job.
    pub(crate) async fn reap(&mut self) {
        reap_group(self.pgid, self.owner, self.reap_wait).await;
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        kill_group(self.pgid);
        let (child, pgid, owner, reap_wait) = (self.child.take(), self.pgid, self.owner, self.reap_wait);
        // Reap the child first (so its status is tokio's), then the rest of
        // the group. Without a runtime the child is dropped, and
        // `kill_on_drop` hands it to tokio's orphan reaping.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Some(mut child) = child {
                    let _ = child.wait().await;
                }
                reap_group(pgid, owner, reap_wait).await;
            });
        }
    }
}

/// Sends SIGKILL to process group `pgid`; a group that is already gone is
/// fine.
fn kill_group(pgid: Pid) {
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
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
        command.args(["-c", script]).process_group(0).kill_on_drop(true);
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

    #[tokio::test]
    async fn a_child_already_waited_for_has_no_group() {
        let mut child = start("exit 0");
        child.wait().await.unwrap();
        assert!(ProcessGroup::new(child, "test", Duration::ZERO).is_none());
    }
}
