//! Test tools and helpers shared by the integration tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use codemode::{
    Engine, EngineBuilder, Limits, Program, Receipt, Tool, ToolSpec, tool::ToolContext, tool::ToolError,
    tool::ToolFuture, tool::ToolOutput,
};
use serde_json::{Value, json};

/// `echo`: returns its arguments object, at once.
pub struct Echo;
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Returns its arguments.", json!({"type": "object"})).read_only(true)
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async move { Ok(ToolOutput::new(args)) })
    }
}

/// `sleep {ms}`: waits `ms` milliseconds on the tool runtime, then returns
/// `{slept: ms}`. Tracks how many calls overlap.
pub struct Sleep {
    pub running: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
}
impl Sleep {
    pub fn new() -> Self {
        Sleep { running: Arc::default(), peak: Arc::default() }
    }
}
impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sleep",
            "Waits ms milliseconds.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}),
        )
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        let running = self.running.clone();
        let peak = self.peak.clone();
        Box::pin(async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(ToolOutput::new(json!({"slept": ms})))
        })
    }
}

/// `blob {bytes}`: returns a string of `bytes` characters ("0123456789" repeated).
pub struct Blob;
impl Tool for Blob {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "blob",
            "Returns a long string.",
            json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}),
        )
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        let n = args["bytes"].as_u64().unwrap_or(0) as usize;
        Box::pin(async move { Ok(ToolOutput::new("0123456789".repeat(n / 10 + 1)[..n].to_owned())) })
    }
}

/// `fail {message}`: always fails with `message`.
pub struct Fail;
impl Tool for Fail {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "fail",
            "Always fails.",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        )
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        let m = args["message"].as_str().unwrap_or("it failed").to_owned();
        Box::pin(async move { Err(ToolError::new(m)) })
    }
}

/// `panic`: panics, once on the VM thread's first poll or later on the tool
/// runtime (`{later: true}`).
pub struct Panic;
impl Tool for Panic {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("panic", "Panics.", json!({"type": "object"}))
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async move {
            if args["later"].as_bool() == Some(true) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("test tool panics on purpose")
        })
    }
}

/// The tests' own `XDG_STATE_HOME`: every codemode the tests spawn gets it
/// (`.env("XDG_STATE_HOME", XDG_STATE)`), so no test writes run state into the user's real
/// state folder.
pub const XDG_STATE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/xdg-state");

/// The tests' state folder, `$XDG_STATE/codemode`: where engines built
/// in the tests ([`engine_builder`]) and spawned CLIs keep run state.
pub fn state_home() -> std::path::PathBuf {
    std::path::Path::new(XDG_STATE).join("codemode")
}

/// `Engine::builder()` with run state in the tests' state folder, and bash
/// sandboxed by the `codemode` binary this build made (not a
/// `codemode-sandbox` an earlier `cargo build` left beside it, which the
/// launcher lookup prefers).
pub fn engine_builder() -> EngineBuilder {
    static LAUNCHER: std::sync::Once = std::sync::Once::new();
    LAUNCHER.call_once(|| codemode::sandbox::set_launcher(env!("CARGO_BIN_EXE_codemode")));
    Engine::builder().state_dir(state_home())
}

/// The folder holding one folder per run of the workspace `ws` (as
/// engines and the CLI in the tests keep them): journals, receipts, spill
/// files.
pub fn runs_dir(ws: &std::path::Path) -> std::path::PathBuf {
    let ws = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.to_path_buf());
    codemode::journal::run_state::runs_folder_in(&state_home(), &ws)
}

/// A builder over a fresh temp workspace with every test tool registered,
/// under full access (the gate's own tests set their policies).
pub fn builder(ws: &tempfile::TempDir) -> EngineBuilder {
    engine_builder()
        .workspace(ws.path())
        .policy(codemode::Policy::full_access())
        .tool(Echo)
        .tool(Sleep::new())
        .tool(Blob)
        .tool(Fail)
        .tool(Panic)
}

/// An engine over `ws` with the test tools and `limits`.
pub fn engine_with(ws: &tempfile::TempDir, limits: Limits) -> Engine {
    builder(ws).limits(limits).build().expect("engine builds")
}

/// A temp workspace with a few files.
pub fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("docs/guide.md"), "# Guide\n\nHello.\n").unwrap();
    ws
}

/// Runs `source` on an engine with default limits over a fresh workspace.
pub fn run(source: &str) -> Receipt {
    let ws = workspace();
    engine_with(&ws, Limits::default()).execute_blocking(Program::new(source))
}

/// Limits with a short deadline.
pub fn deadline(ms: u64) -> Limits {
    let mut l = Limits::default();
    l.deadline = Duration::from_millis(ms);
    l
}

/// Puts a file where the runs of `ws` are kept, so that nothing can be
/// saved there.
pub fn block_runs_dir(ws: &std::path::Path) {
    let runs = runs_dir(ws);
    std::fs::create_dir_all(runs.parent().unwrap()).unwrap();
    std::fs::write(&runs, "in the way").unwrap();
}

/// Runs the sandbox launcher `launcher` (a `codemode __sandbox-exec
/// PROTOCOL spec-on-stdin` command, with whatever environment the test
/// set) with `spec` on its stdin, framed as the engine writes it
/// (`codemode::sandbox::launcher::spec_frame`: 8 hexadecimal digits of
/// length, then the JSON); its output.
pub fn run_launcher(mut launcher: std::process::Command, spec: &Value) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let json = spec.to_string();
    let mut child =
        launcher.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A launcher that refuses its command line reads nothing: the write
    // may fail, the output says why.
    let _ = stdin.write_all(format!("{:08x}{json}", json.len()).as_bytes());
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Waits until `path` exists (an event the process under test makes, not
/// a time), at most 60 s, a bound: panics saying `what` never happened.
pub fn wait_until_exists(path: &std::path::Path, what: &str) {
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(std::time::Instant::now() < give_up, "{what}: {} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends signal `name` (`INT`, `TERM`, `KILL`, ...) to process `pid`.
pub fn send_signal(name: &str, pid: u32) {
    let status =
        std::process::Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}
