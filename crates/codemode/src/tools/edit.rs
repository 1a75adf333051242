//! `edit {path, edits: [{old, new}]}`: exact-text replacements in one text
//! file. Every `old` is located in one snapshot of the original; each must
//! match exactly once and no two may overlap, or the whole call fails and
//! the file is untouched. The new content is written atomically, and not at
//! all by a call that timed out or was cancelled before the rename (see
//! [`super::blocking_cancellable`]).

use std::io::Read as _;
use std::os::fd::AsFd as _;
use std::sync::atomic::AtomicBool;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{workspace, write};
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Files larger than this are refused, in bytes (as `read` does).
const MAX_FILE_BYTES: u64 = 16 << 20;
/// Bytes examined for a NUL byte to tell binary files apart (as `read`).
const SNIFF_BYTES: usize = 8 << 10;
/// Problems listed in one error message; the rest are counted.
const MAX_PROBLEMS: usize = 10;
/// Characters of an `old` quoted in an error message.
const QUOTE_CHARS: usize = 60;
/// Line numbers listed for an `old` that matches several times.
const MAX_LINES_LISTED: usize = 5;

/// The `edit` tool.
pub(crate) struct Edit;

/// The arguments, as the schema describes them.
#[derive(Deserialize)]
struct Args {
    /// File path relative to the workspace root.
    path: String,
    /// The replacements, each located in the original content.
    edits: Vec<Change>,
}

/// One replacement: the exact text `old` becomes `new`.
#[derive(Deserialize)]
struct Change {
    /// Exact text that must occur once in the original.
    old: String,
    /// Its replacement.
    new: String,
}

impl Tool for Edit {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "edit",
            "Replace exact text in a file of the workspace. Each `old` must occur exactly once in the \
             original file (include surrounding lines to make it unique); all edits are located in the \
             original, must not overlap, and are applied together, or none is.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "description": "Replacements, each located in the original content",
                        "items": {
                            "type": "object",
                            "properties": {
                                "old": {"type": "string", "description": "Exact text to replace; must occur once"},
                                "new": {"type": "string", "description": "Replacement text"}
                            },
                            "required": ["old", "new"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "edits"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::edit())
        .read_only(false)
        .destructive(false)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            super::blocking_cancellable(move |cancelled: &AtomicBool| edit_file(&cx, &args, cancelled)).await
        })
    }
}

/// Reads, plans, applies and writes; on a blocking thread. The file is
/// read and replaced through the fd of the folder that holds it, opened
/// beneath the workspace root (see [`super::workspace`]). Gives up without
/// changing the file once `cancelled` is set, up to the rename.
fn edit_file(cx: &ToolContext, args: &Args, cancelled: &AtomicBool) -> Result<ToolOutput, ToolError> {
    let root = workspace::Root::open(&cx.workspace)?;
    let target = workspace::open_for_write(&root, &args.path, false, &cx.confinement, "edit")?;
    // One writer at a time: the file is read under the lock, which is held
    // past the rename, so no other write lands between the read and it.
    let lock = super::file_lock::FileLock::acquire(&target.dir, &target.name, &target.real, cancelled)?;
    if lock.existing.is_none() {
        return Err(workspace::open_error(root.path(), &args.path, nix::errno::Errno::ENOENT));
    }
    let file = openat(
        target.dir.as_fd(),
        target.name.as_os_str(),
        workspace::READ | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ToolError::new(format!("cannot read `{}`: {}", args.path, workspace::io(e))))?;
    let file = std::fs::File::from(file);
    let text = read_text(&file, &args.path)?;
    if super::cancelled(cancelled) {
        return Err(super::abandoned());
    }
    let ranges = locate(&text, &args.edits).map_err(|m| ToolError::new(format!("`{}`: {m}", args.path)))?;
    let updated = apply(&text, &args.edits, &ranges);
    let mode =
        file.metadata().ok().map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777);
    super::preimage::keep_before(cx, &target, true, Some((text.as_bytes(), mode.unwrap_or(0o644))))?;
    write::write_atomic(&target.dir, &target.name, updated.as_bytes(), mode, cancelled)
        .map_err(|e| write::write_error(&args.path, &e))?;
    super::preimage::keep_after(cx, &target, updated.as_bytes());
    drop(lock);
    Ok(ToolOutput::new(json!({
        "path": workspace::relative(&cx.workspace, &target.real),
        "edits": args.edits.len(),
        "bytes": updated.len(),
    })))
}

/// The whole of the open `file` as UTF-8 text, refusing folders, files over
/// the size bound, binary files and other encodings (rewriting those as
/// text would corrupt them).
fn read_text(file: &std::fs::File, shown: &str) -> Result<String, ToolError> {
    let meta = file.metadata().map_err(|e| ToolError::new(format!("cannot read `{shown}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::new(format!("`{shown}` is a folder, not a file")));
    }
    if !meta.is_file() {
        return Err(ToolError::new(format!("`{shown}` is not a regular file")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "`{shown}` is {} bytes, over the edit bound of {MAX_FILE_BYTES} bytes",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(format!("cannot read `{shown}`: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::new(format!("`{shown}` is over the edit bound of {MAX_FILE_BYTES} bytes")));
    }
    if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(ToolError::new(format!("`{shown}` is a binary file; edit only changes text")));
    }
    String::from_utf8(bytes).map_err(|e| {
        ToolError::new(format!(
            "`{shown}` is not UTF-8 text (invalid byte at offset {}); edit only changes UTF-8 files",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Finds each edit's `old` in `text`: the byte range of its one occurrence,
/// in edit order. Occurrences are counted overlapping (`aa` occurs twice in
/// `aaa`), so a unique match is unambiguous.
///
/// # Errors
/// A message naming every edit (1-based) that is empty, missing or
/// ambiguous, with its match count, or the edits whose ranges overlap.
fn locate(text: &str, edits: &[Change]) -> Result<Vec<(usize, usize)>, String> {
    if edits.is_empty() {
        return Err("`edits` is empty; give at least one {old, new}".to_owned());
    }
    let mut problems = Vec::new();
    let mut ranges = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        let n = i + 1;
        if e.old.is_empty() {
            problems.push(format!("edit {n}: `old` is empty; give the exact text to replace"));
            continue;
        }
        let starts = occurrences(text, &e.old, MAX_LINES_LISTED + 1);
        match starts.as_slice() {
            [start] => ranges.push((*start, start + e.old.len())),
            [] => {
                let mut m = format!("edit {n}: `old` {} matches 0 times", quote(&e.old));
                if e.old.contains('\n') && !e.old.contains("\r\n") && text.contains("\r\n") {
                    m.push_str(" (the file has CRLF line endings)");
                } else {
                    m.push_str("; check it against the file's exact text, including whitespace");
                }
                problems.push(m);
            }
            _ => {
                let total = count(text, &e.old);
                let lines: Vec<String> =
                    starts.iter().take(MAX_LINES_LISTED).map(|s| line_of(text, *s).to_string()).collect();
                let more = if total > MAX_LINES_LISTED { ", ..." } else { "" };
                problems.push(format!(
                    "edit {n}: `old` {} matches {total} times (lines {}{more}); include more \
                     surrounding text so it matches once",
                    quote(&e.old),
                    lines.join(", ")
                ));
            }
        }
    }
    if problems.is_empty() {
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| ranges[i]);
        for w in order.windows(2) {
            let (a, b) = (w[0].min(w[1]), w[0].max(w[1]));
            if ranges[w[0]].1 > ranges[w[1]].0 {
                problems.push(format!(
                    "edits {} and {} overlap (both change line {}); merge them into one edit",
                    a + 1,
                    b + 1,
                    line_of(text, ranges[w[1]].0)
                ));
            }
        }
    }
    if problems.is_empty() {
        return Ok(ranges);
    }
    let listed = problems.len().min(MAX_PROBLEMS);
    let mut message = format!("no edit applied, the file is unchanged: {}", problems[..listed].join("; "));
    if problems.len() > listed {
        message.push_str(&format!("; and {} more problems", problems.len() - listed));
    }
    Err(message)
}

/// Start offsets of the first `max` occurrences of `needle`, overlapping.
fn occurrences(text: &str, needle: &str, max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while out.len() < max {
        let Some(i) = text[from..].find(needle) else { break };
        let start = from + i;
        out.push(start);
        // Next char boundary after `start`, so overlapping matches count.
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// How many times `needle` occurs in `text`, overlapping.
fn count(text: &str, needle: &str) -> usize {
    occurrences(text, needle, usize::MAX).len()
}

/// The 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

/// `old` shortened for an error message.
fn quote(old: &str) -> String {
    let first = old.lines().next().unwrap_or("");
    let mut q: String = first.chars().take(QUOTE_CHARS).collect();
    if q.len() < old.len() {
        q.push('…');
    }
    format!("{q:?}")
}

/// The text with every edit's range (found in the original) replaced by its
/// `new`; `new` texts are never searched again.
fn apply(text: &str, edits: &[Change], ranges: &[(usize, usize)]) -> String {
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| ranges[i].0);
    let grown: usize = edits.iter().map(|e| e.new.len()).sum();
    let mut out = String::with_capacity(text.len() + grown);
    let mut at = 0;
    for i in order {
        let (start, end) = ranges[i];
        out.push_str(&text[at..start]);
        out.push_str(&edits[i].new);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits(pairs: &[(&str, &str)]) -> Vec<Change> {
        pairs.iter().map(|(o, n)| Change { old: (*o).to_owned(), new: (*n).to_owned() }).collect()
    }

    fn run(text: &str, pairs: &[(&str, &str)]) -> Result<String, String> {
        let e = edits(pairs);
        locate(text, &e).map(|r| apply(text, &e, &r))
    }

    #[test]
    fn edits_apply_against_the_original_in_any_order() {
        assert_eq!(run("a b c", &[("c", "C"), ("a", "A")]).unwrap(), "A b C");
        // The first edit's `new` contains the second edit's `old`: not re-matched.
        assert_eq!(run("one two", &[("one", "two two"), ("two", "2")]).unwrap(), "two two 2");
        // Adjacent ranges do not overlap.
        assert_eq!(run("abcd", &[("ab", "x"), ("cd", "y")]).unwrap(), "xy");
        assert_eq!(run("é ü", &[("ü", "u")]).unwrap(), "é u");
    }

    #[test]
    fn failures_name_the_edit_and_the_count() {
        let e = run("x\nfoo\nfoo\nbar\n", &[("bar", "B"), ("foo", "F"), ("zzz", "Z")]).unwrap_err();
        assert!(e.contains("edit 2: `old` \"foo\" matches 2 times (lines 2, 3)"), "{e}");
        assert!(e.contains("edit 3: `old` \"zzz\" matches 0 times"), "{e}");
        assert!(!e.contains("edit 1"), "{e}");
        let e = run("aaa", &[("aa", "b")]).unwrap_err();
        assert!(e.contains("matches 2 times"), "{e}");
        let e = run("abc", &[("", "b")]).unwrap_err();
        assert!(e.contains("edit 1: `old` is empty"), "{e}");
        let e = run("abcdef", &[("cde", "1"), ("abcd", "2")]).unwrap_err();
        assert!(e.contains("edits 1 and 2 overlap"), "{e}");
        let e = run("a\r\nb\r\n", &[("a\nb", "c")]).unwrap_err();
        assert!(e.contains("CRLF"), "{e}");
        assert!(run("abc", &[]).unwrap_err().contains("empty"));
    }

    #[test]
    fn many_matches_are_counted_but_few_lines_listed() {
        let text = "x\n".repeat(50);
        let e = run(&text, &[("x", "y")]).unwrap_err();
        assert!(e.contains("matches 50 times (lines 1, 2, 3, 4, 5, ...)"), "{e}");
    }
}
