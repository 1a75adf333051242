//! What the engine protects and how it confines bash, worked out once when
//! it is built (docs/SECURITY.md): the policy as it applies (links to hook
//! files resolved, a trusted MCP configuration's connections allowed), the
//! protected paths with what each is (the configuration file's own, its
//! hooks' files, and more), and the [`Confinement`] every tool call gets
//! (the file's `[sandbox]` among it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::ConfigFile;
use crate::gate::Policy;
use crate::gate::protection::{NamedFiles, Protection};
use crate::mcp::{McpConfig, PoolOptions};
use crate::sandbox::{Confinement, SandboxProfile};

/// Settles `policy` before anything reads it: hook files reached through a
/// link are replaced by their real path, and a trusted `mcp`
/// configuration's servers get allow rules for their connections.
pub(super) fn settle_policy(workspace: &Path, policy: &mut Policy, mcp: Option<&McpConfig>) {
    resolve_hook_files(workspace, policy);
    if let Some(config) = mcp {
        allow_trusted_connections(config, policy);
    }
}

/// The protections of an engine over the canonical `workspace` with
/// `config` (its policy settled), its MCP configuration and options, the
/// files its approver names, and its run state in `state`; and the
/// [`Confinement`] its tool calls get. The sandbox launcher is looked up
/// once, here.
///
/// # Errors
/// A `[sandbox] writable` entry that cannot apply, named
/// ([`super::sandbox_writable::settle`]).
pub(super) fn confine(
    workspace: &Path,
    config: &ConfigFile,
    mcp: Option<(&McpConfig, &PoolOptions)>,
    approver_files: Vec<PathBuf>,
    state: &super::run_state::RunStateFolders,
) -> Result<(Vec<Protection>, Arc<Confinement>), String> {
    let launcher = (config.sandbox.settings.profile != SandboxProfile::Off)
        .then(|| crate::sandbox::find_launcher().ok())
        .flatten()
        .and_then(|l| std::fs::canonicalize(l).ok());
    let (mcp_servers, mcp_server_folders) = mcp_server_files(workspace, mcp.map(|(config, _)| config));
    let named = NamedFiles {
        config_file: config.source.clone(),
        hooks: config.hook_files(workspace),
        mcp_config: mcp.and_then(|(config, _)| config.source.clone()),
        approver: approver_files,
        mcp_servers,
        mcp_server_folders,
        workspace_hooks: workspace_hooks(workspace, config),
        other: decisive_files(workspace, launcher.as_deref(), mcp.and_then(|(_, o)| o.cache_dir.as_deref())),
    };
    let mut protections = crate::gate::protection::protections(workspace, &named);
    // The git folder the workspace uses, wherever its `.git` points.
    // And the files its configuration includes from the workspace (made
    // when missing and bash may write the workspace: the sandbox mounts
    // only what exists read-only).
    let make_missing = config.sandbox.settings.profile == SandboxProfile::WorkspaceWrite;
    let git = crate::gate::git_metadata::workspace_git_dirs(workspace).into_iter();
    for git in git.chain(crate::gate::git_includes::workspace_includes(workspace, make_missing)) {
        if !protections.iter().any(|p| p.path == git.path) {
            protections.push(git);
        }
    }
    // Where earlier versions kept run state in the workspace (old data).
    let mut hidden = vec![workspace.join(codemode_base::HIDDEN_NAME)];
    // Run state: outside the workspace, where no tool path leads, and
    // hidden all the same: the sandbox covers it with an empty folder, and
    // a state folder the workspace holds (a workspace that is the home
    // folder) is protected too.
    for folder in &state.hidden {
        if folder.starts_with(workspace) {
            protections.push(Protection {
                path: folder.clone(),
                what: "codemode's run state".to_owned(),
                missing_for: None,
            });
        }
        hidden.push(folder.clone());
    }
    // The user's MCP login tokens: a command could read them and hand them
    // to the program (docs/SECURITY.md, "MCP OAuth tokens").
    // Also by its resolved path: a config folder reached through a link
    // (dotfiles) is read through the link's target.
    if let Ok(tokens) = crate::mcp::oauth::user_token_dir() {
        if let Ok(real) = std::fs::canonicalize(&tokens)
            && real != tokens
        {
            hidden.push(real);
        }
        hidden.push(tokens);
    }
    // A `.codemode` that is a link to a folder inside the workspace: its
    // target holds the receipts (spill writes refuse the link itself).
    let legacy = workspace.join(codemode_base::HIDDEN_NAME);
    if let Ok(real) = std::fs::canonicalize(&legacy)
        && real != legacy
        && real.starts_with(workspace)
    {
        protections.push(Protection {
            path: real.clone(),
            what: "the folder `.codemode` links to".to_owned(),
            missing_for: None,
        });
        hidden.push(real);
    }
    // What decides calls also outside the workspace: the files hooks and
    // MCP servers run there (protected paths cover the workspace's).
    let decisive: Vec<Protection> =
        protections.iter().cloned().chain(commands_outside(workspace, config, mcp.map(|(c, _)| c))).collect();
    let writable = super::sandbox_writable::settle(
        workspace,
        &config.sandbox.writable,
        &decisive,
        &hidden,
        config.sandbox.settings.profile == SandboxProfile::WorkspaceWrite,
    )?;
    let command_cache = match config.sandbox.settings.profile {
        SandboxProfile::Off => None,
        // Checked as a folder `writable` names (an `XDG_CACHE_HOME` set
        // to a folder that holds run state or the trust record).
        _ => super::sandbox_writable::command_cache(workspace).filter(|cache| {
            let write_workspace = config.sandbox.settings.profile == SandboxProfile::WorkspaceWrite;
            let checked = super::sandbox_writable::outside_allowed(
                "(the command cache)",
                cache,
                workspace,
                &decisive,
                &hidden,
                write_workspace,
            );
            checked.map_err(|e| tracing::warn!("no cache folder for commands: {e}")).is_ok()
        }),
    };
    // By the run state's real path (a state folder the user reaches
    // through a link): the root is opened with no link on its way.
    let command_tmp_root = crate::sandbox::command_tmp_root_in(
        &std::fs::canonicalize(&state.spill_root).unwrap_or_else(|_| state.spill_root.clone()),
        &hidden,
    );
    let confinement = Confinement {
        protected: protections.iter().map(|p| p.path.clone()).collect(),
        lifted: crate::gate::protection::lifted_protections(
            workspace,
            &protections,
            &writable.lifted,
            &config.policy.rules.allow,
        ),
        writable: writable.folders.into_iter().chain(command_cache.clone()).collect(),
        command_cache,
        hidden,
        spill_root: state.spill_root.clone(),
        command_tmp_root,
        sandbox: config.sandbox.settings,
        kill_grace: config.sandbox.kill_grace,
        launcher,
        search_denied: config
            .policy
            .rules
            .deny
            .iter()
            .filter(|r| r.pattern.is_some() && SEARCH_TOOLS.contains(&r.tool.as_str()))
            .cloned()
            .collect(),
        ..Confinement::for_workspace(workspace)
    };
    Ok((protections, Arc::new(confinement)))
}

/// The native tools that walk the workspace and show what they find.
const SEARCH_TOOLS: [&str; 2] = ["grep_files", "file_search"];

/// A trusted MCP configuration's servers start without an approval: an
/// allow rule `mcp_connect__<server>` for each enabled server, added once
/// here, so the gate's own rules apply it (deny rules still refuse, ask
/// rules still ask, hooks still run, a hook's rewrite is judged the same
/// way) and calls pay nothing for it. `Engine::policy` shows these rules.
///
/// A trusted file's `autoApprove` / `alwaysAllow` lists become allow rules
/// `mcp__<server>__<tool>` the same way ([`McpConfig::auto_approve_rules`]);
/// an untrusted file's make none, so a workspace cannot approve the tools
/// of the servers it configures.
fn allow_trusted_connections(config: &McpConfig, policy: &mut Policy) {
    if !config.trusted {
        return;
    }
    let connections = config.enabled().map(|server| crate::mcp::naming::connect_name(&server.name));
    for name in connections.chain(config.auto_approve_rules()) {
        if let Ok(rule) = crate::gate::Rule::parse(&name)
            && !policy.rules.allow.contains(&rule)
        {
            policy.rules.allow.push(rule);
        }
    }
}

/// Hook arguments that reach a file through a symbolic link inside the
/// workspace (`sh hooks/guard.sh` with `hooks -> real-hooks`) are replaced
/// by the file's real path, once, so that the file that is protected is the
/// one that runs: a program could otherwise point the link elsewhere. The
/// program keeps its own name, with only its folder resolved: an
/// interpreter reached through a link (`.venv/bin/python`) finds its
/// environment by the path it was started by, and the link and its folder
/// are protected instead.
fn resolve_hook_files(workspace: &Path, policy: &mut Policy) {
    for hook in &mut policy.hooks {
        for (i, arg) in hook.command.iter_mut().enumerate() {
            let lexical = workspace.join(arg.as_str());
            if !lexical.starts_with(workspace) || !lexical.is_file() {
                continue;
            }
            let real = if i == 0 {
                let folder = lexical.parent().and_then(|d| std::fs::canonicalize(d).ok());
                folder.zip(lexical.file_name()).map(|(d, name)| d.join(name))
            } else {
                std::fs::canonicalize(&lexical).ok()
            };
            if let Some(real) = real
                && real != lexical
            {
                *arg = real.display().to_string();
            }
        }
    }
}

/// Files the hooks of the workspace's own `codemode.toml` name, when the
/// engine's configuration was read from another file (or none): a later
/// run may load that one, so a program must not rewrite its hooks now. A
/// file that does not parse names nothing.
fn workspace_hooks(workspace: &Path, config: &ConfigFile) -> Vec<PathBuf> {
    let own = workspace.join("codemode.toml");
    if !own.is_file() || std::fs::canonicalize(&own).ok() == config.source {
        return Vec::new();
    }
    ConfigFile::load(&own).map(|own| own.hook_files(workspace)).unwrap_or_default()
}

/// What the hooks of `config` and the stdio servers of `loaded` and of
/// the workspace's own MCP file run outside the workspace (files, and
/// folders a server's `env` names), read as [`command_files`] reads the
/// workspace's with `/` for the workspace: so that no `[sandbox]
/// writable` folder holds or lies in one (a server's `~/mcp/server.js`,
/// a `PATH` entry where a planted `node` would run instead; attack test:
/// `review_35.rs`). The root itself is left out.
///
/// [`command_files`]: codemode_base::command_files::command_files
fn commands_outside(workspace: &Path, config: &ConfigFile, loaded: Option<&McpConfig>) -> Vec<Protection> {
    let everywhere = Path::new("/");
    let mut paths: Vec<(PathBuf, &str)> = Vec::new();
    for hook in &config.policy.hooks {
        let found = codemode_base::command_files::command_files(&hook.command, workspace, everywhere);
        paths.extend(found.files.into_iter().map(|f| (f, "a file a hook runs")));
    }
    let own = crate::mcp::workspace_config_file(workspace)
        .filter(|f| f.is_file())
        .and_then(|f| McpConfig::load_in(&f, Some(workspace)).ok());
    for mcp in loaded.into_iter().chain(own.as_ref()) {
        let pins = mcp.command_pins(everywhere);
        paths.extend(pins.files.into_iter().map(|f| (f, "a file an MCP server runs")));
        paths.extend(pins.folders.into_iter().map(|(f, _)| (f, "a folder an MCP server's env names")));
    }
    paths
        .into_iter()
        .filter(|(path, _)| !path.starts_with(workspace) && path.parent().is_some())
        .map(|(path, what)| Protection { path, what: what.to_owned(), missing_for: None })
        .collect()
}

/// Files the stdio servers of `loaded` and of the workspace's own MCP
/// config file (`.mcp.json`, else `.cursor/mcp.json`, else
/// `.vscode/mcp.json`) run (a later run may load that one), and the
/// workspace folders their `env` names.
fn mcp_server_files(workspace: &Path, loaded: Option<&McpConfig>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    use crate::gate::protection::{server_env_folders, server_files};
    let mut files = loaded.map(|c| server_files(c, workspace)).unwrap_or_default();
    let mut folders = loaded.map(|c| server_env_folders(c, workspace)).unwrap_or_default();
    let Some(own) = crate::mcp::workspace_config_file(workspace) else { return (files, folders) };
    let own_is_loaded = loaded.and_then(|c| c.source.clone()) == std::fs::canonicalize(&own).ok();
    if own.is_file()
        && !own_is_loaded
        && let Ok(config) = McpConfig::load_in(&own, Some(workspace))
    {
        files.extend(server_files(&config, workspace));
        folders.extend(server_env_folders(&config, workspace));
    }
    (files, folders)
}

/// Files that decide later runs besides the configuration's own: the
/// codemode binary that launches the bash sandbox (a program that replaced
/// it would run the next bash call unconfined), the user's trust record
/// folder, the MCP login tokens' folder (a forged login would send the
/// server's calls on another account) and the MCP schema cache.
///
/// The trust record's folder and the cache are made when they lie inside
/// the workspace and do not exist yet, so that they are protected (and
/// mounted read-only in the sandbox) before a program could create them
/// with forged contents.
fn decisive_files(
    workspace: &Path,
    launcher: Option<&Path>,
    mcp_cache: Option<&Path>,
) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    if let Some(launcher) = launcher {
        out.push((launcher.to_path_buf(), "the codemode binary that launches the bash sandbox".to_owned()));
    }
    if let Ok(exe) = std::env::current_exe() {
        out.push((exe, "the running codemode binary".to_owned()));
    }
    for (folder, what) in decisive_folders(mcp_cache) {
        // Where it leads, as the kernel resolves it, not how it is
        // written: a home named through a link outside (`/home/me` ->
        // `/data/me`, the workspace), a dangling link to a folder not made
        // yet, `..` after a link. Made now when that is in the workspace,
        // so that there is a folder to protect before a command makes one
        // of its own there.
        let leads = codemode_base::links::resolve_as_kernel(&folder);
        if leads.starts_with(workspace) && !leads.exists() {
            let _ = std::fs::create_dir_all(&leads);
        }
        // Protected by both names: the tools compare paths beneath the
        // canonical workspace.
        if leads != folder {
            out.push((leads, what.to_owned()));
        }
        out.push((folder, what.to_owned()));
    }
    out
}

/// The user's folders that decide later calls, wherever the workspace is:
/// the trust record's, the MCP login tokens' and the MCP schema cache
/// (the engine's, else the default one, which a later run with MCP
/// servers reads).
pub(super) fn decisive_folders(mcp_cache: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    let trust = crate::trust::TrustStore::user().ok().map(|store| store.dir().to_path_buf());
    let tokens = crate::mcp::oauth::user_token_dir().ok();
    let cache = mcp_cache.map(Path::to_path_buf).or_else(crate::mcp::default_cache_dir);
    [
        (trust, "the trust record's folder"),
        (tokens, "the MCP login tokens' folder"),
        (cache, "the MCP schema cache"),
    ]
    .into_iter()
    .filter_map(|(folder, what)| Some((folder?, what)))
    .collect()
}
