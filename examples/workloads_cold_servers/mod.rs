//! `W10_cold_servers`: the first program of an engine that touches five
//! real MCP servers (server-everything, server-filesystem, server-memory
//! and server-sequential-thinking from npm, mcp-server-time from PyPI, as
//! `.ci/run` installs them under `tests/`), one call each, one after
//! another, with no server running and an empty schema cache; beside it,
//! in the same sitting, a program calling only one of them, for each.
//!
//! The goal (issue 36): the five-server program takes at most 1.2x the
//! slowest single server's program, since the servers it names start at
//! once before its first call (engine/prestart.rs) where the gate allows
//! their start without asking: here a trusted MCP configuration under
//! full access. Every sample is a fresh engine (the engine is dropped and
//! its servers stopped after each), timed from `execute_blocking` to its
//! receipt; medians of [`ROUNDS`] rounds.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use codemode::mcp::{McpConfig, PoolOptions};
use codemode::{Engine, Policy, Program};
use serde_json::{Value, json};

use super::{check, die, emit};

/// Rounds of the six programs.
const ROUNDS: usize = 5;

/// The repository root (this example is built from it).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn node_server(name: &str) -> String {
    root()
        .join("tests/node/node_modules/@modelcontextprotocol")
        .join(name)
        .join("dist/index.js")
        .to_string_lossy()
        .into_owned()
}

/// The five servers (`mcpServers` of a configuration over `ws`) and the
/// call each program makes of each.
fn servers(ws: &Path) -> (Value, [(&'static str, &'static str); 5]) {
    let time = root().join("tests/python/.venv/bin/mcp-server-time");
    let servers = json!({
        "everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]},
        "filesystem": {"command": "node", "args": [node_server("server-filesystem"), ws.to_string_lossy()]},
        "memory": {"command": "node", "args": [node_server("server-memory")],
                   "env": {"MEMORY_FILE_PATH": ws.join("memory.jsonl").to_string_lossy()}},
        "thinking": {"command": "node", "args": [node_server("server-sequential-thinking")]},
        "time": {"command": time.to_string_lossy()},
    });
    let calls = [
        ("everything", "await tools.mcp__everything__echo({message: 'hi'});"),
        ("filesystem", "await tools.mcp__filesystem__list_allowed_directories({});"),
        ("memory", "await tools.mcp__memory__read_graph({});"),
        (
            "thinking",
            "await tools.mcp__thinking__sequentialthinking({thought: 'one', nextThoughtNeeded: false, \
             thoughtNumber: 1, totalThoughts: 1});",
        ),
        ("time", "await tools.mcp__time__get_current_time({timezone: 'UTC'});"),
    ];
    (servers, calls)
}

/// Whether the servers are installed (`.ci/run`, or the README's test
/// setup line).
fn installed() -> bool {
    root().join("tests/node/node_modules/@modelcontextprotocol/server-everything").is_dir()
        && root().join("tests/python/.venv/bin/mcp-server-time").is_file()
}

/// One cold run of `program` (its calls joined) in a fresh engine over a
/// fresh workspace and schema cache; the receipt is checked.
fn cold_run(program: &str, calls: usize) -> Duration {
    let ws = tempfile::tempdir().unwrap_or_else(|e| die(format!("W10: no workspace: {e}")));
    let state = tempfile::tempdir().unwrap_or_else(|e| die(format!("W10: no state folder: {e}")));
    let ws_path = ws.path().canonicalize().unwrap_or_else(|e| die(format!("W10: {e}")));
    let (servers, _) = servers(&ws_path);
    let text = json!({"mcpServers": servers}).to_string();
    let config: McpConfig = McpConfig::parse(&text, Path::new("/"), &|_| None)
        .unwrap_or_else(|e| die(format!("W10: the MCP configuration: {e}")));
    let options = PoolOptions { cache_dir: Some(state.path().join("mcp-cache")), ..PoolOptions::default() };
    let engine: Engine = Engine::builder()
        .workspace(&ws_path)
        .state_dir(state.path())
        .policy(Policy::full_access())
        .mcp(config, options)
        .build()
        .unwrap_or_else(|e| die(format!("W10: the engine did not build: {e}")));
    let t0 = Instant::now();
    let receipt = engine.execute_blocking(Program::new(format!("{program} return {calls};")));
    let took = t0.elapsed();
    check("W10_cold_servers", &receipt, calls as i64);
    engine.shutdown_mcp_blocking();
    took
}

/// CPU time (user + system) of this process's waited-for children so far
/// (`cutime` + `cstime` of `/proc/self/stat`): the servers an engine
/// stopped and reaped.
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; cutime and
    // cstime are the 16th and 17th of the line, in clock ticks (100 per
    // second on Linux).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<u64> = rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let ticks = fields.get(13).copied().unwrap_or(0) + fields.get(14).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// W10: emits the five-server program's median (ms) and its ratio to the
/// slowest single server's median.
pub(super) fn run() {
    if !installed() {
        eprintln!(
            "W10_cold_servers skipped: the MCP servers are not installed (`npm ci --prefix tests/node` and the \
             Python venv of the README's test setup)"
        );
        return;
    }
    let (_, calls) = servers(Path::new("/"));
    let all: String = calls.iter().map(|(_, c)| *c).collect::<Vec<_>>().join(" ");
    let mut five = Vec::new();
    let mut five_cpu = Vec::new();
    let mut single: Vec<Vec<Duration>> = vec![Vec::new(); calls.len()];
    // A first round warms the page cache (node and Python start from disk).
    for round in 0..=ROUNDS {
        let cpu = children_cpu();
        let t = cold_run(&all, calls.len());
        let cpu = children_cpu().saturating_sub(cpu);
        let alone: Vec<Duration> = calls.iter().map(|(_, c)| cold_run(c, 1)).collect();
        if round > 0 {
            five.push(t);
            five_cpu.push(cpu);
            for (i, a) in alone.into_iter().enumerate() {
                single[i].push(a);
            }
        }
    }
    eprintln!("W10_cold_servers, {ROUNDS} rounds (ms, min / median / max):");
    let spread = |xs: &[Duration]| {
        let mut s = xs.to_vec();
        s.sort();
        format!("{} / {} / {}", ms(s[0]), ms(s[s.len() / 2]), ms(s[s.len() - 1]))
    };
    eprintln!("  five servers, one program: {}", spread(&five));
    // The servers' own start work: on this machine's cores, the program
    // cannot take less than it divided by the cores.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let cpu = median(five_cpu);
    eprintln!(
        "  CPU of the five servers (user + system, median): {} ms; on {cores} cores at least {} ms of wall time",
        ms(cpu),
        ms(cpu / cores as u32)
    );
    let mut slowest = Duration::ZERO;
    for ((server, _), times) in calls.iter().zip(&single) {
        eprintln!("  {server} alone: {}", spread(times));
        slowest = slowest.max(median(times.clone()));
    }
    let five = median(five);
    let ratio = five.as_secs_f64() / slowest.as_secs_f64();
    eprintln!("  ratio of medians, five / slowest alone: {ratio:.2}");
    let (engine, _dir) = super::engine(codemode::Limits::default());
    emit(&engine, "W10_cold_servers", json!(ms(five)), "ms");
    emit(&engine, "W10_cold_servers_ratio", json!((ratio * 100.0).round() / 100.0), "x");
}
