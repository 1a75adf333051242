//! The configuration file, `codemode.toml`, and its owner: [`ConfigFile`].
//!
//! The file holds more than the gate applies. Its parts and who reads them:
//!
//! - the [`Policy`] (mode, posture, `[rules]`, `[tools.*]`, `[[hooks.*]]`):
//!   the gate, on every call;
//! - `[sandbox]` ([`SandboxConfig`]): the engine, when it is built, into the
//!   [`Confinement`](crate::sandbox::Confinement) every tool call gets;
//! - where the file is and the files its hooks name (`source`,
//!   `protected_paths`): the engine, which protects them from tool calls;
//! - `[journal]` ([`JournalSettings`]) and `[limits]` ([`LimitSettings`]):
//!   the host, which turns the url into a store and applies the limits under
//!   its own flags, as the CLI does; the engine does not read them.
//!
//! Every function that must say what a field means decides each field by
//! name, so that a new field does not compile until it is decided: what an
//! untrusted file keeps ([`ConfigFile::without_grants`], `grants.rs`) and
//! what a resume compares (`digest.rs`, the JSON a journal's header
//! records).
//!
//! Reading the file is in `read.rs` ([`ConfigFile::from_toml`],
//! [`ConfigFile::load`], [`PolicyError`]).

mod digest;
mod grants;
mod read;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::gate::Policy;
pub use crate::journal::JournalSettings;
pub use crate::sandbox::SandboxSettings;
pub use codemode_base::limit_settings::LimitSettings;

pub(crate) use digest::policy_json;
pub use read::PolicyError;

/// A `codemode.toml`, read ([`ConfigFile::load`], [`ConfigFile::from_toml`])
/// or built in Rust ([`ConfigFile::default`] and its fields), and handed to
/// [`EngineBuilder::config`](crate::EngineBuilder::config).
///
/// The default is the safe one: the default [`Policy`] (work mode, posture
/// ask), the `workspace-write` sandbox without network, the default journal
/// and limits, read from no file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    /// What the gate applies: mode, posture, rules, per-tool settings,
    /// hooks. Default: [`Policy::default`].
    pub policy: Policy,
    /// How bash commands are confined (`[sandbox]`). Default:
    /// [`SandboxConfig::default`].
    pub sandbox: SandboxConfig,
    /// Where runs' journals go and how long runs are kept (`[journal]`).
    /// The engine does not read it: a host turns it into a store
    /// ([`open_store`](crate::journal::open_store), then
    /// [`EngineBuilder::journal`](crate::EngineBuilder::journal)) and prunes
    /// by its retention, as the CLI does. Default: the local folder, 200
    /// runs or 7 days.
    pub journal: JournalSettings,
    /// The run limits `[limits]` sets (docs/LIMITS.md). The engine does not
    /// read them: a host applies them to its [`Limits`](crate::Limits)
    /// ([`LimitSettings::apply`]), as the CLI does under its flags.
    /// Default: none set.
    pub limits: LimitSettings,
    /// The file this was read from (canonical), set by [`ConfigFile::load`].
    /// The engine protects it from tool calls. Default: none.
    pub source: Option<PathBuf>,
    /// Files tool calls may not change (absolute, canonical): the file
    /// itself and every file a hook command names (its program and the
    /// arguments that are files), filled in by [`ConfigFile::load`]. The
    /// engine protects them, and the folders holding the hook files, from
    /// writer tools and the bash sandbox (docs/SECURITY.md). Default: none.
    pub protected_paths: Vec<PathBuf>,
}

/// The `[sandbox]` table: how bash commands are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The profile and whether commands may use the network. Default:
    /// `workspace-write`, no network.
    pub settings: SandboxSettings,
    /// What the bash sandbox may write besides the workspace and its
    /// `$TMPDIR` (`writable`, as written: relative to the workspace,
    /// absolute, or `~/...`): a protected path in the workspace (the
    /// explicit way to lift a protection for bash; `.git` of a worktree
    /// also lifts its git folders), or a folder outside the workspace
    /// made writable. Checked when the engine is built (`sandbox_writable`
    /// in the engine): an entry that cannot apply is an error naming it.
    /// Default: none.
    pub writable: Vec<String>,
    /// Grace period between SIGTERM and SIGKILL when a bash command's
    /// processes are ended (`kill_grace_ms`). Default: 2 s
    /// ([`DEFAULT_KILL_GRACE`](crate::sandbox::DEFAULT_KILL_GRACE)).
    pub kill_grace: Duration,
}

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            settings: SandboxSettings::default(),
            writable: Vec::new(),
            kill_grace: codemode_base::DEFAULT_KILL_GRACE,
        }
    }
}

impl ConfigFile {
    /// The default file with `policy`.
    pub fn with_policy(policy: Policy) -> ConfigFile {
        ConfigFile { policy, ..ConfigFile::default() }
    }

    /// The workspace files this file's hooks name
    /// ([`command_files`](codemode_base::command_files), from the
    /// workspace, the hooks' working folder; existing or not) and the
    /// hooks whose files cannot all be known: what `codemode trust` pins
    /// with the file.
    pub fn command_pins(&self, workspace: &Path) -> crate::trust::CommandPins {
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let mut pins = crate::trust::CommandPins::default();
        for hook in &self.policy.hooks {
            let found = codemode_base::command_files::command_files(&hook.command, &workspace, &workspace);
            pins.add(&format!("hook `{}`", hook.command.join(" ")), found);
        }
        pins
    }

    /// The files this file's hooks name: what [`ConfigFile::load`] found
    /// (from the file's folder) and what [`ConfigFile::command_pins`]
    /// finds from the workspace (missing files included, so that their
    /// folder is protected before a program creates them).
    pub(crate) fn hook_files(&self, workspace: &Path) -> Vec<PathBuf> {
        let loaded = self.protected_paths.iter().filter(|p| Some(*p) != self.source.as_ref()).cloned();
        let mut out: Vec<PathBuf> = Vec::new();
        for file in loaded.chain(self.command_pins(workspace).files) {
            if !out.contains(&file) {
                out.push(file);
            }
        }
        out
    }
}
