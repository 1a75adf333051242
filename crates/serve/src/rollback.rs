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
    /// Nothing ran: the sentence for the model (nothing left to undo, or
    /// why the run cannot be rolled back), and whether it is an error.
    Said(String, bool),
}

/// Rolls back `run_id` on `engine` with the request's `options`.
pub(crate) async fn roll_back(engine: &codemode::Engine, run_id: &str, options: RunOptions) -> Rolled {
    match engine.rollback(run_id, RollbackOptions::new().run(options)).await {
        Err(e) => Rolled::Said(e.message, true),
        Ok(mut report) => match report.receipt.take() {
            None => Rolled::Said(
                format!("nothing left to undo in run {run_id}: no file it changed is still to restore"),
                false,
            ),
            Some(mut receipt) => {
                receipt.value = serde_json::to_value(&report).unwrap_or(Value::Null);
                Rolled::Ran(Box::new(receipt))
            }
        },
    }
}
