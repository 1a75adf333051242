//! `codemode batch status BATCH_ID [--json] [--lines]`: where a program
//! batch is, read from its record (`batch_record.rs`) without holding it,
//! so it works from another terminal while the batch runs.

use std::path::Path;

use serde_json::{Value, json};

use super::batch_record::{self, Entry, LineState};
use super::engine_args::EngineArgs;

/// Arguments of `codemode batch status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The batch's id, as `codemode batch --program` printed it.
    batch_id: String,
    /// Print the counts as one JSON object.
    #[arg(long)]
    json: bool,
    /// Print the output line of every line that ended, in input order
    /// (what the batch printed for it), as JSON Lines.
    #[arg(long)]
    lines: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `codemode batch status`.
pub(crate) fn status(args: StatusArgs) -> anyhow::Result<u8> {
    batch_record::check_batch_id(&args.batch_id)?;
    let engine = args.engine.build()?;
    let store_folder = engine.journal_store().and_then(|s| s.folder().map(Path::to_path_buf));
    let folder = store_folder.unwrap_or_else(|| engine.runs_folder().to_path_buf());
    // A batch submitted to the shared store has no local record.
    if !batch_record::path(&folder, &args.batch_id).exists()
        && engine.journal_store().is_some_and(|s| s.batch_queue().is_some())
    {
        return super::batch_workers::status(&engine, &args.batch_id, args.json, args.lines)
            .map_err(|e| anyhow::anyhow!("{e:#}; no batch record in {} either", folder.display()));
    }
    let (entries, held) = batch_record::read(&folder, &args.batch_id)?;
    let summary = summary(&entries, held);
    if args.lines {
        for state in batch_record::states(&entries).into_values() {
            if let LineState::Ended { output, .. } = state {
                super::print_stdout(&format!("{output}\n"))?;
            }
        }
    } else if args.json {
        super::print_stdout(&format!("{summary}\n"))?;
    } else {
        super::print_stdout(&(render(&args.batch_id, &summary) + "\n"))?;
    }
    Ok(0)
}

/// The counts of a batch's record: `{batch_id, lines, completed, failed,
/// paused, running, not_started, held, program, input, created_unix}`.
/// `failed` counts every final status but `completed` (failed,
/// timed_out, cancelled); `running` the lines started and not ended.
fn summary(entries: &[Entry], held: bool) -> Value {
    let Some(Entry::Batch(header)) = entries.first() else {
        return json!({"error": "the record has no header"});
    };
    let (mut completed, mut failed, mut paused, mut running) = (0, 0, 0, 0);
    let states = batch_record::states(entries);
    for state in states.values() {
        match state {
            LineState::Started { .. } => running += 1,
            LineState::Ended { status, .. } if status == "completed" => completed += 1,
            LineState::Ended { status, .. } if status == "paused" => paused += 1,
            LineState::Ended { .. } => failed += 1,
        }
    }
    json!({
        "batch_id": header.batch_id,
        "lines": header.lines,
        "completed": completed,
        "failed": failed,
        "paused": paused,
        "running": running,
        "not_started": header.lines.saturating_sub(states.len()),
        "held": held,
        "program": header.program.path,
        "input": header.input.path,
        "created_unix": header.created_unix,
    })
}

/// The counts for a person: what is done, and what the batch is doing.
fn render(batch_id: &str, s: &Value) -> String {
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let done = n("completed") + n("failed");
    let state = if s["held"] == json!(true) {
        "running now (a process holds it)".to_owned()
    } else if done == n("lines") {
        "finished".to_owned()
    } else {
        format!("stopped; go on with `codemode batch --program ... --batch-id {batch_id}`")
    };
    format!(
        "batch {batch_id}: {done}/{} lines done ({} completed, {} failed), {} paused, {} started and not ended, \
         {} not started; {state}\nprogram: {}\ninput: {}",
        n("lines"),
        n("completed"),
        n("failed"),
        n("paused"),
        n("running"),
        n("not_started"),
        s["program"].as_str().unwrap_or(""),
        s["input"].as_str().unwrap_or(""),
    )
}
