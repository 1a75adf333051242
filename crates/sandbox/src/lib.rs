//! codemode-sandbox: the bash tool's confinement (docs/DESIGN.md §10,
//! docs/SECURITY.md).
//!
//! A leaf of the workspace: the engine asks it to run one `bash -c`
//! command confined ([`launcher::LaunchSpec`]), and it knows nothing of
//! the engine. Each confined call runs through the launcher ([`launcher`]):
//! a process that unshares the user, PID, mount (and network) namespaces,
//! mounts a fresh `/proc`, applies Landlock and a seccomp filter on Unix
//! sockets, and runs bash as the namespace's first process, so every
//! descendant ends with the call. The launcher is the small
//! `codemode-sandbox` binary of this crate, or the `codemode` binary
//! re-executed as `codemode __sandbox-exec` (both call
//! [`launcher::main_if_launcher`] first thing); [`find_launcher`] says
//! which is used.

#![deny(unsafe_code)]

#[cfg(target_os = "linux")]
mod ipc_filter;
pub mod launcher;
mod locate;
#[cfg(target_os = "linux")]
mod mount_api;
#[cfg(target_os = "linux")]
mod mounts;

pub use locate::{LAUNCHER_ENV, find_launcher, set_launcher};
#[cfg(target_os = "linux")]
pub use mounts::open_folder_without_links;

/// How `bash` commands are confined (`[sandbox] profile` in
/// `codemode.toml`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SandboxProfile {
    /// Writes only beneath the workspace (minus protected paths) and a
    /// private temporary folder. The default.
    #[default]
    WorkspaceWrite,
    /// Writes only to a private temporary folder.
    ReadOnly,
    /// No OS sandbox. Allowed only under the `full-access` posture, and said
    /// in every receipt.
    Off,
}

impl SandboxProfile {
    /// The name used in `codemode.toml` and receipts: `workspace-write`,
    /// `read-only` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxProfile::WorkspaceWrite => "workspace-write",
            SandboxProfile::ReadOnly => "read-only",
            SandboxProfile::Off => "off",
        }
    }

    /// Parses [`SandboxProfile::as_str`]'s names; `None` for anything else.
    pub fn parse(name: &str) -> Option<SandboxProfile> {
        match name {
            "workspace-write" => Some(SandboxProfile::WorkspaceWrite),
            "read-only" => Some(SandboxProfile::ReadOnly),
            "off" => Some(SandboxProfile::Off),
            _ => None,
        }
    }
}

/// The `[sandbox]` table of `codemode.toml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// The profile. Default: [`SandboxProfile::WorkspaceWrite`].
    pub profile: SandboxProfile,
    /// Whether bash commands may use the network. Default: false (a new,
    /// empty network namespace: even 127.0.0.1 is unreachable).
    pub network: bool,
    /// Whether bash commands may open Unix sockets, and so reach the
    /// host's daemons (`/run/docker.sock`), agents (ssh-agent) and
    /// terminal multiplexers (tmux): `[sandbox] host_ipc`. Default: false
    /// (a seccomp filter refuses `socket(AF_UNIX)`), whatever `network`
    /// says.
    pub host_ipc: bool,
}
