//! `grep_files`, `write` and `edit` on real files: the normal cases, every
//! bound, every refusal, that a failed call changes nothing, and that a
//! direct call and the same call from a program give the same envelope.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use codemode::{Engine, Program, Receipt, receipt::CallStatus, receipt::RunStatus, run::CallOutcome};
use serde_json::{Value, json};

/// A workspace `ws/` inside an outer temp folder that also holds a file and
/// a folder outside the workspace, for the escape routes.
struct Fixture {
    outer: tempfile::TempDir,
    spill: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let outer = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outer.path().join("ws/docs")).unwrap();
        std::fs::create_dir_all(outer.path().join("outside")).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "needle secret\n").unwrap();
        std::fs::write(outer.path().join("outside/s.txt"), "needle outside\n").unwrap();
        let f = Fixture { outer, spill: tempfile::tempdir().unwrap() };
        f.put("a.txt", "alpha\nbeta\ngamma\n");
        f.put("docs/guide.md", "# Guide\n\nHello needle.\n");
        f
    }

    /// The workspace root.
    fn ws(&self) -> PathBuf {
        self.outer.path().join("ws")
    }

    /// Writes `rel` in the workspace, creating folders.
    fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.ws().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws().join(rel)).unwrap()
    }

    /// An engine with the native tools over the workspace; spill files go
    /// elsewhere so snapshots only see what the tools did.
    fn engine(&self) -> Engine {
        crate::common::engine_builder()
            .workspace(self.ws())
            .spill_dir(self.spill.path())
            .policy(codemode::Policy::full_access())
            .vm_threads(1)
            .build()
            .unwrap()
    }

    /// `message` with this fixture's workspace path replaced by `<ws>`.
    fn normalise(&self, message: &str) -> String {
        let ws = std::fs::canonicalize(self.ws()).unwrap();
        message.replace(&ws.to_string_lossy().into_owned(), "<ws>")
    }

    /// Every file, folder and link under the outer folder (the workspace and
    /// what is outside it), with file bytes, link targets and modes.
    fn snapshot(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(self.outer.path(), self.outer.path(), &mut out);
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.file_type().is_symlink() {
            out.insert(rel, format!("link -> {}", std::fs::read_link(&p).unwrap().display()));
        } else if meta.is_dir() {
            out.insert(rel.clone(), format!("dir {:o}", mode(&meta)));
            walk(root, &p, out);
        } else {
            out.insert(rel, format!("file {:o} {:?}", mode(&meta), std::fs::read(&p).unwrap()));
        }
    }
}

#[cfg(unix)]
fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode(meta: &std::fs::Metadata) -> u32 {
    u32::from(meta.permissions().readonly())
}

#[cfg(unix)]
fn chmod(path: &Path, m: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap();
}

/// The envelope's content of a successful direct call.
fn content(out: &CallOutcome) -> &Value {
    assert!(out.is_ok(), "{:?}", out.error);
    &out.envelope.as_ref().unwrap()["content"]
}

fn metadata(out: &CallOutcome) -> &Value {
    assert!(out.is_ok(), "{:?}", out.error);
    &out.envelope.as_ref().unwrap()["metadata"]
}

/// The message of a failed direct call (`kind` failed).
fn failure(out: &CallOutcome) -> String {
    assert_eq!(out.call.status, CallStatus::Failed, "{:?} {:?}", out.envelope, out.error);
    let e = out.error.as_ref().unwrap();
    assert_eq!(e["kind"], "failed");
    e["message"].as_str().unwrap().to_owned()
}

/// Calls `tool` directly and asserts it failed without changing anything
/// inside or outside the workspace; returns the message.
fn fails_cleanly(f: &Fixture, engine: &Engine, tool: &str, args: Value) -> String {
    let before = f.snapshot();
    let out = engine.call_blocking(tool, &args);
    let message = failure(&out);
    assert_eq!(f.snapshot(), before, "{tool} {args} changed files and failed with: {message}");
    message
}

fn run(engine: &Engine, src: &str) -> Receipt {
    engine.execute_blocking(Program::new(src))
}

// ---------------------------------------------------------------- grep_files

#[test]
fn grep_returns_path_line_and_text_of_each_match() {
    let f = Fixture::new();
    f.put("src/lib.rs", "fn main() {}\n// needle here\nlet Needle = 1;\n");
    f.put("src/deep/mod.rs", "needle in mod\n");
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "needle"}));
    assert_eq!(
        content(&out),
        &json!([
            {"path": "docs/guide.md", "line": 3, "text": "Hello needle."},
            {"path": "src/deep/mod.rs", "line": 1, "text": "needle in mod"},
            {"path": "src/lib.rs", "line": 2, "text": "// needle here"},
        ])
    );
    assert_eq!(
        metadata(&out),
        &json!({"output": "matches", "returned": 3, "matches": 3, "files": 3, "offset": 0, "next_offset": null, "truncated": false, "page_bytes_cut": false, "walk_stopped_at": null})
    );

    let ci = e.call_blocking("grep_files", &json!({"pattern": "NEEDLE\\s*=", "case_insensitive": true}));
    assert_eq!(content(&ci), &json!([{"path": "src/lib.rs", "line": 3, "text": "let Needle = 1;"}]));
    let cs = e.call_blocking("grep_files", &json!({"pattern": "NEEDLE"}));
    assert_eq!(content(&cs), &json!([]));
    assert_eq!(
        metadata(&cs),
        &json!({"output": "matches", "returned": 0, "matches": 0, "files": 0, "offset": 0, "next_offset": null, "truncated": false, "page_bytes_cut": false, "walk_stopped_at": null})
    );

    // `glob` filters by name anywhere, or by path when it has a `/`.
    let paths = |args: Value| -> Vec<String> {
        let out = e.call_blocking("grep_files", &args);
        content(&out).as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(paths(json!({"pattern": "needle", "glob": "*.rs"})), ["src/deep/mod.rs", "src/lib.rs"]);
    assert_eq!(paths(json!({"pattern": "needle", "glob": "src/*.rs"})), ["src/lib.rs"]);
    assert_eq!(paths(json!({"pattern": "needle", "glob": "**/*.{md,txt}"})), ["docs/guide.md"]);
    assert_eq!(paths(json!({"pattern": "needle", "glob": "mod.rs"})), ["src/deep/mod.rs"]);
    // `path` narrows to a folder or one file.
    assert_eq!(paths(json!({"pattern": "needle", "path": "src"})), ["src/deep/mod.rs", "src/lib.rs"]);
    assert_eq!(paths(json!({"pattern": "needle", "path": "src/lib.rs"})), ["src/lib.rs"]);
    assert_eq!(paths(json!({"pattern": "needle", "path": "./docs/../src/deep"})), ["src/deep/mod.rs"]);
    // Nothing outside the workspace is searched.
    assert!(!paths(json!({"pattern": "secret|outside"})).iter().any(|p| p.contains("secret")));
}

#[test]
fn grep_stops_at_the_limit_counts_every_match_and_says_truncated_only_when_more_matched() {
    let f = Fixture::new();
    f.put("many.txt", (1..=30).map(|i| format!("hit {i}\n")).collect::<String>());
    f.put("more.txt", "hit a\nhit b\n");
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "^hit", "limit": 10}));
    let hits = content(&out).as_array().unwrap();
    assert_eq!(hits.len(), 10);
    assert_eq!(hits[9], json!({"path": "many.txt", "line": 10, "text": "hit 10"}));
    assert_eq!(
        metadata(&out),
        &json!({"output": "matches", "returned": 10, "matches": 32, "files": 2, "offset": 0, "next_offset": 10, "truncated": true, "page_bytes_cut": false, "walk_stopped_at": null})
    );

    // Exactly as many matches as the limit: not truncated.
    let out = e.call_blocking("grep_files", &json!({"pattern": "^hit", "limit": 32}));
    assert_eq!(
        metadata(&out),
        &json!({"output": "matches", "returned": 32, "matches": 32, "files": 2, "offset": 0, "next_offset": null, "truncated": false, "page_bytes_cut": false, "walk_stopped_at": null})
    );
    // One more match in the next file: truncated.
    let out = e.call_blocking("grep_files", &json!({"pattern": "^hit", "limit": 31}));
    assert_eq!(
        metadata(&out),
        &json!({"output": "matches", "returned": 31, "matches": 32, "files": 2, "offset": 0, "next_offset": 31, "truncated": true, "page_bytes_cut": false, "walk_stopped_at": null})
    );

    // The default limit is 100; the most is 1000 (the schema refuses more).
    f.put("many.txt", "hit\n".repeat(150));
    let out = e.call_blocking("grep_files", &json!({"pattern": "^hit"}));
    assert_eq!(metadata(&out)["returned"], json!(100));
    assert_eq!(metadata(&out)["matches"], json!(152));
    assert_eq!(metadata(&out)["truncated"], json!(true));
    let over = e.call_blocking("grep_files", &json!({"pattern": "x", "limit": 1001}));
    assert_eq!(over.call.status, CallStatus::Refused);
}

#[test]
fn grep_pages_past_any_limit_and_counts_per_file() {
    let f = Fixture::new();
    // 1,234 TODOs over 60 files (more than the 1,000 one call may return),
    // plus files without any.
    for i in 0..60 {
        let n = if i < 34 { 21 } else { 20 };
        let body: String = (0..n).map(|j| format!("line {j}\n// TODO item {i}-{j}\n")).collect();
        f.put(&format!("src/m{i:02}.rs"), body);
    }
    f.put("src/clean.rs", "fn ok() {}\n");
    let e = f.engine();
    // A program pages through every match, 300 at a time.
    let r = run(
        &e,
        "let all = [], offset = 0, pages = 0, last; \
         for (;;) { \
           const r = await tools.grep_files({pattern: 'TODO', offset, limit: 300}); pages++; \
           all.push(...r.content); last = r.metadata; \
           if (r.metadata.next_offset === null) break; \
           offset = r.metadata.next_offset; \
         } \
         const counts = await tools.grep_files({pattern: 'TODO', output: 'count', limit: 1000}); \
         const files = await tools.grep_files({pattern: 'TODO', output: 'files', offset: 55}); \
         return {n: all.length, distinct: new Set(all.map(m => m.path + ':' + m.line)).size, pages, last, \
                 sum: counts.content.reduce((s, c) => s + c.count, 0), per_file: counts.content.length, \
                 counts_meta: counts.metadata, first: counts.content[0], files: files.content.map(f => f.path), \
                 files_meta: files.metadata};",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let v = &r.value;
    assert_eq!(v["n"], json!(1234));
    assert_eq!(v["distinct"], json!(1234));
    assert_eq!(v["pages"], json!(5));
    assert_eq!(v["last"]["matches"], json!(1234));
    assert_eq!(v["last"]["offset"], json!(1200));
    assert_eq!(v["last"]["returned"], json!(34));
    assert_eq!(v["sum"], json!(1234));
    assert_eq!(v["per_file"], json!(60));
    assert_eq!(v["counts_meta"]["files"], json!(60));
    assert_eq!(v["first"], json!({"path": "src/m00.rs", "line": 2, "text": "// TODO item 0-0", "count": 21}));
    assert_eq!(v["files"], json!(["src/m55.rs", "src/m56.rs", "src/m57.rs", "src/m58.rs", "src/m59.rs"]));
    assert_eq!(v["files_meta"]["matches"], json!(null), "files stops at each file's first match");
    assert_eq!(v["files_meta"]["next_offset"], json!(null));
    // A page inside one file keeps the context of its matches.
    let out = e.call_blocking(
        "grep_files",
        &json!({"pattern": "TODO", "path": "src/m00.rs", "offset": 3, "limit": 2, "context": 1}),
    );
    assert_eq!(
        content(&out),
        &json!([
            {"path": "src/m00.rs", "line": 8, "text": "// TODO item 0-3", "before": ["line 3"], "after": ["line 4"]},
            {"path": "src/m00.rs", "line": 10, "text": "// TODO item 0-4", "before": ["line 4"], "after": ["line 5"]},
        ])
    );
    assert_eq!(metadata(&out)["next_offset"], json!(5));
}

#[test]
fn grep_context_gives_lines_before_and_after_each_match() {
    let f = Fixture::new();
    f.put("c.txt", "l1\nl2 hit\nl3\nl4\nl5\nl6 hit\nl7\n");
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "hit", "path": "c.txt", "context": 2}));
    assert_eq!(
        content(&out),
        &json!([
            {"path": "c.txt", "line": 2, "text": "l2 hit", "before": ["l1"], "after": ["l3", "l4"]},
            {"path": "c.txt", "line": 6, "text": "l6 hit", "before": ["l4", "l5"], "after": ["l7"]},
        ])
    );
    // Overlapping windows: each match still gets all of its lines, and the
    // last kept match gets its after-context even when the limit cut there.
    let out = e
        .call_blocking("grep_files", &json!({"pattern": "l[23]", "path": "c.txt", "context": 5, "limit": 1}));
    assert_eq!(
        content(&out),
        &json!([{"path": "c.txt", "line": 2, "text": "l2 hit", "before": ["l1"],
                 "after": ["l3", "l4", "l5", "l6 hit", "l7"]}])
    );
    assert_eq!(metadata(&out)["truncated"], json!(true));
    // No context: no before/after keys. More than 5: refused by the schema.
    let out = e.call_blocking("grep_files", &json!({"pattern": "l1", "path": "c.txt", "context": 0}));
    assert_eq!(content(&out), &json!([{"path": "c.txt", "line": 1, "text": "l1"}]));
    let out = e.call_blocking("grep_files", &json!({"pattern": "l1", "context": 6}));
    assert_eq!(out.call.status, CallStatus::Refused);
}

#[test]
fn grep_cuts_long_lines_with_a_marker() {
    let f = Fixture::new();
    let long = format!("needle{}", "é".repeat(2_000));
    f.put("long.txt", format!("{long}\nshort needle\r\n"));
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "needle", "path": "long.txt", "context": 1}));
    let hits = content(&out).as_array().unwrap();
    let text = hits[0]["text"].as_str().unwrap();
    assert!(text.ends_with(" [line cut]"), "{text}");
    assert_eq!(text.trim_end_matches(" [line cut]").chars().count(), 500);
    assert!(long.starts_with(text.trim_end_matches(" [line cut]")));
    // Context lines are cut too; CRLF endings are stripped.
    let after = hits[0]["after"][0].as_str().unwrap();
    assert_eq!(after, "short needle");
    assert_eq!(hits[1]["before"][0].as_str().unwrap(), text);
}

#[test]
fn grep_skips_binary_files() {
    let f = Fixture::new();
    f.put("bin.dat", b"needle\0\x01\x02needle\n".as_slice());
    // A NUL far past the searcher's first buffer: the file is still skipped
    // whole, including the match found before the NUL.
    let mut late = b"needle first\n".to_vec();
    late.extend("filler line\n".repeat(20_000).into_bytes());
    late.extend_from_slice(b"\0needle tail\n");
    f.put("late.bin", late);
    f.put("text.txt", "a needle\n");
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "needle", "glob": "*.{dat,bin,txt}"}));
    assert_eq!(content(&out), &json!([{"path": "text.txt", "line": 1, "text": "a needle"}]));
    assert_eq!(metadata(&out)["files"], json!(1));
    // Naming the binary file itself finds nothing either.
    let out = e.call_blocking("grep_files", &json!({"pattern": "needle", "path": "bin.dat"}));
    assert_eq!(content(&out), &json!([]));
}

#[test]
fn grep_respects_gitignore_and_the_default_exclusions() {
    let f = Fixture::new();
    f.put(".gitignore", "ignored/\n*.log\n");
    f.put("ignored/x.txt", "needle\n");
    f.put("debug.log", "needle\n");
    f.put("node_modules/pkg/index.js", "needle\n");
    f.put("target/debug/out.txt", "needle\n");
    f.put(".git/config", "needle\n");
    f.put(".env.example", "needle = hidden files are searched\n");
    let e = f.engine();
    let out = e.call_blocking("grep_files", &json!({"pattern": "needle"}));
    let paths: Vec<&str> =
        content(&out).as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(paths, [".env.example", "docs/guide.md"]);
}

/// A page of long lines stops at a byte budget under the result bound, so
/// it is never cut into a string, and `next_offset` goes on from the first
/// match it did not return: a paging loop sees every match once.
#[test]
fn grep_pages_stop_at_a_byte_budget_and_lose_no_match() {
    let f = Fixture::new();
    let line = format!("TODO {}\n", "x".repeat(495));
    for i in 0..30 {
        f.put(&format!("gb/f{i:02}.txt"), line.repeat(100));
    }
    let e = f.engine();
    let r = run(
        &e,
        "let seen = new Set(), offset = 0, pages = 0, strings = 0, cut = 0, biggest = 0; \
         while (offset !== null) { \
           const r = await tools.grep_files({pattern: 'TODO', path: 'gb', limit: 1000, offset}); pages++; \
           if (typeof r.content === 'string') { strings++; break; } \
           biggest = Math.max(biggest, JSON.stringify(r.content).length); \
           if (r.metadata.page_bytes_cut) cut++; \
           for (const m of r.content) seen.add(m.path + ':' + m.line); \
           if (r.metadata.next_offset !== null && r.metadata.next_offset !== offset + r.content.length) throw new Error('gap'); \
           offset = r.metadata.next_offset; \
         } \
         return {n: seen.size, pages, strings, cut, biggest};",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let v = &r.value;
    assert_eq!(v["strings"], json!(0), "{v}");
    assert_eq!(v["n"], json!(3000), "{v}");
    assert!(v["pages"].as_u64().unwrap() > 3 && v["cut"].as_u64().unwrap() >= 3, "{v}");
    assert!(v["biggest"].as_u64().unwrap() <= 64 << 10, "{v}");
}

#[test]
fn grep_refuses_bad_patterns_and_paths_outside_the_workspace() {
    let f = Fixture::new();
    let e = f.engine();
    let m = fails_cleanly(&f, &e, "grep_files", json!({"pattern": "fn (main"}));
    assert!(
        m.contains("`fn (main`")
            && m.contains("not a valid regex")
            && m.contains("unclosed group")
            && !m.contains("(?:"),
        "{m}"
    );
    let m = fails_cleanly(&f, &e, "grep_files", json!({"pattern": "a", "glob": "[z-a]"}));
    assert!(m.contains("`glob`"), "{m}");
    let abs = f.outer.path().join("outside").to_string_lossy().into_owned();
    for path in ["..", "../outside", "docs/../../outside", abs.as_str(), "/etc"] {
        let m = fails_cleanly(&f, &e, "grep_files", json!({"pattern": "needle", "path": path}));
        assert!(m.contains("outside the workspace"), "{path}: {m}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(f.outer.path().join("outside"), f.ws().join("out")).unwrap();
        std::os::unix::fs::symlink(f.outer.path().join("secret.txt"), f.ws().join("secret-link")).unwrap();
        for path in ["out", "out/s.txt", "secret-link"] {
            let m = fails_cleanly(&f, &e, "grep_files", json!({"pattern": "needle", "path": path}));
            assert!(m.contains("outside the workspace"), "{path}: {m}");
        }
        // The walk does not follow links out either.
        let out = e.call_blocking("grep_files", &json!({"pattern": "needle"}));
        assert_eq!(content(&out), &json!([{"path": "docs/guide.md", "line": 3, "text": "Hello needle."}]));
    }
    let m = fails_cleanly(&f, &e, "grep_files", json!({"pattern": "x", "path": "missing"}));
    assert!(m.contains("does not exist"), "{m}");
}

// --------------------------------------------------------------------- write

#[test]
fn write_creates_files_and_parent_folders_and_replaces_files() {
    let f = Fixture::new();
    let e = f.engine();
    let out = e.call_blocking("write", &json!({"path": "new/deep/file.txt", "content": "héllo\n"}));
    assert_eq!(content(&out), &json!({"path": "new/deep/file.txt", "bytes": 7, "created": true}));
    assert_eq!(f.get("new/deep/file.txt"), "héllo\n");

    let out = e.call_blocking("write", &json!({"path": "a.txt", "content": ""}));
    assert_eq!(content(&out), &json!({"path": "a.txt", "bytes": 0, "created": false}));
    assert_eq!(f.get("a.txt"), "");

    // No temp files left behind.
    let names: Vec<String> = std::fs::read_dir(f.ws())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
}

#[cfg(unix)]
#[test]
fn write_keeps_the_mode_of_an_existing_file() {
    let f = Fixture::new();
    let e = f.engine();
    chmod(&f.ws().join("a.txt"), 0o640);
    let out = e.call_blocking("write", &json!({"path": "a.txt", "content": "new\n"}));
    assert!(out.is_ok(), "{:?}", out.error);
    let meta = std::fs::metadata(f.ws().join("a.txt")).unwrap();
    assert_eq!(mode(&meta), 0o640);
    assert_eq!(f.get("a.txt"), "new\n");
    chmod(&f.ws().join("a.txt"), 0o755);
    e.call_blocking("write", &json!({"path": "a.txt", "content": "#!/bin/sh\n"}));
    assert_eq!(mode(&std::fs::metadata(f.ws().join("a.txt")).unwrap()), 0o755);
    // A new file gets the mode any new file gets (0o666 less the umask),
    // not the temp file's 0o600.
    e.call_blocking("write", &json!({"path": "fresh.txt", "content": "x"}));
    std::fs::write(f.outer.path().join("reference.txt"), "x").unwrap();
    assert_eq!(
        mode(&std::fs::metadata(f.ws().join("fresh.txt")).unwrap()),
        mode(&std::fs::metadata(f.outer.path().join("reference.txt")).unwrap())
    );
}

#[test]
fn write_refuses_folders_and_paths_outside_the_workspace() {
    let f = Fixture::new();
    let e = f.engine();
    for path in ["docs", ".", "docs/", "new/"] {
        let m = fails_cleanly(&f, &e, "write", json!({"path": path, "content": "x"}));
        assert!(m.contains("folder") || m.contains("file path"), "{path}: {m}");
    }
    let m = fails_cleanly(&f, &e, "write", json!({"path": "a.txt/inner", "content": "x"}));
    assert!(m.contains("is a file"), "{m}");
    let abs = f.outer.path().join("secret.txt").to_string_lossy().into_owned();
    let abs_new = f.outer.path().join("new.txt").to_string_lossy().into_owned();
    for path in
        ["../secret.txt", "../escape.txt", "docs/../../escape.txt", "new/../../escape.txt", &abs, &abs_new]
    {
        let m = fails_cleanly(&f, &e, "write", json!({"path": path, "content": "pwned"}));
        assert!(m.contains("outside the workspace"), "{path}: {m}");
    }
    let m = fails_cleanly(&f, &e, "write", json!({"path": " ", "content": "x"}));
    assert!(m.contains("empty"), "{m}");
}

#[cfg(unix)]
#[test]
fn write_refuses_symlinks_out_and_writes_through_links_inside() {
    let f = Fixture::new();
    let e = f.engine();
    std::os::unix::fs::symlink(f.outer.path().join("outside"), f.ws().join("out")).unwrap();
    std::os::unix::fs::symlink(f.outer.path().join("secret.txt"), f.ws().join("secret-link")).unwrap();
    std::os::unix::fs::symlink(f.outer.path().join("nothing.txt"), f.ws().join("dangling")).unwrap();
    for path in ["out/s.txt", "out/new.txt", "out/new/deep.txt", "secret-link", "dangling"] {
        let m = fails_cleanly(&f, &e, "write", json!({"path": path, "content": "pwned"}));
        assert!(m.contains("outside the workspace") || m.contains("cannot open"), "{path}: {m}");
    }
    std::os::unix::fs::symlink(f.ws().join("a.txt"), f.ws().join("inner")).unwrap();
    let out = e.call_blocking("write", &json!({"path": "inner", "content": "via link"}));
    assert_eq!(content(&out), &json!({"path": "a.txt", "bytes": 8, "created": false}));
    assert_eq!(f.get("a.txt"), "via link");
    assert!(std::fs::symlink_metadata(f.ws().join("inner")).unwrap().file_type().is_symlink());
}

// ---------------------------------------------------------------------- edit

#[test]
fn edit_applies_several_edits_against_one_snapshot() {
    let f = Fixture::new();
    f.put("src/main.rs", "fn one() {}\nfn two() {}\nfn three() {}\n");
    let e = f.engine();
    let out = e.call_blocking(
        "edit",
        &json!({"path": "src/main.rs", "edits": [
            // The `new` of this edit contains the `old` of the next one; it is
            // not matched again.
            {"old": "fn one() {}", "new": "fn one() { two() }"},
            {"old": "two() {}", "new": "two() { three() }"},
            {"old": "fn three() {}\n", "new": ""},
        ]}),
    );
    let want = "fn one() { two() }\nfn two() { three() }\n";
    assert_eq!(content(&out), &json!({"path": "src/main.rs", "edits": 3, "bytes": want.len()}));
    assert_eq!(f.get("src/main.rs"), want);

    // Order does not matter, unicode works, adjacent edits are fine.
    f.put("u.txt", "αβγδ");
    let out = e.call_blocking(
        "edit",
        &json!({"path": "u.txt", "edits": [{"old": "γδ", "new": "CD"}, {"old": "αβ", "new": "ab"}]}),
    );
    assert!(out.is_ok(), "{:?}", out.error);
    assert_eq!(f.get("u.txt"), "abCD");
}

#[cfg(unix)]
#[test]
fn edit_keeps_the_mode() {
    let f = Fixture::new();
    let e = f.engine();
    chmod(&f.ws().join("a.txt"), 0o640);
    let out = e.call_blocking("edit", &json!({"path": "a.txt", "edits": [{"old": "beta", "new": "BETA"}]}));
    assert_eq!(content(&out), &json!({"path": "a.txt", "edits": 1, "bytes": 17}));
    assert_eq!(f.get("a.txt"), "alpha\nBETA\ngamma\n");
    assert_eq!(mode(&std::fs::metadata(f.ws().join("a.txt")).unwrap()), 0o640);
}

#[test]
fn a_bad_edit_fails_the_whole_call_and_says_which_and_how_many() {
    let f = Fixture::new();
    f.put("dup.txt", "x = 1\ny = 2\nx = 1\n");
    let e = f.engine();
    let edit = |edits: Value| fails_cleanly(&f, &e, "edit", json!({"path": "dup.txt", "edits": edits}));

    // The first edit is fine; the second is ambiguous: nothing is applied.
    let m = edit(json!([{"old": "y = 2", "new": "y = 3"}, {"old": "x = 1", "new": "x = 9"}]));
    assert!(m.contains("edit 2") && m.contains("matches 2 times") && m.contains("lines 1, 3"), "{m}");
    assert!(m.contains("unchanged") && !m.contains("edit 1"), "{m}");

    let m = edit(json!([{"old": "z = 3", "new": "z = 4"}]));
    assert!(m.contains("edit 1") && m.contains("matches 0 times"), "{m}");

    let m = edit(json!([{"old": "y = 2", "new": "a"}, {"old": "", "new": "b"}]));
    assert!(m.contains("edit 2") && m.contains("empty"), "{m}");

    let m = edit(json!([{"old": "y = 2\nx", "new": "a"}, {"old": "2\nx = 1\n", "new": "b"}]));
    assert!(m.contains("edits 1 and 2 overlap"), "{m}");

    // The same `old` twice is an overlap too, not two replacements.
    let m = edit(json!([{"old": "y = 2", "new": "a"}, {"old": "y = 2", "new": "b"}]));
    assert!(m.contains("overlap"), "{m}");

    // Every problem is listed at once.
    let m = edit(json!([{"old": "x = 1", "new": "a"}, {"old": "nope", "new": "b"}]));
    assert!(
        m.contains("edit 1") && m.contains("2 times") && m.contains("edit 2") && m.contains("0 times"),
        "{m}"
    );

    // An empty list is refused by the schema.
    let out = e.call_blocking("edit", &json!({"path": "dup.txt", "edits": []}));
    assert_eq!(out.call.status, CallStatus::Refused);
}

#[test]
fn edit_refuses_binaries_folders_missing_files_and_other_encodings() {
    let f = Fixture::new();
    f.put("bin.dat", b"abc\0def".as_slice());
    f.put("latin1.txt", b"caf\xe9 abc\n".as_slice());
    let e = f.engine();
    let one = json!([{"old": "abc", "new": "x"}]);
    let m = fails_cleanly(&f, &e, "edit", json!({"path": "bin.dat", "edits": one}));
    assert!(m.contains("binary"), "{m}");
    let m = fails_cleanly(&f, &e, "edit", json!({"path": "latin1.txt", "edits": one}));
    assert!(m.contains("not UTF-8"), "{m}");
    let m = fails_cleanly(&f, &e, "edit", json!({"path": "docs", "edits": one}));
    assert!(m.contains("folder"), "{m}");
    let m = fails_cleanly(&f, &e, "edit", json!({"path": "missing.txt", "edits": one}));
    assert!(m.contains("does not exist"), "{m}");
}

#[test]
fn edit_refuses_paths_outside_the_workspace() {
    let f = Fixture::new();
    let e = f.engine();
    let edits = json!([{"old": "needle", "new": "pwned"}]);
    let abs = f.outer.path().join("secret.txt").to_string_lossy().into_owned();
    for path in ["../secret.txt", "docs/../../secret.txt", "../outside/s.txt", abs.as_str()] {
        let m = fails_cleanly(&f, &e, "edit", json!({"path": path, "edits": edits}));
        assert!(m.contains("outside the workspace"), "{path}: {m}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(f.outer.path().join("outside"), f.ws().join("out")).unwrap();
        std::os::unix::fs::symlink(f.outer.path().join("secret.txt"), f.ws().join("secret-link")).unwrap();
        for path in ["out/s.txt", "secret-link"] {
            let m = fails_cleanly(&f, &e, "edit", json!({"path": path, "edits": edits}));
            assert!(m.contains("outside the workspace"), "{path}: {m}");
        }
    }
}

// ------------------------------------------------- direct calls and programs

/// Runs each call directly in one fresh fixture and from a program in
/// another: the envelopes (or error messages) and the resulting workspaces
/// are the same.
#[test]
fn a_direct_call_and_the_same_call_from_a_program_agree() {
    let calls = [
        ("grep_files", json!({"pattern": "a|needle", "context": 1, "limit": 3})),
        ("grep_files", json!({"pattern": "(", "path": "docs"})),
        ("write", json!({"path": "n/new.txt", "content": "new\n"})),
        ("write", json!({"path": "../x.txt", "content": "x"})),
        (
            "edit",
            json!({"path": "a.txt", "edits": [{"old": "beta", "new": "BETA"}, {"old": "gamma", "new": "beta"}]}),
        ),
        ("edit", json!({"path": "a.txt", "edits": [{"old": "a", "new": "b"}]})),
    ];
    for (tool, args) in calls {
        let direct_fx = Fixture::new();
        let direct = direct_fx.engine().call_blocking(tool, &args);
        let program_fx = Fixture::new();
        let r = run(
            &program_fx.engine(),
            &format!(
                "try {{ return await tools.call('{tool}', {args}); }} \
                 catch (e) {{ return {{error: e.message, kind: e.kind, name: e.name}}; }}"
            ),
        );
        assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
        match &direct.envelope {
            Some(env) => {
                assert_eq!(&r.value, env, "{tool} {args}");
                assert_eq!(r.calls[0].status, CallStatus::Ok);
                assert_eq!(direct.call.bytes, r.calls[0].bytes, "{tool} {args}");
            }
            None => {
                let err = direct.error.as_ref().unwrap();
                // The messages name each fixture's own workspace; the
                // program's may name the call first ("tool (call 1): ...").
                let program = program_fx.normalise(r.value["error"].as_str().unwrap());
                let direct = direct_fx.normalise(err["message"].as_str().unwrap());
                assert!(program.ends_with(&direct), "{tool} {args}: {program} vs {direct}");
                assert_eq!(r.value["kind"], json!("failed"));
                assert_eq!(r.value["name"], json!("ToolError"));
                assert_eq!(r.calls[0].status, CallStatus::Failed);
            }
        }
        assert_eq!(direct_fx.snapshot(), program_fx.snapshot(), "{tool} {args}");
    }
}

#[test]
fn programs_compose_grep_edit_and_write() {
    let f = Fixture::new();
    f.put("src/a.rs", "const OLD_NAME: u8 = 1;\n");
    f.put("src/b.rs", "use crate::OLD_NAME;\nfn f() -> u8 { OLD_NAME }\n");
    let e = f.engine();
    let r = run(
        &e,
        "const hits = (await tools.grep_files({pattern: 'OLD_NAME', glob: '*.rs'})).content; \
         const files = [...new Set(hits.map(h => h.path))]; \
         for (const path of files) { \
           const text = (await tools.read({path})).content; \
           const n = text.split('OLD_NAME').length - 1; \
           const edits = []; \
           if (path.endsWith('a.rs')) edits.push({old: 'const OLD_NAME', new: 'const NEW_NAME'}); \
           else edits.push({old: 'crate::OLD_NAME', new: 'crate::NEW_NAME'}, {old: '{ OLD_NAME }', new: '{ NEW_NAME }'}); \
           await tools.edit({path, edits}); \
         } \
         await tools.write({path: 'CHANGES.md', content: `renamed in ${files.length} files\\n`}); \
         return (await tools.grep_files({pattern: 'OLD_NAME'})).metadata.matches;",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(0));
    assert_eq!(f.get("src/b.rs"), "use crate::NEW_NAME;\nfn f() -> u8 { NEW_NAME }\n");
    assert_eq!(f.get("CHANGES.md"), "renamed in 2 files\n");
    assert!(r.calls.iter().all(|c| c.status == CallStatus::Ok));
}

// ------------------------------------------------- abandoned write and edit

/// A big text file of numbered lines, and edits replacing `n` of its lines:
/// work that takes far longer than a millisecond.
fn big_edit(n: usize) -> (String, Value) {
    const LINES: usize = 600_000;
    let text: String = (0..LINES).map(|i| format!("line {i:07}\n")).collect();
    let edits: Vec<Value> = (0..n)
        .map(|k| {
            let i = k * (LINES / n) + LINES / (2 * n);
            json!({"old": format!("line {i:07}\n"), "new": format!("LINE {i:07} edited\n")})
        })
        .collect();
    (text, json!(edits))
}

/// An engine like the fixture's, with `timeout_ms` for `edit` and `write`.
fn engine_with_tool_timeout(f: &Fixture, timeout_ms: u64) -> Engine {
    let mut policy = codemode::Policy::full_access();
    for tool in ["edit", "write"] {
        let settings = codemode::policy::ToolSettings { timeout_ms: Some(timeout_ms), ..Default::default() };
        policy.tools.insert(tool.to_owned(), settings);
    }
    crate::common::engine_builder()
        .workspace(f.ws())
        .spill_dir(f.spill.path())
        .policy(policy)
        .vm_threads(1)
        .build()
        .unwrap()
}

/// Names of the temp files `write` and `edit` leave in the workspace root.
fn temp_files(f: &Fixture) -> Vec<String> {
    std::fs::read_dir(f.ws())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".codemode-write-"))
        .collect()
}

/// How long `tool` with `args` takes to run to its end here, measured on a
/// copy (`copy.txt`) of the file it changes: how long a timed-out call's
/// blocking work may go on after the timeout.
fn measure(f: &Fixture, tool: &str, args: &Value) -> std::time::Duration {
    let mut args = args.clone();
    args["path"] = json!("copy.txt");
    let started = std::time::Instant::now();
    let out = f.engine().call_blocking(tool, &args);
    assert!(out.is_ok(), "{:?}", out.error);
    started.elapsed()
}

#[test]
fn a_timed_out_edit_or_write_does_not_change_the_file_afterwards() {
    let f = Fixture::new();
    let (text, edits) = big_edit(40);
    f.put("big.txt", &text);
    f.put("copy.txt", &text);
    let edit = json!({"path": "big.txt", "edits": edits});
    let write = json!({"path": "big.txt", "content": "new content\n".repeat(1 << 18)});
    let e = engine_with_tool_timeout(&f, 1);
    for (tool, args) in [("edit", edit), ("write", write)] {
        let took = measure(&f, tool, &args);
        let out = e.call_blocking(tool, &args);
        // Long enough for the abandoned work to have run to its end.
        std::thread::sleep((took * 3).max(std::time::Duration::from_secs(1)));
        let changed = f.get("big.txt") != text;
        // The work may, rarely, beat the timeout; what is reported must
        // match what happened either way.
        assert_eq!(out.is_ok(), changed, "{tool}: {:?} {:?} (took {took:?})", out.call.status, out.error);
        if !out.is_ok() {
            let error = out.error.as_ref().unwrap();
            assert_eq!(error["kind"], "timeout", "{tool}: {error}");
            assert_eq!(out.call.status, CallStatus::Failed, "{tool}");
        } else {
            f.put("big.txt", &text);
        }
        assert_eq!(temp_files(&f), Vec::<String>::new(), "{tool}");
    }
}

#[test]
fn a_cancelled_edit_does_not_change_the_file_afterwards() {
    let f = Fixture::new();
    let (text, edits) = big_edit(40);
    f.put("big.txt", &text);
    f.put("copy.txt", &text);
    let args = json!({"path": "big.txt", "edits": edits});
    let took = measure(&f, "edit", &args);
    let e = f.engine();
    let run = e.start(Program::new(format!("return await tools.edit({args});")));
    // Cancel while the edit is (most likely) at work.
    std::thread::sleep(took / 3);
    run.cancel();
    let r = run.wait_blocking();
    std::thread::sleep((took * 3).max(std::time::Duration::from_secs(1)));
    let changed = f.get("big.txt") != text;
    let ok = r.calls.first().is_some_and(|c| c.status == CallStatus::Ok);
    assert_eq!(ok, changed, "{:?} {:?} (took {took:?})", r.status, r.calls);
    assert_eq!(temp_files(&f), Vec::<String>::new());
}

#[test]
fn edit_refuses_files_over_16_mib_and_changes_nothing() {
    let ws = crate::common::workspace();
    let big = ws.path().join("big.txt");
    std::fs::write(&big, "x".repeat((16 << 20) + 1)).unwrap();
    let engine = crate::common::engine_with(&ws, codemode::Limits::default());
    let out = engine.call_blocking("edit", &json!({"path": "big.txt", "edits": [{"old": "xx", "new": "y"}]}));
    assert_eq!(out.call.status, codemode::receipt::CallStatus::Failed);
    assert!(out.call.error.as_deref().unwrap().contains("16"), "{:?}", out.call.error);
    assert_eq!(std::fs::metadata(&big).unwrap().len(), (16 << 20) + 1);
}

// ------------------------------------------------------------ hidden folders

/// `.codemode/` holds earlier runs' receipts and spill files: the walkers
/// never list or search it, whatever `exclude` says, and refuse it as their
/// `path`.
#[test]
fn search_tools_never_look_inside_codemode() {
    let f = Fixture::new();
    f.put(".codemode/runs/earlier/call-1.txt", "needle from an earlier run\n");
    f.put(".codemode/runs/earlier/receipt.json", "{\"needle\": 1}\n");
    let e = f.engine();
    let search = e.call_blocking("file_search", &json!({"query": "call", "exclude": []}));
    assert_eq!(content(&search), &json!([]));
    let all = e.call_blocking("file_search", &json!({"query": "*", "exclude": []}));
    let listed = content(&all).to_string();
    assert!(listed.contains("a.txt") && !listed.contains(".codemode"), "{listed}");
    let grep = e.call_blocking("grep_files", &json!({"pattern": "needle"}));
    let found: Vec<&str> =
        content(&grep).as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(found, ["docs/guide.md"]);
    for (tool, args) in [
        ("file_search", json!({"query": "call", "path": ".codemode/runs"})),
        ("grep_files", json!({"pattern": "needle", "path": ".codemode"})),
        ("grep_files", json!({"pattern": "needle", "path": ".codemode/runs/earlier/call-1.txt"})),
    ] {
        // The gate refuses first (step 7); the tools' own check is their
        // second line (tests/all/file_race.rs, the unit tests of read).
        let out = e.call_blocking(tool, &args);
        assert_eq!(out.call.status, CallStatus::Refused, "{tool} {args}");
        let m = out.call.error.unwrap_or_default();
        assert!(m.contains("codemode's own folder"), "{tool} {args}: {m}");
    }
}

/// A program reads its own spill file (an envelope's `spill_path`), and
/// not an earlier run's.
#[test]
fn a_run_reads_its_own_spill_files_and_no_earlier_runs() {
    let f = Fixture::new();
    f.put("big.txt", "x".repeat(3_000) + "\nthe end\n");
    f.put(".codemode/runs/earlier/call-1.txt", "earlier output\n");
    let mut limits = codemode::Limits::default();
    limits.result_bytes = 1_000;
    let e = crate::common::engine_builder()
        .workspace(f.ws())
        .policy(codemode::Policy::full_access())
        .limits(limits)
        .vm_threads(1)
        .build()
        .unwrap();
    let r = run(
        &e,
        "const big = await tools.read({path: 'big.txt'}); \
         const path = big.truncated.spill_path; \
         const own = await tools.read({path}); \
         let earlier; \
         try { await tools.read({path: '.codemode/runs/earlier/call-1.txt'}); earlier = 'read'; } \
         catch (err) { earlier = err.message; } \
         return [path, own.content.includes('1\\txxxxxxxx'), earlier];",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let path = r.value[0].as_str().unwrap();
    assert!(path.starts_with(crate::common::runs_dir(&f.ws()).to_str().unwrap()), "{path}");
    assert_eq!(r.value[1], json!(true));
    assert!(r.value[2].as_str().unwrap().contains("codemode's own folder"), "{}", r.value[2]);
}

/// Files whose names are not UTF-8 are still searched and listed (the
/// beneath-the-root open uses the name's bytes, not its shown form).
#[cfg(target_os = "linux")]
#[test]
fn search_tools_find_files_whose_names_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt as _;
    let f = Fixture::new();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9-notes.txt");
    std::fs::write(f.ws().join("docs").join(name), "needle in latin-1\n").unwrap();
    let e = f.engine();
    let grep = e.call_blocking("grep_files", &json!({"pattern": "latin-1"}));
    let hits = content(&grep).as_array().unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["path"], json!("docs/caf\u{fffd}-notes.txt"));
    let found = e.call_blocking("file_search", &json!({"query": "notes"}));
    assert_eq!(content(&found), &json!(["docs/caf\u{fffd}-notes.txt"]));
}

/// A file whose name is not UTF-8 is listed with U+FFFD for its bad bytes;
/// given back, that name finds nothing, and `read` says why instead of
/// sending the model to look for a file it just found.
#[cfg(unix)]
#[test]
fn a_name_that_is_not_utf8_is_said_so_when_given_back() {
    use std::os::unix::ffi::OsStrExt as _;
    let f = Fixture::new();
    std::fs::write(f.ws().join(std::ffi::OsStr::from_bytes(b"f\xfe.txt")), "hi\n").unwrap();
    let e = f.engine();
    let found = e.call_blocking("file_search", &json!({"query": "f*.txt"}));
    assert_eq!(content(&found), &json!(["f\u{FFFD}.txt"]));
    let message = fails_cleanly(&f, &e, "read", json!({"path": "f\u{FFFD}.txt"}));
    assert!(message.contains("not UTF-8") && message.contains("rename the file"), "{message}");
    let message = fails_cleanly(&f, &e, "read", json!({"path": "g.txt"}));
    assert!(message.contains("does not exist in the workspace (file_search"), "{message}");
    // Nor does `write` make a second file that looks like it.
    let message = fails_cleanly(&f, &e, "write", json!({"path": "f\u{FFFD}.txt", "content": "x"}));
    assert!(message.contains("is not made") && message.contains("rename it to a UTF-8 name"), "{message}");
    assert!(!f.ws().join("f\u{FFFD}.txt").exists(), "no lookalike was made");
    // Nor a folder that looks like one, which would be made for the file.
    std::fs::create_dir(f.ws().join(std::ffi::OsStr::from_bytes(b"d\xff"))).unwrap();
    let message = fails_cleanly(&f, &e, "write", json!({"path": "d\u{FFFD}/a.txt", "content": "x"}));
    assert!(message.contains("is not made"), "{message}");
    assert!(!f.ws().join("d\u{FFFD}").exists(), "no lookalike folder was made");
    // A file named with U+FFFD itself, or made in such a folder, is
    // written as any other.
    std::fs::create_dir(f.ws().join("e\u{FFFD}")).unwrap();
    assert!(e.call_blocking("write", &json!({"path": "e\u{FFFD}/new.txt", "content": "x"})).is_ok());
    std::fs::write(f.ws().join("g\u{FFFD}.txt"), "old\n").unwrap();
    assert!(e.call_blocking("write", &json!({"path": "g\u{FFFD}.txt", "content": "new\n"})).is_ok());
    assert_eq!(std::fs::read_to_string(f.ws().join("g\u{FFFD}.txt")).unwrap(), "new\n");
}
