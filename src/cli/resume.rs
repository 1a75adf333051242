//! `codemode resume RUN_ID [--allow SEQ]... [--deny SEQ]... [--reason TEXT]
//! [--json]`: decides the pending calls of a paused run and goes on.

use codemode::journal::Decided;
use codemode::{ErrorKind, RenderOptions};

use super::engine_args::EngineArgs;

/// Arguments of `codemode resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The paused run's id, as its receipt and `codemode runs list` show it.
    run_id: String,
    /// Allow the pending call with this seq (repeat, or comma-separate).
    #[arg(long, value_name = "SEQ", value_delimiter = ',')]
    allow: Vec<u64>,
    /// Deny the pending call with this seq: the program gets a ToolError
    /// of kind `denied` it can catch (repeat, or comma-separate).
    #[arg(long, value_name = "SEQ", value_delimiter = ',')]
    deny: Vec<u64>,
    /// Why the calls were denied, shown to the program and in the receipt.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print the full receipt as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode resume`. Exit codes as `run`, and 5 when the run id
/// cannot be resumed (unknown, ended, held by another process,
/// interrupted: final, do not retry).
pub(crate) fn resume(args: ResumeArgs) -> anyhow::Result<u8> {
    let json = args.json;
    let engine = args.engine.clone().approve_by_default("pause").build().inspect_err(|e| {
        if json {
            let error = serde_json::json!({"error": {"kind": "invocation", "message": format!("{e:#}")}});
            let _ = super::print_stdout(&format!("{error}\n"));
        }
    })?;
    let reason = args.reason.clone().unwrap_or_else(|| "denied on resume".to_owned());
    let decisions: Vec<(u64, Decided)> = args
        .allow
        .iter()
        .map(|&seq| (seq, Decided::Allow))
        .chain(args.deny.iter().map(|&seq| (seq, Decided::Deny(reason.clone()))))
        .collect();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let receipt = rt.block_on(engine.resume(&args.run_id, &decisions));

    let kind = receipt.error.as_ref().map(|e| e.kind);
    let status = receipt.status;
    // A refusal before anything ran leaves the run's saved receipt alone.
    let refused_up_front = matches!(kind, Some(ErrorKind::NotResumable | ErrorKind::Invocation))
        || (kind == Some(ErrorKind::Divergence) && receipt.calls.is_empty());
    if args.json {
        super::print_stdout(&(receipt.to_json_pretty() + "\n"))?;
    } else {
        let (receipt, saved) =
            if refused_up_front { (receipt, None) } else { super::save_receipt(&engine, receipt) };
        let options =
            RenderOptions { include_value: false, receipt_path: saved.as_deref(), ..Default::default() };
        eprint!("codemode: {}", super::run::printable(&receipt.render(&options)));
        if receipt.status == codemode::RunStatus::Completed || !receipt.value.is_null() {
            let value = match &receipt.value {
                serde_json::Value::String(s) => s.clone(),
                v => serde_json::to_string_pretty(v)?,
            };
            super::print_stdout(&(value + "\n"))?;
        }
    }
    Ok(match kind {
        Some(ErrorKind::NotResumable) => super::EXIT_NOT_RESUMABLE,
        Some(ErrorKind::Invocation) => super::EXIT_USAGE,
        _ => status.exit_code(),
    })
}
