//! Pre-images for undo (journal/undo.rs): `write` and `edit` hand the run's
//! [`UndoLog`](crate::journal::UndoLog) what a file held, under the file's
//! writer lock and before their rename, and what they wrote once it is
//! done. A run that keeps no journal keeps none (`cx.undo` is `None`).

use std::io::Read as _;
use std::os::fd::AsFd as _;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::workspace::{self, WriteTarget};
use crate::catalog::{ToolContext, ToolError};
use crate::journal::FILE_PREIMAGE_BYTES;
use crate::journal::undo::Before;

/// Keeps what `target` holds now (`existing`: whether a file is there) as
/// the pre-image of call `cx.seq`, reading it when it exists, and waits
/// until it is durable in the run's journal. `known` is the file's content
/// and mode when the tool has read it already (`edit`).
///
/// # Errors
/// The journal could not keep it: the tool leaves the file as it is.
pub(crate) fn keep_before(
    cx: &ToolContext,
    target: &WriteTarget,
    existing: bool,
    known: Option<(&[u8], u32)>,
) -> Result<(), ToolError> {
    let Some(undo) = &cx.undo else { return Ok(()) };
    let rel = workspace::relative(&cx.workspace, &target.real);
    let kept = if !existing {
        undo.before(cx.seq, &rel, &target.real, Before::Absent)
    } else if let Some((bytes, mode)) = known {
        undo.before(cx.seq, &rel, &target.real, Before::Bytes(bytes, mode))
    } else {
        match read_capped(target) {
            Ok((bytes, mode)) if bytes.len() as u64 <= FILE_PREIMAGE_BYTES => {
                undo.before(cx.seq, &rel, &target.real, Before::Bytes(&bytes, mode))
            }
            Ok((bytes, mode)) => {
                undo.before(cx.seq, &rel, &target.real, Before::TooLarge(bytes.len() as u64, mode))
            }
            // Unreadable (the write will likely fail too): no bytes to keep.
            Err(_) => undo.before(cx.seq, &rel, &target.real, Before::TooLarge(u64::MAX, 0)),
        }
    };
    kept.map_err(|why| ToolError::new(format!("`{rel}` was not changed: {why}")))
}

/// Keeps the digest of what call `cx.seq` wrote to `target`.
pub(crate) fn keep_after(cx: &ToolContext, target: &WriteTarget, written: &[u8]) {
    if let Some(undo) = &cx.undo {
        undo.after(cx.seq, &workspace::relative(&cx.workspace, &target.real), written);
    }
}

/// The file of `target` (at most [`FILE_PREIMAGE_BYTES`] + 1 bytes, so a
/// larger one reads as over the bound) and its permission bits, read
/// without following a symbolic link.
pub(crate) fn read_capped(target: &WriteTarget) -> std::io::Result<(Vec<u8>, u32)> {
    let fd = openat(
        target.dir.as_fd(),
        target.name.as_os_str(),
        workspace::READ | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(workspace::io)?;
    let file = std::fs::File::from(fd);
    let mode = std::os::unix::fs::PermissionsExt::mode(&file.metadata()?.permissions()) & 0o7777;
    let mut bytes = Vec::new();
    file.take(FILE_PREIMAGE_BYTES + 1).read_to_end(&mut bytes)?;
    Ok((bytes, mode))
}
