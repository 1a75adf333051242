//! `codemode batch --program prog.js inputs.jsonl`: the program runs once
//! per input line, the line's JSON value its global `input`; each run its
//! own VM, journal and receipt, all under one batch id whose record
//! (`batch_record.rs`) makes the batch restartable (docs/BATCH.md,
//! "A program over many inputs").

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use codemode::approval::BatchApprover;
use codemode::journal::RunState;
use codemode::receipt::RunStatus;
use codemode::run::{Canceller, Run, RunOptions};
use codemode::{Program, Receipt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use super::batch::BatchArgs;
use super::batch_progress::Progress;
use super::batch_record::{self, Entry, Header, LineState, Record, Source};
use super::engine_args::CliEngine;
use codemode::journal::batch_queue::BatchWorker;

/// What a line needs this time.
pub(crate) enum Work {
    /// Never started (or its run never made a journal): a new run, under
    /// `run_id` when the line's run id is fixed (a shared batch's line),
    /// else a new one.
    New { line: usize, input: Value, run_id: Option<String> },
    /// Its run was interrupted (or paused, and every pending call is now
    /// decided): `Engine::start_resume` goes on with it.
    Resume { line: usize, run_id: String },
    /// Its run ended before the record said so: the output comes from it.
    Ended { line: usize, run_id: String, state: RunState },
    /// Still paused, or held by another process: reported again.
    Waiting { line: usize, run_id: String, output: Value },
}

impl Work {
    fn line(&self) -> usize {
        match self {
            Work::New { line, .. }
            | Work::Resume { line, .. }
            | Work::Ended { line, .. }
            | Work::Waiting { line, .. } => *line,
        }
    }
}

/// How one line ended this time.
struct Done {
    line: usize,
    run_id: String,
    status: String,
    output: Value,
}

/// Runs a program batch; the exit code as docs/BATCH.md says.
pub(crate) fn run(args: BatchArgs, program_file: &Path) -> anyhow::Result<u8> {
    let (name, source) = super::run::read_program(program_file)?;
    if codemode::run::is_blank(&source) {
        bail!("the program {} {}", program_file.display(), codemode::run::BLANK_PROGRAM);
    }
    let batch_id = args.batch_id.clone().unwrap_or_else(batch_record::new_batch_id);
    batch_record::check_batch_id(&batch_id)?;
    let input = super::batch::read_input(&args.file)?;
    let (values, bad) = parse_values(&input);
    super::batch::print_invalid(&bad)?;
    if values.is_empty() {
        bail!("the batch input has no line: give JSON Lines, one input value per line");
    }
    let engine = build_engine(&args)?;
    let program = Program::named(name, source).with_path(program_file);
    if let Err(e) = engine.check_program(&program) {
        bail!("{}; no line was run", cannot_run(program_file, &e));
    }
    let Some(store) = engine.journal_store() else {
        bail!("a program batch keeps its runs' journals (its restart depends on them): leave the journal on");
    };
    let folder = store.folder().map_or_else(|| engine.runs_folder().to_path_buf(), Path::to_path_buf);
    let header = Header {
        batch_id: batch_id.clone(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        program: Source { path: absolute(program_file), sha256: sha256_hex(program.source().as_bytes()) },
        input: Source {
            path: if args.file == "-" { "-".into() } else { absolute(Path::new(&args.file)) },
            sha256: sha256_hex(&input),
        },
        lines: values.len(),
    };
    let (record, entries) = Record::open(&folder, &header)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let states = batch_record::states(&entries);
        let plan = plan(&engine, &values, &states).await?;
        let before = Counts::of(states.values().filter_map(|s| match s {
            LineState::Ended { status, .. } if batch_record::is_final(status) => Some(status.as_str()),
            _ => None,
        }));
        let total = values.len();
        super::note!(
            "batch {batch_id}: {total} lines, {} done before, {} to run; status: codemode batch status {batch_id}; \
             restart: the same command with --batch-id {batch_id}",
            before.done,
            plan.len()
        );
        let approver: Arc<dyn codemode::Approver> =
            Arc::new(BatchApprover::new(args.engine.approver()?, batch_id.clone()));
        let mut driver =
            Driver::new(&engine, LineLog::File(record), program, approver, (args.ordered, args.parallel), &plan);
        let progress = Progress::new(&batch_id, total, (before.done, before.failed), &args.engine);
        let outcome = driver.drive(&mut VecDeque::from(plan), progress).await;
        let all = Counts::of(before.statuses.iter().map(String::as_str).chain(driver.statuses.iter().map(String::as_str)));
        Ok(exit_code(outcome, &all, bad.is_empty()))
    })
}

/// Says why the program `file` cannot run (`e`, from
/// [`codemode::Engine::check_program`]), where in it.
pub(crate) fn cannot_run(file: &Path, e: &codemode::receipt::RunError) -> String {
    let at = match (e.line, e.column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        _ => String::new(),
    };
    let kind =
        serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    format!("the program {} cannot run ({kind}{at}): {}", file.display(), e.message)
}

/// The engine of a program batch: `--approve pause` is allowed (each line
/// is a journaled run that can pause).
fn build_engine(args: &BatchArgs) -> anyhow::Result<CliEngine> {
    args.engine.clone().with_limits(args.limits.settings()).build()
}

/// A bad input line: its number and what is wrong.
pub(crate) type BadLine = (usize, String);

/// The usable lines of `input` (line number, value) and the bad ones.
pub(crate) fn parse_values(input: &[u8]) -> (Vec<(usize, Value)>, Vec<BadLine>) {
    let mut values = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in input.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            bad.push((number, "is not UTF-8 text".to_owned()));
            continue;
        };
        let text = if number == 1 { text.trim_start_matches('\u{feff}') } else { text }.trim();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v) => values.push((number, v)),
            Err(e) => bad.push((number, format!("is not JSON: {e}"))),
        }
    }
    (values, bad)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path)).display().to_string()
}

/// What each line not yet done needs, in input order: lines the record
/// has not seen run anew; a line whose run started is looked up in the
/// journal store (the recovery rules of runs decide what happens to it).
async fn plan(
    engine: &CliEngine,
    values: &[(usize, Value)],
    states: &BTreeMap<usize, LineState>,
) -> anyhow::Result<Vec<Work>> {
    let mut known: Option<HashMap<String, RunState>> = None;
    let mut plan = Vec::new();
    for (line, input) in values {
        let (run_id, output) = match states.get(line) {
            None => {
                plan.push(Work::New { line: *line, input: input.clone(), run_id: None });
                continue;
            }
            Some(LineState::Ended { status, .. }) if batch_record::is_final(status) => continue,
            Some(LineState::Ended { run_id, output, .. }) => (run_id.clone(), Some(output.clone())),
            Some(LineState::Started { run_id }) => (run_id.clone(), None),
        };
        if known.is_none() {
            let store = engine.journal_store().expect("checked");
            let listed = store.list().await.context("cannot list the journal store's runs")?;
            known = Some(listed.into_iter().map(|r| (r.run_id, r.state)).collect());
        }
        let state = known.as_ref().and_then(|k| k.get(&run_id)).copied();
        plan.push(classify(engine, *line, input, run_id, state, output, false).await);
    }
    Ok(plan)
}

/// What a started line needs, by its run's `state` in the store; a run
/// that never made a journal runs anew, under the same id when `keep_id`.
pub(crate) async fn classify(
    engine: &CliEngine,
    line: usize,
    input: &Value,
    run_id: String,
    state: Option<RunState>,
    output: Option<Value>,
    keep_id: bool,
) -> Work {
    let waiting = |run_id: String, status: &str, message: String| {
        let output = output.clone().unwrap_or_else(|| {
            json!({"line": line, "run_id": run_id, "status": status, "error": {"kind": status, "message": message}})
        });
        Work::Waiting { line, run_id, output }
    };
    match state {
        // No journal: the run made none before the batch stopped, so no
        // call that may change something started (its start is durable
        // first). It runs anew.
        None => Work::New { line, input: input.clone(), run_id: keep_id.then_some(run_id) },
        Some(RunState::Interrupted) => Work::Resume { line, run_id },
        Some(RunState::Paused) => {
            let decided = engine
                .pending_decisions(&run_id)
                .await
                .is_ok_and(|p| !p.is_empty() && p.iter().all(|c| c.recorded.is_some()));
            if decided {
                Work::Resume { line, run_id }
            } else {
                // A shared batch's line (its run id kept) goes on with the
                // next worker; a batch of one process with its restart.
                let next = if keep_id {
                    "a `codemode batch work` of this batch takes it up"
                } else {
                    "restart the batch"
                };
                let m = format!("paused: decide with `codemode approve {run_id}`, then {next}");
                waiting(run_id, "paused", m)
            }
        }
        Some(RunState::Running) => {
            let m = format!("run {run_id} is held by another process (a `codemode resume`?); restart later");
            waiting(run_id, "running", m)
        }
        Some(state) => Work::Ended { line, run_id, state },
    }
}

/// Counts of line statuses.
#[derive(Default)]
pub(crate) struct Counts {
    done: usize,
    failed: usize,
    paused: usize,
    statuses: Vec<String>,
}

impl Counts {
    pub(crate) fn of<'a>(statuses: impl Iterator<Item = &'a str>) -> Counts {
        let mut c = Counts::default();
        for s in statuses {
            c.statuses.push(s.to_owned());
            match s {
                "paused" => c.paused += 1,
                "completed" => c.done += 1,
                _ => {
                    c.done += 1;
                    c.failed += 1;
                }
            }
        }
        c
    }
}

/// How the drive ended.
pub(crate) struct Outcome {
    pub(crate) signal: Option<u8>,
    pub(crate) output: std::io::Result<()>,
}

/// The exit code: a signal's, 141 for a closed stdout, 1 when a line
/// failed or was bad (or stdout failed), 4 when a line is paused, else 0.
pub(crate) fn exit_code(outcome: Outcome, all: &Counts, lines_good: bool) -> u8 {
    if let Some(signal) = outcome.signal {
        return 128 + signal;
    }
    match outcome.output {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return 141,
        Err(e) => {
            eprintln!("codemode: {e}; the batch stopped starting lines (the lines running finished)");
            return 1;
        }
        Ok(()) => {}
    }
    if all.failed > 0 || !lines_good {
        1
    } else if all.paused > 0 {
        4
    } else {
        0
    }
}

/// Where a batch records its lines: the local record file, or the shared
/// batch in the journal store (a worker's claims, `batch_workers.rs`).
pub(crate) enum LineLog {
    File(Record),
    Shared(Arc<dyn BatchWorker>),
}

impl LineLog {
    /// Records that `line` starts run `run_id`, durably, before it starts
    /// (a shared line's run id was made durable by its claim).
    fn started(&mut self, line: usize, run_id: &str) -> anyhow::Result<()> {
        match self {
            LineLog::File(record) => record.append(&Entry::Start { line, run_id: run_id.to_owned() }),
            LineLog::Shared(_) => Ok(()),
        }
    }

    /// Records how `line` ended, durably.
    async fn ended(
        &mut self,
        line: usize,
        run_id: String,
        status: String,
        output: &Value,
    ) -> anyhow::Result<()> {
        match self {
            LineLog::File(record) => {
                record.append(&Entry::End { line, run_id, status, output: output.clone() })
            }
            LineLog::Shared(worker) => {
                Ok(worker.end(line as u64, &run_id, &status, output.to_string()).await?)
            }
        }
    }

    /// A line left waiting (paused, held by another process, its resume
    /// refused): the record file keeps it as it was; a shared batch gets
    /// it back as `paused`, so the worker's claim does not keep it.
    async fn waiting(
        &mut self,
        line: usize,
        run_id: String,
        status: &str,
        output: &Value,
    ) -> anyhow::Result<()> {
        match self {
            LineLog::File(_) => Ok(()),
            LineLog::Shared(_) => self.ended(line, run_id, status.to_owned(), output).await,
        }
    }
}

/// What a batch's driver asks for its next line.
pub(crate) enum Next {
    Work(Work),
    /// Nothing to start now; ask again in a second (lines held by other
    /// workers may come free).
    Later,
    /// Nothing left to start.
    Done,
}

/// Where a batch's lines come from: its plan (one process), or claims
/// from a shared batch (`batch_workers.rs`).
pub(crate) trait WorkSource {
    /// The next line's work, with room for `room` more lines now.
    async fn next(&mut self, room: usize) -> anyhow::Result<Next>;
}

impl WorkSource for VecDeque<Work> {
    async fn next(&mut self, _room: usize) -> anyhow::Result<Next> {
        Ok(self.pop_front().map_or(Next::Done, Next::Work))
    }
}

/// The running batch.
pub(crate) struct Driver<'a> {
    engine: &'a CliEngine,
    record: LineLog,
    program: Program,
    /// Every line's runs ask it (`BatchApprover`).
    approver: Arc<dyn codemode::Approver>,
    ordered: bool,
    parallel: usize,
    /// The lines to print in order (`--ordered`), front first.
    expected: VecDeque<usize>,
    held: BTreeMap<usize, Value>,
    running: JoinSet<Done>,
    cancellers: HashMap<usize, Canceller>,
    /// The status of each line that ended this time.
    pub(crate) statuses: Vec<String>,
}

impl<'a> Driver<'a> {
    /// A driver running `parallel` lines at once; with `ordered`, printing
    /// them in the order of `plan`.
    pub(crate) fn new(
        engine: &'a CliEngine,
        record: LineLog,
        program: Program,
        approver: Arc<dyn codemode::Approver>,
        (ordered, parallel): (bool, u32),
        plan: &[Work],
    ) -> Self {
        Driver {
            engine,
            record,
            program,
            approver,
            ordered,
            parallel: (parallel as usize).max(1),
            expected: if ordered { plan.iter().map(Work::line).collect() } else { VecDeque::new() },
            held: BTreeMap::new(),
            running: JoinSet::new(),
            cancellers: HashMap::new(),
            statuses: Vec::new(),
        }
    }

    /// Starts lines while fewer than `parallel` run, takes each as it
    /// ends (recorded, then printed), until all are done. The first
    /// SIGINT/SIGTERM starts no further line (those running finish), the
    /// second cancels those running.
    pub(crate) async fn drive(&mut self, source: &mut impl WorkSource, mut progress: Progress) -> Outcome {
        let mut signal = None;
        let mut output = Ok(());
        let mut signals = Signals::new();
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        tick.tick().await;
        let mut poll = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            let mut later = false;
            while signal.is_none() && output.is_ok() && self.running.len() < self.parallel {
                let started = match source.next(self.parallel - self.running.len()).await {
                    Ok(Next::Work(work)) => self.start(work).await,
                    Ok(Next::Later) => {
                        later = true;
                        break;
                    }
                    Ok(Next::Done) => break,
                    Err(e) => Err(e),
                };
                if let Err(e) = started {
                    output = Err(std::io::Error::other(format!("{e:#}")));
                }
            }
            let waiting = later && signal.is_none() && output.is_ok();
            if self.running.is_empty() && !waiting {
                break;
            }
            tokio::select! {
                joined = self.running.join_next(), if !self.running.is_empty() => {
                    let Some(Ok(done)) = joined else { continue };
                    self.cancellers.remove(&done.line);
                    match self.finish(done, output.is_ok()).await {
                        Ok(status) => progress.line(&status),
                        Err(e) => output = Err(e),
                    }
                }
                _ = poll.tick(), if waiting => {}
                s = signals.next() => {
                    if signal.is_some() {
                        self.cancellers.values().for_each(Canceller::cancel);
                    } else {
                        signal = Some(s);
                        eprintln!("codemode: stopping: no new line starts; the {} running finish (again to cancel them)", self.running.len());
                    }
                }
                _ = tick.tick() => progress.tick(),
            }
        }
        progress.finish();
        for (_, value) in std::mem::take(&mut self.held) {
            if output.is_ok() {
                output = print_line(&value);
            }
        }
        Outcome { signal, output }
    }

    /// Starts one line's work (a run, a resume), or settles it at once.
    async fn start(&mut self, work: Work) -> anyhow::Result<()> {
        match work {
            Work::New { line, input, run_id } => {
                let run_id = run_id.unwrap_or_else(codemode::Engine::new_run_id);
                // Durable before the run starts: a restart finds this run.
                self.record.started(line, &run_id)?;
                let program = self.program.clone().with_input(input);
                // Each line is a run of the trace `TRACEPARENT` names,
                // when it names one (docs/TELEMETRY.md).
                let options = RunOptions::with_approver(self.approver.clone())
                    .run_id(run_id)
                    .trace_parent(super::telemetry::parent_from_env());
                let run = self.engine.start_with(program, options);
                self.spawn(line, run, false);
            }
            Work::Resume { line, run_id } => {
                let options = RunOptions::with_approver(self.approver.clone());
                // A worker's runs are not bound to a path: another worker,
                // in its own workspace, may have started this one.
                let options = match self.record {
                    LineLog::Shared(_) => options.any_workspace(),
                    LineLog::File(_) => options,
                };
                match self.engine.start_resume_with(&run_id, &[], options).await {
                    Ok(run) => self.spawn(line, run, true),
                    Err(refused) => {
                        // Refused before anything ran: the line waits as it was.
                        let mut output = output_of(line, &refused, true);
                        output["status"] = json!("not_resumed");
                        self.running
                            .spawn(async move { Done { line, run_id, status: WAITING.into(), output } });
                    }
                }
            }
            Work::Ended { line, run_id, state } => {
                let output = ended_output(self.engine, line, &run_id, state);
                let status = output["status"].as_str().unwrap_or("failed").to_owned();
                self.running.spawn(async move { Done { line, run_id, status, output } });
            }
            Work::Waiting { line, run_id, output } => {
                self.running.spawn(async move { Done { line, run_id, status: WAITING.into(), output } });
            }
        }
        Ok(())
    }

    fn spawn(&mut self, line: usize, run: Run, recovered: bool) {
        self.cancellers.insert(line, run.canceller());
        let engine: codemode::Engine = (**self.engine).clone();
        // The line's run folder is held until its receipt is saved, as
        // `codemode run` holds its own: a prune in another process does
        // not remove it meanwhile.
        let hold = engine.hold_run_folder(run.run_id()).ok();
        self.running.spawn(async move {
            let receipt = run.wait().await;
            let output = output_of(line, &receipt, recovered);
            let run_id = receipt.run_id.clone();
            let status = receipt.status.as_str().to_owned();
            let _ = engine.save_receipt(&receipt);
            drop(hold);
            Done { line, run_id, status, output }
        });
    }

    /// Records a line that ended (durable first), then prints it when
    /// `print` (in input order with `--ordered`); returns its status. A
    /// line still waiting (paused, held elsewhere, its resume refused) is
    /// printed again, its record left as it was.
    async fn finish(&mut self, done: Done, print: bool) -> std::io::Result<String> {
        let Done { line, run_id, status, output } = done;
        let status = match status.as_str() {
            WAITING => {
                let status = output["status"].as_str().unwrap_or("paused").to_owned();
                self.record
                    .waiting(line, run_id, &status, &output)
                    .await
                    .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
                status
            }
            _ => {
                self.record
                    .ended(line, run_id, status.clone(), &output)
                    .await
                    .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
                status
            }
        };
        self.statuses.push(status.clone());
        if !print {
            return Ok(status);
        }
        if !self.ordered {
            print_line(&output)?;
            return Ok(status);
        }
        self.held.insert(line, output);
        while let Some(front) = self.expected.front() {
            let Some(value) = self.held.remove(front) else { break };
            self.expected.pop_front();
            print_line(&value)?;
        }
        Ok(status)
    }
}

/// The status of a line's work that leaves its record as it was.
const WAITING: &str = "waiting";

/// SIGINT and SIGTERM, each as many times as they come.
struct Signals {
    int: Option<tokio::signal::unix::Signal>,
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Signals { int: signal(SignalKind::interrupt()).ok(), term: signal(SignalKind::terminate()).ok() }
    }

    /// The next signal's number.
    async fn next(&mut self) -> u8 {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = recv(&mut self.int) => 2,
            () = recv(&mut self.term) => 15,
        }
    }
}

/// The JSON line of a line whose run ended (or paused) with `receipt`:
/// `{line, run_id, status, value}` or `{..., error: {kind, message}}`,
/// with `pending` calls of a paused run and `recovered` when the run was
/// recovered or resumed.
fn output_of(line: usize, receipt: &Receipt, recovered: bool) -> Value {
    let mut out = json!({"line": line, "run_id": receipt.run_id, "status": receipt.status.as_str()});
    if receipt.status == RunStatus::Completed {
        out["value"] = receipt.value.clone();
        if receipt.value_truncated.is_some() {
            out["value_truncated"] = json!(true);
        }
    }
    if let Some(e) = &receipt.error {
        out["error"] = e.brief();
    }
    if !receipt.pending.is_empty() {
        let pending: Vec<Value> = receipt
            .pending
            .iter()
            .map(|p| json!({"seq": p.seq, "tool": p.tool, "reason": p.reason}))
            .collect();
        out["pending"] = Value::Array(pending);
    }
    out["calls"] = json!(receipt.calls.len());
    if recovered {
        out["recovered"] = json!(true);
    }
    out
}

/// The output of a line whose run ended before the record said so (the
/// batch was killed in between): from its saved receipt, else from the
/// store's state.
fn ended_output(engine: &CliEngine, line: usize, run_id: &str, state: RunState) -> Value {
    let status = match state {
        RunState::Completed => "completed",
        RunState::TimedOut => "timed_out",
        RunState::Cancelled => "cancelled",
        _ => "failed",
    };
    // The receipt of this machine's runs folder, when it is of the run's
    // end: one saved when the run paused here, before it was resumed
    // elsewhere, is not.
    let saved = engine.runs_folder().join(run_id).join("receipt.json");
    if let Ok(text) = std::fs::read_to_string(saved)
        && let Ok(receipt) = serde_json::from_str::<Receipt>(&text)
        && receipt.status.as_str() == status
    {
        return output_of(line, &receipt, true);
    }
    let message = format!(
        "the run ended {state} before the batch recorded it, and its receipt was not saved; what it did: \
         `codemode runs show {run_id}`"
    );
    json!({"line": line, "run_id": run_id, "status": status, "error": {"kind": "unrecorded", "message": message}, "recovered": true})
}

/// Prints one JSON line on stdout; a closed pipe is an error here.
fn print_line(value: &Value) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut text = serde_json::to_string(value).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write to stdout: {e}")))
}
