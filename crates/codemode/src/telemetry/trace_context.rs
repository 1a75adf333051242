//! W3C Trace Context: the `traceparent` of a run or a call, parsed and
//! written without any tracing library.
//!
//! Spec: W3C Trace Context Level 1, §3.2 (`traceparent`:
//! `version-traceid-parentid-flags`, lower-case hex, version `00`; an
//! all-zero trace id or parent id is invalid). MCP carries it in a
//! request's `_meta.traceparent` (SEP-414) and, over HTTP, in the
//! `traceparent` header.

/// A span's place in a trace: its trace id, its own span id and the
/// sampled flag.
///
/// ```
/// use codemode::telemetry::TraceContext;
/// let parent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
/// let child = parent.child();
/// assert_eq!(child.trace_id, parent.trace_id);
/// assert_ne!(child.span_id, parent.span_id);
/// assert!(child.traceparent().starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace's id (16 bytes, never all zero).
    pub trace_id: [u8; 16],
    /// This span's id (8 bytes, never all zero).
    pub span_id: [u8; 8],
    /// Whether the trace is sampled (flag bit 0): a span of an unsampled
    /// trace is not exported, but its context still passes on.
    pub sampled: bool,
}

impl TraceContext {
    /// A new trace with a random trace id and span id, sampled.
    pub fn root() -> TraceContext {
        let mut trace_id = [0u8; 16];
        fill_nonzero(&mut trace_id);
        TraceContext { trace_id, span_id: random_span_id(), sampled: true }
    }

    /// A span of the same trace under this one: a new random span id.
    pub fn child(&self) -> TraceContext {
        TraceContext { span_id: random_span_id(), ..*self }
    }

    /// The span of the same trace whose id is `span_id`.
    pub fn with_span(&self, span_id: [u8; 8]) -> TraceContext {
        TraceContext { span_id, ..*self }
    }

    /// Parses a `traceparent` value; `None` when it is not one (a
    /// malformed value is ignored, never an error: W3C Trace Context §3.2.2,
    /// "if the vendor fails to parse traceparent, it MUST NOT attempt to
    /// continue"; a new trace starts instead). Versions above `00` are read
    /// by their first four fields, as the spec asks.
    pub fn parse(text: &str) -> Option<TraceContext> {
        let text = text.trim();
        let mut parts = text.split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let version = hex_byte(version)?;
        if version == 0xff || (version == 0 && (parts.next().is_some() || text.len() != 55)) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex_into(trace, &mut trace_id)?;
        hex_into(span, &mut span_id)?;
        let flags = hex_byte(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceContext { trace_id, span_id, sampled: flags & 1 == 1 })
    }

    /// This context as a `traceparent` value, version `00`.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            hex(&self.trace_id),
            hex(&self.span_id),
            if self.sampled { "01" } else { "00" }
        )
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The span id as 16 lower-case hex digits.
    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The span id of call `seq` of the run whose span this is: derived
    /// from the run's span id and `seq` (a bijective mix, so two calls of
    /// a run never share one and nothing needs storing), never zero.
    pub fn call_span_id(&self, seq: u64) -> [u8; 8] {
        let run = u64::from_be_bytes(self.span_id);
        let mut z = run ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if z == 0 || z == run {
            z = run.rotate_left(1) ^ seq ^ 1;
        }
        z.to_be_bytes()
    }
}

/// A random span id, never zero.
fn random_span_id() -> [u8; 8] {
    let mut id = [0u8; 8];
    fill_nonzero(&mut id);
    id
}

/// Fills `bytes` with random bytes, not all zero.
fn fill_nonzero(bytes: &mut [u8]) {
    loop {
        fastrand::fill(bytes);
        if bytes.iter().any(|b| *b != 0) {
            return;
        }
    }
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Two lower-case hex digits as a byte.
fn hex_byte(text: &str) -> Option<u8> {
    let mut byte = [0u8; 1];
    hex_into(text, &mut byte)?;
    Some(byte[0])
}

/// Lower-case hex `text` into `out`, exactly `out.len()` bytes of it.
fn hex_into(text: &str, out: &mut [u8]) -> Option<()> {
    let digits = text.as_bytes();
    if digits.len() != out.len() * 2 {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = (value(pair[0])? << 4) | value(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_and_writes_back() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = TraceContext::parse(text).unwrap();
        assert_eq!(cx.traceparent(), text);
        assert!(cx.sampled);
        let unsampled =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
        // A later version may add fields after the four it shares.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what").is_some()
        );
    }

    #[test]
    fn call_span_ids_are_distinct_and_never_the_runs() {
        let run = TraceContext::root();
        let ids: std::collections::HashSet<[u8; 8]> = (1..=10_000).map(|seq| run.call_span_id(seq)).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&run.span_id));
        assert!(!ids.contains(&[0; 8]));
        assert_eq!(run.call_span_id(7), run.call_span_id(7));
    }
}
