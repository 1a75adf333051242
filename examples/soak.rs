//! Soak (docs/PERFORMANCE.md, "Soak and scale"): the engine's memory over
//! many programs.
//!
//! ```text
//! cargo run --release --example soak
//! ```
//!
//! 10,000 programs run one after another in one engine, each a different
//! source making one call of a native `echo` tool; the resident memory
//! (VmRSS of /proc/self/status) is sampled every 500 programs. The first
//! 2,000 programs are the warm-up; the verdict is `flat` when no later
//! sample is more than 4 MiB or 5% (the larger) over the sample at the end
//! of the warm-up, `growing` otherwise.
//!
//! Every receipt is checked (status `completed`, every call `ok`, the
//! expected value); the exit status is 1 on any failure or a `growing`
//! verdict. Many programs at once (1,000 programs of 10 sleeping calls) is
//! the `W6_concurrent_1000` workload of `examples/workloads.rs` (`workloads W6`).

use std::process::ExitCode;
use std::time::Instant;

use codemode::{
    Engine, Limits, Policy, Program, Receipt, Tool, ToolSpec, receipt::CallStatus, receipt::RunStatus,
    tool::ToolContext, tool::ToolFuture, tool::ToolOutput,
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

fn main() -> ExitCode {
    if let Some(other) = std::env::args().nth(1) {
        eprintln!("soak: unknown argument `{other}`; it takes none (1,000 programs at once: `workloads W6`)");
        return ExitCode::from(2);
    }
    if soak() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// An engine over a fresh temporary workspace with `echo`,
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
