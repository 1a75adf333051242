//! `codemode batch` through the real binary: JSON Lines in, one line per
//! item out, bad lines skipped, fail-fast, approvals, exit codes, and the
//! example that batches server-everything's `echo`.

use serde_json::Value;

use crate::cli::codemode;

/// The JSON lines of stdout.
fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn by_line(out: &[Value], line: u64) -> &Value {
    out.iter().find(|v| v["line"] == line).unwrap_or_else(|| panic!("no output for line {line}: {out:?}"))
}

#[test]
fn a_bad_line_in_the_middle_is_reported_and_skipped() {
    let ws = crate::common::workspace();
    let input = concat!(
        "{\"tool\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n",
        "{\"tool\": \"read\", \"arguments\": {\"path\": \"docs/guide.md\"}}\n",
        "{\"tool\": \"read\", \"arguments\": [\"a.txt\"]}\n",
        "\n",
        "this is not json\n",
        "{\"tool\": \"file_search\", \"arguments\": {\"query\": \"*.md\"}}\n",
    );
    let out = codemode(&["batch", "-", "--approve", "deny", "--json"], input, ws.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let printed = lines(&out.stdout);
    // Two bad lines, three items, and the receipt last.
    assert_eq!(printed.len(), 6, "{printed:?}");
    let bad = by_line(&printed, 3);
    assert_eq!(bad["status"], "invalid");
    assert_eq!(bad["error"]["message"], "arguments: must be an object, got a list");
    assert!(by_line(&printed, 5)["error"]["message"].as_str().unwrap().starts_with("is not JSON"));
    assert!(
        stderr.contains("line 3: arguments: must be an object") && stderr.contains("line 5: is not JSON")
    );
    assert!(by_line(&printed, 1)["content"].as_str().unwrap().contains("alpha"));
    assert_eq!(by_line(&printed, 2)["index"], 1);
    let last = by_line(&printed, 6);
    assert_eq!((last["index"].as_u64(), last["seq"].as_u64()), (Some(2), Some(3)));
    assert_eq!(last["content"], serde_json::json!(["docs/guide.md"]));
    assert_eq!(last["status"], "ok");
    assert_eq!(last["decision"], "auto");
    let receipt = printed.last().unwrap();
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["calls"].as_array().unwrap().len(), 3);
    assert!(stderr.contains("completed") && stderr.contains("3 calls"), "{stderr}");
}

#[test]
fn with_tool_each_line_is_the_arguments_and_all_ok_exits_0() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("paths.jsonl"), "{\"path\": \"a.txt\"}\n{\"path\": \"docs/guide.md\"}\n")
        .unwrap();
    let out = codemode(&["batch", "paths.jsonl", "--tool", "read", "--concurrency", "1"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = lines(&out.stdout);
    assert_eq!(printed.len(), 2);
    assert!(printed.iter().all(|l| l["tool"] == "read" && l["status"] == "ok"));
    // Without a terminal, progress is a plain count line on stderr, once.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("codemode: batch: 2/2 items done, 0 not ok").count(), 1, "{stderr}");
    // A line that is not an object is bad under --tool.
    let out = codemode(&["batch", "-", "--tool", "read"], "\"a.txt\"\n", ws.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(lines(&out.stdout)[0]["error"]["message"], "arguments: must be an object, got a string");
}

#[test]
fn fail_fast_starts_nothing_after_the_first_failure() {
    let ws = crate::common::workspace();
    let input =
        "{\"path\": \"a.txt\"}\n{\"path\": \"missing.txt\"}\n{\"path\": \"a.txt\"}\n{\"path\": \"a.txt\"}\n";
    let args = ["batch", "-", "--tool", "read", "--concurrency", "1", "--approve", "deny"];
    let out = codemode(&[&args[..], &["--fail-fast", "--json"]].concat(), input, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let printed = lines(&out.stdout);
    assert_eq!(by_line(&printed, 2)["status"], "failed");
    for line in [3, 4] {
        let item = by_line(&printed, line);
        assert_eq!(item["status"], "not_started");
        assert_eq!(item["seq"], Value::Null);
        assert_eq!(item["error"]["kind"], "not_started");
    }
    assert_eq!(printed.last().unwrap()["calls"].as_array().unwrap().len(), 2);
    // The count on stderr says which items never started, not "4/4 done".
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("batch: 2/4 items done, 1 not ok, 2 not started"), "{stderr}");

    // Without it every item runs.
    let out = codemode(&args, input, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let printed = lines(&out.stdout);
    assert!([1, 3, 4].iter().all(|&l| by_line(&printed, l)["status"] == "ok"), "{printed:?}");
}

#[test]
fn a_denied_item_is_reported_and_the_batch_goes_on() {
    let ws = crate::common::workspace();
    let input = concat!(
        "{\"tool\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n",
        "{\"tool\": \"write\", \"arguments\": {\"path\": \"new.txt\", \"content\": \"x\"}}\n",
        "{\"tool\": \"read\", \"arguments\": {\"path\": \"docs/guide.md\"}}\n",
    );
    // Posture ask (the default): the write goes to the approver, which denies.
    let out = codemode(&["batch", "-", "--approve", "deny", "--concurrency", "1"], input, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let printed = lines(&out.stdout);
    let denied = by_line(&printed, 2);
    assert_eq!((&denied["status"], &denied["decision"]), (&Value::from("refused"), &Value::from("denied")));
    assert_eq!(denied["error"]["kind"], "denied");
    assert_eq!(by_line(&printed, 3)["status"], "ok");
    assert!(!ws.path().join("new.txt").exists());

    // --approve allow lets it through.
    let out = codemode(&["batch", "-", "--approve", "allow"], input, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(by_line(&lines(&out.stdout), 2)["decision"], "approved");
    assert!(ws.path().join("new.txt").exists());
}

/// The prompt reads its answers from the controlling terminal, so a batch
/// read from stdin can still be approved at the terminal.
#[cfg(unix)]
#[test]
fn the_prompt_approver_shares_the_terminal_with_input_on_stdin() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("input.jsonl"),
        "{\"tool\": \"write\", \"arguments\": {\"path\": \"new.txt\", \"content\": \"x\"}}\n",
    )
    .unwrap();
    let line = format!("exec '{}' batch - --approve prompt < input.jsonl", env!("CARGO_BIN_EXE_codemode"));
    let out = std::process::Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args([driver, "y", "sh", "-c", &line])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("approve?"), "{shown}");
    assert_eq!(std::fs::read_to_string(ws.path().join("new.txt")).unwrap(), "x");
}

#[test]
fn the_deadline_ends_the_batch_with_exit_3() {
    let ws = crate::common::workspace();
    let input = "{\"tool\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n\
                 {\"tool\": \"bash\", \"arguments\": {\"command\": \"sleep 30\"}}\n";
    let args = ["batch", "-", "--posture", "full-access", "--deadline", "0.5", "--json"];
    let out = codemode(&args, input, ws.path());
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = lines(&out.stdout);
    assert_eq!(by_line(&printed, 1)["status"], "ok");
    assert_eq!(by_line(&printed, 2)["status"], "in_flight");
    let receipt = printed.last().unwrap();
    assert_eq!(receipt["status"], "timed_out");
    assert_eq!(receipt["calls"][1]["status"], "in_flight");
}

#[test]
fn the_example_batches_server_everything_echo() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = tempfile::tempdir().unwrap();
    let ws_arg = ws.path().to_string_lossy().into_owned();
    let args = [
        "batch",
        "examples/batch/echo.jsonl",
        "--mcp-config",
        "examples/batch/mcp.json",
        "--config",
        "examples/batch/codemode.toml",
        "--workspace",
        &ws_arg,
    ];
    let out = codemode(&args, "", root);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = lines(&out.stdout);
    assert_eq!(printed.len(), 5);
    assert_eq!(by_line(&printed, 1)["content"], "Echo: alpha");
    assert_eq!(by_line(&printed, 4)["content"], "The sum of 2 and 40 is 42.");
    assert_eq!(by_line(&printed, 5)["content"], "Echo: delta");
}

#[test]
fn a_byte_order_mark_is_skipped_and_empty_input_is_a_bad_invocation() {
    let ws = crate::common::workspace();
    let input = "\u{feff}{\"tool\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n";
    let out = codemode(&["batch", "-"], input, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lines(&out.stdout)[0]["status"], "ok");
    let out = codemode(&["batch", "-"], "\n\n", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no calls"));
}

/// The input is read up to 64 MiB: `/dev/zero` is refused at once (exit 2),
/// not read until memory runs out.
#[cfg(target_os = "linux")]
#[test]
fn an_endless_input_is_refused_past_the_batch_bound() {
    let ws = crate::common::workspace();
    let out = codemode(&["batch", "/dev/zero"], "", ws.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("batch file `/dev/zero` is over 67108864 bytes"), "{stderr}");
}

#[test]
fn a_closed_stdout_cancels_the_batch() {
    use std::io::{BufRead, BufReader, Write};
    let ws = crate::common::workspace();
    // 200 bash items of 50 ms, one at a time (10 s in all).
    let input: String = (0..200).map(|_| "{\"command\": \"sleep 0.05\"}\n").collect();
    let mut child = crate::cli::spawn(
        &["batch", "-", "--tool", "bash", "--concurrency", "1", "--approve", "allow"],
        ws.path(),
        &[],
    );
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    // Read one line, then close the pipe, as `| head -1` does.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("\"status\":\"ok\""), "{first}");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", String::from_utf8_lossy(&out.stderr));
    // The receipt was saved and says most items never started.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = stderr.lines().find_map(|l| l.strip_prefix("full receipt: ")).expect("the receipt path");
    let receipt: Value = serde_json::from_str(&std::fs::read_to_string(path.trim()).unwrap()).unwrap();
    assert!(receipt["calls"].as_array().unwrap().len() < 100, "the batch went on after stdout closed");
}

#[test]
fn an_unknown_tool_flag_is_one_error_not_one_per_line() {
    let ws = crate::common::workspace();
    let out = codemode(&["batch", "-", "--tool", "nosuch"], "{}\n{}\n{}\n", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tool nosuch: there is no such tool"));
}
