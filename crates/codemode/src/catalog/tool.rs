//! The `Tool` trait: how the engine runs one tool.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::ToolSpec;
use crate::receipt::Caller;

/// The future a tool returns. It must not block the thread it is polled on:
/// the engine polls it once on the VM thread (so an in-memory tool answers
/// without a thread hop) and moves it to the tool runtime when it is not
/// ready. Blocking work belongs in `tokio::task::spawn_blocking`.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'static>>;

/// A tool the engine can call. Implementations are registered on the
/// [`EngineBuilder`](crate::EngineBuilder) and shared across runs.
///
/// The arguments have already passed the gate and been validated against
/// `spec().input_schema`.
pub trait Tool: Send + Sync + 'static {
    /// The tool's description. Called once, at registration.
    fn spec(&self) -> ToolSpec;

    /// Runs one call. Dropping the future cancels the call (at a deadline or
    /// timeout); tools that start processes must kill them on drop.
    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture;
}

/// What a tool gets besides its arguments.
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolContext {
    /// The workspace root, absolute and canonical; file tools resolve every
    /// path against it and refuse paths outside it.
    pub workspace: Arc<PathBuf>,
    /// The run the call belongs to.
    pub run_id: Arc<str>,
    /// The call's sequence number in the run (1-based).
    pub seq: u64,
    /// Who made the call.
    pub caller: Caller,
    /// What tool calls may not change or read, and how `bash` is confined
    /// (docs/SECURITY.md).
    pub confinement: Arc<crate::sandbox::Confinement>,
    /// Who answers questions the tool asks the user during this call (MCP
    /// elicitation); `None` declines them all.
    pub elicitor: Option<Arc<dyn super::Elicitor>>,
    /// Where a journaled run's `write` and `edit` keep what they replace,
    /// for `codemode rollback` (`None`: not kept).
    pub(crate) undo: Option<Arc<crate::journal::UndoLog>>,
    /// Set for a rollback's calls only: `write` restores the file by this
    /// plan instead of writing its `content` (tools/restore.rs).
    pub(crate) restore: Option<Arc<crate::journal::undo::RestorePlan>>,
    /// The call's span, when its run is traced (telemetry/mod.rs): an MCP
    /// server's `tools/call` carries it as `traceparent`.
    pub(crate) trace: Option<crate::telemetry::TraceContext>,
    /// For a tool that waits for its durable start itself
    /// (`ToolSpec::waits_for_durable_start`) in a journaled run: whether
    /// the call's start is durable, once it is known. `None`: the tool may
    /// change things at once (its start is durable already, or the run
    /// keeps no journal).
    pub(crate) durable_start: Option<DurableStart>,
}

/// Whether a call's `start` line is durable, for a tool that prepares
/// while the journal writes it (`ToolSpec::waits_for_durable_start`).
#[derive(Clone, Debug)]
pub(crate) struct DurableStart(tokio::sync::watch::Receiver<Option<bool>>);

/// The dispatcher's end of a [`DurableStart`].
pub(crate) struct DurableStartSender(tokio::sync::watch::Sender<Option<bool>>);

impl DurableStart {
    /// A gate and the sender that opens (`true`) or shuts (`false`) it.
    pub(crate) fn new() -> (DurableStart, DurableStartSender) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (DurableStart(rx), DurableStartSender(tx))
    }

    /// `true` once the start is durable: the tool may change things now;
    /// `false` when it will not be (the journal failed, or the call was
    /// dropped): the tool must not start its change.
    pub(crate) async fn wait(mut self) -> bool {
        matches!(self.0.wait_for(Option::is_some).await.as_deref(), Ok(Some(true)))
    }
}

impl DurableStartSender {
    /// Tells the tool whether its start is durable.
    pub(crate) fn send(&self, durable: bool) {
        let _ = self.0.send(Some(durable));
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("workspace", &self.workspace)
            .field("run_id", &self.run_id)
            .field("seq", &self.seq)
            .field("caller", &self.caller)
            .field("confinement", &self.confinement)
            .field("elicitor", &self.elicitor.as_ref().map(|_| "..."))
            .field("trace", &self.traceparent())
            .finish()
    }
}

impl ToolContext {
    /// A context for a call in `workspace` (absolute and canonical) with the
    /// workspace's default [`Confinement`](crate::sandbox::Confinement).
    pub fn new(workspace: PathBuf, run_id: &str, seq: u64, caller: Caller) -> ToolContext {
        let confinement = Arc::new(crate::sandbox::Confinement::for_workspace(&workspace));
        ToolContext {
            workspace: Arc::new(workspace),
            run_id: Arc::from(run_id),
            seq,
            caller,
            confinement,
            elicitor: None,
            undo: None,
            restore: None,
            trace: None,
            durable_start: None,
        }
    }

    /// The call's span as a `traceparent` value (W3C Trace Context), when
    /// its run is traced: a tool that calls further services passes it
    /// on.
    pub fn traceparent(&self) -> Option<String> {
        self.trace.map(|t| t.traceparent())
    }
}

/// A tool's successful result; becomes `{content, metadata, truncated}`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolOutput {
    /// The result as JSON: a string for text, or any structured value.
    pub content: Value,
    /// Extra facts about the result (sizes, continuation offsets), or `None`.
    pub metadata: Option<Value>,
    /// Set when the tool cut its own output (a window or page ending
    /// before the end, an output tail): becomes the envelope's `truncated`
    /// ([`Truncation::by_tool`]). A tool that cuts must say so here, the
    /// one field programs check. Default: `None`.
    ///
    /// [`Truncation::by_tool`]: crate::receipt::Truncation::by_tool
    pub truncated: Option<crate::receipt::Truncation>,
}

impl ToolOutput {
    /// A result with no metadata.
    pub fn new(content: impl Into<Value>) -> Self {
        ToolOutput { content: content.into(), metadata: None, truncated: None }
    }

    /// A result with metadata.
    pub fn with_metadata(content: impl Into<Value>, metadata: Value) -> Self {
        ToolOutput { content: content.into(), metadata: Some(metadata), truncated: None }
    }

    /// This result, cut by its tool as `cut` says (`None`: whole).
    pub fn cut(mut self, cut: Option<crate::receipt::Truncation>) -> Self {
        self.truncated = cut;
        self
    }
}

/// A tool's failure; the program sees a `ToolError` whose message is
/// `message`, of kind `timeout` when the tool ran out of its own time
/// ([`ToolError::timeout`]), else of kind `failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ToolError {
    /// What went wrong and, where possible, what to do instead.
    pub message: String,
    /// The tool stopped because a time limit of its own passed (bash's
    /// `timeout`): the call's kind is `timeout`, as for the engine's
    /// per-tool timeout.
    pub timed_out: bool,
    /// Whether the call may be made again, by a tool's or server's limits
    /// with a `retry` policy (docs/LIMITS.md). Default: [`RetryHint::No`].
    pub retry: RetryHint,
}

/// Whether a failed call may be made again under a `retry` policy
/// (docs/LIMITS.md, "Retries").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryHint {
    /// Not again: the failure is the tool's answer.
    #[default]
    No,
    /// The way to the tool failed (an MCP server's connection was lost or
    /// could not be made): the call may or may not have run, so it is
    /// made again only for a tool that is safe to repeat (read-only,
    /// `idempotentHint`, or `[tools.NAME] idempotent = true`).
    Transport,
    /// The tool's server answered that the call did not run and may be
    /// made again, after `after` when it said how long to wait.
    Server {
        /// The wait the server asked for.
        after: Option<std::time::Duration>,
    },
}

impl ToolError {
    /// A failure with `message` (kind `failed`).
    pub fn new(message: impl Into<String>) -> Self {
        ToolError { message: message.into(), timed_out: false, retry: RetryHint::No }
    }

    /// A failure because the tool's own time limit passed, with `message`
    /// (kind `timeout`).
    pub fn timeout(message: impl Into<String>) -> Self {
        ToolError { message: message.into(), timed_out: true, retry: RetryHint::No }
    }

    /// This error with `retry` saying whether the call may be made again.
    pub fn retry(mut self, retry: RetryHint) -> Self {
        self.retry = retry;
        self
    }

    /// The `ToolError.kind` the program sees: `timeout` or `failed`.
    pub(crate) fn kind(&self) -> &'static str {
        if self.timed_out { "timeout" } else { "failed" }
    }
}

/// The arguments object as the tool's `Args` type. The gate has already
/// checked them against the tool's JSON Schema, so a failure here means the
/// schema and the type disagree; the message says so rather than panic.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(args: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::new(format!("arguments: {e}")))
}
