//! `write {path, content}`: creates or replaces a file of the workspace,
//! atomically (temp file in the same folder, fsync, rename), creating parent
//! folders and keeping an existing file's permission bits. Everything is
//! done through fds opened beneath the workspace root (see
//! [`super::workspace`]): folders with `mkdirat`, the temp file with
//! `openat`, the commit with `renameat`, all in the parent folder's fd. A call that timed
//! out or was cancelled does not rename afterwards (see
//! [`super::blocking_cancellable`]).

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::sync::atomic::AtomicBool;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, fchmod};
use nix::unistd::{UnlinkatFlags, unlinkat};

use serde::Deserialize;
use serde_json::{Value, json};

use super::workspace;
use crate::catalog::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// The `write` tool.
pub(crate) struct Write;

/// The arguments, as the schema describes them.
#[derive(Deserialize)]
struct Args {
    /// File path relative to the workspace root.
    path: String,
    /// The whole new content.
    content: String,
}

impl Tool for Write {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write",
            "Create or replace a file of the workspace with `content` (UTF-8 text). Creates missing parent \
             folders; replaces atomically and keeps an existing file's permissions. Prefer `edit` for \
             changes to an existing file.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "content": {"type": "string", "description": "The whole new content of the file"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        )
        .result_schemas(crate::catalog::shapes::write())
        .read_only(false)
        .destructive(false)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            // A rollback's call: the file goes back to its bytes before
            // the run (restore.rs); `content` is not written.
            if let Some(plan) = cx.restore.clone() {
                return super::blocking_cancellable(move |cancelled: &AtomicBool| {
                    super::restore::restore(&plan, &cx, &args.path, cancelled)
                })
                .await;
            }
            super::blocking_cancellable(move |cancelled: &AtomicBool| write_file(&cx, &args, cancelled)).await
        })
    }
}

/// Resolves the path beneath the workspace, creates the parents and writes;
/// on a blocking thread. Gives up without changing the file once
/// `cancelled` is set, up to the rename.
fn write_file(cx: &ToolContext, args: &Args, cancelled: &AtomicBool) -> Result<ToolOutput, ToolError> {
    if super::cancelled(cancelled) {
        return Err(super::abandoned());
    }
    let root = workspace::Root::open(&cx.workspace)?;
    refuse_lookalike(&root, &args.path)?;
    let target = workspace::open_for_write(&root, &args.path, true, &cx.confinement, "write")?;
    // One writer at a time: the file's mode and whether it exists are
    // looked at under the lock, which is held past the rename.
    let lock = super::file_lock::FileLock::acquire(&target.dir, &target.name, &target.real, cancelled)?;
    let mode = lock
        .existing
        .as_ref()
        .filter(|st| workspace::kind(st) == nix::sys::stat::SFlag::S_IFREG)
        .map(|st| st.st_mode & 0o7777);
    let created = lock.existing.is_none();
    super::preimage::keep_before(cx, &target, !created, None)?;
    write_atomic(&target.dir, &target.name, args.content.as_bytes(), mode, cancelled)
        .map_err(|e| write_error(&args.path, &e))?;
    super::preimage::keep_after(cx, &target, args.content.as_bytes());
    drop(lock);
    Ok(ToolOutput::new(json!({
        "path": workspace::relative(&cx.workspace, &target.real),
        "bytes": args.content.len(),
        "created": created,
    })))
}

/// Refuses, before anything is made, a `path` one of whose parts has
/// U+FFFD and does not exist: the character file_search and grep_files
/// show for bytes of a name that are not UTF-8. Such a name given back is
/// not the listed file or folder; made, it would be a second one that
/// looks like it. (A file or folder already named with U+FFFD itself is
/// written in as any other.)
fn refuse_lookalike(root: &workspace::Root, path: &str) -> Result<(), ToolError> {
    if !path.contains('\u{FFFD}') {
        return Ok(());
    }
    let rel = workspace::beneath_rel(root.path(), path)?;
    let mut walked = root.path().to_path_buf();
    for part in rel.components() {
        walked.push(part);
        let named = part.as_os_str().to_string_lossy().contains('\u{FFFD}');
        if named && walked.symlink_metadata().is_err() {
            return Err(lookalike(path));
        }
    }
    Ok(())
}

/// The refusal [`refuse_lookalike`] gives.
fn lookalike(path: &str) -> ToolError {
    ToolError::new(format!(
        "`{path}` is not made: U+FFFD (`\u{FFFD}`) stands for bytes of a file name that are not UTF-8 (as \
         file_search and grep_files show them), so this name is not that file, and a new file of this name would \
         look like it; to change that file, rename it to a UTF-8 name first (bash: `mv`), or give a name \
         without U+FFFD"
    ))
}

/// The tool error for a failed [`write_atomic`] of `shown`.
pub(crate) fn write_error(shown: &str, e: &std::io::Error) -> ToolError {
    if e.kind() == std::io::ErrorKind::Interrupted && e.to_string() == super::ABANDONED {
        return super::abandoned();
    }
    ToolError::new(format!("cannot write `{shown}`: {e}"))
}

/// Replaces the file `name` of the open folder `dir` with `bytes`
/// atomically: a temp file is created in `dir` (`openat`, `O_EXCL`),
/// written, flushed to disk and renamed over `name` (`renameat` within
/// `dir`), so a reader sees the old content or the new one, never a part,
/// and nothing is looked up by path: a folder swapped for a symlink
/// meanwhile cannot redirect the write. The file gets the permission bits
/// `mode` (an existing file's, set on the open temp file so the umask does
/// not apply), or the usual mode (0o666 less the umask) when `None`. Used
/// by `write` and `edit`.
///
/// `cancelled` is looked at before the temp file is made and again right
/// before the rename (the commit point): once it is set, the temp file is
/// removed and `name` is left as it was. A rename already under way when it
/// is set completes.
///
/// # Errors
/// Any I/O error, or [`std::io::ErrorKind::Interrupted`] with the message
/// [`super::ABANDONED`] when `cancelled` was set; `name` is then unchanged
/// and the temp file removed.
pub(crate) fn write_atomic(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    mode: Option<u32>,
    cancelled: &AtomicBool,
) -> std::io::Result<()> {
    let abandoned = || std::io::Error::new(std::io::ErrorKind::Interrupted, super::ABANDONED);
    if super::cancelled(cancelled) {
        return Err(abandoned());
    }
    let tmp = TempFile::create(dir)?;
    let mut file = std::fs::File::from(tmp.fd.try_clone()?);
    if let Some(mode) = mode {
        // Set on the open file, so the umask does not apply.
        fchmod(file.as_fd(), Mode::from_bits_truncate(mode)).map_err(workspace::io)?;
    }
    file.write_all(bytes)?;
    file.sync_all()?;
    // The commit point: an abandoned call stops here, and dropping `tmp`
    // removes the temp file.
    if super::cancelled(cancelled) {
        return Err(abandoned());
    }
    renameat(dir.as_fd(), tmp.name.as_str(), dir.as_fd(), name).map_err(workspace::io)?;
    tmp.kept();
    // Make the rename itself durable.
    let _ = nix::unistd::fsync(dir.as_fd());
    Ok(())
}

/// A temp file in a folder fd, removed (`unlinkat`) when dropped unless
/// [`TempFile::kept`].
struct TempFile<'a> {
    /// The folder.
    dir: &'a OwnedFd,
    /// The temp file's name in it.
    name: String,
    /// The open temp file.
    fd: OwnedFd,
    /// Whether to remove it when dropped.
    remove: bool,
}

impl<'a> TempFile<'a> {
    /// Creates `.codemode-write-<random>.tmp` in `dir`, mode 0o666 less the
    /// umask, never through a symlink.
    fn create(dir: &'a OwnedFd) -> std::io::Result<TempFile<'a>> {
        use std::hash::BuildHasher as _;
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut last = Errno::EEXIST;
        for attempt in 0..16u32 {
            let random = std::hash::RandomState::new().hash_one((std::process::id(), attempt));
            let name = format!(".codemode-write-{random:016x}.tmp");
            match openat(dir.as_fd(), name.as_str(), flags, Mode::from_bits_truncate(0o666)) {
                Ok(fd) => return Ok(TempFile { dir, name, fd, remove: true }),
                Err(Errno::EEXIST) => last = Errno::EEXIST,
                Err(e) => return Err(workspace::io(e)),
            }
        }
        Err(workspace::io(last))
    }

    /// Keeps the file (it was renamed into place).
    fn kept(mut self) {
        self.remove = false;
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.remove {
            let _ = unlinkat(self.dir.as_fd(), self.name.as_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static GOING: AtomicBool = AtomicBool::new(false);

    fn open_dir(p: &std::path::Path) -> OwnedFd {
        openat(nix::fcntl::AT_FDCWD, p, workspace::FOLDER | OFlag::O_CLOEXEC, Mode::empty()).unwrap()
    }

    fn name(n: &str) -> &OsStr {
        OsStr::new(n)
    }

    #[test]
    fn atomic_writes_replace_content_and_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        write_atomic(&fd, name("f.txt"), b"one", None, &GOING).unwrap();
        write_atomic(&fd, name("f.txt"), b"two", None, &GOING).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f.txt")).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A rename onto a folder fails and leaves no temp file.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(write_atomic(&fd, name("sub"), b"x", None, &GOING).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn an_abandoned_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        let p = dir.path().join("f.txt");
        std::fs::write(&p, "old").unwrap();
        let e = write_atomic(&fd, name("f.txt"), b"new", None, &AtomicBool::new(true)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(write_error("f.txt", &e).message, crate::tools::ABANDONED);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file is left");
        // Nor is a new file made.
        let e = write_atomic(&fd, name("g.txt"), b"new", None, &AtomicBool::new(true)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Other errors keep their message.
        let other = std::io::Error::other("disk full");
        assert_eq!(write_error("f.txt", &other).message, "cannot write `f.txt`: disk full");
    }

    #[test]
    fn protected_folders_are_refused_also_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::os::unix::fs::symlink(".git", ws.join("g")).unwrap();
        let cx = ToolContext::new(ws.clone(), "run", 1, crate::receipt::Caller::Program);
        for path in ["g/config", "g/hooks/pre-commit", ".git/config"] {
            let args = Args { path: path.to_owned(), content: "[core]\nfsmonitor = evil\n".to_owned() };
            let e = write_file(&cx, &args, &GOING).unwrap_err();
            assert!(e.message.contains("under the protected `.git`"), "{path}: {e}");
        }
        assert_eq!(std::fs::read_to_string(ws.join(".git/config")).unwrap(), "[core]\n");
        assert!(!ws.join(".git/hooks").exists(), "no folder is made in a protected one");
        // Elsewhere the same link-free write goes through.
        let args = Args { path: "ok.txt".to_owned(), content: "x".to_owned() };
        assert!(write_file(&cx, &args, &GOING).is_ok());
    }

    #[test]
    fn atomic_writes_set_the_given_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        write_atomic(&fd, name("run.sh"), b"new", Some(0o751), &GOING).unwrap();
        let meta = std::fs::metadata(dir.path().join("run.sh")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
    }
}
