//! `read {path, offset?, limit?, format?}`: a bounded window of a text
//! file, either numbered lines with an explicit continuation notice (the
//! default) or the file's text as it is from a byte offset (`format:
//! "text"`), for programs that parse what they read. (The docs call it
//! `text` everywhere: a program that passes `format: "raw"` is refused with
//! the schema's two values.)

use std::io::{BufRead, BufReader, Read as _, Seek as _, SeekFrom};

use serde::Deserialize;
use serde_json::{Value, json};

use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};
use crate::receipt::Truncation;

/// Files larger than this are refused, in bytes.
const MAX_FILE_BYTES: u64 = 16 << 20;
/// Lines returned when `limit` is not given.
const DEFAULT_LIMIT: usize = 2_000;
/// Bytes of numbered text in one window; the window ends early (with its
/// continuation notice) rather than pass the engine's result bound, which
/// would cut the notice off.
const MAX_WINDOW_BYTES: usize = 64 << 10;
/// Characters kept of one line; longer lines are cut with a marker.
const MAX_LINE_CHARS: usize = 2_000;
/// Bytes examined for a NUL byte to tell binary files apart.
const SNIFF_BYTES: usize = 8 << 10;
/// Bytes of text in one `format: "text"` window (the default and the
/// most `limit` may ask for).
const MAX_TEXT_BYTES: usize = 64 << 10;

/// What `read`'s one-line signature in a model's tool list adds
/// (engine/execute_tools.rs): the two facts a first program gets wrong
/// without them (measured playing the model, issue 32).
pub(crate) const SIGNATURE_NOTE: &str =
    "'lines' numbers lines; JSON.parse needs 'text'. 64 KiB a call: go on at next_offset";

pub(crate) struct Read;

#[derive(Deserialize)]
struct Args {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
    format: Option<Format>,
}

/// What a window holds.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Format {
    /// Numbered lines and a continuation notice; `offset` and `limit` count
    /// lines.
    #[default]
    Lines,
    /// The file's text as it is; `offset` and `limit` count bytes.
    Text,
}

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read",
            "Read a text file of the workspace: up to `limit` lines (default 2000, at most 64 KiB of text) \
             from line `offset` (1-based, default 1), each prefixed by its number and a tab; says where to continue. \
             format \"text\": the text as it is (for JSON.parse) from byte `offset` (default 0), at most 64 KiB; \
             continue with metadata.next_offset until it is null. Binary files and files over 16 MiB are refused.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "offset": {"type": "integer", "minimum": 0, "maximum": 1000000000, "description": "First line (1-based), or first byte (0-based) in text format"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 65536, "description": "Most lines, or bytes in text format"},
                    "format": {"enum": ["lines", "text"], "description": "\"lines\" (default): numbered lines; \"text\": the text as it is, for JSON.parse"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::read())
        .read_only(true)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            super::blocking(move || read_window(&cx, &args)).await
        })
    }
}

/// Reads the window `args` ask for, of the text file at `args.path`.
fn read_window(cx: &ToolContext, args: &Args) -> Result<ToolOutput, ToolError> {
    let (mut reader, total_bytes, shown) = open_text(cx, &args.path)?;
    if args.format.unwrap_or_default() == Format::Text {
        return text_window(reader.into_inner(), total_bytes, &shown, args);
    }
    let mut bytes = Vec::with_capacity(total_bytes as usize);
    reader.read_to_end(&mut bytes).map_err(|e| ToolError::new(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(lines_window(&text, total_bytes, &shown, args))
}

/// Opens the file at `path` (as the program gave it) for reading: a
/// regular file of the workspace, not hidden, at most [`MAX_FILE_BYTES`]
/// long, with no NUL byte in its first [`SNIFF_BYTES`]. Its reader (the
/// first bytes buffered), its size in bytes, and its path as shown
/// (workspace-relative).
fn open_text(cx: &ToolContext, path: &str) -> Result<(BufReader<std::fs::File>, u64, String), ToolError> {
    // A file of the run's own spill folder, outside the workspace, is
    // opened beneath that folder; every other path beneath the workspace.
    let (root, path) = match workspace::own_spill_file(cx, path) {
        Some((own, inside)) => (workspace::Root::open(&own)?, std::borrow::Cow::Owned(inside)),
        None => (workspace::Root::open(&cx.workspace)?, std::borrow::Cow::Borrowed(path)),
    };
    let path = path.as_ref();
    // Opened beneath the root and read from this fd only: a symlink swapped
    // in after the lookup changes nothing (see `workspace`).
    let opened = workspace::open_existing(&root, path, workspace::READ)?;
    workspace::refuse_hidden(cx, &opened.real, path, true)?;
    let real = opened.real;
    let file = std::fs::File::from(opened.fd);
    let meta = file.metadata().map_err(|e| ToolError::new(format!("cannot read `{path}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::new(format!("`{path}` is a folder; file_search lists files")));
    }
    if !meta.is_file() {
        // A FIFO or device would block the read (or never end).
        return Err(ToolError::new(format!("`{path}` is not a regular file (a pipe, socket or device)")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "`{path}` is {} bytes, over the read bound of {MAX_FILE_BYTES} bytes; grep_files finds lines in it",
            meta.len()
        )));
    }
    let mut reader = BufReader::new(file);
    let head = reader.fill_buf().map_err(|e| ToolError::new(e.to_string()))?;
    if head[..head.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(ToolError::new(format!("`{path}` is a binary file; read only shows text")));
    }
    Ok((reader, meta.len(), workspace::relative(&cx.workspace, &real)))
}

/// The default window of `text` (the file's, `total_bytes` long, shown as
/// `shown`): numbered lines from line `offset` (1-based), at most `limit`
/// and about [`MAX_WINDOW_BYTES`], each cut at [`MAX_LINE_CHARS`], then a
/// notice saying where to continue (or that `offset` is past the end) and
/// how many lines were cut.
fn lines_window(text: &str, total_bytes: u64, shown: &str, args: &Args) -> ToolOutput {
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let total = text.lines().count();
    let mut out = String::new();
    let mut last = offset.saturating_sub(1);
    let mut cut_lines = 0usize;
    // The file's bytes the window shows: from its first line's start to
    // the end of its last line.
    let (mut first_byte, mut end_byte) = (None, 0usize);
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        if out.len() >= MAX_WINDOW_BYTES {
            break;
        }
        last = i + 1;
        let at = line.as_ptr() as usize - text.as_ptr() as usize;
        first_byte.get_or_insert(at);
        end_byte = at + line.len();
        out.push_str(&format!("{:>6}\t", i + 1));
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                out.push_str(&line[..cut]);
                out.push_str(" [line cut]");
                cut_lines += 1;
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    let past_end = offset > total.max(1);
    let next_offset = (!past_end && last < total).then_some(last + 1);
    if past_end {
        out.push_str(&format!("[offset {offset} is past the end: the file has {total} lines]\n"));
    } else if let Some(next) = next_offset {
        out.push_str(&format!("[lines {offset}-{last} of {total}; continue with offset {next}]\n"));
    }
    if cut_lines > 0 {
        out.push_str(&format!(
            "[{cut_lines} line(s) cut at {MAX_LINE_CHARS} characters; format \"text\" reads whole lines]\n"
        ));
    }
    let cut = next_offset.map(|next| {
        let from = first_byte.unwrap_or(0);
        let newline = text[end_byte..].find('\n').map_or(0, |i| i + 1);
        let how = format!(
            "lines {offset}-{last} of {total}: the window ends at {limit} line{} or {} KiB of text; continue \
             with offset {next} (metadata.next_offset) until it is null",
            if limit == 1 { "" } else { "s" },
            MAX_WINDOW_BYTES >> 10
        );
        Truncation::by_tool(Some(total_bytes - from as u64), (end_byte + newline - from) as u64, how)
    });
    ToolOutput::with_metadata(
        out,
        json!({
            "path": shown,
            "format": "lines",
            "start_line": offset,
            "end_line": if past_end { None } else { Some(last) },
            "total_lines": total,
            "total_bytes": total_bytes,
            "next_offset": next_offset,
            "eof": next_offset.is_none(),
        }),
    )
    .cut(cut)
}

/// The `format: "text"` window of `file` (`total` bytes long, already
/// checked to be text): the text as it is from byte `offset` (0-based), at most
/// `limit` bytes ([`MAX_TEXT_BYTES`] by default and at most), ending on a
/// UTF-8 character boundary so consecutive windows concatenate to the file.
/// Invalid UTF-8 inside the window is shown as U+FFFD. Metadata `{path,
/// format, offset, next_offset, total_bytes, eof}`; `next_offset` is null
/// at the end. An `offset` inside a character or past the end is an error
/// saying what to pass.
fn text_window(
    mut file: std::fs::File,
    total: u64,
    shown: &str,
    args: &Args,
) -> Result<ToolOutput, ToolError> {
    let offset = args.offset.unwrap_or(0) as u64;
    let limit = args.limit.unwrap_or(MAX_TEXT_BYTES).clamp(1, MAX_TEXT_BYTES);
    if offset > total {
        return Err(ToolError::new(format!(
            "`offset` {offset} is past the end of `{}`, which has {total} bytes; text format counts bytes from 0",
            args.path
        )));
    }
    // Read a few bytes past the window to find where a character ends.
    let io = |e: std::io::Error| ToolError::new(format!("cannot read `{}`: {e}", args.path));
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut bytes = Vec::with_capacity(limit + 4);
    file.take(limit as u64 + 4).read_to_end(&mut bytes).map_err(io)?;
    let continuation = |b: u8| b & 0xC0 == 0x80;
    if bytes.first().is_some_and(|b| continuation(*b)) {
        return Err(ToolError::new(format!(
            "`offset` {offset} is inside a UTF-8 character of `{}`; pass 0 or a metadata.next_offset",
            args.path
        )));
    }
    let mut end = bytes.len().min(limit);
    // Back to the start of the character the bound falls in; a window too
    // small for one character holds that character.
    while end > 0 && end < bytes.len() && continuation(bytes[end]) {
        end -= 1;
    }
    if end == 0 && !bytes.is_empty() {
        end = 1;
        while end < bytes.len() && continuation(bytes[end]) {
            end += 1;
        }
    }
    let next = offset + end as u64;
    let next_offset = (next < total).then_some(next);
    let cut = next_offset.map(|next| {
        let how = format!(
            "bytes {offset}-{next} of {total}: the window ends at {limit} bytes (at most {} KiB); continue \
             with offset {next} (metadata.next_offset) until it is null",
            MAX_TEXT_BYTES >> 10
        );
        Truncation::by_tool(Some(total - offset), end as u64, how)
    });
    Ok(ToolOutput::with_metadata(
        String::from_utf8_lossy(&bytes[..end]).into_owned(),
        json!({
            "path": shown,
            "format": "text",
            "offset": offset,
            "next_offset": next_offset,
            "total_bytes": total,
            "eof": next_offset.is_none(),
        }),
    )
    .cut(cut))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::Caller;

    fn read(ws: &std::path::Path, run_id: &str, path: &str) -> Result<ToolOutput, ToolError> {
        let cx = ToolContext::new(ws.to_path_buf(), run_id, 1, Caller::Program);
        read_window(&cx, &Args { path: path.to_owned(), offset: None, limit: None, format: None })
    }

    #[test]
    fn hidden_folders_are_refused_except_the_runs_own_spill_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let runs = ws.join(".codemode/runs");
        std::fs::create_dir_all(runs.join("earlier")).unwrap();
        std::fs::create_dir_all(runs.join("mine/spill")).unwrap();
        std::fs::write(runs.join("earlier/call-1.txt"), "earlier output").unwrap();
        std::fs::write(runs.join("mine/spill/call-1.txt"), "my output").unwrap();
        // The run's own journal sits beside its spill files, not among them.
        std::fs::write(runs.join("mine/journal.jsonl"), "{}").unwrap();
        std::fs::write(ws.join(".codemode/receipt.json"), "{}").unwrap();
        // A link inside the workspace does not get around it.
        std::os::unix::fs::symlink(".codemode/runs", ws.join("peek")).unwrap();

        let abs = runs.join("mine/spill/call-1.txt").to_string_lossy().into_owned();
        for own in [".codemode/runs/mine/spill/call-1.txt", "peek/mine/spill/call-1.txt", abs.as_str()] {
            let out = read(&ws, "mine", own).unwrap_or_else(|e| panic!("{own}: {e}"));
            assert!(out.content.as_str().unwrap().contains("my output"), "{own}");
        }
        for hidden in [
            ".codemode/runs/earlier/call-1.txt",
            "peek/earlier/call-1.txt",
            ".codemode/receipt.json",
            ".codemode/runs/mine/../earlier/call-1.txt",
            ".codemode/runs/mine/journal.jsonl",
            ".codemode/runs/mine/spill/../journal.jsonl",
        ] {
            let e = read(&ws, "mine", hidden).unwrap_err();
            assert!(
                e.message.contains("`.codemode/`, which holds earlier runs' receipts")
                    && e.message.contains("this run's own spill files"),
                "{hidden}: {e}"
            );
        }
        // Another run's view: `mine` is an earlier run's folder.
        assert!(read(&ws, "other", ".codemode/runs/mine/spill/call-1.txt").is_err());
        // A run id that is not one plain name grants nothing.
        assert!(read(&ws, "../runs/earlier", ".codemode/runs/earlier/call-1.txt").is_err());
    }
}
