//! A hold on a run's folder: the process that will still write into it
//! after its run ended (its receipt, its journal written after the run)
//! holds it shared ([`RunFolderHold`], [`crate::Engine::hold_run_folder`]);
//! a prune takes it exclusive before it removes the folder, and leaves a
//! held folder alone ([`try_exclusive`]). The lock is `flock(2)` on the
//! folder itself: the kernel lets it go when the holder exits, however it
//! exits, so a crashed process holds nothing.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// A shared hold on one run's folder, let go when dropped. While it is
/// held, no prune removes the folder (docs/JOURNAL.md, "Retention").
#[derive(Debug)]
pub struct RunFolderHold {
    _lock: Flock<File>,
}

/// Opens the folder `dir` itself (not through a link at its last
/// component).
fn open_dir(dir: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(dir)
}

/// Holds the folder `dir` shared.
///
/// # Errors
/// The folder cannot be opened, or a prune is removing it right now
/// (`WouldBlock`).
pub(crate) fn hold_shared(dir: &Path) -> std::io::Result<RunFolderHold> {
    let lock = Flock::lock(open_dir(dir)?, FlockArg::LockSharedNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    Ok(RunFolderHold { _lock: lock })
}

/// The folder `dir` held exclusive, for removing it; `None` when another
/// process holds it (it will still write into it).
///
/// # Errors
/// The folder cannot be opened (`NotFound` when it is gone).
pub(crate) fn try_exclusive(dir: &Path) -> std::io::Result<Option<Flock<File>>> {
    match Flock::lock(open_dir(dir)?, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_folder_cannot_be_taken_for_removal_until_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let hold = hold_shared(dir.path()).unwrap();
        // Another open file description: as another process's would be.
        assert!(try_exclusive(dir.path()).unwrap().is_none(), "held: left alone");
        let second = hold_shared(dir.path()).unwrap();
        drop(hold);
        assert!(try_exclusive(dir.path()).unwrap().is_none(), "still held by the second");
        drop(second);
        let removing = try_exclusive(dir.path()).unwrap().expect("let go: it can be removed");
        assert_eq!(hold_shared(dir.path()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
        drop(removing);
        assert_eq!(try_exclusive(&dir.path().join("gone")).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }
}
