//! Reading a command's stdout and stderr into bounded tails (the
//! launcher's header line apart) while waiting for it to exit or time out.

#[cfg(unix)]
use super::{DRAIN_GRACE, HEADER_LIMIT, READ_CHUNK};

/// The last bytes of a stream, with the count of all bytes seen. Holds at
/// most twice its limit plus one read.
#[cfg_attr(not(unix), allow(dead_code))]
pub(super) struct Tail {
    /// The newest bytes; trimmed to `limit` whenever it grows past twice that.
    pub(super) buf: Vec<u8>,
    /// Bytes kept in the end.
    limit: usize,
    /// Every byte written to the stream.
    pub(super) total: u64,
}

#[cfg_attr(not(unix), allow(dead_code))]
impl Tail {
    /// An empty tail keeping the last `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Tail { buf: Vec::new(), limit, total: 0 }
    }

    /// Adds the next bytes of the stream.
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if chunk.len() >= self.limit {
            self.buf.clear();
            self.buf.extend_from_slice(&chunk[chunk.len() - self.limit..]);
            return;
        }
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > 2 * self.limit {
            let excess = self.buf.len() - self.limit;
            self.buf.drain(..excess);
        }
    }

    /// The last at most `limit` bytes as text, and whether anything before
    /// them was left out; see [`Tail::lines`].
    pub(super) fn text(&self, limit: usize) -> (String, bool) {
        let (text, cut, _) = self.lines(limit);
        (text, cut)
    }

    /// The last at most `limit` bytes as text, whether anything before
    /// them was left out, and whether a cut text starts at a line start.
    /// A cut text starts after the first newline in it (a line cut in two
    /// is left out whole), unless its only newline ends it or it has none
    /// (one line longer than `limit`): then at a character boundary.
    pub(super) fn lines(&self, limit: usize) -> (String, bool, bool) {
        let mut bytes = &self.buf[self.buf.len().saturating_sub(limit)..];
        let mut cut = self.total > bytes.len() as u64;
        // The byte before the kept ones, when the buffer still holds it.
        let before = self.buf.len().checked_sub(bytes.len() + 1).map(|i| self.buf[i]);
        let mut at_line = !cut || before == Some(b'\n');
        if cut {
            // The first bytes may be the end of a character cut in two.
            let partial = bytes.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
            bytes = &bytes[partial..];
            at_line &= partial == 0;
        }
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        if text.len() > limit {
            // Replacement characters (3 bytes for each invalid byte) grew it.
            let mut from = text.len() - limit;
            while !text.is_char_boundary(from) {
                from += 1;
            }
            text.drain(..from);
            cut = true;
            at_line = false;
        }
        if !at_line && let Some(newline) = text.find('\n').filter(|i| i + 1 < text.len()) {
            text.drain(..=newline);
            at_line = true;
        }
        (text, cut, at_line)
    }
}

/// Reads the shell's pipes (the launcher's header line into `header`, when
/// given) until it exits or `deadline` passes, then ends what is left of
/// its group (at the deadline: SIGTERM, the kill grace, SIGKILL) and
/// drains the pipes for at most [`DRAIN_GRACE`]. The shell's exit status,
/// and whether time ran out.
#[cfg(unix)]
pub(super) async fn wait_reading(
    group: &mut codemode_base::process_group::ProcessGroup,
    deadline: tokio::time::Instant,
    header: &mut Option<Vec<u8>>,
    out: &mut Tail,
    err: &mut Tail,
) -> (std::io::Result<std::process::ExitStatus>, bool) {
    let stdout = group.child().stdout.take();
    let stderr = group.child().stderr.take();
    let reading = read_both(stdout, stderr, header, out, err);
    tokio::pin!(reading);
    let mut read_all = false;
    let exited = loop {
        tokio::select! {
            status = group.child().wait() => break Some(status),
            () = &mut reading, if !read_all => read_all = true,
            () = tokio::time::sleep_until(deadline) => break None,
        }
    };
    let timed_out = exited.is_none();
    let status = match exited {
        Some(status) => {
            // The shell has exited: end what it left in its group.
            group.kill();
            status
        }
        // Time is up: SIGTERM, the kill grace, SIGKILL.
        None => group.terminate().await,
    };
    if !read_all {
        // Everything in the group is dead, so the pipes close as soon as
        // they are drained, unless a process left the group.
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut reading).await;
    }
    (status, timed_out)
}

/// Reads both pipes to their end into their tails.
#[cfg(unix)]
async fn read_both(
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
    header: &mut Option<Vec<u8>>,
    out: &mut Tail,
    err: &mut Tail,
) {
    tokio::join!(pump(stdout, header.as_mut(), out), pump(stderr, None, err));
}

/// Reads one pipe to its end (or its first error) into `tail`; when
/// `header` is given, the first line (up to [`HEADER_LIMIT`] bytes, without
/// its newline) goes there instead.
#[cfg(unix)]
pub(super) async fn pump(
    reader: Option<impl tokio::io::AsyncRead + Unpin>,
    mut header: Option<&mut Vec<u8>>,
    tail: &mut Tail,
) {
    use tokio::io::AsyncReadExt as _;
    let Some(mut reader) = reader else { return };
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        if let Some(line) = header.as_deref_mut() {
            match chunk.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    line.extend_from_slice(&chunk[..end]);
                    chunk = &chunk[end + 1..];
                    header = None;
                }
                None if line.len() + chunk.len() <= HEADER_LIMIT => {
                    line.extend_from_slice(chunk);
                    continue;
                }
                None => {
                    // Not a header: keep it all as output.
                    tail.push(line);
                    line.clear();
                    header = None;
                }
            }
        }
        tail.push(chunk);
    }
}
