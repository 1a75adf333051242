//! Notices the client closing stdin as soon as the transport reads the
//! end of it. rmcp, seeing it, waits up to 5 s for the answers of the
//! requests in flight before its session ends, and the runs behind them
//! would go on meanwhile: a client that closed stdin is going away (the
//! MCP specification's stdio shutdown: stdin closed, then a grace, then
//! SIGTERM), so `serve_stdio` cancels its runs at once instead (their
//! receipts saved, their answers sent while stdout is open).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// A reader that cancels `closed` when a read finds the end of its input.
pub(crate) struct NoticesEnd<R> {
    inner: R,
    closed: CancellationToken,
}

impl<R> NoticesEnd<R> {
    /// `inner`, cancelling `closed` at its end.
    pub(crate) fn new(inner: R, closed: CancellationToken) -> Self {
        NoticesEnd { inner, closed }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for NoticesEnd<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining());
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && room > 0 && buf.filled().len() == before {
            self.closed.cancel();
        }
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn the_end_of_the_input_is_noticed_and_a_line_before_it_is_not() {
        let closed = CancellationToken::new();
        let mut reader = NoticesEnd::new(&b"{\"jsonrpc\":\"2.0\"}\n"[..], closed.clone());
        let mut line = [0u8; 8];
        reader.read_exact(&mut line).await.unwrap();
        assert!(!closed.is_cancelled(), "a read that got bytes is not the end");
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert!(closed.is_cancelled(), "the end was read");
    }
}
