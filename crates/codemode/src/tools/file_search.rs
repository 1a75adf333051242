//! `file_search {query, path?, limit?, extensions?, exclude?}`: files by
//! name, path fragment or glob, ranked and bounded; respects `.gitignore`
//! and friends (the `ignore` crate).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::path_glob::{PathGlob, PathGlobSet};
use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Matches returned when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// Entries visited before the walk stops and says so.
const MAX_VISITED: usize = 200_000;
/// Folders skipped unless `exclude` is given.
pub(crate) const DEFAULT_EXCLUDE: &[&str] = &["**/.git", "**/node_modules", "**/target", "**/.codemode"];

pub(crate) struct FileSearch;

#[derive(Deserialize)]
struct Args {
    query: String,
    path: Option<String>,
    limit: Option<usize>,
    extensions: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
}

impl Tool for FileSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "file_search",
            "Find files of the workspace by name, path fragment (case-insensitive) or glob as in .gitignore \
             (`mod*` and `*.rs` match names at any depth, `src/**/mod.rs` from the root); best matches first. Respects .gitignore. `exclude` globs replace the \
             default exclusions (.git, node_modules, target).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Name, path fragment or glob"},
                    "path": {"type": "string", "description": "Folder to search, relative to the workspace root"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most files to return (default 100)"},
                    "extensions": {"type": "array", "items": {"type": "string"}, "description": "Only these extensions, e.g. [\"rs\", \"md\"]"},
                    "exclude": {"type": "array", "items": {"type": "string"}, "description": "Globs of paths to skip, read as query globs are (`node_modules` at any depth, `src/gen` from the root)"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::file_search())
        .read_only(true)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            super::blocking(move || search(&cx, &args)).await
        })
    }
}

enum Matcher {
    Glob(PathGlob),
    Fragment(String),
}

fn search(cx: &ToolContext, args: &Args) -> Result<ToolOutput, ToolError> {
    let ws_root = workspace::Root::open(&cx.workspace)?;
    let shown = args.path.as_deref().unwrap_or(".");
    let start = workspace::open_existing(&ws_root, shown, workspace::LOOK)?;
    workspace::refuse_hidden(cx, &start.real, shown, false)?;
    if !std::fs::File::from(start.fd).metadata().is_ok_and(|m| m.is_dir()) {
        return Err(ToolError::new("`path` must be a folder"));
    }
    let root = start.real;
    let query = args.query.trim();
    if query.is_empty() {
        return Err(ToolError::new("`query` is empty: give a name, a path fragment or a glob"));
    }
    let matcher = if query.contains(['*', '?', '[', '{']) {
        Matcher::Glob(PathGlob::new(query, "`query`")?)
    } else {
        Matcher::Fragment(query.to_lowercase())
    };
    let exclude = match &args.exclude {
        Some(list) => PathGlobSet::new(list, "`exclude`")?,
        None => PathGlobSet::new(DEFAULT_EXCLUDE, "default exclusions")?,
    };
    let extensions: Option<Vec<String>> = args
        .extensions
        .as_ref()
        .map(|v| v.iter().map(|e| e.trim_start_matches('.').to_lowercase()).collect());
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);

    let mut hits: Vec<(u8, String, std::path::PathBuf)> = Vec::new();
    let mut visited = 0usize;
    let ws = cx.workspace.as_path();
    let walker = workspace::walk(ws, &root, exclude, cx.confinement.clone(), "file_search").build();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        visited += 1;
        if visited > MAX_VISITED {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = workspace::relative(ws, entry.path());
        if let Some(exts) = &extensions {
            let ext =
                Path::new(&rel).extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
            if !exts.contains(&ext) {
                continue;
            }
        }
        if let Some(rank) = rank(&matcher, &rel) {
            hits.push((rank, rel, entry.into_path()));
        }
    }
    hits.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.len().cmp(&b.1.len())).then(a.1.cmp(&b.1)));
    let total = hits.len();
    // The walk lists folders by path: a folder swapped for a symlink
    // meanwhile could list names from elsewhere. A returned file is looked
    // up again beneath the root and kept only if it is where it was listed.
    let mut listed = workspace::Listed::new(&ws_root);
    let files: Vec<String> = hits
        .into_iter()
        .filter(|(_, _, path)| listed.open(path, workspace::LOOK).is_some())
        .map(|(_, p, _)| p)
        .take(limit)
        .collect();
    let walk_cut = visited > MAX_VISITED;
    let cut = search_cut(&files, total, walk_cut);
    Ok(ToolOutput::with_metadata(
        json!(files),
        json!({
            "matches": total,
            "returned": files.len(),
            "truncated": total > files.len() || walk_cut,
            "walk_stopped_at": if walk_cut { Some(MAX_VISITED) } else { None },
        }),
    )
    .cut(cut))
}

/// 0 file name equals the query, 1 name starts with it, 2 name contains it,
/// 3 path contains it; a glob matching the relative path is rank 0 (see
/// [`PathGlob`]: without a `/` it matches the name at any depth).
fn rank(m: &Matcher, rel: &str) -> Option<u8> {
    match m {
        Matcher::Glob(glob) => glob.is_match(rel).then_some(0),
        Matcher::Fragment(q) => {
            let lower = rel.to_lowercase();
            let name = lower.rsplit('/').next().unwrap_or(&lower);
            if name == q {
                Some(0)
            } else if name.starts_with(q.as_str()) {
                Some(1)
            } else if name.contains(q.as_str()) {
                Some(2)
            } else if lower.contains(q.as_str()) {
                Some(3)
            } else {
                None
            }
        }
    }
}

/// What a search that returned `files` of `total` matches (and, when
/// `walk_cut`, stopped its walk early) says in `truncated`; none when it
/// returned them all.
fn search_cut(files: &[String], total: usize, walk_cut: bool) -> Option<crate::receipt::Truncation> {
    (total > files.len() || walk_cut).then(|| {
        let mut how = format!(
            "{} of {total} matching files{}",
            files.len(),
            if total > files.len() {
                ", the best ranked first: a larger `limit` (at most 1000) or a narrower query lists more"
            } else {
                ""
            }
        );
        if walk_cut {
            how.push_str(&format!(
                "; the walk stopped after {MAX_VISITED} entries: search a narrower `path` for the rest"
            ));
        }
        let kept = serde_json::to_string(files).map_or(0, |j| j.len());
        crate::receipt::Truncation::by_tool(None, kept as u64, how)
    })
}
