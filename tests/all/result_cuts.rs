//! Results over their bounds (issue 32, items 5 to 7): a direct call's
//! large result arrives whole with its metadata, every part of a result is
//! bounded, and every cut is said in `truncated`, in the stderr summary and
//! in the receipt.

use serde_json::{Value, json};

use crate::serve_clients::{Served, client, clients};

/// A 2 MB text file of 30,000 numbered lines.
fn big_file(dir: &std::path::Path) {
    let text: String = (1..=30_000).map(|i| format!("line {i:05} {}\n", "x".repeat(60))).collect();
    std::fs::write(dir.join("big.txt"), text).unwrap();
}

#[test]
fn a_direct_call_over_the_value_bound_arrives_whole_with_its_metadata() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    big_file(served.path());
    let call = |name: &str, args: Value| json!({"call": {"name": name, "arguments": args}});
    let plan = json!({
        "server": served.server(&["--direct-tools"]),
        "steps": [
            call("read", json!({"path": "big.txt", "limit": 15000})),
            call("grep_files", json!({"pattern": "line", "limit": 1000})),
            call("read", json!({"path": "big.txt", "format": "text", "offset": 2_150_000})),
        ],
    });
    let out = client(&dir, "v1", &plan);
    // read: a 64 KiB window (over the 16 KiB value bound), then metadata.
    let r = out.result(0);
    assert_ne!(r["isError"], true, "{r}");
    let text = out.text(0);
    assert!(
        text.len() > 60_000 && text.trim_start().starts_with("1\tline 00001"),
        "{}",
        &text[..text.len().min(200)]
    );
    let meta: Value =
        serde_json::from_str(r["content"][1]["text"].as_str().expect("a metadata block")).unwrap();
    let next = meta["metadata"]["next_offset"].as_u64().expect("next_offset");
    assert!(next > 800 && meta["metadata"]["eof"] == false, "{meta}");
    assert!(meta["truncated"]["tool_cut"].as_str().unwrap().contains("continue with offset"), "{meta}");
    // grep_files: a page of entries, and where the next page starts.
    let r = out.result(1);
    assert_ne!(r["isError"], true, "{r}");
    let entries: Vec<Value> = serde_json::from_str(out.text(1)).expect("the page as JSON");
    let meta: Value = serde_json::from_str(r["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(meta["metadata"]["next_offset"].as_u64(), Some(entries.len() as u64), "{meta}");
    assert_eq!(meta["metadata"]["matches"], 30_000, "{meta}");
    // The end of the file: metadata says so (no next page).
    let r = out.result(2);
    let meta: Value = serde_json::from_str(r["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (meta["metadata"]["next_offset"].clone(), meta["metadata"]["eof"].clone()),
        (Value::Null, json!(true)),
        "{meta}"
    );
}

/// `codemode run` of `code` in `ws` (full access, `extra` options): the
/// value, the stderr summary and the saved receipt.
fn run(ws: &std::path::Path, code: &str, extra: &[&str]) -> (Value, String, Value) {
    let mut args = vec!["run", "-", "--posture", "full-access"];
    args.extend_from_slice(extra);
    let out = crate::cli::codemode(&args, code, ws);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let path = stderr.lines().find_map(|l| l.strip_prefix("full receipt: ")).expect("the receipt's path");
    let receipt = serde_json::from_slice(&std::fs::read(path.trim()).unwrap()).unwrap();
    (value, stderr, receipt)
}

#[test]
fn every_cut_is_said_in_truncated_the_summary_and_the_receipt() {
    let ws = crate::common::workspace();
    big_file(ws.path());
    let code = r#"
        const b = await tools.bash({command: "seq 1 20000"});
        const t = await tools.read({path: "big.txt", format: "text"});
        const whole = await tools.read({path: "big.txt", format: "text", offset: 2150000});
        const lines = b.content.stdout.split("\n").filter(Boolean).map(Number);
        return {bash: b.truncated, first: lines[0], last: lines[lines.length - 1], count: lines.length,
                text: t.truncated, next: t.metadata.next_offset, whole: whole.truncated};
    "#;
    let (v, stderr, receipt) = run(ws.path(), code, &[]);
    // bash: whole lines only, and the cut said where programs look.
    assert_eq!(v["last"], 20_000, "{v}");
    assert_eq!(v["count"].as_u64().unwrap(), 20_000 - v["first"].as_u64().unwrap() + 1, "{v}");
    assert_eq!(v["bash"]["original_bytes"], 108_894, "{v}");
    assert!(v["bash"]["tool_cut"].as_str().unwrap().contains("whole lines"), "{v}");
    // read: a window that ends before the end is a cut; the last one is not.
    assert_eq!(v["text"]["kept_bytes"], 65_536, "{v}");
    assert!(v["text"]["tool_cut"].as_str().unwrap().contains("continue with offset 65536"), "{v}");
    assert_eq!(v["next"], 65_536);
    assert_eq!(v["whole"], Value::Null, "{v}");
    // The stderr summary and the receipt name the calls that were cut.
    assert!(stderr.contains("bash: 1 ok (cut); read: 1 ok (cut), 1 ok"), "{stderr}");
    assert!(stderr.contains("call 1 bash: result cut: stdout: its last"), "{stderr}");
    assert!(stderr.contains("call 2 read: result cut: bytes 0-65536 of 2160000"), "{stderr}");
    let cut: Vec<bool> =
        receipt["calls"].as_array().unwrap().iter().map(|c| !c["truncated"].is_null()).collect();
    assert_eq!(cut, [true, true, false], "{receipt}");
}

#[test]
fn an_mcp_result_is_bounded_in_every_part() {
    let ws = crate::common::workspace();
    let root = ws.path().canonicalize().unwrap();
    // A 2 MB JSON array: server-filesystem gives its text as
    // structuredContent {content} and again as a text block.
    let items: Vec<Value> =
        (0..15_000).map(|i| json!({"id": i, "name": format!("item {i:05} {}", "y".repeat(100))})).collect();
    std::fs::write(root.join("data.json"), serde_json::to_string(&items).unwrap()).unwrap();
    let config = tempfile::tempdir().unwrap();
    let servers = json!({"mcpServers": {"files": {"command": "node",
        "args": [crate::mcp_support::node_server("server-filesystem"), root.to_string_lossy()]}}});
    let mcp = config.path().join("mcp.json");
    std::fs::write(&mcp, servers.to_string()).unwrap();
    let code = format!(
        "const r = await tools.mcp__files__read_text_file({{path: {:?}}});
         return {{meta: JSON.stringify(r.metadata).length, blocks: r.metadata.blocks ?? null,
                  cut: r.truncated, type: typeof r.content}};",
        root.join("data.json").to_string_lossy()
    );
    let (v, _, _) = run(ws.path(), &code, &["--mcp-config", mcp.to_str().unwrap()]);
    assert!(v["meta"].as_u64().unwrap() < 1000, "{v}");
    assert_eq!(v["blocks"], Value::Null, "the copy of the text is not kept: {v}");
    // The content ({content: text}) is cut at the result bound, and says so.
    assert_eq!(v["cut"]["kept_bytes"], 100 << 10, "{v}");
    assert!(v["cut"]["spill_path"].is_string(), "{v}");
}
