//! Escaped lone UTF-16 surrogates in an MCP server's JSON-RPC stream,
//! replaced with `\ufffd` before the stream is parsed.
//!
//! JSON's grammar allows a string escape of half a surrogate pair (RFC 8259
//! §7 only warns that its meaning is unpredictable), and JavaScript servers
//! send them: `JSON.stringify` writes a lone surrogate as `\ud83d`, and
//! cutting a JavaScript string at a UTF-16 index can leave one. serde_json
//! refuses such a text, and rmcp then drops the whole message as unparsable,
//! so the call it answered would wait until its timeout. Replaced with
//! U+FFFD, as `String.prototype.toWellFormed` does, the message is read and
//! only the half character is lost. The escape and its replacement are both
//! six bytes, so line lengths (and the line limit) are unchanged.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// A server's stdout with [`SurrogateRepair`] applied: the same bytes,
/// each lone surrogate's escape replaced, a few bytes later at most (an
/// escape is handed out once what follows it tells whether it is half of
/// a pair).
pub(crate) struct Repaired<R> {
    inner: R,
    repair: SurrogateRepair,
    /// Bytes read and not yet handed out; the first `decided` are final.
    held: Vec<u8>,
    decided: usize,
    eof: bool,
}

/// Bytes read from the inner stream at a time.
const CHUNK: usize = 8 << 10;

impl<R> Repaired<R> {
    pub(crate) fn new(inner: R) -> Self {
        Repaired { inner, repair: SurrogateRepair::default(), held: Vec::new(), decided: 0, eof: false }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Repaired<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.decided > 0 {
                let n = this.decided.min(buf.remaining());
                buf.put_slice(&this.held[..n]);
                this.held.drain(..n);
                this.decided -= n;
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            // Only undecided bytes (a held escape) are left: read after them.
            let start = this.held.len();
            this.held.resize(start + CHUNK, 0);
            let mut fresh = ReadBuf::new(&mut this.held[start..]);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut fresh);
            let got = fresh.filled().len();
            this.held.truncate(start + got);
            match polled {
                Poll::Ready(Ok(())) => {
                    this.eof = got == 0;
                    this.decided = this.repair.repair(&mut this.held, this.eof);
                }
                other => return other,
            }
        }
    }
}

/// Rewrites escapes of lone surrogates in a JSON text that arrives in
/// pieces (one JSON-RPC message per line, many lines). Each line is read
/// afresh: where one line ends inside a string (a line that is not JSON)
/// does not carry over to the next.
#[derive(Debug, Default)]
pub(crate) struct SurrogateRepair {
    /// Whether the bytes decided so far end inside a JSON string.
    in_string: bool,
}

/// The replacement escape, U+FFFD.
const REPLACEMENT: &[u8; 6] = b"\\ufffd";

impl SurrogateRepair {
    /// Repairs `bytes` (what follows the bytes decided before) in place and
    /// returns how many of them are decided. The rest (at most 11 bytes: an
    /// escape cut short, or a high surrogate's escape whose next six bytes
    /// have not all come) must be handed back again with more bytes after
    /// them; at the end of the stream (`eof`) everything is decided.
    pub(crate) fn repair(&mut self, bytes: &mut [u8], eof: bool) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\n' {
                // A message is one line and a JSON string holds no raw
                // newline: whatever the line was (a server's log line with
                // an odd number of quotes), the next one starts outside.
                self.in_string = false;
                i += 1;
                continue;
            }
            if !self.in_string {
                self.in_string = b == b'"';
                i += 1;
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = false;
                    i += 1;
                }
                b'\\' => {
                    let rest = &bytes[i..];
                    let Some(&kind) = rest.get(1) else {
                        return if eof { bytes.len() } else { i };
                    };
                    if kind != b'u' {
                        // `\` and a newline: the line ends (not JSON).
                        i += if kind == b'\n' { 1 } else { 2 };
                        continue;
                    }
                    let Some(unit) = code_unit(rest) else {
                        // Fewer than four digits so far, or not hex (not JSON:
                        // left for the parser to refuse).
                        if rest.len() < 6 && !eof && rest[2..].iter().all(u8::is_ascii_hexdigit) {
                            return i;
                        }
                        i += 2;
                        continue;
                    };
                    match unit {
                        0xD800..=0xDBFF => match low_follows(&rest[6..]) {
                            Some(true) => i += 12,
                            Some(false) => {
                                bytes[i..i + 6].copy_from_slice(REPLACEMENT);
                                i += 6;
                            }
                            None if eof => {
                                bytes[i..i + 6].copy_from_slice(REPLACEMENT);
                                i += 6;
                            }
                            None => return i,
                        },
                        0xDC00..=0xDFFF => {
                            bytes[i..i + 6].copy_from_slice(REPLACEMENT);
                            i += 6;
                        }
                        _ => i += 6,
                    }
                }
                _ => i += 1,
            }
        }
        bytes.len()
    }
}

/// The code unit of the `\uXXXX` escape `escape` starts with.
fn code_unit(escape: &[u8]) -> Option<u16> {
    let digits = escape.get(2..6)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u16::from_str_radix(text, 16).ok()
}

/// Whether `next` (what follows a high surrogate's escape) starts with a
/// low surrogate's escape; `None` while too few bytes have come to tell.
fn low_follows(next: &[u8]) -> Option<bool> {
    // `\u`, then `d`, then `c`..`f`, then two hex digits.
    let fits = |at: usize, b: u8| match at {
        0 => b == b'\\',
        1 => b == b'u',
        2 => b == b'd' || b == b'D',
        3 => matches!(b, b'c'..=b'f' | b'C'..=b'F'),
        _ => b.is_ascii_hexdigit(),
    };
    for (at, &b) in next.iter().take(6).enumerate() {
        if !fits(at, b) {
            return Some(false);
        }
    }
    (next.len() >= 6).then_some(true)
}

#[cfg(test)]
mod tests {
    use super::SurrogateRepair;

    /// `text` repaired whole.
    fn whole(text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        let decided = SurrogateRepair::default().repair(&mut bytes, true);
        assert_eq!(decided, bytes.len());
        String::from_utf8(bytes).unwrap()
    }

    /// `text` repaired as it would arrive in pieces of `size` bytes.
    fn in_pieces(text: &str, size: usize) -> String {
        let mut repair = SurrogateRepair::default();
        let (mut out, mut held) = (Vec::new(), Vec::new());
        for piece in text.as_bytes().chunks(size) {
            held.extend_from_slice(piece);
            let decided = repair.repair(&mut held, false);
            out.extend(held.drain(..decided));
        }
        let decided = repair.repair(&mut held, true);
        assert_eq!(decided, held.len());
        out.extend(held);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character_and_pairs_stay() {
        for (text, repaired) in [
            (r#"{"a":"x\ud83d"}"#, r#"{"a":"x\ufffd"}"#),
            (r#"{"a":"\ud83d\ude00"}"#, r#"{"a":"\ud83d\ude00"}"#),
            (r#"{"a":"\uD83D\uDE00"}"#, r#"{"a":"\uD83D\uDE00"}"#),
            (r#"{"a":"\ude00x"}"#, r#"{"a":"\ufffdx"}"#),
            (r#"{"a":"\ud83d\ud83d\ude00"}"#, r#"{"a":"\ufffd\ud83d\ude00"}"#),
            (r#"{"a":"\ud83d\n"}"#, r#"{"a":"\ufffd\n"}"#),
            (r#"{"a":"\ud83d\u0041"}"#, r#"{"a":"\ufffd\u0041"}"#),
            (r#"{"\udc00":"\\ud83d"}"#, r#"{"\ufffd":"\\ud83d"}"#),
            // Outside strings and escaped backslashes: nothing to do.
            (r#"{"a":"\\ud83d","b":1}"#, r#"{"a":"\\ud83d","b":1}"#),
            (r#"{"a":"é\"\ud83d"}"#, r#"{"a":"é\"\ufffd"}"#),
            ("{\"a\":\"x\\ud83d\"}\n{\"b\":\"\\ude00\"}\n", "{\"a\":\"x\\ufffd\"}\n{\"b\":\"\\ufffd\"}\n"),
            // What is not JSON is left for the parser to refuse.
            (r#"{"a":"\uzz"}"#, r#"{"a":"\uzz"}"#),
        ] {
            assert_eq!(whole(text), repaired, "{text}");
            for size in 1..=13 {
                assert_eq!(in_pieces(text, size), repaired, "{text} in pieces of {size}");
            }
            if !text.contains("\\uzz") {
                for line in repaired.lines() {
                    assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "{line}");
                }
            }
        }
        // The repaired messages parse; the originals did not.
        assert!(serde_json::from_str::<serde_json::Value>(r#"{"a":"x\ud83d"}"#).is_err());
        let parsed: serde_json::Value = serde_json::from_str(&whole(r#"{"a":"x\ud83d"}"#)).unwrap();
        assert_eq!(parsed["a"], "x\u{FFFD}");
    }

    #[test]
    fn a_line_that_is_not_json_does_not_carry_its_open_string_to_the_next() {
        // A log line with an odd number of quotes, then an answer with a
        // lone surrogate: the answer is repaired as if it came first.
        let text = "starting \"server\n{\"a\":\"x\\ud800\"}\n";
        let repaired = "starting \"server\n{\"a\":\"x\\ufffd\"}\n";
        assert_eq!(whole(text), repaired);
        for size in 1..=13 {
            assert_eq!(in_pieces(text, size), repaired, "in pieces of {size}");
        }
        // A line cut inside an escape ends there too.
        assert_eq!(whole("\"\\\n{\"b\":\"\\udc00\"}\n"), "\"\\\n{\"b\":\"\\ufffd\"}\n");
        // The line ends inside a string, or not, the same either way.
        for prefix in ["\"", "\"\"", "x", "\"\\\"", ""] {
            let line = format!("{prefix}\n{{\"c\":\"\\ud83d\"}}\n");
            assert!(whole(&line).ends_with("\n{\"c\":\"\\ufffd\"}\n"), "after {prefix:?}");
        }
    }

    #[tokio::test]
    async fn the_stream_hands_out_the_repaired_bytes_across_reads() {
        use tokio::io::AsyncReadExt as _;
        let text = "{\"a\":\"x\\ud83d\"}\n{\"b\":\"\\ud83d\\ude00\\ude00\"}\n";
        // One byte per read from the server.
        let (mut writer, reader) = tokio::io::duplex(1);
        let feed = tokio::spawn({
            let text = text.to_owned();
            async move {
                use tokio::io::AsyncWriteExt as _;
                writer.write_all(text.as_bytes()).await.unwrap();
            }
        });
        let mut out = String::new();
        super::Repaired::new(reader).read_to_string(&mut out).await.unwrap();
        feed.await.unwrap();
        assert_eq!(out, "{\"a\":\"x\\ufffd\"}\n{\"b\":\"\\ud83d\\ude00\\ufffd\"}\n");
    }

    #[test]
    fn a_high_surrogate_at_the_end_of_what_came_is_held_until_the_next_bytes() {
        let mut repair = SurrogateRepair::default();
        let mut bytes = br#"{"a":"x\ud83d"#.to_vec();
        assert_eq!(repair.repair(&mut bytes, false), 7, "held from the backslash");
        let mut bytes = br#"{"a":"x\ud8"#.to_vec();
        assert_eq!(SurrogateRepair::default().repair(&mut bytes, false), 7, "an escape cut short");
        let mut bytes = br#"{"a":"x\"#.to_vec();
        assert_eq!(SurrogateRepair::default().repair(&mut bytes, false), 7);
        let mut bytes = br#"{"a":"x\ud83d\ude"#.to_vec();
        assert_eq!(SurrogateRepair::default().repair(&mut bytes, false), 7, "a pair cut short");
        let mut bytes = br#"{"a":"x\ud83d""#.to_vec();
        assert_eq!(SurrogateRepair::default().repair(&mut bytes, false), bytes.len(), "told by the quote");
    }
}
