//! A sandboxed call's private temporary folder (its `TMPDIR`):
//! `<root>/codemode-bash-XXXXXXXXXX`, mode 0700, made in the confinement's
//! `command_tmp_root` (`bash-tmp` beside the runs' folder, beneath the hidden run
//! state) and removed after the call.
//!
//! Where the folder goes is decided out of every command's reach. It used
//! to be made in the process's `TMPDIR`, and four reviews steered it: a
//! command that could write a folder or link on that path (a
//! `[sandbox] writable` folder holding it, in this run, a later run, or
//! another engine's session) put later calls' folders in
//! `<workspace>/.git/hooks` or a folder a program loads code from, or
//! renamed them for the engine's cleanup. The run state is hidden from
//! every command and no `writable` entry may name it; the root is opened
//! with no link allowed on its way (`openat2`, `RESOLVE_NO_SYMLINKS`), the
//! folder made through that descriptor (`mkdirat`), and the launcher binds
//! it back, writable, into the cover of the hidden folder.

use std::os::fd::{AsFd as _, AsRawFd as _};
use std::path::{Path, PathBuf};

use super::{Confinement, ToolError};

/// Tries at a fresh random name before giving up (each clash is a folder
/// of that name already there).
const NAME_TRIES: usize = 16;

/// The call's private temporary folder; removed (with what the command
/// left in it) when dropped.
#[derive(Debug)]
pub(super) struct PrivateTmp {
    path: PathBuf,
    /// The folder, opened and `flock`ed (exclusive) from the moment it is
    /// made until it is removed: a sweep of another engine takes it for a
    /// live call's and leaves it alone ([`sweep_left_behind`]).
    _in_use: nix::fcntl::Flock<std::fs::File>,
    /// Removed already ([`PrivateTmp::remove_if_empty`]).
    removed: bool,
}

impl PrivateTmp {
    /// Makes the folder in `confinement.command_tmp_root`.
    ///
    /// # Errors
    /// The root is not beneath a hidden folder (an engine built wrong); a
    /// link is on its way; it or the folder cannot be made.
    pub(super) fn make(confinement: &Confinement) -> Result<PrivateTmp, ToolError> {
        let root = confinement.command_tmp_root.as_path();
        require_hidden_root(root, confinement)?;
        let dir = open_or_make_root(root).map_err(|e| {
            let why = match e {
                // Made here by the engine as folders: a link was planted.
                nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => "a link is on its way".to_owned(),
                e => e.desc().to_owned(),
            };
            ToolError::new(format!("cannot make the command's temporary folder in {}: {why}", root.display()))
        })?;
        sweep_once(&dir, root);
        for _ in 0..NAME_TRIES {
            let name: String = std::iter::repeat_with(fastrand::alphanumeric).take(10).collect();
            let name = format!("codemode-bash-{name}");
            // The command's private folder: other local users cannot list it.
            let mode = nix::sys::stat::Mode::S_IRWXU;
            match nix::sys::stat::mkdirat(&dir, name.as_str(), mode) {
                Ok(()) => {
                    let in_use = lock_folder(&dir, name.as_str()).map_err(|e| {
                        // Not left behind for a sweep.
                        let _ =
                            nix::unistd::unlinkat(&dir, name.as_str(), nix::unistd::UnlinkatFlags::RemoveDir);
                        ToolError::new(format!(
                            "cannot lock the command's temporary folder in {}: {}",
                            root.display(),
                            e.desc()
                        ))
                    })?;
                    return Ok(PrivateTmp { path: root.join(name), _in_use: in_use, removed: false });
                }
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => {
                    return Err(ToolError::new(format!(
                        "cannot make the command's temporary folder in {}: {}",
                        root.display(),
                        e.desc()
                    )));
                }
            }
        }
        Err(ToolError::new(format!(
            "cannot make the command's temporary folder in {}: {NAME_TRIES} fresh names were all taken",
            root.display()
        )))
    }

    /// The folder, by the root's real path and its own name.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the folder now if the command left nothing in it (one
    /// `rmdir`, the common case); whether it did. A folder with something
    /// in it is removed whole when dropped.
    pub(super) fn remove_if_empty(&mut self) -> bool {
        self.removed = std::fs::remove_dir(&self.path).is_ok();
        self.removed
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if let Err(e) = remove_left_tree(&self.path) {
            tracing::warn!(
                "the command's temporary folder {} was not removed whole: {e}",
                self.path.display()
            );
        }
    }
}

/// How long ago a folder in the root must have last changed (its
/// `ctime`, which no process can set back) to be taken for one a call
/// left behind: far past the longest call (a 600 s timeout and its kill
/// grace). A folder still locked is a live call's whatever its age.
const LEFT_BEHIND_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The roots this process has swept ([`sweep_once`]).
static SWEPT_ROOTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// The folder `name` in `dir`, just made, opened (never through a link)
/// and locked exclusively (waiting for the lock: no sweep takes a fresh
/// folder's, see [`sweep_left_behind`]).
///
/// # Errors
/// The `openat` or `flock` error.
fn lock_folder(
    dir: &std::os::fd::OwnedFd,
    name: &(impl nix::NixPath + ?Sized),
) -> nix::Result<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{FlockArg, OFlag};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let folder = std::fs::File::from(nix::fcntl::openat(dir, name, flags, nix::sys::stat::Mode::empty())?);
    nix::fcntl::Flock::lock(folder, FlockArg::LockExclusive).map_err(|(_, e)| e)
}

/// Sweeps `root` (opened as `dir`), on a thread of its own so that no
/// call waits for it, the first time this process makes a folder in it:
/// see [`sweep_left_behind`].
fn sweep_once(dir: &std::os::fd::OwnedFd, root: &Path) {
    {
        let mut swept = SWEPT_ROOTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if swept.iter().any(|r| r == root) {
            return;
        }
        swept.push(root.to_path_buf());
    }
    let Ok(dir) = dir.try_clone() else { return };
    let root = root.to_path_buf();
    let before = std::time::SystemTime::now() - LEFT_BEHIND_AFTER;
    let sweep = move || sweep_left_behind(&dir, &root, before);
    if let Err(e) = std::thread::Builder::new().name("codemode-tmp-sweep".into()).spawn(sweep) {
        tracing::debug!("the sweep of commands' temporary folders did not start: {e}");
    }
}

/// Removes the call folders (`codemode-bash-*`) in `root` (opened as
/// `dir`) that no engine holds (each call's folder is locked from the
/// moment it is made until it is removed) and that last changed
/// (`ctime`) before `before`: those of calls whose engine ended before
/// it could remove them (a process killed, or one that exited while a
/// cancelled call's processes were still in their grace). The age is the
/// `ctime`, not the `mtime` a command may set back (`touch -d`), and the
/// lock, not the age, tells a live call's folder: a review had a running
/// command date its folder two days back and another engine's sweep
/// emptied it while the command rearranged it. What cannot be removed is
/// logged and left.
fn sweep_left_behind(dir: &std::os::fd::OwnedFd, root: &Path, before: std::time::SystemTime) {
    let Ok(listing) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    let before = before.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    for entry in listing.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(b"codemode-bash-") {
            continue;
        }
        // A fresh folder is passed by untouched (its engine may be about
        // to lock it). An old one is given back to its owner (a command
        // may have left it `chmod 000`, which would keep an engine not
        // running as root from opening it to lock it), locked, so that a
        // live call's (older than any call lives, should the clock have
        // jumped) is left alone, and held while it is removed.
        if !nix::sys::stat::fstatat(dir, name.as_os_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_ctime < before)
        {
            continue;
        }
        let path = root.join(&name);
        let locked = open_listable(dir.as_fd(), &name, true).and_then(|folder| {
            let how = nix::fcntl::FlockArg::LockExclusiveNonblock;
            nix::fcntl::Flock::lock(std::fs::File::from(folder), how).map_err(|(_, e)| e.into())
        });
        match locked {
            Ok(_held) => {
                if let Err(e) = remove_left_tree(&path) {
                    tracing::warn!(
                        "a command's temporary folder left behind, {}, was not removed whole: {e}",
                        path.display()
                    );
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                tracing::debug!("the temporary folder {} is a live call's (locked): kept", path.display());
            }
            Err(e) => {
                tracing::warn!(
                    "a command's temporary folder left behind, {}, was not removed: {e}",
                    path.display()
                );
            }
        }
    }
}

/// Removes the folder `top` and what a command left in it, however it left
/// it: folders it made unreadable (`chmod 000`) are given back to their
/// owner first, a tree deeper than a path can name is walked one folder at
/// a time through descriptors (never by a path that long), links are
/// removed, never followed, and nothing on another filesystem is entered.
/// A link put in `top`'s own place is removed alone. Runs after the call,
/// when no process of the command is left to change the tree; should one
/// be (a cancelled call in its grace period), each step back up (`..`)
/// must land on the folder it came down from, or the walk stops: a folder
/// moved up the tree mid-walk would otherwise take every later `..` above
/// `top`, and the names still to remove would be looked up there (a
/// review had the walk empty a folder beside the root this way).
///
/// # Errors
/// The first failure that left something behind.
fn remove_left_tree(top: &Path) -> std::io::Result<()> {
    remove_left_tree_watched(top, &mut |_| {})
}

/// [`remove_left_tree`], calling `entered` with the depth of each folder
/// below `top` once it is emptied of all but its folders (for the tests
/// to change the tree at a chosen step).
fn remove_left_tree_watched(top: &Path, entered: &mut dyn FnMut(usize)) -> std::io::Result<()> {
    use std::ffi::{OsStr, OsString};
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let meta = match std::fs::symlink_metadata(top) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    if !meta.is_dir() {
        return std::fs::remove_file(top);
    }
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o700))?;
    let device = meta.dev();
    let mut first_error: Option<std::io::Error> = None;
    let mut cur = open_listable(nix::fcntl::AT_FDCWD, top.as_os_str(), false)?;
    // Each level: its name in its parent, its folders still to remove, and
    // which folder it is (device and inode).
    let mut levels: Vec<(OsString, Vec<OsString>, (u64, u64))> =
        vec![(OsString::new(), empty_but_folders(&cur, device, &mut first_error), identity(&cur)?)];
    while let Some((_, pending, _)) = levels.last_mut() {
        if let Some(name) = pending.pop() {
            match open_listable(cur.as_fd(), &name, true).and_then(|child| Ok((identity(&child)?, child))) {
                Ok((id, child)) => {
                    let folders = empty_but_folders(&child, device, &mut first_error);
                    cur = child;
                    levels.push((name, folders, id));
                    entered(levels.len() - 1);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            continue;
        }
        let (name, _, _) = levels.pop().expect("a level is there");
        let Some((_, _, parent)) = levels.last() else { break };
        cur = open_listable(cur.as_fd(), OsStr::new(".."), false)?;
        if identity(&cur)? != *parent {
            return Err(std::io::Error::other(
                "the folder was rearranged while it was removed (a folder of it was moved elsewhere in it): what \
                 is left stays",
            ));
        }
        if let Err(e) = nix::unistd::unlinkat(&cur, name.as_os_str(), nix::unistd::UnlinkatFlags::RemoveDir) {
            first_error.get_or_insert(e.into());
        }
    }
    drop(cur);
    std::fs::remove_dir(top).map_err(|e| first_error.unwrap_or(e))
}

/// The device and inode of the folder `fd` is open on.
fn identity(fd: &std::os::fd::OwnedFd) -> std::io::Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// Opens the folder `name` beneath `dir` for listing, with no link
/// followed; with `own`, first gives it back to its owner (mode 0700:
/// the command may have taken its own rights away). The folder is looked
/// up once, as a folder and never through a link (`O_PATH`, `O_NOFOLLOW`,
/// `O_DIRECTORY`), and changed and opened through that descriptor only: a
/// command still running (a call cancelled during its grace period) that
/// swaps the name for a link gets nothing outside changed.
fn open_listable(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    own: bool,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    let found = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let folder = nix::fcntl::openat(dir, name, found, Mode::empty())?;
    if own {
        // `chmod` of the descriptor's own object (an `O_PATH` descriptor
        // takes no `fchmod`): the folder found, whatever `name` is now.
        let own_path = format!("/proc/self/fd/{}", folder.as_raw_fd());
        let _ = std::fs::set_permissions(own_path, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    }
    let listable = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::openat(&folder, ".", listable, Mode::empty())?)
}

/// Removes every entry of the folder `dir` but its folders on `device`,
/// which it returns in reverse name order, to be taken from the end (a
/// folder on another filesystem is left alone); records the first failure
/// in `first_error`.
fn empty_but_folders(
    dir: &std::os::fd::OwnedFd,
    device: u64,
    first_error: &mut Option<std::io::Error>,
) -> Vec<std::ffi::OsString> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::SFlag;
    let listing = match std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) {
        Ok(listing) => listing,
        Err(e) => {
            first_error.get_or_insert(e);
            return Vec::new();
        }
    };
    let mut folders = Vec::new();
    for entry in listing {
        let name = match entry {
            Ok(entry) => entry.file_name(),
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let kind = nix::sys::stat::fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW);
        let removed = match kind {
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
                if st.st_dev == device {
                    folders.push(name);
                }
                Ok(())
            }
            Ok(_) => nix::unistd::unlinkat(dir, name.as_os_str(), nix::unistd::UnlinkatFlags::NoRemoveDir),
            Err(e) => Err(e),
        };
        if let Err(e) = removed {
            first_error.get_or_insert(e.into());
        }
    }
    // In name order, the first taken first: the walk is the same each time.
    folders.sort_unstable_by(|a, b| b.cmp(a));
    folders
}

/// Requires the root beneath a hidden folder of `confinement`: the
/// launcher binds the call's folder back only there, and only there can
/// no command change what the root's path leads to.
fn require_hidden_root(root: &Path, confinement: &Confinement) -> Result<(), ToolError> {
    if confinement.hidden.iter().any(|h| root.starts_with(h) && root != h) {
        return Ok(());
    }
    Err(ToolError::new(format!(
        "the folder of commands' temporary folders {} is not beneath the hidden run state; this is a bug in \
         how the engine was built (Confinement::command_tmp_root)",
        root.display()
    )))
}

/// `root` as a descriptor, made (mode 0700) when missing: its parent (the
/// runs' folder's, which the engine makes when it is built) first when
/// missing too; then `root` itself, made and opened through the parent
/// opened with no link on its way, and never as a link (`ENOTDIR` for one
/// planted in its place, which is never followed).
fn open_or_make_root(root: &Path) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return Err(nix::errno::Errno::EINVAL);
    };
    let parent_fd = match open_root(parent) {
        Err(nix::errno::Errno::ENOENT) => {
            std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                .create(parent)
                .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            open_root(parent)?
        }
        other => other?,
    };
    match nix::sys::stat::mkdirat(&parent_fd, name, nix::sys::stat::Mode::S_IRWXU) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(e),
    }
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    nix::fcntl::openat(&parent_fd, name, flags, nix::sys::stat::Mode::empty())
}

/// `root` as a descriptor, with no link on its way.
#[cfg(target_os = "linux")]
fn open_root(root: &Path) -> nix::Result<std::os::fd::OwnedFd> {
    codemode_sandbox::open_folder_without_links(root)
}

/// `root` as a descriptor (no `openat2` here: the last component only is
/// checked; the sandbox is Linux's anyway).
#[cfg(not(target_os = "linux"))]
fn open_root(root: &Path) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, open};
    open(
        root,
        OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
        nix::sys::stat::Mode::empty(),
    )
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A confinement whose hidden folder is `hidden`, the root beneath it.
    fn confinement(hidden: &Path, root: &Path) -> Confinement {
        let mut confinement = Confinement::for_workspace(Path::new("/ws"));
        confinement.hidden = vec![hidden.to_path_buf()];
        confinement.command_tmp_root = root.to_path_buf();
        confinement
    }

    #[test]
    fn the_folder_is_made_private_in_the_root_and_removed_when_dropped() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        let tmp = PrivateTmp::make(&confinement(hidden.path(), &root)).unwrap();
        let path = tmp.path().to_path_buf();
        assert_eq!(path.parent(), Some(root.as_path()));
        assert!(path.file_name().unwrap().to_str().unwrap().starts_with("codemode-bash-"));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&root).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(path.join("left"), "x").unwrap();
        drop(tmp);
        assert!(!path.exists(), "removed with what was left in it");
    }

    /// `root` opened as the sweep takes it.
    fn opened(root: &Path) -> std::os::fd::OwnedFd {
        open_root(root).unwrap()
    }

    #[test]
    fn only_unlocked_call_folders_last_changed_before_the_line_are_swept() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        let confinement = confinement(hidden.path(), &root);
        // A live call's folder (locked by its PrivateTmp), one left behind,
        // and a folder of another name.
        let live = PrivateTmp::make(&confinement).unwrap();
        std::fs::create_dir_all(root.join("codemode-bash-left/inner")).unwrap();
        std::fs::write(root.join("codemode-bash-left/inner/f"), "x").unwrap();
        std::fs::create_dir(root.join("other")).unwrap();
        // Every folder here changed before a line a minute from now.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        sweep_left_behind(&opened(&root), &root, later);
        assert!(!root.join("codemode-bash-left").exists(), "left behind: swept");
        assert!(live.path().exists(), "locked: a live call's, whatever its age");
        assert!(root.join("other").exists(), "only call folders are swept");
        drop(live);
    }

    /// Runs `f` on this thread without `CAP_DAC_OVERRIDE` and
    /// `CAP_DAC_READ_SEARCH` in its effective set (capabilities are per
    /// thread; `capset` of the raw system call), as an engine not running
    /// as root meets the files; nothing changes when the thread has none.
    #[allow(unsafe_code)]
    fn as_an_ordinary_user<T>(f: impl FnOnce() -> T) -> T {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        const DAC: u32 = (1 << 1) | (1 << 2);
        let mut header = Header { version: VERSION_3, pid: 0 };
        let mut data = [Data::default(); 2];
        // SAFETY: capget writes one header and two data records, which
        // outlive the call.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) }, 0);
        let saved = data;
        data[0].effective &= !DAC;
        // SAFETY: capset reads the header and two data records.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) }, 0);
        let out = f();
        // SAFETY: as above; the saved effective set is within the permitted.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capset, &mut header, saved.as_ptr()) }, 0);
        out
    }

    #[test]
    fn a_folder_left_unreadable_by_its_command_is_swept_by_an_ordinary_user() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        std::fs::create_dir_all(root.join("codemode-bash-shut/d")).unwrap();
        std::fs::write(root.join("codemode-bash-shut/d/f"), "x").unwrap();
        // `chmod 000 "$TMPDIR"` before its call was cut off.
        std::fs::set_permissions(root.join("codemode-bash-shut"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        as_an_ordinary_user(|| sweep_left_behind(&opened(&root), &root, later));
        assert!(!root.join("codemode-bash-shut").exists(), "swept");
    }

    #[test]
    fn a_folder_dated_back_by_its_command_is_not_taken_for_an_old_one() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        std::fs::create_dir_all(root.join("codemode-bash-dated")).unwrap();
        // `touch -d '2 days ago' "$TMPDIR"`: the mtime goes back, the
        // ctime (now) does not.
        let two_days_ago = std::time::SystemTime::now() - 2 * LEFT_BEHIND_AFTER;
        std::fs::File::open(root.join("codemode-bash-dated")).unwrap().set_modified(two_days_ago).unwrap();
        let a_day_ago = std::time::SystemTime::now() - LEFT_BEHIND_AFTER;
        sweep_left_behind(&opened(&root), &root, a_day_ago);
        assert!(root.join("codemode-bash-dated").exists());
    }

    #[test]
    fn a_folder_moved_up_the_tree_mid_removal_stops_the_walk_before_it_leaves() {
        // bash-tmp/codemode-bash-x/{a/b/c, a/keep}, and `keep` beside the
        // call's folder too: the command moves `c` up to the top while the
        // walk empties it. Without the check on `..`, the walk climbed two
        // levels too high and removed bash-tmp's `keep`.
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        let top = root.join("codemode-bash-x");
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        std::fs::create_dir_all(top.join("a/keep")).unwrap();
        std::fs::create_dir_all(root.join("keep")).unwrap();
        std::fs::write(root.join("keep/precious"), "p").unwrap();
        let mut moved = false;
        let result = remove_left_tree_watched(&top, &mut |depth| {
            if depth == 3 && !moved {
                std::fs::rename(top.join("a/b/c"), top.join("c")).unwrap();
                moved = true;
            }
        });
        assert!(moved, "the walk reached c");
        let e = result.unwrap_err();
        assert!(e.to_string().contains("rearranged"), "{e}");
        assert_eq!(std::fs::read_to_string(root.join("keep/precious")).unwrap(), "p");
        // Nothing left unremovable: a later removal finishes the job.
        remove_left_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(root.join("keep/precious").exists());
    }

    #[test]
    fn what_a_command_left_unreadable_or_too_deep_for_a_path_is_removed() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        let tmp = PrivateTmp::make(&confinement(hidden.path(), &root)).unwrap();
        let path = tmp.path().to_path_buf();
        // A folder taken away from its owner, with a file inside.
        std::fs::create_dir_all(path.join("d/e")).unwrap();
        std::fs::write(path.join("d/e/f"), "x").unwrap();
        std::fs::set_permissions(path.join("d"), std::fs::Permissions::from_mode(0o000)).unwrap();
        // A tree deeper than a path can name (PATH_MAX is 4096 bytes).
        let mut deep = std::fs::File::open(&path).unwrap();
        for _ in 0..3000 {
            nix::sys::stat::mkdirat(&deep, "aa", nix::sys::stat::Mode::S_IRWXU).unwrap();
            let flags = nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY;
            deep = std::fs::File::from(
                nix::fcntl::openat(&deep, "aa", flags, nix::sys::stat::Mode::empty()).unwrap(),
            );
        }
        // A link out, which must not be followed.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "k").unwrap();
        std::os::unix::fs::symlink(outside.path(), path.join("out")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        drop(tmp);
        assert!(!path.exists(), "removed whole");
        assert!(outside.path().join("keep").exists(), "nothing followed out");
    }

    /// A name swapped for a link after it was listed as a folder (a call
    /// cancelled while its command still ran): the link's target keeps
    /// its mode, and nothing is opened through it.
    #[test]
    fn a_folder_swapped_for_a_link_is_neither_changed_nor_entered() {
        let top = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(outside.path(), top.path().join("x")).unwrap();
        let dir = std::fs::File::open(top.path()).unwrap();
        assert!(open_listable(dir.as_fd(), std::ffi::OsStr::new("x"), true).is_err());
        let mode = std::fs::metadata(outside.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "the link's target was changed");
    }

    #[test]
    fn a_root_reached_through_a_link_is_refused() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir(top.path().join("real")).unwrap();
        std::os::unix::fs::symlink(top.path().join("real"), top.path().join("link")).unwrap();
        let err = PrivateTmp::make(&confinement(top.path(), &top.path().join("link"))).unwrap_err();
        assert!(err.to_string().contains("a link is on its way"), "{err}");
        assert_eq!(std::fs::read_dir(top.path().join("real")).unwrap().count(), 0, "nothing made there");
    }

    #[test]
    fn a_link_planted_in_the_root_s_place_is_refused_not_followed() {
        let hidden = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(hidden.path().join("runs")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), hidden.path().join("bash-tmp")).unwrap();
        let root = hidden.path().join("bash-tmp");
        let err = PrivateTmp::make(&confinement(hidden.path(), &root)).unwrap_err();
        assert!(err.to_string().contains("a link is on its way"), "{err}");
        assert_eq!(
            std::fs::read_dir(elsewhere.path()).unwrap().count(),
            0,
            "nothing made at the link's target"
        );
    }

    #[test]
    fn a_root_outside_the_hidden_run_state_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let err = PrivateTmp::make(&confinement(top.path(), elsewhere.path())).unwrap_err();
        assert!(err.to_string().contains("is not beneath the hidden run state"), "{err}");
    }

    #[test]
    fn the_confinements_root_is_beneath_its_hidden_run_state() {
        let confinement = Confinement::for_workspace(Path::new("/ws"));
        require_hidden_root(&confinement.command_tmp_root, &confinement).unwrap();
    }
}
