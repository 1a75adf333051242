//! The command line: parsing (clap) apart from running; one file per
//! subcommand.
//!
//! Exit codes (DESIGN.md §9): 0 completed, 1 program failed, 2 bad
//! invocation or config, 3 timed out, 4 paused, 5 a run id that cannot be
//! resumed, 6 completed but its value was cut, 130 cancelled.

mod approve;
mod batch;
mod batch_program;
mod batch_progress;
mod batch_record;
mod batch_status;
mod batch_workers;
mod call;
mod deferred;
mod engine_args;
mod generate;
mod mcp;
mod own_server;
mod resume;
mod retention;
mod rollback;
mod run;
mod runs;
mod runs_wait;
mod search;
mod serve;
mod telemetry;
mod tools;
mod trust;
mod types;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, Subcommand};
use deferred::Deferred;

/// Exit code for a bad invocation or configuration.
pub(crate) const EXIT_USAGE: u8 = 2;

/// The exit codes of a command that runs a program (`run`), shown at the
/// end of its help.
const RUN_EXIT_CODES: &str = "Exit codes: 0 completed, 1 the program failed, 2 bad invocation or config \
(nothing ran), 3 timed out, 4 paused (decide with `codemode resume`), 6 completed but the value was over \
--max-value and stdout has only its first bytes, as a JSON string (stderr names the file with the whole), \
130 cancelled by SIGINT (143 by SIGTERM); a run that started keeps its receipt in every case.";

/// The exit codes of the commands that only read (`tools`, `types`, `mcp
/// list`, `runs list`, `trust`).
pub(crate) const READ_EXIT_CODES: &str = "Exit codes: 0 done, 2 bad invocation or config.";

/// Exit code for a run id that cannot be resumed (unknown, ended, held by
/// another process, interrupted): final, retrying gives the same answer.
pub(crate) const EXIT_NOT_RESUMABLE: u8 = 5;

/// Exit code for a run that completed with a value over its bound
/// (`--max-value`, `[limits] max_value`): stdout has a prefix of it, not
/// the value.
pub(crate) const EXIT_VALUE_CUT: u8 = 6;

/// `-q` was given: no summaries, progress, notices or hints on stderr.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether `-q` was given: the CLI writes only errors and warnings (and
/// the line saying a value was cut) on stderr.
pub(crate) fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// When the command started (set first thing in [`main`]).
static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// When the command started: a prune it makes leaves to the next prune
/// every run another process ended since (docs/JOURNAL.md, "Retention"),
/// even when its own run ended before its prune began.
pub(crate) fn started() -> std::time::SystemTime {
    *STARTED.get_or_init(std::time::SystemTime::now)
}

/// Writes `codemode: TEXT` on stderr unless `-q` was given: for what the
/// CLI tells a person in passing (what file it applied, where it serves,
/// how far a batch is), never for an error or a warning.
macro_rules! note {
    ($($arg:tt)*) => {
        if !$crate::cli::quiet() {
            eprintln!("codemode: {}", format_args!($($arg)*));
        }
    };
}
pub(crate) use note;

/// codemode runs a JavaScript or TypeScript program whose only way out
/// is `await tools.call(name, args)`: every call passes a permission
/// gate, and every run keeps a receipt naming each call.
///
/// `codemode run prog.js` prints the program's value on stdout as JSON, a
/// summary of the receipt on stderr, and saves the whole receipt in the
/// run's folder outside the workspace, under $XDG_STATE_HOME/codemode
/// (`run --json` prints it on stdout instead). Each
/// command's --help lists its options and its exit codes.
///
/// Exit codes of `run`: 0 completed, 1 program failed, 2 bad invocation
/// or config, 3 timed out, 4 paused (decide with `codemode resume`), 6
/// completed but the value printed was cut (raise --max-value), 130
/// cancelled by SIGINT (143 by SIGTERM); `resume` adds 5, a run id that
/// cannot be resumed (as do the commands that name a run: `approve`,
/// `rollback`, `runs show`, `runs wait`, `runs cancel`).
#[derive(Debug, Parser)]
#[command(name = "codemode", version, about, long_about)]
pub(crate) struct Cli {
    /// Quiet: no summary, progress, notices or hints on stderr; errors,
    /// warnings, a cut value and a pause (one line: the run and how to
    /// resume it) are still said.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Verbose: also the library's debug log on stderr (-vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// The level of the library's log on stderr: warnings (`-q` too),
    /// debug with `-v`, trace with `-vv`.
    pub(crate) fn log_level(&self) -> tracing::Level {
        match self.verbose {
            0 => tracing::Level::WARN,
            1 => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        }
    }
}

/// Parses the command line (exits with clap's message and code 2 on a bad
/// one).
pub(crate) fn parse() -> Cli {
    // What `Cli::parse` does (the same errors, exits and messages), but
    // the command tree built for the parse is left to the process's exit
    // instead of dropped: freeing it cost about 0.3M instructions, 5% of a
    // `codemode run` of `return 1` (docs/PERFORMANCE.md).
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let mut matches = command.try_get_matches_from_mut(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut command).exit());
    std::mem::forget(command);
    cli
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a program (a .js or .ts file, or - for stdin): its value on
    /// stdout as JSON, the receipt's summary on stderr.
    ///
    /// The value is printed as JSON (a string in quotes, so `"42"` and
    /// `42` differ; objects in the program's key order), with terminal
    /// control and bidirectional characters as \uXXXX escapes. The whole
    /// receipt is saved in the run's folder (its path is printed); with
    /// --json it is printed on stdout instead of the value. Limits come
    /// from the flags, else codemode.toml's [limits], else the defaults
    /// (docs/LIMITS.md).
    #[command(after_help = RUN_EXIT_CODES)]
    Run(Deferred<run::RunArgs>),
    /// Decide the pending calls of a paused run and go on (--allow SEQ,
    /// --deny SEQ); the program re-runs from its journal, each call once.
    ///
    /// A run paused by `--approve pause` (exit 4) lists its pending calls
    /// in its receipt. `resume` re-runs the program in a fresh VM: calls
    /// the journal holds are answered from it without running again, the
    /// decisions are applied, and the run goes on; it may pause again
    /// (the default approver here is `pause`). Run it with the same
    /// --workspace, --config and --mcp-config as the run: a changed
    /// program, catalog or policy is refused, and the run stays paused.
    /// Decisions recorded with `codemode approve` apply too: with them,
    /// `codemode resume RUN_ID` alone goes on.
    #[command(after_help = "Exit codes: 0 completed, 1 the program failed, 2 bad invocation or config, \
3 timed out, 4 paused again, 5 the id cannot be resumed (unknown, already ended, being resumed \
elsewhere, its journal unreadable: final, do not retry; a run whose process died resumes), 6 completed but the value was cut (--max-value), \
130/143 cancelled by SIGINT/SIGTERM.")]
    Resume(Deferred<resume::ResumeArgs>),
    /// Record a person's decisions for a paused run's pending calls
    /// (--allow SEQ, --deny SEQ) without running anything; the next resume
    /// applies them. Without --allow/--deny: list the pending calls.
    ///
    /// For a run paused where the person is not at hand (a server's MCP
    /// client without elicitation, a run paused with `--approve pause`):
    /// run it against the same journal store (--workspace, --journal,
    /// --config as the run had). Each call is named by its seq; the
    /// decisions are recorded in the run's journal and the run stays
    /// paused until `codemode resume RUN_ID` (or the server's
    /// `execute_tools {"resume": RUN_ID}`) continues it with exactly
    /// these decisions. A decision cannot be changed once recorded.
    #[command(after_help = "Exit codes: 0 recorded or listed, 1 the journal store failed, 2 bad input \
(a seq not pending or already decided: nothing recorded), 5 the run cannot be decided (unknown, \
ended, held by another process, interrupted).")]
    Approve(Deferred<approve::ApproveArgs>),
    /// Call one tool directly, through the same gate as programs' calls.
    #[command(after_help = "The call is timed by --deadline as a run is (waits on a person do not count; \
default 60 s): past it, the call is ended.\n\nExit codes: 0 the tool ran and returned, 1 refused, denied or \
failed, 2 bad invocation or config, 3 past the deadline, 130/143 cancelled by SIGINT/SIGTERM.")]
    Call(Deferred<call::CallArgs>),
    /// Call tools over JSON Lines input, one call per line, through the
    /// same gate, bounds and receipt as a program; or, with --program, run
    /// a program once per input line (docs/BATCH.md).
    ///
    /// Each line is {"tool": NAME, "arguments": {...}}, or with --tool
    /// the arguments object; blank lines are skipped, a bad line is
    /// reported with its number and skipped. stdout gets one JSON line
    /// per item as it finishes, or in input order with --ordered ({line,
    /// index, tool, seq, status, decision, content, metadata, truncated}
    /// or {..., error}); stderr the progress and the receipt summary.
    ///
    /// With --program FILE each line is any JSON value, the program's
    /// global `input`; each line is a journaled run of its own (its own
    /// receipt), --parallel N at once, all under one batch id, and stdout
    /// gets {line, run_id, status, value} or {..., error} per line. The
    /// batch keeps a record of its lines: killed, it goes on with
    /// `--batch-id ID` (the same program and input), doing only the lines
    /// not done and recovering the runs it interrupted. An approval is
    /// asked once per distinct question (a rule's ask and commands each
    /// time); --approve pause leaves lines paused for `codemode approve`,
    /// resumed when the batch is started again. `codemode batch status ID`
    /// shows where a batch is, from any terminal.
    #[command(
        args_conflicts_with_subcommands = true,
        after_help = "Exit codes: 0 every item (line) ok, \
1 an item or a line not ok, 2 bad invocation or config, 3 deadline passed (calls), 4 a line paused and \
none failed (--program), 130/143 stopped by SIGINT/SIGTERM (--program: a first signal starts no new \
line and lets the running ones finish, a second cancels them), 141 stdout closed."
    )]
    Batch(Deferred<Box<batch::BatchArgs>>),
    /// List the tools a model is shown (execute_tools, then the eager
    /// tools), or every tool with --all.
    #[command(after_help = READ_EXIT_CODES)]
    Tools(Deferred<tools::ToolsArgs>),
    /// Find tools by what they do (a direct tool_search call).
    #[command(after_help = "Exit codes: 0 done (also when nothing matches), 1 the search failed \
(a bad regex), 2 bad invocation or config.")]
    Search(Deferred<search::SearchArgs>),
    /// MCP servers: `mcp list` (starts nothing), `mcp tools SERVER`,
    /// `mcp login|logout SERVER`, `mcp serve`.
    #[command(after_help = "Exit codes: those of each command (`codemode mcp COMMAND --help`).")]
    Mcp(Deferred<mcp::McpArgs>),
    /// Print the TypeScript declarations of the tools (their JSON Schemas
    /// as types), for programs and the models that write them.
    #[command(after_help = READ_EXIT_CODES)]
    Types(Deferred<types::TypesArgs>),
    /// Trust a workspace's codemode.toml and .mcp.json (untrusted ones
    /// restrict but grant nothing); --list, --revoke.
    ///
    /// A codemode.toml or .mcp.json found in a workspace is untrusted until
    /// this records its path and SHA-256 in $XDG_CONFIG_HOME/codemode/trusted.json
    /// (else ~/.config/codemode/). An untrusted file restricts (deny and ask
    /// rules, plan mode, a read-only sandbox) but grants nothing (no allow
    /// rules, no wider posture, no hooks, no sandbox off or network, and its
    /// MCP servers need an approval to start). Any change to a file revokes
    /// its trust. Files named with --config or --mcp-config need no trust:
    /// they are yours.
    ///
    /// Read the files first: a trusted policy can allow any call and run any
    /// hook, and a trusted MCP file starts its servers' commands.
    #[command(after_help = READ_EXIT_CODES)]
    Trust(Deferred<trust::TrustArgs>),
    /// The runs kept on disk: `runs list`, `runs show RUN_ID`, `runs
    /// prune` (journals, receipts and spill files, kept outside the
    /// workspace in $XDG_STATE_HOME/codemode).
    ///
    /// While each `codemode run` or `resume` runs, and after each
    /// `batch`, runs are pruned to [journal] keep_runs (default 200) and
    /// keep_days (default 7) of codemode.toml:
    /// a run older than keep_days, or not among the keep_runs newest, is
    /// removed (whichever removes more), except the run just made and runs
    /// held by another process; paused and interrupted runs are not
    /// counted and go only when older than keep_days, and while a paused
    /// run waits, every run after it is kept too. The pruning at each run
    /// waits until a tenth of keep_runs more have gathered
    /// (docs/JOURNAL.md).
    #[command(after_help = "Exit codes: those of each command (`codemode runs COMMAND --help`).")]
    Runs(Deferred<runs::RunsArgs>),
    /// Print a shell completion script: bash, zsh, fish, elvish or
    /// powershell.
    ///
    /// Load it in the shell's startup file, e.g. for bash
    /// `source <(codemode completions bash)`, for zsh
    /// `codemode completions zsh > ~/.zfunc/_codemode` (with ~/.zfunc in
    /// $fpath), for fish `codemode completions fish >
    /// ~/.config/fish/completions/codemode.fish`.
    #[command(after_help = READ_EXIT_CODES)]
    Completions(Deferred<generate::CompletionsArgs>),
    /// Print the man page (roff), or write one page per command into a
    /// folder with --dir.
    ///
    /// `codemode man | man -l -` shows it; `codemode man --dir
    /// ~/.local/share/man/man1` installs codemode.1 and a page per command
    /// (codemode-run.1, ...) where `man codemode` finds them.
    #[command(after_help = READ_EXIT_CODES)]
    Man(Deferred<generate::ManArgs>),
    /// Undo a run: put back, newest change first, every file its `write`
    /// and `edit` calls changed or made (made files removed), from the
    /// pre-images in its journal. Each file is a `write` call through the
    /// gate (rules, posture and approver apply) in a run of its own; a file
    /// changed since the run is left alone and named unless --force. bash
    /// and MCP calls are not undone (named). The run's journal is marked
    /// with the calls undone (`codemode runs show`).
    #[command(after_help = "Exit codes: 0 restored (or nothing left to undo), 1 a file was left alone \
(changed since the run) or not restored, 2 bad invocation or config (journaling off), 5 unknown \
run or still running.")]
    Rollback(Deferred<rollback::RollbackArgs>),
}

/// Parses the arguments, runs the command, and turns the outcome into an
/// exit code.
pub(crate) fn main(cli: Cli) -> ExitCode {
    started();
    QUIET.store(cli.quiet, Ordering::Relaxed);
    // The CLI is a short-lived process that owns its children: as their
    // subreaper it collects what `bash` commands leave behind at once,
    // instead of leaving zombies for PID 1 (which may reap late or never).
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let result = match cli.command {
        Command::Run(Deferred(args)) => run::run(args),
        Command::Resume(Deferred(args)) => resume::resume(args),
        Command::Approve(Deferred(args)) => approve::approve(args),
        Command::Call(Deferred(args)) => call::call(args),
        Command::Batch(Deferred(args)) => batch::batch(*args),
        Command::Tools(Deferred(args)) => tools::tools(args),
        Command::Search(Deferred(args)) => search::search(args),
        Command::Mcp(Deferred(args)) => mcp::mcp(args),
        Command::Types(Deferred(args)) => types::types(args),
        Command::Trust(Deferred(args)) => trust::trust(args),
        Command::Runs(Deferred(args)) => runs::runs(args),
        Command::Completions(Deferred(args)) => generate::completions(&args),
        Command::Man(Deferred(args)) => generate::man(&args),
        Command::Rollback(Deferred(args)) => rollback::rollback(args),
    };
    telemetry::shutdown();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Errors quote configs, servers and programs: made printable.
            eprintln!("codemode: {}", run::printable(&format!("{e:#}")));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Saves `receipt` as `receipt.json` in its run's folder, atomically and
/// synced, and returns it with the path. When it cannot be saved, says so
/// on stderr and adds a warning to the receipt returned (a receipt is never
/// lost silently).
pub(crate) fn save_receipt(
    engine: &codemode::Engine,
    receipt: codemode::Receipt,
) -> (codemode::Receipt, Option<String>) {
    save_receipt_with(receipt, |r| engine.save_receipt(r))
}

/// [`save_receipt`] for a program's run (`run`, `resume`), whose journal,
/// when the engine keeps one, is its durable record, synced before the
/// command exits: the file is then written atomically but not synced
/// (`Engine::save_receipt_copy`; docs/JOURNAL.md, "Guarantees"), a sync
/// off the run's way.
pub(crate) fn save_run_receipt(
    engine: &codemode::Engine,
    receipt: codemode::Receipt,
) -> (codemode::Receipt, Option<String>) {
    save_receipt_with(receipt, |r| engine.save_receipt_copy(r))
}

/// Waits until the journal of `receipt`'s run is written and synced, and
/// adds a warning to `receipt` when that failed after the run ended
/// (`JournalStore::flush_run`): the run then has no durable record, which
/// a receipt printed before the sync could not say. `store` is the
/// engine's; the command waited for the sync before exiting anyway
/// (`CliEngine`'s drop). Blocks: call it outside the runtime.
pub(crate) fn add_journal_outcome(
    store: Option<&std::sync::Arc<dyn codemode::journal::JournalStore>>,
    receipt: &mut codemode::Receipt,
) {
    if let Some(Err(e)) = store.map(|store| store.flush_run(&receipt.run_id)) {
        receipt.warnings.push(format!("the run's journal could not be written: {e}"));
    }
}

/// [`save_receipt`] with `save` writing the file.
fn save_receipt_with(
    mut receipt: codemode::Receipt,
    save: impl FnOnce(&codemode::Receipt) -> std::io::Result<std::path::PathBuf>,
) -> (codemode::Receipt, Option<String>) {
    match save(&receipt) {
        Ok(path) => (receipt, Some(path.display().to_string())),
        Err(e) => {
            let warning = format!("the receipt could not be saved: {e}");
            eprintln!("codemode: warning: {}", run::printable(&warning));
            receipt.warnings.push(warning);
            (receipt, None)
        }
    }
}

/// Up to `limit + 1` bytes of `from` (a program, a batch): one more than
/// `limit` says the input is over it, and `/dev/zero` or an endless pipe is
/// never read into memory.
pub(crate) fn read_at_most(from: impl std::io::Read, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    from.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `text` to stdout; a closed pipe (`codemode run x | head`) is not
/// an error.
pub(crate) fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Makes one direct call, or gives up on SIGINT/SIGTERM: `Err(code)` with
/// the exit code (128 + the signal), the call cancelled.
pub(crate) fn direct_call(
    engine: &codemode::Engine,
    tool: &str,
    args: &serde_json::Value,
) -> anyhow::Result<Result<codemode::run::CallOutcome, u8>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(rt.block_on(async {
        tokio::select! {
            outcome = engine.call(tool, args) => Ok(outcome),
            signal = run::interrupted() => {
                eprintln!("codemode: {tool} cancelled by signal {signal}");
                Err(128 + signal)
            }
        }
    }))
}
