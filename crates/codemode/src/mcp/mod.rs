//! MCP servers as tools (DESIGN.md §7): the configuration, catalog names,
//! the schema cache, the client pool on rmcp, and the catalog tool.
//! This is the only module that imports rmcp; its errors become
//! [`McpError`] variants here.
//!
//! The engine-facing surface:
//! - [`McpConfig::load`] reads `.mcp.json` (trusted, with its
//!   [`source`](McpConfig::source) path; a host sets
//!   [`trusted`](McpConfig::trusted) false for a file it found rather than
//!   was given);
//! - [`McpPool::new`] makes a pool that starts nothing;
//! - [`McpPool::servers`] / [`McpPool::cached_tools`] never start a server;
//! - [`McpPool::connect`] starts one (after the [`ConnectCheck`]) and
//!   returns its tools as [`McpTool`]s, which implement
//!   [`Tool`](crate::Tool) and call back into the pool;
//! - [`McpPool::changes`] moves when a tool list changes;
//! - [`McpPool::shutdown`] ends and reaps every server.
//!
//! See docs/MCP.md.

mod cache;
mod config;
pub(crate) mod connection;
pub(crate) mod content;
mod dialect;
mod era;
mod error;
pub(crate) mod lone_surrogates;
pub mod naming;
pub mod oauth;
mod pool;
mod progress;
mod requests;
#[cfg(feature = "http")]
mod streamable_http;
mod tool;

pub use cache::default_cache_dir;
pub use config::{
    ConfigError, DEFAULT_MAX_TOTAL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, MAX_SERVER_NAME_LEN, MIN_REDACTED_LEN,
    McpConfig, REDACTED, ServerConfig, Transport, WORKSPACE_CONFIG_FILES, input_variable,
    redact_known_secrets, workspace_config_file,
};
pub use connection::{INHERITED_ENV, MAX_JSON_DEPTH, STDERR_TAIL, STDIN_CLOSE_GRACE};
pub use content::{CONTENT_RULE, MAX_BINARY_CHARS};
pub use era::Era;
pub use error::McpError;
pub use pool::{
    ConnectCheck, ConnectFuture, MAX_BACKOFF, MAX_INPUT_ROUNDS, McpPool, PoolOptions, STABLE_AFTER,
    ServerState, ServerStatus,
};
pub use tool::McpTool;
