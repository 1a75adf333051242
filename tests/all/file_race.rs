//! The workspace boundary under a symlink-swap race (issue 11, item 4): a
//! thread swaps a folder of the workspace and a symlink to a folder outside
//! it (`renameat2(RENAME_EXCHANGE)`, so one of the two names is always the
//! link) while batches read, write, edit, grep and list files under that
//! folder through the real engine. Nothing outside may be read, listed or
//! changed. Before file tools opened beneath the workspace root, such a run
//! read outside files and wrote outside the workspace.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codemode::{Batch, BatchCall, BatchOptions, Engine, Policy, RunStatus};
use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
use serde_json::{Map, Value, json};

/// Batches run while the swapper runs.
const ROUNDS: usize = 12;
/// Files of each kind in the swapped folder (calls per batch: 6 x FILES).
const FILES: usize = 24;
/// Most swaps, so the swapper ends even if the batches never do.
const MAX_SWAPS: u64 = 50_000_000;
/// In every outside file, so a read that escaped shows it.
const MARKER: &str = "OUTSIDE-MARKER";

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// Every entry under `dir` (not following links): relative path, inode and
/// content, so a file replaced by a rename shows even with equal content.
fn snapshot(dir: &Path) -> BTreeMap<String, (u64, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u64, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if meta.is_dir() {
                out.insert(rel, (meta.ino(), Vec::new()));
                walk(root, &p, out);
            } else {
                let bytes = if meta.is_file() { std::fs::read(&p).unwrap() } else { Vec::new() };
                out.insert(rel, (meta.ino(), bytes));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// One batch of reads, writes (some into new folders), edits, greps and
/// file searches under `d/`.
fn batch(round: usize) -> Batch {
    let mut calls = Vec::new();
    for i in 0..FILES {
        calls.push(BatchCall::new("read", args(json!({"path": format!("d/r{i}.txt")}))));
        calls.push(BatchCall::new(
            "write",
            args(json!({"path": format!("d/w{round}-{i}.txt"), "content": "written"})),
        ));
        calls.push(BatchCall::new(
            "write",
            args(json!({"path": format!("d/new{round}-{i}/w.txt"), "content": "written"})),
        ));
        calls.push(BatchCall::new(
            "edit",
            args(json!({"path": format!("d/e{i}.txt"), "edits": [{"old": "inside", "new": "inside"}]})),
        ));
        calls.push(BatchCall::new("grep_files", args(json!({"pattern": MARKER, "path": "d"}))));
        calls.push(BatchCall::new("file_search", args(json!({"query": "only-outside"}))));
    }
    Batch::new(calls)
}

#[test]
fn a_folder_swapped_for_a_symlink_never_leads_a_call_outside_the_workspace() {
    let outer = tempfile::tempdir().unwrap();
    let outer_path = std::fs::canonicalize(outer.path()).unwrap();
    let ws = outer_path.join("ws");
    let out = outer_path.join("out");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    for i in 0..FILES {
        std::fs::write(ws.join(format!("d/r{i}.txt")), "inside\n").unwrap();
        std::fs::write(ws.join(format!("d/e{i}.txt")), "inside\n").unwrap();
        std::fs::write(out.join(format!("r{i}.txt")), format!("{MARKER}\n")).unwrap();
        std::fs::write(out.join(format!("e{i}.txt")), "inside\n").unwrap();
    }
    std::fs::write(out.join("only-outside.txt"), format!("{MARKER}\n")).unwrap();
    std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
    let outside_before = snapshot(&out);

    let spill = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .workspace(&ws)
        .spill_dir(spill.path())
        .policy(Policy::full_access())
        .build()
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (stop.clone(), ws.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) && swaps < MAX_SWAPS {
                renameat2(AT_FDCWD, &ws.join("d"), AT_FDCWD, &ws.join("link"), RenameFlags::RENAME_EXCHANGE)
                    .unwrap();
                swaps += 1;
            }
            swaps
        })
    };

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (mut reads_inside, mut reads_outside, mut listed_outside, mut done) = (0, 0, 0, 0);
    for round in 0..ROUNDS {
        let (items, receipt) = rt.block_on(async {
            let mut run = engine.start_batch(batch(round), BatchOptions::new().concurrency(8));
            let mut items = Vec::new();
            while let Some(item) = run.next_item().await {
                items.push(item);
            }
            (items, run.wait().await)
        });
        assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
        assert_eq!(items.len(), 6 * FILES);
        for item in items {
            let text = match &item.result {
                Ok(envelope) => {
                    done += 1;
                    envelope.to_string()
                }
                Err(error) => error.to_string(),
            };
            match item.tool.as_str() {
                "read" if text.contains(MARKER) => reads_outside += 1,
                "read" if text.contains("inside") => reads_inside += 1,
                "grep_files" if text.contains(MARKER) => reads_outside += 1,
                "file_search" if text.contains("only-outside") => listed_outside += 1,
                _ => {}
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();

    // What landed outside: new files or folders, replaced or changed files.
    let outside_after = snapshot(&out);
    let written_outside = outside_after
        .iter()
        .filter(|(name, entry)| outside_before.get(*name) != Some(entry))
        .map(|(name, _)| name.clone())
        .collect::<Vec<_>>();
    let top: Vec<String> = std::fs::read_dir(&outer_path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect();
    eprintln!(
        "swaps {swaps}; calls done {done}; reads inside {reads_inside}; reads outside {reads_outside}; \
         listed outside {listed_outside}; written outside {}",
        written_outside.len()
    );
    assert!(reads_inside > 0 && done > 0, "the race let some calls through, or it tested nothing");
    assert_eq!(reads_outside, 0, "reads returned content from outside the workspace");
    assert_eq!(listed_outside, 0, "file_search listed a file outside the workspace");
    assert_eq!(written_outside, Vec::<String>::new(), "files outside the workspace changed");
    assert_eq!(outside_before.len(), outside_after.len());
    let mut top = top;
    top.sort();
    assert_eq!(top, ["out", "ws"], "nothing new next to the workspace");
}
