//! Receipt files written after the answer (docs/SERVE.md, "Results").
//!
//! A tool call answers with its receipt's path once the run's folder is
//! checked ([`codemode::Engine::receipt_path`]), and the file (the folder made
//! if need be, a temporary file, synced only when the journal is off,
//! renamed into place) follows on a blocking thread, so the answer never
//! waits for the disk. Every receipt file named in an answer is written
//! before the server answers a later `ping` or `tools/list`, before it
//! resumes any run, and before it stops ([`wait_all`]). The writes are
//! process-wide: every server of the process waits for all of them.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::Semaphore;

use codemode::Receipt;

/// Receipt files being written at once, at most; a server with this many
/// still to write answers its next call once one is done.
const AT_ONCE: u32 = 256;

/// One permit per receipt file being written.
static WRITING: Semaphore = Semaphore::const_new(AT_ONCE as usize);

/// Where a run's receipt goes, made ready before its answer.
pub(crate) enum Place {
    /// The run's folder is there; the file will be at this path.
    At(PathBuf),
    /// The folder could not be made: why (the answer says so).
    Failed(String),
}

impl Place {
    /// The place of `receipt` on `engine`: its folder checked, nothing
    /// made or written yet.
    pub(crate) fn of(engine: &codemode::Engine, receipt: &Receipt) -> Place {
        match engine.receipt_path(receipt) {
            Ok(path) => Place::At(path),
            Err(e) => Place::Failed(e.to_string()),
        }
    }

    /// The path an answer names, if any.
    pub(crate) fn path(&self) -> Option<String> {
        match self {
            Place::At(path) => Some(path.display().to_string()),
            Place::Failed(_) => None,
        }
    }
}

/// Saves `receipt` at `path` with `engine`
/// ([`codemode::Engine::save_receipt_copy`]: synced only when the journal is
/// off, the journal being the run's durable record) on a blocking thread;
/// returns once the write is under way (at once, unless [`AT_ONCE`] writes
/// are). A write that fails is said on stderr (the answer already named
/// the path).
pub(crate) async fn write_later(engine: codemode::Engine, receipt: Receipt, path: PathBuf) {
    let Ok(permit) = WRITING.acquire().await else { return };
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        if let Err(e) = engine.save_receipt_copy(&receipt) {
            eprintln!(
                "codemode: warning: the receipt of run {} could not be written to {}: {e}",
                receipt.run_id,
                path.display()
            );
        }
    });
}

/// Waits until every receipt file whose write started before this call is
/// written (or failed), at most `wait`.
pub(crate) async fn wait_all(wait: Duration) {
    let _ = tokio::time::timeout(wait, WRITING.acquire_many(AT_ONCE)).await;
}
