//! The `floor` workload of `examples/workloads.rs`: W1, W2, W3 and W5 of
//! bare rquickjs next to codemode's, in one sitting.
//!
//! This machine's speed swings by 2-3x between phases, so a figure alone
//! says little; the ratio of codemode to bare QuickJS measured in the same
//! process, alternating, does. "Bare" is what a host with no gate, no
//! receipt and no prelude would run, with the same rquickjs:
//! `Runtime::new` + `Context::full` (every built-in made up front, as an
//! embedder that does nothing special gets), one Rust function bound as a
//! global, the workload's program, drop. Its W2/W3 host function reads
//! `i` from the arguments object and answers a new `{i}` through a
//! resolved promise: the least an awaited host call can be.
//!
//! Prints the workloads' usual lines twice, once with the `system` of bare
//! rquickjs and once with codemode's (W5 of each in a child process of its
//! own, as W5 always is), then the ratios on stderr.

use std::time::{Duration, Instant};

use codemode::Limits;
use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime};

use super::{
    W1_EXPECTED, W1_SAMPLES, W1_WARMUP, W2, W2_EXPECTED, W3, W3_EXPECTED, W5_HELD, emit_as, engine, micros,
    percentile, round1, runtime, timed_run, vm_rss_kib, w1_sample,
};

/// The `system` string of the bare lines.
const BARE: &str = "rquickjs 0.14 (bare: Context::full, one host function, no gate, no receipt)";
/// Rounds; each round runs W1 `W1_WARMUP + W1_SAMPLES` times and W2 and
/// W3 once, bare then codemode each time.
const ROUNDS: usize = 5;

/// W2 and W3 as bare programs: `host({i})` stands for `tools.call('echo', {i})`
/// and answers `{i}` itself, not `{content: {i}}`.
const BARE_W2: &str = "(async () => { let s = 0; for (let i = 0; i < 10000; i++) { const r = await host({i}); s += r.i; } return s; })()";
const BARE_W3: &str = "(async () => { const rs = await Promise.all(Array.from({length: 1000}, (_, i) => host({i}))); let s = 0; for (const r of rs) s += r.i; return s; })()";

/// The bare host function: a new `{i}` from the arguments' `i`, resolved.
fn bare_echo<'js>(ctx: Ctx<'js>, args: Object<'js>) -> rquickjs::Result<Promise<'js>> {
    let i: i32 = args.get("i")?;
    let answer = Object::new(ctx.clone())?;
    answer.set("i", i)?;
    let (promise, resolve, _) = ctx.promise()?;
    resolve.call::<_, ()>((answer,))?;
    Ok(promise)
}

/// A bare VM with the host function bound.
fn bare_vm() -> (Runtime, Context) {
    let rt = Runtime::new().unwrap_or_else(|e| super::die(format!("floor: no runtime: {e}")));
    let ctx = Context::full(&rt).unwrap_or_else(|e| super::die(format!("floor: no context: {e}")));
    ctx.with(|ctx| {
        let host = Function::new(ctx.clone(), bare_echo).and_then(|f| ctx.globals().set("host", f));
        host.unwrap_or_else(|e| super::die(format!("floor: cannot bind the host function: {e}")));
    });
    (rt, ctx)
}

/// Runs `source` in `ctx` to its value.
fn bare_eval(ctx: &Context, source: &str, expected: i64) {
    ctx.with(|ctx| {
        let value: i64 = if source.starts_with("(async") {
            let promise: Promise = ctx.eval(source).unwrap_or_else(|e| super::die(format!("floor: {e}")));
            promise.finish().unwrap_or_else(|e| super::die(format!("floor: {e}")))
        } else {
            ctx.eval(source).unwrap_or_else(|e| super::die(format!("floor: {e}")))
        };
        if value != expected {
            super::die(format!("floor: the bare program returned {value}, expected {expected}"));
        }
    });
}

/// One bare W2 or W3 run, timed from the program's start to its value (the
/// VM is made before the clock starts, as `time_program` does).
fn bare_timed(source: &str, expected: i64) -> Duration {
    let (_rt, ctx) = bare_vm();
    let t0 = Instant::now();
    bare_eval(&ctx, source, expected);
    t0.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The `floor` workload.
pub(super) fn run() {
    let rt = runtime();
    let (engine, _dir) = engine(Limits::default());
    let mut limits = Limits::default();
    limits.max_calls = 10_000;
    let (engine_w2, _dir_w2) = super::engine(limits);
    let (mut w1_bare, mut w1) = (Vec::new(), Vec::new());
    let (mut w2_bare, mut w2, mut w3_bare, mut w3) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        // One of each in turn, so both meet the same phases of the machine.
        for i in 0..W1_WARMUP + W1_SAMPLES {
            let t0 = Instant::now();
            let (vm_rt, ctx) = bare_vm();
            bare_eval(&ctx, "1", W1_EXPECTED);
            drop((ctx, vm_rt));
            let bare_took = t0.elapsed();
            let took = w1_sample(&engine, &rt);
            if i >= W1_WARMUP {
                w1_bare.push(bare_took);
                w1.push(took);
            }
        }
        w2_bare.push(bare_timed(BARE_W2, W2_EXPECTED));
        w2.push(timed_run(&engine_w2, &rt, "W2", W2, W2_EXPECTED));
        w3_bare.push(bare_timed(BARE_W3, W3_EXPECTED));
        w3.push(timed_run(&engine, &rt, "W3", W3, W3_EXPECTED));
    }
    w1_bare.sort();
    w1.sort();
    let figures = [
        (micros(percentile(&w1_bare, 50.0)), micros(percentile(&w1, 50.0))),
        (micros(percentile(&w1_bare, 99.0)), micros(percentile(&w1, 99.0))),
        (median(w2_bare).as_secs_f64(), median(w2).as_secs_f64()),
        (median(w3_bare).as_secs_f64() * 1e3, median(w3).as_secs_f64() * 1e3),
    ];
    let [p50, p99, seq, parallel] = figures;
    let calls_per_s = |secs: f64| serde_json::json!((10_000.0 / secs).round() as u64);
    emit_as(BARE, "W1_cold_start_p50", round1(p50.0), "us");
    emit_as(BARE, "W1_cold_start_p99", round1(p99.0), "us");
    emit_as(BARE, "W2_seq_calls", calls_per_s(seq.0), "calls/s");
    emit_as(BARE, "W3_parallel_1000", round1(parallel.0), "ms");
    let system = super::system(&engine);
    emit_as(&system, "W1_cold_start_p50", round1(p50.1), "us");
    emit_as(&system, "W1_cold_start_p99", round1(p99.1), "us");
    emit_as(&super::system(&engine_w2), "W2_seq_calls", calls_per_s(seq.1), "calls/s");
    emit_as(&system, "W3_parallel_1000", round1(parallel.1), "ms");
    w5_in_child();
    super::run_w5_in_child();
    eprintln!(
        "floor: codemode / bare, same sitting ({ROUNDS} rounds alternating): W1 p50 {:.2}x, p99 {:.2}x; \
         W2 {:.2}x the time per call; W3 {:.2}x",
        p50.1 / p50.0,
        p99.1 / p99.0,
        seq.1 / seq.0,
        parallel.1 / parallel.0,
    );
}

/// Bare W5 in a child process (`CHILD_ENV=W5_floor`), as W5 is measured.
fn w5_in_child() {
    let exe = std::env::current_exe().unwrap_or_else(|e| super::die(format!("floor: no executable: {e}")));
    let status = std::process::Command::new(exe)
        .arg("floor")
        .env(super::CHILD_ENV, "W5_floor")
        .status()
        .unwrap_or_else(|e| super::die(format!("floor: W5 child: {e}")));
    if !status.success() {
        super::die(format!("floor: the W5 child failed ({status})"));
    }
}

/// W5 of bare rquickjs: baseline after one VM was made, ran W1 and was
/// dropped; then 100 VMs that each ran W1, held at once.
pub(super) fn run_w5_child() {
    {
        let (_rt, ctx) = bare_vm();
        bare_eval(&ctx, "1", W1_EXPECTED);
    }
    let baseline = vm_rss_kib();
    let mut held = Vec::with_capacity(W5_HELD);
    for _ in 0..W5_HELD {
        let (vm_rt, ctx) = bare_vm();
        bare_eval(&ctx, "1", W1_EXPECTED);
        held.push((ctx, vm_rt));
    }
    let rss = vm_rss_kib();
    emit_as(BARE, "W5_rss_100_idle", round1(rss as f64 / 1024.0), "MiB");
    emit_as(BARE, "W5_per_sandbox", round1(rss.saturating_sub(baseline) as f64 / W5_HELD as f64), "KiB");
    drop(held);
}
