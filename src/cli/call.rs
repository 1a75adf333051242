//! `codemode call TOOL [ARGS_JSON]`: one direct call through the same gate
//! as a program's calls (caller `direct`); prints the envelope, or the
//! error, as JSON on stdout.

use anyhow::Context;
use serde_json::Value;

use super::engine_args::EngineArgs;

/// Arguments of `codemode call`.
#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    /// The tool's exact name.
    tool: String,
    /// The arguments as one JSON object [default: {}].
    #[arg(value_name = "ARGS_JSON")]
    args: Option<String>,
    /// Print the call's receipt too: {"call", "envelope" | "error"}.
    #[arg(long)]
    receipt: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode call`. Exit 0 when the tool ran and returned, 1 when it
/// was refused, denied or failed, 2 for a bad invocation.
pub(crate) fn call(args: CallArgs) -> anyhow::Result<u8> {
    let arguments: Value = match &args.args {
        None => Value::Object(Default::default()),
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
        let why = outcome.call.error.as_deref().unwrap_or("the call did not succeed");
        eprintln!(
            "codemode: {} {}: {}",
            args.tool,
            super::run::printable(&format!("{:?}", outcome.call.status).to_lowercase()),
            super::run::printable(why)
        );
    }
    Ok(if outcome.is_ok() { 0 } else { 1 })
}
