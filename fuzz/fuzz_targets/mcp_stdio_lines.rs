//! A stdio MCP server's stdout as the MCP client reads it
//! (crates/codemode/src/mcp/lone_surrogates.rs, connection/bounded_lines.rs):
//! the lone-surrogate repair, then the line size and JSON depth bounds.
//!
//! Input: the first byte picks how many bytes the server writes at a time
//! (1 to 32) and, from its top bit, a small line limit (64 bytes) instead of
//! a large one (1 MiB); the rest is the server's stdout.
//!
//! Properties: no panic; what reaches rmcp is, line by line, each line of
//! the stdout repaired on its own (so a line never changes how the next one
//! is read), cut only before a whole line over a bound (or, when the start
//! of that line went on before the bound was seen, after a NUL that makes
//! it no JSON text); no line handed on is over the size limit or parses
//! past serde_json's recursion limit; a
//! line serde_json reads as it came is handed on unchanged; the repair is
//! idempotent and keeps a line's length; each `list_changed` notification
//! line handed on is counted once (the listing tap sees every line).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, stdout)) = data.split_first() else { return };
    let piece = usize::from(first & 0x1f) + 1;
    let limit = if first & 0x80 != 0 { 64 } else { 1 << 20 };
    let read = codemode::fuzzing::mcp_stdout(stdout, piece, limit);

    let mut expected = Vec::with_capacity(stdout.len());
    for (i, line) in stdout.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            expected.push(b'\n');
        }
        let repaired = codemode::fuzzing::mcp_repair_line(line);
        assert_eq!(repaired.len(), line.len(), "the repair keeps the length");
        assert_eq!(codemode::fuzzing::mcp_repair_line(&repaired), repaired, "the repair is idempotent");
        if serde_json::from_slice::<serde_json::Value>(line).is_ok() {
            assert_eq!(repaired, line, "a line serde_json reads is not changed");
        }
        expected.extend_from_slice(&repaired);
    }
    match read.ended_by {
        None => assert_eq!(read.bytes, expected, "each line repaired on its own"),
        Some(_) => {
            // Whole lines, then maybe the start of the line over the bound
            // (handed on before the bound was seen) and a NUL.
            let whole = read.bytes.strip_suffix(b"\0").unwrap_or(&read.bytes);
            assert!(expected.starts_with(whole), "a prefix of the lines repaired on their own");
            assert!(
                whole.len() == read.bytes.len() - 1 || whole.is_empty() || whole.ends_with(b"\n"),
                "cut before a whole line, or marked with a NUL"
            );
        }
    }
    // The count looks for the method's name as written (a name written
    // with escapes, `notifications\/tools...`, is not counted: known).
    const METHOD: &[u8] = b"notifications/tools/list_changed";
    let whole_lines = read.bytes.split_inclusive(|&b| b == b'\n').filter(|l| l.ends_with(b"\n"));
    let whole_lines = whole_lines.filter(|l| l.windows(METHOD.len()).any(|w| w == METHOD));
    let notifications = whole_lines
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(|m| m.get("method").and_then(|m| m.as_str()) == Some("notifications/tools/list_changed"))
        .filter(|m| m.get("id").is_none())
        .count();
    assert_eq!(read.list_changed, notifications as u64, "each list_changed line counted once");
    for line in read.bytes.split(|&b| b == b'\n') {
        assert!(line.len() <= limit + 1, "a line over the limit was handed on");
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(line) {
            assert!(!e.to_string().contains("recursion limit"), "a line too deep was handed on");
        }
    }
});
