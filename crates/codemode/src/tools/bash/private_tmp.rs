//! A sandboxed call's private temporary folder (its `TMPDIR`):
//! `<root>/codemode-bash-XXXXXXXXXX`, mode 0700, made in the confinement's
//! `command_tmp_root` (the engine's temporary folder, resolved once when the
//! engine was built) and removed after the call.
//!
//! Where the folder goes is decided out of the commands' reach. Where a
//! `[sandbox] writable` folder holds the engine's `TMPDIR`, a command can
//! rewrite what that path leads to (swap a folder on its way for a link
//! into `<workspace>/.git/hooks`, from this run or another). So the root is
//! never resolved again at a call: it is opened with no link allowed on its
//! way (`openat2`, `RESOLVE_NO_SYMLINKS`) and the folder made through that
//! descriptor (`mkdirat`), and its path is handed to the launcher, which
//! binds it with no link allowed either. A root beneath a path the sandbox
//! protects, hides or covers is refused, with what to do instead.

use std::path::{Path, PathBuf};

use super::{Confinement, ToolError};

/// Tries at a fresh random name before giving up (each clash is a folder
/// of that name already there).
const NAME_TRIES: usize = 16;

/// Folders the sandbox replaces with its own (`/dev`, `/proc`) or keeps
/// read-only (`/sys`): a `TMPDIR` there would not be the folder made.
const COVERED_BY_THE_SANDBOX: [&str; 3] = ["/dev", "/proc", "/sys"];

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
        let root = confinement.command_tmp_root.as_deref().map_err(|e| ToolError::new(e.clone()))?;
        refuse_covered_root(root, confinement)?;
        let dir = open_root(root).map_err(|e| {
            let why = if e == nix::errno::Errno::ELOOP {
                "a link is now on its way (it was not when the engine started: a command may have replaced \
                 a folder of it)"
                    .to_owned()
            } else {
                e.desc().to_owned()
            };
            ToolError::new(format!(
                "cannot make the command's temporary folder in {}: {why}; start codemode with TMPDIR set to \
                 a folder commands cannot change",
                root.display()
            ))
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

/// Refuses a root the sandbox would not show as the folder made: beneath a
/// protected path (a folder pinned there would be bound writable, the
/// protection with it), a hidden one, or one it covers.
fn refuse_covered_root(root: &Path, confinement: &Confinement) -> Result<(), ToolError> {
    let protected = confinement.protected.iter().map(|p| (p.as_path(), "protects"));
    let hidden = confinement.hidden.iter().map(|p| (p.as_path(), "hides"));
    let covered = COVERED_BY_THE_SANDBOX.iter().map(|p| (Path::new(p), "replaces"));
    match protected.chain(hidden).chain(covered).find(|(p, _)| root.starts_with(p)) {
        None => Ok(()),
        Some((path, what)) => Err(ToolError::new(format!(
            "the engine's temporary folder {} lies in {}, which the bash sandbox {what}: a command's \
             private TMPDIR cannot be made there; start codemode with TMPDIR set to a folder outside it \
             (for example /tmp)",
            root.display(),
            path.display()
        ))),
    }
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

    fn confinement(root: &Path) -> Confinement {
        let mut confinement = Confinement::for_workspace(Path::new("/ws"));
        confinement.command_tmp_root = Ok(root.to_path_buf());
        confinement
    }

    #[test]
    fn the_folder_is_made_private_in_the_root_and_removed_when_dropped() {
        let root = tempfile::tempdir().unwrap();
        let tmp = PrivateTmp::make(&confinement(root.path())).unwrap();
        let path = tmp.path().to_path_buf();
        assert_eq!(path.parent(), Some(root.path()));
        assert!(path.file_name().unwrap().to_str().unwrap().starts_with("codemode-bash-"));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(path.join("left"), "x").unwrap();
        drop(tmp);
        assert!(!path.exists(), "removed with what was left in it");
    }

    #[test]
    fn a_root_reached_through_a_link_is_refused() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir(top.path().join("real")).unwrap();
        std::os::unix::fs::symlink(top.path().join("real"), top.path().join("link")).unwrap();
        let err = PrivateTmp::make(&confinement(&top.path().join("link"))).unwrap_err();
        assert!(err.to_string().contains("a link is now on its way"), "{err}");
        assert_eq!(std::fs::read_dir(top.path().join("real")).unwrap().count(), 0, "nothing made there");
    }

    #[test]
    fn a_root_in_a_protected_hidden_or_covered_path_is_refused_naming_it() {
        for (root, said) in [
            ("/ws/.git/hooks", "lies in /ws/.git, which the bash sandbox protects"),
            ("/ws/.codemode/x", "which the bash sandbox protects"),
            ("/dev/shm", "lies in /dev, which the bash sandbox replaces"),
        ] {
            let err = PrivateTmp::make(&confinement(Path::new(root))).unwrap_err();
            assert!(err.to_string().contains(said), "{root}: {err}");
            assert!(err.to_string().contains("start codemode with TMPDIR set to"), "{err}");
        }
    }
}
