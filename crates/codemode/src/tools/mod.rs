//! Native tools, one file each, all listed in [`native`].

mod bash;
#[cfg(test)]
mod contract_tests;
mod edit;
mod file_lock;
mod file_search;
mod grep_files;
mod path_glob;
pub(crate) mod preimage;
mod read;
pub(crate) mod restore;
mod workspace;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::catalog::Tool;

/// The workspace-relative path a file tool opens (for `fuzzing`, which
/// compares the gate's spelling of a path with it).
pub(crate) use workspace::beneath_rel;

/// The native tools, in catalog order.
/// What a native tool's one-line signature adds after `//`, when its
/// schemas cannot say it (its default reading, its window).
pub(crate) fn signature_note(name: &str) -> Option<&'static str> {
    (name == "read").then_some(read::SIGNATURE_NOTE)
}

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

pub(crate) use crate::catalog::parse_args;

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
/// `f` gets a flag that is set when the call passes its per-call timeout
/// (the engine's [`Abandon`] signal) or when the returned future is dropped
/// unfinished (its run was cancelled or reached its deadline). A blocking
/// thread cannot be stopped from outside, so `f` must look at the flag
/// (with [`cancelled`]) right before its commit point and give up instead
/// of committing; work before that point must leave nothing behind that
/// matters (a temp file deleted on drop).
///
/// At a timeout the engine waits for `f` to commit or give up, so the call
/// is reported `timeout` exactly when it did not change the file (a commit
/// already under way completes and the call is reported done, with a
/// note). When the run ends instead, the call is reported `in_flight`: a
/// commit that had passed its check in that instant still completes.
/// Folders a `write` created for its file before the flag was set stay.
pub(crate) async fn blocking_cancellable<T: Send + 'static>(
    f: impl FnOnce(&AtomicBool) -> Result<T, crate::catalog::ToolError> + Send + 'static,
) -> Result<T, crate::catalog::ToolError> {
    /// Sets the flag when dropped: when the future is dropped unfinished,
    /// and harmlessly after the work ended.
    struct SetOnDrop(Arc<AbandonState>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.flag.store(true, Ordering::SeqCst);
        }
    }

    // Under the engine's per-call timeout the flag is also the call's
    // `Abandon` signal: at the timeout the engine sets it and waits for
    // this work to commit or give up, so what it reports is what happened.
    let state = Abandon::watch_current().unwrap_or_default();
    let guard = SetOnDrop(Arc::clone(&state));
    let result = blocking(move || f(&state.flag)).await;
    drop(guard);
    result
}

tokio::task_local! {
    /// The abandon signal of the call whose tool future is being polled.
    static ABANDON: Abandon;
}

/// How the engine tells a tool call that it passed its timeout, for tools
/// whose work has a commit point ([`blocking_cancellable`]): instead of
/// dropping the call at once (which could race a commit already under way
/// and report `timeout` for a file that changed), the engine sets the
/// signal and waits for the work to commit (the call succeeded) or give up
/// (it timed out). Tools that never look at it are dropped at the timeout
/// as before.
#[derive(Clone, Default)]
pub(crate) struct Abandon(Arc<AbandonState>);

#[derive(Default)]
struct AbandonState {
    /// Set to abandon the call's work; read by the work itself.
    flag: AtomicBool,
    /// Set when the call's work watches the flag.
    watched: AtomicBool,
}

impl Abandon {
    /// A signal for a call of `spec`'s tool; `None` for a read-only tool,
    /// which has no change to commit (and so costs nothing per call).
    pub(crate) fn for_tool(spec: &crate::catalog::ToolSpec) -> Option<Abandon> {
        (!spec.is_read_only()).then(Abandon::default)
    }

    /// `future` with the signal (if any) in reach of the work it starts.
    pub(crate) fn scope(
        signal: &Option<Abandon>,
        future: crate::catalog::ToolFuture,
    ) -> crate::catalog::ToolFuture {
        match signal {
            Some(signal) => Box::pin(ABANDON.scope(signal.clone(), future)),
            None => future,
        }
    }

    /// Tells the call's work to give up at its commit point.
    pub(crate) fn signal(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
    }

    /// Whether the call's work watches the signal (and so will end soon
    /// after it).
    pub(crate) fn watched(&self) -> bool {
        self.0.watched.load(Ordering::SeqCst)
    }

    /// The signal of the call being polled, marked watched.
    fn watch_current() -> Option<Arc<AbandonState>> {
        ABANDON
            .try_with(|a| {
                a.0.watched.store(true, Ordering::SeqCst);
                a.0.clone()
            })
            .ok()
    }
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

    /// The engine's own tools compile their schemas on first use
    /// (`catalog::Compile::OnFirstUse`), so a schema of theirs that did not
    /// compile would show only when called: this compiles every one.
    #[test]
    fn every_native_and_synthetic_schema_compiles() {
        let (search, _) = crate::catalog::tool_search::ToolSearch::new();
        let mut tools = native();
        tools.push(Arc::new(search));
        for tool in tools {
            let spec = tool.spec();
            crate::catalog::schema_validator(&spec.input_schema)
                .unwrap_or_else(|e| panic!("the schema of `{}` does not compile: {e}", spec.name));
        }
    }

    #[tokio::test]
    async fn finished_work_is_not_cancelled() {
        let out = blocking_cancellable(|flag: &AtomicBool| Ok(cancelled(flag))).await;
        assert!(!out.unwrap());
        let out = blocking_cancellable(|_: &AtomicBool| -> Result<(), _> { panic!("on purpose") }).await;
        assert!(out.unwrap_err().message.contains("the tool's worker failed"));
    }
}
