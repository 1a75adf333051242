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

/// Runs blocking file work off the async threads and flattens a panic into
/// a tool error.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::catalog::ToolError> + Send + 'static,
) -> Result<T, crate::catalog::ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(crate::catalog::ToolError::new(format!("the tool's worker failed: {e}"))))
}
