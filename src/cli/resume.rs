//! `codemode resume RUN_ID [--allow SEQ]... [--deny SEQ]... [--reason TEXT]
//! [--json]`: decides the pending calls of a paused run and goes on. The
//! decisions a person recorded with `codemode approve` apply too; with
//! those, no --allow/--deny is needed.

use anyhow::bail;
use codemode::journal::Decided;
use codemode::receipt::ErrorKind;

use super::engine_args::{EngineArgs, LimitArgs};

/// Arguments of `codemode resume`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("decisions").args(["allow", "deny"]).multiple(true)))]
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
    /// Why the calls were decided (with --allow or --deny): a denied
    /// call's error (shown to the program), an allowed call's note, in the
    /// receipt.
    #[arg(long, value_name = "TEXT", requires = "decisions")]
    reason: Option<String>,
    /// Resume a run made in another workspace (found through a shared
    /// `--journal` folder or PostgreSQL): its remaining calls, those a
    /// person allowed there too, then act on this workspace's files.
    /// Without it such a run is refused and stays paused.
    #[arg(long)]
    any_workspace: bool,
    /// Print the full receipt as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Runs `codemode resume`. Exit codes as `run`, and 5 when the run id
/// cannot be resumed (unknown, ended, held by another process, its journal
/// unreadable: final, do not retry).
pub(crate) fn resume(args: ResumeArgs) -> anyhow::Result<u8> {
    let json = args.json;
    execute(args).inspect_err(|e| {
        if json {
            let error = serde_json::json!({"error": {"kind": "invocation", "message": format!("{e:#}")}});
            let _ = super::print_stdout(&format!("{error}\n"));
        }
    })
}

fn execute(args: ResumeArgs) -> anyhow::Result<u8> {
    // The limits given as flags go into the engine and into the hint a
    // run paused again prints.
    let engine_args = args.engine.clone().with_limits(args.limits.settings());
    let engine = engine_args.clone().approve_by_default("pause").for_one_run().build()?;
    if args.allow.is_empty() && args.deny.is_empty() && args.engine.approver_spec().is_none() {
        // Decisions a person recorded with `codemode approve` are applied
        // by any resume; with none, there is nothing to go on with. A run
        // that cannot be resumed gets the resume's own error below.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        // A long journal takes a while to read: a signal meanwhile ends
        // the command saying so (nothing has changed yet).
        let recorded = rt.block_on(async {
            tokio::select! {
                biased;
                signal = super::run::interrupted() => Err(signal),
                recorded = engine.pending_decisions(&args.run_id) => Ok(recorded),
            }
        });
        let recorded = match recorded {
            Ok(recorded) => recorded,
            Err(signal) => {
                eprintln!(
                    "codemode: resume stopped by {} while it read run {}'s journal; nothing was changed",
                    if signal == 2 { "SIGINT" } else { "SIGTERM" },
                    args.run_id
                );
                return Ok(128 + signal);
            }
        };
        if let Ok(pending) = recorded
            && !pending.is_empty()
            && pending.iter().all(|p| p.recorded.is_none())
        {
            bail!(
                "nothing decided: give --allow SEQ or --deny SEQ for the pending calls (`codemode approve {0}` \
                 lists them), record them first with `codemode approve {0} --allow SEQ`, or give an --approve to \
                 decide them as they come",
                args.run_id
            );
        }
    }
    let given = args.reason.clone();
    let reason = given.clone().unwrap_or_else(|| "denied on resume".to_owned());
    let decisions: Vec<(u64, Decided)> = args
        .allow
        .iter()
        .map(|&seq| (seq, given.clone().map_or(Decided::Allow, Decided::AllowBecause)))
        .chain(args.deny.iter().map(|&seq| (seq, Decided::Deny(reason.clone()))))
        .collect();

    // The run's folder, when it has one, is held until this process has
    // written all it writes there (as `codemode run` holds its own): no
    // prune in another process removes the run meanwhile. (None is made
    // for an id that may be no run's.)
    let _hold = engine
        .runs_folder()
        .join(&args.run_id)
        .is_dir()
        .then(|| engine.hold_run_folder(&args.run_id).ok())
        .flatten();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (receipt, signal, refused) = rt.block_on(async {
        // SIGINT and SIGTERM cancel the resumed run as they cancel a run;
        // one stopped while it replays, before anything new ran, stays
        // paused. The listener is set before the journal is read (a long
        // one takes a while): a signal meanwhile cancels the run as soon
        // as it is loaded, instead of killing the process silently.
        let interrupted = super::run::interrupted();
        tokio::pin!(interrupted);
        let options = match args.any_workspace {
            true => codemode::run::RunOptions::default().any_workspace(),
            false => codemode::run::RunOptions::default(),
        };
        let starting = engine.start_resume_with(&args.run_id, &decisions, options);
        tokio::pin!(starting);
        let (started, early) = tokio::select! {
            biased;
            signal = &mut interrupted => (starting.await, Some(signal)),
            started = &mut starting => (started, None),
        };
        let run = match started {
            Ok(run) => run,
            Err(refused) => return (refused, early, true),
        };
        let canceller = run.canceller();
        let run_id = run.run_id().to_owned();
        let wait = run.wait();
        tokio::pin!(wait);
        if let Some(signal) = early {
            canceller.cancel();
            return (super::run::stopped_or_exit(wait, signal, run_id).await, Some(signal), false);
        }
        tokio::select! {
            r = &mut wait => (r, None, false),
            signal = &mut interrupted => {
                canceller.cancel();
                (super::run::stopped_or_exit(wait, signal, run_id).await, Some(signal), false)
            }
        }
    });

    let kind = receipt.error.as_ref().map(|e| e.kind);
    let code = super::run::exit_code(&receipt);
    // A refusal before anything ran (whatever its kind: a store that
    // failed too) leaves the run's saved receipt alone.
    let refused_up_front = refused
        || matches!(kind, Some(ErrorKind::NotResumable | ErrorKind::Invocation))
        || (kind == Some(ErrorKind::Divergence) && receipt.calls.is_empty());
    // So does a resume that stopped while it replayed, before anything
    // new ran: the run is still paused, and the saved receipt (every call
    // up to the pause) still says what it did; this one lists only the
    // calls replayed before the stop.
    let (receipt, saved) = if refused_up_front || receipt.stopped_in_replay() {
        (receipt, None)
    } else {
        super::save_run_receipt(&engine, receipt)
    };
    if args.json {
        // As `run --json`: the receipt goes out once the journal is
        // durable, so it can say when that failed.
        let mut receipt = receipt;
        if !refused_up_front {
            super::add_journal_outcome(engine.journal_store(), &mut receipt);
        }
        super::print_stdout(&(receipt.to_json_pretty() + "\n"))?;
    } else if let Some(e) = receipt.error.as_ref().filter(|_| refused_up_front && receipt.calls.is_empty()) {
        // Refused before anything ran: the reason alone, not a run summary
        // of nothing ("failed in 0.0 ms; 0 calls").
        let kind = serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_owned));
        eprintln!(
            "codemode: resume refused ({}): {}",
            kind.unwrap_or_default(),
            super::run::printable(&e.message)
        );
    } else {
        super::run::show(&receipt, saved.as_deref(), &engine_args)?;
    }
    if !refused_up_front {
        engine.apply_retention_since(&args.run_id, super::started());
        // The journal is written before the folder is let go.
        if let Some(store) = engine.journal_store() {
            let _ = store.flush_run(&args.run_id);
        }
    }
    Ok(match (signal, kind) {
        (Some(signal), _) => 128 + signal,
        (None, Some(ErrorKind::NotResumable)) => super::EXIT_NOT_RESUMABLE,
        (None, Some(ErrorKind::Invocation)) => super::EXIT_USAGE,
        _ => code,
    })
}
