//! One bound for every text a receipt or a message keeps (tool error text,
//! refusal reasons, tool names, uncaught messages), the deadline between
//! refusals, and a cut return value in `codemode run`: through the binary,
//! with the fixture MCP server (tests/fixtures/mcp/misbehaving.py).

use serde_json::{Value, json};

use crate::cli::codemode;

/// The text bound of docs/RECEIPTS.md ("Bounds"): 4 KiB.
const TEXT_BYTES: usize = 4096;

/// What one call may add to `receipt.json` (pretty JSON): its name and its
/// error at the text bound each, with their markers, and the other fields.
const PER_CALL: usize = 12 << 10;

/// The receipt saved by `codemode run` in `ws` (its only run).
fn saved_receipt(ws: &std::path::Path) -> (Value, usize, std::path::PathBuf) {
    let runs = crate::common::runs_dir(ws);
    let dir = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let text = std::fs::read_to_string(dir.join("receipt.json")).unwrap();
    (serde_json::from_str(&text).unwrap(), text.len(), dir)
}

/// The file a cut text names in its marker (`...; the whole text is in PATH]`).
fn spill_file_of(text: &str) -> std::path::PathBuf {
    let at = text.rfind("the whole text is in ").unwrap_or_else(|| panic!("no spill path in {text:.200}"));
    let rest = &text[at + "the whole text is in ".len()..];
    rest.strip_suffix(']').unwrap().into()
}

#[test]
fn huge_error_texts_refusals_names_and_throws_grow_the_receipt_per_call_not_per_payload() {
    let ws = crate::common::workspace();
    let config = json!({"mcpServers": {"fixture": {
        "command": "python3",
        "args": [crate::mcp_support::fixture(), "normal"],
        "env": {"MCP_FIXTURE_FAIL_BYTES": "1000000"}
    }}});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    // Five 1 MB isError results, twenty schema refusals of a 1 MiB
    // argument, five 500 KB unknown names, then an uncaught 3 MiB message.
    let program = r#"
const big = "q".repeat(1 << 20);
const seen = [];
const attempt = async (name, args) => {
  try { await tools.call(name, args); seen.push("ok"); } catch (e) { seen.push(e.message.length); }
};
for (let i = 0; i < 5; i++) await attempt("mcp__fixture__fail", {});
for (let i = 0; i < 20; i++) await attempt("read", {path: [big]});
for (let i = 0; i < 5; i++) await attempt("n".repeat(500000), {});
console.log(JSON.stringify(seen));
throw new Error("m".repeat(3 << 20));
"#;
    std::fs::write(ws.path().join("prog.js"), program).unwrap();
    let out = codemode(&["run", "prog.js", "--approve", "allow"], "", ws.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr:.2000}");

    let (receipt, size, dir) = saved_receipt(ws.path());
    let calls = receipt["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 30, "{:.2000}", receipt.to_string());
    assert!(
        size < (64 << 10) + calls.len() * PER_CALL,
        "receipt.json is {size} bytes for {} calls",
        calls.len()
    );

    // The program's messages are bounded too (name and reason, each cut).
    let seen: Vec<Value> = serde_json::from_str(receipt["logs"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(seen.len(), 30);
    for length in &seen {
        let length = length.as_u64().unwrap_or_else(|| panic!("a call succeeded: {seen:?}"));
        assert!(length < 2 * TEXT_BYTES as u64 + 300, "a ToolError message of {length} bytes");
    }

    // The tool's error text: a prefix, its size, and the whole in a file.
    for call in &calls[..5] {
        assert_eq!(call["status"], "failed");
        let error = call["error"].as_str().unwrap();
        assert!(error.len() <= TEXT_BYTES, "{} bytes", error.len());
        assert!(error.contains("eeee") && error.contains(" bytes; the whole text is in "), "{error:.300}");
        let whole = spill_file_of(error);
        assert!(whole.starts_with(&dir), "{}", whole.display());
        let text = std::fs::read_to_string(&whole).unwrap();
        assert!(text.len() >= 1_000_000 && text.contains(&"e".repeat(1_000_000)), "{} bytes", text.len());
    }
    // Schema refusals quote a bounded part of the argument.
    for call in &calls[5..25] {
        assert_eq!(call["status"], "refused");
        let error = call["error"].as_str().unwrap();
        assert!(error.len() <= TEXT_BYTES, "{} bytes", error.len());
        assert!(error.contains("input schema of `read`") && error.contains("[cut at"), "{error:.300}");
    }
    // Unknown names: the name and the reason are cut.
    for call in &calls[25..] {
        assert_eq!(call["status"], "refused");
        let (tool, error) = (call["tool"].as_str().unwrap(), call["error"].as_str().unwrap());
        assert!(tool.len() <= TEXT_BYTES && tool.contains("of 500000 bytes]"), "{tool:.200}");
        assert!(error.len() <= TEXT_BYTES && error.starts_with("unknown tool `nnn"), "{error:.200}");
    }
    // The uncaught message: cut, with the whole in `error.txt`.
    assert_eq!(receipt["error"]["kind"], "exception");
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(message.len() <= TEXT_BYTES, "{} bytes", message.len());
    assert!(message.starts_with("Error: mmm"), "{message:.100}");
    let whole = spill_file_of(message);
    assert_eq!(whole, dir.join("spill/error.txt"));
    assert_eq!(std::fs::read_to_string(whole).unwrap(), format!("Error: {}", "m".repeat(3 << 20)));
}

#[test]
fn a_loop_of_refused_calls_still_ends_at_the_deadline() {
    let ws = crate::common::workspace();
    // Each call names an 8 MiB tool: refused as unknown, which must be
    // cheap, and the deadline must end the loop.
    let program = r#"
const name = "x".repeat(8 << 20);
for (;;) { try { await tools.call(name, {}); } catch (e) {} }
"#;
    let mut child =
        crate::cli::spawn(&["run", "-", "--json", "--deadline", "1", "--journal", "off"], ws.path(), &[]);
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    // The receipt is read while the run goes on (a pipe left unread
    // would stop a receipt over 64 KiB from being written).
    let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut pipe, &mut bytes).map(|_| bytes)
        })
    };
    let reader = read_all(Box::new(child.stdout.take().unwrap()));
    let errors = read_all(Box::new(child.stderr.take().unwrap()));
    // A watchdog, not a measure: a run that never ends fails here.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("the run did not end at its deadline");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let stderr = errors.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(3), "{}", String::from_utf8_lossy(&stderr));
    let receipt: Value = serde_json::from_slice(&reader.join().unwrap().unwrap()).unwrap();
    assert_eq!(receipt["status"], "timed_out");
    assert_eq!(receipt["error"]["kind"], "timeout");
    for call in receipt["calls"].as_array().unwrap() {
        assert_eq!(call["status"], "refused");
        assert!(call["tool"].as_str().unwrap().len() <= TEXT_BYTES);
    }
}

#[test]
fn a_program_catching_refusals_cannot_go_on_past_the_deadline() {
    let ws = crate::common::workspace();
    // Slow work between calls (an 8 MiB JSON.stringify each) and a catch
    // of every refusal: QuickJS's own interrupt check would come only
    // after 10,000 branches, so the call made after the deadline must end
    // the program itself, uncaught.
    let program = r#"
const big = {q: "q".repeat(8 << 20)};
for (let i = 0; i < 40; i++) {
  try { await tools.call("nosuch", big); } catch (e) { console.log("caught: " + e.message.slice(0, 80)); }
}
return "went on";
"#;
    std::fs::write(ws.path().join("prog.js"), program).unwrap();
    let out = codemode(&["run", "prog.js", "--json", "--deadline", "1", "--journal", "off"], "", ws.path());
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "timed_out", "{receipt}");
    let logs = receipt["logs"].to_string();
    assert!(!logs.contains("deadline"), "the program caught a call made after its deadline: {logs}");
}

#[test]
fn a_cut_value_keeps_stdout_valid_json_and_says_where_the_whole_is() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("prog.js"), r#"return {a: "y".repeat(20000), n: 1};"#).unwrap();
    let out = codemode(&["run", "prog.js"], "", ws.path());
    // Completed, but what stdout has is not the value: exit 6.
    assert_eq!(out.status.code(), Some(6));
    let stdout: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON text");
    let prefix = stdout.as_str().expect("the kept prefix, as a JSON string");
    assert_eq!(prefix.len(), 16 << 10);
    assert!(prefix.starts_with(r#"{"a":"yyy"#), "{prefix:.50}");

    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.contains("over its bound")).unwrap_or_else(|| panic!("{stderr}"));
    let whole = format!(r#"{{"a":"{}","n":1}}"#, "y".repeat(20000));
    assert!(line.contains(&format!("the value was cut (exit 6): it is {} bytes", whole.len())), "{line}");
    let path = line.split("the whole value is in ").nth(1).unwrap_or_else(|| panic!("{line}"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), whole);

    // A value within its bound prints as before.
    let out = codemode(&["run", "-"], r#"return {a: "y"};"#, ws.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{\n  \"a\": \"y\"\n}\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("over its bound"));
}

/// `codemode run` reads a program only up to the source limit (64 KiB):
/// `/dev/zero` or an endless pipe is refused at once instead of filling
/// memory, and a refused program leaves no run folder or journal.
#[test]
fn a_program_over_the_source_limit_is_refused_before_it_is_read_whole() {
    let ws = crate::common::workspace();
    #[cfg(target_os = "linux")]
    {
        let out = codemode(&["run", "/dev/zero"], "", ws.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("program file `/dev/zero` is over the source limit of 65536 bytes"),
            "{stderr}"
        );
    }
    std::fs::write(ws.path().join("big.js"), format!("return 1;{}", " ".repeat(70_000))).unwrap();
    let out = codemode(&["run", "big.js", "--json"], "", ws.path());
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout["error"]["kind"], "invocation");
    assert!(stdout["error"]["message"].as_str().unwrap().contains("over the source limit"), "{stdout}");
    let piped = format!("return 2;{}", " ".repeat(70_000));
    let mut child = crate::cli::spawn(&["run", "-"], ws.path(), &[]);
    // codemode stops reading past the limit: the rest of the write may
    // meet a closed pipe.
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), piped.as_bytes());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the program read from stdin is over the source limit")
    );
    assert!(!crate::common::runs_dir(ws.path()).exists(), "a refused program made a run folder");
    // At the limit it runs.
    std::fs::write(ws.path().join("edge.js"), format!("return 3;{}", " ".repeat(65_536 - 9))).unwrap();
    let out = codemode(&["run", "edge.js"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}
