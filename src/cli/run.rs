//! `codemode run [FILE|-] [--json] [--workspace DIR] [--config FILE]
//! [--mode plan|work] [--posture P] [--approve A] [--deadline SECS]`

use std::io::Read;

use anyhow::Context;
use codemode::{CallStatus, Program, Receipt, RunStatus};

use super::engine_args::EngineArgs;

/// Arguments of `codemode run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The program: a .js file, or - to read it from stdin.
    #[arg(default_value = "-")]
    file: String,
    /// Print the full receipt as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
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

fn execute(args: RunArgs) -> anyhow::Result<u8> {
    let (name, source) = read_program(&args.file)?;
    let engine = args.engine.build()?;

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (receipt, signal) = rt.block_on(async {
        let run = engine.start(Program::named(name, source));
        let canceller = run.canceller();
        let wait = run.wait();
        tokio::pin!(wait);
        // SIGINT (Ctrl-C) and SIGTERM cancel the run; the receipt is still
        // printed, and the exit code is 128 + the signal number.
        tokio::select! {
            r = &mut wait => (r, None),
            signal = interrupted() => {
                canceller.cancel();
                (wait.await, Some(signal))
            }
        }
    });

    if args.json {
        super::print_stdout(&(receipt.to_json_pretty() + "\n"))?;
    } else {
        eprint!("{}", summary(&receipt));
        if receipt.status == RunStatus::Completed || !receipt.value.is_null() {
            let value = match &receipt.value {
                serde_json::Value::String(s) => s.clone(),
                v => serde_json::to_string_pretty(v)?,
            };
            super::print_stdout(&(value + "\n"))?;
        }
    }
    Ok(match signal {
        Some(signal) => 128 + signal,
        None => receipt.status.exit_code(),
    })
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
/// returns, bells) shown as `\u{..}`, so program output on stderr cannot
/// move the cursor or rewrite the summary. Newlines and tabs stay.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Reads the program from `file`, or stdin for `-`; returns its name for
/// stack traces and its source.
fn read_program(file: &str) -> anyhow::Result<(String, String)> {
    if file == "-" {
        let mut source = String::new();
        std::io::stdin().read_to_string(&mut source).context("cannot read the program from stdin")?;
        return Ok(("stdin.js".to_owned(), source));
    }
    let source = std::fs::read_to_string(file).with_context(|| {
        format!("cannot read program file `{file}` (give a path to a .js file, or - for stdin)")
    })?;
    let name = std::path::Path::new(file)
        .file_name()
        .map_or_else(|| "program.js".to_owned(), |n| n.to_string_lossy().into_owned());
    Ok((name, source))
}

/// The short human summary printed on stderr.
fn summary(r: &Receipt) -> String {
    let mut s = String::new();
    let ok = r.calls.iter().filter(|c| c.status == CallStatus::Ok).count();
    s.push_str(&format!(
        "codemode: {} in {:.1} ms, {} call{} ({} ok), run {}\n",
        r.status.as_str(),
        r.elapsed_ms,
        r.calls.len(),
        if r.calls.len() == 1 { "" } else { "s" },
        ok,
        r.run_id
    ));
    if let Some(e) = &r.error {
        let at = match (e.line, e.column) {
            (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
            (Some(l), None) => format!(" at line {l}"),
            _ => String::new(),
        };
        s.push_str(&format!("  error ({}){at}: {}\n", wire_name(&e.kind), printable(&e.message)));
    }
    for c in r.problem_calls().take(20) {
        s.push_str(&format!(
            "  call {} {}: {}, {}{}\n",
            c.seq,
            printable(&c.tool),
            wire_name(&c.decision),
            wire_name(&c.status),
            c.error.as_deref().map(|e| format!(" - {}", printable(e))).unwrap_or_default()
        ));
    }
    for log in &r.logs {
        s.push_str(&format!("  [{}] {}\n", log.level, printable(&log.text)));
    }
    if r.logs_dropped > 0 {
        s.push_str(&format!("  ({} more log lines dropped)\n", r.logs_dropped));
    }
    if let Some(t) = &r.value_truncated {
        s.push_str(&format!(
            "  value cut to {} of {} bytes; whole value in {}\n",
            t.kept_bytes,
            t.original_bytes,
            t.spill_path.as_deref().unwrap_or("(spill failed)")
        ));
    }
    s
}

/// The name of an enum value as the receipt JSON spells it.
fn wire_name(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::from("?"),
    }
}
