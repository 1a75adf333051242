//! stdin and stdout as non-blocking streams when they are sockets.
//!
//! A client written for Node.js starts `codemode mcp serve` with
//! `child_process.spawn`, whose stdio "pipes" are UNIX stream sockets
//! (libuv makes a socket pair per stream). rmcp's stdio transport drives
//! FIFOs through the reactor and falls back to tokio's `Stdin`/`Stdout`
//! for anything else, which read and write on the blocking thread pool: a
//! hand-off to another thread and back for each message read and each
//! answer written (about a fifth of an `execute_tools` round trip of
//! `return 1`; docs/PERFORMANCE.md). Here a socket is read and written
//! from the reactor with `recv`/`send` and `MSG_DONTWAIT`, which asks for
//! a non-blocking call without setting `O_NONBLOCK` on the socket: the
//! flag belongs to the open file, which the process's own fd 0 and 1 (and
//! anything that inherits them) share.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, SockType, getsockopt, recv, send, sockopt};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The reading end: a copy of fd 0, read with `recv(MSG_DONTWAIT)`.
pub(crate) struct SocketIn(AsyncFd<OwnedFd>);

/// The writing end: a copy of fd 1, written with
/// `send(MSG_DONTWAIT | MSG_NOSIGNAL)`.
pub(crate) struct SocketOut(AsyncFd<OwnedFd>);

/// stdin and stdout as [`SocketIn`] and [`SocketOut`] when both are stream
/// sockets; `None` otherwise (FIFOs, files, terminals: rmcp's own stdio
/// transport takes them). Must be called inside a tokio runtime with IO
/// enabled.
pub(crate) fn socket_stdio() -> Option<(SocketIn, SocketOut)> {
    let stdin = stream_socket(std::io::stdin().as_fd().try_clone_to_owned().ok()?)?;
    let stdout = stream_socket(std::io::stdout().as_fd().try_clone_to_owned().ok()?)?;
    Some((
        SocketIn(registered(stdin, Interest::READABLE)?),
        SocketOut(registered(stdout, Interest::WRITABLE)?),
    ))
}

/// `fd` registered with the reactor for `interest`.
fn registered(fd: OwnedFd, interest: Interest) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: `register_with_interest` needs the descriptor to stay open,
    // on the same open file, under the same number while the `AsyncFd`
    // lives: the `OwnedFd` is moved into it and owned by it until it drops.
    #[allow(unsafe_code)]
    let fd = unsafe { AsyncFd::register_with_interest(fd, interest) };
    fd.ok()
}

/// `fd` when it is a stream socket.
fn stream_socket(fd: OwnedFd) -> Option<OwnedFd> {
    matches!(getsockopt(&fd, sockopt::SockType), Ok(SockType::Stream)).then_some(fd)
}

impl AsyncRead for SocketIn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = ready
                .try_io(|fd| recv(fd.as_raw_fd(), unfilled, MsgFlags::MSG_DONTWAIT).map_err(io::Error::from));
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness was cleared, wait again.
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for SocketOut {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
            match ready.try_io(|fd| send(fd.as_raw_fd(), bytes, flags).map_err(io::Error::from)) {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(written) => return Poll::Ready(written),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here: `send` hands the bytes to the kernel.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The copy of fd 1 closes with this value; fd 1 itself stays open
        // (as tokio's `Stdout` leaves it), so no `shutdown(2)` here.
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn pair_halves(a: &UnixStream, b: &UnixStream) -> (SocketIn, SocketOut) {
        let read = stream_socket(a.as_fd().try_clone_to_owned().unwrap()).expect("a stream socket");
        let write = stream_socket(b.as_fd().try_clone_to_owned().unwrap()).expect("a stream socket");
        (
            SocketIn(registered(read, Interest::READABLE).unwrap()),
            SocketOut(registered(write, Interest::WRITABLE).unwrap()),
        )
    }

    #[tokio::test]
    async fn lines_go_both_ways_and_the_socket_stays_blocking() {
        let (ours_in, theirs_in) = UnixStream::pair().unwrap();
        let (ours_out, theirs_out) = UnixStream::pair().unwrap();
        let (mut reader, mut writer) = pair_halves(&ours_in, &ours_out);
        std::io::Write::write_all(&mut &theirs_in, b"{\"jsonrpc\":\"2.0\"}\n").unwrap();
        let mut got = [0u8; 64];
        let n = reader.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"{\"jsonrpc\":\"2.0\"}\n");
        // More than a socket buffer holds: `send` returns EAGAIN partway,
        // and the write waits for the reader instead of failing.
        let big = vec![b'x'; 4 << 20];
        let reading = std::thread::spawn(move || {
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut &theirs_out, &mut all).unwrap();
            all.len()
        });
        writer.write_all(&big).await.unwrap();
        drop(writer);
        drop(ours_out);
        assert_eq!(reading.join().unwrap(), big.len());
        // The open file (shared with the process's own fd) is not made
        // non-blocking.
        let flags = nix::fcntl::fcntl(&ours_in, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(flags & nix::libc::O_NONBLOCK, 0, "O_NONBLOCK set on the shared socket");
        // The peer closing is the end of input.
        drop(theirs_in);
        assert_eq!(reader.read(&mut got).await.unwrap(), 0);
    }

    #[test]
    fn a_pipe_is_not_taken() {
        let (read, _write) = nix::unistd::pipe().unwrap();
        assert!(stream_socket(read).is_none(), "a FIFO is rmcp's to drive");
    }
}
