//! The workspace boundary under a symlink-swap race (issue 11, item 4): a
//! thread swaps a folder of the workspace and a symlink to a folder outside
//! it (`renameat2(RENAME_EXCHANGE)`, so one of the two names is always the
//! link) while batches read, write, edit, grep and list files under that
//! folder through the real engine. Nothing outside may be read, listed or
//! changed. Before file tools opened beneath the workspace root, such a run
//! read outside files and wrote outside the workspace. The same race with a
//! link into `.codemode/` (inside the workspace, hidden and protected) must
//! not reach it either.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codemode::{Policy, batch::Batch, batch::BatchCall, batch::BatchOptions, receipt::RunStatus};
use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
use serde_json::{Map, Value, json};

/// Batches run while the swapper runs.
const ROUNDS: usize = 12;
/// Files of each kind in the swapped folder (calls per batch: 6 x FILES).
const FILES: usize = 24;
/// Most swaps, so the swapper ends even if the batches never do.
const MAX_SWAPS: u64 = 50_000_000;
/// In every file of the guarded folder, so a read that reached it shows it.
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
        calls.push(BatchCall::new("file_search", args(json!({"query": "only-guarded"}))));
    }
    Batch::new(calls)
}

/// What the batches saw while the swapper ran.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    swaps: u64,
    done: usize,
    reads_inside: usize,
    /// Reads and grep results holding [`MARKER`].
    reads_guarded: usize,
    /// `file_search` results naming the file only the guarded folder holds.
    listed_guarded: usize,
    /// Entries of the guarded folder added, replaced or changed.
    written_guarded: Vec<String>,
}

/// Fills the guarded folder `guarded` (files holding [`MARKER`], one named
/// `only-guarded.txt`) and the workspace's `ws/d/`, links `ws/link` to
/// `guarded` (`link_target` is what the link holds), then runs [`ROUNDS`]
/// batches while a thread exchanges `d` and `link`.
pub(crate) fn swap_race(ws: &Path, guarded: &Path, link_target: &Path) -> Seen {
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(guarded).unwrap();
    for i in 0..FILES {
        std::fs::write(ws.join(format!("d/r{i}.txt")), "inside\n").unwrap();
        std::fs::write(ws.join(format!("d/e{i}.txt")), "inside\n").unwrap();
        std::fs::write(guarded.join(format!("r{i}.txt")), format!("{MARKER}\n")).unwrap();
        std::fs::write(guarded.join(format!("e{i}.txt")), "inside\n").unwrap();
    }
    std::fs::write(guarded.join("only-guarded.txt"), format!("{MARKER}\n")).unwrap();
    std::os::unix::fs::symlink(link_target, ws.join("link")).unwrap();
    let before = snapshot(guarded);

    let spill = tempfile::tempdir().unwrap();
    let engine = crate::common::engine_builder()
        .workspace(ws)
        .spill_dir(spill.path())
        .policy(Policy::full_access())
        .build()
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (stop.clone(), ws.to_path_buf());
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
    let mut seen = Seen::default();
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
                    seen.done += 1;
                    envelope.to_string()
                }
                Err(error) => error.to_string(),
            };
            match item.tool.as_str() {
                "read" if text.contains(MARKER) => seen.reads_guarded += 1,
                "read" if text.contains("inside") => seen.reads_inside += 1,
                "grep_files" if text.contains(MARKER) => seen.reads_guarded += 1,
                "file_search" if text.contains("only-guarded") => seen.listed_guarded += 1,
                _ => {}
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    seen.swaps = swapper.join().unwrap();
    let after = snapshot(guarded);
    seen.written_guarded = after
        .iter()
        .filter(|(name, entry)| before.get(*name) != Some(entry))
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(
        before.len(),
        after.len() - seen.written_guarded.iter().filter(|n| !before.contains_key(*n)).count()
    );
    eprintln!("{seen:?}");
    seen
}

/// The race gave some calls a chance and none reached the guarded folder.
pub(crate) fn assert_contained(seen: &Seen) {
    assert!(seen.reads_inside > 0 && seen.done > 0, "the race let no call through, so it tested nothing");
    assert_eq!(seen.reads_guarded, 0, "reads returned content from the guarded folder");
    assert_eq!(seen.listed_guarded, 0, "file_search listed a file of the guarded folder");
    assert_eq!(seen.written_guarded, Vec::<String>::new(), "files in the guarded folder changed");
}

/// The same race with a relative link to an earlier run's folder under
/// `.codemode/` (hidden from reads, protected from writes): the swap stays
/// inside the workspace, so only the tools' own checks of where an open
/// really landed keep the calls out.
#[test]
fn a_folder_swapped_for_a_symlink_into_codemode_never_leads_a_call_there() {
    let outer = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(outer.path()).unwrap().join("ws");
    let earlier = ws.join(".codemode/runs/earlier");
    let seen = swap_race(&ws, &earlier, Path::new(".codemode/runs/earlier"));
    assert_contained(&seen);
}
