//! Soak and scale (docs/PERFORMANCE.md, "Soak and scale"): the engine's
//! memory over many programs, and many programs at once.
//!
//! ```text
//! cargo run --release --example soak              # soak once, scale three times
//! cargo run --release --example soak -- soak      # 10,000 programs in one engine
//! cargo run --release --example soak -- scale     # 1,000 programs at once
//! ```
//!
//! - `soak`: 10,000 programs run one after another in one engine, each a
//!   different source making one call of a native `echo` tool; the resident
//!   memory (VmRSS of /proc/self/status) is sampled every 500 programs. The
//!   first 2,000 programs are the warm-up; the verdict is `flat` when no
//!   later sample is more than 4 MiB or 5% (the larger) over the sample at
//!   the end of the warm-up, `growing` otherwise.
//! - `scale`: 1,000 programs started at once, each making 10 calls, one
//!   after another, of a native `sleep` tool that sleeps 10 ms; prints the
//!   wall time and the process's peak resident memory (VmHWM).
//!
//! Every receipt is checked (status `completed`, every call `ok`, the
//! expected value); the exit status is 1 on any failure or a `growing`
//! verdict. Without arguments each part runs in a child process of its own
//! (so VmHWM is that part's), scale three times, and a summary line gives
//! min / median / max.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use codemode::{
    CallStatus, Engine, Limits, Policy, Program, Receipt, RunStatus, Tool, ToolContext, ToolError,
    ToolFuture, ToolOutput, ToolSpec,
};
use serde_json::{Value, json};

/// Programs run by the soak part.
const SOAK_PROGRAMS: usize = 10_000;
/// Programs of the soak part counted as warm-up.
const SOAK_WARMUP: usize = 2_000;
/// VmRSS is sampled after every this many programs.
const SAMPLE_EVERY: usize = 500;
/// Growth after the warm-up still called flat: this many KiB, or
/// `FLAT_SLACK_PERCENT` of the warm RSS, whichever is larger.
const FLAT_SLACK_KIB: u64 = 4 * 1024;
const FLAT_SLACK_PERCENT: u64 = 5;

/// Programs started at once by the scale part.
const SCALE_PROGRAMS: usize = 1_000;
/// Calls each of them makes.
const SCALE_CALLS: usize = 10;
/// How long each call sleeps.
const SLEEP_MS: u64 = 10;
/// Scale runs made (each in its own process) without arguments.
const SCALE_RUNS: usize = 3;

/// `echo`: returns its arguments object as content.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Returns its arguments.", json!({"type": "object"})).read_only(true)
    }

    fn call(&self, args: Value, _cx: ToolContext) -> ToolFuture {
        Box::pin(std::future::ready(Ok(ToolOutput::new(args))))
    }
}

/// `sleep`: waits `ms` milliseconds, then returns its arguments.
struct Sleep;

impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep",
            "Waits `ms` milliseconds (a timer, no CPU), then returns its arguments.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}),
        )
        .read_only(true)
    }

    fn call(&self, args: Value, _cx: ToolContext) -> ToolFuture {
        Box::pin(async move {
            let ms = args["ms"].as_u64().ok_or_else(|| ToolError::new("`ms` is not a number"))?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(ToolOutput::new(args))
        })
    }
}

fn main() -> ExitCode {
    let part = std::env::args().nth(1);
    let ok = match part.as_deref() {
        Some("soak") => soak(),
        Some("scale") => scale().is_some(),
        None => all(),
        Some(other) => {
            eprintln!("soak: unknown part `{other}`; use `soak`, `scale` or nothing for both");
            return ExitCode::from(2);
        }
    };
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Runs each part in a child process, scale `SCALE_RUNS` times, and
/// summarises the scale runs.
fn all() -> bool {
    let mut ok = child("soak").is_some();
    let mut walls = Vec::new();
    let mut peaks = Vec::new();
    for _ in 0..SCALE_RUNS {
        let Some(out) = child("scale") else {
            ok = false;
            continue;
        };
        // The child's last line: `scale: wall_ms=<f64> peak_rss_kib=<u64> ...`.
        let field = |name: &str| -> Option<f64> {
            out.lines().rev().find_map(|l| {
                l.split_whitespace().find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            })
        };
        if let (Some(w), Some(p)) = (field("wall_ms"), field("peak_rss_kib")) {
            walls.push(w);
            peaks.push(p);
        }
    }
    if !walls.is_empty() {
        let spread = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[0], v[v.len() / 2], v[v.len() - 1])
        };
        let (w0, w1, w2) = spread(&mut walls);
        let (p0, p1, p2) = spread(&mut peaks);
        println!(
            "summary: scale runs={} wall_ms min/median/max={w0:.0}/{w1:.0}/{w2:.0} peak_rss_mib min/median/max={:.1}/{:.1}/{:.1}",
            walls.len(),
            p0 / 1024.0,
            p1 / 1024.0,
            p2 / 1024.0
        );
    }
    ok
}

/// Runs this executable with `part`; echoes its stdout and returns it when
/// it succeeded.
fn child(part: &str) -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let out = match Command::new(exe).arg(part).stderr(std::process::Stdio::inherit()).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("soak: could not start the `{part}` child: {e}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{text}");
    out.status.success().then_some(text)
}

/// An engine over a fresh temporary workspace with `echo` and `sleep`,
/// full access (every gate step runs, none asks) and journaling on (the
/// default).
fn engine(limits: Limits) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let engine = Engine::builder()
        .workspace(dir.path())
        .native_tools(false)
        .limits(limits)
        .policy(Policy::full_access())
        .tool(Echo)
        .tool(Sleep)
        .build()
        .expect("the engine builds");
    (engine, dir)
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status is readable");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} line in /proc/self/status"))
}

/// Whether `receipt` completed with `expected` and every call was ok; says
/// what went wrong on stderr.
fn check(what: &str, receipt: &Receipt, expected: &Value) -> bool {
    let calls_ok = receipt.calls.iter().all(|c| c.status == CallStatus::Ok);
    if receipt.status == RunStatus::Completed && calls_ok && &receipt.value == expected {
        return true;
    }
    eprintln!(
        "soak: {what}: status {:?}, error {:?}, value {}, calls ok {calls_ok} (expected {expected})",
        receipt.status, receipt.error, receipt.value
    );
    false
}

/// The soak part; true when every program passed and memory stayed flat.
fn soak() -> bool {
    let mut limits = Limits::default();
    limits.max_calls = 10;
    let (engine, _dir) = engine(limits);
    let started = Instant::now();
    let mut samples: Vec<(usize, u64)> = vec![(0, status_kib("VmRSS"))];
    let mut failures = 0usize;
    for i in 0..SOAK_PROGRAMS {
        // A different source each time (no cache can answer it), a call, a
        // string that grows and shrinks.
        let source = format!(
            "const r = await tools.echo({{i: {i}, s: 'x'.repeat({})}});\nreturn r.content.i + r.content.s.length;",
            i % 100
        );
        let receipt = engine.execute_blocking(Program::named(format!("soak-{i}.js"), source));
        if !check(&format!("program {i}"), &receipt, &json!(i + i % 100)) {
            failures += 1;
        }
        if (i + 1) % SAMPLE_EVERY == 0 {
            samples.push((i + 1, status_kib("VmRSS")));
        }
    }
    let elapsed = started.elapsed();
    let warm = samples.iter().find(|(n, _)| *n == SOAK_WARMUP).map_or(0, |s| s.1);
    let highest = samples.iter().filter(|(n, _)| *n > SOAK_WARMUP).map(|s| s.1).max().unwrap_or(warm);
    let slack = FLAT_SLACK_KIB.max(warm * FLAT_SLACK_PERCENT / 100);
    let growth = highest.saturating_sub(warm);
    let flat = growth <= slack;
    println!("soak: programs after -> VmRSS KiB");
    for (n, kib) in &samples {
        println!("soak: {n:>6} {kib:>8}{}", if *n == SOAK_WARMUP { "  (end of warm-up)" } else { "" });
    }
    println!(
        "soak: programs={SOAK_PROGRAMS} failures={failures} seconds={:.1} warm_rss_kib={warm} highest_after_kib={highest} growth_kib={growth} slack_kib={slack} verdict={}",
        elapsed.as_secs_f64(),
        if flat { "flat" } else { "growing" }
    );
    failures == 0 && flat
}

/// The scale part; the wall time in ms when every program passed.
fn scale() -> Option<f64> {
    let mut limits = Limits::default();
    limits.max_calls = SCALE_CALLS;
    // Ample for 1,000 programs on two busy cores; a run that hits it fails
    // the check rather than hanging.
    limits.deadline = Duration::from_secs(300);
    let (engine, _dir) = engine(limits);
    let expected: usize = (0..SCALE_CALLS).sum();
    let source = format!(
        "let n = 0;\nfor (let k = 0; k < {SCALE_CALLS}; k++) {{ const r = await tools.sleep({{ms: {SLEEP_MS}, k}}); n += r.content.k; }}\nreturn n;"
    );
    let rss_before = status_kib("VmRSS");
    let started = Instant::now();
    let runs: Vec<_> = (0..SCALE_PROGRAMS)
        .map(|i| engine.start(Program::named(format!("scale-{i}.js"), source.clone())))
        .collect();
    let mut failures = 0usize;
    for (i, run) in runs.into_iter().enumerate() {
        let receipt = run.wait_blocking();
        if !check(&format!("program {i}"), &receipt, &json!(expected)) || receipt.calls.len() != SCALE_CALLS {
            failures += 1;
        }
    }
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    let peak = status_kib("VmHWM");
    println!(
        "scale: programs={SCALE_PROGRAMS} calls_each={SCALE_CALLS} sleep_ms={SLEEP_MS} failures={failures} rss_before_kib={rss_before} wall_ms={wall:.0} peak_rss_kib={peak}"
    );
    (failures == 0).then_some(wall)
}
