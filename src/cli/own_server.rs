//! What keeps `codemode mcp serve` from serving what its host did not
//! mean: a workspace it was never given (the host's own folder, often `/`
//! or the home folder), and its own entry in the workspace's MCP file
//! (which would make it an upstream server of itself).

use std::path::{Path, PathBuf};

use anyhow::bail;
use codemode::mcp::{McpConfig, Transport};

/// Refuses the folder `codemode mcp serve` was started in as its
/// workspace when it is `/` or the home folder: MCP hosts often start
/// servers there, and every tool would then reach the whole disk or home.
/// Only for a workspace not given with `--workspace` (one given is meant).
///
/// # Errors
/// The current folder is `/` or the home folder: how to name a workspace.
pub(crate) fn refuse_implicit_workspace() -> anyhow::Result<()> {
    let Ok(here) = std::env::current_dir().and_then(std::fs::canonicalize) else { return Ok(()) };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(std::env::home_dir)
        .and_then(|h| std::fs::canonicalize(h).ok());
    let what = if here == Path::new("/") {
        "the root folder /"
    } else if home.as_deref() == Some(here.as_path()) {
        "the home folder"
    } else {
        return Ok(());
    };
    bail!(
        "no --workspace given, and the current folder is {what} ({}): MCP hosts often start servers there, and \
         every tool would reach all of it. Name the project: add \"--workspace\", \"/path/to/project\" to the \
         server's args in the host's MCP configuration (e.g. \"args\": [\"mcp\", \"serve\", \"--workspace\", \
         \"/path/to/project\"]), or set the entry's \"cwd\" to the project folder",
        here.display()
    )
}

/// Takes out of `config` every entry that is this codemode's own `mcp
/// serve` over `workspace` (see [`is_own_server`]), recording each in
/// `config.skipped` so that the warnings name it.
pub(crate) fn skip_own_servers(config: &mut McpConfig, workspace: &Path) {
    let own: Vec<String> = config
        .servers
        .values()
        .filter(|s| !s.disabled && is_own_server(&s.transport, workspace))
        .map(|s| s.name.clone())
        .collect();
    for name in own {
        config.servers.remove(&name);
        config.skipped.push((
            name,
            "it is `codemode mcp serve` over this same workspace, codemode itself: it is not its own upstream \
             server (its tools are already here)"
                .to_owned(),
        ));
    }
}

/// Whether `transport` starts `codemode mcp serve` over `workspace`: a
/// stdio command that is this executable, or any program named
/// `codemode`, whose arguments hold `mcp serve`, and whose workspace (its
/// `--workspace`, else its `cwd`, else the current folder) is `workspace`.
/// A workspace that cannot be resolved counts as the same one.
pub(crate) fn is_own_server(transport: &Transport, workspace: &Path) -> bool {
    let Transport::Stdio { command, args, cwd, .. } = transport else { return false };
    let here = std::env::current_dir().unwrap_or_default();
    let start = cwd.as_ref().map_or_else(|| here.clone(), |c| here.join(c));
    let serves = args.windows(2).any(|w| w[0] == "mcp" && w[1] == "serve");
    if !serves || !is_this_program(command, &start) {
        return false;
    }
    let given = args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--workspace") {
        Some("") => args.get(i + 1).cloned(),
        Some(rest) => rest.strip_prefix('=').map(str::to_owned),
        None => None,
    });
    let theirs = given.map_or_else(|| start.clone(), |w| start.join(w));
    match (std::fs::canonicalize(theirs), std::fs::canonicalize(workspace)) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        _ => true,
    }
}

/// Whether `command` (started in `from`) is this executable, or a program
/// named `codemode`.
fn is_this_program(command: &str, from: &Path) -> bool {
    let named = Path::new(command).file_name().is_some_and(|n| n == "codemode");
    let Ok(this) = std::env::current_exe().and_then(std::fs::canonicalize) else { return named };
    let found = if command.contains('/') {
        Some(from.join(command))
    } else {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).map(|d| d.join(command)).find(|p| p.is_file()))
            .unwrap_or_default()
    };
    named || found.and_then(|p| std::fs::canonicalize(p).ok()).is_some_and(|p| p == this)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &str, args: &[&str], cwd: Option<&Path>) -> Transport {
        Transport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Default::default(),
            cwd: cwd.map(Path::to_path_buf),
        }
    }

    #[test]
    fn codemode_mcp_serve_over_the_same_workspace_is_its_own_server() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let here = ws.path();
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        let w = here.to_str().unwrap();
        for own in [
            stdio("codemode", &["mcp", "serve"], Some(here)),
            stdio("/usr/local/bin/codemode", &["-q", "mcp", "serve", "--workspace", w], None),
            stdio(exe, &["mcp", "serve", &format!("--workspace={w}")], None),
            stdio("codemode", &["mcp", "serve", "--workspace", "/no/such/folder"], None),
        ] {
            assert!(is_own_server(&own, here), "{own:?}");
        }
        let o = other.path().to_str().unwrap();
        for not_own in [
            stdio("codemode", &["mcp", "list"], Some(here)),
            stdio("codemode", &["mcp", "serve", "--workspace", o], None),
            stdio("codemode", &["mcp", "serve"], Some(other.path())),
            stdio("npx", &["-y", "@modelcontextprotocol/server-memory"], Some(here)),
            Transport::Http { url: "http://127.0.0.1:1/mcp".into(), headers: Default::default() },
        ] {
            assert!(!is_own_server(&not_own, here), "{not_own:?}");
        }
    }
}
