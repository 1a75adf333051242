//! `codemode runs list|show RUN_ID|prune|wait RUN_ID|cancel RUN_ID`: the runs on disk (journals,
//! receipts and spill files), through `codemode::journal::Runs`.

use std::path::PathBuf;

use anyhow::Context;
use codemode::journal::{PruneOptions, PruneReason, Retention, RunDetails, RunListing, Runs, StoreError};
use serde_json::json;

use super::engine_args::{self, Notice};

/// Arguments of `codemode runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RunsCommand {
    /// List the runs, oldest first (newest last): id, state, age (since
    /// it last changed), calls, pending calls of paused runs, program.
    #[command(after_help = super::READ_EXIT_CODES)]
    List {
        /// Print a JSON array on stdout, oldest first.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Show one run: state, program, digests, every call, pending calls.
    #[command(after_help = "Exit codes: 0 shown, 2 bad invocation, 5 no run of that id (the error \
`codemode resume` gives).")]
    Show {
        /// The run's id, as `codemode runs list` shows it.
        run_id: String,
        /// Print the run as JSON on stdout.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Remove old runs: those older than --keep-days, and those not among
    /// the --keep-runs newest, whichever removes more.
    ///
    /// Never removed: a run another process holds, a paused run younger
    /// than --keep-days (even past --keep-runs: a person may answer it
    /// tomorrow) and every run after the oldest such paused run (what ran
    /// since is what the person reviews it by), an interrupted run
    /// younger than --keep-days (it waits for its recovery), and a run
    /// folder with neither journal nor receipt younger than --keep-days
    /// (a run still going elsewhere); paused, interrupted and such runs
    /// are not counted against --keep-runs. The report says how many
    /// runs a paused run kept. `codemode run` and `resume` (while their
    /// run runs) and `batch` (after it) prune this way, once a tenth of
    /// keep_runs more have gathered.
    #[command(after_help = "Exit codes: 0 done, 1 a run could not be removed, 2 bad invocation.")]
    Prune {
        /// Runs to keep, newest first [default: [journal] keep_runs,
        /// else 200].
        #[arg(long, value_name = "N")]
        keep_runs: Option<u64>,
        /// Days to keep a run after it last changed [default: [journal]
        /// keep_days, else 7].
        #[arg(long, value_name = "D")]
        keep_days: Option<u64>,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Wait until a run going on in another process (`codemode run`,
    /// `codemode mcp serve`) ends or pauses, then show its outcome as
    /// `codemode run` does (its receipt, when the process wrote it on this
    /// machine; else its state).
    #[command(after_help = super::runs_wait::WAIT_EXIT_CODES)]
    Wait {
        /// The run's id, as `codemode runs list` shows it.
        run_id: String,
        /// Seconds to wait at most.
        #[arg(long, value_name = "SECS", default_value_t = 600.0)]
        timeout: f64,
        /// Print the receipt (else {run_id, state}) as JSON on stdout.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Cancel a run going on in another process: it notices within a
    /// second, stops (its calls cancelled, bash's processes ended) and
    /// saves its receipt, shown here. A paused run is ended `cancelled`.
    #[command(after_help = super::runs_wait::CANCEL_EXIT_CODES)]
    Cancel {
        /// The run's id, as `codemode runs list` shows it.
        run_id: String,
        /// Seconds to wait at most for the run to end once asked.
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        timeout: f64,
        /// Print the receipt (else {run_id, state}) as JSON on stdout.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
}

/// Where the runs are (also what `codemode approve` takes).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Place {
    /// The workspace whose runs these are [default: current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Policy file, for its [journal] table [default:
    /// <workspace>/codemode.toml when present; its url needs trust].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where the journals are: a folder, postgres://..., or off (then the
    /// default folder is read) [default: the policy's [journal] url, else
    /// the workspace's folder in $XDG_STATE_HOME/codemode].
    #[arg(long, value_name = "DIR|URL|off")]
    journal: Option<String>,
}

impl Place {
    /// These options as command-line text (for a `codemode resume` hint).
    pub(crate) fn options(&self) -> String {
        engine_args::EngineArgs::placed(self.workspace.clone(), self.config.clone(), self.journal.clone())
            .resume_options(true)
    }

    /// The runs and the configured retention.
    pub(crate) fn open(&self) -> anyhow::Result<(Runs, Retention)> {
        let given = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let workspace = std::fs::canonicalize(&given)
            .with_context(|| format!("workspace `{}` is not a usable directory", given.display()))?;
        let config = engine_args::load_config(self.config.as_deref(), &workspace, Notice::JournalOnly)?;
        let store = engine_args::journal_choice(self.journal.as_deref(), &config, &workspace)?.store();
        Ok((Runs::for_workspace(&workspace, store)?, config.journal.retention))
    }
}

/// Runs `codemode runs`.
pub(crate) fn runs(args: RunsArgs) -> anyhow::Result<u8> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match args.command {
        RunsCommand::List { json, place } => list(&rt, json, &place),
        RunsCommand::Show { run_id, json, place } => show(&rt, &run_id, json, &place),
        RunsCommand::Prune { keep_runs, keep_days, dry_run, json, place } => {
            prune(&rt, &place, keep_runs, keep_days, dry_run, json)
        }
        RunsCommand::Wait { run_id, timeout, json, place } => {
            super::runs_wait::wait(&rt, &run_id, timeout, json, &place)
        }
        RunsCommand::Cancel { run_id, timeout, json, place } => {
            super::runs_wait::cancel(&rt, &run_id, timeout, json, &place)
        }
    }
}

/// `codemode runs list`: the runs of `place` as a table, or as JSON.
fn list(rt: &tokio::runtime::Runtime, json: bool, place: &Place) -> anyhow::Result<u8> {
    let (runs, _) = place.open()?;
    let list = rt.block_on(runs.list())?;
    if json {
        super::print_stdout(&(serde_json::to_string_pretty(&list)? + "\n"))?;
    } else if list.is_empty() {
        eprintln!("codemode: no runs in {}", runs.receipts_folder().display());
    } else {
        super::print_stdout(&list_table(&list, now_unix()))?;
    }
    Ok(0)
}

/// `codemode runs show`: run `run_id` of `place` as text, or as JSON; a
/// run that cannot be shown as resumable exits with
/// [`super::EXIT_NOT_RESUMABLE`] (and, with `json`, an error object).
fn show(rt: &tokio::runtime::Runtime, run_id: &str, json: bool, place: &Place) -> anyhow::Result<u8> {
    let (runs, _) = place.open()?;
    match rt.block_on(runs.show(run_id)) {
        Ok(details) => {
            let text =
                if json { serde_json::to_string_pretty(&details)? + "\n" } else { show_text(&details) };
            super::print_stdout(&text)?;
            Ok(0)
        }
        Err(e @ StoreError::NotResumable { .. }) => {
            let message = e.to_string();
            if json {
                let state = match &e {
                    StoreError::NotResumable { state, .. } => serde_json::to_value(state)?,
                    _ => serde_json::Value::Null,
                };
                let error = json!({"error": {
                    "kind": "not_resumable", "run_id": run_id, "state": state, "message": message,
                }});
                super::print_stdout(&format!("{error}\n"))?;
            }
            eprintln!("codemode: {}", one_line(&message));
            Ok(super::EXIT_NOT_RESUMABLE)
        }
        // Damaged (not UTF-8, over a bound): final, as an unknown id is.
        Err(e @ StoreError::Unreadable { .. }) => {
            let message = e.to_string();
            if json {
                let error = json!({"error": {
                    "kind": "not_resumable", "run_id": run_id, "state": "unreadable", "message": message,
                }});
                super::print_stdout(&format!("{error}\n"))?;
            }
            eprintln!("codemode: {}", one_line(&message));
            Ok(super::EXIT_NOT_RESUMABLE)
        }
        Err(e) => Err(e.into()),
    }
}

/// `codemode runs prune`: removes (or, `dry_run`, lists) the runs of
/// `place` past the retention, `keep_runs` and `keep_days` overriding the
/// configured ones; reports on stdout (JSON with `json`) and stderr. Exits 1
/// when a run could not be removed.
fn prune(
    rt: &tokio::runtime::Runtime,
    place: &Place,
    keep_runs: Option<u64>,
    keep_days: Option<u64>,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let (runs, configured) = place.open()?;
    let mut retention = configured;
    retention.keep_runs = keep_runs.unwrap_or(configured.keep_runs);
    retention.keep_days = keep_days.unwrap_or(configured.keep_days);
    let report = rt.block_on(runs.prune(retention, &PruneOptions::default().dry_run(dry_run)))?;
    if json {
        super::print_stdout(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        let verb = if dry_run { "would remove" } else { "removed" };
        let mut text = String::new();
        for run in &report.removed {
            let why = match run.why {
                PruneReason::Age => format!("older than {} days", retention.keep_days),
                _ => format!("not among the {} newest", retention.keep_runs),
            };
            text.push_str(&format!(
                "{verb} {} ({}, {} old, {why})\n",
                run.run_id,
                run.state,
                age(run.age_secs)
            ));
        }
        super::print_stdout(&text)?;
        let busy = if report.busy.is_empty() {
            String::new()
        } else {
            format!("; held by another process: {}", report.busy.join(", "))
        };
        let for_paused = match &report.paused_run {
            Some(paused) if report.kept_for_paused > 0 => format!(
                "; {} past keep_runs kept because they came after run {paused}, paused and waiting for a \
                 decision (resume or cancel it to let them go)",
                report.kept_for_paused
            ),
            _ => String::new(),
        };
        eprintln!(
            "codemode: {verb} {} run{}, kept {} (keep {} runs or {} days){busy}{for_paused}",
            report.removed.len(),
            if report.removed.len() == 1 { "" } else { "s" },
            report.kept,
            retention.keep_runs,
            retention.keep_days
        );
    }
    for failure in &report.failures {
        eprintln!("codemode: could not remove {}", one_line(failure));
    }
    Ok(if report.failures.is_empty() { 0 } else { 1 })
}

fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `secs` as a short age: `42s`, `5m`, `3h`, `2d`.
fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The listing as a table, one run a line.
fn list_table(list: &[RunListing], now: u64) -> String {
    let id_width = list.iter().map(|r| r.run_id.len()).max().unwrap_or(6).max(6);
    let mut out = format!(
        "{:id_width$}  {:11}  {:>4}  {:>5}  {:>7}  PROGRAM\n",
        "RUN ID", "STATE", "AGE", "CALLS", "PENDING"
    );
    for r in list {
        let calls = r.calls.map_or_else(|| "-".to_owned(), |c| c.to_string());
        let pending = if r.pending == 0 { "-".to_owned() } else { r.pending.to_string() };
        let program = r.program.as_deref().map_or_else(|| "-".to_owned(), one_line);
        out.push_str(&format!(
            "{:id_width$}  {:11}  {:>4}  {:>5}  {:>7}  {program}\n",
            one_line(&r.run_id),
            one_line(&r.state),
            age(now.saturating_sub(r.updated_unix)),
            calls,
            pending,
        ));
    }
    out
}

/// One run for a person to read.
fn show_text(d: &RunDetails) -> String {
    let mut out = format!("{}  {}\n", one_line(&d.run_id), one_line(&d.state));
    let mut field = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            out.push_str(&format!("  {name:9} {}\n", one_line(&value)));
        }
    };
    field(
        "program",
        d.program.as_ref().map(|p| match &p.path {
            Some(path) => format!("{} ({path}), sha256 {}", p.name, p.sha256),
            None => format!("{}, sha256 {}", p.name, p.sha256),
        }),
    );
    field("started", d.started_at.clone());
    field("workspace", d.workspace.clone());
    field("catalog", d.catalog_sha256.as_ref().map(|s| format!("sha256 {s}")));
    field("policy", d.policy_sha256.as_ref().map(|s| format!("sha256 {s}")));
    field("journal", d.journal.clone().or_else(|| Some("none".to_owned())));
    field("receipt", d.receipt.as_ref().map(|p| p.display().to_string()));
    field("damaged", d.unreadable.clone());
    if d.calls.is_empty() {
        out.push_str("  no calls\n");
    } else {
        out.push_str("  calls\n");
    }
    for call in &d.calls {
        let word = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        let decision = word(call.decision.and_then(|x| serde_json::to_value(x).ok()).and_then(as_string));
        let status = match call.status.and_then(|x| serde_json::to_value(x).ok()).and_then(as_string) {
            Some(status) => status,
            None if d.pending.iter().any(|p| p.seq == call.seq) => "pending".to_owned(),
            None => "no result".to_owned(),
        };
        let why =
            call.error.as_deref().or(call.note.as_deref()).map_or_else(String::new, |w| format!("  {w}"));
        let reverted =
            call.reverted_by.as_deref().map_or_else(String::new, |by| format!("  reverted by {by}"));
        let line = format!("{}  {decision}/{status}{why}{reverted}", call.tool);
        out.push_str(&format!("    {:>3}  {}\n", call.seq, one_line(&line)));
    }
    if !d.pending.is_empty() {
        out.push_str(&format!(
            "  pending (codemode resume {} --allow SEQ | --deny SEQ)\n",
            one_line(&d.run_id)
        ));
        for p in &d.pending {
            let args = serde_json::to_string(&p.arguments).unwrap_or_default();
            out.push_str(&format!("    {:>3}  {}\n", p.seq, one_line(&format!("{}  {args}", p.tool))));
            if let Some(reason) = &p.reason {
                out.push_str(&format!("         {}\n", one_line(reason)));
            }
            if let Some(subject) = &p.subject {
                out.push_str(&format!("         on: {}\n", one_line(subject)));
            }
            if let Some(r) = d.recorded.iter().find(|r| r.seq == p.seq) {
                let verb = if r.allow { "allowed" } else { "denied" };
                let why = r.reason.as_deref().map_or_else(String::new, |r| format!(": {r}"));
                out.push_str(&format!(
                    "         {verb} by a person at {} (codemode approve; applied on the next resume)\n",
                    one_line(&format!("{}{why}", r.at))
                ));
            }
        }
    }
    for decision in &d.decisions {
        let verb = if decision.allow { "allowed" } else { "denied" };
        let why = decision.reason.as_deref().map_or_else(String::new, |r| format!(": {r}"));
        out.push_str(&format!(
            "  {verb} {} at {}\n",
            decision.seq,
            one_line(&format!("{}{why}", decision.at))
        ));
    }
    out
}

/// `text` on one line, safe for a terminal: control characters escaped,
/// newlines as `\n`.
pub(crate) fn one_line(text: &str) -> String {
    codemode::display_text::one_line(text).into_owned()
}

fn as_string(v: serde_json::Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}
