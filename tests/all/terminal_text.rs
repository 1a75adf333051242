//! Human outputs escape control characters everywhere (issue 15, item 6),
//! through the real binary and a real MCP server (tests/fixtures/mcp/
//! hostile_text.py, official Python SDK) whose descriptions carry an
//! escape sequence, a bell, an OSC 52 clipboard write, a title change, a
//! carriage return, line breaks, U+2028, a right-to-left override and a
//! zero-width space: `mcp tools`, `tools`, `search`, `types` (still valid
//! TypeScript), `mcp list`, a string or a value `run` prints, and errors on
//! stderr show them as escapes, and one-line fields stay on one line.
//! `--json` outputs are JSON, escaped by the serialiser, and left alone.

use serde_json::{Value, json};

use crate::cli::{codemode, spawn};

/// Characters of `text` that must not reach a terminal raw: everything
/// [`codemode::display_text::is_unsafe`] names but the newline and the tab
/// (the layout of a multi-line output).
fn raw_controls(text: &str) -> Vec<char> {
    text.chars().filter(|&c| c != '\n' && c != '\t' && codemode::display_text::is_unsafe(c)).collect()
}

/// A workspace whose `.mcp.json` names the hostile server `hostile`.
fn hostile_workspace() -> tempfile::TempDir {
    let ws = crate::common::workspace();
    let python = crate::mcp_support::root().join("tests/python/.venv/bin/python");
    let server = crate::mcp_support::root().join("tests/fixtures/mcp/hostile_text.py");
    let config = json!({"mcpServers": {"hostile": {
        "command": python.to_string_lossy(),
        "args": [server.to_string_lossy()],
        "env": {"MCP_FIXTURE_PIDS": ws.path().join("pids").to_string_lossy()}
    }}});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    ws
}

#[test]
fn listings_and_declarations_of_a_hostile_server_are_escaped() {
    let ws = hostile_workspace();
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut child = spawn(args, ws.path(), &[("XDG_CACHE_HOME", cache.path())]);
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(raw_controls(&stdout), Vec::<char>::new(), "{args:?} stdout: {stdout}");
        assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{args:?} stderr: {stderr}");
        stdout
    };

    // `mcp tools`: a name line and a description line per tool, the
    // description's line breaks written as `\n`.
    let tools = run(&["mcp", "tools", "hostile", "--approve", "allow"]);
    assert_eq!(tools.lines().count(), 4, "{tools}");
    assert!(!tools.lines().any(|l| l.starts_with("FORGED")), "{tools}");
    assert!(tools.contains(r"Paints\u{1b}[2J the screen\u{7}"), "{tools}");
    crate::mcp_support::assert_gone(&crate::mcp_support::pids(&ws.path().join("pids")));

    // The listing is cached: the other outputs start nothing.
    let all = run(&["tools", "--all"]);
    assert!(all.contains("mcp__hostile__paint") && all.contains(r"\u{1b}[2J"), "{all}");
    let found = run(&["search", "paints the screen"]);
    assert!(found.contains("mcp__hostile__paint"), "{found}");
    assert!(!found.lines().any(|l| l.starts_with("FORGED")), "{found}");
    assert!(run(&["mcp", "list"]).contains("hostile"));

    // `types`: escaped, and still TypeScript that compiles (the escapes
    // stand in comments and string literals).
    let dts = run(&["types"]);
    assert!(dts.contains(r"\u{1b}]52;c;aGk=\u{7}"), "{dts}");
    assert!(dts.contains(r"\u{202e}"), "{dts}");
    let usage = "async function f() { await tools.mcp__hostile__plain({}); }\nvoid f();\n";
    let (ok, output) = crate::typescript::compile(&[("tools.d.ts", &dts), ("usage.ts", usage)]);
    assert!(ok, "{output}");

    // `--json` is JSON as the serialiser writes it, the exact text.
    let out = spawn(&["tools", "--all", "--json"], ws.path(), &[("XDG_CACHE_HOME", cache.path())])
        .wait_with_output()
        .unwrap();
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let paint =
        listing["tools"].as_array().unwrap().iter().find(|t| t["name"] == "mcp__hostile__paint").unwrap();
    assert!(paint["description"].as_str().unwrap().contains("\u{1b}]52;c;aGk=\u{7}"));
}

#[test]
fn run_prints_returned_strings_and_values_escaped_in_plain_mode() {
    let ws = crate::common::workspace();
    // A string sets the terminal title when printed raw: it is printed as
    // JSON, with those characters as JSON escapes (the same string).
    let out = codemode(&["run", "-"], r#"return "\x1b]0;T\x07 and\u202e\r\nnext";"#, ws.path());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, "\"\\u001b]0;T\\u0007 and\\u202e\\r\\nnext\"\n");
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), json!("\u{1b}]0;T\u{7} and\u{202e}\r\nnext"));

    // Another value is JSON with those characters as JSON escapes: the
    // same value, still valid JSON.
    let program = r#"return {title: "\x1b]0;T\x07", bidi: "a\u202eb\u2028c\u200b\x7f"};"#;
    let out = codemode(&["run", "-"], program, ws.path());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(raw_controls(&stdout), Vec::<char>::new(), "{stdout}");
    let value: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(value, json!({"title": "\u{1b}]0;T\u{7}", "bidi": "a\u{202e}b\u{2028}c\u{200b}\u{7f}"}));

    // `--json` is the receipt, escaped by the serialiser only.
    let out = codemode(&["run", "-", "--json"], program, ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["value"]["bidi"], "a\u{202e}b\u{2028}c\u{200b}\u{7f}");
}

#[test]
fn a_value_from_a_hostile_server_is_printed_escaped() {
    let ws = hostile_workspace();
    let cache = tempfile::tempdir().unwrap();
    let mut child =
        spawn(&["run", "-", "--approve", "allow"], ws.path(), &[("XDG_CACHE_HOME", cache.path())]);
    let program = "const r = await tools.mcp__hostile__paint({colour: 'red'}); return r.content.result;";
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(raw_controls(&stdout), Vec::<char>::new(), "{stdout}");
    assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{stderr}");
    assert!(stdout.contains(r"Copies \u001b]52;c;aGk=\u0007 and"), "{stdout}");
    assert!(stdout.contains(r"it.\r\nFORGED LINE\u2028second\u202eevil\u200b end"), "{stdout}");
}

#[test]
fn errors_quoting_a_file_are_escaped_on_stderr() {
    let ws = crate::common::workspace();
    // TOML escapes, so the file parses and the value holds the characters.
    std::fs::write(ws.path().join("bad.toml"), "posture = \"\\u001b]0;T\\u0007\\u202e\"\n").unwrap();
    let out = codemode(&["run", "-", "--config", "bad.toml"], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{stderr}");
    assert!(stderr.contains(r"unknown value `\u{1b}]0;T\u{7}\u{202e}`"), "{stderr}");
}
