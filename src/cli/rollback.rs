//! `codemode rollback RUN_ID [--force] [--json]`: puts back, newest change
//! first, every file a run's `write` and `edit` calls changed or made,
//! each through the gate as a `write` (docs/JOURNAL.md, "Undo
//! (rollback)").

use codemode::receipt::ErrorKind;
use codemode::run::{RollbackOptions, RollbackReport};

use super::engine_args::EngineArgs;

/// Arguments of `codemode rollback`.
#[derive(Debug, clap::Args)]
pub(crate) struct RollbackArgs {
    /// The run to undo, as its receipt and `codemode runs list` show it.
    run_id: String,
    /// Restore files changed since the run too (their changes since are
    /// lost); without it they are left alone and named.
    #[arg(long)]
    force: bool,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode rollback`. Exit 0 when every file the run left was
/// restored (or there was nothing left to undo), 1 when a file was left
/// alone or could not be restored, 2 bad invocation (journaling off), 5
/// an unknown run or one still running.
pub(crate) fn rollback(args: RollbackArgs) -> anyhow::Result<u8> {
    args.engine.refuse_pause("a rollback")?;
    let engine = args.engine.build()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let options = RollbackOptions::new().force(args.force);
    let report = match rt.block_on(engine.rollback(&args.run_id, options)) {
        Ok(report) => report,
        Err(e) => {
            if args.json {
                let error = serde_json::json!({"error": {"kind": e.kind, "message": e.message}});
                super::print_stdout(&format!("{error}\n"))?;
            }
            eprintln!("codemode: {}", super::run::printable(&e.message));
            return Ok(match e.kind {
                ErrorKind::NotResumable => super::EXIT_NOT_RESUMABLE,
                ErrorKind::Invocation => super::EXIT_USAGE,
                _ => 1,
            });
        }
    };
    let mut report = report;
    let saved = match report.receipt.take() {
        Some(receipt) => {
            let (receipt, saved) = super::save_receipt(&engine, receipt);
            report.receipt = Some(receipt);
            saved
        }
        None => None,
    };
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["receipt"] = serde_json::json!(saved);
        super::print_stdout(&(serde_json::to_string_pretty(&value)? + "\n"))?;
    } else {
        super::print_stdout(&shown(&report, saved.as_deref()))?;
    }
    if let Some(id) = &report.rollback_run_id {
        engine.apply_retention(id);
    }
    Ok(if report.changed_since.is_empty() && report.failed.is_empty() { 0 } else { 1 })
}

/// The report as lines of text.
fn shown(report: &RollbackReport, saved: Option<&str>) -> String {
    let p = |s: &str| super::run::printable(s).into_owned();
    let mut out = String::new();
    if report.nothing_left {
        out.push_str(&format!(
            "nothing left to undo in run {}: no file it changed is still to restore\n",
            report.run_id
        ));
    }
    for (what, paths) in [
        ("restored", &report.restored),
        ("removed (the run made it)", &report.removed),
        ("already as before the run", &report.as_before),
    ] {
        for path in paths {
            out.push_str(&format!("{what}: {}\n", p(path)));
        }
    }
    for path in &report.changed_since {
        out.push_str(&format!(
            "left alone: {} changed since the run (--force restores it, losing those changes)\n",
            p(path)
        ));
    }
    for c in &report.compensated {
        out.push_str(&format!("compensated: call {} {} by {}\n", c.seq, p(&c.tool), p(&c.by)));
    }
    for (path, why) in &report.failed {
        out.push_str(&format!("not restored: {}: {}\n", p(path), p(why)));
    }
    for call in &report.not_undone {
        out.push_str(&format!("not undone: call {} {}: {}\n", call.seq, p(&call.tool), p(&call.reason)));
    }
    for warning in &report.warnings {
        out.push_str(&format!("warning: {}\n", p(warning)));
    }
    if let Some(id) = &report.rollback_run_id {
        out.push_str(&format!("rollback run {id}"));
        if let Some(path) = saved {
            out.push_str(&format!("; receipt {}", p(path)));
        }
        out.push('\n');
    }
    out
}
