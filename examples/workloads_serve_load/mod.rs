//! `W11_serve_load`: does `codemode mcp serve` give back what it took?
//! Serves the release binary (W7's: `$CODEMODE_W7_BIN`, else
//! target/release/codemode) twice:
//!
//! - **HTTP.** `--http 127.0.0.1:0` with an MCP configuration of one stdio
//!   server (tests/fixtures/mcp/misbehaving.py, `normal`), so each
//!   2025-11-25 session gets its own engine and upstream server. Rounds of
//!   sessions at once, each a thread speaking raw HTTP/1.1: `initialize`,
//!   `notifications/initialized`, one program calling the upstream server's
//!   `echo`, two of `return 1`, then gone without `DELETE` (what most
//!   clients do). After each round and a pause, the server's VmRSS and the
//!   number of its child processes (upstream servers still running).
//! - **stdio.** One client, `execute_tools` of a program reading a small
//!   file, one request after another; VmRSS after the first hundred and at
//!   each tenth of the run.
//!
//! The sizes: 10 rounds of 100 sessions and 100,000 stdio requests;
//! `CODEMODE_W11_QUICK=1`: 3 rounds of 20 and 10,000. The HTTP server gets
//! `$CODEMODE_W11_ARGS` (split on spaces), by default `--session-idle 10
//! --upstream-idle 10`; set it empty to serve a build without those flags.
//! `CODEMODE_W11_PAUSE` (seconds, default 13) is the pause after a round.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Line, ServeChild, die, round1, w7_binary};

const ARGS_ENV: &str = "CODEMODE_W11_ARGS";
const DEFAULT_ARGS: &str = "--session-idle 10 --upstream-idle 10";
const QUICK_ENV: &str = "CODEMODE_W11_QUICK";
const PAUSE_ENV: &str = "CODEMODE_W11_PAUSE";

/// The sizes of a run.
struct Sizes {
    rounds: usize,
    sessions: usize,
    requests: usize,
}

pub(crate) fn run() {
    let quick = std::env::var(QUICK_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    let sizes = if quick {
        Sizes { rounds: 3, sessions: 20, requests: 10_000 }
    } else {
        Sizes { rounds: 10, sessions: 100, requests: 100_000 }
    };
    let args: Vec<String> = std::env::var(ARGS_ENV)
        .unwrap_or_else(|_| DEFAULT_ARGS.to_owned())
        .split(' ')
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let pause = std::env::var(PAUSE_ENV).ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(13.0);
    let mut system = format!("codemode {}", env!("CARGO_PKG_VERSION"));
    if !args.is_empty() {
        system.push_str(&format!(" (mcp serve --http {})", args.join(" ")));
    }
    http(&sizes, &args, Duration::from_secs_f64(pause), &system);
    stdio(&sizes, &format!("codemode {}", env!("CARGO_PKG_VERSION")));
}

fn emit(system: &str, workload: &str, value: Value, unit: &str) {
    let line = Line { system: system.to_owned(), workload, value, unit };
    println!("{}", serde_json::to_string(&line).expect("a JSON object serialises"));
}

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| die(format!("W11: cannot read /proc/{pid}/status: {e}")));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| die("W11: no VmRSS line"))
}

/// How many live processes have `pid` as their parent.
fn children(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            let mut after = stat.rsplit(')').next().unwrap_or("").split_whitespace();
            let state = after.next();
            let ppid = after.next().and_then(|p| p.parse::<u32>().ok());
            ppid == Some(pid) && !matches!(state, Some("Z" | "X"))
        })
        .count()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The HTTP rounds (see the module docs).
fn http(sizes: &Sizes, extra: &[String], pause: Duration, system: &str) {
    let bin = w7_binary();
    let dir = tempfile::tempdir().unwrap_or_else(|e| die(format!("W11: cannot make a folder: {e}")));
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| die(format!("W11: {e}")));
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/misbehaving.py");
    let servers = json!({"mcpServers": {"fx": {"command": "python3", "args": [fixture, "normal"]}}});
    std::fs::write(ws.join("servers.json"), servers.to_string()).unwrap_or_else(|e| die(format!("W11: {e}")));
    let mut child = Command::new(&bin)
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--workspace"])
        .arg(&ws)
        .args(["--mcp-config", "servers.json", "--posture", "full-access"])
        .args(extra)
        .current_dir(&ws)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| die(format!("W11: could not start {}: {e}", bin.display())));
    let pid = child.id();
    let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut line = String::new();
    let addr: SocketAddr = loop {
        line.clear();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            die(format!("W11: the HTTP server did not start: {line}"));
        }
        if let Some(rest) = line.split("serving MCP on http://").nth(1) {
            let host = rest.split('/').next().unwrap_or_default();
            break host.parse().unwrap_or_else(|e| die(format!("W11: not an address `{host}`: {e}")));
        }
    };
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    eprintln!("W11: serving {} over HTTP on {addr} (pid {pid}) {}", bin.display(), extra.join(" "));
    let start_rss = rss_kib(pid);
    let mut after = Vec::new();
    for round in 1..=sizes.rounds {
        let started = Instant::now();
        let threads: Vec<_> =
            (0..sizes.sessions).map(|_| std::thread::spawn(move || session(addr))).collect();
        for t in threads {
            if let Err(e) = t.join().unwrap_or_else(|_| Err("a session thread panicked".into())) {
                let _ = child.kill();
                die(format!("W11: round {round}: {e}"));
            }
        }
        let took = started.elapsed();
        std::thread::sleep(pause);
        let (rss, left) = (rss_kib(pid), children(pid));
        eprintln!(
            "W11: round {round}: {} sessions in {:.2} s; after a {:.1} s pause: VmRSS {:.1} MiB, {left} upstream processes",
            sizes.sessions,
            took.as_secs_f64(),
            pause.as_secs_f64(),
            mib(rss)
        );
        after.push((rss, left));
    }
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    let (first, last) = (after[0].0, after[after.len() - 1].0);
    let growth = (last as f64 / first as f64 - 1.0) * 100.0;
    eprintln!(
        "W11: HTTP VmRSS at start {:.1} MiB, after round 1 {:.1} MiB, after round {} {:.1} MiB ({growth:+.1}%), max {:.1} MiB",
        mib(start_rss),
        mib(first),
        sizes.rounds,
        mib(last),
        mib(after.iter().map(|a| a.0).max().unwrap_or(0))
    );
    emit(system, "W11_http_rss_after_first_round", round1(mib(first)), "MiB");
    emit(system, "W11_http_rss_after_last_round", round1(mib(last)), "MiB");
    emit(system, "W11_http_rss_growth", round1(growth), "%");
    emit(system, "W11_http_upstream_left", json!(after[after.len() - 1].1), "processes");
}

/// One client session over raw HTTP/1.1 (a connection per request), gone
/// without `DELETE`.
fn session(addr: SocketAddr) -> Result<(), String> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "codemode-workloads", "version": env!("CARGO_PKG_VERSION")}}});
    let (status, headers, _) = post(addr, None, &init)?;
    if status != 200 {
        return Err(format!("initialize answered {status}"));
    }
    let id = header(&headers, "mcp-session-id").ok_or("no Mcp-Session-Id")?;
    post(addr, Some(&id), &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let programs = ["return (await tools.call('mcp__fx__echo', {text: 'hi'})) && 1", "return 1", "return 1"];
    for (n, code) in programs.iter().enumerate() {
        let call = json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
            "params": {"name": "execute_tools", "arguments": {"code": code}}});
        let (status, _, body) = post(addr, Some(&id), &call)?;
        let answer = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(body.as_str()))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("result").is_some() || v.get("error").is_some());
        let facts = answer.as_ref().and_then(|a| a.pointer("/result/structuredContent"));
        if status != 200 || facts.and_then(|f| f.get("value")) != Some(&json!(1)) {
            return Err(format!("`{code}` answered {status}: {body:.300}"));
        }
    }
    Ok(())
}

/// The value of header `name` in `headers` (the header lines).
fn header(headers: &str, name: &str) -> Option<String> {
    headers.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// POSTs `body` to `/mcp` on a connection of its own: status, header
/// lines, body (de-chunked).
fn post(addr: SocketAddr, session: Option<&str>, body: &Value) -> Result<(u16, String, String), String> {
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(id) = session {
        request.push_str(&format!("Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
    stream.write_all(request.as_bytes()).map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("no header end")?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let chunked = header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_owned() };
    Ok((status, head.to_owned(), body))
}

/// The body of a chunked transfer.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

/// The stdio run (see the module docs).
fn stdio(sizes: &Sizes, system: &str) {
    let bin = w7_binary();
    let dir = tempfile::tempdir().unwrap_or_else(|e| die(format!("W11: cannot make a folder: {e}")));
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| die(format!("W11: {e}")));
    std::fs::write(ws.join("note.txt"), "hello from W11\n").unwrap_or_else(|e| die(format!("W11: {e}")));
    let mut child = Command::new(&bin)
        .args(["mcp", "serve", "--workspace"])
        .arg(&ws)
        .current_dir(&ws)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| die(format!("W11: could not start {}: {e}", bin.display())));
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take().expect("stdout is piped"));
    let mut serve = ServeChild { child, stdin, stdout: BufReader::new(stdout), next_id: 0 };
    let pid = serve.child.id();
    eprintln!("W11: serving {} over stdio (pid {pid}), {} requests", bin.display(), sizes.requests);
    serve.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "codemode-workloads", "version": env!("CARGO_PKG_VERSION")}}),
    );
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let code = "const r = await tools.read({path: 'note.txt'}); return r.content.length > 0 ? 1 : 0";
    let params = json!({"name": "execute_tools", "arguments": {"code": code}});
    let every = sizes.requests / 10;
    let (mut after_100, mut readings) = (0, Vec::new());
    let started = Instant::now();
    for i in 1..=sizes.requests {
        let result = serve.request("tools/call", params.clone());
        if result.pointer("/structuredContent/value") != Some(&json!(1)) {
            serve.fail(format!("W11: request {i} answered {result}"));
        }
        if i == 100 {
            after_100 = rss_kib(pid);
        }
        if i % every == 0 {
            let rss = rss_kib(pid);
            eprintln!(
                "W11: stdio after {i} requests ({:.0} s): VmRSS {:.1} MiB",
                started.elapsed().as_secs_f64(),
                mib(rss)
            );
            readings.push(rss);
        }
    }
    let rate = sizes.requests as f64 / started.elapsed().as_secs_f64();
    drop(serve);
    let last = readings.last().copied().unwrap_or(after_100);
    let growth = (last as f64 / after_100 as f64 - 1.0) * 100.0;
    eprintln!(
        "W11: stdio VmRSS after 100 requests {:.1} MiB, after {} {:.1} MiB ({growth:+.1}%), {rate:.0} requests/s",
        mib(after_100),
        sizes.requests,
        mib(last)
    );
    emit(system, "W11_stdio_rss_after_100", round1(mib(after_100)), "MiB");
    emit(system, "W11_stdio_rss_after_all", round1(mib(last)), "MiB");
    emit(system, "W11_stdio_rss_growth", round1(growth), "%");
}
