//! Native tools, one file each, all listed in [`native`].

mod file_search;
mod read;
mod workspace;

use std::sync::Arc;

use crate::catalog::Tool;

/// The native tools, in catalog order.
pub(crate) fn native() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(read::Read), Arc::new(file_search::FileSearch)]
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
