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
