//! `write {path, content}`: creates or replaces a file of the workspace,
//! atomically (temp file in the same folder, fsync, rename), creating parent
//! folders and keeping an existing file's permission bits. A call that timed
//! out or was cancelled does not rename afterwards (see
//! [`super::blocking_cancellable`]).

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;

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
        .read_only(false)
        .destructive(false)
        .primary_argument(crate::catalog::PrimaryArgument::Path("path".into()))
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let args: Args = super::parse_args(args)?;
            super::blocking_cancellable(move |cancelled: &AtomicBool| write_file(&cx, &args, cancelled)).await
        })
    }
}

/// Resolves the path, creates the parents and writes; on a blocking thread.
/// Gives up without changing anything once `cancelled` is set, up to the
/// rename.
fn write_file(cx: &ToolContext, args: &Args, cancelled: &AtomicBool) -> Result<ToolOutput, ToolError> {
    let path = workspace::resolve_for_write(&cx.workspace, &args.path)?;
    let created = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::new(format!("`{}` is a folder, not a file", args.path)));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(ToolError::new(format!("`{}` is not a regular file", args.path)));
        }
        Ok(_) => false,
        Err(_) => true,
    };
    if super::cancelled(cancelled) {
        return Err(super::abandoned());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::new(format!("cannot create the folders of `{}`: {e}", args.path)))?;
    }
    write_atomic(&path, args.content.as_bytes(), cancelled).map_err(|e| write_error(&args.path, &e))?;
    Ok(ToolOutput::new(json!({
        "path": workspace::relative(&cx.workspace, &path),
        "bytes": args.content.len(),
        "created": created,
    })))
}

/// The tool error for a failed [`write_atomic`] of `shown`.
pub(crate) fn write_error(shown: &str, e: &std::io::Error) -> ToolError {
    if e.kind() == std::io::ErrorKind::Interrupted && e.to_string() == super::ABANDONED {
        return super::abandoned();
    }
    ToolError::new(format!("cannot write `{shown}`: {e}"))
}

/// Replaces `path` with `bytes` atomically: a temp file in the same folder
/// is written, flushed to disk and renamed over `path`, so a reader sees the
/// old content or the new one, never a part. An existing file keeps its
/// permission bits; a new file gets the usual mode (0o666 less the umask).
/// The parent folder must exist. Used by `write` and `edit`.
///
/// `cancelled` is looked at before the temp file is made and again right
/// before the rename (the commit point): once it is set, the temp file is
/// removed and `path` is left as it was. A rename already under way when it
/// is set completes.
///
/// # Errors
/// Any I/O error, or [`std::io::ErrorKind::Interrupted`] with the message
/// [`super::ABANDONED`] when `cancelled` was set; `path` is then unchanged
/// and the temp file removed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], cancelled: &AtomicBool) -> std::io::Result<()> {
    let abandoned = || std::io::Error::new(std::io::ErrorKind::Interrupted, super::ABANDONED);
    if super::cancelled(cancelled) {
        return Err(abandoned());
    }
    let dir = path.parent().ok_or_else(|| std::io::Error::other("the path has no parent folder"))?;
    let existing = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut builder = tempfile::Builder::new();
    builder.prefix(".codemode-write-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    if let Some(perms) = existing {
        // Set on the open file, so the umask does not apply.
        tmp.as_file().set_permissions(perms)?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    // The commit point: an abandoned call stops here, and dropping `tmp`
    // removes the temp file.
    if super::cancelled(cancelled) {
        return Err(abandoned());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable; not every platform can open a folder.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    static GOING: AtomicBool = AtomicBool::new(false);

    #[test]
    fn atomic_writes_replace_content_and_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        write_atomic(&p, b"one", &GOING).unwrap();
        write_atomic(&p, b"two", &GOING).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_atomic(&dir.path().join("missing/f.txt"), b"x", &GOING).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_abandoned_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        std::fs::write(&p, "old").unwrap();
        let e = write_atomic(&p, b"new", &AtomicBool::new(true)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(write_error("f.txt", &e).message, crate::tools::ABANDONED);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file is left");
        // Nor is a new file made.
        let e = write_atomic(&dir.path().join("g.txt"), b"new", &AtomicBool::new(true)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Other errors keep their message.
        let other = std::io::Error::other("disk full");
        assert_eq!(write_error("f.txt", &other).message, "cannot write `f.txt`: disk full");
    }

    #[cfg(unix)]
    #[test]
    fn atomic_writes_keep_the_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&p, b"new", &GOING).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o751);
    }
}
