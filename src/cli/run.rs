//! `codemode run [FILE|-] [--json] [--workspace DIR] [--config FILE]
//! [--mode plan|work] [--posture P] [--approve A] [--deadline SECS]
//! [--max-calls N] [--max-in-flight N] [--tool-timeout SECS] [--memory SIZE]
//! [--no-admission]`

use std::io::IsTerminal as _;

use anyhow::Context;
use codemode::{Program, receipt::ErrorKind, receipt::RenderOptions, receipt::RunStatus};

use super::engine_args::{EngineArgs, LimitArgs};

/// Arguments of `codemode run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The program: a JavaScript or TypeScript file (.js, .mjs, .ts,
    /// .mts, .cts; TypeScript by its name, or when it only parses as
    /// TypeScript), or - to read it from stdin.
    #[arg(default_value = "-")]
    file: std::path::PathBuf,
    /// Print the full receipt as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Skip the admission check, which refuses a program before its first
    /// call when a tool it names literally does not exist or its literal
    /// arguments do not fit the tool's schema (the gate still refuses
    /// each such call when it is made) [default: the policy's admission,
    /// else on].
    #[arg(long)]
    no_admission: bool,
    /// Give the program this JSON value as its global `input` (e.g.
    /// --input '{"path": "a.txt"}'); without it `input` is undefined.
    #[arg(long, value_name = "JSON", value_parser = parse_input)]
    input: Option<serde_json::Value>,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Runs `codemode run`. With `--json`, an invocation error is also printed
/// on stdout as `{"error": {"kind": "invocation", "message"}}`, so callers
/// that parse stdout always get JSON.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<u8> {
    let json = args.json;
    execute(args).inspect_err(|e| {
        if json {
            let error = serde_json::json!({"error": {"kind": "invocation", "message": format!("{e:#}")}});
            let _ = super::print_stdout(&format!("{error}\n"));
        }
    })
}

fn execute(mut args: RunArgs) -> anyhow::Result<u8> {
    let from_stdin = args.file.as_os_str() == "-";
    let (name, source) = read_program(&args.file)?;
    if codemode::run::is_blank(&source) {
        anyhow::bail!(
            "the program{} {}",
            if from_stdin { " read from stdin" } else { "" },
            codemode::run::BLANK_PROGRAM
        );
    }
    let path = (!from_stdin).then(|| args.file.clone());
    let returns = source.contains("return") || source.contains("export default");
    args.engine =
        args.engine.with_limits(args.limits.settings()).without_admission(args.no_admission).for_one_run();
    let engine = args.engine.build()?;
    if args.engine.approver_spec().map(str::trim) == Some("pause") && engine.journal_store().is_none() {
        anyhow::bail!(
            "--approve pause needs the run's journal, which is off (--journal off, or [journal] url = \"off\"); \
             leave the journal on, or choose another approver"
        );
    }

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (receipt, signal, pruning, _hold) = rt.block_on(async {
        let mut program = match &path {
            Some(path) => Program::named(name, source).with_path(path),
            None => Program::named(name, source),
        };
        if let Some(input) = args.input.clone() {
            program = program.with_input(input);
        }
        let options = codemode::run::RunOptions::default().trace_parent(super::telemetry::parent_from_env());
        let run = engine.start_with(program, options);
        // Old runs go while this one runs (docs/JOURNAL.md, "Retention"):
        // this thread only waits for the run meanwhile. The run counts as
        // the newest unless it leaves nothing (no journal, no receipt
        // saved with --json).
        let leaves_a_folder = engine.journal_store().is_some() || !args.json;
        // Held until this process has written all it writes there (the
        // receipt, the journal of a run that never waited): no prune in
        // another process removes the run meanwhile. Only a run that will
        // have a folder (a receipt saved, or its journal in the runs
        // folder) is held: holding makes the folder. Without it (the
        // folder cannot be made: the receipt's save will say so) the run
        // is as any other.
        let makes_its_folder =
            !args.json || (engine.journal_store().is_some() && engine.runs().journals_in_run_folders());
        let hold = makes_its_folder.then(|| engine.hold_run_folder(run.run_id()).ok()).flatten();
        let pruning = tokio::spawn(super::retention::pruning(
            &engine,
            engine.retention(),
            run.run_id(),
            leaves_a_folder,
            Some(super::started()),
        ));
        let canceller = run.canceller();
        let run_id = run.run_id().to_owned();
        let wait = run.wait();
        tokio::pin!(wait);
        // SIGINT (Ctrl-C) and SIGTERM cancel the run; the receipt is still
        // printed, and the exit code is 128 + the signal number.
        let (receipt, signal) = tokio::select! {
            r = &mut wait => (r, None),
            signal = interrupted() => {
                canceller.cancel();
                (stopped_or_exit(wait, signal, run_id).await, Some(signal))
            }
        };
        (receipt, signal, pruning, hold)
    });

    let code = exit_code(&receipt);
    if args.json {
        // The receipt on stdout is all a caller gets: it goes out once the
        // journal is durable (the pruning ends meanwhile), so it can say
        // when that failed.
        let pruned = rt.block_on(pruning).unwrap_or_else(|e| Err(e.to_string()));
        let mut receipt = receipt;
        super::add_journal_outcome(engine.journal_store(), &mut receipt);
        super::print_stdout(&(receipt.to_json_pretty() + "\n"))?;
        super::retention::warn_of_pruning(pruned);
    } else {
        // The compact rendering (DESIGN.md §4), pointing at the full receipt.
        let (receipt, saved) = super::save_run_receipt(&engine, receipt);
        show(&receipt, saved.as_deref(), &args.engine)?;
        if receipt.status == RunStatus::Completed && receipt.value.is_null() && !returns {
            super::note!(
                "hint: the program has no `return`: its value is its last expression's, here null; \
                 `return VALUE` to print a result"
            );
        }
        // The pruning's warnings come after the run's summary.
        super::retention::warn_of_pruning(rt.block_on(pruning).unwrap_or_else(|e| Err(e.to_string())));
        // The journal is written before the folder is let go (a failure
        // was said on stderr by the store).
        if let Some(store) = engine.journal_store() {
            let _ = store.flush_run(&receipt.run_id);
        }
    }
    Ok(match signal {
        Some(signal) => 128 + signal,
        None => code,
    })
}

/// Parses `--input`: one JSON value.
fn parse_input(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| {
        format!("is not JSON ({e}); quote a string as JSON too: --input '\"text\"', or give an object")
    })
}

/// The exit code of a run that ended (`run`, `resume`): its status's
/// (DESIGN.md §9), but [`super::EXIT_VALUE_CUT`] for a completed run whose
/// value was over `--max-value` and was cut, so a script never takes the
/// printed prefix for the value.
pub(crate) fn exit_code(receipt: &codemode::Receipt) -> u8 {
    if receipt.status == RunStatus::Completed && receipt.value_truncated.is_some() {
        super::EXIT_VALUE_CUT
    } else {
        receipt.status.exit_code()
    }
}

/// Shows a run's outcome as `run` and `resume` do without `--json`: the
/// compact rendering on stderr (pointing at the saved receipt, with how to
/// resume a paused run), the value on stdout. With `-q`, stderr gets only
/// the error of a run that did not complete, in one line, and the line
/// saying a value was cut.
pub(crate) fn show(
    receipt: &codemode::Receipt,
    saved: Option<&str>,
    engine: &EngineArgs,
) -> anyhow::Result<()> {
    if super::quiet() {
        if let Some(error) = &receipt.error {
            eprintln!("codemode: {}: {}", receipt.status.as_str(), printable(&error.message));
        } else if receipt.status == RunStatus::Paused {
            // A pause waits for someone: even quiet, say which run and how
            // to go on, and why a resume stopped before anything new ran.
            for stopped in
                receipt.warnings.iter().filter(|w| w.starts_with(codemode::receipt::STOPPED_IN_REPLAY))
            {
                eprintln!("codemode: warning: {}", printable(stopped));
            }
            let seqs: Vec<String> = receipt.pending.iter().map(|p| p.seq.to_string()).collect();
            // Calls refused on the way (a resume's refusal of a file
            // changed since the pause, say) are counted even here.
            let refused =
                receipt.calls.iter().filter(|c| c.status == codemode::receipt::CallStatus::Refused).count();
            let refused = match refused {
                0 => String::new(),
                n => format!(" ({n} call(s) refused on the way: codemode runs show {})", receipt.run_id),
            };
            eprintln!(
                "codemode: paused: run {} waits for a decision on call {}{refused}: codemode resume {} --allow SEQ (or --deny SEQ){}",
                receipt.run_id,
                seqs.join(", "),
                receipt.run_id,
                printable(&engine.resume_options(!receipt.out_of_time_in_replay()))
            );
        }
    } else {
        let options = RenderOptions { include_value: false, receipt_path: saved, ..Default::default() };
        eprint!("codemode: {}", printable(&receipt.render(&options)));
        if let Some(e) = &receipt.error
            && let Some(frames) = e.stack.as_deref()
        {
            // A stop from outside has no thrown error: its stack is the
            // calls the stopped code was in.
            let stopped = matches!(e.kind, ErrorKind::Timeout | ErrorKind::Cancelled | ErrorKind::Limit);
            let heading =
                if stopped { "in the calls under way when it stopped" } else { "where the error was thrown" };
            eprint!("{}", first_frames(frames, heading));
        }
        if receipt.status == RunStatus::Paused {
            resume_hint(receipt, engine);
        }
    }
    if let Some(cut) = &receipt.value_truncated {
        // A cut value: stdout stays one JSON text (the kept prefix as a
        // JSON string, as in the receipt's `value`, its control characters
        // escaped), and stderr says so.
        eprintln!("codemode: {}", cut_value_line(cut));
        let text = serde_json::to_string(&receipt.value)?;
        super::print_stdout(&(codemode::display_text::in_json(&text).into_owned() + "\n"))?;
    } else if receipt.status == RunStatus::Completed || !receipt.value.is_null() {
        // Always JSON, so a string ("42") and a number (42) differ; objects
        // keep the program's key order. Terminal control, bidirectional and
        // invisible characters are written as `\uXXXX` escapes, which
        // leave the JSON value unchanged (`--json` has the exact value).
        let value = serde_json::to_string_pretty(&receipt.value)?;
        super::print_stdout(&(codemode::display_text::in_json(&value).into_owned() + "\n"))?;
    }
    Ok(())
}

/// How many frames of a failed run's stack the summary shows.
const SHOWN_FRAMES: usize = 3;

/// The first [`SHOWN_FRAMES`] frames of the program's own code in a run
/// error's stack, for the summary: under a heading, each on its line,
/// escaped and cut to 200 characters, and how many more the receipt has.
/// Frames of codemode's prelude (where a `ToolError` is made when a call
/// settles) are left out: they say nothing about the program, and the
/// summary already names the call.
fn first_frames(stack: &str, heading: &str) -> String {
    let prelude = format!("{}:", codemode::run::PRELUDE_NAME);
    let frames: Vec<&str> =
        stack.lines().map(str::trim).filter(|l| !l.is_empty() && !l.contains(prelude.as_str())).collect();
    if frames.is_empty() {
        return String::new();
    }
    let mut out = format!("codemode: {heading}:\n");
    for frame in frames.iter().take(SHOWN_FRAMES) {
        let frame: String = printable(frame).chars().take(200).collect();
        out.push_str(&format!("  {frame}\n"));
    }
    if frames.len() > SHOWN_FRAMES {
        out.push_str(&format!("  ... {} more frames in the receipt\n", frames.len() - SHOWN_FRAMES));
    }
    out
}

/// The stderr line of a return value cut to its bound: its size, and the
/// file holding the whole of it.
fn cut_value_line(cut: &codemode::receipt::Truncation) -> String {
    let whole = match &cut.spill_path {
        Some(path) => format!("the whole value is in {}", printable(path)),
        None => "the whole value could not be written to a file (see the receipt's warnings)".to_owned(),
    };
    format!(
        "the value was cut (exit 6): it is {} bytes, over its bound (--max-value SIZE / [limits] max_value \
         raises it): stdout has its first {} bytes, as a JSON string; {whole}",
        cut.original_bytes.unwrap_or_default(),
        cut.kept_bytes
    )
}

/// Says on stderr how to resume a paused run with the options it ran with
/// (a resume with another policy is refused), when it ran with any; after
/// a resume that ran out of time while it replayed, without its
/// `--deadline`, which would stop the next one the same way.
fn resume_hint(receipt: &codemode::Receipt, engine: &EngineArgs) {
    let options = engine.resume_options(!receipt.out_of_time_in_replay());
    if options.is_empty() || receipt.pending.is_empty() {
        return;
    }
    eprintln!(
        "codemode: resume with the same options: codemode resume {} --allow SEQ{}",
        receipt.run_id,
        printable(&options)
    );
}

/// How long a run cancelled by a signal has to end before the process
/// ends without it. A cancel reaches the program at QuickJS's next
/// interrupt check, every 10,000 branches: a loop of slow built-ins
/// (`JSON.stringify` of a large value) can go minutes between checks
/// (docs/SECURITY.md, "The deadline holds for the host, not for
/// QuickJS"). The engine answers such a run itself
/// [`codemode::run::OVERRUN_GRACE`] after the cancel (within a second
/// more), with its receipt; this is longer, so that answer comes first.
const STOP_GRACE: std::time::Duration =
    codemode::run::OVERRUN_GRACE.saturating_add(std::time::Duration::from_secs(3));

/// How long a run has to end after a second signal: a bash call's default
/// kill grace (2 s), and a little more.
const AFTER_A_SECOND_SIGNAL: std::time::Duration = std::time::Duration::from_millis(2500);

/// `wait` (a run just cancelled by signal `signal`) to its end, unless
/// it has not ended [`STOP_GRACE`] after the cancel, or
/// [`AFTER_A_SECOND_SIGNAL`] after another SIGINT or SIGTERM: then the
/// process says so and exits with 128 + the
/// signal's number, the run's journal (when one was written) left as a
/// run whose process ended (`interrupted`: `codemode resume RUN_ID`
/// recovers it).
pub(crate) async fn stopped_or_exit<T>(
    wait: impl std::future::Future<Output = T>,
    signal: u8,
    run_id: String,
) -> T {
    tokio::pin!(wait);
    tokio::select! {
        ended = &mut wait => ended,
        again = interrupted() => tokio::select! {
            // A bash call being ended gets its kill grace first, so its
            // processes are reaped.
            ended = &mut wait => ended,
            () = tokio::time::sleep(AFTER_A_SECOND_SIGNAL) => {
                exit_unstopped(&run_id, again, "a second signal came")
            }
        },
        () = tokio::time::sleep(STOP_GRACE) => exit_unstopped(
            &run_id,
            signal,
            &format!("it had not stopped {} s after the signal", STOP_GRACE.as_secs()),
        ),
    }
}

/// Ends the process with 128 + `signal`, a run still going: see
/// [`stopped_or_exit`].
fn exit_unstopped(run_id: &str, signal: u8, why: &str) -> ! {
    eprintln!(
        "codemode: run {run_id} was cancelled but {why}: exiting without its receipt (the program was inside \
         work QuickJS does not interrupt, such as a loop of slow built-ins); if its journal was written (it had \
         made calls), the run reads as interrupted and `codemode resume {run_id}` recovers it"
    );
    std::process::exit(128 + i32::from(signal));
}

/// Resolves with the signal number on SIGINT or SIGTERM.
pub(crate) async fn interrupted() -> u8 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => 2,
                _ = term.recv() => 15,
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                2
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        2
    }
}

/// `text` with terminal control characters (escape sequences, carriage
/// returns, bells), line separators, bidirectional overrides and invisible
/// characters ([`codemode::display_text::is_unsafe`]) shown as `\u{..}`,
/// so program output on stderr cannot move the cursor or disguise text.
/// Newlines and tabs stay (the rendering puts program text on one line
/// each).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c != '\n' && c != '\t' && codemode::display_text::is_unsafe(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| if unsafe_char(c) { format!("\\u{{{:x}}}", c as u32) } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// Reads the program from `file`, or stdin for `-`; returns its name for
/// stack traces and its source.
///
/// At most the source limit ([`codemode::Limits::source_bytes`], 64 KiB)
/// plus one byte is read: a larger program would be refused by the engine
/// anyway, and `/dev/zero` or an endless pipe must not fill memory first.
///
/// # Errors
/// The file cannot be read, is over the source limit, or is not UTF-8.
pub(crate) fn read_program(file: &std::path::Path) -> anyhow::Result<(String, String)> {
    let limit = codemode::Limits::default().source_bytes;
    let from_stdin = file.as_os_str() == "-";
    let (name, bytes) = if from_stdin {
        if std::io::stdin().is_terminal() {
            // Else a bare `codemode run` waits without a word.
            super::note!(
                "reading the program from stdin; end it with Ctrl-D (or give a FILE: codemode run prog.js)"
            );
        }
        let bytes = super::read_at_most(std::io::stdin().lock(), limit)
            .context("cannot read the program from stdin")?;
        ("stdin.js".to_owned(), bytes)
    } else {
        let bytes =
            std::fs::File::open(file).and_then(|f| super::read_at_most(f, limit)).with_context(|| {
                format!(
                    "cannot read program file `{}` (give a path to a .js or .ts file, or - for stdin)",
                    file.display()
                )
            })?;
        let name =
            file.file_name().map_or_else(|| "program.js".to_owned(), |n| n.to_string_lossy().into_owned());
        (name, bytes)
    };
    let shown = if from_stdin {
        "the program read from stdin".to_owned()
    } else {
        format!("program file `{}`", file.display())
    };
    if bytes.len() > limit {
        anyhow::bail!(
            "{shown} is over the source limit of {limit} bytes: a program is a short composition of tool \
             calls; keep data in files it reads, or split the work into several programs"
        );
    }
    let source = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        anyhow::anyhow!("{shown} is not UTF-8 text (an invalid byte at offset {at}); save it as UTF-8")
    })?;
    Ok((name, source))
}
