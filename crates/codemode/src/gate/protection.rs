//! The `protected_paths` step: protected and hidden paths (docs/SECURITY.md, "Protected
//! paths"). What decides later calls cannot be changed by a call: writer
//! tools may not change the loaded policy and MCP files, the files a hook,
//! the approver command or an MCP stdio server names and the folders that
//! hold them, the repository's git metadata wherever it is (`.git/`, the
//! git folder a `.git` file or link names, a nested repository's:
//! [`super::git_metadata`]), `.codemode/`, the
//! sandbox launcher, the trust record's folder and the schema cache; no
//! tool may read a `.codemode/` (earlier runs' receipts and spill files)
//! except the run's own spill folder. A posture never lifts a
//! protection; an allow rule for the tool whose pattern starts with the
//! protected path does (`allow = ["write(.git/**)"]`), and only for that
//! tool.
//!
//! The list is built once, when the engine is built ([`protections`]); the
//! step compares the call's path as written and as resolved through
//! symlinks, so neither spelling can dodge it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::policy::{Posture, Rule};
use super::primary::Primary;
use super::{CallRequest, GateContext, Preparation, Step, Verdict};
use crate::sandbox::{Confinement, SandboxProfile};

/// One protected path and what it is, for refusals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protection {
    /// Absolute; a folder covers everything beneath it.
    pub path: PathBuf,
    /// What it is (`the policy file`, `the repository's .git folder`, ...).
    pub what: String,
    /// Set on a file a command run outside the sandbox names that did not
    /// exist when the engine was built: [`file_appeared`] checks it before
    /// that command runs.
    pub missing_for: Option<NamedBy>,
}

/// What the protection step consults besides the policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard<'a> {
    /// Every protection, in the order they were found.
    pub protections: &'a [Protection],
    /// The hidden folders, the workspace and the spill root.
    pub confinement: &'a Confinement,
    /// The run the call belongs to (its own spill folder is readable).
    pub run_id: &'a str,
}

/// Files the engine's configuration names, with what names them.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamedFiles {
    /// The configuration file (`codemode.toml`) the policy was read from.
    pub config_file: Option<PathBuf>,
    /// Files the configuration file's hooks name (its `hook_files`).
    pub hooks: Vec<PathBuf>,
    /// The MCP configuration file, when one was loaded from a file.
    pub mcp_config: Option<PathBuf>,
    /// Files the approver runs or reads (a `cmd:` approver's program and
    /// the arguments that name files).
    pub approver: Vec<PathBuf>,
    /// Files MCP stdio servers run ([`server_files`]), of the loaded MCP
    /// configuration and of the workspace's own `.mcp.json`.
    pub mcp_servers: Vec<PathBuf>,
    /// Workspace folders the `env` of MCP stdio servers names
    /// ([`server_env_folders`]), of the loaded MCP configuration and of the
    /// workspace's own `.mcp.json`: each is protected whole.
    pub mcp_server_folders: Vec<PathBuf>,
    /// Files the hooks of the workspace's own `codemode.toml` name, when
    /// another policy is loaded: a later run may load it.
    pub workspace_hooks: Vec<PathBuf>,
    /// Files that decide later runs besides these, with what they are: the
    /// codemode binary that launches the bash sandbox, the trust record's
    /// folder, the MCP schema cache.
    pub other: Vec<(PathBuf, String)>,
}

/// The files the stdio servers of `config` run
/// ([`McpConfig::command_pins`](crate::mcp::McpConfig::command_pins):
/// their programs, scripts, interpreters and `envFile`s beneath the
/// canonical `workspace`, existing or not), and their `envFile`s outside
/// it.
pub(crate) fn server_files(config: &crate::mcp::McpConfig, workspace: &Path) -> Vec<PathBuf> {
    let mut out = config.command_pins(workspace).files;
    let mut seen: HashSet<PathBuf> = out.iter().cloned().collect();
    for file in config.servers.values().filter_map(|s| s.env_file.as_ref()) {
        if seen.insert(file.clone()) {
            out.push(file.clone());
        }
    }
    out
}

/// The workspace folders the `env` of the stdio servers of `config` names
/// (`PYTHONPATH=lib`, a `PATH` entry, ...: [`CommandPins::folders`](crate::trust::CommandPins::folders)),
/// as named and as resolved. The files such variables name are among
/// [`server_files`].
pub(crate) fn server_env_folders(config: &crate::mcp::McpConfig, workspace: &Path) -> Vec<PathBuf> {
    config.command_pins(workspace).folders.into_iter().map(|(folder, _)| folder).collect()
}

/// Adds each folder of `folders` (beneath the workspace, never the
/// workspace itself: [`server_env_folders`]) to `out`, once, as named and
/// as resolved.
fn add_env_folders(out: &mut Vec<Protection>, seen: &mut HashSet<PathBuf>, folders: &[PathBuf]) {
    for folder in folders.iter().flat_map(|f| [f.clone(), canonical_or(f)]) {
        if seen.insert(folder.clone()) {
            let what = "a folder an MCP server's env names (`PYTHONPATH`, `PATH`, ...)".to_owned();
            out.push(Protection { path: folder, what, missing_for: None });
        }
    }
}

/// Every protection of an engine with `named` files and the canonical
/// `workspace`, in this order: `.git`, `.codemode`, the policy file, the
/// MCP configuration, `named.other`, then files that hooks, the approver
/// and MCP servers run and their folders, then the folders MCP servers'
/// `env` names. A folder that is the workspace itself or holds
/// it is not protected (that would protect everything): a hook kept at the
/// workspace root protects only its own file.
pub(crate) fn protections(workspace: &Path, named: &NamedFiles) -> Vec<Protection> {
    let mut out = Vec::new();
    // The paths in `out`: a lookup costs the same however many came before
    // (many servers naming up to `MAX_FILES` files each were quadratic).
    let mut seen = HashSet::new();
    let mut add_for = |path: PathBuf, what: String, missing_for: Option<NamedBy>| {
        if seen.insert(path.clone()) {
            out.push(Protection { path, what, missing_for });
        }
    };
    add_for(workspace.join(".git"), "the repository's .git folder".into(), None);
    add_for(workspace.join(".codemode"), "codemode's own folder (receipts and spill files)".into(), None);
    if let Some(source) = &named.config_file {
        add_for(source.clone(), "the policy file".into(), None);
    }
    if let Some(mcp) = &named.mcp_config {
        add_for(canonical_or(mcp), "the MCP configuration".into(), None);
    }
    for (path, what) in &named.other {
        add_for(canonical_or(path), what.clone(), None);
    }
    let files = named
        .hooks
        .iter()
        .map(|p| (p, "hook", Some(NamedBy::Hook)))
        .chain(named.workspace_hooks.iter().map(|p| (p, "workspace codemode.toml's hook", None)))
        .chain(named.approver.iter().map(|p| (p, NamedBy::Approver.what(), Some(NamedBy::Approver))))
        .chain(named.mcp_servers.iter().map(|p| (p, NamedBy::McpServer.what(), Some(NamedBy::McpServer))));
    for (file, by, runs) in files {
        // As named and as resolved: a link's folder and its target's.
        for file in [file.clone(), canonical_or(file)] {
            let missing = file.symlink_metadata().is_err();
            let what = format!("a file the {by} names{}", if missing { MISSING_AT_BUILD } else { "" });
            add_for(file.clone(), what, runs.filter(|_| missing));
            // A file that does not exist yet is protected by its path and
            // its folder, so a program cannot create it for the command to
            // run (the outermost missing folder, when its folder is missing
            // too).
            let mut folder = file.parent();
            while let Some(f) = folder
                && !f.exists()
                && let Some(up) = f.parent()
                && !up.exists()
                && !workspace.starts_with(up)
            {
                folder = Some(up);
            }
            if let Some(folder) = folder
                && !workspace.starts_with(folder)
            {
                add_for(folder.to_path_buf(), format!("the folder of a file the {by} names"), None);
            }
        }
    }
    add_env_folders(&mut out, &mut seen, &named.mcp_server_folders);
    out
}

/// How [`protections`] marks a named file that did not exist when the
/// engine was built.
const MISSING_AT_BUILD: &str = " (missing when the engine was built)";

/// What names a file that [`file_appeared`] checks: the hooks, the
/// approver command or an MCP stdio server's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NamedBy {
    /// A hook of the loaded configuration.
    Hook,
    /// The `cmd:` approver.
    Approver,
    /// An MCP stdio server (of any server: the protections do not say which).
    McpServer,
}

impl NamedBy {
    fn what(self) -> &'static str {
        match self {
            NamedBy::Hook => "hook",
            NamedBy::Approver => "approver command",
            NamedBy::McpServer => "MCP server command",
        }
    }
}

/// The first file that `by` names that did not exist when the engine was
/// built and exists now: a tool call of this run created it (through a
/// path the protections could not cover, such as a folder that did not
/// exist either, which the bash sandbox cannot mount read-only), so it
/// must not run outside the sandbox. A stat per such file; none when every
/// named file existed.
pub(crate) fn file_appeared(protections: &[Protection], by: NamedBy) -> Option<&Path> {
    protections
        .iter()
        .filter(|p| p.missing_for == Some(by))
        .map(|p| p.path.as_path())
        .find(|p| p.symlink_metadata().is_ok())
}

/// Whether a file or folder `by` names did not exist when the engine was
/// built (so no protection covers it: [`file_appeared`] checks it when the
/// command starts). No stat.
pub(crate) fn missing_at_build(protections: &[Protection], by: NamedBy) -> bool {
    protections.iter().any(|p| p.missing_for == Some(by))
}

fn canonical_or(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The protections lifted for one tool, as `(tool, path)`: for `bash`, the
/// ones `sandbox_writable` (`[sandbox] writable` as the engine settled it:
/// protected paths) holds; for other tools, the ones an `allow` rule names
/// ([`lifted`]'s test, without a call to cover). The gate still decides
/// each call; tools use this list as a second line.
pub(crate) fn lifted_protections(
    workspace: &Path,
    protections: &[Protection],
    sandbox_writable: &[PathBuf],
    allow: &[Rule],
) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for path in sandbox_writable {
        if protections.iter().any(|p| &p.path == path) {
            out.push(("bash".to_owned(), path.clone()));
        }
    }
    for p in protections {
        let name = p
            .path
            .strip_prefix(workspace)
            .map_or_else(|_| p.path.display().to_string(), |r| r.display().to_string());
        for rule in allow {
            if rule.pattern.as_deref().is_some_and(|pattern| names(pattern, &name)) {
                out.push((rule.tool.clone(), p.path.clone()));
            }
        }
    }
    out
}

/// Applies protected and hidden paths.
pub(crate) struct ProtectedPaths;

impl Step for ProtectedPaths {
    fn name(&self) -> &'static str {
        "protected_paths"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut Preparation) -> Verdict {
        if call.tool == "bash"
            && let Some(verdict) = sandbox_off(call.tool, cx)
        {
            return verdict;
        }
        // Calls without a path (most calls) pay nothing more.
        let Some(primary) = call.primary.filter(|p| !p.command) else { return Verdict::Next };
        let guard = &cx.guard;
        let writer = cx.entry(call.tool).is_some_and(|e| !e.spec.is_read_only());
        let workspace = &guard.confinement.workspace;
        let lexical = workspace.join(&primary.written);
        let paths: Vec<&Path> = std::iter::once(lexical.as_path()).chain(primary.target.as_deref()).collect();
        let own_spill = guard.confinement.own_spill_folder(guard.run_id);
        let shown = |path: &Path| {
            path.strip_prefix(workspace)
                .map_or_else(|_| path.display().to_string(), |r| r.display().to_string())
        };
        for path in &paths {
            // The run's own spill files are readable, never writable (as
            // written, or resolved: the spill folder may be reached
            // through a link).
            let own_read = !writer
                && (path.starts_with(&own_spill)
                    || std::fs::canonicalize(&own_spill).is_ok_and(|real| path.starts_with(real)));
            if let Some(folder) = guard.confinement.hidden_of(path)
                && !own_read
                && !lifted(&cx.policy.rules.allow, call.tool, &shown(folder), primary)
            {
                return Verdict::Refuse(format!(
                    "`{}` is inside `{}`, codemode's own folder (earlier runs' receipts and spill files): \
                     tools cannot read or change it. A run may read its own spill files (the `spill_path` \
                     of its results, under `{}`)",
                    primary.subject(),
                    shown(folder),
                    shown(&own_spill)
                ));
            }
        }
        if !writer {
            return Verdict::Next;
        }
        for path in &paths {
            let nested = super::git_metadata::git_folder_of(workspace, path);
            let Some(protection) =
                guard.protections.iter().find(|p| path.starts_with(&p.path)).or(nested.as_ref())
            else {
                continue;
            };
            let name = shown(&protection.path);
            if lifted(&cx.policy.rules.allow, call.tool, &name, primary) {
                continue;
            }
            let pattern = if protection.path.is_dir() { format!("{name}/**") } else { name.clone() };
            return Verdict::Refuse(format!(
                "`{}` is protected ({}: `{name}`): tool calls cannot change it, whatever the posture. \
                 Change it yourself, or lift this one protection with a rule in a trusted policy file: \
                 allow = [\"{}({pattern})\"]",
                primary.subject(),
                protection.what,
                call.tool
            ));
        }
        Verdict::Next
    }
}

/// Whether an allow rule for `tool` names the protected path `name`
/// (workspace-relative or absolute) and covers every spelling of the
/// call's path: its pattern starts with `name`, up to a `/` or the end. A
/// bare `write` rule or `write(**)` lifts nothing.
fn lifted(allow: &[Rule], tool: &str, name: &str, primary: &Primary) -> bool {
    allow.iter().filter(|r| r.tool == tool).any(|rule| {
        rule.pattern.as_deref().is_some_and(|pattern| names(pattern, name))
            && primary.spellings().all(|s| rule.matches(tool, Some(s)))
    })
}

/// Whether the rule pattern `pattern` names the protected path `name`: its
/// literal start (before any `* ? [ {`) starts with `name`, up to a `/` or
/// the end.
pub(crate) fn names(pattern: &str, name: &str) -> bool {
    let literal = pattern.split(['*', '?', '[', '{']).next().unwrap_or("");
    literal.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `bash` under sandbox profile `off` runs only under posture full-access.
fn sandbox_off(tool: &str, cx: &GateContext<'_>) -> Option<Verdict> {
    let off = cx.guard.confinement.sandbox.profile == SandboxProfile::Off;
    let bash =
        tool == "bash" && cx.entry(tool).is_some_and(|e| e.spec.source == crate::catalog::ToolSource::Native);
    (off && bash && cx.posture != Posture::FullAccess).then(|| {
        Verdict::Refuse(format!(
            "the bash sandbox is off (`[sandbox] profile = \"off\"`), which needs posture full-access; \
             the posture is {}. Use profile workspace-write or read-only, or posture full-access",
            cx.posture.as_str()
        ))
    })
}
