//! `codemode completions SHELL` and `codemode man [--dir DIR]`: the shell
//! completion scripts (clap_complete) and man pages (clap_mangen) of the
//! command line, made from the same definitions as `--help`.

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;

use super::Cli;
use super::deferred::whole_tree;

/// Arguments of `codemode completions`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    shell: clap_complete::Shell,
}

/// Arguments of `codemode man`.
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Write codemode.1 and one page per command (codemode-run.1,
    /// codemode-mcp-serve.1, ...) into DIR instead of printing
    /// codemode.1 on stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script of `args.shell` on stdout. Exit 0.
pub(crate) fn completions(args: &CompletionsArgs) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut whole_tree(Cli::command), "codemode", &mut script);
    super::print_stdout(&String::from_utf8(script).context("the completion script is not UTF-8")?)?;
    Ok(0)
}

/// Prints the man page codemode(1) on stdout, or writes every page into
/// `--dir` and names them on stderr. Exit 0; 2 when the folder cannot be
/// written.
pub(crate) fn man(args: &ManArgs) -> anyhow::Result<u8> {
    let command = whole_tree(Cli::command);
    let Some(dir) = &args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page).context("cannot render the man page")?;
        super::print_stdout(&String::from_utf8_lossy(&page))?;
        return Ok(0);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make the folder {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    super::note!("man pages written in {} (codemode.1 and one per command)", dir.display());
    Ok(0)
}
