//! Undo: the bytes a run's `write` and `edit` calls replaced, kept in the
//! run's journal so `codemode rollback` can put them back.
//!
//! A journaled run hands its file tools an [`UndoLog`]. Under the file's
//! writer lock, just before the rename that commits the change, the tool
//! gives the log what the file held (its bytes and mode, or that it did not
//! exist): a `preimage` line. Once the rename is done it gives the log the
//! SHA-256 of what it wrote: a `postimage` line. Both go straight to the
//! run's journal writer (they are not held on the VM thread's buffer).
//!
//! Pre-images are bounded: [`FILE_PREIMAGE_BYTES`] per file and
//! [`RUN_PREIMAGE_BYTES`] per run. A call over either bound still runs; its
//! `preimage` line says why its bytes were not kept (`not_kept`), the
//! call's receipt entry says it is not undoable, and a rollback names it.
//!
//! A rollback reads these lines back ([`UndoPlan::of`]) and appends a
//! `reverted` line to the run's journal for the calls it undid
//! ([`JournalStore::annotate`](super::JournalStore::annotate)).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::record::{self, CallRecord, DoneRecord};
use super::writer::SideLog;

/// Most bytes of one file's pre-image a run keeps: 8 MiB. A larger file
/// changed by `write` or `edit` is not undoable.
pub const FILE_PREIMAGE_BYTES: u64 = 8 << 20;

/// Most bytes of pre-images one run keeps, all files together: 16 MiB.
/// Calls past it are not undoable.
pub const RUN_PREIMAGE_BYTES: u64 = 16 << 20;

/// `{"t":"preimage"}`: what the file a `write` or `edit` call is about to
/// replace held.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PreimageRecord {
    pub seq: u64,
    /// The file, relative to the workspace, links inside it resolved.
    pub path: String,
    /// The same, absolute (informational).
    pub abs: String,
    /// Whether the file existed (a call that makes it: `false`).
    pub existed: bool,
    /// Its bytes, base64, when it existed and they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    /// Its permission bits, when it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Why the bytes were not kept (over a bound): the call is not undoable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<String>,
}

impl PreimageRecord {
    /// The bytes the file held, when kept (`None` for a file the call
    /// made, or bytes not kept).
    pub(crate) fn decoded(&self) -> Result<Option<Vec<u8>>, String> {
        match &self.bytes {
            None => Ok(None),
            Some(text) => base64::engine::general_purpose::STANDARD
                .decode(text)
                .map(Some)
                .map_err(|e| format!("the pre-image of call {} is not base64: {e}", self.seq)),
        }
    }
}

/// `{"t":"postimage"}`: what a `write` or `edit` call left in the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PostimageRecord {
    pub seq: u64,
    pub path: String,
    /// SHA-256 (hex) of the bytes the call wrote.
    pub sha256: String,
}

/// `{"t":"reverted"}`: a rollback undid these calls of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RevertedRecord {
    /// The calls undone (by seq).
    pub seqs: Vec<u64>,
    /// The rollback's own run.
    pub by: String,
    /// When (RFC 3339 UTC).
    pub at: String,
}

/// What a file held before a call replaced it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Before<'a> {
    /// Nothing: the call makes it.
    Absent,
    /// These bytes, with these permission bits.
    Bytes(&'a [u8], u32),
    /// More bytes than a pre-image keeps (this many), with these bits.
    TooLarge(u64, u32),
}

/// Where a journaled run's `write` and `edit` calls keep pre-images.
/// Shared by the run's calls (each call's tool context holds it).
pub struct UndoLog {
    side: SideLog,
    /// Pre-image bytes kept so far in the run.
    used: AtomicU64,
    /// Calls whose pre-image was not kept, with why.
    not_kept: Mutex<HashMap<u64, String>>,
}

impl std::fmt::Debug for UndoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndoLog").field("used", &self.used).finish()
    }
}

impl UndoLog {
    /// The log of a run whose journal writer `side` feeds.
    pub(crate) fn new(side: SideLog) -> UndoLog {
        UndoLog { side, used: AtomicU64::new(0), not_kept: Mutex::default() }
    }

    /// Records what `path` (relative; `abs` absolute) held before call
    /// `seq` replaces it, and waits until the record is durable (so a
    /// crash after the rename never loses what the file held). Call it
    /// under the file's writer lock, before the rename, on a blocking
    /// thread.
    ///
    /// # Errors
    /// The journal could not make the record durable: the caller does not
    /// replace the file (a change it could not undo).
    pub(crate) fn before(&self, seq: u64, path: &str, abs: &Path, pre: Before<'_>) -> Result<(), String> {
        let (existed, mode) = match pre {
            Before::Absent => (false, None),
            Before::Bytes(_, mode) | Before::TooLarge(_, mode) => (true, Some(mode)),
        };
        let mut record = PreimageRecord {
            seq,
            path: path.to_owned(),
            abs: abs.display().to_string(),
            existed,
            bytes: None,
            mode,
            not_kept: None,
        };
        let kept = match pre {
            Before::Absent => None,
            Before::Bytes(bytes, _) => Some(self.reserve(bytes.len() as u64).map(|()| bytes)),
            Before::TooLarge(size, _) => Some(Err(too_large(size))),
        };
        if let Some(kept) = kept {
            match kept {
                Ok(bytes) => record.bytes = Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                Err(why) => {
                    self.not_kept.lock().unwrap_or_else(|e| e.into_inner()).insert(seq, why.clone());
                    record.not_kept = Some(why);
                }
            }
        }
        self.side
            .push_durable_blocking(record::tagged_line("preimage", &record))
            .map_err(|e| format!("cannot keep what the file held for undo: {e}"))
    }

    /// Takes `n` bytes of the run's budget, or says why not.
    fn reserve(&self, n: u64) -> Result<(), String> {
        if n > FILE_PREIMAGE_BYTES {
            return Err(too_large(n));
        }
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used + n > RUN_PREIMAGE_BYTES {
                return Err(format!(
                    "not undoable: the run's pre-images reached {} MiB, the most a run keeps",
                    RUN_PREIMAGE_BYTES >> 20
                ));
            }
            match self.used.compare_exchange(used, used + n, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    /// Records what call `seq` left in `path`: the bytes it wrote.
    pub(crate) fn after(&self, seq: u64, path: &str, written: &[u8]) {
        let record =
            PostimageRecord { seq, path: path.to_owned(), sha256: super::digest::sha256_hex(written) };
        self.side.push(record::tagged_line("postimage", &record));
    }

    /// The receipt note of call `seq` when its pre-image was not kept.
    pub(crate) fn note(&self, seq: u64) -> Option<String> {
        self.not_kept.lock().unwrap_or_else(|e| e.into_inner()).get(&seq).cloned()
    }
}

/// Why a file of `n` bytes has no pre-image.
fn too_large(n: u64) -> String {
    format!(
        "not undoable: the file held {n} bytes, over the {} MiB a pre-image keeps",
        FILE_PREIMAGE_BYTES >> 20
    )
}

/// One file a rollback restores: to what it held before the run's first
/// call that changed it.
#[derive(Debug, Clone)]
pub(crate) struct FileUndo {
    /// The file, relative to the workspace.
    pub path: String,
    /// The run's first pre-image of it.
    pub first: PreimageRecord,
    /// What the run may have left in it, as SHA-256 digests (`None`: no
    /// file): the last call's post-image; when that call's end is not
    /// journaled (its process died between the pre-image and the
    /// post-image), what the file held before that call (the rename did
    /// not happen) and, for a `write`, what it wrote (it did). Empty when
    /// none of that is known.
    pub left: Vec<Option<String>>,
    /// The calls that changed it, in the order they did.
    pub seqs: Vec<u64>,
    /// Why it cannot be restored (its first pre-image was not kept).
    pub not_undoable: Option<String>,
    /// The position of its last change among the run's changes (a
    /// rollback goes newest first).
    pub last: usize,
}

/// What a rollback of a run can undo, read from its journal.
#[derive(Debug, Default)]
pub(crate) struct UndoPlan {
    /// Files to restore, newest change first.
    pub files: Vec<FileUndo>,
    /// Every call of the run, by seq.
    pub calls: BTreeMap<u64, RunCall>,
    /// Calls an earlier rollback undid.
    pub reverted: HashSet<u64>,
    /// The positions of calls among the run's changes (pre-images), for
    /// putting compensations in order with file restores.
    pub order: HashMap<u64, usize>,
}

/// A call of the run, as its journal has it.
#[derive(Debug, Clone)]
pub(crate) struct RunCall {
    pub tool: String,
    /// Its arguments, when journaled whole (not as a digest).
    pub args: Option<serde_json::Value>,
    /// Its result's content, when it succeeded.
    pub result: Option<serde_json::Value>,
}

impl UndoPlan {
    /// Reads a run's journal `lines`; lines of other kinds are skipped.
    ///
    /// # Errors
    /// A `preimage`, `postimage` or `reverted` line that does not parse.
    pub(crate) fn of(lines: &[String]) -> Result<UndoPlan, String> {
        let mut plan = UndoPlan::default();
        let mut pres: Vec<PreimageRecord> = Vec::new();
        let mut posts: HashMap<u64, String> = HashMap::new();
        let bad = |n: usize, e: &dyn std::fmt::Display| format!("journal line {}: {e}", n + 1);
        for (n, line) in lines.iter().enumerate() {
            match record::kind(line) {
                Some("preimage") => pres.push(serde_json::from_str(line).map_err(|e| bad(n, &e))?),
                Some("postimage") => {
                    let p: PostimageRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                    posts.insert(p.seq, p.sha256);
                }
                Some("reverted") => {
                    let r: RevertedRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                    plan.reverted.extend(r.seqs);
                }
                Some("call") => {
                    if let Ok(c) = serde_json::from_str::<CallRecord>(line) {
                        let args = serde_json::from_str(c.args.get())
                            .ok()
                            .filter(|v: &serde_json::Value| !v.is_null());
                        plan.calls.insert(c.seq, RunCall { tool: c.tool, args, result: None });
                    }
                }
                Some("done") => {
                    if let Ok(d) = serde_json::from_str::<DoneRecord>(line)
                        && d.ok
                        && let Some(call) = plan.calls.get_mut(&d.seq)
                    {
                        call.result = match d.text {
                            Some(text) => Some(serde_json::Value::String(text)),
                            None => serde_json::from_str::<serde_json::Value>(d.payload.get())
                                .ok()
                                .and_then(|p| p.get("content").cloned()),
                        };
                    }
                }
                _ => {}
            }
        }
        let mut by_path: BTreeMap<String, FileUndo> = BTreeMap::new();
        for (i, pre) in pres.into_iter().enumerate() {
            plan.order.insert(pre.seq, i);
            let before = by_path.get(&pre.path).and_then(|f| posts.get(f.seqs.last()?));
            let left = may_have_left(posts.get(&pre.seq), before, plan.calls.get(&pre.seq));
            let seq = pre.seq;
            let file = by_path.entry(pre.path.clone()).or_insert_with(|| FileUndo {
                path: pre.path.clone(),
                not_undoable: pre.not_kept.clone(),
                first: pre,
                left: Vec::new(),
                seqs: Vec::new(),
                last: i,
            });
            file.seqs.push(seq);
            file.left = left;
            file.last = i;
        }
        let mut files: Vec<FileUndo> = by_path.into_values().collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.last));
        plan.files = files;
        Ok(plan)
    }
}

/// What a call may have left in its file: its post-image `post`; without
/// one (its process died between its pre-image and its post-image), what
/// the run's previous call on the file left there (`before`, its
/// post-image: the rename did not happen), and for a `write` journaled
/// whole (`call`), the bytes it wrote (it did). Not the call's own
/// pre-image: that may be a change made by someone else between the
/// run's calls, which a rollback must not overwrite unasked. (A file's
/// first call cut so leaves it as before the run, which a rollback finds
/// as it is.)
fn may_have_left(
    post: Option<&String>,
    before: Option<&String>,
    call: Option<&RunCall>,
) -> Vec<Option<String>> {
    if let Some(sha) = post {
        return vec![Some(sha.clone())];
    }
    let mut left: Vec<Option<String>> = before.map(|sha| Some(sha.clone())).into_iter().collect();
    if let Some(RunCall { tool, args: Some(args), .. }) = call
        && tool == "write"
        && let Some(content) = args.get("content").and_then(serde_json::Value::as_str)
    {
        left.push(Some(super::digest::sha256_hex(content.as_bytes())));
    }
    left
}

/// What one file is restored to.
#[derive(Debug, Clone)]
pub(crate) struct FileRestore {
    /// Its bytes before the run (`None`: the run made it; it is removed).
    pub bytes: Option<Vec<u8>>,
    /// Their permission bits.
    pub mode: Option<u32>,
    /// What the run may have left in it ([`FileUndo::left`]).
    pub left: Vec<Option<String>>,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restored {
    /// Its bytes were put back.
    Written,
    /// The run made it; it was removed.
    Removed,
    /// It already held its bytes from before the run.
    AsBefore,
    /// It changed since the run, and was left alone.
    ChangedSince,
}

/// The files of one rollback, by workspace-relative path.
#[derive(Debug, Default)]
pub(crate) struct RestorePlan {
    pub files: HashMap<String, FileRestore>,
    /// Restore files changed since the run too (`--force`).
    pub force: bool,
    /// What happened to each file, as it happens.
    pub outcomes: Mutex<HashMap<String, Restored>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(seq: u64, path: &str, bytes: Option<&[u8]>) -> String {
        let r = PreimageRecord {
            seq,
            path: path.into(),
            abs: format!("/ws/{path}"),
            existed: bytes.is_some(),
            bytes: bytes.map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
            mode: bytes.map(|_| 0o644),
            not_kept: None,
        };
        record::tagged_line("preimage", &r)
    }

    fn post(seq: u64, path: &str, bytes: &[u8]) -> String {
        let r = PostimageRecord { seq, path: path.into(), sha256: super::super::digest::sha256_hex(bytes) };
        record::tagged_line("postimage", &r)
    }

    #[test]
    fn a_plan_restores_each_file_to_its_first_pre_image_newest_change_first() {
        let lines = vec![
            pre(1, "a.txt", Some(b"a0")),
            post(1, "a.txt", b"a1"),
            pre(2, "b.txt", None),
            post(2, "b.txt", b"b1"),
            pre(3, "a.txt", Some(b"a1")),
            post(3, "a.txt", b"a2"),
            r#"{"t":"reverted","seqs":[2],"by":"run-x","at":"now"}"#.to_owned(),
        ];
        let plan = UndoPlan::of(&lines).unwrap();
        let paths: Vec<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "b.txt"], "a.txt changed last");
        let a = &plan.files[0];
        assert_eq!(a.first.decoded().unwrap().as_deref(), Some(&b"a0"[..]));
        assert_eq!(a.seqs, [1, 3]);
        assert_eq!(a.left, [Some(super::super::digest::sha256_hex(b"a2"))]);
        assert!(!plan.files[1].first.existed);
        assert!(plan.reverted.contains(&2));
        assert!(UndoPlan::of(&[r#"{"t":"preimage","seq":"x"}"#.to_owned()]).is_err());
    }
}
