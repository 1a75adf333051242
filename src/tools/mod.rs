//! Native tools, one file each, all listed in [`native`].

mod bash;
#[cfg(test)]
mod contract_tests;
mod edit;
mod file_search;
mod grep_files;
mod read;
mod workspace;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::catalog::Tool;

/// The native tools, in catalog order.
pub(crate) fn native() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read::Read),
        Arc::new(write::Write),
        Arc::new(edit::Edit),
        Arc::new(file_search::FileSearch),
        Arc::new(grep_files::GrepFiles),
        Arc::new(bash::Bash),
    ]
}

/// The arguments object as the tool's `Args` type. The gate has already
/// checked them against the tool's JSON Schema, so a failure here means the
/// schema and the type disagree; the message says so rather than panic.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    args: serde_json::Value,
) -> Result<T, crate::catalog::ToolError> {
    serde_json::from_value(args).map_err(|e| crate::catalog::ToolError::new(format!("arguments: {e}")))
}

/// Runs blocking file work off the async threads and flattens a panic into
/// a tool error.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::catalog::ToolError> + Send + 'static,
) -> Result<T, crate::catalog::ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(crate::catalog::ToolError::new(format!("the tool's worker failed: {e}"))))
}

/// Runs blocking work that changes something at one commit point (a
/// rename), like [`blocking`], but lets it stop when the call is abandoned.
///
/// `f` gets a flag that is set as soon as the returned future is dropped
/// unfinished: the call timed out (the engine's per-tool timeout drops the
/// tool's future) or its run was cancelled. A blocking thread cannot be
/// stopped from outside, so `f` must look at the flag (with [`cancelled`])
/// right before its commit point and give up instead of committing; work
/// before that point must leave nothing behind that matters (a temp file
/// deleted on drop). So a call reported `timeout` or cancelled does not
/// change the file afterwards.
///
/// The remaining window: a commit that started before the flag was set (the
/// check passed, then the call was abandoned while the rename ran)
/// completes, so a call abandoned in that instant may still have changed the
/// file. Folders a `write` created for its file before the flag was set
/// stay too.
pub(crate) async fn blocking_cancellable<T: Send + 'static>(
    f: impl FnOnce(&AtomicBool) -> Result<T, crate::catalog::ToolError> + Send + 'static,
) -> Result<T, crate::catalog::ToolError> {
    /// Sets the flag when dropped: when the future is dropped unfinished,
    /// and harmlessly after the work ended.
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let flag = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(Arc::clone(&flag));
    let result = blocking(move || f(&flag)).await;
    drop(guard);
    result
}

/// Whether the call was abandoned; see [`blocking_cancellable`].
pub(crate) fn cancelled(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst)
}

/// What work that stopped because its call was abandoned says. Nobody reads
/// it in a receipt (the call already ended as timed out or cancelled).
pub(crate) const ABANDONED: &str =
    "the call was abandoned (timed out or cancelled) before it changed the file";

/// The error of work that stopped because its call was abandoned.
pub(crate) fn abandoned() -> crate::catalog::ToolError {
    crate::catalog::ToolError::new(ABANDONED)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_future_sets_the_flag_the_work_sees() {
        let (started_tx, started_rx) = mpsc::channel();
        let (seen_tx, seen_rx) = mpsc::channel();
        let work = blocking_cancellable(move |flag: &AtomicBool| {
            started_tx.send(()).unwrap();
            // Wait, as a long write does, until the call is abandoned.
            while !cancelled(flag) {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen_tx.send(()).unwrap();
            Err::<(), _>(abandoned())
        });
        // A timeout drops the future, as the engine's per-tool timeout does.
        let timed_out = tokio::time::timeout(Duration::from_millis(50), work).await;
        assert!(timed_out.is_err());
        started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        seen_rx.recv_timeout(Duration::from_secs(5)).expect("the work saw the flag");
    }

    #[tokio::test]
    async fn finished_work_is_not_cancelled() {
        let out = blocking_cancellable(|flag: &AtomicBool| Ok(cancelled(flag))).await;
        assert!(!out.unwrap());
        let out = blocking_cancellable(|_: &AtomicBool| -> Result<(), _> { panic!("on purpose") }).await;
        assert!(out.unwrap_err().message.contains("the tool's worker failed"));
    }
}
