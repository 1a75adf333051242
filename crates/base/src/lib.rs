//! codemode-base: the constants and small helpers every other codemode
//! crate shares. A leaf: it depends on no codemode crate, so a constant
//! needed in two layers never makes one import the other.
//!
//! - names every layer agrees on: [`HIDDEN_NAME`] (codemode's own folder
//!   in a workspace), [`CONNECT_PREFIX`] (an MCP server's connection
//!   permission), [`DEFAULT_KILL_GRACE`];
//! - [`limits`] (`Limits`, every bound a run is held to) and
//!   [`limit_settings`] (the `[limits]` table and the flags);
//! - text: [`display_text`] (untrusted text on one line), [`json_text`]
//!   (JSON made by JavaScript), [`time_text`] (RFC 3339 dates);
//! - files and processes: [`config_file`] (bounded, non-blocking reads of
//!   configuration files), [`command_files`] (the workspace files a
//!   command names), [`links`] (symbolic links on the way to a path),
//!   [`process_group`] (children in a process group of their own, Unix);
//! - [`memory`]: giving freed memory back to the system (glibc);
//! - [`pacing`]: the limits on how a tool or an MCP server is called
//!   (calls in flight, calls per second, retries);
//! - [`run_state`]: where run state (journals, receipts, spill files) is
//!   kept by default, outside every workspace.

#![deny(missing_docs)]
// Denied but for the few `#[allow(unsafe_code)]` blocks, each with a
// SAFETY comment (docs/ARCHITECTURE.md lists them).
#![deny(unsafe_code)]

use std::time::Duration;

pub mod command_files;
pub mod config_file;
pub mod display_text;
pub mod json_text;
pub mod limit_settings;
pub mod limits;
pub mod links;
pub mod memory;
pub mod pacing;
#[cfg(unix)]
pub mod process_group;
pub mod run_state;
pub mod time_text;

/// The name of the folder in a workspace where codemode kept run state
/// before it moved to the state folder ([`run_state`]); still hidden from
/// tools wherever it appears beneath the workspace, for old data.
pub const HIDDEN_NAME: &str = ".codemode";

/// The prefix of an MCP server's connection permission,
/// `mcp_connect__<server>`: a tool name the gate decides before any process
/// of the server starts (docs/MCP.md).
pub const CONNECT_PREFIX: &str = "mcp_connect__";

/// How long a process group gets between SIGTERM and SIGKILL when it is
/// ended: 2 s.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
