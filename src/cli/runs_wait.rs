//! `codemode runs wait RUN_ID` and `codemode runs cancel RUN_ID`: a run
//! going on in another process (a `codemode run`, a `codemode mcp serve`
//! replica), followed through its journal store (docs/JOURNAL.md, "Waiting
//! and cancelling").

use std::path::PathBuf;
use std::time::{Duration, Instant};

use codemode::journal::{JournalStore, RunState, Runs, StoreError};
use codemode::receipt::RenderOptions;

use super::runs::Place;

/// Exit code of `runs wait` and `runs cancel` when the run still goes on
/// at `--timeout`.
pub(crate) const EXIT_STILL_RUNNING: u8 = 7;

/// How often the store is read while a run goes on.
const POLL: Duration = Duration::from_millis(250);

/// How long a run's receipt file may follow its journal's end: the process
/// that ran it writes it just after.
const RECEIPT_WAIT: Duration = Duration::from_secs(2);

/// The exit codes of `runs wait`, shown in its help.
pub(crate) const WAIT_EXIT_CODES: &str = "Exit codes: as `codemode run` gives for the run's end: 0 \
completed, 1 failed (or interrupted: its process ended without finishing it), 3 timed out, 4 paused \
(waiting for a person: `codemode approve`), 6 completed with a value cut, 130 cancelled; 2 bad invocation, 5 \
no run of that id (or a run that cannot go on: paused or interrupted with its journal unreadable, or \
moved from an old .codemode/runs folder), 7 still \
running after --timeout.";

/// The exit codes of `runs cancel`, shown in its help.
pub(crate) const CANCEL_EXIT_CODES: &str = "Exit codes: 0 the run ended (cancelled, or it ended by itself \
first: the outcome says which), 2 bad invocation, 5 no run of that id or it had already ended, 7 still \
running after --timeout (the request stays: its process cancels the run when it next looks, within a second).";

/// `codemode runs wait`: waits until run `run_id` of `place` ends or
/// pauses (at most `timeout` seconds) and shows its outcome.
pub(crate) fn wait(
    rt: &tokio::runtime::Runtime,
    run_id: &str,
    timeout: f64,
    json: bool,
    place: &Place,
) -> anyhow::Result<u8> {
    let (runs, _) = place.open()?;
    let bound = bound(timeout)?;
    rt.block_on(follow(&runs, run_id, bound, json))
}

/// `codemode runs cancel`: asks the process running run `run_id` of
/// `place` to cancel it (a paused run is ended `cancelled` here), then
/// waits for its end as `wait` does.
pub(crate) fn cancel(
    rt: &tokio::runtime::Runtime,
    run_id: &str,
    timeout: f64,
    json: bool,
    place: &Place,
) -> anyhow::Result<u8> {
    let (runs, _) = place.open()?;
    let bound = bound(timeout)?;
    let store = runs.store().clone();
    rt.block_on(async {
        let state = match store.load(run_id).await {
            Ok(stored) => stored.state,
            Err(e) => return not_there(run_id, &e, json),
        };
        match state {
            state @ (RunState::Paused | RunState::Interrupted) => {
                end_paused(store.as_ref(), run_id, state, json).await
            }
            RunState::Running => {
                store.request_cancel(run_id).await?;
                super::note!("asked the process running run {run_id} to cancel it");
                let code = follow(&runs, run_id, bound, json).await?;
                Ok(if code == EXIT_STILL_RUNNING { code } else { 0 })
            }
            ended => {
                let message = format!("run {run_id} already ended ({ended}); nothing was cancelled");
                if json {
                    let error = serde_json::json!({"kind": "not_resumable", "message": message});
                    print_json(serde_json::json!({"run_id": run_id, "state": ended, "error": error}))?;
                }
                eprintln!("codemode: {message}");
                Ok(super::EXIT_NOT_RESUMABLE)
            }
        }
    })
}

/// `--timeout` as a duration.
fn bound(secs: f64) -> anyhow::Result<Duration> {
    if !(secs.is_finite() && (0.0..=31_536_000.0).contains(&secs)) {
        anyhow::bail!("--timeout must be seconds from 0 to 31536000 (fractions allowed), got {secs}");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Ends run `run_id`, paused or interrupted (its process died), as
/// `cancelled`: nothing runs, and a later resume or recovery is refused.
async fn end_paused(
    store: &dyn JournalStore,
    run_id: &str,
    state: RunState,
    json: bool,
) -> anyhow::Result<u8> {
    match store.claim(run_id).await {
        Ok((_, mut journal)) => {
            journal.end(String::new(), RunState::Cancelled).await?;
            if json {
                print_json(
                    serde_json::json!({"run_id": run_id, "state": RunState::Cancelled, "was": state}),
                )?;
            }
            let what = if state == RunState::Paused {
                "was paused; it is cancelled now (its pending calls never ran)"
            } else {
                "was interrupted (its process died); it is cancelled now and will not be recovered"
            };
            eprintln!("codemode: run {run_id} {what}");
            Ok(0)
        }
        Err(e) => not_there(run_id, &e, json),
    }
}

/// Reads run `run_id`'s state every [`POLL`] until it is not `running`
/// (or `bound` passes), then shows its outcome.
async fn follow(runs: &Runs, run_id: &str, bound: Duration, json: bool) -> anyhow::Result<u8> {
    let store = runs.store();
    let started = Instant::now();
    let stored = loop {
        match store.load(run_id).await {
            Ok(stored) if stored.state != RunState::Running => break stored,
            Ok(_) if started.elapsed() >= bound => {
                if json {
                    print_json(serde_json::json!({"run_id": run_id, "state": RunState::Running}))?;
                }
                eprintln!(
                    "codemode: run {run_id} is still running after {} s (wait again, or `codemode runs cancel \
                     {run_id}`)",
                    bound.as_secs_f64()
                );
                return Ok(EXIT_STILL_RUNNING);
            }
            Ok(_) => tokio::time::sleep(POLL).await,
            // A run made without a journal (`--journal off`) has only its
            // receipt: shown, as `runs show` shows it (a run id, never a
            // path, and the receipt of that run).
            Err(StoreError::NotResumable {
                state: codemode::journal::NotResumableState::Unknown, ..
            }) if codemode::Engine::is_run_id(run_id)
                && let Some(receipt) = saved_receipt(&runs.receipts_folder().join(run_id))
                && receipt.run_id == run_id =>
            {
                return show_receipt(
                    &receipt,
                    &runs.receipts_folder().join(run_id).join("receipt.json"),
                    json,
                );
            }
            Err(e) => return not_there(run_id, &e, json),
        }
    };
    let state = stored.state;
    // A run moved from an old folder reads as interrupted for good: no
    // resume recovers it.
    if state == RunState::Interrupted && codemode::journal::ended_interrupted(&stored.lines) {
        if json {
            super::print_stdout(&format!("{}\n", serde_json::json!({"run_id": run_id, "state": state})))?;
        }
        eprintln!(
            "codemode: run {run_id} is interrupted for good: it was moved from an old .codemode/runs folder, whose \
             runs come in as history, and cannot be resumed; start the program again (what it did: `codemode runs \
             show {run_id}`)"
        );
        return Ok(super::EXIT_NOT_RESUMABLE);
    }
    // A run that could go on (paused, or its process died) whose journal
    // no resume can read cannot: said so, rather than a resume to try.
    if matches!(state, RunState::Paused | RunState::Interrupted)
        && let Err(why) = codemode::journal::resumable_from(&stored.lines)
    {
        if json {
            super::print_stdout(&format!(
                "{}\n",
                serde_json::json!({"run_id": run_id, "state": "unreadable"})
            ))?;
        }
        eprintln!(
            "codemode: run {run_id} is {state}, but its journal is unreadable ({}): it cannot be resumed; start \
             the program again (what it did: `codemode runs show {run_id}`)",
            super::runs::one_line(&why)
        );
        return Ok(super::EXIT_NOT_RESUMABLE);
    }
    outcome(runs.receipts_folder().join(run_id).join("receipt.json"), run_id, state, json).await
}

/// Shows the outcome of run `run_id`, which is in `state`: its receipt
/// (at `path`, when the process that ran it wrote it on this machine) as
/// `codemode run` shows one, else its state; the exit code of either.
async fn outcome(path: PathBuf, run_id: &str, state: RunState, json: bool) -> anyhow::Result<u8> {
    let waited = Instant::now();
    let mut older = None;
    let receipt = loop {
        match path.parent().and_then(saved_receipt) {
            Some(r) if RunState::of_status(r.status) == state => break Some(r),
            r if waited.elapsed() >= RECEIPT_WAIT => {
                older = r.map(|r| r.status);
                break None;
            }
            _ => tokio::time::sleep(POLL).await,
        }
    };
    let Some(receipt) = receipt else {
        if json {
            super::print_stdout(&format!("{}\n", serde_json::json!({"run_id": run_id, "state": state})))?;
        }
        if let Some(then) = older {
            eprintln!(
                "codemode: run {run_id} is {state}; its receipt is of before that, when it was {} (it was ended \
                 since, as `codemode runs cancel` ends a paused run; `codemode runs show {run_id}` shows its calls)",
                then.as_str()
            );
        } else if state == RunState::Interrupted {
            eprintln!(
                "codemode: run {run_id} is interrupted: its process ended before the run did (`codemode resume \
                 {run_id}` recovers it; `codemode runs show {run_id}` shows its calls)"
            );
        } else {
            eprintln!(
                "codemode: run {run_id} is {state} (its receipt is with the process that ran it; `codemode runs \
                 show {run_id}` shows its calls)"
            );
        }
        return Ok(state_exit_code(state));
    };
    show_receipt(&receipt, &path, json)
}

/// The receipt saved in the run folder `folder`, if one is there and reads.
fn saved_receipt(folder: &std::path::Path) -> Option<codemode::Receipt> {
    let bytes = std::fs::read(folder.join("receipt.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Shows `receipt` (saved at `path`) as `codemode run` shows one; the
/// exit code it gives.
fn show_receipt(receipt: &codemode::Receipt, path: &std::path::Path, json: bool) -> anyhow::Result<u8> {
    if json {
        super::print_stdout(&(receipt.to_json_pretty() + "\n"))?;
        return Ok(super::run::exit_code(receipt));
    }
    let saved = path.display().to_string();
    let options = RenderOptions { include_value: false, receipt_path: Some(&saved), ..Default::default() };
    eprint!("codemode: {}", super::run::printable(&receipt.render(&options)));
    if receipt.status == codemode::receipt::RunStatus::Completed || !receipt.value.is_null() {
        let value = serde_json::to_string_pretty(&receipt.value)?;
        super::print_stdout(&(codemode::display_text::in_json(&value).into_owned() + "\n"))?;
    }
    Ok(super::run::exit_code(receipt))
}

/// Prints `value` as one line of JSON on stdout.
fn print_json(value: serde_json::Value) -> anyhow::Result<()> {
    super::print_stdout(&format!("{value}\n"))
}

/// The exit code of a run in `state` whose receipt is not here.
fn state_exit_code(state: RunState) -> u8 {
    match state {
        RunState::Completed => 0,
        RunState::TimedOut => 3,
        RunState::Paused => 4,
        RunState::Cancelled => 130,
        _ => 1,
    }
}

/// The exit of a command naming a run the store refuses (`e`): 5 with
/// the store's sentence, or the store's failure.
fn not_there(run_id: &str, e: &StoreError, json: bool) -> anyhow::Result<u8> {
    match e {
        StoreError::NotResumable { .. } => {
            let message = super::runs::one_line(&e.to_string());
            if json {
                let error = serde_json::json!({"kind": "not_resumable", "message": message});
                print_json(serde_json::json!({"run_id": run_id, "error": error}))?;
            }
            eprintln!("codemode: {message}");
            Ok(super::EXIT_NOT_RESUMABLE)
        }
        other => {
            // A store that cannot be read: `--json` still gets its object.
            if json {
                let error = serde_json::json!({"kind": "store", "message": other.to_string()});
                print_json(serde_json::json!({"run_id": run_id, "error": error}))?;
            }
            Err(other.clone().into())
        }
    }
}
