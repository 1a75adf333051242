//! A stdio server's stdout read through a bound: a line (one JSON-RPC
//! message) over the size limit or nested deeper than [`MAX_JSON_DEPTH`]
//! ends the stream and says so (the part of it already handed on is
//! followed by a NUL byte, so rmcp, which parses what it holds when the
//! stream ends, never reads a cut line as a message); whole lines go to the [`ListingTap`] and
//! `notifications/tools/list_changed` lines are counted as they are read.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::{ListingTap, MAX_JSON_DEPTH};

/// A child's stdout that ends (EOF) when one line exceeds `limit` bytes
/// or nests deeper than [`MAX_JSON_DEPTH`], and says so; it also signals
/// when the stream ends for any reason.
pub(crate) struct BoundedLines<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far.
    line: usize,
    oversized: Arc<AtomicBool>,
    /// Set when a line nested too deeply ended the stream.
    too_deep: Arc<AtomicBool>,
    /// Where the current line's JSON nesting stands.
    json: JsonDepth,
    closed: Arc<tokio::sync::Notify>,
    ended: bool,
    /// Where whole lines go ([`ListingTap::scan`]), and the current line
    /// so far.
    tap: Option<(ListingTap, Vec<u8>)>,
    /// Counts the `notifications/tools/list_changed` lines (needs the tap).
    list_changed: Option<Arc<AtomicU64>>,
}

impl<R> BoundedLines<R> {
    pub(crate) fn new(
        inner: R,
        limit: usize,
        oversized: Arc<AtomicBool>,
        closed: Arc<tokio::sync::Notify>,
    ) -> Self {
        BoundedLines {
            inner,
            limit,
            line: 0,
            oversized,
            too_deep: Arc::default(),
            json: JsonDepth::default(),
            closed,
            ended: false,
            tap: None,
            list_changed: None,
        }
    }

    pub(crate) fn tapped(self, tap: ListingTap) -> Self {
        BoundedLines { tap: Some((tap, Vec::new())), ..self }
    }

    /// Counts each `notifications/tools/list_changed` line in `count`
    /// (needs the tap).
    pub(crate) fn counting(self, count: Arc<AtomicU64>) -> Self {
        BoundedLines { list_changed: Some(count), ..self }
    }

    /// The flag set when a line nested too deeply ended the stream.
    pub(crate) fn too_deep_flag(&self) -> Arc<AtomicBool> {
        self.too_deep.clone()
    }

    /// A whole line was read: show it to the tap, count a `list_changed`.
    fn line_done(&mut self, line: &[u8]) {
        self.line = 0;
        self.json = JsonDepth::default();
        let Some((tap, pending)) = &mut self.tap else { return };
        pending.extend_from_slice(line);
        tap.scan(pending);
        if let Some(count) = &self.list_changed
            && is_list_changed(pending)
        {
            count.fetch_add(1, Ordering::AcqRel);
        }
        pending.clear();
    }
}

/// Whether `line` is a `notifications/tools/list_changed` notification.
fn is_list_changed(line: &[u8]) -> bool {
    const METHOD: &[u8] = b"notifications/tools/list_changed";
    memchr::memmem::find(line, METHOD).is_some()
        && serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|m| {
            m.get("method").and_then(serde_json::Value::as_str).map(str::as_bytes) == Some(METHOD)
                && m.get("id").is_none()
        })
}

/// The nesting of arrays and objects at a point of a JSON text, strings
/// skipped (enough to bound the depth; the text is not validated).
#[derive(Default, Clone, Copy)]
struct JsonDepth {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonDepth {
    /// Takes one byte; returns the depth after it.
    fn push(&mut self, b: u8) -> usize {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
        } else {
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => self.depth += 1,
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        self.depth
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                if fresh.is_empty() {
                    this.ended = true;
                    this.closed.notify_one();
                    return Poll::Ready(Ok(()));
                }
                let mut last_newline = None;
                for (i, &b) in fresh.iter().enumerate() {
                    if b == b'\n' {
                        this.line_done(&fresh[last_newline.map_or(0, |n| n + 1)..i]);
                        last_newline = Some(i);
                    } else {
                        this.line += 1;
                        let too_deep = this.json.push(b) > MAX_JSON_DEPTH;
                        if too_deep {
                            this.too_deep.store(true, Ordering::Release);
                        }
                        if this.line > this.limit || too_deep {
                            this.oversized.store(!too_deep, Ordering::Release);
                            this.ended = true;
                            this.closed.notify_one();
                            // Keep the whole lines before the oversized one.
                            let keep = last_newline.map_or(0, |n| n + 1);
                            let handed_before = this.line - (i + 1 - keep);
                            if handed_before > 0 {
                                // Its start went on in earlier reads, and rmcp
                                // parses what it holds at the end: a NUL makes
                                // that no JSON text, so it is never read.
                                buf.filled_mut()[before + keep] = 0;
                                buf.set_filled(before + keep + 1);
                            } else {
                                buf.set_filled(before + keep);
                            }
                            return Poll::Ready(Ok(()));
                        }
                    }
                }
                if let Some((_, pending)) = &mut this.tap {
                    pending.extend_from_slice(&fresh[last_newline.map_or(0, |n| n + 1)..]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                this.ended = true;
                this.closed.notify_one();
                Poll::Ready(Err(e))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn bounded_lines_end_the_stream_on_an_oversized_line() {
        let data: &[u8] = b"short\nthis line is far too long\nnever read\n";
        let oversized = Arc::new(AtomicBool::new(false));
        let mut reader = BoundedLines::new(data, 10, oversized.clone(), Arc::new(tokio::sync::Notify::new()));
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert!(oversized.load(Ordering::Acquire));
        assert_eq!(out, b"short\n");
    }

    #[tokio::test]
    async fn a_line_cut_over_a_bound_after_earlier_reads_is_never_json() {
        // An answer padded past the limit, read a byte at a time: its start
        // has gone on when the bound is seen; what rmcp holds at the end
        // would otherwise parse as the answer.
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let mut data = b"{}\n".to_vec();
        data.extend_from_slice(answer);
        data.extend_from_slice(&[b' '; 64]);
        data.push(b'\n');
        let oversized = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(tokio::sync::Notify::new());
        let mut reader =
            BoundedLines::new(tokio_test_reader(data), answer.len() + 8, oversized.clone(), closed);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert!(oversized.load(Ordering::Acquire));
        let last = out.split(|&b| b == b'\n').next_back().unwrap();
        assert!(last.ends_with(b"\0"), "{:?}", String::from_utf8_lossy(&out));
        assert!(serde_json::from_slice::<serde_json::Value>(last).is_err());
    }

    #[tokio::test]
    async fn the_tap_notes_task_only_tools_across_reads() {
        let listing = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b","execution":{"taskSupport":"optional"}},{"name":"c"}]}}"#;
        let mut data = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".to_vec();
        data.extend_from_slice(listing);
        data.push(b'\n');
        data.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n");
        let tap = ListingTap::default();
        // One byte per read, so every line spans many reads.
        let inner = tokio_test_reader(data.clone());
        let count = Arc::new(AtomicU64::new(0));
        let mut reader = BoundedLines {
            list_changed: Some(count.clone()),
            ..BoundedLines::new(inner, 1 << 20, Arc::default(), Arc::new(tokio::sync::Notify::new()))
        }
        .tapped(tap.clone());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
        assert!(tap.contains("a") && !tap.contains("b") && !tap.contains("c"));
        assert_eq!(count.load(Ordering::Acquire), 1);
    }

    #[tokio::test]
    async fn a_line_nested_too_deeply_ends_the_stream() {
        let ok = format!("{}{}", "[".repeat(MAX_JSON_DEPTH), "]".repeat(MAX_JSON_DEPTH));
        // Brackets inside strings (escaped quotes too) do not count.
        let quoted = format!("{{\"s\": \"\\\"{}\"}}", "[".repeat(500));
        let deep = format!("{}{}", "[".repeat(MAX_JSON_DEPTH + 1), "]".repeat(MAX_JSON_DEPTH + 1));
        let data = format!("{ok}\n{quoted}\n{deep}\nnever read\n").into_bytes();
        let mut reader = BoundedLines::new(&data[..], 1 << 20, Arc::default(), Arc::default());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert!(reader.too_deep.load(Ordering::Acquire));
        assert!(!reader.oversized.load(Ordering::Acquire));
        assert_eq!(out, format!("{ok}\n{quoted}\n").into_bytes());
    }

    /// A reader that gives one byte per read.
    fn tokio_test_reader(data: Vec<u8>) -> impl AsyncRead + Unpin {
        struct OneByte(std::collections::VecDeque<u8>);
        impl AsyncRead for OneByte {
            fn poll_read(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<std::io::Result<()>> {
                if let Some(b) = self.0.pop_front() {
                    buf.put_slice(&[b]);
                }
                Poll::Ready(Ok(()))
            }
        }
        OneByte(data.into())
    }
}
