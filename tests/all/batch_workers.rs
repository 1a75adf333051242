//! Batches shared by many workers through a real PostgreSQL
//! (docs/BATCH.md, "Many workers"): the store's claims (two workers never
//! get one line; a dead worker's lines are claimed again, with their run
//! ids), and through the real binary a 2,000-line program batch against
//! server-everything and the sleeping fixture server run by three
//! `codemode batch work` processes, one of them SIGKILLed mid-batch: every
//! line done once, none repeated (the fixture server's log of calls), the
//! killed worker's lines recovered by the others, and a global cap of
//! calls in flight (kept in the store) seen at the three server processes
//! together; and a global rate over three `codemode run` processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use codemode::journal::JournalStore;
use codemode::journal::batch_queue::NewBatch;
use codemode_journal_postgres::PostgresStore;
use serde_json::{Value, json};

use std::process::Stdio;

use crate::cli::{codemode, command};

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The JSON lines of `bytes`.
fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn batch_of(id: &str, count: u64) -> NewBatch {
    NewBatch {
        batch_id: id.into(),
        program_name: "p.js".into(),
        program_source: "return input.n;".into(),
        about: "{}".into(),
        lines: (1..=count).map(|n| (n, format!("{{\"n\":{n}}}"))).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_claim_each_line_once_and_take_over_the_lines_of_a_worker_that_is_gone() {
    let Some(db) = crate::journal_postgres::database("batch_claims").await else { return };
    let store = PostgresStore::new(&db.url).unwrap();
    let queue = store.batch_queue().expect("the PostgreSQL store shares batches");
    queue.submit(batch_of("b", 40)).await.unwrap();
    let again = queue.submit(batch_of("b", 1)).await.unwrap_err().to_string();
    assert!(again.contains("a batch `b` exists"), "{again}");
    assert!(queue.join("nope").await.err().unwrap().to_string().contains("no batch `nope`"));

    // Two workers (each its own store: its own session) claiming at once
    // get disjoint lines, lowest first, each with a run id.
    let other = PostgresStore::new(&db.url).unwrap();
    let one = queue.join("b").await.unwrap();
    let two = other.batch_queue().unwrap().join("b").await.unwrap();
    let (a, b) = tokio::join!(one.claim(15), two.claim(15));
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut lines: Vec<u64> = a.iter().chain(&b).map(|l| l.line).collect();
    lines.sort_unstable();
    assert_eq!(lines, (1..=30).collect::<Vec<_>>(), "each line to one worker");
    assert!(a.iter().chain(&b).all(|l| l.claims == 1 && l.run_id.starts_with("run-")));
    let info = queue.batch("b").await.unwrap();
    assert_eq!((info.pending, info.running, info.orphaned), (10, 30, 0), "{info:?}");

    // A line is ended by its worker only.
    let first = &a[0];
    let refused = two.end(first.line, &first.run_id, "completed", "{}".into()).await.unwrap_err().to_string();
    assert!(refused.contains("no longer this worker's"), "{refused}");
    one.end(first.line, &first.run_id, "completed", "{\"v\":1}".into()).await.unwrap();
    one.end(a[1].line, &a[1].run_id, "paused", "{}".into()).await.unwrap();

    // The second worker's session ends (its process died): its lines are
    // claimed again by the next claim, with the run ids they had.
    drop(two);
    drop(other);
    let start = Instant::now();
    let mut taken = Vec::new();
    while taken.len() < b.len() {
        assert!(start.elapsed() < Duration::from_secs(20), "the lines of the gone worker came free");
        taken.extend(one.claim(15).await.unwrap().into_iter().filter(|l| l.claims == 2));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let was: BTreeMap<u64, &str> = b.iter().map(|l| (l.line, l.run_id.as_str())).collect();
    for line in &taken {
        assert_eq!(was.get(&line.line), Some(&line.run_id.as_str()), "the same run: {line:?}");
    }
    let info = queue.batch("b").await.unwrap();
    assert_eq!((info.completed, info.paused, info.orphaned), (1, 1, 0), "{info:?}");
    assert!(one.claim_paused(a[1].line).await.unwrap());
    assert!(!one.claim_paused(a[1].line).await.unwrap(), "claimed once");
    let page = queue.lines("b", 0, 5, Some("ended")).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!((page[0].line, page[0].output.as_deref()), (first.line, Some("{\"v\":1}")));
    db.drop_schema().await;
}

/// Each line: server-everything's echo, the fixture server's `slow` (a
/// global cap of 2 in flight) and `blocks` (not read-only: its arguments
/// are the line's effect in the server's log); lines over 1,900 then wait
/// in bash while the file `hold` exists.
const PROGRAM: &str = "\
    const said = await tools.call('mcp__everything__echo', {message: 'm' + input.n});\n\
    await tools.call('mcp__fx__slow', {ms: 10});\n\
    await tools.call('mcp__fx__blocks', {n: input.n});\n\
    if (input.n > 1900) await tools.bash({command: 'echo ' + input.n + ' >> holding.txt; \
      while [ -f hold ]; do sleep 0.05; done'});\n\
    return {n: input.n, said: said.content};\n";

/// The most `slow` calls running at once across every fixture server
/// process, from their spans.
fn most_at_once(ws: &Path) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for l in std::fs::read_to_string(ws.join("spans")).unwrap().lines() {
        let (start, end) = l.split_once(' ').unwrap();
        edges.push((start.parse().unwrap(), 1));
        edges.push((end.parse().unwrap(), -1));
    }
    // Ends before starts at the same instant.
    edges.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// The most `typed` starts the fixture servers saw in any one second.
fn most_starts_in_a_second(ws: &Path) -> usize {
    let mut at: Vec<f64> = std::fs::read_to_string(ws.join("starts"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_suffix(" typed").map(|t| t.parse().unwrap()))
        .collect();
    at.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut most = 0;
    let mut from = 0;
    for to in 0..at.len() {
        while at[to] - at[from] >= 1.0 {
            from += 1;
        }
        most = most.max(to - from + 1);
    }
    most
}

/// The fixture server's MCP entry (`misbehaving.py normal`) with `extra`
/// merged in (limits, `env`).
fn fixture_server(extra: Value) -> Value {
    let mut server = json!({"command": "python3", "args": [crate::mcp_support::fixture(), "normal"]});
    for (k, v) in extra.as_object().unwrap() {
        server[k] = v.clone();
    }
    server
}

/// Runs `codemode run p.js --approve allow --journal URL` with each of
/// `options` (one process each, all at once) in `ws`; each must exit 0.
fn runs_at_once(ws: &Path, url: &str, options: &[Vec<&str>]) {
    let base = ["run", "p.js", "--approve", "allow", "--journal", url];
    let runs: Vec<_> = options.iter().map(|o| crate::cli::spawn(&[&base[..], o].concat(), ws, &[])).collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
}

/// How many times the fixture server saw `blocks` for each line.
fn effects(ws: &Path) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    for l in std::fs::read_to_string(ws.join("calls")).unwrap_or_default().lines() {
        if let Some(args) = l.strip_prefix("blocks ") {
            let args: Value = serde_json::from_str(args).unwrap();
            *seen.entry(args["n"].as_u64().unwrap()).or_insert(0) += 1;
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn three_workers_one_killed_mid_batch_do_every_line_of_two_thousand_once() {
    let Some(db) = crate::journal_postgres::database("batch_workers").await else { return };
    tokio::task::block_in_place(|| three_workers_one_killed(&db.url));
    db.drop_schema().await;
}

fn three_workers_one_killed(url: &str) {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let everything = crate::mcp_support::node_server("server-everything");
    let fx = fixture_server(json!({
        "max_in_flight": 2,
        "scope": "global",
        "env": {
            "MCP_FIXTURE_CALLS": ws.join("calls").to_string_lossy(),
            "MCP_FIXTURE_SPANS": ws.join("spans").to_string_lossy(),
            "MCP_FIXTURE_STARTS": ws.join("starts").to_string_lossy(),
        },
    }));
    let mcp =
        json!({"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"]}, "fx": fx}});
    std::fs::write(ws.join("mcp.json"), mcp.to_string()).unwrap();
    std::fs::write(ws.join("p.js"), PROGRAM).unwrap();
    std::fs::write(ws.join("hold"), "").unwrap();
    let input: String = (1..=2000).map(|n| format!("{{\"n\": {n}}}\n")).collect();
    std::fs::write(ws.join("in.jsonl"), input).unwrap();
    let store = ["--journal", url];
    let submitted = codemode(
        &[&["batch", "submit", "--program", "p.js", "in.jsonl", "--batch-id", "w2k"], &store[..]].concat(),
        "",
        ws,
    );
    assert_eq!(submitted.status.code(), Some(0), "{}", text(&submitted));
    assert_eq!(String::from_utf8_lossy(&submitted.stdout), "w2k\n");
    let status = || {
        let out = codemode(&[&["batch", "status", "w2k", "--json"], &store[..]].concat(), "", ws);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(status()["not_started"], 2000);

    let work = [
        &["batch", "work", "w2k", "--parallel", "4", "--approve", "allow", "--mcp-config", "mcp.json"][..],
        &["--deadline", "900"],
        &store[..],
    ]
    .concat();
    // Each worker's stdout to a file: a pipe nobody reads would stop it.
    let worker = |i: usize| {
        let out = std::fs::File::create(ws.join(format!("worker{i}.out"))).unwrap();
        let err = std::fs::File::create(ws.join(format!("worker{i}.err"))).unwrap();
        command(&work, ws).stdin(Stdio::null()).stdout(out).stderr(err).spawn().unwrap()
    };
    let printed_by = |i: usize| json_lines(&std::fs::read(ws.join(format!("worker{i}.out"))).unwrap());
    let stderr_of = |i: usize| std::fs::read_to_string(ws.join(format!("worker{i}.err"))).unwrap();
    let mut workers: Vec<std::process::Child> = (0..3).map(worker).collect();
    // Every line up to 1,900 ends; each worker then holds four lines in bash.
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(600), "the workers got to the hold: {}", status());
        std::thread::sleep(Duration::from_millis(200));
        let holding = std::fs::read_to_string(ws.join("holding.txt")).unwrap_or_default();
        if holding.lines().count() == 12 && status()["completed"] == 1900 {
            break;
        }
        for (i, w) in workers.iter_mut().enumerate() {
            if let Ok(Some(s)) = w.try_wait() {
                panic!("a worker ended first ({s}): {}\n{}", status(), stderr_of(i));
            }
        }
    }
    let s = status();
    assert_eq!((s["running"].as_u64(), s["held"].as_bool()), (Some(12), Some(true)), "{s}");
    let mut killed = workers.remove(0);
    killed.kill().unwrap(); // SIGKILL, four lines in flight
    killed.wait().unwrap();
    // The database frees the killed worker's lock when its session ends.
    let start = Instant::now();
    while status()["orphaned"] != 4 {
        assert!(start.elapsed() < Duration::from_secs(30), "the killed worker's lines: {}", status());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::remove_file(ws.join("hold")).unwrap();

    // The other two finish their lines, the lines left, and the killed
    // worker's: recovered, each waiting for a person on its bash call,
    // which was running at the kill.
    let codes: Vec<Option<i32>> = workers.into_iter().map(|mut w| w.wait().unwrap().code()).collect();
    assert!(codes.contains(&Some(4)), "a worker reports paused lines: {codes:?}\n{}", stderr_of(1));
    let s = status();
    assert_eq!(
        (s["completed"].as_u64(), s["paused"].as_u64(), s["running"].as_u64(), s["orphaned"].as_u64()),
        (Some(1996), Some(4), Some(0), Some(0)),
        "{s}"
    );
    let printed: Vec<Value> = [1, 2].into_iter().flat_map(printed_by).collect();
    assert!(printed.iter().all(|l| l["status"] != "failed"), "{printed:?}");
    let paused: Vec<&Value> = printed.iter().filter(|l| l["status"] == "paused").collect();
    assert_eq!(paused.len(), 4, "{printed:?}");
    for l in &paused {
        assert_eq!(l["recovered"], true, "{l}");
        assert_eq!(l["pending"][0]["tool"], "bash", "{l}");
        let seq = l["pending"][0]["seq"].to_string();
        let run_id = l["run_id"].as_str().unwrap();
        let approved = codemode(&[&["approve", run_id, "--allow", &seq], &store[..]].concat(), "", ws);
        assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    }
    // A fourth worker resumes the decided lines; nothing else runs.
    let last = codemode(&work, "", ws);
    assert_eq!(last.status.code(), Some(0), "{}", text(&last));
    let resumed = json_lines(&last.stdout);
    assert_eq!(resumed.len(), 4, "{}", text(&last));

    // Every line completed once, by one worker; no effect repeated.
    let completed: Vec<u64> = printed_by(0)
        .iter()
        .chain(&printed)
        .chain(&resumed)
        .filter(|l| l["status"] == "completed")
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    let mut sorted = completed.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=2000).collect::<Vec<_>>(), "each line completed once");
    let seen = effects(ws);
    assert_eq!(seen.len(), 2000);
    assert!(
        seen.values().all(|&n| n == 1),
        "an effect repeated: {:?}",
        seen.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    // The global cap held across the three workers' server processes
    // (each worker alone would allow 2 at once, so 6 together).
    assert_eq!(most_at_once(ws), 2, "a global cap of 2 calls in flight");

    // `batch results` prints every line in order.
    let results = codemode(&[&["batch", "results", "w2k"], &store[..]].concat(), "", ws);
    assert_eq!(results.status.code(), Some(0), "{}", text(&results));
    let results = json_lines(&results.stdout);
    let numbers: Vec<u64> = results.iter().map(|l| l["line"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (1..=2000).collect::<Vec<_>>());
    for l in &results {
        let n = l["line"].as_u64().unwrap();
        assert_eq!(
            (&l["value"]["n"], &l["value"]["said"]),
            (&json!(n), &json!(format!("Echo: m{n}"))),
            "{l}"
        );
    }
}

/// Three `codemode run` processes, each making 20 calls of the fixture's
/// `typed` at once under a global rate of 10 a second (`[tools.NAME]
/// scope = "global"`, kept in the store): the three servers together see
/// at most 11 starts in any second (a burst of one, and a little room for
/// the way from each process to its server), where each process alone
/// would allow 10, so 30 together.
#[tokio::test(flavor = "multi_thread")]
async fn a_global_rate_holds_across_processes() {
    let Some(db) = crate::journal_postgres::database("global_rate").await else { return };
    tokio::task::block_in_place(|| {
        let ws = crate::common::workspace();
        let ws = ws.path();
        let fx = fixture_server(json!({"env": {"MCP_FIXTURE_STARTS": ws.join("starts").to_string_lossy()}}));
        std::fs::write(ws.join("mcp.json"), json!({"mcpServers": {"fx": fx}}).to_string()).unwrap();
        std::fs::write(ws.join("policy.toml"), "[tools.mcp__fx__typed]\nrate = 10\nscope = \"global\"\n")
            .unwrap();
        let program =
            "await Promise.all(Array.from({length: 20}, () => tools.call('mcp__fx__typed', {}))); return 1";
        std::fs::write(ws.join("p.js"), program).unwrap();
        let options = vec!["--mcp-config", "mcp.json", "--config", "policy.toml"];
        runs_at_once(ws, &db.url, &[options.clone(), options.clone(), options]);
        let most = most_starts_in_a_second(ws);
        assert!(most <= 13, "a global rate of 10 a second: {most} starts in one second");
        // Without the global rate, three processes would start their 60
        // calls within a second or two of each other.
        let starts = std::fs::read_to_string(ws.join("starts")).unwrap();
        assert_eq!(starts.lines().filter(|l| l.ends_with(" typed")).count(), 60);
    });
    db.drop_schema().await;
}

/// A global cap of one shared by two processes, each with 20 calls
/// waiting: the slot goes back and forth between them instead of staying
/// with the process that had it first (each process's server logs its own
/// calls' spans).
#[tokio::test(flavor = "multi_thread")]
async fn a_global_slot_is_shared_fairly_between_processes() {
    let Some(db) = crate::journal_postgres::database("global_fair").await else { return };
    tokio::task::block_in_place(|| {
        let ws = crate::common::workspace();
        let ws = ws.path();
        for p in ["a", "b"] {
            let fx = fixture_server(json!({
                "max_in_flight": 1,
                "scope": "global",
                "env": {"MCP_FIXTURE_SPANS": ws.join(format!("spans_{p}")).to_string_lossy()},
            }));
            std::fs::write(ws.join(format!("mcp_{p}.json")), json!({"mcpServers": {"fx": fx}}).to_string())
                .unwrap();
        }
        let program = "await Promise.all(Array.from({length: 20}, () => tools.call('mcp__fx__slow', {ms: 30}))); return 1";
        std::fs::write(ws.join("p.js"), program).unwrap();
        runs_at_once(ws, &db.url, &[vec!["--mcp-config", "mcp_a.json"], vec!["--mcp-config", "mcp_b.json"]]);
        let starts = |p: &str| -> Vec<f64> {
            let text = std::fs::read_to_string(ws.join(format!("spans_{p}"))).unwrap();
            text.lines().map(|l| l.split_once(' ').unwrap().0.parse().unwrap()).collect()
        };
        let (a, b) = (starts("a"), starts("b"));
        assert_eq!((a.len(), b.len()), (20, 20));
        // The first 20 calls, by start, were not all one process's.
        let mut all: Vec<(f64, char)> =
            a.iter().map(|t| (*t, 'a')).chain(b.iter().map(|t| (*t, 'b'))).collect();
        all.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let first: String = all.iter().take(20).map(|(_, p)| *p).collect();
        assert!(first.contains('a') && first.contains('b'), "the slot stayed with one process: {first}");
    });
    db.drop_schema().await;
}

/// Lines that failed (a worker without the tool the program needs, here a
/// file the program reads) are put back by `batch retry` and run anew by
/// the next worker; a line too big to be a program's input is refused at
/// submit, with nothing submitted; a line whose paused run was resumed by
/// hand is recorded by the next worker from its run.
#[tokio::test(flavor = "multi_thread")]
async fn failed_lines_are_retried_and_a_line_resumed_by_hand_is_recorded() {
    let Some(db) = crate::journal_postgres::database("batch_retry").await else { return };
    tokio::task::block_in_place(|| {
        let ws = crate::common::workspace();
        let ws = ws.path();
        let store = ["--journal", db.url.as_str()];
        let with = |args: &[&str]| codemode(&[args, &store[..]].concat(), "", ws);
        std::fs::write(
            ws.join("p.js"),
            "if (input.n === 2) await tools.read({path: 'needed.txt'});\n\
             if (input.n === 3) await tools.write({path: 'out.txt', content: 'x'});\n\
             return input.n;\n",
        )
        .unwrap();
        std::fs::write(ws.join("in.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n").unwrap();
        let big = format!("{{\"n\": 1, \"pad\": \"{}\"}}\n", "x".repeat(1 << 20));
        std::fs::write(ws.join("big.jsonl"), format!("{{\"n\": 1}}\n{big}")).unwrap();
        let refused = with(&["batch", "submit", "--program", "p.js", "big.jsonl", "--batch-id", "big"]);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(text(&refused).contains("line 2: is 1048"), "{}", text(&refused));
        assert!(with(&["batch", "status", "big"]).status.code() == Some(2), "nothing was submitted");

        let submitted = with(&["batch", "submit", "--program", "p.js", "in.jsonl", "--batch-id", "r3"]);
        assert_eq!(submitted.status.code(), Some(0), "{}", text(&submitted));
        // Line 2 fails (no needed.txt); line 3's write pauses for a person.
        let first = with(&["batch", "work", "r3", "--approve", "pause"]);
        assert_eq!(first.status.code(), Some(1), "{}", text(&first));
        let printed = json_lines(&first.stdout);
        let paused = printed.iter().find(|l| l["line"] == 3).unwrap();
        assert_eq!(paused["status"], "paused", "{paused}");
        // A person allows the write and resumes the run by hand, on
        // another machine (another state folder: the worker's runs folder
        // keeps the receipt saved when the run paused).
        let run_id = paused["run_id"].as_str().unwrap();
        let seq = paused["pending"][0]["seq"].to_string();
        assert_eq!(with(&["approve", run_id, "--allow", &seq]).status.code(), Some(0));
        let elsewhere = tempfile::tempdir().unwrap();
        let args = [&["resume", run_id, "--approve", "allow"][..], &store[..]].concat();
        let resumed =
            crate::cli::spawn(&args, ws, &[("XDG_STATE_HOME", elsewhere.path())]).wait_with_output().unwrap();
        assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));

        std::fs::write(ws.join("needed.txt"), "here").unwrap();
        let retried = with(&["batch", "retry", "r3"]);
        assert_eq!(retried.status.code(), Some(0), "{}", text(&retried));
        assert!(text(&retried).contains("1 line back to run (2)"), "{}", text(&retried));
        let second = with(&["batch", "work", "r3", "--approve", "allow"]);
        assert_eq!(second.status.code(), Some(0), "{}", text(&second));
        let mut done: Vec<u64> =
            json_lines(&second.stdout).iter().map(|l| l["line"].as_u64().unwrap()).collect();
        done.sort_unstable();
        assert_eq!(done, [2, 3], "the retried line, and the line resumed by hand: {}", text(&second));
        let results = json_lines(&with(&["batch", "results", "r3"]).stdout);
        assert!(results.iter().all(|l| l["status"] == "completed"), "{results:?}");
        // The line resumed elsewhere has no receipt here: its status is
        // the store's, its value in that receipt (`codemode runs show`).
        assert!(results.iter().filter(|l| l["line"] != 3).all(|l| l["value"] == l["line"]), "{results:?}");
        assert_eq!(results[2]["error"]["kind"], "unrecorded", "{results:?}");
        assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "x", "the write made once");
    });
    db.drop_schema().await;
}
