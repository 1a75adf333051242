//! [`Error`]: the one error type a host can use for everything codemode's
//! library returns, and each part's own error type, for hosts that match on
//! the details. Each part's type converts into [`Error`] (`?` works), and
//! its message says what was wrong and what to do.
//!
//! A program's failure is not an `Error`: it is a receipt with
//! `status: "failed"` and an `error` naming its kind
//! ([`RunError`](crate::receipt::RunError)).

pub use crate::catalog::CatalogError;
pub use crate::config::PolicyError;
pub use crate::engine::BuildError;
pub use crate::gate::ApproverError;
pub use crate::journal::StoreError;
#[cfg(unix)]
pub use crate::mcp::{ConfigError as McpConfigError, McpError};
pub use codemode_program::{BatchError, NormaliseError};

/// Anything codemode's library can fail with, outside a run's receipt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine could not be built (a field of the builder was wrong).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A policy (`codemode.toml`) could not be read or is wrong.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Tools could not form a catalog (a duplicate or invalid name).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// An approver failed to answer.
    #[error(transparent)]
    Approver(#[from] ApproverError),
    /// A journal store could not do what was asked.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An MCP server could not be reached or answered wrongly.
    #[cfg(unix)]
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// An MCP configuration is wrong.
    #[cfg(unix)]
    #[error(transparent)]
    McpConfig(#[from] McpConfigError),
    /// A batch (`{"batch": ...}`) is malformed.
    #[error(transparent)]
    Batch(#[from] BatchError),
}
