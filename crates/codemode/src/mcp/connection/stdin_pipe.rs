//! A stdio server's stdin, shared between the rmcp transport that writes
//! to it and the process monitor that closes it at shutdown: the MCP
//! specification's stdio shutdown begins by closing the server's input
//! stream, before any signal (see `stdio_transport::watch_process`).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio::process::ChildStdin;

/// The pipe, until it is closed.
type Shared = Arc<Mutex<Option<ChildStdin>>>;

/// The writing end the transport gets. Shutting it down or dropping it
/// closes the pipe, as dropping a plain [`ChildStdin`] would; a write
/// after the pipe was closed fails with `BrokenPipe`.
pub(super) struct StdinPipe(Shared);

/// What closes the pipe from elsewhere (the monitor).
#[derive(Clone)]
pub(super) struct StdinCloser(Shared);

/// Splits `stdin` into the writer and its closer.
pub(super) fn stdin_pipe(stdin: ChildStdin) -> (StdinPipe, StdinCloser) {
    let shared = Arc::new(Mutex::new(Some(stdin)));
    (StdinPipe(shared.clone()), StdinCloser(shared))
}

impl StdinCloser {
    /// Closes the pipe (the server reads end of file). Idempotent.
    pub(super) fn close(&self) {
        drop(self.0.lock().expect("stdin lock").take());
    }
}

impl StdinPipe {
    /// Polls `f` on the open pipe; `BrokenPipe` once it is closed.
    fn with<T>(&self, f: impl FnOnce(Pin<&mut ChildStdin>) -> Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match self.0.lock().expect("stdin lock").as_mut() {
            Some(stdin) => f(Pin::new(stdin)),
            None => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "the server's stdin is closed")))
            }
        }
    }
}

impl AsyncWrite for StdinPipe {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.with(|stdin| stdin.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.0.lock().expect("stdin lock").as_mut() {
            Some(stdin) => Pin::new(stdin).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = self.with(|stdin| stdin.poll_flush(cx));
        if flushed.is_pending() {
            return Poll::Pending;
        }
        drop(self.0.lock().expect("stdin lock").take());
        Poll::Ready(Ok(()))
    }
}

impl Drop for StdinPipe {
    fn drop(&mut self) {
        // As dropping the ChildStdin would: the server reads end of file.
        if let Ok(mut stdin) = self.0.lock() {
            stdin.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn the_closer_ends_the_servers_input_and_later_writes_fail() {
        let mut child = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (mut pipe, closer) = stdin_pipe(child.stdin.take().unwrap());
        pipe.write_all(b"hello\n").await.unwrap();
        closer.close();
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "hello\n", "cat saw end of file");
        assert!(child.wait().await.unwrap().success());
        let e = pipe.write_all(b"late\n").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
