//! `read` and `file_search` on real files, from programs.

use codemode::{Limits, Program, receipt::CallStatus, receipt::RunStatus};
use serde_json::json;

use crate::common::{engine_with, workspace};

fn run_in(ws: &tempfile::TempDir, src: &str) -> codemode::Receipt {
    engine_with(ws, Limits::default()).execute_blocking(Program::new(src))
}

#[test]
fn read_numbers_lines_and_says_where_to_continue() {
    let ws = workspace();
    let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path().join("ten.txt"), body).unwrap();
    let r = run_in(&ws, "return await tools.read({path: 'ten.txt', offset: 3, limit: 2});");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value["content"],
        json!("     3\tline 3\n     4\tline 4\n[lines 3-4 of 10; continue with offset 5]\n")
    );
    assert_eq!(r.value["metadata"]["next_offset"], json!(5));
    assert_eq!(r.value["metadata"]["total_lines"], json!(10));
    let r = run_in(&ws, "return (await tools.read({path: 'ten.txt', offset: 9})).metadata.next_offset;");
    assert_eq!(r.value, json!(null));
}

#[test]
fn read_refuses_escapes_binaries_and_folders() {
    let ws = workspace();
    std::fs::write(ws.path().join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
    let r = run_in(
        &ws,
        "const out = []; for (const path of ['../etc/passwd', '/etc/passwd', 'bin.dat', 'docs', 'missing.txt']) { \
           try { await tools.read({path}); out.push('read ' + path); } catch (e) { out.push(e.message); } } return out;",
    );
    let got: Vec<&str> = r.value.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(got[0].contains("outside the workspace") || got[0].contains("does not exist"), "{}", got[0]);
    assert!(got[1].contains("outside the workspace"), "{}", got[1]);
    assert!(got[2].contains("binary"), "{}", got[2]);
    assert!(got[3].contains("folder"), "{}", got[3]);
    assert!(got[4].contains("does not exist"), "{}", got[4]);
    assert!(r.calls.iter().all(|c| c.status == CallStatus::Failed));
}

#[test]
fn file_search_finds_by_fragment_and_glob_and_respects_gitignore() {
    let ws = workspace();
    std::fs::write(ws.path().join(".gitignore"), "ignored/\n").unwrap();
    std::fs::create_dir(ws.path().join("ignored")).unwrap();
    std::fs::write(ws.path().join("ignored/guide.md"), "x").unwrap();
    std::fs::create_dir_all(ws.path().join("node_modules/pkg")).unwrap();
    std::fs::write(ws.path().join("node_modules/pkg/guide.md"), "x").unwrap();
    let r = run_in(
        &ws,
        "const a = await tools.file_search({query: 'GUIDE'}); \
         const b = await tools.file_search({query: '**/*.txt'}); \
         const c = await tools.file_search({query: 'guide', exclude: []}); \
         const d = await tools.file_search({query: 'a', extensions: ['md']}); \
         return [a.content, b.content, c.content, d.content];",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value[0], json!(["docs/guide.md"]));
    assert_eq!(r.value[1], json!(["a.txt"]));
    assert_eq!(r.value[2], json!(["docs/guide.md", "node_modules/pkg/guide.md"]));
    assert_eq!(r.value[3], json!([]));
}

#[test]
fn file_search_globs_without_a_slash_match_names_at_any_depth() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("src/deep")).unwrap();
    for f in ["src/mod001.rs", "src/deep/mod002.rs", "mod003.txt", "src/amod004.rs", "src/deep/x.rs"] {
        std::fs::write(ws.path().join(f), "").unwrap();
    }
    let r = run_in(
        &ws,
        "const q = async (query) => (await tools.file_search({query})).content.sort(); \
         return [await q('mod00*'), await q('*.rs'), await q('src/*.rs'), await q('src/**/mod*.rs'), await q('mod00?.{rs,txt}')];",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value[0], json!(["mod003.txt", "src/deep/mod002.rs", "src/mod001.rs"]));
    assert_eq!(r.value[1], json!(["src/amod004.rs", "src/deep/mod002.rs", "src/deep/x.rs", "src/mod001.rs"]));
    assert_eq!(r.value[2], json!(["src/amod004.rs", "src/mod001.rs"]), "a glob with a slash is anchored");
    assert_eq!(r.value[3], json!(["src/deep/mod002.rs", "src/mod001.rs"]));
    assert_eq!(r.value[4], json!(["mod003.txt", "src/deep/mod002.rs", "src/mod001.rs"]));
}

#[test]
fn file_search_ranks_exact_names_first_and_bounds_its_output() {
    let ws = workspace();
    for i in 0..30 {
        std::fs::write(ws.path().join(format!("notes{i}.txt")), "").unwrap();
    }
    std::fs::write(ws.path().join("notes"), "").unwrap();
    let r = run_in(
        &ws,
        "const r = await tools.file_search({query: 'notes', limit: 5}); return [r.content, r.metadata];",
    );
    assert_eq!(r.value[0][0], json!("notes"));
    assert_eq!(r.value[0].as_array().unwrap().len(), 5);
    assert_eq!(r.value[1]["matches"], json!(31));
    assert_eq!(r.value[1]["truncated"], json!(true));
    let bad =
        run_in(&ws, "try { await tools.file_search({query: 'a[', }); } catch (e) { return e.message; }");
    assert!(bad.value.as_str().unwrap().contains("not a valid glob"), "{}", bad.value);
}

#[test]
fn read_bounds_long_lines_large_files_and_odd_files() {
    let ws = workspace();
    std::fs::write(ws.path().join("wide.txt"), format!("{}\nshort\n", "w".repeat(5000))).unwrap();
    std::fs::write(ws.path().join("latin1.txt"), [b'c', b'a', b'f', 0xe9, b'\n']).unwrap();
    let big = std::fs::File::create(ws.path().join("big.log")).unwrap();
    big.set_len((16 << 20) + 1).unwrap();
    std::fs::write(ws.path().join("empty.txt"), "").unwrap();
    let r = run_in(
        &ws,
        "const out = {}; \
         const w = await tools.read({path: 'wide.txt'}); out.wide = w.content.split('\\n')[0].length; \
         out.cut = w.content.includes('[line cut]'); \
         out.latin1 = (await tools.read({path: 'latin1.txt'})).content; \
         try { await tools.read({path: 'big.log'}); } catch (e) { out.big = e.message; } \
         const e = await tools.read({path: 'empty.txt', offset: 5}); out.empty = [e.content, e.metadata.end_line]; \
         return out;",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    // "     1\t" + 2,000 characters + " [line cut]"
    assert_eq!(r.value["wide"], json!(7 + 2000 + 11));
    assert_eq!(r.value["cut"], json!(true));
    assert_eq!(r.value["latin1"], json!("     1\tcaf\u{fffd}\n"));
    assert!(r.value["big"].as_str().unwrap().contains("over the read bound"), "{}", r.value["big"]);
    assert_eq!(r.value["empty"], json!(["[offset 5 is past the end: the file has 0 lines]\n", null]));
}

#[test]
fn read_text_format_returns_a_long_line_whole_through_byte_offsets() {
    let ws = workspace();
    // Minified JSON on one line, 5 KB and 100 KB, with two- and three-byte
    // characters so windows end inside characters unless cut with care.
    let doc = |n: usize| {
        let items: Vec<serde_json::Value> = (0..n)
            .map(|i| json!({"id": i, "name": format!("caf\u{e9} \u{20ac}{i}"), "ok": i % 2 == 0}))
            .collect();
        serde_json::to_string(&json!({"items": items})).unwrap()
    };
    let (small, large) = (doc(120), doc(2500));
    assert!(small.len() > 5_000 && large.len() > 100_000 && !large.contains('\n'));
    std::fs::write(ws.path().join("small.json"), &small).unwrap();
    std::fs::write(ws.path().join("large.json"), &large).unwrap();
    let r = run_in(
        &ws,
        "async function whole(path, limit) { \
           let text = '', offset = 0, calls = 0, last; \
           for (;;) { \
             const r = await tools.read({path, format: 'text', offset, limit}); calls++; \
             text += r.content; last = r.metadata; \
             if (r.metadata.next_offset === null) break; \
             offset = r.metadata.next_offset; \
           } \
           return {doc: JSON.parse(text), calls, last}; \
         } \
         const s = await whole('small.json'); \
         const l = await whole('large.json'); \
         const odd = await whole('large.json', 4099); \
         const lines = await tools.read({path: 'large.json'}); \
         let inside; try { await tools.read({path: 'small.json', format: 'text', offset: 30}); } catch (e) { inside = e.message; } \
         return {small: s, large: [l.doc.items.length, l.calls, l.last], odd: [odd.doc.items[2499].name, odd.calls], \
                 lines: [lines.content.split('\\n')[1], lines.metadata.format], inside};",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value["small"]["doc"], serde_json::from_str::<serde_json::Value>(&small).unwrap());
    assert_eq!(r.value["small"]["calls"], json!(1));
    let total = large.len() as u64;
    assert_eq!(r.value["large"][0], json!(2500));
    assert_eq!(r.value["large"][1], json!(total.div_ceil(64 << 10)));
    assert_eq!(r.value["large"][2]["total_bytes"], json!(total));
    assert_eq!(r.value["large"][2]["eof"], json!(true));
    assert_eq!(r.value["odd"][0], json!("caf\u{e9} \u{20ac}2499"));
    assert!(r.value["odd"][1].as_u64().unwrap() >= total / 4099);
    // Numbered lines stay the default, and a cut line says how to read it whole.
    assert_eq!(
        r.value["lines"][0],
        json!("[1 line(s) cut at 2000 characters; format \"text\" reads whole lines]")
    );
    assert_eq!(r.value["lines"][1], json!("lines"));
    // The offset given is the second byte of the first `é`.
    assert_eq!(small.find('\u{e9}'), Some(29));
    assert!(
        r.value["inside"].as_str().unwrap().contains("inside a UTF-8 character"),
        "{}",
        r.value["inside"]
    );
}

#[cfg(unix)]
#[test]
fn read_refuses_a_fifo_instead_of_blocking() {
    let ws = workspace();
    let status = std::process::Command::new("mkfifo").arg(ws.path().join("pipe")).status().unwrap();
    assert!(status.success());
    let r = run_in(&ws, "try { await tools.read({path: 'pipe'}); } catch (e) { return e.message; }");
    assert!(r.value.as_str().unwrap().contains("not a regular file"), "{}", r.value);
}

#[test]
fn read_windows_default_to_2000_lines_and_64_kib() {
    let ws = workspace();
    let many: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    std::fs::write(ws.path().join("many.txt"), many).unwrap();
    let wide: String = (1..=3000).map(|_| format!("{}\n", "w".repeat(300))).collect();
    std::fs::write(ws.path().join("wide.txt"), wide).unwrap();
    let r = run_in(
        &ws,
        "const a = await tools.read({path: 'many.txt'}); \
         const b = await tools.read({path: 'wide.txt'}); \
         let c; try { await tools.read({path: 'many.txt', limit: 65537}); } catch (e) { c = e.kind; } \
         return [a.metadata, b.metadata, b.truncated, b.content.trimEnd().split('\\n').pop(), c];",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value[0]["end_line"], json!(2000));
    assert_eq!(r.value[0]["next_offset"], json!(2001));
    // The 64 KiB window ends early and still says where to continue.
    let end = r.value[1]["end_line"].as_u64().unwrap();
    assert!(end > 100 && end < 300, "{end}");
    assert_eq!(r.value[1]["next_offset"], json!(end + 1));
    // The window stays under the result bound: cut by the tool, not spilled.
    assert_eq!(r.value[2]["spill_path"], json!(null), "{}", r.value[2]);
    assert!(r.value[2]["tool_cut"].as_str().unwrap().contains(&format!("continue with offset {}", end + 1)));
    assert_eq!(r.value[3], json!(format!("[lines 1-{end} of 3000; continue with offset {}]", end + 1)));
    assert_eq!(r.value[4], json!("refused"), "limit is at most 65536");
}

#[cfg(unix)]
#[test]
fn read_and_file_search_refuse_every_escape() {
    let outer = tempfile::tempdir().unwrap();
    let ws_path = outer.path().join("ws");
    std::fs::create_dir(&ws_path).unwrap();
    std::fs::write(outer.path().join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), ws_path.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(outer.path(), ws_path.join("out")).unwrap();
    let engine = crate::common::engine_builder().workspace(&ws_path).build().unwrap();
    for (tool, args) in [
        ("read", json!({"path": "link.txt"})),
        ("read", json!({"path": "out/secret.txt"})),
        ("read", json!({"path": "../secret.txt"})),
        ("file_search", json!({"query": "secret", "path": ".."})),
        ("file_search", json!({"query": "secret", "path": "out"})),
        ("file_search", json!({"query": "secret", "path": outer.path().to_str().unwrap()})),
    ] {
        let out = engine.call_blocking(tool, &args);
        assert_eq!(out.call.status, CallStatus::Failed, "{tool} {args}");
        assert!(
            out.call.error.as_deref().unwrap().contains("outside the workspace"),
            "{tool} {args}: {:?}",
            out.call.error
        );
    }
    // The walk does not follow the link out either.
    let found = engine.call_blocking("file_search", &json!({"query": "secret"}));
    assert_eq!(found.envelope.unwrap()["content"], json!([]));
}

#[test]
fn file_search_exclude_and_extensions_filter() {
    let ws = workspace();
    std::fs::create_dir(ws.path().join("build")).unwrap();
    std::fs::write(ws.path().join("build/out.md"), "").unwrap();
    std::fs::write(ws.path().join("notes.md"), "").unwrap();
    std::fs::write(ws.path().join("notes.txt"), "").unwrap();
    let r = run_in(
        &ws,
        "const md = await tools.file_search({query: 'o', extensions: ['.MD']}); \
         const ex = await tools.file_search({query: 'o', extensions: ['md'], exclude: ['build', 'docs/**']}); \
         return [md.content, ex.content];",
    );
    // `out.md` starts with the query, `notes.md` contains it, `docs/` holds it.
    assert_eq!(r.value[0], json!(["build/out.md", "notes.md", "docs/guide.md"]));
    assert_eq!(r.value[1], json!(["notes.md"]));
}

#[test]
fn file_search_exclude_globs_without_a_slash_match_names_at_any_depth() {
    let ws = workspace();
    for rel in [
        "pkg/node_modules/z/nm.rs",
        "src/deep/mod001.rs",
        "mod002.rs",
        "src/keep.rs",
        "src/gen/g.rs",
        "x/src/gen/h.rs",
    ] {
        let p = ws.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let r = run_in(
        &ws,
        "const nm = await tools.file_search({query: '*.rs', exclude: ['node_modules']}); \
         const mods = await tools.file_search({query: '*.rs', exclude: ['mod00*']}); \
         const anchored = await tools.file_search({query: '*.rs', exclude: ['src/gen', 'node_modules']}); \
         const bad = await tools.file_search({query: 'x', exclude: ['a[']}).catch(e => e.message); \
         return [nm.content.sort(), mods.content.sort(), anchored.content.sort(), bad];",
    );
    assert_eq!(
        r.value[0],
        json!(["mod002.rs", "src/deep/mod001.rs", "src/gen/g.rs", "src/keep.rs", "x/src/gen/h.rs"])
    );
    assert_eq!(
        r.value[1],
        json!(["pkg/node_modules/z/nm.rs", "src/gen/g.rs", "src/keep.rs", "x/src/gen/h.rs"])
    );
    // With a slash, anchored at the root: `x/src/gen` stays.
    assert_eq!(r.value[2], json!(["mod002.rs", "src/deep/mod001.rs", "src/keep.rs", "x/src/gen/h.rs"]));
    assert!(r.value[3].as_str().unwrap().contains("`a[`"), "{}", r.value[3]);
}
