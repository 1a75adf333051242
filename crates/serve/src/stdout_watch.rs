//! Noticing that nobody reads this process's stdout any more.
//!
//! An MCP client that closes the pipe it reads the server's answers from
//! (and keeps stdin open) would otherwise leave `codemode mcp serve`
//! running every program it still receives, side effects and all, for
//! answers no one can read: rmcp only fails each answer's write. The
//! kernel reports `POLLERR` on a pipe's writing end once its reading end
//! is closed (`POLLHUP` on a terminal that hung up), without a write: a
//! thread waits for that with `poll(2)` on fd 1.

use std::future::Future;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// How long one `poll` waits before the thread checks whether it is still
/// wanted (ms).
const RECHECK_MS: u16 = 500;

/// Stops the watching thread (within [`RECHECK_MS`]) when dropped.
pub(super) struct Watching(Arc<AtomicBool>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A future that completes when stdout reports an error or a hang-up, and
/// the guard that ends the watch. For a stdout that never does (a file,
/// `/dev/null`) the future never completes. If the thread cannot start,
/// nothing is watched.
pub(super) fn closed() -> (impl Future<Output = ()>, Watching) {
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watched = done.clone();
    let started = std::thread::Builder::new().name("codemode-stdout-watch".into()).spawn(move || {
        let stdout = std::io::stdout();
        while !watched.load(Ordering::Relaxed) {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::from(RECHECK_MS)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {
                    let gone = PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL;
                    if fds[0].revents().is_some_and(|r| r.intersects(gone)) {
                        let _ = tx.send(());
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    if started.is_err() {
        tracing::warn!("cannot watch stdout: a client that closes it leaves this server running");
    }
    let gone = async move {
        if rx.await.is_err() {
            // Not watched, or the watch ended: never.
            std::future::pending::<()>().await;
        }
    };
    (gone, Watching(done))
}
