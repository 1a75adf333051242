//! `codemode trust [DIR] [--list] [--revoke]`: trust a workspace's
//! `codemode.toml` and `.mcp.json` (docs/SECURITY.md, "Workspace trust").

use std::path::PathBuf;

use anyhow::{Context, bail};
use std::path::Path;

use codemode::trust::{CommandPins, ReadFile, TrustState, TrustStore, WORKSPACE_FILES};

/// Arguments of `codemode trust` (the help text is on `Command::Trust`).
#[derive(Debug, clap::Args)]
pub(crate) struct TrustArgs {
    /// The workspace whose codemode.toml and .mcp.json to trust [default: current directory].
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// List every trusted file and whether it still matches (trusted, changed, missing).
    #[arg(long, conflicts_with_all = ["dir", "revoke"])]
    list: bool,
    /// Remove the trust of DIR's files instead.
    #[arg(long)]
    revoke: bool,
}

/// Runs `codemode trust`; exit 0 when it did what was asked.
pub(crate) fn trust(args: TrustArgs) -> anyhow::Result<u8> {
    let store = TrustStore::user()?;
    if args.list {
        let entries = store.list()?;
        if entries.is_empty() {
            eprintln!("codemode: nothing trusted ({})", store.dir().display());
        }
        for (path, entry) in entries {
            let state = match store.state(&path) {
                Ok(TrustState::Trusted) => "trusted",
                Ok(_) => "changed",
                Err(_) => "missing",
            };
            println!(
                "{state:<8} {}  {}  {}",
                entry.trusted_at,
                &entry.sha256[..12.min(entry.sha256.len())],
                path.display()
            );
        }
        return Ok(0);
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    if args.revoke && !dir.exists() {
        // A workspace since removed: its stale entries go by its path.
        return revoke(&store, &dir, " (and it does not exist)");
    }
    let dir = std::fs::canonicalize(&dir).with_context(|| format!("{}", dir.display()))?;
    if !dir.is_dir() {
        bail!(
            "{} is not a folder: give the workspace folder that holds codemode.toml or .mcp.json",
            dir.display()
        );
    }
    if args.revoke {
        return revoke(&store, &dir, "");
    }
    let files: Vec<PathBuf> = WORKSPACE_FILES.iter().map(|f| dir.join(f)).filter(|p| p.is_file()).collect();
    if files.is_empty() {
        bail!("{} has no {} to trust", dir.display(), WORKSPACE_FILES.join(" or "));
    }
    for file in files {
        // Read once: what is said, what is parsed and the digest recorded
        // all come from these bytes (a file that does not parse is not
        // trusted).
        let file = ReadFile::read_in(&dir, &file)?;
        let (grants, pins) = grants_of(&file, &dir)?;
        let (path, entry) = store.trust(&file, &pins.files)?;
        println!("trusted  {}  sha256 {}", path.display(), entry.sha256);
        for line in grants {
            println!("         {line}");
        }
        for (pinned, digest) in &entry.pinned {
            let shown = Path::new(pinned)
                .strip_prefix(&dir)
                .map_or_else(|_| pinned.clone(), |p| p.display().to_string());
            let digest =
                if digest.len() == 64 { format!("sha256 {}", &digest[..12]) } else { digest.clone() };
            println!("         pins {shown} ({digest}): a change to it revokes this trust");
        }
        for (folder, what) in &pins.folders {
            let shown = folder.strip_prefix(&dir).unwrap_or(folder).display();
            println!(
                "         note: {what} names the folder {shown}: every run protects it, but a folder cannot \
                 be pinned by digest, so a change you make to it yourself does not revoke this trust"
            );
        }
        for line in &pins.undetermined {
            println!(
                "         note: {line}; codemode cannot tell which files it runs, so cannot pin or protect \
                 them (name the script as an argument, without `$`, to pin it)"
            );
        }
    }
    eprintln!("codemode: recorded in {}; any change to a file revokes its trust", store.dir().display());
    Ok(0)
}

/// What the file read as `file` (a `codemode.toml` or an MCP config file)
/// grants once trusted, one line each: the posture, the allow rules, each
/// hook's command, the sandbox settings that widen it; or each MCP
/// server's launch line. And the workspace files its commands name, to pin
/// with it (`dir`, the workspace).
///
/// # Errors
/// The file does not parse (the error names the line).
fn grants_of(file: &ReadFile, dir: &Path) -> anyhow::Result<(Vec<String>, CommandPins)> {
    let text = file.text()?;
    let path = file.path();
    if path.file_name().is_some_and(|n| n != "codemode.toml") {
        let config = codemode::mcp::McpConfig::load_text_in(path, text, Some(dir))
            .with_context(|| format!("{}", path.display()))?;
        let mut lines = Vec::new();
        for rule in config.auto_approve_rules() {
            lines.push(format!("allow {rule} (autoApprove)"));
        }
        for server in config.enabled() {
            lines.push(format!("server {} starts without approval: {}", server.name, server.launch_line()));
        }
        return Ok((lines, config.command_pins(dir)));
    }
    let config = codemode::config::ConfigFile::load_text(path, text)?;
    // Every part decided: a new one does not compile until it is listed
    // here or named with why not. Not listed, though trust grants them
    // (`ConfigFile::without_grants` drops them while untrusted): tool
    // timeouts, `kill_grace_ms`, a `[journal] url`, raised `[limits]`.
    let codemode::config::ConfigFile {
        policy,
        sandbox,
        journal: _,         // its url: not listed
        limits: _,          // raised limits: not listed
        source: _,          // the file itself, named on the `trusted` line
        protected_paths: _, // restrictions
    } = &config;
    let mut lines = vec![format!("posture {}", policy.posture.as_str())];
    if !policy.rules.allow.is_empty() {
        let rules: Vec<String> = policy.rules.allow.iter().map(ToString::to_string).collect();
        lines.push(format!("allow {}", rules.join(", ")));
    }
    for hook in &policy.hooks {
        lines.push(format!("hook runs {}", hook.command.join(" ")));
    }
    if sandbox.settings.profile == codemode::sandbox::SandboxProfile::Off {
        lines.push("sandbox off: bash runs unconfined".to_owned());
    }
    if sandbox.settings.network {
        lines.push("sandbox network on".to_owned());
    }
    for path in &sandbox.writable {
        lines.push(format!("bash may write {path}"));
    }
    Ok((lines, config.command_pins(dir)))
}

/// `--revoke DIR`: removes DIR's entries and says which (or, with `note`
/// after the folder, that there were none); exit 0.
fn revoke(store: &TrustStore, dir: &std::path::Path, note: &str) -> anyhow::Result<u8> {
    let removed = store.revoke(dir)?;
    if removed.is_empty() {
        eprintln!("codemode: nothing was trusted in {}{note}", dir.display());
    }
    for path in removed {
        println!("revoked  {}", path.display());
    }
    Ok(0)
}
