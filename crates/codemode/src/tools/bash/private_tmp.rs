//! A sandboxed call's private temporary folder (its `TMPDIR`):
//! `<root>/codemode-bash-XXXXXXXXXX`, mode 0700, made in the confinement's
//! `command_tmp_root` (`<spill_root>/.bash-tmp`, beneath the hidden run
//! state) and removed after the call.
//!
//! Where the folder goes is decided out of every command's reach. It used
//! to be made in the process's `TMPDIR`, and three reviews steered it: a
//! command that could write a folder or link on that path (a
//! `[sandbox] writable` folder holding it, in this run, a later run, or
//! another engine's session) put later calls' folders in
//! `<workspace>/.git/hooks` or a folder a program loads code from, or
//! renamed them for the engine's cleanup. The run state is hidden from
//! every command and no `writable` entry may name it; the root is opened
//! with no link allowed on its way (`openat2`, `RESOLVE_NO_SYMLINKS`), the
//! folder made through that descriptor (`mkdirat`), and the launcher binds
//! it back, writable, into the cover of the hidden folder.

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
    /// The root lies beneath a protected, hidden or covered path (the
    /// message names it and says to start codemode with `TMPDIR`
    /// elsewhere); the root is now reached through a link, or is gone; the
    /// folder cannot be made.
    pub(super) fn make(confinement: &Confinement) -> Result<PrivateTmp, ToolError> {
        let root = confinement.command_tmp_root.as_path();
        require_hidden_root(root, confinement)?;
        // The run state's own folder: made by the engine, private.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(root)
            .map_err(|e| {
                ToolError::new(format!(
                    "cannot make the folder of commands' temporary folders {}: {e}",
                    root.display()
                ))
            })?;
        let dir = open_root(root).map_err(|e| {
            let why = if e == nix::errno::Errno::ELOOP {
                "a link is now on its way (it was not when the engine started: a command may have replaced \
                 a folder of it)"
                    .to_owned()
            } else {
                e.desc().to_owned()
            };
            ToolError::new(format!("cannot make the command's temporary folder in {}: {why}", root.display()))
        })?;
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
        // A link put in its place is removed, never followed.
        let _ = std::fs::remove_dir_all(&self.path);
    }
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

/// `root` as a descriptor, with no link on its way.
#[cfg(target_os = "linux")]
fn open_root(root: &Path) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY;
    openat2(nix::fcntl::AT_FDCWD, root, OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_NO_SYMLINKS))
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
        let root = hidden.path().join("runs/.bash-tmp");
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
    fn a_root_reached_through_a_link_is_refused() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir(top.path().join("real")).unwrap();
        std::os::unix::fs::symlink(top.path().join("real"), top.path().join("link")).unwrap();
        let err = PrivateTmp::make(&confinement(top.path(), &top.path().join("link"))).unwrap_err();
        assert!(err.to_string().contains("a link is now on its way"), "{err}");
        assert_eq!(std::fs::read_dir(top.path().join("real")).unwrap().count(), 0, "nothing made there");
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
