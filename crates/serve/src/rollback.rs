//! `execute_tools {"rollback": RUN_ID}`: a served model asks for a run to
//! be undone (docs/JOURNAL.md, "Undo (rollback)"). The rollback runs with
//! the request's approver, like any write the model's program makes: under
//! posture `ask`, a person approves each file's restore (by elicitation),
//! and where approvals would pause, a restore that needs one is refused
//! (a batch cannot pause; the person runs `codemode rollback` instead).
//! Files changed since the run are left alone: the model cannot force.

use serde_json::Value;

use codemode::Receipt;
use codemode::run::{RollbackOptions, RunOptions};

/// The name of the rollback field of `execute_tools`' input.
pub const ROLLBACK: &str = "rollback";

/// The run id of `{"rollback": RUN_ID}`, which takes no other field.
pub(crate) fn rollback_of(args: &Value, rollback: &Value) -> Result<String, String> {
    let others: Vec<&String> =
        args.as_object().into_iter().flat_map(|o| o.keys()).filter(|k| *k != ROLLBACK).collect();
    if !others.is_empty() {
        return Err(format!(
            "`rollback` undoes a run's file changes and takes no other field; remove {}",
            others.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    rollback
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "`rollback` must be the run_id of a run to undo (a string)".to_owned())
}

/// What a rollback request comes to.
pub(crate) enum Rolled {
    /// The rollback ran: its receipt, whose `value` is the report.
    Ran(Box<Receipt>),
    /// Nothing ran and nothing was left to undo: the sentence for the
    /// model and the `structuredContent` (`execute_tools` declares an
    /// `outputSchema`, so a result that is not an error carries one: MCP
    /// 2025-06-18, "Structured Content"): status `completed`, the run
    /// named, the report as the value.
    NothingLeft(String, Value),
    /// Nothing ran: why the run cannot be rolled back (an error).
    Refused(String),
}

/// Rolls back `run_id` on `engine` with the request's `options`.
pub(crate) async fn roll_back(engine: &codemode::Engine, run_id: &str, options: RunOptions) -> Rolled {
    match engine.rollback(run_id, RollbackOptions::new().run(options)).await {
        Err(e) => Rolled::Refused(e.message),
        Ok(mut report) => match report.receipt.take() {
            None => {
                let value = serde_json::to_value(&report).unwrap_or(Value::Null);
                Rolled::NothingLeft(
                    nothing_left_text(run_id, &report.not_undone),
                    serde_json::json!({
                        "status": "completed", "run_id": run_id, "value": value, "value_truncated": null,
                        "error": null, "calls": {}, "pending": [], "receipt_path": null,
                    }),
                )
            }
            Some(mut receipt) => {
                for (_, why) in &mut report.failed {
                    if let Some(said) = for_a_person(why, run_id) {
                        *why = said;
                    }
                }
                receipt.value = serde_json::to_value(&report).unwrap_or(Value::Null);
                Rolled::Ran(Box::new(receipt))
            }
        },
    }
}

/// Calls named in the text of "nothing left to undo" at most; the rest
/// are counted (all are in `structuredContent`).
const NOT_UNDONE_SHOWN: usize = 10;

/// "Nothing left to undo", with the run's calls a rollback cannot undo
/// (bash, MCP tools without a compensation) named, one a line, so the
/// model does not read it as "the run is undone".
fn nothing_left_text(run_id: &str, not_undone: &[codemode::run::NotUndone]) -> String {
    let mut text = format!("nothing left to undo in run {run_id}: no file it changed is still to restore");
    for call in not_undone.iter().take(NOT_UNDONE_SHOWN) {
        text.push_str(&format!("\nnot undone: call {} {}: {}", call.seq, call.tool, call.reason));
    }
    if not_undone.len() > NOT_UNDONE_SHOWN {
        text.push_str(&format!(
            "\nand {} more calls not undone (structuredContent.value.not_undone)",
            not_undone.len() - NOT_UNDONE_SHOWN
        ));
    }
    text
}

/// A restore the approver would have paused (no person can be asked
/// here: a rollback is a batch, which cannot pause) says what the person
/// does instead; other reasons stay.
fn for_a_person(why: &str, run_id: &str) -> Option<String> {
    why.starts_with("the approver paused this call").then(|| {
        format!(
            "not restored: it needs a person's approval, which cannot be asked through this server; the \
             person runs `codemode rollback {run_id}` in a terminal (or configures an approver that can \
             ask: docs/SERVE.md)"
        )
    })
}
