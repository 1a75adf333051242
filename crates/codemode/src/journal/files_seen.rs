//! The files a journaled run's calls named by path, so that a resume does
//! not act on what it read before a pause as if nothing had changed since.
//!
//! A resume replays the run: the calls the journal holds answer with what
//! the tools answered before the pause, so the program goes on from what it
//! saw then. A file it read (or wrote) before the pause and someone changed
//! while it was paused would be overwritten, unseen, by a later `write`
//! made from the old text. So a pause records each file the run's calls
//! named by path with what it held then (`paused.files`), a resume compares
//! them when it starts, before any call runs, and a call that would change
//! one found changed is refused for the rest of the run
//! (`paused.changed_files` carries them over later pauses). The paused
//! call's own file is bound the same way (`pending.bound.content`,
//! gate/binding.rs). Files a bash command or an MCP server reads are not
//! known here, and are not compared.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most files a pause records; past it, the files named first are kept.
pub(crate) const MAX_FILES: usize = 1_000;

/// Most bytes a pause reads to hash its files (64 MiB); a file past it is
/// recorded by its size, modification time and inode (`meta:`), which a
/// change on this machine moves but a copy on another does not keep.
pub(crate) const MAX_HASHED_BYTES: u64 = 64 << 20;

/// The files one run named, and those a resume found changed since the
/// pause. Shared by the run's dispatcher (which notes and refuses) and its
/// VM (which records them when the run pauses).
#[derive(Debug, Default)]
pub(crate) struct FilesSeen {
    /// Absolute paths the run's calls named (resolved, links followed),
    /// in this process and, on a resume, those the pause recorded.
    named: Mutex<BTreeSet<PathBuf>>,
    /// Absolute paths found changed since the pause when this resume
    /// started (and those an earlier resume found).
    changed: BTreeSet<PathBuf>,
}

impl FilesSeen {
    /// For a resumed run paused with `files` (path, as the workspace shows
    /// it, and what it held) and `changed_before` (found changed by an
    /// earlier resume), in `workspace`: compares each file with what it
    /// held at the pause, now.
    pub(crate) fn resumed(
        workspace: &Path,
        files: &BTreeMap<String, String>,
        changed_before: &[String],
    ) -> FilesSeen {
        let mut changed: BTreeSet<PathBuf> = changed_before.iter().map(|p| workspace.join(p)).collect();
        let mut named = BTreeSet::new();
        for (path, then) in files {
            let absolute = workspace.join(path);
            if signature_like(&absolute, then) != *then {
                changed.insert(absolute.clone());
            }
            named.insert(absolute);
        }
        FilesSeen { named: Mutex::new(named), changed }
    }

    /// Notes that a call named `target` (absolute, resolved).
    pub(crate) fn note(&self, target: &Path) {
        let mut named = self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if named.len() < MAX_FILES && !named.contains(target) {
            named.insert(target.to_path_buf());
        }
    }

    /// Why a call that would change `target` (`shown` as the call wrote
    /// it) is refused, when the file changed since the pause.
    pub(crate) fn refusal(&self, target: &Path, shown: &str) -> Option<String> {
        self.changed.contains(target).then(|| {
            format!(
                "`{shown}` was changed since the run paused, and the run named it before the pause (a read, a \
                 write or an edit): the run goes on from what it saw then (a resume replays those calls), so a \
                 call that would change the file is refused rather than overwrite that change unseen. Start \
                 the program again to work from the file as it is now"
            )
        })
    }

    /// What a pause records: each file named (relative to `workspace`
    /// when inside it) with what it holds now, and the files found changed
    /// (which stay refused on the next resume). Reads up to
    /// [`MAX_HASHED_BYTES`] of them.
    pub(crate) fn at_pause(&self, workspace: &Path) -> (BTreeMap<String, String>, Vec<String>) {
        let shown = |p: &Path| p.strip_prefix(workspace).unwrap_or(p).to_string_lossy().into_owned();
        let named = self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut budget = MAX_HASHED_BYTES;
        let files = named
            .iter()
            .filter(|p| !self.changed.contains(*p))
            .map(|p| (shown(p), signature(p, &mut budget)))
            .collect();
        (files, self.changed.iter().map(|p| shown(p)).collect())
    }
}

/// What the file at `path` holds now: as [`crate::trust::pin_digest`]
/// gives it (the SHA-256 of its bytes, `missing`, `link:<target>`, `not a
/// file`) while `budget` bytes are left to read, else (and for a file this
/// process cannot read) `meta:` with its size, modification time and inode.
pub(crate) fn signature(path: &Path, budget: &mut u64) -> String {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && m.len() > *budget => return meta(&m),
        Ok(m) if m.is_file() => *budget -= m.len(),
        _ => {}
    }
    let digest = crate::trust::pin_digest(path);
    match std::fs::symlink_metadata(path) {
        Ok(m) if digest == "unreadable" => meta(&m),
        _ => digest,
    }
}

/// What `path` holds now, in the form `then` was recorded in (`meta:` or
/// a digest), for comparing with it.
fn signature_like(path: &Path, then: &str) -> String {
    if then.starts_with("meta:") {
        return std::fs::symlink_metadata(path).map_or_else(|_| "missing".to_owned(), |m| meta(&m));
    }
    let mut unbounded = u64::MAX;
    signature(path, &mut unbounded)
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

    #[test]
    fn a_file_changed_made_or_removed_since_the_pause_is_found_and_one_left_alone_is_not() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        for name in ["same.txt", "changed.txt", "removed.txt"] {
            std::fs::write(ws.join(name), name).unwrap();
        }
        let seen = FilesSeen::default();
        for name in ["same.txt", "changed.txt", "removed.txt", "made.txt"] {
            seen.note(&ws.join(name));
        }
        let (files, changed) = seen.at_pause(ws);
        assert_eq!(files.len(), 4);
        assert_eq!(files["made.txt"], "missing");
        assert!(changed.is_empty());
        std::fs::write(ws.join("changed.txt"), "other bytes").unwrap();
        std::fs::remove_file(ws.join("removed.txt")).unwrap();
        std::fs::write(ws.join("made.txt"), "new").unwrap();
        let resumed = FilesSeen::resumed(ws, &files, &[]);
        for name in ["changed.txt", "removed.txt", "made.txt"] {
            assert!(resumed.refusal(&ws.join(name), name).is_some(), "{name}");
        }
        assert!(resumed.refusal(&ws.join("same.txt"), "same.txt").is_none());
        // The next pause keeps them refused, and records the others again.
        let (files, changed) = resumed.at_pause(ws);
        assert_eq!(changed, ["changed.txt", "made.txt", "removed.txt"]);
        assert_eq!(files.keys().collect::<Vec<_>>(), ["same.txt"]);
        let again = FilesSeen::resumed(ws, &files, &changed);
        assert!(again.refusal(&ws.join("changed.txt"), "changed.txt").is_some());
    }

    #[test]
    fn past_the_hashing_budget_a_file_is_recorded_by_its_metadata_and_still_compared() {
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
}
