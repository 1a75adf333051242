//! `grep_files {pattern, path?, glob?, case_insensitive?, context?, limit?}`:
//! regex search across the workspace with bounded output. The walk respects
//! `.gitignore` and friends and the default exclusions of `file_search`;
//! binary files are skipped (grep-searcher's binary detection).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde::Deserialize;
use serde_json::{Value, json};

use super::file_search::DEFAULT_EXCLUDE;
use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Matches returned when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// Most matches one call may ask for.
const MAX_LIMIT: usize = 1_000;
/// Most context lines before and after a match.
const MAX_CONTEXT: usize = 5;
/// Characters kept of one line; longer lines are cut with [`CUT_MARKER`].
const MAX_LINE_CHARS: usize = 500;
/// Appended to a line cut at [`MAX_LINE_CHARS`].
const CUT_MARKER: &str = " [line cut]";
/// Entries visited before the walk stops (and the result says `truncated`).
const MAX_VISITED: usize = 200_000;
/// Most memory the searcher may use for one line; a file with a longer line
/// is skipped instead of being read whole into memory.
const HEAP_LIMIT: usize = 64 << 20;

/// The `grep_files` tool.
pub(crate) struct GrepFiles;

/// The arguments, as the schema describes them.
#[derive(Deserialize)]
struct Args {
    /// The regex, matched against each line.
    pattern: String,
    /// File or folder to search; the whole workspace when absent.
    path: Option<String>,
    /// Only files whose relative path or name matches this glob.
    glob: Option<String>,
    /// Ignore case.
    case_insensitive: Option<bool>,
    /// Lines of context before and after each match (0-5).
    context: Option<usize>,
    /// Most matches returned (1-1000, default 100).
    limit: Option<usize>,
}

impl Tool for GrepFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "grep_files",
            "Search file contents of the workspace for a regex (Rust syntax); returns matching lines as \
             {path, line, text}, with `context` lines before/after when asked. Respects .gitignore; skips \
             binary files and .git, node_modules, target. At most `limit` matches (default 100).",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax), matched per line"},
                    "path": {"type": "string", "description": "File or folder to search, relative to the workspace root (default: all)"},
                    "glob": {"type": "string", "description": "Only files whose path or name matches this glob, e.g. \"*.rs\", \"src/**/*.ts\""},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)"},
                    "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match (default 0)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most matches to return (default 100)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        )
        .read_only(true)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            let cancelled = Arc::new(AtomicBool::new(false));
            // Dropping the call (timeout, deadline) stops the walk at the next file.
            let _stop = StopOnDrop(cancelled.clone());
            super::blocking(move || search(&cx, &args, &cancelled)).await
        })
    }
}

/// Sets its flag when dropped, so the blocking walk stops when its call is
/// cancelled.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One matching line of the result.
struct Hit {
    /// Workspace-relative path of the file.
    path: String,
    /// 1-based line number.
    line: u64,
    /// The line's text, cut at [`MAX_LINE_CHARS`].
    text: String,
    /// Context lines before the match (only when `context > 0`).
    before: Vec<String>,
    /// Context lines after the match (only when `context > 0`).
    after: Vec<String>,
}

/// Runs the walk and the search; called on a blocking thread.
fn search(cx: &ToolContext, args: &Args, cancelled: &AtomicBool) -> Result<ToolOutput, ToolError> {
    let ws = cx.workspace.as_path();
    let ws_root = workspace::Root::open(ws)?;
    let shown = args.path.as_deref().unwrap_or(".");
    let root = workspace::open_existing(&ws_root, shown, workspace::LOOK)?.real;
    workspace::refuse_hidden(cx, &root, shown, false)?;
    let matcher = build_matcher(&args.pattern, args.case_insensitive.unwrap_or(false))?;
    let filter = args.glob.as_deref().map(build_glob).transpose()?;
    let context = args.context.unwrap_or(0).min(MAX_CONTEXT);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);

    let mut exclude = GlobSetBuilder::new();
    for g in DEFAULT_EXCLUDE {
        exclude.add(Glob::new(g).expect("default globs are valid"));
    }
    let exclude = exclude.build().map_err(|e| ToolError::new(e.to_string()))?;

    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(context)
        .after_context(context)
        .heap_limit(Some(HEAP_LIMIT))
        .build();

    let walker = workspace::walk(ws, &root, exclude, cx.confinement.hidden.clone())
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();

    let mut listed = workspace::Listed::new(&ws_root);
    let mut hits: Vec<Hit> = Vec::new();
    let mut files = 0usize;
    let mut truncated = false;
    let mut visited = 0usize;
    for entry in walker {
        if cancelled.load(Ordering::Relaxed) {
            return Err(ToolError::new("grep_files was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        visited += 1;
        if visited > MAX_VISITED {
            truncated = true;
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = workspace::relative(ws, entry.path());
        if let Some(set) = &filter {
            let name = rel.rsplit('/').next().unwrap_or(&rel);
            if !set.is_match(&rel) && !set.is_match(name) {
                continue;
            }
        }
        // Opened beneath the root, never by path, and searched only if it
        // is where the walk listed it: a folder swapped for a symlink during
        // the walk cannot lead the search outside (or into a hidden folder).
        let Some(file) = listed.open(entry.path(), workspace::READ) else { continue };
        let file = std::fs::File::from(file);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let mut sink = FileSink::new(context, limit - hits.len());
        // Unreadable files and files with a line over the heap limit are
        // skipped, as are binary files.
        if searcher.search_file(&matcher, &file, &mut sink).is_err() || sink.binary {
            continue;
        }
        if !sink.hits.is_empty() {
            files += 1;
        }
        let over = sink.over_limit;
        hits.extend(sink.into_hits(&rel));
        if over {
            truncated = true;
            break;
        }
    }

    let matches = hits.len();
    let content: Vec<Value> = hits
        .into_iter()
        .map(|h| {
            let mut v = json!({"path": h.path, "line": h.line, "text": h.text});
            if context > 0 {
                v["before"] = json!(h.before);
                v["after"] = json!(h.after);
            }
            v
        })
        .collect();
    Ok(ToolOutput::with_metadata(
        Value::Array(content),
        json!({
            "matches": matches,
            "files": files,
            "truncated": truncated,
            // Says why when the walk, not the match limit, cut the search.
            "walk_stopped_at": (visited > MAX_VISITED).then_some(MAX_VISITED),
        }),
    ))
}

/// Compiles `pattern` as a per-line regex (no line terminators, no NUL).
fn build_matcher(pattern: &str, case_insensitive: bool) -> Result<RegexMatcher, ToolError> {
    RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .ban_byte(Some(0))
        .build(pattern)
        .map_err(|e| ToolError::new(format!("`pattern` `{pattern}` is not a valid regex: {e}")))
}

/// Compiles the `glob` filter. As in `.gitignore`, `*` does not cross `/`;
/// a glob is matched against the relative path and against the file name,
/// so `*.rs` finds Rust files in every folder and `src/*.rs` only in `src`.
fn build_glob(glob: &str) -> Result<GlobSet, ToolError> {
    let g = GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::new(format!("`glob` `{glob}` is invalid: {e}")))?;
    GlobSetBuilder::new().add(g).build().map_err(|e| ToolError::new(e.to_string()))
}

/// `bytes` as text without its line terminator, cut at [`MAX_LINE_CHARS`].
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}{CUT_MARKER}", &text[..cut]),
        None => text.into_owned(),
    }
}

/// Collects the matches of one file. Matches are kept until `budget` is
/// spent; one more match sets `over_limit`, and the search stops once the
/// last kept match has its after-context. Lines are remembered by number
/// (only when `context > 0`) so each match gets its full before/after
/// windows even when windows of neighbouring matches overlap (the searcher
/// reports each line once). A NUL byte anywhere the searcher reads marks the
/// file binary and its matches are dropped; a NUL only after the point where
/// the limit stopped the search is not seen (as with ripgrep's
/// `--max-count`).
struct FileSink {
    /// Lines of context wanted before and after each match.
    context: u64,
    /// Matches this file may still keep.
    budget: usize,
    /// Kept matches: line number and text.
    hits: Vec<(u64, String)>,
    /// Every reported line within a context window, by number.
    lines: BTreeMap<u64, String>,
    /// A match past the budget was seen.
    over_limit: bool,
    /// The file holds a NUL byte: it is skipped.
    binary: bool,
}

impl FileSink {
    /// A sink wanting `context` lines around each match, keeping at most
    /// `budget` matches.
    fn new(context: usize, budget: usize) -> Self {
        FileSink {
            context: context as u64,
            budget,
            hits: Vec::new(),
            lines: BTreeMap::new(),
            over_limit: false,
            binary: false,
        }
    }

    /// The line after which nothing more is needed, once over the limit.
    fn last_needed(&self) -> u64 {
        self.hits.last().map_or(0, |(n, _)| n + self.context)
    }

    /// Turns the kept matches into hits of `path`, with their windows.
    fn into_hits(self, path: &str) -> Vec<Hit> {
        let c = self.context;
        let window = |from: u64, to: u64| -> Vec<String> {
            (from..=to).filter_map(|n| self.lines.get(&n).cloned()).collect()
        };
        self.hits
            .iter()
            .map(|(n, text)| Hit {
                path: path.to_owned(),
                line: *n,
                text: text.clone(),
                before: if c > 0 && *n > 1 { window(n.saturating_sub(c).max(1), n - 1) } else { Vec::new() },
                after: if c > 0 { window(n + 1, n + c) } else { Vec::new() },
            })
            .collect()
    }
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let n = mat.line_number().unwrap_or(0);
        let text = line_text(mat.bytes());
        if self.hits.len() < self.budget {
            if self.context > 0 {
                self.lines.insert(n, text.clone());
            }
            self.hits.push((n, text));
            return Ok(true);
        }
        self.over_limit = true;
        if self.context > 0 && n <= self.last_needed() {
            self.lines.insert(n, text);
        }
        Ok(n < self.last_needed())
    }

    fn context(&mut self, _: &Searcher, cx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let n = cx.line_number().unwrap_or(0);
        let full = self.hits.len() >= self.budget;
        if !full || n <= self.last_needed() {
            self.lines.insert(n, line_text(cx.bytes()));
        }
        Ok(!(self.over_limit && n >= self.last_needed()))
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_their_terminator_and_are_cut_with_a_marker() {
        assert_eq!(line_text(b"abc\r\n"), "abc");
        assert_eq!(line_text(b"abc"), "abc");
        let long = "é".repeat(MAX_LINE_CHARS + 10);
        let cut = line_text(long.as_bytes());
        assert!(cut.ends_with(CUT_MARKER));
        assert_eq!(cut.trim_end_matches(CUT_MARKER).chars().count(), MAX_LINE_CHARS);
        assert_eq!(line_text("é".repeat(MAX_LINE_CHARS).as_bytes()).chars().count(), MAX_LINE_CHARS);
    }

    #[test]
    fn bad_patterns_name_the_pattern_and_the_error() {
        let e = build_matcher("a(", false).unwrap_err();
        assert!(e.message.contains("`a(`") && e.message.contains("not a valid regex"), "{e}");
        assert!(e.message.contains("unclosed group"), "{e}");
        assert!(build_matcher(r"a\nb", false).is_err());
        assert!(build_matcher("(?i)abc", false).is_ok());
    }

    #[test]
    fn overlapping_windows_give_every_match_its_full_context() {
        let matcher = build_matcher("x", false).unwrap();
        let mut searcher =
            SearcherBuilder::new().line_number(true).before_context(2).after_context(2).build();
        let mut sink = FileSink::new(2, 10);
        searcher.search_slice(&matcher, b"a\nx1\nb\nx2\nc\nd\ne\n", &mut sink).unwrap();
        let hits = sink.into_hits("f");
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].before, vec!["a"]);
        assert_eq!(hits[0].after, vec!["b", "x2"]);
        assert_eq!(hits[1].before, vec!["x1", "b"]);
        assert_eq!(hits[1].after, vec!["c", "d"]);
    }

    #[test]
    fn the_last_kept_match_gets_its_after_context_past_the_limit() {
        let matcher = build_matcher("x", false).unwrap();
        let mut searcher =
            SearcherBuilder::new().line_number(true).before_context(2).after_context(2).build();
        let mut sink = FileSink::new(2, 1);
        searcher.search_slice(&matcher, b"x1\nx2\nb\nc\nx3\n", &mut sink).unwrap();
        assert!(sink.over_limit);
        let hits = sink.into_hits("f");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].after, vec!["x2", "b"]);
    }
}
