//! The estimate's lexical pieces: where white space, comments, strings,
//! regular expressions and words end, as the parsers' lexer reads them.

/// Whether the byte `b` (followed by `next`) begins white space or a
/// comment, which cost nothing.
pub(super) fn is_trivia(b: u8, next: Option<u8>) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r') || (b == b'/' && matches!(next, Some(b'/' | b'*')))
}

/// The byte after the white space or comment at `i` (which is one).
pub(super) fn skip_trivia(bytes: &[u8], i: usize) -> usize {
    match (bytes[i], bytes.get(i + 1)) {
        (b'/', Some(b'/')) => line_end(bytes, i),
        (b'/', Some(b'*')) => find(bytes, i + 2, b"*/").map_or(bytes.len(), |p| p + 2),
        _ => i + 1,
    }
}

/// Whether `c` may be part of an identifier, keyword or number (any byte
/// of a non-ASCII character counts).
pub(super) fn is_word_byte(c: u8) -> bool {
    c == b'_' || c == b'$' || c.is_ascii_alphanumeric() || c >= 0x80
}

/// The byte after the word that begins at `start`.
pub(super) fn word_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() && is_word_byte(bytes[i]) {
        i += 1;
    }
    i
}

/// Whether a name follows `i` after spaces (`interface A`, not
/// `interface.x` or `namespace = 1`, where the word is a variable).
pub(super) fn name_follows(bytes: &[u8], mut i: usize) -> bool {
    while bytes.get(i).is_some_and(|c| matches!(c, b' ' | b'\t')) {
        i += 1;
    }
    bytes.get(i).is_some_and(|&c| is_word_byte(c) && !c.is_ascii_digit())
}

/// Where `needle` starts at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| from + p)
}

/// The byte after the string that began before `i` with `quote` (or the
/// end of its line, for one left open).
pub(super) fn string_end(bytes: &[u8], mut i: usize, quote: u8) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            // A `\` before `\r\n` continues the string on the next line.
            b'\\' if bytes.get(i + 1..i + 3) == Some(b"\r\n") => i += 3,
            b'\\' => i += 2,
            b'\n' | b'\r' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The byte after the regular expression whose opening `/` is before `i`,
/// its flags included. As the lexer reads it (ECMAScript's
/// RegularExpressionLiteral; oxc's `read_regex`): a `\` escapes the next
/// character, a `/` inside `[...]` does not end it (classes do not nest
/// here, even with the `v` flag), and one still open at a line terminator
/// or the end is an error after which the lexer reads nothing more: the
/// end of the text.
pub(super) fn regex_end(bytes: &[u8], mut i: usize) -> usize {
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' | b'\r' => return bytes.len(),
            0xE2 if bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) => {
                return bytes.len();
            }
            // An escaped line terminator still ends the line (an error).
            b'\\' if !matches!(bytes.get(i + 1), Some(b'\n' | b'\r' | 0xE2)) => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'/' if !in_class => {
                let mut end = i + 1;
                while bytes.get(end).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'$' | b'_')) {
                    end += 1;
                }
                return end;
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// Where the line that `i` is on ends: at the first line terminator of
/// JavaScript after it (`\n`, `\r`, U+2028, U+2029), or the end. A line
/// comment ends there for the parsers: ending it only at `\n` hid the rest
/// of a text with `\r` line ends from the estimate (found by fuzzing).
fn line_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < bytes.len() {
        match bytes[j] {
            b'\n' | b'\r' => return j,
            0xE2 if bytes.get(j + 1) == Some(&0x80) && matches!(bytes.get(j + 2), Some(0xA8 | 0xA9)) => {
                return j;
            }
            _ => j += 1,
        }
    }
    bytes.len()
}
