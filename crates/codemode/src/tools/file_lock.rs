//! One writer at a time per file: `write` and `edit` hold a [`FileLock`]
//! from before they read the file (or its status) until after their
//! atomic rename, so a read-modify-write never works from content another
//! writer is about to replace, and every call reported done was applied.
//!
//! Two locks are taken, in this order:
//! - **In this process**, a lock per canonical path (the file's path with
//!   symlinks resolved, as [`super::workspace::open_for_write`] gives it).
//! - **Across processes**, an advisory `flock(2)` (through
//!   [`std::fs::File::try_lock`]) on the file itself. An atomic write
//!   renames a new inode over the name, so a lock on the old inode says
//!   nothing once it is replaced: after acquiring it, the name is looked up
//!   again and, when it now names another inode, the lock is dropped and
//!   taken again on the new one. A file that does not exist yet (a `write`
//!   creating it) is locked through its folder instead (folders are not
//!   replaced by a write), and the name is looked up again the same way.
//!   When the file cannot be opened for reading (no read permission), the
//!   folder is locked. No lock file is created anywhere.
//!
//! Only codemode's own `write` and `edit` take these locks: a `bash`
//! command, an editor or another program writing the file is not held back
//! (`flock` is advisory). A file system without `flock` support (some
//! network file systems) gets the in-process lock only.
//!
//! Waiting for either lock gives up when the call is abandoned (its
//! per-call timeout, its run's deadline or cancellation; see
//! [`super::blocking_cancellable`]): the flag is looked at every few
//! milliseconds.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, LazyLock, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, fstat, fstatat};

use super::workspace;
use crate::catalog::ToolError;

/// Longest sleep between two attempts at a lock another process holds,
/// and between two looks at the abandon flag while waiting in-process.
const MAX_POLL: Duration = Duration::from_millis(20);

/// The canonical paths some call of this process holds, with the condition
/// waiters sleep on.
static HELD: LazyLock<(Mutex<HashSet<PathBuf>>, Condvar)> =
    LazyLock::new(|| (Mutex::new(HashSet::new()), Condvar::new()));

/// Both locks on one file, released when dropped.
pub(crate) struct FileLock {
    /// The canonical path held in this process.
    path: PathBuf,
    /// The file (or folder) `flock`ed across processes; `None` when the file
    /// system refused `flock`.
    locked: Option<std::fs::File>,
    /// The file's status once locked: the inode the name names now, or
    /// `None` when no file has the name (locked through the folder).
    pub(crate) existing: Option<FileStat>,
}

impl FileLock {
    /// Locks the file `name` of the open folder `dir`, whose canonical path
    /// is `real`: first in this process, then across processes.
    ///
    /// # Errors
    /// [`super::abandoned`] when `cancelled` is set while waiting (nothing
    /// is held then); a message when the name cannot be looked up.
    pub(crate) fn acquire(
        dir: &OwnedFd,
        name: &OsStr,
        real: &Path,
        cancelled: &AtomicBool,
    ) -> Result<FileLock, ToolError> {
        hold_path(real, cancelled)?;
        // From here on, dropping `lock` releases the path.
        let mut lock = FileLock { path: real.to_path_buf(), locked: None, existing: None };
        loop {
            if super::cancelled(cancelled) {
                return Err(super::abandoned());
            }
            let opened = openat(
                dir.as_fd(),
                name,
                workspace::READ | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            );
            // The file itself when it opens; otherwise its folder (a
            // duplicate fd shares the folder's lock, released explicitly).
            let (target, file, missing) = match opened {
                Ok(fd) => {
                    let st = fstat(fd.as_fd()).map_err(|e| look_error(real, e))?;
                    (std::fs::File::from(fd), Some(st), false)
                }
                Err(e) => {
                    let folder = dir.try_clone().map_err(|e| look_error(real, errno(&e)))?;
                    (std::fs::File::from(folder), None, e == Errno::ENOENT)
                }
            };
            if !wait_flock(&target, cancelled)? {
                // No `flock` here: the in-process lock is all there is.
                lock.existing = lookup(dir, name, real)?;
                return Ok(lock);
            }
            // The name may have moved to another inode (or a missing file
            // appeared) while this call waited: then lock again.
            let now = lookup(dir, name, real)?;
            let stable = match &file {
                Some(locked) => {
                    now.as_ref().is_some_and(|n| n.st_dev == locked.st_dev && n.st_ino == locked.st_ino)
                }
                // A file that would not open stays locked through its folder.
                None => !missing || now.is_none(),
            };
            if stable {
                lock.locked = Some(target);
                lock.existing = now;
                return Ok(lock);
            }
            let _ = target.unlock();
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if let Some(file) = self.locked.take() {
            // Explicitly: a folder's lock is shared with the caller's fd of
            // the same folder, which may outlive this one.
            let _ = file.unlock();
        }
        let (held, freed) = &*HELD;
        held.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.path);
        freed.notify_all();
    }
}

/// Marks `path` held by this call, waiting while another call of this
/// process holds it.
///
/// # Errors
/// [`super::abandoned`] when `cancelled` is set while waiting.
fn hold_path(path: &Path, cancelled: &AtomicBool) -> Result<(), ToolError> {
    let (held, freed) = &*HELD;
    let mut set = held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while set.contains(path) {
        if super::cancelled(cancelled) {
            return Err(super::abandoned());
        }
        set = freed.wait_timeout(set, MAX_POLL).unwrap_or_else(std::sync::PoisonError::into_inner).0;
    }
    set.insert(path.to_path_buf());
    Ok(())
}

/// Takes the exclusive `flock` on `file`, trying again with growing pauses
/// while another process holds it. `Ok(false)` when the file system does
/// not support `flock` (nothing is held then).
///
/// # Errors
/// [`super::abandoned`] when `cancelled` is set while waiting.
fn wait_flock(file: &std::fs::File, cancelled: &AtomicBool) -> Result<bool, ToolError> {
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(_)) => return Ok(false),
        }
        if super::cancelled(cancelled) {
            return Err(super::abandoned());
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// The status of what `name` names in `dir` (not following a symlink), or
/// `None` when nothing does.
fn lookup(dir: &OwnedFd, name: &OsStr, real: &Path) -> Result<Option<FileStat>, ToolError> {
    match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(look_error(real, e)),
    }
}

/// The errno of an I/O error, for [`look_error`].
fn errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(0))
}

/// The error of a failed look at the file being locked.
fn look_error(real: &Path, e: Errno) -> ToolError {
    ToolError::new(format!("cannot lock `{}` for writing: {}", real.display(), workspace::io(e)))
}

#[cfg(test)]
mod tests {

    use super::*;

    fn open_dir(path: &Path) -> OwnedFd {
        openat(nix::fcntl::AT_FDCWD, path, workspace::FOLDER | OFlag::O_CLOEXEC, Mode::empty()).unwrap()
    }

    #[test]
    fn a_second_writer_waits_and_gives_up_when_abandoned() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("f.txt");
        std::fs::write(&real, "x").unwrap();
        let fd = open_dir(dir.path());
        let going = AtomicBool::new(false);
        let first = FileLock::acquire(&fd, OsStr::new("f.txt"), &real, &going).unwrap();
        assert!(first.existing.is_some());
        // Held in this process: a second writer waits; abandoned, it stops.
        let abandoned = AtomicBool::new(true);
        let e = FileLock::acquire(&fd, OsStr::new("f.txt"), &real, &abandoned).err().unwrap();
        assert_eq!(e.message, super::super::ABANDONED);
        // Released: the path is free again, and a new inode renamed over
        // the name is the one locked.
        drop(first);
        std::fs::write(dir.path().join("new"), "y").unwrap();
        std::fs::rename(dir.path().join("new"), &real).unwrap();
        let second = FileLock::acquire(&fd, OsStr::new("f.txt"), &real, &going).unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&real).unwrap());
        assert_eq!(second.existing.unwrap().st_ino, ino);
        // Another open file description (as another process has) cannot
        // take the file's lock meanwhile.
        let other = std::fs::File::open(&real).unwrap();
        assert!(matches!(other.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        drop(second);
        other.try_lock().unwrap();
        // A missing file is locked through its folder.
        let missing = dir.path().join("new.txt");
        let third = FileLock::acquire(&fd, OsStr::new("new.txt"), &missing, &going).unwrap();
        assert!(third.existing.is_none());
        let folder = std::fs::File::open(dir.path()).unwrap();
        assert!(matches!(folder.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        drop(third);
        folder.try_lock().unwrap();
    }
}
