//! The workspace boundary: every path a file tool touches must stay inside
//! the workspace root, after `..` and symlinks are resolved, and is opened
//! beneath it, so that no race (a folder swapped for a symlink during a
//! call) can lead an open outside.
//!
//! A path is first checked as text (`..` and absolute paths), so refusals do
//! not tell which paths exist outside. It is then opened relative to a
//! directory fd of the root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)` (Linux 5.6+): the kernel refuses, during the
//! lookup itself, every step that would leave the root. `RESOLVE_BENEATH`
//! also refuses absolute symlinks, even those pointing inside; those, and
//! systems without `openat2` (older kernels, seccomp filters answering
//! `ENOSYS`), take [`walk_beneath`]: a walk one component at a time with
//! `O_NOFOLLOW` that reads each symlink and follows it only inside. What a
//! tool then reads or changes, it reads or changes through the fd it got
//! (or, for writes, through the fd of the parent folder), never again by
//! path.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};

use crate::catalog::{ToolContext, ToolError};
use crate::sandbox::Confinement;

/// Symlinks followed in one lookup before it fails with `ELOOP` (Linux's
/// own limit).
const MAX_LINKS: usize = 40;

/// Flags that open a file or folder only to look at it or to use it as a
/// directory fd: `O_PATH` where it exists (no read permission needed).
#[cfg(target_os = "linux")]
pub(crate) const LOOK: OFlag = OFlag::O_PATH;
#[cfg(not(target_os = "linux"))]
pub(crate) const LOOK: OFlag = OFlag::O_RDONLY;

/// Flags that open a regular file for reading without blocking on a FIFO
/// or taking a terminal (the caller refuses what is not a regular file).
pub(crate) const READ: OFlag = OFlag::O_RDONLY.union(OFlag::O_NONBLOCK).union(OFlag::O_NOCTTY);

/// Flags that open a folder to create, rename and sync entries in it.
pub(crate) const FOLDER: OFlag = OFlag::O_RDONLY.union(OFlag::O_DIRECTORY);

/// The workspace root, open: every lookup of a file tool starts from it.
pub(crate) struct Root {
    /// A directory fd of the root.
    fd: OwnedFd,
    /// The root's canonical path.
    path: PathBuf,
}

/// A file or folder opened beneath the root.
pub(crate) struct Opened {
    /// The open file or folder.
    pub(crate) fd: OwnedFd,
    /// Its absolute path as resolved (symlinks followed), inside the root.
    pub(crate) real: PathBuf,
}

impl Root {
    /// Opens the workspace root `path` (absolute and canonical).
    ///
    /// # Errors
    /// The root cannot be opened (it was removed, or is not a folder).
    pub(crate) fn open(path: &Path) -> Result<Root, ToolError> {
        let fd =
            openat(nix::fcntl::AT_FDCWD, path, LOOK | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| {
                ToolError::new(format!("cannot open the workspace `{}`: {}", path.display(), io(e)))
            })?;
        Ok(Root { fd, path: path.to_path_buf() })
    }

    /// The root's canonical path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `rel` (relative to the root, as [`beneath_rel`] gives it) with
    /// `flags`, following symlinks only while they stay beneath the root.
    ///
    /// # Errors
    /// `EXDEV` when the lookup would leave the root; otherwise what the open
    /// failed with (`ENOENT`, `ENOTDIR`, `ELOOP`, `EACCES`...).
    pub(crate) fn open_beneath(&self, rel: &Path, flags: OFlag) -> nix::Result<Opened> {
        if let Some(done) = self.openat2(rel, flags) {
            return done;
        }
        walk_beneath(self.fd.as_fd(), &self.path, rel, flags)
    }

    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; `None` when the
    /// walk must decide: `openat2` is missing, the path holds an absolute
    /// symlink (which `RESOLVE_BENEATH` refuses even when it points inside),
    /// or the resolved path cannot be read back.
    #[cfg(target_os = "linux")]
    fn openat2(&self, rel: &Path, flags: OFlag) -> Option<nix::Result<Opened>> {
        use std::sync::atomic::{AtomicBool, Ordering};

        use nix::fcntl::{OpenHow, ResolveFlag};

        /// Set once `openat2` answered `ENOSYS` (kernel before 5.6, or a
        /// seccomp filter): later lookups go straight to the walk.
        static MISSING: AtomicBool = AtomicBool::new(false);
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let name = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        // EAGAIN: a rename elsewhere raced a `..` of the lookup; the kernel
        // asks to retry. After a few, the walk decides.
        for _ in 0..4 {
            let how = OpenHow::new()
                .flags(flags | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            match nix::fcntl::openat2(self.fd.as_fd(), name, how) {
                Ok(fd) => {
                    let real = fd_path(fd.as_fd())?;
                    // Moved out after the lookup (or seen from another
                    // mount namespace): refused all the same.
                    if !real.starts_with(&self.path) {
                        return Some(Err(Errno::EXDEV));
                    }
                    return Some(Ok(Opened { fd, real }));
                }
                Err(Errno::EAGAIN) => continue,
                Err(Errno::ENOSYS) => {
                    MISSING.store(true, Ordering::Relaxed);
                    return None;
                }
                // EXDEV: an escape, or an absolute symlink the walk may
                // follow inside; EPERM: a seccomp filter may answer so.
                Err(Errno::EXDEV | Errno::EPERM) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }

    #[cfg(not(target_os = "linux"))]
    fn openat2(&self, _rel: &Path, _flags: OFlag) -> Option<nix::Result<Opened>> {
        None
    }
}

/// The path an open fd refers to, from `/proc/self/fd`; `None` without
/// `/proc`.
#[cfg(target_os = "linux")]
fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// Opens `rel` beneath `root_fd` (whose path is `root`) one component at a
/// time, each with `O_NOFOLLOW` relative to the folder fd before it, so a
/// component swapped for a symlink is seen as a symlink, never followed
/// blindly. A symlink's target is read (`readlinkat`) and resolved in turn:
/// a relative one from the folder holding it, an absolute one only when it
/// names a path inside `root` (then from `root_fd`). `..` steps back to the
/// folder fd before (held, not looked up again), and refuses to go above
/// the root. This is the equivalent of `RESOLVE_BENEATH` where `openat2` is
/// missing, and it also follows absolute symlinks that stay inside.
///
/// # Errors
/// `EXDEV` when a `..` or a symlink would leave the root, `ELOOP` after
/// [`MAX_LINKS`] symlinks, otherwise what an open failed with.
pub(crate) fn walk_beneath(
    root_fd: BorrowedFd<'_>,
    root: &Path,
    rel: &Path,
    flags: OFlag,
) -> nix::Result<Opened> {
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_front(&mut todo, rel)?;
    // The folders walked through below the root, with their names.
    let mut stack: Vec<(OwnedFd, OsString)> = Vec::new();
    let mut links = 0usize;
    let real_of = |stack: &[(OwnedFd, OsString)], last: Option<&OsStr>| {
        let mut p = root.to_path_buf();
        p.extend(stack.iter().map(|(_, n)| n.as_os_str()));
        p.extend(last);
        p
    };
    loop {
        let Some(name) = todo.pop_front() else {
            // The path ends at a folder already walked (or the root).
            let dir = stack.last().map_or(root_fd, |(fd, _)| fd.as_fd());
            let fd = openat(dir, ".", flags | OFlag::O_CLOEXEC, Mode::empty())?;
            return Ok(Opened { fd, real: real_of(&stack, None) });
        };
        if name == ".." {
            if stack.pop().is_none() {
                return Err(Errno::EXDEV);
            }
            continue;
        }
        let dir = stack.last().map_or(root_fd, |(fd, _)| fd.as_fd());
        let last = todo.is_empty();
        let want = if last { flags } else { LOOK | OFlag::O_DIRECTORY };
        let opened =
            openat(dir, name.as_os_str(), want | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty());
        let failed = match opened {
            // `O_PATH | O_NOFOLLOW` opens a symlink itself: look at it.
            Ok(fd)
                if want.contains(LOOK)
                    && LOOK != OFlag::O_RDONLY
                    && kind(&fstat(fd.as_fd())?) == SFlag::S_IFLNK =>
            {
                Errno::ELOOP
            }
            Ok(fd) if last => return Ok(Opened { fd, real: real_of(&stack, Some(&name)) }),
            Ok(fd) => {
                stack.push((fd, name));
                continue;
            }
            Err(e) => e,
        };
        // ELOOP (or ENOTDIR with O_DIRECTORY, EMLINK on some systems) may
        // mean a symlink: read it; anything else is the answer.
        if !matches!(failed, Errno::ELOOP | Errno::ENOTDIR | Errno::EMLINK) {
            return Err(failed);
        }
        let target = match nix::fcntl::readlinkat(dir, name.as_os_str()) {
            Ok(t) => PathBuf::from(t),
            Err(_) => return Err(failed),
        };
        links += 1;
        if links > MAX_LINKS {
            return Err(Errno::ELOOP);
        }
        if target.is_absolute() {
            let normal = normalise(&target).ok_or(Errno::EXDEV)?;
            let inside = normal.strip_prefix(root).map_err(|_| Errno::EXDEV)?;
            stack.clear();
            push_front(&mut todo, inside)?;
        } else {
            push_front(&mut todo, &target)?;
        }
    }
}

/// Puts `path`'s components (names and `..`; `.` dropped) in front of
/// `todo`.
fn push_front(todo: &mut VecDeque<OsString>, path: &Path) -> nix::Result<()> {
    for c in path.components().rev() {
        match c {
            Component::Normal(n) => todo.push_front(n.to_owned()),
            Component::ParentDir => todo.push_front(OsString::from("..")),
            Component::CurDir => {}
            // Only relative paths are pushed.
            Component::RootDir | Component::Prefix(_) => return Err(Errno::EXDEV),
        }
    }
    Ok(())
}

/// The file type bits of `st`.
pub(crate) fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// `e` as an I/O error, for messages (`No such file or directory (os error
/// 2)`).
pub(crate) fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// The refusal of `path`, outside the workspace `root`. It reads the same
/// whether the path exists or not.
pub(crate) fn outside(root: &Path, path: &str) -> ToolError {
    ToolError::new(format!(
        "`{path}` is outside the workspace `{}`; tools only reach files inside it",
        root.display()
    ))
}

/// `path` (relative to `root`, or absolute) as a path relative to `root`,
/// with `.` and `..` resolved as text; empty for the root itself.
///
/// # Errors
/// The path is empty or lexically outside the root (by `..` or as an
/// absolute path). Nothing is looked up, so refusals do not tell which
/// paths exist outside the workspace.
pub(crate) fn beneath_rel(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::new("`path` is empty: give a path relative to the workspace root"));
    }
    let normal = normalise(&root.join(path)).ok_or_else(|| outside(root, path))?;
    match normal.strip_prefix(root) {
        Ok(rel) => Ok(rel.to_path_buf()),
        Err(_) => Err(outside(root, path)),
    }
}

/// The error of a failed [`Root::open_beneath`] of `path`, with today's
/// messages: outside, does not exist, or the system's reason.
pub(crate) fn open_error(root: &Path, path: &str, e: Errno) -> ToolError {
    match e {
        Errno::EXDEV => outside(root, path),
        // U+FFFD is what file_search and grep_files show for bytes of a
        // name that are not UTF-8: such a name cannot be given back
        // through JSON, and is not missing.
        Errno::ENOENT if path.contains('\u{FFFD}') => ToolError::new(format!(
            "`{path}` does not exist in the workspace under this name: U+FFFD (`\u{FFFD}`) stands for bytes of a file \
             name that are not UTF-8 (as file_search and grep_files show them), and such a name cannot be \
             given in JSON; rename the file to a UTF-8 name (bash: `mv`) and use that"
        )),
        Errno::ENOENT => ToolError::new(format!(
            "`{path}` does not exist in the workspace (file_search finds files by name)"
        )),
        _ => ToolError::new(format!("cannot open `{path}`: {}", io(e))),
    }
}

/// Opens the existing file or folder `path` (relative to the workspace
/// root, or absolute) beneath the root, with `flags`.
///
/// # Errors
/// The path is empty, does not exist, leads outside the workspace (by `..`,
/// an absolute path, or a symlink, also one swapped in during the call), or
/// cannot be opened.
pub(crate) fn open_existing(root: &Root, path: &str, flags: OFlag) -> Result<Opened, ToolError> {
    let rel = beneath_rel(root.path(), path)?;
    root.open_beneath(&rel, flags).map_err(|e| open_error(root.path(), path, e))
}

/// Where a `write` or an `edit` lands: the open folder that holds the file
/// and the file's name in it. The new content is written to a temp file in
/// that folder and renamed over the name, both through the folder's fd.
pub(crate) struct WriteTarget {
    /// The folder that holds the file, opened beneath the root.
    pub(crate) dir: OwnedFd,
    /// The file's name in `dir`.
    pub(crate) name: OsString,
    /// The file's absolute path (through symlinks inside), for the result.
    pub(crate) real: PathBuf,
}

/// How many times [`open_for_write`] looks an existing file up again when
/// its name was renamed over between the lookup and reading its path back.
/// Each retry follows a completed rename by another writer, so a few
/// suffice; after them the last lookup is used as it is.
const RELOOKUPS: u32 = 16;

/// Resolves `path` (relative to the workspace root, or absolute) for a
/// write. An existing file is resolved through its symlinks, so writing
/// through a link inside the workspace updates its target, and a link out
/// is refused. A missing file's folders are created (with `mkdirat`, each in
/// the fd of the folder before it) when `create_folders` is set; otherwise
/// a missing folder is reported as a missing file. A file or new folder
/// under a path `confinement` protects is refused, by where the folder fd
/// the write goes through really is (the gate looked at the path before).
///
/// # Errors
/// The path is empty, ends with `/`, names a folder or something other than
/// a regular file, goes through a file, leads outside the workspace, or a
/// folder cannot be created, or it is protected.
pub(crate) fn open_for_write(
    root: &Root,
    path: &str,
    create_folders: bool,
    confinement: &Confinement,
    tool: &str,
) -> Result<WriteTarget, ToolError> {
    let rel = beneath_rel(root.path(), path)?;
    let ws = root.path();
    if path.ends_with('/') {
        return Err(ToolError::new(format!("`{path}` ends with `/`: give a file path")));
    }
    if let Some(existing) = existing_for_write(root, &rel, path, confinement, tool)? {
        return Ok(existing);
    }
    // A missing file: its folders are walked (and made) one fd at a time.
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(folder_error(path));
    };
    let mut dir = root.open_beneath(Path::new(""), FOLDER).map_err(|e| open_error(ws, path, e))?;
    let mut walked = PathBuf::new();
    for part in parent.components() {
        walked.push(part);
        dir = match root.open_beneath(&walked, FOLDER) {
            Ok(d) => d,
            Err(Errno::ENOENT) if create_folders => {
                refuse_protected(confinement, tool, &dir.real.join(part), path)?;
                make_folder(&dir, part.as_os_str()).map_err(|e| {
                    ToolError::new(format!("cannot create the folders of `{path}`: {}", io(e)))
                })?
            }
            Err(Errno::ENOTDIR) => {
                return Err(ToolError::new(format!(
                    "`{path}` goes through `{}`, which is a file",
                    walked.to_string_lossy()
                )));
            }
            Err(e) => return Err(open_error(ws, path, e)),
        };
    }
    // Not found above; a symlink to nowhere may be there, or a file made
    // since.
    // Whether it exists, and as what, is looked at again under the writer's
    // lock (see `super::file_lock`).
    match fstatat(dir.fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => match kind(&st) {
            SFlag::S_IFREG => {}
            SFlag::S_IFDIR => return Err(folder_error(path)),
            SFlag::S_IFLNK => {
                return Err(ToolError::new(format!("cannot open `{path}`: {}", io(Errno::ENOENT))));
            }
            _ => return Err(not_regular_error(path)),
        },
        Err(Errno::ENOENT) => {}
        Err(e) => return Err(open_error(ws, path, e)),
    }
    let real = dir.real.join(name);
    refuse_protected(confinement, tool, &real, path)?;
    Ok(WriteTarget { dir: dir.fd, name: name.to_owned(), real })
}

/// The [`WriteTarget`] of `rel` (`path` as the program gave it) when it
/// exists: a regular file, resolved through its symlinks, in a folder
/// opened beneath the root, not protected. `None` when nothing is there.
///
/// The existing file's name, symlinks resolved, is read back from the
/// opened file; a writer in another process may rename a new inode over
/// the name in between, and the old inode's path then reads `<name>
/// (deleted)`. Such a lookup is made again (at most [`RELOOKUPS`] times).
fn existing_for_write(
    root: &Root,
    rel: &Path,
    path: &str,
    confinement: &Confinement,
    tool: &str,
) -> Result<Option<WriteTarget>, ToolError> {
    let ws = root.path();
    let mut tries = 0;
    loop {
        match root.open_beneath(rel, LOOK) {
            Ok(found) => {
                let st = fstat(found.fd.as_fd()).map_err(|e| open_error(ws, path, e))?;
                match kind(&st) {
                    SFlag::S_IFDIR => return Err(folder_error(path)),
                    SFlag::S_IFREG => {}
                    _ => return Err(not_regular_error(path)),
                }
                let real_rel = found.real.strip_prefix(ws).map_err(|_| outside(ws, path))?;
                let (Some(parent), Some(name)) = (real_rel.parent(), real_rel.file_name()) else {
                    return Err(folder_error(path));
                };
                let dir = root.open_beneath(parent, FOLDER).map_err(|e| open_error(ws, path, e))?;
                let named = fstatat(dir.fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|now| now.st_dev == st.st_dev && now.st_ino == st.st_ino);
                if !named && tries < RELOOKUPS {
                    tries += 1;
                    continue;
                }
                // The path of the folder fd the write goes through, not of
                // the lookup before it: a swap in between shows here.
                let real = dir.real.join(name);
                refuse_protected(confinement, tool, &real, path)?;
                return Ok(Some(WriteTarget { real, dir: dir.fd, name: name.to_owned() }));
            }
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
            Err(e) => return Err(open_error(ws, path, e)),
        }
    }
}

/// `path` names a folder where a file was asked for.
fn folder_error(path: &str) -> ToolError {
    ToolError::new(format!("`{path}` is a folder, not a file"))
}

/// `path` names something other than a regular file or a folder.
fn not_regular_error(path: &str) -> ToolError {
    ToolError::new(format!("`{path}` is not a regular file"))
}

/// Creates the folder `name` in `parent` (a folder made meanwhile is fine)
/// and opens it without following a symlink.
fn make_folder(parent: &Opened, name: &OsStr) -> nix::Result<Opened> {
    match mkdirat(parent.fd.as_fd(), name, Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(e),
    }
    let fd = openat(parent.fd.as_fd(), name, FOLDER | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())?;
    Ok(Opened { fd, real: parent.real.join(name) })
}

/// Opens files a walk listed, by the path it listed them at, beneath the
/// root: the folder is opened beneath the root and kept only when it
/// resolves to the very path listed (a folder swapped for a symlink since
/// the listing does not), then the file is opened in that folder's fd by
/// name with `O_NOFOLLOW`. The last folder is kept open, so the files of one
/// folder cost one `openat` each.
pub(crate) struct Listed<'a> {
    /// The root the walk started beneath.
    root: &'a Root,
    /// The last folder looked up: its listed path and its fd, `None` when it
    /// was not where it was listed.
    folder: Option<(PathBuf, Option<OwnedFd>)>,
}

impl<'a> Listed<'a> {
    /// Opens listed files beneath `root`.
    pub(crate) fn new(root: &'a Root) -> Listed<'a> {
        Listed { root, folder: None }
    }

    /// Opens the file listed at `path` (absolute, beneath the root) with
    /// `flags`; `None` when it is no longer there, is a symlink, or its
    /// folder is not where it was listed.
    pub(crate) fn open(&mut self, path: &Path, flags: OFlag) -> Option<OwnedFd> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        if self.folder.as_ref().is_none_or(|(p, _)| p != parent) {
            let fd = parent
                .strip_prefix(&self.root.path)
                .ok()
                .and_then(|rel| self.root.open_beneath(rel, LOOK | OFlag::O_DIRECTORY).ok())
                .filter(|o| o.real == parent)
                .map(|o| o.fd);
            self.folder = Some((parent.to_path_buf(), fd));
        }
        let dir = self.folder.as_ref()?.1.as_ref()?;
        openat(dir.as_fd(), name, flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty()).ok()
    }
}

/// Refuses `real` (resolved, absolute) when it lies in a hidden folder
/// ([`crate::sandbox::Confinement::hidden`]: `.codemode/`, earlier runs'
/// receipts and spill files), except, when `own_spill` is set, a file of
/// this run's own spill folder (`<spill_root>/<run_id>/`), which an
/// envelope's `spill_path` names.
///
/// # Errors
/// The path is hidden; the message says why and what is readable.
pub(crate) fn refuse_hidden(
    cx: &ToolContext,
    real: &Path,
    path: &str,
    own_spill: bool,
) -> Result<(), ToolError> {
    let Some(hidden) = cx.confinement.hidden_of(real) else { return Ok(()) };
    if own_spill && own_spill_folder(cx).is_some_and(|own| real.starts_with(own)) {
        return Ok(());
    }
    let folder = relative(&cx.workspace, hidden);
    Err(ToolError::new(format!(
        "`{path}` is in `{folder}/`, which holds earlier runs' receipts and spill files and is not \
         readable by tools; this run's own spill files (the `spill_path` of its envelopes) are"
    )))
}

/// Refuses a write or edit whose file or new folder `real` (resolved
/// through the folder fd the write goes through) lies under a protected
/// path ([`Confinement::protected`]). The gate refuses these
/// calls first, by the path it is given; this second line catches a path
/// that reaches a protected folder through a symlink swapped in after the
/// gate looked.
///
/// # Errors
/// The file is protected; the message names the protection.
fn refuse_protected(confinement: &Confinement, tool: &str, real: &Path, path: &str) -> Result<(), ToolError> {
    let Some(protected) = confinement.protection_for(tool, real) else { return Ok(()) };
    let ws = &confinement.workspace;
    Err(ToolError::new(format!(
        "`{path}` leads to `{}`, under the protected `{}`: tools cannot change it",
        relative(ws, real),
        relative(ws, protected)
    )))
}

/// `<spill_root>/<run_id>/spill`, when the run id is one plain name: resolved
/// through links when it exists (files in it are compared by their
/// resolved paths).
fn own_spill_folder(cx: &ToolContext) -> Option<PathBuf> {
    let id = Path::new(&*cx.run_id);
    let mut parts = id.components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) => {
            let folder = cx.confinement.own_spill_folder(&cx.run_id);
            Some(std::fs::canonicalize(&folder).unwrap_or(folder))
        }
        _ => None,
    }
}

/// When `path` is an absolute path into this run's own spill folder and
/// that folder is outside the workspace (run state is): the folder, to
/// open the file beneath (as `Root`), and the path as an absolute path
/// under it. A receipt's `spill_path` names such files; no other path
/// outside the workspace is readable.
pub(crate) fn own_spill_file(cx: &ToolContext, path: &str) -> Option<(PathBuf, String)> {
    let given = Path::new(path);
    if !given.is_absolute() {
        return None;
    }
    let normal = normalise(given)?;
    let lexical = cx.confinement.own_spill_folder(&cx.run_id);
    let own = own_spill_folder(cx)?;
    if own.starts_with(cx.workspace.as_path()) {
        return None;
    }
    let rel = normal.strip_prefix(&lexical).or_else(|_| normal.strip_prefix(&own)).ok()?;
    Some((own.clone(), own.join(rel).to_string_lossy().into_owned()))
}

/// `path` (absolute) with `.` and `..` resolved as text (no symlinks);
/// `None` when a `..` would go above the file system root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                // Never pops the root itself.
                if normal.parent().is_none() || !normal.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    Some(normal)
}

/// A walk of `dir` as the search tool `tool` sees the workspace `root`:
/// files `.gitignore` and friends leave out are skipped (also outside a
/// git repository), hidden files are included, links are not followed, and
/// paths (relative to `root`) that `exclude` matches are skipped with
/// everything below them, as are the confinement's hidden folders and the
/// paths a deny rule on `tool` matches
/// ([`crate::sandbox::Confinement::search_denies`]), whatever `exclude`
/// says.
pub(crate) fn walk(
    root: &Path,
    dir: &Path,
    exclude: super::path_glob::PathGlobSet,
    confinement: std::sync::Arc<crate::sandbox::Confinement>,
    tool: &'static str,
) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    let root = root.to_path_buf();
    builder.hidden(false).require_git(false).follow_links(false).filter_entry(move |e| {
        if confinement.hidden.iter().any(|h| e.path().starts_with(h))
            || e.file_name() == codemode_base::HIDDEN_NAME
        {
            return false;
        }
        let rel = relative(&root, e.path());
        !exclude.is_match(&rel, e.file_type().is_some_and(|t| t.is_dir()))
            && !confinement.search_denies(tool, &rel)
    });
    builder
}

/// `path` relative to `root`, with `/` separators.
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let s = rel.to_string_lossy().replace('\\', "/");
    if s.is_empty() { ".".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// An outer temp folder holding `ws/` (the canonical root, with
    /// `ok.txt`, `sub/in.txt`) and, outside it, `secret.txt` and `out/`.
    fn fixture() -> (tempfile::TempDir, Root) {
        let outer = tempfile::tempdir().unwrap();
        let ws = outer.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(outer.path().join("out")).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "s").unwrap();
        std::fs::write(ws.join("ok.txt"), "o").unwrap();
        std::fs::write(ws.join("sub/in.txt"), "i").unwrap();
        let root = Root::open(&std::fs::canonicalize(&ws).unwrap()).unwrap();
        (outer, root)
    }

    /// Both lookups (openat2 where the kernel has it, and the walk) give
    /// `Ok(real path relative to the root)` or the same errno.
    fn both(root: &Root, rel: &str, flags: OFlag) -> nix::Result<String> {
        let rel = Path::new(rel);
        let kernel = root.open_beneath(rel, flags).map(|o| relative(root.path(), &o.real));
        let walked =
            walk_beneath(root.fd.as_fd(), root.path(), rel, flags).map(|o| relative(root.path(), &o.real));
        assert_eq!(kernel, walked, "{}", rel.display());
        kernel
    }

    #[test]
    fn escapes_are_refused() {
        let (outer, root) = fixture();
        let ws = root.path().to_path_buf();
        assert!(open_existing(&root, "ok.txt", READ).is_ok());
        let secret = outer.path().join("secret.txt");
        for bad in ["../secret.txt", secret.to_str().unwrap(), "/etc/passwd", "/no/such/place", "sub/../../x"]
        {
            let e = open_existing(&root, bad, READ).err().unwrap();
            assert!(e.message.contains("outside the workspace"), "{bad}: {e}");
        }
        symlink(&secret, ws.join("link")).unwrap();
        symlink("../secret.txt", ws.join("rel-link")).unwrap();
        symlink(outer.path().join("out"), ws.join("out")).unwrap();
        for bad in ["link", "rel-link", "out", "out/x"] {
            let e = open_existing(&root, bad, READ).err().unwrap();
            assert!(e.message.contains("outside the workspace"), "{bad}: {e}");
            assert_eq!(both(&root, bad, READ), Err(Errno::EXDEV), "{bad}");
        }
        let e = open_existing(&root, "missing.txt", READ).err().unwrap();
        assert!(e.message.contains("does not exist"), "{e}");
        assert!(open_existing(&root, " ", READ).err().unwrap().message.contains("empty"));
    }

    #[test]
    fn links_that_stay_inside_are_followed_by_both_lookups() {
        let (_outer, root) = fixture();
        let ws = root.path().to_path_buf();
        // Relative, absolute, through `..`, to a folder, chained, to the root.
        symlink("sub/in.txt", ws.join("rel")).unwrap();
        symlink(ws.join("sub/in.txt"), ws.join("abs")).unwrap();
        symlink("../ok.txt", ws.join("sub/up")).unwrap();
        symlink(ws.join("sub"), ws.join("dir")).unwrap();
        symlink("abs", ws.join("chain")).unwrap();
        symlink(".", ws.join("sub/self")).unwrap();
        symlink("..", ws.join("sub/parent")).unwrap();
        for (path, real) in [
            ("rel", "sub/in.txt"),
            ("abs", "sub/in.txt"),
            ("sub/up", "ok.txt"),
            ("dir/in.txt", "sub/in.txt"),
            ("dir/up", "ok.txt"),
            ("chain", "sub/in.txt"),
            ("sub/self/self/in.txt", "sub/in.txt"),
            ("sub/parent/ok.txt", "ok.txt"),
        ] {
            assert_eq!(both(&root, path, READ).as_deref(), Ok(real), "{path}");
        }
        assert_eq!(both(&root, "sub/parent", LOOK).as_deref(), Ok("."));
        assert_eq!(both(&root, "", FOLDER).as_deref(), Ok("."));
        // `sub/parent/..` leaves the root even though `sub/..` would not.
        symlink("parent/..", ws.join("sub/grand")).unwrap();
        assert_eq!(both(&root, "sub/grand", LOOK), Err(Errno::EXDEV));
        // A loop ends.
        symlink("loop", ws.join("loop")).unwrap();
        assert_eq!(both(&root, "loop", READ), Err(Errno::ELOOP));
        assert_eq!(both(&root, "ok.txt/x", READ), Err(Errno::ENOTDIR));
        assert_eq!(both(&root, "nope/x", READ), Err(Errno::ENOENT));
    }

    #[test]
    fn write_paths_stay_inside_the_workspace() {
        let (outer, root) = fixture();
        let ws = root.path().to_path_buf();
        let real = |p: &str| {
            open_for_write(&root, p, true, &Confinement::for_workspace(root.path()), "write")
                .map(|t| relative(&ws, &t.real))
        };
        assert_eq!(real("new.txt").unwrap(), "new.txt");
        assert_eq!(real("a/b/c.txt").unwrap(), "a/b/c.txt");
        assert!(ws.join("a/b").is_dir(), "folders are made");
        assert_eq!(real("sub/../x.txt").unwrap(), "x.txt");
        for bad in ["../escape.txt", "a/../../escape.txt", "/tmp/escape.txt", "sub/../../escape.txt"] {
            let e = real(bad).unwrap_err();
            assert!(e.message.contains("outside the workspace"), "{bad}: {e}");
        }
        assert!(real("sub").unwrap_err().message.contains("folder"));
        assert!(real("ok.txt/inner").unwrap_err().message.contains("is a file"));
        assert!(
            open_for_write(&root, "n.txt", false, &Confinement::for_workspace(root.path()), "write").is_ok()
        );
        let e = open_for_write(&root, "m/n.txt", false, &Confinement::for_workspace(root.path()), "write")
            .err()
            .unwrap();
        assert!(e.message.contains("does not exist"), "{e}");
        assert!(!ws.join("m").exists(), "no folder is made without create_folders");

        symlink(outer.path(), ws.join("out")).unwrap();
        symlink(outer.path().join("secret"), ws.join("dangling")).unwrap();
        symlink("nothing", ws.join("dangling-inside")).unwrap();
        symlink(ws.join("ok.txt"), ws.join("inner-link")).unwrap();
        for bad in ["out/x.txt", "out/new/x.txt", "dangling", "dangling-inside"] {
            let e = real(bad).unwrap_err();
            assert!(
                e.message.contains("outside the workspace") || e.message.contains("cannot open"),
                "{bad}: {e}"
            );
        }
        assert!(!outer.path().join("new").exists());
        assert_eq!(real("inner-link").unwrap(), "ok.txt");
    }

    #[test]
    fn the_walk_never_leaves_the_root_while_a_folder_and_a_link_swap() {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        let (outer, root) = fixture();
        let ws = root.path().to_path_buf();
        std::fs::write(outer.path().join("out/in.txt"), "OUTSIDE").unwrap();
        symlink(outer.path().join("out"), ws.join("swap")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, ws) = (stop.clone(), ws.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 2_000_000 {
                    renameat2(
                        AT_FDCWD,
                        &ws.join("sub"),
                        AT_FDCWD,
                        &ws.join("swap"),
                        RenameFlags::RENAME_EXCHANGE,
                    )
                    .unwrap();
                    n += 1;
                }
            })
        };
        let mut opened = 0;
        for _ in 0..20_000 {
            for rel in ["sub/in.txt", "swap/in.txt"] {
                if let Ok(o) = walk_beneath(root.fd.as_fd(), &ws, Path::new(rel), READ) {
                    let text = std::io::read_to_string(std::fs::File::from(o.fd)).unwrap();
                    assert_eq!(text, "i", "{rel} read outside content");
                    opened += 1;
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(opened > 0, "some lookups went through");
    }
}
