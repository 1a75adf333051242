//! The workload runner of `bench/workloads.json` (W1..W5), the shared
//! benchmark spec; its programs and expected values are copied below
//! verbatim. Three more of this project: `W2_journal` (W2 with the local
//! journal on and off), `W6` (`W6_concurrent_1000`: 1,000 programs at once)
//! and `W7` (`W7_serve_roundtrip`: `codemode mcp serve` over stdio, which
//! needs `cargo build --release --bin codemode` first; with no workload
//! named it is skipped when that binary is missing), and `W8` (`W8_writes`:
//! sequential `write` calls, each with its durable start and end, the
//! journal on and off; `W8_writes_parallel`: the same in batches of 100 at
//! once, which share their syncs), `W2_traced` (W1 and W2 with
//! OpenTelemetry tracing off and on, `workloads_traced/mod.rs`) and
//! `W8_cli_start` (`codemode run` of a `return 1` program, the whole
//! process, beside `bash -c true`, in turn, in a fresh workspace and again
//! with 200 runs kept, the default retention's steady state; needs the
//! release binary as W7 does), `W9_bash_sandboxed` (a `bash` call through
//! the sandbox beside the same call with the sandbox off;
//! `workloads_bash/mod.rs`, needs `cargo build --release`),
//! `W10_cold_servers` (a first program touching five real MCP servers
//! beside one touching each alone; `workloads_cold_servers/mod.rs`, needs
//! the servers `.ci/run` installs under `tests/`). And, run only
//! when named: `W11_serve_load`
//! (does `codemode mcp serve` give back the memory and processes sessions
//! and requests took; `workloads_serve_load/mod.rs`, needs the release
//! binary as W7 does) and `floor`: W1, W2, W3 and W5 of bare rquickjs next
//! to codemode's
//! in one sitting (`workloads_floor/mod.rs`), since on this machine only
//! the ratio is stable.
//!
//! ```text
//! cargo run --release --example workloads          # every workload
//! cargo run --release --example workloads -- W3    # one workload
//! cargo run --release --example workloads -- floor # bare rquickjs beside codemode
//! ```
//!
//! Prints one JSON object per line on stdout:
//! `{"system":"codemode <version>","workload":"W1_cold_start_p50","value":N,"unit":"us"}`.
//! Anything else (the `execute_blocking` cold start, progress) goes to stderr.
//!
//! Every run uses the real engine: the gate is on with `Policy::full_access()`
//! (every step runs, none asks; the `system` string says so), full receipts
//! are recorded, and both tools are registered
//! through the public [`Tool`] trait. Every run's receipt is checked (status
//! `completed`, every call `ok`, the expected value); the runner aborts on
//! the first mismatch. See `docs/PERFORMANCE.md` for the figures.

// Not a folder of its own example: no main.rs in it.
#[path = "workloads_bash/mod.rs"]
mod workloads_bash;
#[path = "workloads_cold_servers/mod.rs"]
mod workloads_cold_servers;
#[path = "workloads_floor/mod.rs"]
mod workloads_floor;
#[path = "workloads_serve_load/mod.rs"]
mod workloads_serve_load;
#[path = "workloads_traced/mod.rs"]
mod workloads_traced;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use codemode::{
    Engine, Limits, Policy, Program, Receipt, Tool, ToolSpec, policy::Posture, receipt::CallStatus,
    receipt::RunStatus, tool::ToolContext, tool::ToolError, tool::ToolFuture, tool::ToolOutput,
};
use serde::Serialize;
use serde_json::{Value, json};

/// The programs of workloads.json, verbatim.
const W1: &str = "return 1;";
const W2: &str = "let s = 0; for (let i = 0; i < 10000; i++) { const r = await tools.call('echo', {i}); s += r.content.i; } return s;";
const W3: &str = "const rs = await Promise.all(Array.from({length: 1000}, (_, i) => tools.call('echo', {i}))); let s = 0; for (const r of rs) s += r.content.i; return s;";
const W4: &str = "let n = 0; for (let i = 0; i < 100; i++) { const r = await tools.call('blob', {i}); n += r.content.length; } return n;";

/// The expected return values of workloads.json.
const W1_EXPECTED: i64 = 1;
const W2_EXPECTED: i64 = 49_995_000;
const W3_EXPECTED: i64 = 499_500;
const W4_EXPECTED: i64 = 10_240_000;

/// `blob_bytes` of workloads.json.
const BLOB_BYTES: usize = 102_400;
/// The alphabet `blob_recipe` repeats.
const BLOB_ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz012345";

/// W1: warm-up iterations, then samples.
const W1_WARMUP: usize = 20;
const W1_SAMPLES: usize = 300;
/// W2..W4: timed repetitions after one warm-up.
const REPS: usize = 3;
/// W5: sandboxes held at once.
const W5_HELD: usize = 100;

/// Set (to `W5`) in the child process that measures W5 on its own.
const CHILD_ENV: &str = "CODEMODE_WORKLOADS_CHILD";

const WORKLOADS: [&str; 13] = [
    "W1",
    "W2",
    "W3",
    "W4",
    "W5",
    "W2_journal",
    "W2_traced",
    "W6",
    "W7",
    "W8",
    "W8_cli_start",
    "W9_bash_sandboxed",
    "W10_cold_servers",
];

/// W8: `write` calls per run.
const W8_CALLS: i64 = 1_000;
/// W8: one by one, each awaited (each its own start and end syncs).
const W8_SEQUENTIAL: &str = "for (let i = 0; i < 1000; i++) { await tools.write({path: `f${i % 10}.txt`, content: `x${i}`}); } return 1000;";
/// W8: 100 at once, ten times (the starts of a batch share a sync).
const W8_PARALLEL: &str = "for (let b = 0; b < 10; b++) { await Promise.all(Array.from({length: 100}, (_, i) => tools.write({path: `f${i}.txt`, content: `x${b}`}))); } return 1000;";

/// `echo`: returns its arguments object as content.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "echo",
            "Returns its arguments object, unchanged, as content.",
            json!({"type": "object", "additionalProperties": true}),
        )
        .read_only(true)
    }

    fn call(&self, args: Value, _cx: ToolContext) -> ToolFuture {
        // Ready at once: the engine answers the call inline.
        Box::pin(std::future::ready(Ok(ToolOutput::new(args))))
    }
}

/// `blob`: returns a fresh string of `BLOB_BYTES` ASCII characters built per
/// `blob_recipe`.
struct Blob {
    /// The first `BLOB_BYTES - 8` characters, built once; every call copies
    /// them into a fresh string.
    prefix: String,
}

impl Blob {
    fn new() -> Self {
        let prefix: String = BLOB_ALPHABET.chars().cycle().take(BLOB_BYTES - 8).collect();
        Blob { prefix }
    }

    fn make(&self, i: i64) -> String {
        let mut s = String::with_capacity(BLOB_BYTES);
        s.push_str(&self.prefix);
        // String(args.i).padStart(8, "0"): the sign stays inside the padding,
        // as in JavaScript.
        s.push_str(&format!("{:0>8}", i.to_string()));
        s
    }
}

impl Tool for Blob {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "blob",
            "Returns a fresh string of 102400 ASCII characters: the alphabet \
             `abcdefghijklmnopqrstuvwxyz012345` repeated, then `i` left-padded with 0 to 8 digits.",
            json!({
                "type": "object",
                "properties": {
                    "i": {"type": "integer", "description": "Goes, zero-padded to 8 characters, at the end of the string."}
                },
                "required": ["i"],
                "additionalProperties": false
            }),
        )
        .read_only(true)
    }

    fn call(&self, args: Value, _cx: ToolContext) -> ToolFuture {
        let result = match args.get("i").and_then(Value::as_i64) {
            Some(i) => Ok(ToolOutput::new(self.make(i))),
            None => Err(ToolError::new("`i` must be an integer that fits in 64 bits")),
        };
        Box::pin(std::future::ready(result))
    }
}

/// `codemode <version>`, plus the posture and every limit that differ from
/// the defaults.
fn system(engine: &Engine) -> String {
    let (l, d) = (engine.limits(), Limits::default());
    let posture =
        (engine.posture() != Posture::default()).then(|| format!("posture={}", engine.posture().as_str()));
    let fields: [(&str, String, String); 11] = [
        ("memory_bytes", l.memory_bytes.to_string(), d.memory_bytes.to_string()),
        ("stack_bytes", l.stack_bytes.to_string(), d.stack_bytes.to_string()),
        ("source_bytes", l.source_bytes.to_string(), d.source_bytes.to_string()),
        ("max_calls", l.max_calls.to_string(), d.max_calls.to_string()),
        ("max_in_flight", l.max_in_flight.to_string(), d.max_in_flight.to_string()),
        ("deadline", format!("{:?}", l.deadline), format!("{:?}", d.deadline)),
        ("tool_timeout", format!("{:?}", l.tool_timeout), format!("{:?}", d.tool_timeout)),
        ("result_bytes", l.result_bytes.to_string(), d.result_bytes.to_string()),
        ("value_bytes", l.value_bytes.to_string(), d.value_bytes.to_string()),
        ("log_lines", l.log_lines.to_string(), d.log_lines.to_string()),
        ("log_bytes", l.log_bytes.to_string(), d.log_bytes.to_string()),
    ];
    let changed: Vec<String> = posture
        .into_iter()
        .chain(fields.iter().filter(|(_, v, dv)| v != dv).map(|(name, v, _)| format!("{name}={v}")))
        .collect();
    let mut s = format!("codemode {}", env!("CARGO_PKG_VERSION"));
    if !changed.is_empty() {
        s.push_str(&format!(" ({})", changed.join(", ")));
    } else if *l != d {
        s.push_str(" (limits differ from the defaults)");
    }
    s
}

/// One stdout line, with its keys in the documented order.
#[derive(Serialize)]
struct Line<'a> {
    system: String,
    workload: &'a str,
    value: Value,
    unit: &'a str,
}

fn emit(engine: &Engine, workload: &str, value: Value, unit: &str) {
    emit_as(&system(engine), workload, value, unit);
}

/// [`emit`] with the `system` string given (the `floor` workload's bare
/// rquickjs lines).
fn emit_as(system: &str, workload: &str, value: Value, unit: &str) {
    let line = Line { system: system.to_owned(), workload, value, unit };
    println!("{}", serde_json::to_string(&line).expect("a JSON object serialises"));
}

fn round1(x: f64) -> Value {
    json!((x * 10.0).round() / 10.0)
}

fn die(message: impl std::fmt::Display) -> ! {
    eprintln!("workloads: {message}");
    std::process::exit(1);
}

/// Aborts unless the run completed, every call is `ok`, and the value is
/// `expected`.
fn check(workload: &str, receipt: &Receipt, expected: i64) {
    if receipt.status != RunStatus::Completed {
        die(format!(
            "{workload}: the run ended `{}`, not `completed`: {:?}",
            receipt.status.as_str(),
            receipt.error
        ));
    }
    if let Some(bad) = receipt.calls.iter().find(|c| c.status != CallStatus::Ok) {
        die(format!("{workload}: call {} (`{}`) is {:?}: {:?}", bad.seq, bad.tool, bad.status, bad.error));
    }
    if receipt.value != json!(expected) {
        die(format!("{workload}: the program returned {}, expected {expected}", receipt.value));
    }
}

/// A fresh engine over a temporary workspace with the two workload tools.
fn engine(limits: Limits) -> (Engine, tempfile::TempDir) {
    engine_with(limits, |b| b)
}

/// [`engine`], with `adjust` applied to the builder last.
fn engine_with(
    limits: Limits,
    adjust: impl FnOnce(codemode::EngineBuilder) -> codemode::EngineBuilder,
) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| die(format!("no temporary directory: {e}")));
    let builder = Engine::builder()
        .workspace(dir.path())
        .native_tools(true)
        .limits(limits)
        // "policy: allow all": full access, so the gate allows the workload
        // tools (writers, as they make no read-only claim) without an
        // approver; every gate step still runs.
        .policy(Policy::full_access())
        .tool(Echo)
        .tool(Blob::new());
    let engine = adjust(builder).build().unwrap_or_else(|e| die(format!("the engine did not build: {e}")));
    (engine, dir)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| die(format!("no tokio runtime: {e}")))
}

/// Makes a sandbox on this thread, or aborts.
fn sandbox(engine: &Engine, workload: &str) -> codemode::Vm {
    engine.vm().unwrap_or_else(|e| die(format!("{workload}: no sandbox: {e:?}")))
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One W1 cold start on this thread: fresh VM, tools bound, W1 run, VM
/// dropped; timed whole, the receipt checked after the clock stops.
fn w1_sample(engine: &Engine, rt: &tokio::runtime::Runtime) -> Duration {
    let t0 = Instant::now();
    let mut sb = sandbox(engine, "W1");
    let receipt = rt.block_on(sb.run(Program::new(W1)));
    drop(sb);
    let took = t0.elapsed();
    check("W1", &receipt, W1_EXPECTED);
    took
}

fn run_w1(engine: &Engine, rt: &tokio::runtime::Runtime) {
    let mut samples = Vec::with_capacity(W1_SAMPLES);
    for i in 0..W1_WARMUP + W1_SAMPLES {
        let took = w1_sample(engine, rt);
        if i >= W1_WARMUP {
            samples.push(took);
        }
    }
    samples.sort();
    emit(engine, "W1_cold_start_p50", round1(micros(percentile(&samples, 50.0))), "us");
    emit(engine, "W1_cold_start_p99", round1(micros(percentile(&samples, 99.0))), "us");

    // The same through `execute_blocking`, which hops to a VM thread and
    // back; stderr only, so stdout keeps exactly the documented lines.
    let mut samples = Vec::with_capacity(W1_SAMPLES);
    for i in 0..W1_WARMUP + W1_SAMPLES {
        let t0 = Instant::now();
        let receipt = engine.execute_blocking(Program::new(W1));
        let took = t0.elapsed();
        check("W1 (execute_blocking)", &receipt, W1_EXPECTED);
        if i >= W1_WARMUP {
            samples.push(took);
        }
    }
    samples.sort();
    eprintln!(
        "W1 via Engine::execute_blocking (VM thread hop): p50 {:.1} us, p99 {:.1} us ({W1_SAMPLES} samples)",
        micros(percentile(&samples, 50.0)),
        micros(percentile(&samples, 99.0)),
    );
}

/// One run of `source` in a fresh sandbox, timing `Vm::run` only (the
/// sandbox is made before the clock starts and dropped after it stops).
fn timed_run(
    engine: &Engine,
    rt: &tokio::runtime::Runtime,
    workload: &str,
    source: &str,
    expected: i64,
) -> Duration {
    let mut sb = sandbox(engine, workload);
    let t0 = Instant::now();
    let receipt = rt.block_on(sb.run(Program::new(source)));
    let took = t0.elapsed();
    check(workload, &receipt, expected);
    took
}

/// Median time of `REPS` runs of `source` ([`timed_run`]) after one
/// warm-up.
fn time_program(
    engine: &Engine,
    rt: &tokio::runtime::Runtime,
    workload: &str,
    source: &str,
    expected: i64,
) -> Duration {
    let mut times = Vec::with_capacity(REPS);
    for rep in 0..=REPS {
        let took = timed_run(engine, rt, workload, source, expected);
        if rep > 0 {
            times.push(took);
        }
    }
    times.sort();
    times[times.len() / 2]
}

fn run_w2(rt: &tokio::runtime::Runtime) {
    // 10,000 calls in one run: over the default budget of 1,000.
    let mut limits = Limits::default();
    limits.max_calls = 10_000;
    let (engine, _dir) = engine(limits);
    let t = time_program(&engine, rt, "W2", W2, W2_EXPECTED);
    emit(&engine, "W2_seq_calls", json!((10_000.0 / t.as_secs_f64()).round() as u64), "calls/s");
}

/// W8: `write` calls (native, not read-only: each has a durable start
/// and end in the journal) through `Engine::execute_blocking`, the
/// journal on (the local folder store) and off, alternating; emits the
/// journaled rates, sequential and 100 at once, and prints both on
/// stderr.
fn run_w8() {
    let mut limits = Limits::default();
    limits.max_calls = 10_000;
    let (on, _dir_on) = engine(limits.clone());
    let (off, _dir_off) = engine_with(limits, |b| b.no_journal());
    for (name, source) in [("W8_writes", W8_SEQUENTIAL), ("W8_writes_parallel", W8_PARALLEL)] {
        let time = |engine: &Engine| {
            let t0 = Instant::now();
            let receipt = engine.execute_blocking(Program::new(source));
            let took = t0.elapsed();
            check(name, &receipt, W8_CALLS);
            took
        };
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for rep in 0..=REPS {
            let (a, b) = (time(&on), time(&off));
            if rep > 0 {
                with.push(a);
                without.push(b);
            }
        }
        with.sort();
        without.sort();
        let rate = |d: Duration| (W8_CALLS as f64 / d.as_secs_f64()).round() as u64;
        let (r_on, r_off) = (rate(with[with.len() / 2]), rate(without[without.len() / 2]));
        emit(&on, name, json!(r_on), "calls/s");
        eprintln!(
            "{name} via execute_blocking: journal on {r_on} calls/s, off {r_off} calls/s ({:+.1}%)",
            (r_on as f64 / r_off as f64 - 1.0) * 100.0
        );
    }
}

/// W2 through `Engine::execute_blocking`, the journal on (the local
/// folder store, as `codemode run` has it) and off, alternating in one
/// sitting; emits the journaled rate and prints both on stderr. The same
/// for W1 (one VM thread hop; a run that never waits has its journal
/// made, written and fsync'd by the store's threads after its receipt).
fn run_w2_journal() {
    let mut limits = Limits::default();
    limits.max_calls = 10_000;
    let (on, _dir_on) = engine(limits.clone());
    let (off, _dir_off) = engine_with(limits, |b| b.no_journal());
    on_and_off(&on, &off, "W2_journal", "journal");
}

/// W2 then W1 through `Engine::execute_blocking` on `on` and `off`
/// (engines with and without `what`, the journal or tracing),
/// alternating in one sitting; emits `workload` (the `on` engine's W2
/// rate) and prints both on stderr.
fn on_and_off(on: &Engine, off: &Engine, workload: &str, what: &str) {
    let time = |engine: &Engine, source: &str, expected: i64| {
        let t0 = Instant::now();
        let receipt = engine.execute_blocking(Program::new(source));
        let took = t0.elapsed();
        check(workload, &receipt, expected);
        took
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for rep in 0..=REPS {
        let (a, b) = (time(on, W2, W2_EXPECTED), time(off, W2, W2_EXPECTED));
        if rep > 0 {
            with.push(a);
            without.push(b);
        }
    }
    with.sort();
    without.sort();
    let rate = |d: Duration| (10_000.0 / d.as_secs_f64()).round() as u64;
    let (r_on, r_off) = (rate(with[with.len() / 2]), rate(without[without.len() / 2]));
    emit(on, workload, json!(r_on), "calls/s");
    eprintln!(
        "W2 via execute_blocking: {what} on {r_on} calls/s, off {r_off} calls/s ({:+.1}%)",
        (r_on as f64 / r_off as f64 - 1.0) * 100.0
    );
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..W1_WARMUP + W1_SAMPLES {
        let (a, b) = (time(on, W1, W1_EXPECTED), time(off, W1, W1_EXPECTED));
        if i >= W1_WARMUP {
            with.push(a);
            without.push(b);
        }
    }
    with.sort();
    without.sort();
    eprintln!(
        "W1 via execute_blocking: {what} on p50 {:.1} us p99 {:.1} us; off p50 {:.1} us p99 {:.1} us",
        micros(percentile(&with, 50.0)),
        micros(percentile(&with, 99.0)),
        micros(percentile(&without, 50.0)),
        micros(percentile(&without, 99.0)),
    );
}

fn run_w3(engine: &Engine, rt: &tokio::runtime::Runtime) {
    let t = time_program(engine, rt, "W3", W3, W3_EXPECTED);
    emit(engine, "W3_parallel_1000", round1(t.as_secs_f64() * 1e3), "ms");
}

fn run_w4(engine: &Engine, rt: &tokio::runtime::Runtime) {
    let t = time_program(engine, rt, "W4", W4, W4_EXPECTED);
    emit(engine, "W4_payload_100x100KiB", round1(t.as_secs_f64() * 1e3), "ms");
}

/// W5 in the parent: re-runs this executable with `CHILD_ENV=W5`, so the
/// resident memory is that of a process that did nothing else.
fn run_w5_in_child() {
    let exe =
        std::env::current_exe().unwrap_or_else(|e| die(format!("W5: cannot find this executable: {e}")));
    let status = Command::new(exe)
        .arg("W5")
        .env(CHILD_ENV, "W5")
        .status()
        .unwrap_or_else(|e| die(format!("W5: could not start the child process: {e}")));
    if !status.success() {
        die(format!("W5: the child process failed ({status})"));
    }
}

/// VmRSS of this process, in KiB.
fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| die(format!("W5: cannot read /proc/self/status: {e}")));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| die("W5: no VmRSS line in /proc/self/status"))
}

/// W5 in the child: baseline after one VM was made, ran W1 and was dropped;
/// then 100 sandboxes that each ran W1, held at once.
fn run_w5_child() {
    let (engine, _dir) = engine(Limits::default());
    let rt = runtime();
    {
        let mut sb = sandbox(&engine, "W5");
        let receipt = rt.block_on(sb.run(Program::new(W1)));
        check("W5", &receipt, W1_EXPECTED);
    }
    let baseline = vm_rss_kib();
    let mut held = Vec::with_capacity(W5_HELD);
    for _ in 0..W5_HELD {
        let mut sb = sandbox(&engine, "W5");
        let receipt = rt.block_on(sb.run(Program::new(W1)));
        check("W5", &receipt, W1_EXPECTED);
        held.push(sb);
    }
    let rss = vm_rss_kib();
    emit(&engine, "W5_rss_100_idle", round1(rss as f64 / 1024.0), "MiB");
    emit(&engine, "W5_per_sandbox", round1(rss.saturating_sub(baseline) as f64 / W5_HELD as f64), "KiB");
    eprintln!("W5: VmRSS baseline {baseline} KiB, with {W5_HELD} sandboxes held {rss} KiB");
    drop(held);
}

fn main() -> ExitCode {
    if std::env::var(CHILD_ENV).as_deref() == Ok("W5") {
        run_w5_child();
        return ExitCode::SUCCESS;
    }
    if std::env::var(CHILD_ENV).as_deref() == Ok("W5_floor") {
        workloads_floor::run_w5_child();
        return ExitCode::SUCCESS;
    }
    if let Ok(child @ ("W6" | "W6_off")) = std::env::var(CHILD_ENV).as_deref() {
        run_w6_child(child == "W6");
        return ExitCode::SUCCESS;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let selected: Vec<&str> = match args.last().map(String::as_str) {
        None => WORKLOADS.to_vec(),
        Some(w) if WORKLOADS.contains(&w) || w == "floor" || w == "W11_serve_load" => vec![w],
        Some(other) => {
            eprintln!(
                "workloads: unknown workload `{other}`; usage: workloads [W1|W2|W3|W4|W5|W2_journal|W2_traced|W6|W7|W8|W8_cli_start|W9_bash_sandboxed|W10_cold_servers|W11_serve_load|floor]"
            );
            return ExitCode::from(2);
        }
    };

    let rt = runtime();
    let (engine, _dir) = engine(Limits::default());
    for w in selected {
        match w {
            "W1" => run_w1(&engine, &rt),
            "W2" => run_w2(&rt),
            "W2_journal" => run_w2_journal(),
            "W2_traced" => workloads_traced::run(),
            "W3" => run_w3(&engine, &rt),
            "W4" => run_w4(&engine, &rt),
            "W5" => run_w5_in_child(),
            "W6" => run_w6_in_child(),
            // With no workload named, W7 runs only if the binary is built.
            "W7" if args.is_empty() && w7_binary_found().is_none() => eprintln!(
                "workloads: W7 skipped: no codemode binary next to this example (`cargo build --release --bin codemode`)"
            ),
            "W7" => run_w7(),
            "W8" => run_w8(),
            // Like W7, only if the binary is built when no workload is named.
            "W8_cli_start" if args.is_empty() && w7_binary_found().is_none() => eprintln!(
                "workloads: W8_cli_start skipped: no codemode binary next to this example (`cargo build --release --bin codemode`)"
            ),
            "W8_cli_start" => run_w8_cli_start(),
            "W9_bash_sandboxed" => workloads_bash::run(),
            "W10_cold_servers" => workloads_cold_servers::run(),
            "floor" => workloads_floor::run(),
            "W11_serve_load" => workloads_serve_load::run(),
            _ => unreachable!("checked above"),
        }
    }
    ExitCode::SUCCESS
}

/// W8_cli_start: pairs run first and not counted, then timed pairs.
const W8_CLI_WARMUP: usize = 3;
const W8_CLI_PAIRS: usize = 50;
/// W8_cli_start's second pass: runs made first, so the workspace holds as
/// many as the default retention keeps (`keep_runs` 200), every user's
/// steady state.
const W8_CLI_KEPT: usize = 200;

/// W8_cli_start: `codemode run prog.js` of `return 1` (the binary W7 uses:
/// `$CODEMODE_W7_BIN`, else the release build next to this example) and
/// `bash -c true`, in turn, [`W8_CLI_PAIRS`] times, the order swapped every
/// pair; each process timed from spawn to exit. Everything at its default
/// (journal on, receipt saved, posture ask), in a fresh workspace, with
/// `XDG_STATE_HOME` in a temporary folder so the runs' folders go there.
/// Emits the median wall time of `codemode run` (ms) and the median of the
/// pair-by-pair ratio; stderr gives min / median / max of each, and the
/// instructions of one `codemode run` from `perf stat` when it counts them
/// (else why not).
fn run_w8_cli_start() {
    w8_cli_start_pass(0);
    w8_cli_start_pass(W8_CLI_KEPT);
}

/// One pass of [`run_w8_cli_start`], with `kept` runs made first (named
/// `W8_cli_start_kept<kept>_*` when not 0; the instruction count only for
/// the fresh pass).
fn w8_cli_start_pass(kept: usize) {
    let bin = w7_binary();
    let name = if kept == 0 { "W8_cli_start".to_owned() } else { format!("W8_cli_start_kept{kept}") };
    let dir = tempfile::tempdir().unwrap_or_else(|e| die(format!("W8_cli_start: cannot make a folder: {e}")));
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap_or_else(|e| die(format!("W8_cli_start: {e}")));
    let program = dir.path().join("prog.js");
    std::fs::write(&program, "return 1\n").unwrap_or_else(|e| die(format!("W8_cli_start: {e}")));
    let state = dir.path().join("state");
    let codemode = || {
        let mut c = Command::new(&bin);
        c.arg("run").arg(&program).current_dir(&workspace).env("XDG_STATE_HOME", &state);
        c
    };
    let bash = || {
        let mut c = Command::new("bash");
        c.args(["-c", "true"]);
        c
    };
    let time = |mut command: Command, check: bool| {
        let start = Instant::now();
        let out = command
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| die(format!("W8_cli_start: cannot start {command:?}: {e}")));
        let took = start.elapsed().as_secs_f64() * 1000.0;
        if !out.status.success() || (check && out.stdout != b"1\n") {
            die(format!(
                "W8_cli_start: {command:?} exited {} printing {:?}",
                out.status,
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        took
    };
    for _ in 0..kept {
        time(codemode(), true);
    }
    let (mut runs, mut shells, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..W8_CLI_WARMUP + W8_CLI_PAIRS {
        let (run, shell) = if i % 2 == 0 {
            let run = time(codemode(), true);
            (run, time(bash(), false))
        } else {
            let shell = time(bash(), false);
            (time(codemode(), true), shell)
        };
        if i >= W8_CLI_WARMUP {
            runs.push(run);
            shells.push(shell);
            ratios.push(run / shell);
        }
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2], v[v.len() - 1])
    };
    let ((r0, r1, r2), (s0, s1, s2), (q0, q1, q2)) =
        (spread(&mut runs), spread(&mut shells), spread(&mut ratios));
    let system =
        format!("codemode {} (codemode run, defaults: posture ask, journal on)", env!("CARGO_PKG_VERSION"));
    emit_as(&system, &format!("{name}_p50"), json!((r1 * 100.0).round() / 100.0), "ms");
    emit_as(&system, &format!("{name}_ratio_p50"), json!((q1 * 100.0).round() / 100.0), "x bash -c true");
    eprintln!(
        "{name}: {} ({W8_CLI_PAIRS} pairs) min / median / max: codemode run {r0:.2} / {r1:.2} / {r2:.2} ms, \
         bash -c true {s0:.2} / {s1:.2} / {s2:.2} ms, ratio pair by pair {q0:.2} / {q1:.2} / {q2:.2}",
        bin.display()
    );
    if kept != 0 {
        return;
    }
    let mut perf = Command::new("perf");
    perf.args(["stat", "-x", ",", "-e", "instructions:u", "--"]).arg(&bin).arg("run").arg(&program);
    perf.current_dir(&workspace).env("XDG_STATE_HOME", &state).stdout(std::process::Stdio::null());
    match perf.output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stderr);
            let counted = text
                .lines()
                .find(|l| l.contains("instructions"))
                .and_then(|l| l.split(',').next())
                .and_then(|n| n.trim().parse::<u64>().ok());
            match counted {
                Some(n) => {
                    emit_as(&system, "W8_cli_start_instructions", json!(n), "instructions");
                    eprintln!("W8_cli_start: {n} instructions (user space) in one codemode run");
                }
                None => eprintln!(
                    "W8_cli_start: instructions not counted: perf stat does not count them here ({})",
                    text.lines()
                        .find(|l| l.contains("instructions"))
                        .unwrap_or("no instructions line")
                        .trim()
                ),
            }
        }
        Ok(out) => eprintln!(
            "W8_cli_start: instructions not counted: perf stat failed ({})",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim()
        ),
        Err(e) => eprintln!("W8_cli_start: instructions not counted: perf is not usable ({e})"),
    }
}

/// W7: warm-up round trips, then timed ones.
const W7_WARMUP: usize = 20;
const W7_SAMPLES: usize = 300;
/// W7: the binary to serve instead of the `codemode` next to this example
/// (to compare builds with the same runner).
const W7_BIN_ENV: &str = "CODEMODE_W7_BIN";
/// W7: extra `codemode mcp serve` arguments, split on spaces (e.g.
/// `--journal off --approve deny`); the `system` string names them.
const W7_ARGS_ENV: &str = "CODEMODE_W7_ARGS";

/// `codemode mcp serve` as a child process speaking JSON-RPC lines over its
/// stdin and stdout. Dropping it ends the child (stdin closed, then waited
/// for; killed if it does not end within 10 s).
struct ServeChild {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl ServeChild {
    /// Sends `method` with `params` and returns the answer's `result`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.read_line();
            if message.get("id") == Some(&json!(id)) {
                match message.get("result") {
                    Some(result) => return result.clone(),
                    None => self.fail(format!("W7: `{method}` was refused: {message}")),
                }
            }
            // A notification or a server request: not the answer.
        }
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write as _;
        let stdin = self.stdin.as_mut().expect("stdin is open until drop");
        let mut line = serde_json::to_vec(message).expect("a JSON value serialises");
        line.push(b'\n');
        if let Err(e) = stdin.write_all(&line).and_then(|()| stdin.flush()) {
            self.fail(format!("W7: could not write to codemode mcp serve: {e}"));
        }
    }

    fn read_line(&mut self) -> Value {
        use std::io::BufRead as _;
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line);
        match read {
            Ok(0) => self.fail("W7: codemode mcp serve closed its stdout"),
            Ok(_) => match serde_json::from_str(&line) {
                Ok(message) => message,
                Err(e) => self.fail(format!("W7: not a JSON-RPC line ({e}): {line:.200}")),
            },
            Err(e) => self.fail(format!("W7: could not read from codemode mcp serve: {e}")),
        }
    }

    /// Kills the child, waits for it, and exits 1 with `message`.
    fn fail(&mut self, message: impl std::fmt::Display) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        die(message)
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `codemode` binary W7 serves: `$CODEMODE_W7_BIN`, else the release
/// `codemode` next to this example (target/release/codemode).
fn w7_binary() -> std::path::PathBuf {
    w7_binary_found().unwrap_or_else(|| {
        die("W7: no codemode binary next to this example: `cargo build --release --bin codemode` first")
    })
}

/// The `codemode` binary W7 serves: `$CODEMODE_W7_BIN`, else the one next
/// to this example (`target/release/codemode`), if it is there.
fn w7_binary_found() -> Option<std::path::PathBuf> {
    if let Some(bin) = std::env::var_os(W7_BIN_ENV) {
        return Some(bin.into());
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("codemode");
    bin.is_file().then_some(bin)
}

/// W7: `execute_tools` `return 1` round trips over stdio to `codemode mcp
/// serve` with its defaults (journal on, receipts saved) on a fresh
/// workspace, from the request written to the answer line read.
fn run_w7() {
    let bin = w7_binary();
    let extra: Vec<String> = std::env::var(W7_ARGS_ENV)
        .unwrap_or_default()
        .split(' ')
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let dir = tempfile::tempdir().unwrap_or_else(|e| die(format!("W7: cannot make a workspace: {e}")));
    let mut child = Command::new(&bin)
        .args(["mcp", "serve", "--workspace"])
        .arg(dir.path())
        .args(&extra)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| die(format!("W7: could not start {}: {e}", bin.display())));
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take().expect("stdout is piped"));
    let mut serve = ServeChild { child, stdin, stdout: std::io::BufReader::new(stdout), next_id: 0 };
    eprintln!("W7: serving {} (pid {})", bin.display(), serve.child.id());
    serve.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "codemode-workloads", "version": env!("CARGO_PKG_VERSION")}}),
    );
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let params = json!({"name": "execute_tools", "arguments": {"code": "return 1"}});
    let mut samples = Vec::with_capacity(W7_SAMPLES);
    for i in 0..W7_WARMUP + W7_SAMPLES {
        let start = Instant::now();
        let result = serve.request("tools/call", params.clone());
        let took = start.elapsed();
        let facts = result.get("structuredContent");
        let status = facts.and_then(|f| f.get("status")).and_then(Value::as_str);
        let value = facts.and_then(|f| f.get("value"));
        if status != Some("completed") || value != Some(&json!(1)) {
            serve.fail(format!(
                "W7: call {i} answered status {status:?}, value {value:?}, not completed and 1: {result}"
            ));
        }
        if i >= W7_WARMUP {
            samples.push(took);
        }
    }
    drop(serve);
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p50 = ms(samples[samples.len() / 2]);
    let p99 = ms(samples[samples.len() * 99 / 100]);
    eprintln!(
        "W7: p50 {p50:.3} ms, p99 {p99:.3} ms, min {:.3} ms over {W7_SAMPLES} round trips",
        ms(samples[0])
    );
    let mut system = format!("codemode {}", env!("CARGO_PKG_VERSION"));
    if !extra.is_empty() {
        system.push_str(&format!(" (mcp serve {})", extra.join(" ")));
    }
    let value = if p50 < 1.0 { json!((p50 * 100.0).round() / 100.0) } else { round1(p50) };
    let line = Line { system, workload: "W7_serve_roundtrip", value, unit: "ms" };
    println!("{}", serde_json::to_string(&line).expect("a JSON object serialises"));
}

/// W6: programs started at once.
const W6_PROGRAMS: usize = 1_000;
/// W6: calls each program makes, one after another.
const W6_CALLS: usize = 10;
/// W6: how long each call sleeps, in ms.
const W6_SLEEP_MS: u64 = 10;

/// `sleep`: waits `ms` milliseconds (a tokio timer, no CPU), then returns
/// its arguments object as content.
struct Sleep;

impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep",
            "Waits `ms` milliseconds (a timer, no CPU), then returns its arguments object as content.",
            json!({
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0}},
                "required": ["ms"],
                "additionalProperties": true
            }),
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

/// W6 in the parent: runs this executable with `CHILD_ENV=W6` (the
/// journal on, the defaults; emits the figures) and then `W6_off` (the
/// journal off; stderr only), each in a process of its own so VmHWM is
/// that run's.
fn run_w6_in_child() {
    let exe =
        std::env::current_exe().unwrap_or_else(|e| die(format!("W6: cannot find this executable: {e}")));
    for child in ["W6", "W6_off"] {
        let status = Command::new(&exe)
            .arg("W6")
            .env(CHILD_ENV, child)
            .status()
            .unwrap_or_else(|e| die(format!("W6: could not start the child process: {e}")));
        if !status.success() {
            die(format!("W6: the child process ({child}) failed ({status})"));
        }
    }
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| die(format!("cannot read /proc/self/status: {e}")));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| die(format!("no {field} line in /proc/self/status")))
}

/// W6 in the child: `W6_PROGRAMS` programs started at once through
/// `Engine::start` (default limits, full receipts, the journal on unless
/// `journal` is false), each making `W6_CALLS` sequential calls of
/// `sleep`; the wall time from the first start to the last receipt, and
/// the process's peak resident memory (VmHWM). Every receipt is checked.
fn run_w6_child(journal: bool) {
    let (engine, _dir) = engine_with(Limits::default(), |b| {
        let b = b.tool(Sleep);
        if journal { b } else { b.no_journal() }
    });
    let source = format!(
        "let n = 0;\nfor (let k = 0; k < {W6_CALLS}; k++) {{ const r = await tools.call('sleep', {{ms: {W6_SLEEP_MS}, k}}); n += r.content.k; }}\nreturn n;"
    );
    let expected = (0..W6_CALLS as i64).sum::<i64>();
    let rss_before = status_kib("VmRSS");
    let t0 = Instant::now();
    let runs: Vec<_> = (0..W6_PROGRAMS)
        .map(|i| engine.start(Program::named(format!("w6-{i}.js"), source.clone())))
        .collect();
    let receipts: Vec<Receipt> = runs.into_iter().map(codemode::run::Run::wait_blocking).collect();
    let wall = t0.elapsed();
    let peak = status_kib("VmHWM");
    for receipt in &receipts {
        check("W6_concurrent_1000", receipt, expected);
        if receipt.calls.len() != W6_CALLS {
            die(format!("W6_concurrent_1000: a run made {} calls, not {W6_CALLS}", receipt.calls.len()));
        }
    }
    drop(receipts);
    let (wall_ms, peak_mib) = (wall.as_secs_f64() * 1e3, peak as f64 / 1024.0);
    if journal {
        emit(&engine, "W6_concurrent_1000", round1(wall_ms), "ms");
        emit(&engine, "W6_peak_rss", round1(peak_mib), "MiB");
    }
    eprintln!(
        "W6 ({W6_PROGRAMS} programs x {W6_CALLS} calls of {W6_SLEEP_MS} ms, journal {}): wall {wall_ms:.1} ms, peak RSS {peak_mib:.1} MiB (VmRSS before {rss_before} KiB)",
        if journal { "on" } else { "off" }
    );
}
