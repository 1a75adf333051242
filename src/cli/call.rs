//! `codemode call TOOL [ARGS_JSON|-]`: one direct call through the same
//! gate as a program's calls (caller `direct`); prints the envelope, or
//! the error, as JSON on stdout. `-` reads the arguments from stdin.

use anyhow::Context;
use serde_json::Value;

use super::engine_args::EngineArgs;

/// Arguments of `codemode call`.
#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    /// The tool's exact name.
    tool: String,
    /// The arguments as one JSON object, or - to read it from stdin
    /// (at most 64 MiB) [default: {}].
    #[arg(value_name = "ARGS_JSON")]
    args: Option<String>,
    /// Print the call's receipt too: {"call", "envelope" | "error"}.
    #[arg(long)]
    receipt: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode call`. Exit 0 when the tool ran and returned, 1 when it
/// was refused, denied or failed, 2 for a bad invocation, 3 when it passed
/// the deadline (`--deadline`: the call's time, its waits on a person not
/// counted).
pub(crate) fn call(args: CallArgs) -> anyhow::Result<u8> {
    let arguments: Value = match args.args.as_deref() {
        None => Value::Object(Default::default()),
        Some("-") => {
            let text = read_stdin_arguments()?;
            serde_json::from_str(&text).context(
                r#"the arguments read from stdin are not JSON: give one object, e.g. {"path": "README.md"}"#,
            )?
        }
        Some(text) => serde_json::from_str(text)
            .context(r#"ARGS_JSON is not JSON: give one object, e.g. '{"path": "README.md"}'"#)?,
    };
    if !arguments.is_object() {
        anyhow::bail!("ARGS_JSON must be a JSON object, e.g. '{{\"path\": \"README.md\"}}'");
    }
    args.engine.refuse_pause("a direct call")?;
    let engine = args.engine.build()?;
    let outcome = match super::direct_call(&engine, &args.tool, &arguments)? {
        Ok(outcome) => outcome,
        Err(code) => return Ok(code),
    };
    let shown = if args.receipt {
        serde_json::to_value(&outcome)?
    } else if let Some(envelope) = &outcome.envelope {
        envelope.clone()
    } else {
        serde_json::json!({"error": outcome.error})
    };
    super::print_stdout(&(serde_json::to_string_pretty(&shown)? + "\n"))?;
    if !outcome.is_ok() {
        let why = outcome.error_message().unwrap_or("the call did not succeed");
        // The error's kind (`denied`, `refused`, `timeout`: what a
        // program's ToolError says), else the call's status.
        let kind = super::run::printable(outcome.error_kind().unwrap_or(outcome.call.status.as_str()));
        eprintln!("codemode: {} {kind}: {}", args.tool, super::run::printable(why));
    }
    Ok(match outcome.error_kind() {
        _ if outcome.is_ok() => 0,
        // Past the deadline, as `codemode run` exits for a run timed out.
        Some("timeout") if outcome.call.status == codemode::receipt::CallStatus::InFlight => 3,
        _ => 1,
    })
}

/// Most bytes of arguments `codemode call TOOL -` reads from stdin.
const MAX_STDIN_ARGUMENTS: usize = 64 << 20;

/// The arguments text of `codemode call TOOL -`, read from stdin whole.
///
/// # Errors
/// stdin cannot be read, holds more than [`MAX_STDIN_ARGUMENTS`] bytes,
/// or is not UTF-8.
fn read_stdin_arguments() -> anyhow::Result<String> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        super::note!("reading the arguments from stdin; end them with Ctrl-D");
    }
    let bytes = super::read_at_most(std::io::stdin().lock(), MAX_STDIN_ARGUMENTS)
        .context("cannot read the arguments from stdin")?;
    if bytes.len() > MAX_STDIN_ARGUMENTS {
        anyhow::bail!(
            "the arguments read from stdin are over {} MiB: pass large data in a file the tool reads",
            MAX_STDIN_ARGUMENTS >> 20
        );
    }
    String::from_utf8(bytes).context("the arguments read from stdin are not UTF-8 text")
}
