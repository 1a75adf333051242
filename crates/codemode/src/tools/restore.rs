//! A rollback's file restores (docs/JOURNAL.md, "Undo"). A rollback is a
//! batch of `write` calls, one per file, gated like any `write`; its
//! dispatcher hands each call's tool a [`RestorePlan`], and `write` then
//! puts back the file's bytes from before the run instead of writing
//! `content`. The file is resolved exactly as `write` resolves it (beneath
//! the workspace root, links inside followed, a link out refused,
//! protected paths refused) and replaced atomically under the writer's
//! lock; a file whose bytes are not what the run left is left alone
//! unless the plan forces it.

use std::io::Read as _;
use std::os::fd::AsFd as _;
use std::sync::atomic::AtomicBool;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::workspace::{self, WriteTarget};
use crate::catalog::{ToolContext, ToolError, ToolOutput};
use crate::journal::undo::{RestorePlan, Restored};

/// Restores the file `path` names (as a `write` call's path) by `plan`;
/// on a blocking thread.
pub(crate) fn restore(
    plan: &RestorePlan,
    cx: &ToolContext,
    path: &str,
    cancelled: &AtomicBool,
) -> Result<ToolOutput, ToolError> {
    let root = workspace::Root::open(&cx.workspace)?;
    let target = workspace::open_for_write(&root, path, true, &cx.confinement, "write")?;
    let rel = workspace::relative(&cx.workspace, &target.real);
    let Some(file) = plan.files.get(&rel) else {
        return Err(ToolError::new(format!(
            "`{path}` (`{rel}`) is not a file this rollback restores; nothing was written"
        )));
    };
    let lock = super::file_lock::FileLock::acquire(&target.dir, &target.name, &target.real, cancelled)?;
    let now = match &lock.existing {
        Some(_) => Some(digest(&target).map_err(|e| ToolError::new(format!("cannot read `{rel}`: {e}")))?),
        None => None,
    };
    let before = file.bytes.as_deref().map(crate::journal::digest::sha256_hex);
    let outcome = if now == before {
        Restored::AsBefore
    } else if !file.left.contains(&now) && !plan.force {
        Restored::ChangedSince
    } else {
        match &file.bytes {
            Some(bytes) => {
                super::write::write_atomic(&target.dir, &target.name, bytes, file.mode, cancelled)
                    .map_err(|e| super::write::write_error(path, &e))?;
                Restored::Written
            }
            None => {
                match unlinkat(target.dir.as_fd(), target.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => {
                        return Err(ToolError::new(format!("cannot remove `{rel}`: {}", workspace::io(e))));
                    }
                }
                let _ = nix::unistd::fsync(target.dir.as_fd());
                Restored::Removed
            }
        }
    };
    drop(lock);
    plan.outcomes.lock().unwrap_or_else(|e| e.into_inner()).insert(rel.clone(), outcome);
    if outcome == Restored::ChangedSince {
        return Err(ToolError::new(format!(
            "`{rel}` changed since the run (its bytes are not what the run left): left alone; \
             `codemode rollback --force` restores it anyway"
        )));
    }
    let restored = match outcome {
        Restored::Written => "written",
        Restored::Removed => "removed",
        _ => "as_before",
    };
    Ok(ToolOutput::new(json!({
        "path": rel,
        "restored": restored,
        "bytes": file.bytes.as_ref().map_or(0, Vec::len),
    })))
}

/// SHA-256 (hex) of the file of `target`, read without following a link.
fn digest(target: &WriteTarget) -> std::io::Result<String> {
    let fd = openat(
        target.dir.as_fd(),
        target.name.as_os_str(),
        workspace::READ | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(workspace::io)?;
    let mut file = std::fs::File::from(fd);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let mut out = String::with_capacity(64);
    for b in hasher.finalize() {
        out.push_str(&format!("{b:02x}"));
    }
    Ok(out)
}
