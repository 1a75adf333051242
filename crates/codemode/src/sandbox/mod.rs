//! Confinement of what tools run (DESIGN.md §10, docs/SECURITY.md): the
//! bash sandbox profile and the paths tool calls may not change or read.
//!
//! [`Confinement`] is computed once when the engine is built, from the
//! configuration file (its `[sandbox]` table, the file itself and hook
//! programs, [`ConfigFile`](crate::config::ConfigFile)), the
//! approver command, the MCP configuration file and the workspace (`.git/`
//! and `.codemode/`), and handed to every tool call in
//! [`ToolContext::confinement`](crate::catalog::ToolContext::confinement).
//!
//! Under a confining profile each `bash` call runs through the sandbox
//! launcher of the `codemode-sandbox` crate (the `codemode-sandbox`
//! binary, or `codemode __sandbox-exec`), found as that crate says
//! ([`set_launcher`], [`LAUNCHER_ENV`]).

mod network_holder;
mod spare_launcher;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use network_holder::NetworkHolder;
pub use spare_launcher::SpareLauncher;
pub(crate) use spare_launcher::start_launcher;

pub(crate) use codemode_sandbox::find_launcher;
pub use codemode_sandbox::{LAUNCHER_ENV, SandboxProfile, SandboxSettings, launcher, set_launcher};

pub use codemode_base::{DEFAULT_KILL_GRACE, HIDDEN_NAME};

/// What tool calls may not change or read, and how bash is confined.
/// Every path is absolute and canonical (or, for a path that does not
/// exist yet, absolute beneath the canonical workspace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The workspace root.
    pub workspace: PathBuf,
    /// Files and folders writer tools (write, edit, bash) cannot change; a
    /// folder covers everything beneath it. The loaded policy and MCP files,
    /// every file a hook or approver command names and the folders that
    /// hold them, `<workspace>/.git` and the git folder it names (a `.git`
    /// file's `gitdir:`, a link, its `commondir`), `<workspace>/.codemode`. What a rule
    /// lifts for one tool is in [`Confinement::lifted`].
    pub protected: Vec<PathBuf>,
    /// Folders tools cannot read either: the engine's run state (the
    /// state folder with every workspace's runs, or the host's spill
    /// folder, and a local journal folder; all outside the workspace, and
    /// covered in bash's sandbox) and `<workspace>/.codemode` (where
    /// earlier versions kept run state). A run may still read its own spill
    /// files, in [`Confinement::own_spill_folder`].
    pub hidden: Vec<PathBuf>,
    /// Where runs' folders go: `<spill_root>/<run_id>/`, spill files in its
    /// `spill/` ([`Confinement::own_spill_folder`]; outside the workspace
    /// for an engine's calls).
    pub spill_root: PathBuf,
    /// The bash sandbox.
    pub sandbox: SandboxSettings,
    /// Grace period between SIGTERM and SIGKILL when a process group ends.
    pub kill_grace: Duration,
    /// Protections lifted for one tool: `(tool, protected path)`, from an
    /// allow rule naming the protection (`write(.git/**)`) or, for `bash`,
    /// `[sandbox] writable`. The gate decides per call; tools use this as
    /// their second line ([`Confinement::protection_for`]).
    pub lifted: Vec<(String, PathBuf)>,
    /// Folders outside the workspace (or inside it under `read-only`) the
    /// sandbox binds writable: `[sandbox] writable` as the engine settled
    /// it, a worktree's git folders when it names `.git`, and
    /// [`Confinement::command_cache`].
    pub writable: Vec<PathBuf>,
    /// The folder commands keep caches in between runs of this workspace
    /// (`XDG_CACHE_HOME`, `npm_config_cache`, `PIP_CACHE_DIR`, ... point
    /// into it in a sandboxed command's environment); `None` without a
    /// sandbox or a cache folder.
    pub command_cache: Option<PathBuf>,
    /// The sandbox launcher, resolved (symlinks followed) once when the
    /// engine was built, so that swapping a link to it later changes
    /// nothing; `None` looks it up at each call (see `locate.rs`).
    pub launcher: Option<PathBuf>,
    /// The policy's deny rules with a path pattern on a search tool
    /// (`grep_files(secrets/**)`, `file_search(*.pem)`): besides refusing
    /// a search whose `path` they match, they keep what they match out of
    /// every search of that tool ([`Confinement::search_denies`]), so that
    /// a search of the whole workspace does not show a denied folder.
    pub search_denied: Vec<crate::rule::Rule>,
    /// Where each sandboxed bash call's private `TMPDIR` is made:
    /// `bash-tmp` beside the runs' folder ([`command_tmp_root_in`]), beneath the
    /// hidden run state, which no `[sandbox] writable` entry of any engine
    /// may name and no command can see: where those folders go is decided
    /// by nothing a command can change (the process's `TMPDIR` is not
    /// used). The launcher binds each call's folder back, writable, into
    /// the cover of the hidden folder.
    pub command_tmp_root: PathBuf,
    /// The user and network namespace the engine's sandboxed bash calls
    /// share with the network off, started on the first one
    /// ([`NetworkHolder`]); clones share it.
    pub network_holder: NetworkHolder,
    /// The launcher started ahead of the engine's next sandboxed bash
    /// call, from its second on ([`SpareLauncher`]); clones share it.
    pub spare_launcher: SpareLauncher,
}

/// [`Confinement::command_tmp_root`] of a confinement whose runs' folders
/// go in `spill_root` (by its real path), with `hidden` folders:
/// `bash-tmp` beside it when its parent is hidden (the state folder's
/// `workspaces/<workspace>/`, a workspace's `.codemode`), so the runs'
/// folder holds runs only; else (a spill folder a host named, hidden
/// itself) `<spill_root>/.bash-tmp`, a name no run id has, which run
/// listings and pruning pass by.
pub fn command_tmp_root_in(spill_root: &Path, hidden: &[PathBuf]) -> PathBuf {
    match spill_root.parent() {
        Some(parent) if hidden.iter().any(|h| parent.starts_with(h)) => parent.join("bash-tmp"),
        _ => spill_root.join(".bash-tmp"),
    }
}

impl Confinement {
    /// The one folder of run state a run may read: `<spill_root>/<run_id>/spill`,
    /// where its spill files are. The run's journal and receipt sit beside
    /// it, in `<spill_root>/<run_id>/`, out of the program's reach like
    /// every other run's.
    pub fn own_spill_folder(&self, run_id: &str) -> PathBuf {
        own_spill_folder(&self.spill_root, run_id)
    }

    /// The default confinement of `workspace` (canonical) for a tool
    /// called outside an engine: `.git` and `.codemode` protected,
    /// `.codemode` hidden, spill files under `.codemode/runs`, the default
    /// sandbox and grace period. An engine's calls get its own, with run
    /// state outside the workspace (`EngineBuilder::build`).
    pub fn for_workspace(workspace: &Path) -> Confinement {
        let codemode = workspace.join(".codemode");
        Confinement {
            workspace: workspace.to_path_buf(),
            protected: vec![workspace.join(".git"), codemode.clone()],
            hidden: vec![codemode.clone()],
            spill_root: codemode.join("runs"),
            sandbox: SandboxSettings::default(),
            kill_grace: DEFAULT_KILL_GRACE,
            lifted: Vec::new(),
            writable: Vec::new(),
            command_cache: None,
            launcher: None,
            search_denied: Vec::new(),
            command_tmp_root: command_tmp_root_in(&codemode.join("runs"), std::slice::from_ref(&codemode)),
            network_holder: NetworkHolder::default(),
            spare_launcher: SpareLauncher::default(),
        }
    }

    /// Whether a deny rule keeps `rel` (a path relative to the workspace,
    /// `/`-separated, as rules see paths) out of `tool`'s results.
    pub fn search_denies(&self, tool: &str, rel: &str) -> bool {
        self.search_denied.iter().any(|r| r.matches(tool, Some(rel)))
    }

    /// The protected path that covers `path` (absolute), if any.
    pub fn protection_of(&self, path: &Path) -> Option<&Path> {
        self.protected.iter().map(PathBuf::as_path).find(|p| path.starts_with(p))
    }

    /// The protected path that covers `path` (absolute) for `tool`: like
    /// [`Confinement::protection_of`], minus the protections
    /// [`Confinement::lifted`] lifts for `tool`.
    pub fn protection_for(&self, tool: &str, path: &Path) -> Option<&Path> {
        self.protected
            .iter()
            .map(PathBuf::as_path)
            .filter(|p| !self.lifted.iter().any(|(t, l)| t == tool && l == p))
            .find(|p| path.starts_with(p))
    }

    /// The paths `tool` may not change: [`Confinement::protected`] minus
    /// what [`Confinement::lifted`] lifts for it (for bash: the paths its
    /// sandbox keeps read-only).
    pub fn protected_for(&self, tool: &str) -> Vec<PathBuf> {
        self.protected
            .iter()
            .filter(|p| !self.lifted.iter().any(|(t, l)| t == tool && l == *p))
            .cloned()
            .collect()
    }

    /// The hidden folder that covers `path` (absolute), if any: one of
    /// [`Confinement::hidden`], or any folder named `.codemode` beneath the
    /// workspace (a nested workspace's receipts are as private as this
    /// one's).
    pub fn hidden_of<'a>(&'a self, path: &'a Path) -> Option<&'a Path> {
        if let Some(listed) = self.hidden.iter().map(PathBuf::as_path).find(|p| path.starts_with(p)) {
            return Some(listed);
        }
        // The outermost folder named `.codemode` beneath the workspace.
        path.ancestors()
            .take_while(|a| a.starts_with(&self.workspace) && *a != self.workspace)
            .filter(|a| a.file_name().is_some_and(|n| n == HIDDEN_NAME))
            .last()
    }
}

/// The folder of run `run_id`'s spill files under the runs folder `root`:
/// `<root>/<run_id>/spill` (see [`Confinement::own_spill_folder`]).
pub(crate) fn own_spill_folder(root: &std::path::Path, run_id: &str) -> PathBuf {
    root.join(run_id).join(SPILL_FOLDER)
}

/// The name of a run folder's subfolder of spill files.
pub(crate) const SPILL_FOLDER: &str = "spill";
