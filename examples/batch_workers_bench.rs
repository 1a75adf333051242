//! Shared batches over PostgreSQL (docs/PERFORMANCE.md, "Batch workers"):
//! N `echo` calls of server-everything submitted as one batch
//! (`codemode batch submit --tool mcp__everything__echo`), then run by one,
//! two and four `codemode batch work` processes in turn, each batch in a
//! fresh schema of the database at `CODEMODE_BENCH_POSTGRES_URL`.
//!
//! ```text
//! cargo build --release --bin codemode --example batch_workers_bench
//! CODEMODE_BENCH_POSTGRES_URL=postgres://... target/release/examples/batch_workers_bench [N] [WORKERS...]
//! ```
//!
//! Needs server-everything under `tests/node/node_modules` (`npm ci
//! --prefix tests/node`). Prints one JSON line per worker count:
//! `{"workload": "W12_batch_workers", "workers", "lines", "submit_s",
//! "work_s", "value": lines/s, "unit", "commits_per_line",
//! "bytes_per_line"}`; `commits_per_line` counts the database's committed
//! transactions (`pg_stat_database.xact_commit`, autocommit reads
//! included) while the workers ran, `bytes_per_line` the growth of the
//! tables (runs, journals, lines) while they ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

fn die(message: impl std::fmt::Display) -> ! {
    eprintln!("batch_workers_bench: {message}");
    std::process::exit(2)
}

/// The codemode binary beside this example's folder (`target/release`).
fn codemode_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| die(e));
    let bin = exe.parent().and_then(Path::parent).map(|d| d.join("codemode"));
    match bin {
        Some(bin) if bin.exists() => bin,
        _ => {
            die("build the binary first: cargo build --release --bin codemode --example batch_workers_bench")
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut workers: Vec<usize> = args.filter_map(|s| s.parse().ok()).collect();
    if workers.is_empty() {
        workers = vec![1, 2, 4];
    }
    let Ok(base) = std::env::var("CODEMODE_BENCH_POSTGRES_URL") else {
        die("set CODEMODE_BENCH_POSTGRES_URL (`bash .ci/run postgres` starts a server and prints a URL)")
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let server = root.join("tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !server.exists() {
        die("server-everything is missing: npm ci --prefix tests/node");
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (admin, connection) =
        rt.block_on(tokio_postgres::connect(&base, tokio_postgres::NoTls)).unwrap_or_else(|e| die(e));
    rt.spawn(connection);
    let bin = codemode_bin();
    for count in workers {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        let mcp = json!({"mcpServers": {"everything": {"command": "node", "args": [server, "stdio"]}}});
        std::fs::write(ws.join("mcp.json"), mcp.to_string()).unwrap();
        let input: String = (0..lines).map(|i| format!("{{\"message\": \"m{i}\"}}\n")).collect();
        std::fs::write(ws.join("in.jsonl"), input).unwrap();
        let schema = format!("bench_workers_{count}_{}", std::process::id());
        rt.block_on(
            admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")),
        )
        .unwrap_or_else(|e| die(e));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        let cli = |args: &[&str]| {
            let mut c = Command::new(&bin);
            c.args(args).current_dir(ws).env("XDG_STATE_HOME", ws.join("state")).stdin(Stdio::null());
            c
        };
        let started = Instant::now();
        let submit = cli(&[
            "batch",
            "submit",
            "--tool",
            "mcp__everything__echo",
            "in.jsonl",
            "--batch-id",
            "bench",
            "--journal",
            &url,
            "-q",
        ])
        .output()
        .unwrap();
        if !submit.status.success() {
            die(String::from_utf8_lossy(&submit.stderr));
        }
        let submit_s = started.elapsed().as_secs_f64();
        let size = |rt: &tokio::runtime::Runtime| -> i64 {
            let q = format!(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '{schema}' AND c.relkind = 'r'"
            );
            rt.block_on(admin.query_one(&q, &[])).unwrap().get(0)
        };
        let commits = |rt: &tokio::runtime::Runtime| -> i64 {
            rt.block_on(admin.batch_execute("SELECT pg_stat_clear_snapshot()")).unwrap();
            rt.block_on(admin.query_one(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                &[],
            ))
            .unwrap()
            .get(0)
        };
        let (size_before, commits_before) = (size(&rt), commits(&rt));
        let started = Instant::now();
        let work = [
            "batch",
            "work",
            "bench",
            "--journal",
            &url,
            "--parallel",
            "16",
            "--approve",
            "allow",
            "--mcp-config",
            "mcp.json",
            "--deadline",
            "600",
            "-q",
        ];
        let children: Vec<_> = (0..count)
            .map(|_| cli(&work).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap())
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            if !out.status.success() {
                die(format!("a worker failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        let work_s = started.elapsed().as_secs_f64();
        // The stats collector reports commits a moment later.
        std::thread::sleep(std::time::Duration::from_millis(800));
        let (size_after, commits_after) = (size(&rt), commits(&rt));
        let status = cli(&["batch", "status", "bench", "--journal", &url, "--json"]).output().unwrap();
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_else(|e| die(e));
        if status["completed"] != json!(lines) {
            die(format!("not every line completed: {status}"));
        }
        let n = lines as f64;
        println!(
            "{}",
            json!({
                "workload": "W12_batch_workers",
                "workers": count,
                "lines": lines,
                "submit_s": (submit_s * 100.0).round() / 100.0,
                "work_s": (work_s * 100.0).round() / 100.0,
                "value": (n / work_s).round(),
                "unit": "lines/s",
                "commits_per_line": ((commits_after - commits_before) as f64 / n * 100.0).round() / 100.0,
                "bytes_per_line": ((size_after - size_before) as f64 / n).round(),
            })
        );
        rt.block_on(admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))).unwrap_or_else(|e| die(e));
    }
}
