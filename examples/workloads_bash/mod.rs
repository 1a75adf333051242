//! `W9_bash_sandboxed`: one `bash {command: "true"}` call through the
//! engine, sandboxed (the default `workspace-write` profile, no network:
//! user, mount, PID, IPC and network namespaces, a fresh `/proc`, the
//! read-only and hidden mounts, Landlock, the Unix socket filter) beside
//! the same call with the sandbox off, in turn, in one sitting.
//!
//! Each sample is a whole program (`await tools.bash({command: "true"})`)
//! through `Engine::execute_blocking`, journal on as `codemode run` has
//! it; the call's own time is the receipt's `elapsed_ms` for it (from the
//! gate's decision to the result). Two sandboxed engines are measured:
//! one whose launcher is the small `codemode-sandbox` binary (found beside
//! this example's folder after `cargo build --release`), and one whose
//! launcher is the `codemode` binary itself (what an install without the
//! small binary uses), when each is there.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::sandbox::{SandboxProfile, SandboxSettings};
use codemode::{Engine, Limits, Policy, Program};
use serde_json::json;

use super::{check, die, emit, engine_with, w7_binary_found};

/// Pairs run first and not counted.
const WARMUP: usize = 5;
/// Timed pairs.
const PAIRS: usize = 60;
/// Timed pairs of [`BACK_TO_BACK`].
const BACK_TO_BACK_PAIRS: usize = 30;
const PROGRAM: &str = "await tools.bash({command: 'true'}); return 1;";
/// Two calls in turn: the second comes as soon as the first has ended
/// (its spare launcher, started while the first ran, just ready).
const BACK_TO_BACK: &str =
    "await tools.bash({command: 'true'}); await tools.bash({command: 'true'}); return 1;";
/// The pause after each sample, so that what a call leaves to be done off
/// its way (the namespaces' teardown, the reap, the engine's next spare
/// launcher) is not measured in the next sample, of the other engine.
const SETTLE: Duration = Duration::from_millis(20);

/// An engine whose `[sandbox]` is `settings`, full access (so `bash` needs
/// no approval and `off` is allowed).
fn engine_sandboxed(profile: SandboxProfile) -> (Engine, tempfile::TempDir) {
    let config = ConfigFile {
        policy: Policy::full_access(),
        sandbox: SandboxConfig {
            settings: SandboxSettings { profile, ..SandboxSettings::default() },
            ..SandboxConfig::default()
        },
        ..ConfigFile::default()
    };
    engine_with(Limits::default(), |b| b.config(config))
}

/// One run of [`PROGRAM`]: (whole program, the call's `elapsed_ms`), then
/// a pause of [`SETTLE`].
fn sample(engine: &Engine) -> (Duration, Duration) {
    sample_of(engine, PROGRAM, 0)
}

/// One run of `program`: (whole program, call `index`'s `elapsed_ms`),
/// then a pause of [`SETTLE`].
fn sample_of(engine: &Engine, program: &str, index: usize) -> (Duration, Duration) {
    let t0 = Instant::now();
    let receipt = engine.execute_blocking(Program::new(program));
    let took = t0.elapsed();
    check("W9_bash_sandboxed", &receipt, 1);
    let call = receipt.calls.get(index).unwrap_or_else(|| die("W9_bash_sandboxed: the receipt lacks a call"));
    let call = Duration::from_secs_f64(call.elapsed_ms / 1e3);
    std::thread::sleep(SETTLE);
    (took, call)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn spread(label: &str, mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let median = xs[xs.len() / 2];
    eprintln!("  {label}: min {:.2} / median {:.2} / max {:.2}", xs[0], median, xs[xs.len() - 1]);
    median
}

/// W9: the sandboxed call (each launcher there is) beside the unsandboxed
/// one, pair by pair; emits the medians of the call and of the ratios.
pub(super) fn run() {
    let small = small_launcher();
    let mut engines: Vec<(String, Engine, tempfile::TempDir)> = Vec::new();
    match &small {
        Some(path) => {
            codemode::sandbox::set_launcher(path);
            let (e, d) = engine_sandboxed(SandboxProfile::WorkspaceWrite);
            engines.push(("codemode-sandbox".into(), e, d));
        }
        None => eprintln!("W9: no codemode-sandbox binary built (`cargo build --release`): its pass skipped"),
    }
    match w7_binary_found() {
        Some(path) => {
            codemode::sandbox::set_launcher(path);
            let (e, d) = engine_sandboxed(SandboxProfile::WorkspaceWrite);
            engines.push(("codemode".into(), e, d));
        }
        None => eprintln!("W9: no codemode binary built (`cargo build --release`): its pass skipped"),
    }
    if engines.is_empty() {
        die("W9_bash_sandboxed: no sandbox launcher found; `cargo build --release` first");
    }
    let (off, _off_dir) = engine_sandboxed(SandboxProfile::Off);
    for (launcher, engine, _dir) in &engines {
        let (mut call_on, mut call_off, mut ratio, mut whole_on, mut whole_off) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..WARMUP + PAIRS {
            // The order swaps every pair.
            let (on, unconfined) = if i % 2 == 0 {
                let a = sample(engine);
                (a, sample(&off))
            } else {
                let b = sample(&off);
                (sample(engine), b)
            };
            if i >= WARMUP {
                call_on.push(ms(on.1));
                call_off.push(ms(unconfined.1));
                ratio.push(ms(on.1) / ms(unconfined.1));
                whole_on.push(ms(on.0));
                whole_off.push(ms(unconfined.0));
            }
        }
        eprintln!(
            "W9_bash_sandboxed, launcher {launcher}, {PAIRS} pairs (ms; ratio sandboxed / off, pair by pair):"
        );
        let median_on = spread("call, sandboxed", call_on);
        spread("call, sandbox off", call_off);
        let median_ratio = spread("call ratio", ratio);
        spread("whole program, sandboxed", whole_on);
        spread("whole program, sandbox off", whole_off);
        // The second of two calls in turn, in one program.
        let (mut second_on, mut second_ratio) = (Vec::new(), Vec::new());
        for i in 0..BACK_TO_BACK_PAIRS {
            let (on, unconfined) = if i % 2 == 0 {
                let a = sample_of(engine, BACK_TO_BACK, 1);
                (a, sample_of(&off, BACK_TO_BACK, 1))
            } else {
                let b = sample_of(&off, BACK_TO_BACK, 1);
                (sample_of(engine, BACK_TO_BACK, 1), b)
            };
            second_on.push(ms(on.1));
            second_ratio.push(ms(on.1) / ms(unconfined.1));
        }
        spread("second of two calls in turn, sandboxed", second_on);
        spread("second of two calls in turn, ratio", second_ratio);
        let suffix = if launcher == "codemode" { "_codemode_launcher" } else { "" };
        emit(engine, &format!("W9_bash_sandboxed{suffix}"), json!((median_on * 100.0).round() / 100.0), "ms");
        emit(
            engine,
            &format!("W9_bash_sandboxed{suffix}_ratio"),
            json!((median_ratio * 100.0).round() / 100.0),
            "x",
        );
    }
}

/// The `codemode-sandbox` binary of this build (`target/release/`, beside
/// the examples' folder).
fn small_launcher() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("codemode-sandbox");
    bin.is_file().then_some(bin)
}
