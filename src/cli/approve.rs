//! `codemode approve RUN_ID [--allow SEQ]... [--deny SEQ]... [--reason
//! TEXT] [--json]`: a person's decisions for the pending calls of a paused
//! run, recorded in its journal without running anything; the next resume
//! (`codemode resume RUN_ID`, or a server's `execute_tools {"resume":
//! RUN_ID}`) applies them. Without decisions it lists the pending calls.
//! It opens the journal store as `codemode runs` does (`--workspace`,
//! `--config`, `--journal`) and builds no engine.

use codemode::display_text::visible;
use codemode::journal::{AwaitingCall, Decided, RecordedDecisions};
use codemode::{receipt::ErrorKind, receipt::RunError};
use serde_json::json;

use super::runs::{Place, one_line};

/// Arguments of `codemode approve`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("decisions").args(["allow", "deny"]).multiple(true)))]
pub(crate) struct ApproveArgs {
    /// The paused run's id, as its receipt and `codemode runs list` show it.
    run_id: String,
    /// Allow the pending call with this seq (repeat, or comma-separate;
    /// name each call: there is no --allow all).
    #[arg(long, value_name = "SEQ", value_delimiter = ',', value_parser = seq)]
    allow: Vec<u64>,
    /// Deny the pending call with this seq: the program gets a ToolError
    /// of kind `denied` it can catch (repeat, or comma-separate).
    #[arg(long, value_name = "SEQ", value_delimiter = ',', value_parser = seq)]
    deny: Vec<u64>,
    /// Why the calls were decided (with --allow or --deny): in the
    /// resumed run's receipt (a denied call's error, shown to the program;
    /// an allowed call's note).
    #[arg(long, value_name = "TEXT", requires = "decisions")]
    reason: Option<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    place: Place,
}

/// A seq as `--allow`/`--deny` take it: a positive number.
fn seq(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ if text.trim().eq_ignore_ascii_case("all") => Err(
            "a person names each call they decide: give its seq (`codemode approve RUN_ID` lists them); there is no `all`"
                .to_owned(),
        ),
        _ => Err(format!("`{text}` is not a call's seq (a number, as `codemode approve RUN_ID` lists them)")),
    }
}

/// Runs `codemode approve`. Exit codes: 0 recorded or listed, 2 bad input
/// (a seq that is not pending or already decided; nothing recorded), 5 a
/// run that cannot be decided (unknown, ended, held by another process,
/// interrupted), 1 the journal store failed.
pub(crate) fn approve(args: ApproveArgs) -> anyhow::Result<u8> {
    let json = args.json;
    execute(args).inspect_err(|e| {
        if json {
            let error = json!({"error": {"kind": "invocation", "message": format!("{e:#}")}});
            let _ = super::print_stdout(&format!("{error}\n"));
        }
    })
}

fn execute(args: ApproveArgs) -> anyhow::Result<u8> {
    let (runs, _) = args.place.open()?;
    let store = runs.store().clone();
    let reason = args.reason.as_deref().map(str::to_owned);
    let decisions: Vec<(u64, Decided)> = args
        .allow
        .iter()
        .map(|&seq| (seq, reason.clone().map_or(Decided::Allow, Decided::AllowBecause)))
        .chain(args.deny.iter().map(|&seq| {
            (
                seq,
                Decided::Deny(
                    reason.clone().unwrap_or_else(|| "denied by a person with `codemode approve`".into()),
                ),
            )
        }))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let run_id = args.run_id.as_str();
    if decisions.is_empty() {
        return match rt.block_on(codemode::journal::approval_listing(store.as_ref(), run_id)) {
            Ok(shown) => {
                let text = if args.json {
                    format!("{}\n", json!(shown))
                } else {
                    listing(run_id, &shown.pending, &shown.files_changed_since_pause)
                };
                super::print_stdout(&text)?;
                Ok(0)
            }
            Err(e) => refused(&e, args.json),
        };
    }
    match rt.block_on(codemode::journal::record_decisions(store.as_ref(), run_id, &decisions)) {
        Ok(recorded) => {
            let resume = format!("codemode resume {run_id}{}", args.place.options());
            let host = format!("execute_tools {}", json!({"resume": run_id}));
            let text = if args.json {
                format!(
                    "{}\n",
                    json!({
                        "run_id": run_id, "recorded": recorded.recorded, "calls": recorded.calls,
                        "undecided": recorded.undecided, "will_be_refused": recorded.will_be_refused,
                        "continue": {"host": host, "cli": resume},
                    })
                )
            } else {
                recorded_text(&recorded, &decisions, &host, &resume)
            };
            super::print_stdout(&text)?;
            Ok(0)
        }
        Err(e) => refused(&e, args.json),
    }
}

/// Says why nothing was listed or recorded, and the exit code.
fn refused(e: &RunError, json: bool) -> anyhow::Result<u8> {
    if json {
        super::print_stdout(&format!("{}\n", json!({"error": e})))?;
    }
    eprintln!("codemode: {}", one_line(&e.message));
    Ok(match e.kind {
        ErrorKind::NotResumable => super::EXIT_NOT_RESUMABLE,
        ErrorKind::Invocation => super::EXIT_USAGE,
        _ => 1,
    })
}

/// The pending calls, each on its lines: what it acts on and its
/// arguments are shown whole, as the terminal prompt shows a command
/// (`codemode::display_text::visible`: on one line, so a newline in a
/// command cannot forge a line of its own; blank-looking characters
/// escaped and long runs of spaces counted, so padding cannot push its
/// tail out of sight).
fn listing(run_id: &str, pending: &[AwaitingCall], changed: &[String]) -> String {
    let mut out = format!("run {run_id} is paused; calls waiting for a decision:\n");
    let mut open = Vec::new();
    for p in pending {
        let c = &p.call;
        out.push_str(&format!("  call {} {}\n", c.seq, one_line(&c.tool)));
        if let Some(subject) = &c.subject {
            out.push_str(&format!("    on: {}\n", visible(subject)));
        }
        out.push_str(&format!("    why: {}\n", one_line(&c.reason)));
        let args = serde_json::to_string(&c.arguments).unwrap_or_default();
        out.push_str(&format!("    arguments: {}\n", visible(&args)));
        if let Some(changed) = &p.changed_since_pause {
            out.push_str(&format!("    note: an allow will be refused: {}\n", one_line(changed)));
            out.push_str(&format!("    {}\n", end_instead(run_id, c.seq)));
        }
        match &p.recorded {
            Some(r) => {
                let verb = if r.allow { "allowed" } else { "denied" };
                let why = r.reason.as_deref().map_or_else(String::new, |r| format!(": {}", one_line(r)));
                out.push_str(&format!("    decided: {verb} at {}{why} (applied on the next resume)\n", r.at));
            }
            None => open.push(c.seq.to_string()),
        }
    }
    if pending.is_empty() {
        out.push_str("  none\n");
    }
    if !changed.is_empty() {
        let files: Vec<String> = changed.iter().map(|f| visible(f)).collect();
        out.push_str(&format!(
            "changed since the pause, and named by the run before it: {}; after the resume, a call that would \
             change one is refused (a `read` of it first lifts that); start the program again to work from them \
             as they are\n",
            files.join(", ")
        ));
    }
    if !open.is_empty() {
        out.push_str(&format!(
            "decide: codemode approve {run_id} --allow SEQ (or --deny SEQ) [--reason TEXT]; undecided: {}\n",
            open.join(",")
        ));
    } else if !pending.is_empty() {
        out.push_str(&format!("go on: codemode resume {run_id} (with the options the run had)\n"));
    }
    out
}

/// What a person does instead of an allow the resume will refuse.
fn end_instead(run_id: &str, seq: u64) -> String {
    format!(
        "instead: deny it (codemode approve {run_id} --deny {seq}) or end the run (codemode runs cancel \
         {run_id}), then start the program again"
    )
}

/// What was recorded and how the run goes on.
fn recorded_text(
    recorded: &RecordedDecisions,
    decisions: &[(u64, Decided)],
    host: &str,
    resume: &str,
) -> String {
    let mut out = String::new();
    for (seq, decided) in decisions {
        // What was decided on, as the journal held it when recorded.
        let call = recorded.calls.iter().find(|c| c.seq == *seq);
        let what = call.map_or_else(String::new, |c| {
            let on = c.subject.as_deref().map_or_else(String::new, |s| format!(" ({})", visible(s)));
            format!(" {}{on}", one_line(&c.tool))
        });
        match decided {
            Decided::Allow => out.push_str(&format!("recorded: call {seq}{what} allowed\n")),
            Decided::AllowBecause(reason) => {
                out.push_str(&format!("recorded: call {seq}{what} allowed: {}\n", one_line(reason)));
            }
            Decided::Deny(reason) => {
                out.push_str(&format!("recorded: call {seq}{what} denied: {}\n", one_line(reason)));
            }
        }
        if let Some((_, why)) = recorded.will_be_refused.iter().find(|(s, _)| s == seq) {
            out.push_str(&format!(
                "note: the resume will refuse call {seq} all the same: {}\nto end the run instead: codemode \
                 runs cancel {}, then start the program again\n",
                one_line(why),
                recorded.run_id
            ));
        }
    }
    for c in &recorded.undecided {
        let on = c.subject.as_deref().map_or_else(String::new, |s| format!(" ({})", visible(s)));
        out.push_str(&format!("still waiting: call {} {}{on}\n", c.seq, one_line(&c.tool)));
    }
    out.push_str(&format!(
        "run {} stays paused until resumed: the host continues it with {host}, or run `{}` (with the other \
         options the run had)\n",
        recorded.run_id,
        one_line(resume)
    ));
    out
}
