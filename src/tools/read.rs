//! `read {path, offset?, limit?}`: a bounded window of a text file, with
//! line numbers and an explicit continuation notice.

use std::io::{BufRead, BufReader, Read as _};

use serde::Deserialize;
use serde_json::{Value, json};

use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

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

pub(crate) struct Read;

#[derive(Deserialize)]
struct Args {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read",
            "Read a text file of the workspace: up to `limit` lines (default 2000, at most 64 KiB of text) \
             from line `offset` (1-based, default 1), each prefixed by its number and a tab. Says where to continue when \
             the file has more lines. Binary files and files over 16 MiB are refused.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "offset": {"type": "integer", "minimum": 1, "maximum": 1000000000, "description": "First line to return (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "Most lines to return"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
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

fn read_window(cx: &ToolContext, args: &Args) -> Result<ToolOutput, ToolError> {
    let root = workspace::Root::open(&cx.workspace)?;
    // Opened beneath the root and read from this fd only: a symlink swapped
    // in after the lookup changes nothing (see `workspace`).
    let opened = workspace::open_existing(&root, &args.path, workspace::READ)?;
    workspace::refuse_hidden(cx, &opened.real, &args.path, true)?;
    let path = opened.real;
    let file = std::fs::File::from(opened.fd);
    let meta = file.metadata().map_err(|e| ToolError::new(format!("cannot read `{}`: {e}", args.path)))?;
    if meta.is_dir() {
        return Err(ToolError::new(format!("`{}` is a folder; file_search lists files", args.path)));
    }
    if !meta.is_file() {
        // A FIFO or device would block the read (or never end).
        return Err(ToolError::new(format!(
            "`{}` is not a regular file (a pipe, socket or device)",
            args.path
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "`{}` is {} bytes, over the read bound of {MAX_FILE_BYTES} bytes; grep_files finds lines in it",
            args.path,
            meta.len()
        )));
    }
    let mut reader = BufReader::new(file);
    let head = reader.fill_buf().map_err(|e| ToolError::new(e.to_string()))?;
    if head[..head.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(ToolError::new(format!("`{}` is a binary file; read only shows text", args.path)));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    reader.read_to_end(&mut bytes).map_err(|e| ToolError::new(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);

    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let total = text.lines().count();
    let mut out = String::new();
    let mut last = offset.saturating_sub(1);
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        if out.len() >= MAX_WINDOW_BYTES {
            break;
        }
        last = i + 1;
        out.push_str(&format!("{:>6}\t", i + 1));
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                out.push_str(&line[..cut]);
                out.push_str(" [line cut]");
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
    Ok(ToolOutput::with_metadata(
        out,
        json!({
            "path": workspace::relative(&cx.workspace, &path),
            "start_line": offset,
            "end_line": if past_end { None } else { Some(last) },
            "total_lines": total,
            "next_offset": next_offset,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::Caller;

    fn read(ws: &std::path::Path, run_id: &str, path: &str) -> Result<ToolOutput, ToolError> {
        let cx = ToolContext::new(ws.to_path_buf(), run_id, 1, Caller::Program);
        read_window(&cx, &Args { path: path.to_owned(), offset: None, limit: None })
    }

    #[test]
    fn hidden_folders_are_refused_except_the_runs_own_spill_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let runs = ws.join(".codemode/runs");
        std::fs::create_dir_all(runs.join("earlier")).unwrap();
        std::fs::create_dir_all(runs.join("mine")).unwrap();
        std::fs::write(runs.join("earlier/call-1.txt"), "earlier output").unwrap();
        std::fs::write(runs.join("mine/call-1.txt"), "my output").unwrap();
        std::fs::write(ws.join(".codemode/receipt.json"), "{}").unwrap();
        // A link inside the workspace does not get around it.
        std::os::unix::fs::symlink(".codemode/runs", ws.join("peek")).unwrap();

        let abs = runs.join("mine/call-1.txt").to_string_lossy().into_owned();
        for own in [".codemode/runs/mine/call-1.txt", "peek/mine/call-1.txt", abs.as_str()] {
            let out = read(&ws, "mine", own).unwrap_or_else(|e| panic!("{own}: {e}"));
            assert!(out.content.as_str().unwrap().contains("my output"), "{own}");
        }
        for hidden in [
            ".codemode/runs/earlier/call-1.txt",
            "peek/earlier/call-1.txt",
            ".codemode/receipt.json",
            ".codemode/runs/mine/../earlier/call-1.txt",
        ] {
            let e = read(&ws, "mine", hidden).unwrap_err();
            assert!(
                e.message.contains("`.codemode/`, which holds earlier runs' receipts")
                    && e.message.contains("this run's own spill files"),
                "{hidden}: {e}"
            );
        }
        // Another run's view: `mine` is an earlier run's folder.
        assert!(read(&ws, "other", ".codemode/runs/mine/call-1.txt").is_err());
        // A run id that is not one plain name grants nothing.
        assert!(read(&ws, "../runs/earlier", ".codemode/runs/earlier/call-1.txt").is_err());
    }
}
