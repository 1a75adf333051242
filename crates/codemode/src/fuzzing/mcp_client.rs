//! Entry points for what the MCP client reads from a server: a stdio
//! server's stdout (the surrogate repair and the line and depth bounds),
//! and, with the `oauth` feature, an authorization server's answers and
//! the login file kept on disk.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};

use crate::mcp::connection::ListingTap;
use crate::mcp::connection::bounded_lines::BoundedLines;
use crate::mcp::lone_surrogates::{Repaired, SurrogateRepair};

/// What the MCP client's rmcp reads of a stdio server's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdoutRead {
    /// The bytes handed to rmcp: the server's, each lone surrogate's
    /// escape replaced, cut before a line over a bound.
    pub bytes: Vec<u8>,
    /// `Some("size")` or `Some("depth")` when a line over that bound ended
    /// the stream.
    pub ended_by: Option<&'static str>,
    /// The `notifications/tools/list_changed` lines counted as they passed.
    pub list_changed: u64,
}

/// Reads `stdout` (a server's stdout, whole) as the stdio transport does:
/// through the surrogate repair and the line bounds (`limit` bytes a line,
/// [`MAX_JSON_DEPTH`](crate::mcp::MAX_JSON_DEPTH) levels), its whole lines
/// shown to the listing tap and its `list_changed` lines counted, the
/// server writing `piece` bytes at a time (at least 1).
pub fn mcp_stdout(stdout: &[u8], piece: usize, limit: usize) -> StdoutRead {
    let server = Pieces { rest: stdout, piece: piece.max(1) };
    let oversized = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut lines = BoundedLines::new(Repaired::new(server), limit, oversized.clone(), Arc::default())
        .counting(count.clone())
        .tapped(ListingTap::default());
    let too_deep = lines.too_deep_flag();
    let mut bytes = Vec::new();
    let read = runtime().block_on(lines.read_to_end(&mut bytes));
    debug_assert!(read.is_ok(), "reading from memory does not fail");
    let ended_by = if oversized.load(Ordering::Acquire) {
        Some("size")
    } else if too_deep.load(Ordering::Acquire) {
        Some("depth")
    } else {
        None
    };
    StdoutRead { bytes, ended_by, list_changed: count.load(Ordering::Acquire) }
}

/// One line (no newline in it) through a fresh surrogate repair, whole:
/// what [`mcp_stdout`] hands out for that line wherever it stands in the
/// stream.
pub fn mcp_repair_line(line: &[u8]) -> Vec<u8> {
    let mut bytes = line.to_vec();
    let decided = SurrogateRepair::default().repair(&mut bytes, true);
    debug_assert_eq!(decided, bytes.len());
    bytes
}

/// A reader of `rest`, `piece` bytes per read.
struct Pieces<'a> {
    rest: &'a [u8],
    piece: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.piece.min(self.rest.len()).min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        Poll::Ready(Ok(()))
    }
}

/// The runtime the entry points run their futures on (one per thread).
pub(super) fn runtime() -> &'static tokio::runtime::Runtime {
    thread_local! {
        static RUNTIME: &'static tokio::runtime::Runtime = Box::leak(Box::new(
            tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime builds"),
        ));
    }
    RUNTIME.with(|r| *r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stdout_read_in_pieces_is_its_lines_repaired_one_by_one() {
        let stdout = b"log \"x\n{\"a\":\"\\ud800\"}\n".as_slice();
        for piece in [1, 2, 7, 64] {
            let read = super::mcp_stdout(stdout, piece, 1 << 20);
            assert_eq!((read.bytes, read.ended_by), (b"log \"x\n{\"a\":\"\\ufffd\"}\n".to_vec(), None));
        }
        // The line over the limit: what went on of it before the bound was
        // seen ends in a NUL (never JSON).
        let read = super::mcp_stdout(b"{}\n[[[[[[[[[[]]]]]]]]]]\n", 3, 8);
        assert_eq!((read.bytes, read.ended_by), (b"{}\n[[[[[[\0".to_vec(), Some("size")));
        let read = super::mcp_stdout(b"{}\n[[[[[[[[[[]]]]]]]]]]\n", 64, 8);
        assert_eq!((read.bytes, read.ended_by), (b"{}\n".to_vec(), Some("size")));
        let notification = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";
        assert_eq!(super::mcp_stdout(notification, 5, 1 << 20).list_changed, 1);
    }
}
