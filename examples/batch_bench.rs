//! Batch throughput (docs/PERFORMANCE.md): N `echo` items through
//! `Engine::start_batch`, each finished item serialised to a JSON line as
//! `codemode batch` does, against an in-process echo tool or
//! server-everything's `echo` over stdio.
//!
//! ```text
//! cargo run --release --example batch_bench -- [inproc|everything] [N] [CONCURRENCY]
//! ```
//!
//! Prints one JSON line: `{"workload", "items", "concurrency", "value", "unit"}`.
//! The `codemode batch` CLI itself is timed with a generated JSON Lines file
//! (see docs/PERFORMANCE.md).

use std::time::Instant;

use codemode::{
    Engine, Limits, Policy, Tool, ToolSpec, batch::Batch, batch::BatchOptions, tool::ToolContext,
    tool::ToolFuture, tool::ToolOutput,
};
use serde_json::{Map, Value, json};

/// `echo`: returns its arguments, at once.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Returns its arguments.", json!({"type": "object"})).read_only(true)
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async move { Ok(ToolOutput::new(args)) })
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = args.first().map_or("inproc", String::as_str).to_owned();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let concurrency: Option<usize> = args.get(2).and_then(|s| s.parse().ok());
    let ws = tempfile::tempdir().expect("a temp dir");
    let mut limits = Limits::default();
    limits.max_calls = n;
    limits.deadline = std::time::Duration::from_secs(600);
    let builder = Engine::builder().workspace(ws.path()).policy(Policy::full_access()).limits(limits);
    let (engine, tool) = match target.as_str() {
        "inproc" => (builder.tool(Echo).build().expect("engine"), "echo"),
        "everything" => {
            let server = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
            );
            let text = json!({"mcpServers": {"everything": {"command": "node", "args": [server, "stdio"]}}});
            let config =
                codemode::mcp::McpConfig::parse(&text.to_string(), ws.path(), &|_| None).expect("config");
            let engine = builder.mcp(config, codemode::mcp::PoolOptions::default()).build().expect("engine");
            // Start the server first, so the figure is the steady rate.
            let warm = engine.call_blocking("mcp__everything__echo", &json!({"message": "warm"}));
            assert!(warm.is_ok(), "{warm:?}");
            (engine, "mcp__everything__echo")
        }
        other => {
            eprintln!("batch_bench: unknown target `{other}` (inproc or everything)");
            std::process::exit(2);
        }
    };
    let arguments = (0..n).map(|i| {
        let mut a = Map::new();
        a.insert("message".into(), Value::String(format!("item {i}")));
        a
    });
    let batch = Batch::of_tool(tool, arguments);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let started = Instant::now();
    let (bytes, ok, receipt) = rt.block_on(async {
        let mut run = engine.start_batch(batch, BatchOptions::new().concurrency(concurrency));
        let (mut bytes, mut ok) = (0usize, 0usize);
        while let Some(item) = run.next_item().await {
            ok += usize::from(item.is_ok());
            bytes += serde_json::to_string(&item).expect("items serialise").len() + 1;
        }
        (bytes, ok, run.wait().await)
    });
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(ok, n, "{}", receipt.render(&Default::default()));
    eprintln!("batch_bench: {n} items, {bytes} bytes of JSON lines, {:.1} ms", secs * 1e3);
    let line = json!({
        "workload": format!("batch_{target}_{n}"),
        "items": n,
        "concurrency": concurrency.unwrap_or(engine.limits().max_in_flight),
        "value": (n as f64 / secs).round(),
        "unit": "items/s",
    });
    println!("{line}");
    engine.shutdown_mcp_blocking();
}
