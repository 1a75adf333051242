//! `codemode batch [FILE|-] [--tool NAME] [--concurrency N] [--fail-fast]
//! [--ordered] [--json]`: one tool call per JSON Lines line, through the
//! engine's batch form (docs/BATCH.md).
//!
//! stdout gets one JSON line per item as it finishes, or in input order
//! with `--ordered` (and one per bad input line, first); stderr the
//! progress and the receipt summary.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use codemode::{
    Receipt, batch::Batch, batch::BatchCall, batch::BatchItem, batch::BatchOptions, batch::ItemStatus,
    receipt::RenderOptions, receipt::RunStatus,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::engine_args::{CallLimitArgs, CliEngine, EngineArgs};
use super::run::{interrupted, printable};

/// Arguments of `codemode batch` (the help text is on `Command::Batch`).
#[derive(Debug, clap::Args)]
pub(crate) struct BatchArgs {
    #[command(subcommand)]
    command: Option<Box<BatchCommand>>,
    /// JSON Lines input: a file, or - to read stdin.
    #[arg(default_value = "-")]
    pub(crate) file: String,
    /// Run this program (.js or .ts) once per input line, the line's JSON
    /// value its global `input`; each run its own VM, journal and receipt.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "concurrency", "fail_fast", "json"])]
    program: Option<std::path::PathBuf>,
    /// With --program: lines run at once.
    #[arg(long, value_name = "N", default_value_t = 8, requires = "program",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) parallel: u32,
    /// With --program: the batch's id. A new id starts a batch of that
    /// name; the id of a batch that stopped (killed, interrupted) goes on
    /// with the lines not done [default: a new batch-... id].
    #[arg(long, value_name = "ID", requires = "program")]
    pub(crate) batch_id: Option<String>,
    /// Call this tool for every line; each line is then its arguments.
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// Calls in flight at once [default: --max-in-flight, else [limits]
    /// max_in_flight, else 16].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: Option<u32>,
    /// Start no new item after the first one that is not ok; the rest are
    /// reported not_started.
    #[arg(long)]
    fail_fast: bool,
    /// Print the items (lines) in input order (one waits for those before
    /// it) instead of as they finish.
    #[arg(long)]
    pub(crate) ordered: bool,
    /// Print the whole receipt as JSON, as the last line on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) limits: CallLimitArgs,
}

/// `codemode batch status`, and the commands of shared batches.
#[derive(Debug, clap::Subcommand)]
enum BatchCommand {
    /// Where a program batch is, from its record (works from another
    /// terminal while it runs), or from the PostgreSQL store for a batch
    /// submitted there: lines done, failed, paused, running, not started,
    /// and whether a process runs it now.
    #[command(after_help = "Exit codes: 0 shown, 2 unknown batch or bad invocation.")]
    Status(super::batch_status::StatusArgs),
    /// Stores a batch in the PostgreSQL journal store (--journal
    /// postgres://...) for workers to run, and prints its id: a program
    /// and its input lines (--program), or one call per line.
    #[command(
        after_help = "Exit codes: 0 submitted, 2 bad input, a batch of that id exists, or no shared store."
    )]
    Submit(super::batch_workers::SubmitArgs),
    /// Runs lines of a submitted batch, with any number of other workers on
    /// any machines sharing the store, until every line ended or paused;
    /// takes over the lines of workers that died (recovering their runs).
    /// Prints each line it ran as `batch --program` does.
    #[command(after_help = "Exit codes: 0 every line this worker ran completed and no line of the batch is \
                            paused, 1 one failed, 4 one paused (none failed), 2 bad invocation, 128+N on signal N.")]
    Work(super::batch_workers::WorkArgs),
    /// Prints the output of the submitted batch's lines that ended, in line
    /// order, as JSON Lines (--wait: every line, as it ends).
    #[command(after_help = "Exit codes: 0 every printed line completed, 1 one failed, 4 one paused, \
                            2 unknown batch or bad invocation.")]
    Results(super::batch_workers::ResultsArgs),
    /// Puts the lines of a submitted batch that ended other than completed
    /// (failed, timed out, cancelled) back to run, each as a new run (the
    /// calls their first runs made are made again), for the next `batch
    /// work`.
    #[command(
        after_help = "Exit codes: 0 done (the lines put back are named on stderr), 2 unknown batch or bad invocation."
    )]
    Retry(super::batch_workers::RetryArgs),
}

/// One usable input line.
struct Line {
    number: usize,
    call: BatchCall,
}

/// Runs `codemode batch`.
pub(crate) fn batch(args: BatchArgs) -> anyhow::Result<u8> {
    if let Some(command) = args.command {
        return match *command {
            BatchCommand::Status(status) => super::batch_status::status(status),
            BatchCommand::Submit(submit) => super::batch_workers::submit(submit),
            BatchCommand::Work(work) => super::batch_workers::work(work),
            BatchCommand::Results(results) => super::batch_workers::results(results),
            BatchCommand::Retry(retry) => super::batch_workers::retry(retry),
        };
    }
    if let Some(program) = args.program.clone() {
        return super::batch_program::run(args, &program);
    }
    let input = read_input(&args.file)?;
    let (lines, bad) = parse_lines(&input, args.tool.as_deref());
    print_invalid(&bad)?;
    if lines.is_empty() {
        if bad.is_empty() {
            anyhow::bail!(
                "the batch input has no calls: give JSON Lines, one {{\"tool\", \"arguments\"}} object per line (or arguments objects with --tool)"
            );
        }
        eprintln!("codemode: no line of the batch input is a call; nothing ran");
        return Ok(1);
    }
    let total = lines.len();
    let engine = build_engine(&args, total)?;
    let numbers: Vec<usize> = lines.iter().map(|l| l.number).collect();
    let batch = Batch::new(lines.into_iter().map(|l| l.call).collect());
    let options =
        BatchOptions::new().concurrency(args.concurrency.map(|n| n as usize)).fail_fast(args.fail_fast);

    let mut progress =
        Progress::new(total, std::io::stderr().is_terminal() && !args.engine.prompts() && !super::quiet());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let outcome = rt.block_on(run_batch(&engine, batch, options, args.ordered, &numbers, &mut progress));
    finish(&engine, outcome, args.json, bad.is_empty())
}

/// Reports each bad input line (line number, what is wrong) on stderr.
pub(crate) fn print_invalid_on_stderr(bad: &[(usize, String)]) {
    for (number, message) in bad {
        eprintln!("codemode: line {number}: {}", printable(message));
    }
}

/// The usable lines of a calls batch's input as `{tool, arguments}`
/// values (line number, value), and the bad lines.
pub(crate) fn call_values(
    input: &[u8],
    tool: Option<&str>,
) -> (Vec<(usize, Value)>, Vec<super::batch_program::BadLine>) {
    let (lines, bad) = parse_lines(input, tool);
    let values = lines
        .into_iter()
        .map(|l| (l.number, json!({"tool": l.call.tool, "arguments": l.call.arguments})))
        .collect();
    (values, bad)
}

/// Reports each bad input line (line number, what is wrong): on stderr,
/// and as an `invalid` item on stdout.
pub(crate) fn print_invalid(bad: &[(usize, String)]) -> anyhow::Result<()> {
    for (number, message) in bad {
        eprintln!("codemode: line {number}: {}; skipped", printable(message));
        #[derive(serde::Serialize)]
        struct Invalid<'a> {
            line: usize,
            status: &'a str,
            error: Value,
        }
        let error = json!({"kind": "invalid", "message": message});
        let text = serde_json::to_string(&Invalid { line: *number, status: "invalid", error })?;
        super::print_stdout(&(text + "\n"))?;
    }
    Ok(())
}

/// The engine for a batch of `total` calls, whose length is its call
/// budget unless one is set; refuses `--approve pause` and a `--tool` the
/// engine cannot call at all.
fn build_engine(args: &BatchArgs, total: usize) -> anyhow::Result<CliEngine> {
    // The batch is the user's explicit list: its length is its call budget,
    // unless --max-calls or [limits] max_calls sets one (a longer batch is
    // then refused whole).
    args.engine.refuse_pause("a batch")?;
    let engine = args.engine.clone().with_limits(args.limits.settings()).build_with(|limits, set| {
        if set.max_calls.is_none() {
            limits.max_calls = limits.max_calls.max(total);
        }
    })?;
    // A --tool the engine cannot call at all is one mistake, not one per line.
    if let Some(tool) = &args.tool
        && !tool.starts_with(codemode::mcp::naming::TOOL_PREFIX)
        && !engine.tool_specs().iter().any(|s| &s.name == tool)
    {
        anyhow::bail!(
            "--tool {tool}: there is no such tool; `codemode tools --all` lists them, `codemode search` finds them"
        );
    }
    Ok(engine)
}

/// How a batch run went.
struct Outcome {
    receipt: Receipt,
    /// The signal (SIGINT, SIGTERM) that cancelled the batch, if one did.
    signal: Option<u8>,
    /// Whether every item was ok.
    all_ok: bool,
    /// Whether every item could be printed (a failure cancelled the batch).
    output: std::io::Result<()>,
    /// The batch's run folder, held until its receipt is saved and its
    /// journal written, as `codemode run` holds its own (docs/JOURNAL.md,
    /// "Retention").
    hold: Option<codemode::journal::RunFolderHold>,
}

/// Runs `batch` on `engine`, printing each item (with its input line
/// number from `numbers`) as it finishes or, `ordered`, in input order,
/// and showing `progress`. A signal, or stdout failing, cancels the batch.
async fn run_batch(
    engine: &CliEngine,
    batch: Batch,
    options: BatchOptions,
    ordered: bool,
    numbers: &[usize],
    progress: &mut Progress,
) -> Outcome {
    let mut run = engine.start_batch(batch, options);
    let hold = engine.hold_run_folder(run.run_id()).ok();
    let canceller = run.canceller();
    let mut signal = None;
    let mut all_ok = true;
    // Once stdout fails (a closed pipe, a full disk), the batch is
    // cancelled: results nobody can read are not worth running for.
    let mut output: Result<(), std::io::Error> = Ok(());
    let stop = interrupted();
    tokio::pin!(stop);
    let mut order = Order::new(ordered);
    loop {
        let item = tokio::select! {
            item = run.next_item() => item,
            s = &mut stop, if signal.is_none() => {
                // SIGINT or SIGTERM cancels the batch; the items still
                // come (in_flight, not_started) and the receipt is kept.
                canceller.cancel();
                signal = Some(s);
                continue;
            }
        };
        let Some(item) = item else { break };
        all_ok &= item.is_ok();
        progress.item(&item);
        for item in order.ready(item) {
            if output.is_ok() {
                output = print_item(&item, numbers[item.index]);
                if output.is_err() {
                    canceller.cancel();
                }
            }
        }
    }
    // Every index comes once; should one not, what is held still goes
    // out, in order.
    for item in order.rest() {
        if output.is_ok() {
            output = print_item(&item, numbers[item.index]);
        }
    }
    progress.finish();
    Outcome { receipt: run.wait().await, signal, all_ok, output, hold }
}

/// Saves the receipt (then applies the retention), shows its summary on
/// stderr, prints it on stdout with `json`, and gives the exit code: the
/// signal's, 1 when an item failed or a line was bad (`all_lines_good`
/// false) or stdout failed, 141 for a closed pipe, else the run status's.
fn finish(engine: &CliEngine, outcome: Outcome, json: bool, all_lines_good: bool) -> anyhow::Result<u8> {
    let Outcome { receipt, signal, all_ok, output, hold } = outcome;
    let (receipt, saved) = super::save_receipt(engine, receipt);
    if let Some(store) = engine.journal_store() {
        let _ = store.flush_run(&receipt.run_id);
    }
    drop(hold);
    // Old runs go once this one is kept (docs/JOURNAL.md, "Runs on disk").
    engine.apply_retention(&receipt.run_id);
    let options =
        RenderOptions { include_value: false, receipt_path: saved.as_deref(), ..Default::default() };
    if !super::quiet() {
        eprint!("codemode: {}", printable(&receipt.render(&options)));
    }
    match &output {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            // The reader went away (`| head`): the batch was cancelled,
            // the receipt saved; exit as a writer killed by SIGPIPE would.
            return Ok(128 + 13);
        }
        Err(e) => {
            eprintln!("codemode: cannot write to stdout ({e}); the batch was cancelled");
            return Ok(1);
        }
        Ok(()) => {}
    }
    if json {
        super::print_stdout(&(receipt.to_json() + "\n"))?;
    }
    Ok(match (signal, receipt.status) {
        (Some(signal), _) => 128 + signal,
        (None, RunStatus::Completed) if all_ok && all_lines_good => 0,
        (None, RunStatus::Completed) => 1,
        (None, status) => status.exit_code(),
    })
}

/// The order items are printed in: as they finish, or (`--ordered`) by
/// index, each held until the items before it are out.
struct Order {
    ordered: bool,
    /// The index printed next (`--ordered`).
    next: usize,
    held: std::collections::BTreeMap<usize, BatchItem>,
}

impl Order {
    fn new(ordered: bool) -> Self {
        Order { ordered, next: 0, held: std::collections::BTreeMap::new() }
    }

    /// The items to print now that `item` has finished.
    fn ready(&mut self, item: BatchItem) -> Vec<BatchItem> {
        if !self.ordered {
            return vec![item];
        }
        self.held.insert(item.index, item);
        let mut out = Vec::new();
        while let Some(item) = self.held.remove(&self.next) {
            out.push(item);
            self.next += 1;
        }
        out
    }

    /// What is still held, in order.
    fn rest(&mut self) -> Vec<BatchItem> {
        std::mem::take(&mut self.held).into_values().collect()
    }
}

/// Prints one item as a JSON line, with its input line number. A closed
/// pipe is an error here (unlike `print_stdout`): it stops the batch.
fn print_item(item: &BatchItem, line: usize) -> std::io::Result<()> {
    use std::io::Write;
    #[derive(serde::Serialize)]
    struct Printed<'a> {
        line: usize,
        #[serde(flatten)]
        item: &'a BatchItem,
    }
    let mut text = serde_json::to_string(&Printed { line, item }).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush())
}

/// The largest batch input read: 64 MiB (10,000 items of 6 KiB each).
pub(crate) const MAX_BATCH_BYTES: usize = 64 << 20;

/// Reads the whole input (a file, or stdin for `-`) as bytes, up to
/// [`MAX_BATCH_BYTES`]: `/dev/zero` or an endless pipe is refused once
/// past it, not read into memory.
pub(crate) fn read_input(file: &str) -> anyhow::Result<Vec<u8>> {
    let input = if file == "-" {
        super::read_at_most(std::io::stdin().lock(), MAX_BATCH_BYTES)
            .context("cannot read the batch from stdin")?
    } else {
        std::fs::File::open(file).and_then(|f| super::read_at_most(f, MAX_BATCH_BYTES)).with_context(
            || format!("cannot read batch file `{file}` (give a JSON Lines file, or - for stdin)"),
        )?
    };
    if input.len() > MAX_BATCH_BYTES {
        let shown =
            if file == "-" { "the batch read from stdin".to_owned() } else { format!("batch file `{file}`") };
        anyhow::bail!(
            "{shown} is over {MAX_BATCH_BYTES} bytes, the most one batch reads: split it into several batches"
        );
    }
    Ok(input)
}

/// The usable lines of `input` and the bad ones (line number, what is
/// wrong). Blank lines are skipped silently.
fn parse_lines(input: &[u8], tool: Option<&str>) -> (Vec<Line>, Vec<(usize, String)>) {
    let mut lines = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in input.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            bad.push((number, "is not UTF-8 text".to_owned()));
            continue;
        };
        // A byte-order mark (Windows editors, PowerShell) is not content.
        let text = if number == 1 { text.trim_start_matches('\u{feff}') } else { text };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                bad.push((number, format!("is not JSON: {e}")));
                continue;
            }
        };
        // With --tool the line is the arguments: `arguments: must be an
        // object, got a list` names what is wrong the same way.
        let value = match tool {
            Some(tool) => json!({"tool": tool, "arguments": value}),
            None => value,
        };
        let call = BatchCall::from_value(&value, "").map_err(|e| e.to_string());
        match call {
            Ok(call) => lines.push(Line { number, call }),
            Err(message) => bad.push((number, message)),
        }
    }
    (lines, bad)
}

/// Progress on stderr: a bar on a terminal, else a count line at most once
/// a second (and none for a batch that ends within the first second).
struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    /// Items that ran (or were refused), and of those, the ones not ok.
    done: usize,
    not_ok: usize,
    /// Items that never started (fail-fast, the budget, the run's end).
    not_started: usize,
    last: Instant,
    /// Items seen when the last count line was printed.
    printed: usize,
}

impl Progress {
    fn new(total: usize, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template("{bar:40} {pos}/{len} items, {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message("0 not ok");
            bar
        });
        Progress { bar, total, done: 0, not_ok: 0, not_started: 0, last: Instant::now(), printed: 0 }
    }

    fn item(&mut self, item: &BatchItem) {
        match item.status {
            ItemStatus::NotStarted => self.not_started += 1,
            ItemStatus::Ok => self.done += 1,
            _ => {
                self.done += 1;
                self.not_ok += 1;
            }
        }
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                if item.status != ItemStatus::Ok {
                    bar.set_message(self.counts());
                }
            }
            None if self.last.elapsed() >= Duration::from_secs(1) => {
                self.last = Instant::now();
                self.printed = self.seen();
                super::note!("batch: {}/{} items done, {}", self.done, self.total, self.counts());
            }
            None => {}
        }
    }

    /// Items whose outcome is known, started or not.
    fn seen(&self) -> usize {
        self.done + self.not_started
    }

    /// `N not ok`, and `, M not started` when some never started.
    fn counts(&self) -> String {
        match self.not_started {
            0 => format!("{} not ok", self.not_ok),
            n => format!("{} not ok, {n} not started", self.not_ok),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.printed != self.seen() || self.seen() == 0 {
            super::note!("batch: {}/{} items done, {}", self.done, self.total, self.counts());
        }
    }
}
