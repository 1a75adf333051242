//! `grep_files {pattern, path?, glob?, case_insensitive?, context?, output?,
//! offset?, limit?}`: regex search across the workspace with bounded output,
//! paged by `offset`. The walk respects `.gitignore` and friends and the
//! default exclusions of `file_search`; binary files are skipped
//! (grep-searcher's binary detection).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde::Deserialize;
use serde_json::{Value, json};

use super::file_search::DEFAULT_EXCLUDE;
use super::path_glob::{PathGlob, PathGlobSet};
use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Matches returned when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// Most matches one call may ask for.
const MAX_LIMIT: usize = 1_000;
/// Most context lines before and after a match.
const MAX_CONTEXT: usize = 5;
/// The largest `offset` accepted (no search lists more entries).
const MAX_OFFSET: u64 = 1_000_000_000;
/// Characters kept of one line; longer lines are cut with [`CUT_MARKER`].
const MAX_LINE_CHARS: usize = 500;
/// Appended to a line cut at [`MAX_LINE_CHARS`].
const CUT_MARKER: &str = " [line cut]";
/// Most bytes of JSON one page's entries take: safely under the engine's
/// result bound (100 KiB by default), as `read`'s window is, so a page is
/// never cut into a string; the page ends before the entry that would pass
/// it (a page always holds at least one entry) and `next_offset` goes on
/// from there.
const MAX_PAGE_BYTES: usize = 64 << 10;
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
    /// Most entries returned (1-1000, default 100).
    limit: Option<usize>,
    /// Entries to skip first (paging), default 0.
    offset: Option<usize>,
    /// What one entry is.
    output: Option<Output>,
}

/// What the content lists, one entry per...
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Output {
    /// ...matching line (the default).
    #[default]
    Matches,
    /// ...file with a match: its first match (each file stops being
    /// searched at its first match).
    Files,
    /// ...file with a match: its first match and `count`, the file's
    /// matching lines.
    Count,
}

impl Tool for GrepFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "grep_files",
            "Search file contents of the workspace for a regex (Rust syntax); returns matching lines as \
             {path, line, text}, with `context` lines before/after when asked; output \"files\" gives one entry per \
             file, \"count\" adds each file's `count`. Respects .gitignore; skips binary files and .git, node_modules, \
             target. At most `limit` entries (default 100) from `offset`; metadata.next_offset pages on.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax), matched per line"},
                    "path": {"type": "string", "description": "File or folder to search, relative to the workspace root (default: all)"},
                    "glob": {"type": "string", "description": "Only files whose path or name matches this glob, e.g. \"*.rs\", \"src/**/*.ts\""},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)"},
                    "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match (default 0)"},
                    "output": {"enum": ["matches", "files", "count"], "description": "One entry per match (default) or per file"},
                    "offset": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "description": "Entries to skip (paging)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most entries to return (default 100)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::grep_files())
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
    /// The file's matching lines (output `count` only).
    count: Option<u64>,
}

/// Runs the walk and the search; called on a blocking thread.
fn search(cx: &ToolContext, args: &Args, cancelled: &AtomicBool) -> Result<ToolOutput, ToolError> {
    let ws = cx.workspace.as_path();
    let ws_root = workspace::Root::open(ws)?;
    let shown = args.path.as_deref().unwrap_or(".");
    let root = workspace::open_existing(&ws_root, shown, workspace::LOOK)?.real;
    workspace::refuse_hidden(cx, &root, shown, false)?;
    let matcher = build_matcher(&args.pattern, args.case_insensitive.unwrap_or(false))?;
    let filter = args.glob.as_deref().map(|g| PathGlob::new(g, "`glob`")).transpose()?;
    let output = args.output.unwrap_or_default();
    let page = Page {
        output,
        context: if output == Output::Matches { args.context.unwrap_or(0).min(MAX_CONTEXT) } else { 0 },
        limit: args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
        offset: args.offset.unwrap_or(0),
    };

    let exclude = PathGlobSet::new(DEFAULT_EXCLUDE, "default exclusions")?;

    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(page.context)
        .after_context(page.context)
        .heap_limit(Some(HEAP_LIMIT))
        .build();

    let walker = workspace::walk(ws, &root, exclude, cx.confinement.clone(), "grep_files")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();

    // Every file is searched, so the totals are exact (but for `files`,
    // which stops each file at its first match); only the entries in
    // [offset, offset + limit) are kept.
    let mut listed = workspace::Listed::new(&ws_root);
    let mut found = Found::default();
    let mut visited = 0usize;
    for entry in walker {
        if cancelled.load(Ordering::Relaxed) {
            return Err(ToolError::new("grep_files was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        visited += 1;
        if visited > MAX_VISITED {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = workspace::relative(ws, entry.path());
        if let Some(glob) = &filter
            && !glob.is_match(&rel)
        {
            continue;
        }
        // Opened beneath the root, never by path, and searched only if it
        // is where the walk listed it: a folder swapped for a symlink during
        // the walk cannot lead the search outside (or into a hidden folder).
        let Some(file) = listed.open(entry.path(), workspace::READ) else { continue };
        let file = std::fs::File::from(file);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        found.search_file(&mut searcher, &matcher, &file, &rel, page);
    }
    Ok(search_output(found, page, visited > MAX_VISITED))
}

/// The page a search asks for.
#[derive(Clone, Copy)]
struct Page {
    /// What one entry is.
    output: Output,
    /// Lines of context before and after each match (0 unless `matches`).
    context: usize,
    /// Most entries kept.
    limit: usize,
    /// Entries skipped first.
    offset: usize,
}

/// What a search found so far.
#[derive(Default)]
struct Found {
    /// The entries kept, those in the page's window.
    hits: Vec<Hit>,
    /// Entries (matches, or files) in the files searched so far.
    entries: usize,
    /// Matching lines in the files searched so far.
    total_matches: u64,
    /// Files with a match so far.
    files: usize,
}

impl Found {
    /// Searches `file` (at `rel`) with `matcher`, counting its matches and
    /// keeping its entries that fall in `page`'s window. Unreadable files
    /// and files with a line over the heap limit are skipped, as are binary
    /// files.
    fn search_file(
        &mut self,
        searcher: &mut Searcher,
        matcher: &RegexMatcher,
        file: &std::fs::File,
        rel: &str,
        page: Page,
    ) {
        let output = page.output;
        // Matches of this file before the window and kept in it.
        let (skip, budget) = match output {
            Output::Matches => window(self.entries, page.offset, page.limit, self.hits.len()),
            // One entry per file: all of it or nothing.
            _ => match window(self.entries, page.offset, page.limit, self.hits.len()) {
                (0, b) if b > 0 => (0, 1),
                _ => (0, 0),
            },
        };
        let mut sink = FileSink::new(page.context, skip, budget, output == Output::Files);
        if searcher.search_file(matcher, file, &mut sink).is_err() || sink.binary || sink.count == 0 {
            return;
        }
        self.files += 1;
        self.total_matches += sink.count;
        self.entries += if output == Output::Matches { sink.count as usize } else { 1 };
        let count = (output == Output::Count).then_some(sink.count);
        self.hits.extend(sink.into_hits(rel, count));
    }
}

/// The result of a search: the kept entries, as many as fit in
/// [`MAX_PAGE_BYTES`] of JSON (at least one), and the metadata (totals,
/// paging, and what cut the page: `walk_cut` when the walk stopped at
/// [`MAX_VISITED`]).
fn search_output(found: Found, page: Page, walk_cut: bool) -> ToolOutput {
    let Found { hits, entries, total_matches, files } = found;
    let Page { output, context, offset, .. } = page;
    let (kept, mut page_bytes) = (hits.len(), 2usize);
    let content: Vec<Value> = hits
        .into_iter()
        .map(|h| {
            let mut v = json!({"path": h.path, "line": h.line, "text": h.text});
            if context > 0 {
                v["before"] = json!(h.before);
                v["after"] = json!(h.after);
            }
            if let Some(count) = h.count {
                v["count"] = json!(count);
            }
            v
        })
        .take_while(|v| {
            let size = v.to_string().len() + 1;
            let fits = page_bytes == 2 || page_bytes + size <= MAX_PAGE_BYTES;
            page_bytes += size;
            fits
        })
        .collect::<Vec<Value>>();
    let bytes_cut = content.len() < kept;
    let next = offset + content.len();
    let next_offset = (next < entries).then_some(next);
    let cut = (next_offset.is_some() || walk_cut).then(|| {
        let kept = serde_json::to_string(&content).map_or(0, |j| j.len());
        page_cut(offset, next, entries, next_offset, bytes_cut, walk_cut, kept)
    });
    ToolOutput::with_metadata(
        Value::Array(content),
        json!({
            "output": match output { Output::Matches => "matches", Output::Files => "files", Output::Count => "count" },
            "returned": next - offset,
            // Matching lines in all searched files; unknown (null) for
            // `files`, which stops at each file's first match.
            "matches": (output != Output::Files).then_some(total_matches),
            "files": files,
            "offset": offset,
            "next_offset": next_offset,
            "truncated": next_offset.is_some() || walk_cut,
            // Set when the page's size in bytes, not `limit`, ended it.
            "page_bytes_cut": bytes_cut,
            // Says why when the walk, not the limit, cut the search.
            "walk_stopped_at": walk_cut.then_some(MAX_VISITED),
        }),
    )
    .cut(cut)
}

/// The envelope's `truncated` of a page of entries `offset..next` of
/// `entries` that is not all of them (more follow, or the walk stopped);
/// `page_bytes` is the page's JSON size.
#[allow(clippy::too_many_arguments)] // the page's facts, each named
fn page_cut(
    offset: usize,
    next: usize,
    entries: usize,
    next_offset: Option<usize>,
    bytes_cut: bool,
    walk_cut: bool,
    page_bytes: usize,
) -> crate::receipt::Truncation {
    let mut how = match next_offset {
        Some(n) if bytes_cut => format!(
            "entries {offset}-{} of {entries}: the page ends at {} KiB of JSON; continue with offset {n} \
             (metadata.next_offset) until it is null",
            next - 1,
            MAX_PAGE_BYTES >> 10
        ),
        Some(n) => format!(
            "entries {offset}-{} of {entries}: the page ends at `limit`; continue with offset {n} \
             (metadata.next_offset) until it is null",
            next.saturating_sub(1)
        ),
        None => String::new(),
    };
    if walk_cut {
        if !how.is_empty() {
            how.push_str("; ");
        }
        how.push_str(&format!(
            "the walk stopped after {MAX_VISITED} entries: search a narrower `path` or `glob` for the rest"
        ));
    }
    crate::receipt::Truncation::by_tool(None, page_bytes as u64, how)
}

/// For a file whose entries start at index `first` (entries before it in
/// the walk), with `kept` entries already kept: how many of its entries to
/// skip before the page `[offset, offset + limit)` starts, and how many it
/// may keep.
fn window(first: usize, offset: usize, limit: usize, kept: usize) -> (usize, usize) {
    (offset.saturating_sub(first), limit - kept)
}

/// Compiles `pattern` as a per-line regex (no line terminators, no NUL).
fn build_matcher(pattern: &str, case_insensitive: bool) -> Result<RegexMatcher, ToolError> {
    RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .ban_byte(Some(0))
        .build(pattern)
        .map_err(|e| {
            // The matcher wraps the pattern (`(?:...)`) before parsing; the
            // plain parse shows the error at the user's own pattern.
            let e = regex::Regex::new(pattern).err().map_or_else(|| e.to_string(), |plain| plain.to_string());
            ToolError::new(format!("`pattern` `{pattern}` is not a valid regex: {e}"))
        })
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

/// Counts the matches of one file and keeps those of the page: the first
/// `skip` matches are passed over, then up to `budget` are kept (with
/// their context windows), and the rest only counted; with `first_only`
/// the file stops at its first match. Lines are remembered by number (only
/// when `context > 0`, and only near kept matches) so each kept match gets
/// its full before/after windows even when windows of neighbouring matches
/// overlap (the searcher reports each line once). A NUL byte anywhere the
/// searcher reads marks the file binary and it is skipped; a NUL only after
/// the first match of a `first_only` search is not seen (as with ripgrep's
/// `--files-with-matches`).
struct FileSink {
    /// Lines of context wanted before and after each match.
    context: u64,
    /// Matches to pass over before keeping any.
    skip: u64,
    /// Matches this file may keep.
    budget: usize,
    /// Stop at the first match.
    first_only: bool,
    /// Matching lines seen.
    count: u64,
    /// Kept matches: line number and text.
    hits: Vec<(u64, String)>,
    /// Reported lines within a kept match's context window, by number.
    lines: BTreeMap<u64, String>,
    /// The file holds a NUL byte: it is skipped.
    binary: bool,
}

impl FileSink {
    /// A sink wanting `context` lines around each kept match.
    fn new(context: usize, skip: usize, budget: usize, first_only: bool) -> Self {
        FileSink {
            context: context as u64,
            skip: skip as u64,
            budget,
            first_only,
            count: 0,
            hits: Vec::new(),
            lines: BTreeMap::new(),
            binary: false,
        }
    }

    /// Whether more matches may still be kept.
    fn open(&self) -> bool {
        self.hits.len() < self.budget
    }

    /// The line after which no context is needed, once the page is full.
    fn last_needed(&self) -> u64 {
        self.hits.last().map_or(0, |(n, _)| n + self.context)
    }

    /// Remembers line `n` when a kept match (past or to come) may need it
    /// as context; before the first kept match only the last `context`
    /// lines are held.
    fn remember(&mut self, n: u64, text: String) {
        if self.context == 0 || !(self.open() || n <= self.last_needed()) {
            return;
        }
        self.lines.insert(n, text);
        if self.hits.is_empty() {
            let keep_from = (n + 1).saturating_sub(self.context);
            self.lines.retain(|k, _| *k >= keep_from);
        }
    }

    /// Turns the kept matches into hits of `path`, with their windows and
    /// (for output `count`) the file's `count`.
    fn into_hits(self, path: &str, count: Option<u64>) -> Vec<Hit> {
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
                count,
            })
            .collect()
    }
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let n = mat.line_number().unwrap_or(0);
        let index = self.count;
        self.count += 1;
        let wanted = index >= self.skip && self.open();
        if !wanted && self.context == 0 {
            return Ok(!self.first_only);
        }
        let text = line_text(mat.bytes());
        if wanted {
            if self.context > 0 {
                self.lines.insert(n, text.clone());
            }
            self.hits.push((n, text));
        } else {
            self.remember(n, text);
        }
        Ok(!self.first_only)
    }

    fn context(&mut self, _: &Searcher, cx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let n = cx.line_number().unwrap_or(0);
        self.remember(n, line_text(cx.bytes()));
        Ok(true)
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
        assert!(!e.message.contains("(?:"), "the error shows the pattern as given: {e}");
        assert!(build_matcher(r"a\nb", false).is_err());
        assert!(build_matcher("(?i)abc", false).is_ok());
    }

    #[test]
    fn overlapping_windows_give_every_match_its_full_context() {
        let matcher = build_matcher("x", false).unwrap();
        let mut searcher =
            SearcherBuilder::new().line_number(true).before_context(2).after_context(2).build();
        let mut sink = FileSink::new(2, 0, 10, false);
        searcher.search_slice(&matcher, b"a\nx1\nb\nx2\nc\nd\ne\n", &mut sink).unwrap();
        let hits = sink.into_hits("f", None);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].before, vec!["a"]);
        assert_eq!(hits[0].after, vec!["b", "x2"]);
        assert_eq!(hits[1].before, vec!["x1", "b"]);
        assert_eq!(hits[1].after, vec!["c", "d"]);
    }

    #[test]
    fn the_page_skips_counts_and_keeps_full_context_past_the_limit() {
        let matcher = build_matcher("x", false).unwrap();
        let mut searcher =
            SearcherBuilder::new().line_number(true).before_context(2).after_context(2).build();
        // Skip one match, keep one, count all five.
        let mut sink = FileSink::new(2, 1, 1, false);
        searcher.search_slice(&matcher, b"x1\nx2\nb\nc\nx3\nx4\nd\nx5\n", &mut sink).unwrap();
        assert_eq!(sink.count, 5);
        let hits = sink.into_hits("f", Some(5));
        assert_eq!(hits.len(), 1);
        assert_eq!((hits[0].line, hits[0].text.as_str()), (2, "x2"));
        assert_eq!(hits[0].before, vec!["x1"]);
        assert_eq!(hits[0].after, vec!["b", "c"]);
        assert_eq!(hits[0].count, Some(5));
        let mut first = FileSink::new(0, 0, 1, true);
        searcher.search_slice(&matcher, b"a\nx1\nx2\n", &mut first).unwrap();
        assert_eq!(first.count, 1);
    }
}
