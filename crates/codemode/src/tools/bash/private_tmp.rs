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
                Ok(()) => return Ok(PrivateTmp { path: root.join(name) }),
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
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = remove_left_tree(&self.path) {
            tracing::warn!(
                "the command's temporary folder {} was not removed whole: {e}",
                self.path.display()
            );
        }
    }
}

/// How old (by its last change) a folder in the root must be to be taken
/// for one a call left behind: far past the longest call (a 600 s
/// timeout and its kill grace).
const LEFT_BEHIND_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The roots this process has swept ([`sweep_once`]).
static SWEPT_ROOTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Sweeps `root` (opened as `dir`) the first time this process makes a
/// folder in it: see [`sweep_left_behind`].
fn sweep_once(dir: &std::os::fd::OwnedFd, root: &Path) {
    {
        let mut swept = SWEPT_ROOTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if swept.iter().any(|r| r == root) {
            return;
        }
        swept.push(root.to_path_buf());
    }
    let before = std::time::SystemTime::now() - LEFT_BEHIND_AFTER;
    sweep_left_behind(dir, root, before);
}

/// Removes the call folders (`codemode-bash-*`) in `root` (opened as
/// `dir`) last changed before `before`: those of calls whose engine
/// ended before it could remove them (a process killed, or one that
/// exited while a cancelled call's processes were still in their grace).
/// No call lives that long; what cannot be removed is logged and left.
fn sweep_left_behind(dir: &std::os::fd::OwnedFd, root: &Path, before: std::time::SystemTime) {
    let Ok(listing) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    for entry in listing.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(b"codemode-bash-") {
            continue;
        }
        let path = root.join(&name);
        let old =
            std::fs::symlink_metadata(&path).and_then(|m| m.modified()).is_ok_and(|changed| changed < before);
        if old && let Err(e) = remove_left_tree(&path) {
            tracing::warn!(
                "a command's temporary folder left behind, {}, was not removed whole: {e}",
                path.display()
            );
        }
    }
}

/// Removes the folder `top` and what a command left in it, however it left
/// it: folders it made unreadable (`chmod 000`) are given back to their
/// owner first, a tree deeper than a path can name is walked one folder at
/// a time through descriptors (never by a path that long), links are
/// removed, never followed, and nothing on another filesystem is entered.
/// A link put in `top`'s own place is removed alone. Runs after the call,
/// when no process of the command is left to change the tree.
///
/// # Errors
/// The first failure that left something behind.
fn remove_left_tree(top: &Path) -> std::io::Result<()> {
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
    // Each level: its name in its parent, and its folders still to remove.
    let mut levels: Vec<(OsString, Vec<OsString>)> =
        vec![(OsString::new(), empty_but_folders(&cur, device, &mut first_error))];
    while let Some((_, pending)) = levels.last_mut() {
        if let Some(name) = pending.pop() {
            match open_listable(cur.as_fd(), &name, true) {
                Ok(child) => {
                    let folders = empty_but_folders(&child, device, &mut first_error);
                    cur = child;
                    levels.push((name, folders));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            continue;
        }
        let (name, _) = levels.pop().expect("a level is there");
        if levels.is_empty() {
            break;
        }
        cur = open_listable(cur.as_fd(), OsStr::new(".."), false)?;
        if let Err(e) = nix::unistd::unlinkat(&cur, name.as_os_str(), nix::unistd::UnlinkatFlags::RemoveDir) {
            first_error.get_or_insert(e.into());
        }
    }
    drop(cur);
    std::fs::remove_dir(top).map_err(|e| first_error.unwrap_or(e))
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
/// which it returns (a folder on another filesystem is left alone);
/// records the first failure in `first_error`.
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

    #[test]
    fn folders_left_behind_a_day_ago_are_swept_and_others_kept() {
        let hidden = tempfile::tempdir().unwrap();
        let root = hidden.path().join("bash-tmp");
        let confinement = confinement(hidden.path(), &root);
        std::fs::create_dir_all(root.join("codemode-bash-old/inner")).unwrap();
        std::fs::write(root.join("codemode-bash-old/inner/f"), "x").unwrap();
        std::fs::create_dir(root.join("codemode-bash-fresh")).unwrap();
        std::fs::create_dir(root.join("other-old")).unwrap();
        let two_days_ago = std::time::SystemTime::now() - 2 * LEFT_BEHIND_AFTER;
        for name in ["codemode-bash-old", "other-old"] {
            let folder = std::fs::File::open(root.join(name)).unwrap();
            folder.set_modified(two_days_ago).unwrap();
        }
        let tmp = PrivateTmp::make(&confinement).unwrap();
        assert!(!root.join("codemode-bash-old").exists(), "a call's folder of two days ago is swept");
        assert!(root.join("codemode-bash-fresh").exists(), "a fresh one may be a running call's");
        assert!(root.join("other-old").exists(), "only call folders are swept");
        assert!(tmp.path().exists());
        // Once per root and process: a folder left behind later waits for
        // the next process.
        std::fs::create_dir(root.join("codemode-bash-later")).unwrap();
        std::fs::File::open(root.join("codemode-bash-later")).unwrap().set_modified(two_days_ago).unwrap();
        drop(PrivateTmp::make(&confinement).unwrap());
        assert!(root.join("codemode-bash-later").exists());
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
