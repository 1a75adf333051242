//! `codemode mcp serve`: codemode as an MCP server on stdin/stdout
//! (docs/SERVE.md). The engine options are `run`'s; `--approve` puts one
//! approver in place of the person behind the client.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use codemode::serve::{CodeModeServer, ServeOptions};

use super::engine_args::EngineArgs;

/// The environment variable that may hold the request-state key
/// (base64 or raw text of at least 32 bytes).
const STATE_KEY_ENV: &str = "CODEMODE_SERVE_STATE_KEY";

/// Arguments of `codemode mcp serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Also list the native tools (read, write, edit, file_search,
    /// grep_files, bash) as MCP tools; each call passes the same gate.
    #[arg(long)]
    direct_tools: bool,
    /// Seconds a call waits for the person's answer to an approval asked
    /// through the client (elicitation) before it is denied; not counted
    /// against the run's deadline.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    approval_timeout: f64,
    /// File holding the key that signs `requestState` of approvals asked
    /// with `input_required` (2026-07-28 clients), at least 32 bytes;
    /// replicas behind one load balancer need the same key [default:
    /// $CODEMODE_SERVE_STATE_KEY, else a random key per process].
    #[arg(long, value_name = "FILE")]
    state_key_file: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode mcp serve` until the client closes stdin. Exit 0; 2 for
/// a bad invocation or config.
pub(crate) fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let engine = args.engine.clone().approve_by_default("deny").build()?;
    let options = serve_options(&args, engine.workspace())?;
    if engine.journal_store().is_none() && (options.approver.is_none() || options.pause_always) {
        bail!(
            "--journal off: codemode mcp serve pauses runs for a person's approval, which needs a journal; \
             keep the journal, or give --approve deny|allow|cmd:PROGRAM to decide every approval without a person"
        );
    }
    let server = CodeModeServer::new((*engine).clone(), options)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    eprintln!("codemode: serving MCP on stdin/stdout (workspace {})", engine.workspace().display());
    rt.block_on(server.serve_stdio())?;
    Ok(0)
}

/// The server's options from the command line.
fn serve_options(args: &ServeArgs, workspace: &std::path::Path) -> anyhow::Result<ServeOptions> {
    let secs = args.approval_timeout;
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        bail!("--approval-timeout must be a number of seconds between 0 and 86400, got {secs}");
    }
    let mut options = ServeOptions::default();
    options.direct_tools = args.direct_tools;
    options.approval_timeout = Duration::from_secs_f64(secs);
    options.approver = match args.engine.approver_spec().map(str::trim) {
        None => None,
        Some("prompt") => bail!(
            "--approve prompt: stdin and stdout carry MCP here; approvals reach the person through the \
             client (elicitation) or `codemode approve`. Use deny, allow, pause or cmd:PROGRAM, or leave it out"
        ),
        Some(spec) => {
            Some(codemode::approver_from_spec(spec).map_err(anyhow::Error::msg).context("--approve")?)
        }
    };
    options.state_key = state_key(args.state_key_file.as_deref(), workspace)?;
    options.decide_command = format!(
        "codemode approve {{run_id}} --allow {{seqs}}{} (or --deny {{seqs}}), then call execute_tools with {{\"resume\": \"{{run_id}}\"}}",
        args.engine.approve_options()
    );
    Ok(options)
}

/// The request-state key: `--state-key-file`, else the environment, else
/// none (a random key).
/// A key file inside the workspace is refused: a program could read it
/// (and forge approvals' states) or replace it.
fn state_key(file: Option<&std::path::Path>, workspace: &std::path::Path) -> anyhow::Result<Option<Vec<u8>>> {
    let text = match file {
        Some(path) => {
            let real = std::fs::canonicalize(path)
                .with_context(|| format!("--state-key-file {}", path.display()))?;
            if real.starts_with(workspace) {
                bail!(
                    "--state-key-file {}: the key is inside the workspace, where a program could read it and forge \
                     approvals; keep it outside (e.g. in ~/.config/codemode/)",
                    path.display()
                );
            }
            std::fs::read(&real).with_context(|| format!("--state-key-file {}", path.display()))?
        }
        None => match std::env::var(STATE_KEY_ENV) {
            Ok(v) => v.into_bytes(),
            Err(_) => return Ok(None),
        },
    };
    let trimmed: Vec<u8> = text.trim_ascii().to_vec();
    if trimmed.len() < codemode::serve::STATE_KEY_BYTES {
        bail!(
            "the request-state key ({}) has {} bytes; it needs at least {} (e.g. `head -c 32 /dev/urandom | base64`)",
            file.map(|p| p.display().to_string()).unwrap_or_else(|| format!("${STATE_KEY_ENV}")),
            trimmed.len(),
            codemode::serve::STATE_KEY_BYTES
        );
    }
    Ok(Some(trimmed))
}
