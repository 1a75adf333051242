//! Batches shared by many workers through the PostgreSQL journal store
//! (docs/BATCH.md, "Many workers"): `codemode batch submit` stores a batch
//! (a program and its input lines, or calls) and prints its id; `codemode
//! batch work BATCH_ID`, in any number of processes on any machines
//! sharing the store, claims lines and runs them (each line its own run,
//! through the same driver as `batch --program`); `codemode batch results
//! BATCH_ID` prints the lines' outputs in line order.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codemode::Program;
use codemode::approval::BatchApprover;
use codemode::journal::batch_queue::{BatchInfo, BatchQueue, BatchWorker, ClaimedLine, NewBatch};
use codemode::journal::{JournalStore, NotResumableState, RunState, StoreError};
use serde_json::{Value, json};

use super::batch_program::{self, Counts, Driver, LineLog, Next, Work, WorkSource};
use super::batch_progress::Progress;
use super::batch_record;
use super::engine_args::{CallLimitArgs, CliEngine, EngineArgs};

/// The program a calls batch's lines run: each line `{tool, arguments}`.
const CALL_PROGRAM: &str = "return await tools.call(input.tool, input.arguments ?? {});\n";

/// Arguments of `codemode batch submit`.
#[derive(Debug, clap::Args)]
pub(crate) struct SubmitArgs {
    /// JSON Lines input: a file, or - to read stdin.
    #[arg(default_value = "-")]
    file: String,
    /// The program (.js or .ts) each line runs, the line's JSON value its
    /// global `input`. Without it each line is one call, `{"tool",
    /// "arguments"}` (or the arguments, with --tool).
    #[arg(long, value_name = "FILE")]
    program: Option<PathBuf>,
    /// Without --program: call this tool for every line; each line is then
    /// its arguments.
    #[arg(long, value_name = "NAME", conflicts_with = "program")]
    tool: Option<String>,
    /// The batch's id [default: a new batch-... id].
    #[arg(long, value_name = "ID")]
    batch_id: Option<String>,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Arguments of `codemode batch work`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkArgs {
    /// The batch's id, as `codemode batch submit` printed it.
    batch_id: String,
    /// Lines this worker runs at once.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    parallel: u32,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    limits: CallLimitArgs,
}

/// Arguments of `codemode batch retry`.
#[derive(Debug, clap::Args)]
pub(crate) struct RetryArgs {
    /// The batch's id.
    batch_id: String,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Arguments of `codemode batch results`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResultsArgs {
    /// The batch's id.
    batch_id: String,
    /// Wait for every line to end (or pause), printing each in line order
    /// as it does; without it, print the lines ended so far and exit.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// The engine's journal store, when it keeps shared batches.
fn shared_store(engine: &CliEngine) -> anyhow::Result<Arc<dyn JournalStore>> {
    match engine.journal_store() {
        Some(store) if store.batch_queue().is_some() => Ok(store.clone()),
        Some(store) => bail!(
            "the journal store {} cannot share a batch between workers: give --journal postgres://... (or \
             [journal] url) naming the PostgreSQL database the workers share",
            store.describe()
        ),
        None => bail!(
            "journaling is off: shared batches live in the PostgreSQL journal store (--journal postgres://...)"
        ),
    }
}

fn queue(store: &Arc<dyn JournalStore>) -> &dyn BatchQueue {
    store.batch_queue().expect("checked by shared_store")
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// Runs `codemode batch submit`: stores the batch, prints its id on stdout.
pub(crate) fn submit(args: SubmitArgs) -> anyhow::Result<u8> {
    let batch_id = args.batch_id.clone().unwrap_or_else(batch_record::new_batch_id);
    batch_record::check_batch_id(&batch_id)?;
    let input = super::batch::read_input(&args.file)?;
    let (program_name, program_source, program_about) = match &args.program {
        Some(path) => {
            let (name, source) = super::run::read_program(path)?;
            let about = json!({"path": batch_program::absolute(path), "sha256": batch_program::sha256_hex(source.as_bytes())});
            (name, source, about)
        }
        None => ("batch-calls.js".to_owned(), CALL_PROGRAM.to_owned(), json!({"calls": true})),
    };
    let (values, bad) = if args.program.is_some() {
        batch_program::parse_values(&input)
    } else {
        super::batch::call_values(&input, args.tool.as_deref())
    };
    // A line too big to be a program's input would fail when run: refused
    // now, with the rest, rather than leave a hole in the batch.
    let mut bad = bad;
    for (number, value) in &values {
        let size = value.to_string().len();
        if size > codemode::run::MAX_INPUT_BYTES {
            bad.push((
                *number,
                format!(
                    "is {size} bytes of JSON, over the most a program takes as its input ({} bytes); keep large \
                     data in files the program reads, and give their paths",
                    codemode::run::MAX_INPUT_BYTES
                ),
            ));
        }
    }
    bad.sort_by_key(|(n, _)| *n);
    super::batch::print_invalid_on_stderr(&bad);
    if !bad.is_empty() {
        let lines = if bad.len() == 1 { "1 input line is" } else { "input lines are" };
        bail!("{lines} not usable (above): nothing was submitted; fix them and submit again");
    }
    if values.is_empty() {
        bail!("the batch input has no line: give JSON Lines, one input per line");
    }
    let engine = args.engine.build()?;
    // A program every line's run would fail at its start is not submitted.
    // (The admission check is left to the workers: their catalogs, their
    // MCP servers, may differ from this process's.)
    if let Some(path) = &args.program
        && let Err(e) =
            engine.check_program(&codemode::Program::named(program_name.clone(), program_source.clone()))
        && e.kind != codemode::receipt::ErrorKind::Admission
    {
        bail!("{}; nothing was submitted", batch_program::cannot_run(path, &e));
    }
    let store = shared_store(&engine)?;
    let about = json!({
        "program": program_about,
        "input": {"path": if args.file == "-" { "-".to_owned() } else { batch_program::absolute(Path::new(&args.file)) },
                  "sha256": batch_program::sha256_hex(&input)},
    });
    let lines: Vec<(u64, String)> = values.iter().map(|(n, v)| (*n as u64, v.to_string())).collect();
    let count = lines.len();
    let batch = NewBatch {
        batch_id: batch_id.clone(),
        program_name,
        program_source,
        about: about.to_string(),
        lines,
    };
    runtime()?
        .block_on(queue(&store).submit(batch))
        .with_context(|| format!("cannot submit batch {batch_id}"))?;
    super::note!(
        "batch {batch_id}: {count} line{} submitted to {}; run workers with `codemode batch work {batch_id}` \
         (the same --journal), follow with `codemode batch status {batch_id}`",
        if count == 1 { "" } else { "s" },
        store.describe()
    );
    super::print_stdout(&format!("{batch_id}\n"))?;
    Ok(0)
}

/// Runs `codemode batch work`: claims lines of the batch and runs them
/// until every line of the batch ended or paused; the exit code of
/// docs/BATCH.md, for the lines this worker ran.
pub(crate) fn work(args: WorkArgs) -> anyhow::Result<u8> {
    batch_record::check_batch_id(&args.batch_id)?;
    let engine = args.engine.clone().with_limits(args.limits.settings()).build()?;
    let store = shared_store(&engine)?;
    let batch_id = args.batch_id.clone();
    runtime()?.block_on(async {
        let info = queue(&store).batch(&batch_id).await?;
        let worker: Arc<dyn BatchWorker> = Arc::from(queue(&store).join(&batch_id).await?);
        super::note!(
            "batch {batch_id}: worker joined: {} lines, {} ended, {} paused, {} to run",
            info.lines,
            info.completed + info.failed,
            info.paused,
            info.pending + info.orphaned
        );
        let program = Program::named(info.program_name.clone(), info.program_source.clone());
        let approver: Arc<dyn codemode::Approver> =
            Arc::new(BatchApprover::new(args.engine.approver()?, batch_id.clone()));
        let mut source = Claims::new(&engine, store.clone(), worker.clone(), &batch_id);
        source.take_paused(args.parallel as usize).await?;
        let mut driver =
            Driver::new(&engine, LineLog::Shared(worker), program, approver, (false, args.parallel), &[]);
        let total = info.lines as usize;
        let before = ((info.completed + info.failed) as usize, info.failed as usize);
        let progress = Progress::new(&batch_id, total, before, &args.engine);
        let outcome = driver.drive(&mut source, progress).await;
        let ran = Counts::of(driver.statuses.iter().map(|s| waiting_as_paused(s)));
        let code = batch_program::exit_code(outcome, &ran, true);
        let after = queue(&store).batch(&batch_id).await;
        if let Ok(after) = &after {
            super::note!("{}", render(after));
        }
        // A line of the batch still paused (one this worker did not run:
        // held by a `codemode resume` now, or undecided) is not done:
        // not a clean 0 for whoever waits on the worker.
        Ok(match after {
            Ok(after) if code == 0 && after.paused > 0 => 4,
            _ => code,
        })
    })
}

/// A line's status for the exit code: a shared line whose run is held by
/// another process (`running`) or could not be resumed (`not_resumed`) is
/// left `paused` in the store, not ended, and counts as paused.
fn waiting_as_paused(status: &str) -> &str {
    match status {
        "running" | "not_resumed" => "paused",
        other => other,
    }
}

/// Where a worker's lines come from: its claims.
struct Claims<'a> {
    engine: &'a CliEngine,
    store: Arc<dyn JournalStore>,
    worker: Arc<dyn BatchWorker>,
    batch_id: &'a str,
    /// Lines claimed and not yet started.
    claimed: VecDeque<Work>,
    /// When paused lines were last looked at.
    paused_seen: Option<std::time::Instant>,
}

impl<'a> Claims<'a> {
    fn new(
        engine: &'a CliEngine,
        store: Arc<dyn JournalStore>,
        worker: Arc<dyn BatchWorker>,
        batch_id: &'a str,
    ) -> Self {
        Claims { engine, store, worker, batch_id, claimed: VecDeque::new(), paused_seen: None }
    }

    /// Claims up to `room` paused lines that can go on: each whose run is
    /// paused with every pending call decided by a person (`codemode
    /// approve`), and each whose run is no longer paused (resumed by hand
    /// with `codemode resume`, or left waiting because it was held
    /// elsewhere or its resume was refused): its state decides, as for a
    /// line claimed again. A run held by a process now is left.
    async fn take_paused(&mut self, room: usize) -> anyhow::Result<()> {
        self.paused_seen = Some(std::time::Instant::now());
        let mut after = 0;
        let mut taken = 0;
        while taken < room {
            let page = queue(&self.store).lines(self.batch_id, after, 1000, Some("paused")).await?;
            let Some(last) = page.last() else { return Ok(()) };
            after = last.line;
            for line in page {
                if taken == room {
                    break;
                }
                let Some(run_id) = line.run_id else { continue };
                let ready = match self.store.load(&run_id).await.map(|r| r.state) {
                    Ok(RunState::Paused) => self
                        .engine
                        .pending_decisions(&run_id)
                        .await
                        .is_ok_and(|p| !p.is_empty() && p.iter().all(|c| c.recorded.is_some())),
                    Ok(RunState::Running) => false,
                    _ => true,
                };
                if ready && self.worker.claim_paused(line.line).await? {
                    let claimed = ClaimedLine { line: line.line, input: line.input, run_id, claims: 2 };
                    let work = self.work_of(claimed).await?;
                    self.claimed.push_back(work);
                    taken += 1;
                }
            }
        }
        Ok(())
    }

    /// What a claimed line needs: a new run under its run id when claimed
    /// the first time; else by its run's state in the store (the recovery
    /// rules of runs, as a restarted `batch --program` does).
    async fn work_of(&self, claimed: ClaimedLine) -> anyhow::Result<Work> {
        let line = claimed.line as usize;
        let input: Value = serde_json::from_str(&claimed.input).unwrap_or(Value::Null);
        if claimed.claims <= 1 {
            return Ok(Work::New { line, input, run_id: Some(claimed.run_id) });
        }
        let state = match self.store.load(&claimed.run_id).await {
            Ok(run) => Some(run.state),
            Err(StoreError::NotResumable { state: NotResumableState::Unknown, .. }) => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read run {}", claimed.run_id)),
        };
        Ok(batch_program::classify(self.engine, line, &input, claimed.run_id, state, None, true).await)
    }
}

impl WorkSource for Claims<'_> {
    async fn next(&mut self, room: usize) -> anyhow::Result<Next> {
        if let Some(work) = self.claimed.pop_front() {
            return Ok(Next::Work(work));
        }
        let room = u32::try_from(room).unwrap_or(u32::MAX).max(1);
        for claimed in self.worker.claim(room).await? {
            let work = self.work_of(claimed).await?;
            self.claimed.push_back(work);
        }
        if let Some(work) = self.claimed.pop_front() {
            return Ok(Next::Work(work));
        }
        // Nothing to claim now: paused lines that can go on (a person
        // decided meanwhile), looked at every few seconds; then done when
        // no line is left anywhere, else (lines running in other workers,
        // which may die) ask again.
        if self.paused_seen.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
            self.take_paused(room as usize).await?;
            if let Some(work) = self.claimed.pop_front() {
                return Ok(Next::Work(work));
            }
        }
        let open = queue(&self.store).unfinished(self.batch_id).await?;
        Ok(if open { Next::Later } else { Next::Done })
    }
}

/// Runs `codemode batch retry`: the lines that ended other than
/// `completed` go back to `pending` (named on stderr), for the next
/// `codemode batch work`.
pub(crate) fn retry(args: RetryArgs) -> anyhow::Result<u8> {
    batch_record::check_batch_id(&args.batch_id)?;
    let engine = args.engine.build()?;
    let store = shared_store(&engine)?;
    let lines = runtime()?.block_on(queue(&store).retry_failed(&args.batch_id))?;
    let id = &args.batch_id;
    match lines.len() {
        0 => super::note!("batch {id}: no line ended other than completed; nothing to retry"),
        n => {
            let shown: Vec<String> = lines.iter().take(20).map(u64::to_string).collect();
            let more = if n > 20 { format!(" and {} more", n - 20) } else { String::new() };
            super::note!(
                "batch {id}: {n} line{} back to run ({}{more}), each as a new run; run `codemode batch work {id}`",
                if n == 1 { "" } else { "s" },
                shown.join(", ")
            );
        }
    }
    Ok(0)
}

/// Runs `codemode batch results`: the output of each line that ended or
/// paused, in line order, as JSON Lines; with `--wait`, every line's, as
/// they end. Exit 1 when a printed line failed, 4 when one paused (none
/// failed), else 0.
pub(crate) fn results(args: ResultsArgs) -> anyhow::Result<u8> {
    batch_record::check_batch_id(&args.batch_id)?;
    let engine = args.engine.build()?;
    let store = shared_store(&engine)?;
    runtime()?.block_on(async {
        let queue = queue(&store);
        queue.batch(&args.batch_id).await?;
        let statuses = print_lines(queue, &args.batch_id, args.wait).await?;
        let left = queue.batch(&args.batch_id).await?;
        if !left.finished() {
            super::note!(
                "{} lines have not ended yet (`--wait` waits for them)",
                left.pending + left.running + left.orphaned
            );
        }
        let counts = Counts::of(statuses.iter().map(|s| waiting_as_paused(s)));
        let outcome = batch_program::Outcome { signal: None, output: Ok(()) };
        Ok(batch_program::exit_code(outcome, &counts, true))
    })
}

/// Prints the output of every line that ended or paused, in line order;
/// with `wait`, waits at each line that has not (polling twice a second).
/// Returns the printed lines' statuses.
pub(crate) async fn print_lines(
    queue: &dyn BatchQueue,
    batch_id: &str,
    wait: bool,
) -> anyhow::Result<Vec<String>> {
    let mut after = 0;
    let mut statuses = Vec::new();
    loop {
        let page = queue.lines(batch_id, after, 1000, None).await?;
        let Some(last) = page.last().map(|l| l.line) else { return Ok(statuses) };
        let mut blocked = false;
        for line in page {
            if let (Some(output), Some(status), "ended" | "paused") =
                (&line.output, &line.status, line.state.as_str())
            {
                super::print_stdout(&format!("{output}\n"))?;
                statuses.push(status.clone());
            } else if wait {
                blocked = true;
                break;
            }
            after = line.line;
        }
        if blocked {
            tokio::time::sleep(Duration::from_millis(500)).await;
        } else {
            after = last;
        }
    }
}

/// `codemode batch status` of a shared batch: `{batch_id, shared: true,
/// lines, completed, failed, paused, running, orphaned, not_started, held,
/// program, input, created_unix}`.
pub(crate) fn summary(info: &BatchInfo) -> Value {
    let about: Value = serde_json::from_str(&info.about).unwrap_or(Value::Null);
    json!({
        "batch_id": info.batch_id,
        "shared": true,
        "lines": info.lines,
        "completed": info.completed,
        "failed": info.failed,
        "paused": info.paused,
        "running": info.running,
        "orphaned": info.orphaned,
        "not_started": info.pending,
        "held": info.running > 0,
        "program": about["program"]["path"].as_str().unwrap_or("(one call per line)"),
        "input": about["input"]["path"],
        "created_unix": info.created_unix,
    })
}

/// One line of counts for people.
pub(crate) fn render(info: &BatchInfo) -> String {
    format!(
        "batch {}: {} lines: {} completed, {} failed, {} paused, {} running, {} not started{}",
        info.batch_id,
        info.lines,
        info.completed,
        info.failed,
        info.paused,
        info.running,
        info.pending,
        if info.orphaned > 0 {
            format!(", {} left by a worker that is gone (the next worker takes them)", info.orphaned)
        } else {
            String::new()
        }
    )
}

/// `codemode batch status` of a batch in the shared store: the counts,
/// `--json`, or with `lines` every ended line's output.
///
/// # Errors
/// The engine's store keeps no shared batches, has no such batch, or
/// fails.
pub(crate) fn status(engine: &CliEngine, batch_id: &str, as_json: bool, lines: bool) -> anyhow::Result<u8> {
    let store = shared_store(engine)?;
    runtime()?.block_on(async {
        let info = queue(&store).batch(batch_id).await?;
        if lines {
            print_lines(queue(&store), batch_id, false).await?;
        } else if as_json {
            super::print_stdout(&format!("{}\n", summary(&info)))?;
        } else {
            super::print_stdout(&format!("{}\n", render(&info)))?;
        }
        Ok(0)
    })
}
