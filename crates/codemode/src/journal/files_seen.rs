//! What a paused run saw of its files, so that a resume does not act on
//! it as if nothing had changed since.
//!
//! A resume replays the run: the calls the journal holds answer with what
//! the tools answered before the pause, so the program goes on from what it
//! saw then. A file it named before the pause (read, wrote, edited) and
//! someone changed while it was paused would be overwritten, unseen, by a
//! later `write` made from the old text. So:
//! - the paused call's own file is bound: the pause records what it holds
//!   (`pending.bound.content`, [`bound_content`]), and a resume refuses the
//!   call when it changed ([`bound_changed`]);
//! - every file the run's calls named by path is noted ([`FilesSeen`]),
//!   under each spelling (as written and as its links resolved), and a
//!   pause records what each holds (`paused.files`); a resume compares them
//!   when it starts, before any call runs, and refuses for the rest of the
//!   run a call that would change one found changed, until the program
//!   `read`s that file again (`paused.changed_files` carries them over
//!   later pauses). A recovery compares them too, but for the files the
//!   run's own `write` and `edit` calls changed after its last pause
//!   (`Journal::written_since_pause`).
//!
//! What a file holds is its bytes' SHA-256 with its size, for a file up to
//! [`MAX_HASHED_FILE_BYTES`] while the pause's budget lasts, else its size,
//! modification time and inode (`meta:`, which a change on this machine
//! moves, and a `touch` too). Files a bash command or an MCP server reads
//! or writes are not known here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::record::BoundObject;

/// Most files a pause records; past it, the files named first are kept,
/// and the paused receipt says so.
pub(crate) const MAX_FILES: usize = 1_000;

/// Most bytes of one file that are hashed (8 MiB, as a pre-image's bound);
/// a larger file is recorded by `meta:`.
pub(crate) const MAX_HASHED_FILE_BYTES: u64 = 8 << 20;

/// Most bytes one pause hashes in all (64 MiB); the files past it are
/// recorded by `meta:`.
pub(crate) const MAX_HASHED_BYTES: u64 = 64 << 20;

/// The files one run named, and those a resume found changed since the
/// pause. Shared by the run's dispatcher (which notes and refuses) and its
/// VM (which records them when the run pauses).
#[derive(Debug, Default)]
pub(crate) struct FilesSeen {
    /// Absolute paths the run's calls named (each spelling), in this
    /// process and, on a resume, those the pause recorded.
    named: Mutex<BTreeSet<PathBuf>>,
    /// More were named than [`MAX_FILES`].
    over: std::sync::atomic::AtomicBool,
    /// Absolute paths found changed since the pause when this resume
    /// started (and those an earlier resume found), until read again.
    changed: Mutex<BTreeSet<PathBuf>>,
}

impl FilesSeen {
    /// For a resumed run paused with `files` (path, as the workspace shows
    /// it, and what it held) and `changed_before` (found changed by an
    /// earlier resume), in `workspace`: compares each file with what it
    /// held at the pause, now, but those the run itself changed since
    /// (`written_by_the_run`: a recovery's, whose process died after its
    /// last pause with `write` or `edit` calls made; resolved paths
    /// relative to the workspace), which the run knows.
    pub(crate) fn resumed(
        workspace: &Path,
        files: &BTreeMap<String, String>,
        changed_before: &[String],
        written_by_the_run: &[String],
    ) -> FilesSeen {
        let mut changed: BTreeSet<PathBuf> = changed_before.iter().map(|p| workspace.join(p)).collect();
        let own: BTreeSet<PathBuf> = written_by_the_run.iter().map(|p| workspace.join(p)).collect();
        let mut named = BTreeSet::new();
        for (path, then) in files {
            let absolute = workspace.join(path);
            // Under either spelling: as recorded, and as its links resolve.
            let resolved = std::fs::canonicalize(&absolute).unwrap_or_else(|_| absolute.clone());
            let the_runs_own = own.contains(&absolute) || own.contains(&resolved);
            if !the_runs_own && signature_like(&absolute, then) != *then {
                changed.insert(absolute.clone());
            }
            named.insert(absolute);
        }
        FilesSeen { named: Mutex::new(named), changed: Mutex::new(changed), ..FilesSeen::default() }
    }

    /// The files found changed since the pause, as the workspace shows
    /// them (relative when inside `workspace`).
    pub(crate) fn changed(&self, workspace: &Path) -> Vec<String> {
        let changed = lock(&self.changed);
        changed
            .iter()
            .map(|p| p.strip_prefix(workspace).unwrap_or(p).to_string_lossy().into_owned())
            .collect()
    }

    /// Notes that a call named `spellings` (absolute: as written, and as
    /// resolved). A `read` made live (`reads`) sees the file as it is now:
    /// a change found since the pause no longer holds against it.
    pub(crate) fn note(&self, spellings: &[&Path], reads: bool) {
        if reads {
            let mut changed = lock(&self.changed);
            if !changed.is_empty() {
                for p in spellings {
                    changed.remove(*p);
                }
            }
        }
        let mut named = lock(&self.named);
        for p in spellings {
            if named.contains(*p) {
                continue;
            }
            if named.len() >= MAX_FILES {
                self.over.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            named.insert(p.to_path_buf());
        }
    }

    /// Why a call that would change the file of `spellings` (`shown` as the
    /// call wrote it) is refused, when one of them changed since the pause.
    pub(crate) fn refusal(&self, spellings: &[&Path], shown: &str) -> Option<String> {
        let changed = lock(&self.changed);
        spellings.iter().any(|p| changed.contains(*p)).then(|| {
            format!(
                "`{shown}` was changed since the run paused, and the run named it before the pause (a read, a \
                 write or an edit): the run goes on from what it saw then (a resume replays those calls), so a \
                 call that would change the file is refused rather than overwrite that change unseen. Read the \
                 file again (a read made now lifts this), or start the program again"
            )
        })
    }

    /// What a pause records: each file named (relative to `workspace`
    /// when inside it) with what it holds now, and the files found changed
    /// (which stay refused on the next resume); and a warning when more
    /// files were named than are recorded.
    pub(crate) fn at_pause(
        &self,
        workspace: &Path,
    ) -> (BTreeMap<String, String>, Vec<String>, Option<String>) {
        let shown = |p: &Path| p.strip_prefix(workspace).unwrap_or(p).to_string_lossy().into_owned();
        let named = lock(&self.named);
        let changed = lock(&self.changed);
        let mut budget = MAX_HASHED_BYTES;
        let files = named
            .iter()
            .filter(|p| !changed.contains(*p))
            .map(|p| (shown(p), signature(p, &mut budget)))
            .collect();
        let over = self.over.load(std::sync::atomic::Ordering::Relaxed).then(|| {
            format!(
                "the run named more than {MAX_FILES} files before its pause: a resume compares the first \
                 {MAX_FILES} with what they hold then, not the others (docs/JOURNAL.md, \"Resume\")"
            )
        });
        (files, changed.iter().map(|p| shown(p)).collect(), over)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the file `bound` names holds now, for a pause to record
/// (`pending.bound.content`): see [`signature`].
pub(crate) fn bound_content(bound: &BoundObject, workspace: &Path) -> String {
    let mut budget = MAX_HASHED_FILE_BYTES;
    signature(&workspace.join(&bound.path), &mut budget)
}

/// Why the file `bound` names is not what it was when the run paused
/// (its recorded `content`), if it is not: changed, made or removed
/// since. The run made the paused call from what it read before the
/// pause (a resume replays those reads), so running it would overwrite,
/// unseen, the change made in between. A resume asks this when it
/// starts, before any call runs, so a change one allowed call makes is
/// not taken for one made in between by the next call on the same file.
pub(crate) fn bound_changed(bound: &BoundObject, workspace: &Path) -> Option<String> {
    let then = bound.content.as_deref()?;
    let now = signature_like(&workspace.join(&bound.path), then);
    if now == then {
        return None;
    }
    let path = &bound.path;
    let what = match (then, now.as_str()) {
        ("missing", _) => "was made",
        (_, "missing") => "was removed",
        _ => "was changed",
    };
    Some(format!(
        "`{path}` {what} since the run paused on this call: the call was made, and is decided, for the file as \
         it was at the pause (a resume goes on from what the run saw then), so it is refused rather than act \
         on that change unseen. Start the program again to work from the file as it is now"
    ))
}

/// What the file at `path` holds now: `<size>:<SHA-256 of its bytes>` for
/// a regular file up to [`MAX_HASHED_FILE_BYTES`] while `budget` bytes are
/// left to read, else (and for a file this process cannot read) `meta:`
/// with its size, modification time and inode; `missing`, `link:<target>`
/// for a link, `not a file` for anything else
/// ([`crate::trust::pin_digest`]'s words).
pub(crate) fn signature(path: &Path, budget: &mut u64) -> String {
    let Ok(m) = std::fs::symlink_metadata(path) else { return "missing".to_owned() };
    if !m.is_file() {
        return crate::trust::pin_digest(path);
    }
    if m.len() > MAX_HASHED_FILE_BYTES || m.len() > *budget {
        return meta(&m);
    }
    *budget -= m.len();
    match crate::trust::pin_digest(path) {
        digest if digest.len() == 64 => format!("{}:{digest}", m.len()),
        _ => meta(&m),
    }
}

/// What `path` holds now, in the form `then` was recorded in, for
/// comparing with it: a file whose size is not the recorded one is not
/// read.
fn signature_like(path: &Path, then: &str) -> String {
    let Ok(m) = std::fs::symlink_metadata(path) else { return "missing".to_owned() };
    if !m.is_file() {
        // `link:<target>` or `not a file`: nothing is hashed.
        return crate::trust::pin_digest(path);
    }
    if then.starts_with("meta:") {
        return meta(&m);
    }
    match then.split_once(':').and_then(|(size, _)| size.parse::<u64>().ok()) {
        // The same size: only the bytes tell.
        Some(size) if m.len() == size => {
            let mut unbounded = u64::MAX;
            signature(path, &mut unbounded)
        }
        // Another size, or a file where there was none (or a link, or
        // something else): changed, without reading it.
        _ => format!("{}:", m.len()),
    }
}

/// `meta:<size>:<mtime s>.<ns>:<inode>` of a file.
fn meta(m: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        format!("meta:{}:{}.{}:{}", m.size(), m.mtime(), m.mtime_nsec(), m.ino())
    }
    #[cfg(not(unix))]
    {
        format!("meta:{}", m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled(p: &Path) -> [&Path; 1] {
        [p]
    }

    #[test]
    fn a_file_changed_made_or_removed_since_the_pause_is_found_and_one_left_alone_is_not() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        for name in ["same.txt", "changed.txt", "removed.txt"] {
            std::fs::write(ws.join(name), name).unwrap();
        }
        let seen = FilesSeen::default();
        for name in ["same.txt", "changed.txt", "removed.txt", "made.txt"] {
            seen.note(&spelled(&ws.join(name)), true);
        }
        let (files, changed, over) = seen.at_pause(ws);
        assert_eq!(files.len(), 4);
        assert_eq!(files["made.txt"], "missing");
        assert!(files["same.txt"].starts_with("8:"), "{files:?}");
        assert!(changed.is_empty() && over.is_none());
        std::fs::write(ws.join("changed.txt"), "other bytes").unwrap();
        std::fs::remove_file(ws.join("removed.txt")).unwrap();
        std::fs::write(ws.join("made.txt"), "new").unwrap();
        let resumed = FilesSeen::resumed(ws, &files, &[], &[]);
        for name in ["changed.txt", "removed.txt", "made.txt"] {
            assert!(resumed.refusal(&spelled(&ws.join(name)), name).is_some(), "{name}");
        }
        assert!(resumed.refusal(&spelled(&ws.join("same.txt")), "same.txt").is_none());
        // The next pause keeps them refused, and records the others again.
        let (files, changed, _) = resumed.at_pause(ws);
        assert_eq!(changed, ["changed.txt", "made.txt", "removed.txt"]);
        assert_eq!(files.keys().collect::<Vec<_>>(), ["same.txt"]);
        let again = FilesSeen::resumed(ws, &files, &changed, &[]);
        assert!(again.refusal(&spelled(&ws.join("changed.txt")), "changed.txt").is_some());
        // A read made now lifts it; a call that changes does not.
        again.note(&spelled(&ws.join("made.txt")), false);
        assert!(again.refusal(&spelled(&ws.join("made.txt")), "made.txt").is_some());
        again.note(&spelled(&ws.join("changed.txt")), true);
        assert!(again.refusal(&spelled(&ws.join("changed.txt")), "changed.txt").is_none());
        // A recovery takes the run's own writes since the pause for its
        // own, compares the rest, and keeps what was found before.
        std::fs::write(ws.join("same.txt"), "changed by the run before it died").unwrap();
        let recovered = FilesSeen::resumed(ws, &files, &changed, &["same.txt".to_owned()]);
        assert!(recovered.refusal(&spelled(&ws.join("same.txt")), "same.txt").is_none());
        assert!(recovered.refusal(&spelled(&ws.join("removed.txt")), "removed.txt").is_some());
        let not_the_runs = FilesSeen::resumed(ws, &files, &[], &[]);
        assert!(not_the_runs.refusal(&spelled(&ws.join("same.txt")), "same.txt").is_some());
    }

    #[test]
    fn a_file_past_the_hashing_bounds_is_recorded_by_its_metadata_and_still_compared() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        std::fs::write(ws.join("big.txt"), "0123456789").unwrap();
        let mut budget = 5;
        let then = signature(&ws.join("big.txt"), &mut budget);
        assert!(then.starts_with("meta:10:"), "{then}");
        assert_eq!(signature_like(&ws.join("big.txt"), &then), then);
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(ws.join("big.txt"), "9876543210").unwrap();
        assert_ne!(signature_like(&ws.join("big.txt"), &then), then);
    }

    #[test]
    fn a_file_whose_size_changed_is_not_read_again() {
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join("f.txt");
        std::fs::write(&file, "abc").unwrap();
        let mut unbounded = u64::MAX;
        let then = signature(&file, &mut unbounded);
        assert!(then.starts_with("3:"), "{then}");
        std::fs::write(&file, "abcdef").unwrap();
        assert_eq!(signature_like(&file, &then), "6:");
    }

    #[test]
    fn past_the_file_count_the_pause_says_how_many_are_compared() {
        let ws = tempfile::tempdir().unwrap();
        let seen = FilesSeen::default();
        for i in 0..=MAX_FILES {
            seen.note(&spelled(&ws.path().join(format!("f{i}"))), true);
        }
        let (files, _, over) = seen.at_pause(ws.path());
        assert_eq!(files.len(), MAX_FILES);
        assert!(over.unwrap().contains("more than 1000 files"));
    }
}
