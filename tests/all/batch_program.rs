//! `codemode batch --program` through the real binary (docs/BATCH.md, "A
//! program over many inputs"): a program run once per input line against
//! server-everything, `--ordered`, a failing line named, `batch status`,
//! and a batch SIGKILLed halfway and started again with its id, which
//! does only the lines left (effects counted in a file), recovers the
//! lines whose runs were interrupted, and resumes them once a person
//! decided their calls.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::{codemode, spawn};

/// The JSON lines of stdout.
fn lines(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn text(out: &std::process::Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `{"n": 1}` ... `{"n": count}`, one per line.
fn inputs(ws: &Path, count: usize) {
    let text: String = (1..=count).map(|n| format!("{{\"n\": {n}}}\n")).collect();
    std::fs::write(ws.join("in.jsonl"), text).unwrap();
}

/// The numbers count.txt holds, sorted.
fn counted(ws: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(ws.join("count.txt")).unwrap_or_default();
    let mut n: Vec<u64> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
    n.sort_unstable();
    n
}

fn status(ws: &Path, id: &str) -> Value {
    status_in(ws, id, &[])
}

/// `batch status ID --json` with the options `store`.
fn status_in(ws: &Path, id: &str, store: &[&str]) -> Value {
    let out = codemode(&[&["batch", "status", id, "--json"], store].concat(), "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_program_batch_over_server_everything_prints_every_line_in_order() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let server = crate::mcp_support::node_server("server-everything");
    let mcp =
        serde_json::json!({"mcpServers": {"everything": {"command": "node", "args": [server, "stdio"]}}});
    std::fs::write(ws.join("mcp.json"), mcp.to_string()).unwrap();
    std::fs::write(ws.join("policy.toml"), "[rules]\nallow = [\"mcp_connect__everything\"]\n").unwrap();
    std::fs::write(
        ws.join("echo.js"),
        "if (input.n === 7) throw new Error('no seven');\n\
         const r = await tools.call('mcp__everything__echo', {message: 'm' + input.n});\n\
         return {n: input.n, said: r.content};\n",
    )
    .unwrap();
    inputs(ws, 300);
    let args = [
        "batch",
        "--program",
        "echo.js",
        "in.jsonl",
        "--mcp-config",
        "mcp.json",
        "--config",
        "policy.toml",
        "--ordered",
        "--parallel",
        "12",
        "--batch-id",
        "echo-300",
    ];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(1), "a line failed: {}", text(&out));
    let printed = lines(&out);
    let numbers: Vec<u64> = printed.iter().map(|l| l["line"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (1..=300).collect::<Vec<_>>(), "--ordered: input order");
    for l in &printed {
        let n = l["line"].as_u64().unwrap();
        assert!(l["run_id"].as_str().unwrap().starts_with("run-"), "{l}");
        if n == 7 {
            assert_eq!(l["status"], "failed", "{l}");
            assert!(l["error"]["message"].as_str().unwrap().contains("no seven"), "{l}");
        } else {
            assert_eq!(l["status"], "completed", "{l}");
            assert_eq!(l["value"]["said"], format!("Echo: m{n}"), "{l}");
        }
    }
    let runs: std::collections::HashSet<&str> =
        printed.iter().map(|l| l["run_id"].as_str().unwrap()).collect();
    assert_eq!(runs.len(), 300, "a run per line");
    let s = status(ws, "echo-300");
    assert_eq!(
        (s["lines"].as_u64(), s["completed"].as_u64(), s["failed"].as_u64()),
        (Some(300), Some(299), Some(1))
    );
    assert_eq!(
        (s["running"].as_u64(), s["not_started"].as_u64(), s["held"].as_bool()),
        (Some(0), Some(0), Some(false))
    );
    let shown = codemode(&["batch", "status", "echo-300"], "", ws);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("300/300 lines done (299 completed, 1 failed)"),
        "{}",
        text(&shown)
    );
    // Started again, a finished batch runs nothing.
    let again = codemode(&args, "", ws);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(lines(&again).is_empty(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("300 done before, 0 to run"), "{}", text(&again));
}

/// Each line adds its number to count.txt; lines over 20 then say so in
/// holding.txt and wait while the file `hold` exists.
const COUNTING: &str = "await tools.bash({command: 'echo ' + input.n + ' >> count.txt'});\n\
    if (input.n > 20) await tools.bash({command: 'echo ' + input.n + ' >> holding.txt; \
      while [ -f hold ]; do sleep 0.05; done'});\n\
    return input.n;\n";

#[test]
fn a_killed_program_batch_started_again_does_only_the_lines_left() {
    killed_and_started_again(&[]);
}

/// The same with the runs' journals in PostgreSQL (the batch's record
/// stays a local file).
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_program_batch_with_runs_in_postgres_started_again_does_only_the_lines_left() {
    let Some(db) = crate::journal_postgres::database("batch_kill").await else { return };
    tokio::task::block_in_place(|| killed_and_started_again(&["--journal", &db.url]));
    db.drop_schema().await;
}

/// Kills a 60-line batch with lines 21-24 running, starts it again, lets
/// a person allow the calls the kill interrupted, starts it again; `store`
/// (a `--journal`) goes with every command.
fn killed_and_started_again(store: &[&str]) {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let status = |ws: &Path, id: &str| status_in(ws, id, store);
    std::fs::write(ws.join("count.js"), COUNTING).unwrap();
    std::fs::write(ws.join("hold"), "").unwrap();
    inputs(ws, 60);
    let batch = ["batch", "--program", "count.js", "in.jsonl", "--approve", "allow", "--parallel", "4"];
    let args = [&batch[..], &["--batch-id", "b60"], store].concat();
    let mut child = spawn(&args, ws, &[]);
    // Lines 1-20 end; lines 21-24 each counted and inside their wait.
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(90), "the batch got halfway: {:?}", counted(ws));
        std::thread::sleep(Duration::from_millis(50));
        let holding = std::fs::read_to_string(ws.join("holding.txt")).unwrap_or_default();
        let ready = counted(ws).len() == 24
            && holding.lines().count() == 4
            && Path::new(&crate::common::runs_dir(ws)).join(".batches/b60.jsonl").exists()
            && status(ws, "b60")["completed"] == 20;
        if ready {
            break;
        }
        if let Ok(Some(s)) = child.try_wait() {
            panic!("the batch ended first ({s}): {}", text(&child.wait_with_output().unwrap()));
        }
    }
    let held = status(ws, "b60");
    assert_eq!((held["held"].as_bool(), held["running"].as_u64()), (Some(true), Some(4)), "{held}");
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    assert_eq!(status(ws, "b60")["held"], false);
    std::fs::remove_file(ws.join("hold")).unwrap();

    // Started again: lines 25-60 run; 21-24 are recovered, and each waits
    // for a person on the call that was running at the kill.
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(4), "lines paused: {}", text(&out));
    assert_eq!(counted(ws), (1..=60).collect::<Vec<_>>(), "each line counted once: {}", text(&out));
    let printed = lines(&out);
    assert_eq!(printed.len(), 40, "{}", text(&out));
    let paused: Vec<&Value> = printed.iter().filter(|l| l["status"] == "paused").collect();
    let mut paused_lines: Vec<u64> = paused.iter().map(|l| l["line"].as_u64().unwrap()).collect();
    paused_lines.sort_unstable();
    assert_eq!(paused_lines, [21, 22, 23, 24], "{}", text(&out));
    for l in &paused {
        assert_eq!(l["recovered"], true, "{l}");
        assert_eq!(l["pending"][0]["seq"], 2, "{l}");
    }
    assert!(printed.iter().filter(|l| l["status"] == "completed").all(|l| l["line"].as_u64() > Some(24)));

    // A person allows the waiting calls; the batch started again resumes
    // those lines, and nothing else runs.
    for l in &paused {
        let run_id = l["run_id"].as_str().unwrap();
        let approved = codemode(&[&["approve", run_id, "--allow", "2"], store].concat(), "", ws);
        assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    }
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = lines(&out);
    let mut done: Vec<u64> = printed.iter().map(|l| l["line"].as_u64().unwrap()).collect();
    done.sort_unstable();
    assert_eq!(done, [21, 22, 23, 24], "{}", text(&out));
    assert!(printed.iter().all(|l| l["status"] == "completed" && l["value"] == l["line"]), "{}", text(&out));
    assert_eq!(counted(ws), (1..=60).collect::<Vec<_>>(), "still each line once");
    let s = status(ws, "b60");
    assert_eq!(
        (s["completed"].as_u64(), s["paused"].as_u64(), s["running"].as_u64()),
        (Some(60), Some(0), Some(0))
    );
}

#[test]
fn a_program_batch_refuses_a_changed_program_under_the_same_id() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("p.js"), "return input;").unwrap();
    inputs(ws, 3);
    let args = ["batch", "--program", "p.js", "in.jsonl", "--batch-id", "same"];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(lines(&out).len(), 3);
    std::fs::write(ws.join("p.js"), "return 1;").unwrap();
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the program"), "{}", text(&out));
    let out = codemode(&["batch", "status", "nope"], "", ws);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no batch nope"), "{}", text(&out));
}

/// Each line writes its own file, then the same file with the same text.
const WRITES: &str = "await tools.write({path: 'out' + input.n + '.txt', content: 'x'});\n\
    await tools.write({path: 'same.txt', content: 'same'});\n\
    return input.n;\n";

#[test]
fn a_question_identical_in_many_lines_is_asked_once() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("w.js"), WRITES).unwrap();
    let asked = ws.join("asked.jsonl");
    let script = ws.join("approver.sh");
    std::fs::write(
        &script,
        format!("cat >> {0}; echo >> {0}; echo '{{\"decision\": \"allow\"}}'\n", asked.display()),
    )
    .unwrap();
    inputs(ws, 12);
    let approve = format!("cmd:sh {}", script.display());
    let args = [
        "batch",
        "--program",
        "w.js",
        "in.jsonl",
        "--posture",
        "ask",
        "--approve",
        &approve,
        "--batch-id",
        "asks",
    ];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(lines(&out).len(), 12);
    let questions: Vec<Value> = std::fs::read_to_string(&asked)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let same = questions.iter().filter(|q| q["arguments"]["path"] == "same.txt").count();
    assert_eq!((questions.len(), same), (13, 1), "each distinct question once: {questions:?}");
    assert!(questions.iter().all(|q| q["batch"] == "asks"), "{questions:?}");
    assert_eq!(std::fs::read_to_string(ws.join("same.txt")).unwrap(), "same");
}

/// The prompt's `a` reaches every run of the batch: asked once for 5
/// lines' writes.
#[test]
#[cfg(unix)]
fn a_at_the_prompt_allows_the_rest_of_the_batch() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(
        ws.join("w.js"),
        "await tools.write({path: 'o' + input.n + '.txt', content: 'x'}); return 1;",
    )
    .unwrap();
    inputs(ws, 5);
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let out = std::process::Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .args([driver, "a", env!("CARGO_BIN_EXE_codemode"), "batch", "--program", "w.js", "in.jsonl"])
        .args(["--posture", "ask", "--parallel", "2"])
        .current_dir(ws)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert_eq!(shown.matches("approve?").count(), 1, "{shown}");
    assert!(shown.contains("a: allows every `write` call of this batch (all its runs)"), "{shown}");
    for n in 1..=5 {
        assert!(ws.join(format!("o{n}.txt")).exists(), "{shown}");
    }
}

/// `--approve pause`: each line needing a decision pauses (exit 4) and the
/// others go on; a person decides with `codemode approve`, and the batch
/// started again resumes exactly those lines.
#[test]
fn paused_lines_are_decided_with_approve_and_resumed_by_a_restart() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(
        ws.join("p.js"),
        "if (input.n % 2) return 'read only';\n\
         await tools.write({path: 'f' + input.n + '.txt', content: 'x'});\n\
         return 'wrote';\n",
    )
    .unwrap();
    inputs(ws, 6);
    let args = [
        "batch",
        "--program",
        "p.js",
        "in.jsonl",
        "--posture",
        "ask",
        "--approve",
        "pause",
        "--batch-id",
        "pz",
    ];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("batch pz: 3/6 lines done (0 failed), 3 paused"), "{stderr}");
    let printed = lines(&out);
    let mut paused: Vec<&Value> = printed.iter().filter(|l| l["status"] == "paused").collect();
    paused.sort_by_key(|l| l["line"].as_u64());
    assert_eq!(paused.len(), 3, "{}", text(&out));
    assert!(
        paused.iter().all(|l| l["line"].as_u64().unwrap() % 2 == 0 && l["pending"][0]["tool"] == "write")
    );
    assert_eq!(status(ws, "pz")["paused"], 3);
    // Decided: line 2 allowed, line 4 denied; line 6 left undecided.
    for (l, decision) in paused.iter().zip(["--allow", "--deny"]) {
        let run_id = l["run_id"].as_str().unwrap();
        let seq = l["pending"][0]["seq"].to_string();
        let approved = codemode(&["approve", run_id, decision, &seq], "", ws);
        assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    }
    let out = codemode(&[&args[..], &["-q"]].concat(), "", ws);
    let again = lines(&out);
    let by =
        |n: u64| again.iter().find(|l| l["line"] == n).unwrap_or_else(|| panic!("line {n}: {}", text(&out)));
    assert_eq!((by(2)["status"].as_str(), by(2)["value"].as_str()), (Some("completed"), Some("wrote")));
    assert_eq!(by(4)["status"], "failed", "denied, uncaught: {}", by(4));
    assert_eq!(by(6)["status"], "paused", "still undecided");
    assert_eq!(again.len(), 3, "only the paused lines: {}", text(&out));
    assert!(ws.join("f2.txt").exists() && !ws.join("f4.txt").exists() && !ws.join("f6.txt").exists());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("lines done"), "-q: no progress");
}

#[test]
fn run_input_is_the_programs_global_input() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let out = codemode(&["run", "-", "--input", r#"{"a": [1, 2]}"#], "return input.a[1] + 40;", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
    let out = codemode(&["run", "-"], "return typeof input;", ws);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"undefined\"", "{}", text(&out));
    // Without one, `input` is there and undefined, not an unknown name.
    let out = codemode(&["run", "-"], "return input ?? 'none';", ws);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"none\"", "{}", text(&out));
    let out = codemode(&["run", "-", "--input", "{oops"], "return 1;", ws);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not JSON"), "{}", text(&out));
    // An input over 1 MiB (a batch line): refused before the program starts.
    let big = serde_json::to_string(&"x".repeat((1 << 20) + 1)).unwrap();
    std::fs::write(ws.join("big.jsonl"), format!("{big}\n\"small\"\n")).unwrap();
    std::fs::write(ws.join("len.js"), "return input.length;").unwrap();
    let out = codemode(&["batch", "--program", "len.js", "big.jsonl", "--ordered"], "", ws);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let printed = lines(&out);
    assert_eq!(
        (printed[0]["status"].as_str(), printed[0]["error"]["kind"].as_str()),
        (Some("failed"), Some("limit"))
    );
    assert_eq!(printed[1]["value"], 5);
}

#[test]
fn the_readme_example_runs_a_program_over_the_messages() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = tempfile::tempdir().unwrap();
    let ws_arg = ws.path().to_string_lossy().into_owned();
    let args = [
        "batch",
        "--program",
        "examples/batch/shout.js",
        "examples/batch/messages.jsonl",
        "--mcp-config",
        "examples/batch/mcp.json",
        "--config",
        "examples/batch/codemode.toml",
        "--ordered",
        "--workspace",
        &ws_arg,
    ];
    let out = codemode(&args, "", root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = lines(&out);
    assert_eq!(
        printed[0]["value"],
        serde_json::json!({"message": "one", "echoed": "Echo: one", "loud": "ONE"})
    );
    assert!(printed.iter().all(|l| l["status"] == "completed"), "{}", text(&out));
}

/// Without a terminal, a count line every few seconds while lines end.
#[test]
fn without_a_terminal_progress_is_a_count_line_every_few_seconds() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("slow.js"), "await tools.bash({command: 'sleep 2.2'}); return input.n;").unwrap();
    inputs(ws, 4);
    let args = [
        "batch",
        "--program",
        "slow.js",
        "in.jsonl",
        "--approve",
        "allow",
        "--parallel",
        "1",
        "--batch-id",
        "slow",
    ];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let counts: Vec<&str> = stderr.lines().filter(|l| l.contains("lines done")).collect();
    assert!(counts.len() >= 2, "a line on the way and one at the end: {stderr}");
    assert!(counts[0].contains("lines/s") && counts[0].contains("ETA"), "{stderr}");
    assert!(counts.last().unwrap().contains("batch slow: 4/4 lines done (0 failed), 0 paused"), "{stderr}");
}

/// The record cut where a kill can cut it: a line whose run ended before
/// its `end` line takes its output from the run's receipt and does not run
/// again; a line whose run never made a journal runs anew.
#[test]
fn a_line_ended_but_unrecorded_is_taken_from_its_receipt_not_run_again() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(
        ws.join("c.js"),
        "await tools.bash({command: 'echo ' + input.n + ' >> count.txt'}); return input.n;",
    )
    .unwrap();
    inputs(ws, 4);
    let args = ["batch", "--program", "c.js", "in.jsonl", "--approve", "allow", "--batch-id", "cut"];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let path = crate::common::runs_dir(ws).join(".batches/cut.jsonl");
    let record = std::fs::read_to_string(&path).unwrap();
    let entries: Vec<Value> = record.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let start_of = |n: u64| entries.iter().find(|e| e["t"] == "start" && e["line"] == n).unwrap().to_string();
    let end_of = |n: u64| entries.iter().find(|e| e["t"] == "end" && e["line"] == n).unwrap().to_string();
    // Line 1 done; line 2 started and ended, its end not recorded; line 3
    // started under a run that never made a journal; line 4 never started.
    let never = r#"{"t":"start","line":3,"run_id":"run-20260101T000000Z-00000000"}"#;
    let cut =
        [entries[0].to_string(), start_of(1), end_of(1), start_of(2), never.to_owned()].join("\n") + "\n";
    std::fs::write(&path, cut).unwrap();

    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = lines(&out);
    let mut got: Vec<u64> = printed.iter().map(|l| l["line"].as_u64().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, [2, 3, 4], "{}", text(&out));
    let two = printed.iter().find(|l| l["line"] == 2).unwrap();
    assert_eq!(
        (two["status"].as_str(), two["value"].as_u64(), two["recovered"].as_bool()),
        (Some("completed"), Some(2), Some(true))
    );
    assert_eq!(counted(ws), [1, 2, 3, 3, 4, 4], "line 2 not run again; 3 and 4 ran");
    assert_eq!(status(ws, "cut")["completed"], 4);
}

/// A line's error carries where in the program it is, as `codemode run`
/// says it: an uncaught throw's line and column.
#[test]
fn a_lines_error_names_its_line_and_column() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("throws.js"), "const a = 1;\nthrow new Error('bad ' + input.n);\n").unwrap();
    inputs(ws, 2);
    let out = codemode(&["batch", "--program", "throws.js", "in.jsonl"], "", ws);
    let lines = lines(&out);
    assert_eq!(lines.len(), 2, "{}", text(&out));
    for line in &lines {
        let error = &line["error"];
        assert_eq!((&error["kind"], &error["line"]), (&Value::from("exception"), &Value::from(2)), "{line}");
        assert!(error["column"].as_u64().is_some(), "{line}");
    }
}

/// A program every line's run would fail at its start (a syntax error,
/// an unknown tool named literally) is refused before any line runs,
/// once, saying where: not run, journaled and failed once per line.
#[test]
fn a_program_that_cannot_run_is_refused_before_any_line() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    inputs(ws, 3);
    for (program, says) in [
        ("const a = 1;\nreturn input.n +\n", "(syntax at line "),
        ("return await tools.reed({path: 'a.txt'});\n", "(admission at line 1"),
    ] {
        std::fs::write(ws.join("bad.js"), program).unwrap();
        let out = codemode(&["batch", "--program", "bad.js", "in.jsonl"], "", ws);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says) && err.contains("no line was run"), "{err}");
        assert!(out.stdout.is_empty(), "{}", text(&out));
    }
    let runs = crate::common::runs_dir(ws);
    let made = std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(made, 0, "runs were made in {}", runs.display());
}
