//! Errors that name their fix (issue 32, item 10), through the binary:
//! QuickJS's terse `TypeError`s name the expression and what it held, a
//! `JSON.parse` of `read`'s numbered lines says to read with `format:
//! "text"`, a program that returns before its calls end is told it did not
//! await them, a result used as the array it holds says to use `.content`,
//! and a `ToolError` from a loop keeps its line and column. (bash's
//! timeout unit and kind are in tool_bash.rs.)

use serde_json::Value;

use crate::cli::codemode;
use crate::common::workspace;

/// Runs `program` with `codemode run - --json`, every call allowed; the
/// receipt and stderr.
fn run(program: &str) -> (Value, String) {
    let ws = workspace();
    std::fs::write(ws.path().join("data.json"), "{\"items\": [1, 2]}\n").unwrap();
    let out = codemode(&["run", "-", "--json", "--approve", "allow"], program, ws.path());
    let receipt = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (receipt, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The run's error message, and its (line, column).
fn error(receipt: &Value) -> (String, Value, Value) {
    assert_eq!(receipt["status"], "failed", "{receipt}");
    let e = &receipt["error"];
    (e["message"].as_str().unwrap().to_owned(), e["line"].clone(), e["column"].clone())
}

#[test]
fn not_a_function_names_the_expression_and_what_it_held() {
    // bash's content is an object: the program took it for a string.
    let (receipt, _) = run("const r = await tools.bash({command: \"echo hi\"});\nreturn r.content.trim();");
    let (message, line, column) = error(&receipt);
    assert_eq!(
        message,
        "TypeError: `r.content.trim` is not a function; `r.content` is an object with keys `exit_code`, \
         `stdout`, `stderr` (in the result of `tools.bash`)"
    );
    assert_eq!(line, 2);
    assert!(column.is_u64(), "{receipt}");
    // A value read before another call of the same tool: the last one is
    // named as the last.
    let src = "const a = await tools.read({path: \"a.txt\"});\nawait tools.read({path: \"a.txt\"});\na.content.map(x => x);";
    let (message, _, _) = error(&run(src).0);
    assert!(
        message.ends_with("`a.content` is a string (in the last result of `tools.read`, call 2)"),
        "{message}"
    );
    // Thrown inside a built-in the program called: nothing is guessed.
    let (message, _, _) = error(&run("return [1].map(5);").0);
    assert_eq!(message, "TypeError: not a function");
    // A value the text says nothing of: the expression alone.
    let (message, _, _) = error(&run("const f = JSON.parse('{}');\nf.go();").0);
    assert_eq!(message, "TypeError: `f.go` is not a function");
}

#[test]
fn a_result_used_as_the_array_it_holds_says_to_use_content() {
    for (use_, says) in [
        ("r.map(f => f)", "TypeError: `r.map` is not a function; `r` is the result of `tools.file_search`"),
        ("for (const f of r) {}", "TypeError: `r` is not iterable; it is the result of `tools.file_search`"),
        ("[...r]", "TypeError: `r` is not iterable; it is the result of `tools.file_search`"),
    ] {
        let src = format!("const r = await tools.file_search({{query: \"txt\"}});\n{use_};");
        let (message, line, _) = error(&run(&src).0);
        assert!(message.starts_with(says), "{use_}: {message}");
        assert!(message.contains("`r.content`"), "{use_}: {message}");
        assert_eq!(line, 2, "{use_}");
    }
    // The content itself is the array: that works.
    let (receipt, _) =
        run("const r = await tools.file_search({query: \"txt\"});\nreturn r.content.map(f => f.path);");
    assert_eq!(receipt["status"], "completed", "{receipt}");
}

#[test]
fn json_parse_of_reads_numbered_lines_says_to_read_with_format_text() {
    let (message, line, _) =
        error(&run("const r = await tools.read({path: \"data.json\"});\nreturn JSON.parse(r.content);").0);
    assert!(message.starts_with("SyntaxError: "), "{message}");
    assert!(message.contains("JSON.parse of `r.content`: tools.read returns numbered lines"), "{message}");
    assert!(message.contains("`format: \"text\"`"), "{message}");
    assert_eq!(line, 2);
    // As the hint says, it parses.
    let src = "const r = await tools.read({path: \"data.json\", format: \"text\"});\nreturn JSON.parse(r.content).items;";
    let (receipt, _) = run(src);
    assert_eq!(receipt["value"], serde_json::json!([1, 2]), "{receipt}");
    // "raw" is not a format: refused, naming the two there are.
    let src = "return await tools.read({path: \"data.json\", format: \"raw\"});";
    let (message, _, _) = error(&run(src).0);
    assert!(message.contains("lines") && message.contains("text"), "{message}");
}

#[test]
fn a_call_not_awaited_says_the_program_returned_before_it() {
    // The value: undefined, so null; the receipt and stderr say why. (A
    // call that ends at once, as a small `read` may, ended before the
    // program returned: bash never does.)
    let program = "return tools.bash({command: \"sleep 0.2\"}).content;";
    let (receipt, stderr) = run(program);
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["value"], Value::Null);
    let warnings = receipt["warnings"].to_string();
    assert!(warnings.contains("the program returned before bash (call 1) ended"), "{warnings}");
    assert!(warnings.contains("`(await tools.bash(...)).content`"), "{warnings}");
    assert!(stderr.is_empty(), "{stderr}");
    // Without --json, the summary on stderr says it.
    let ws = workspace();
    let out = codemode(&["run", "-", "--approve", "allow"], program, ws.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: the program returned before bash (call 1) ended"), "{stderr}");
    // Used at once: the promise's `content` is undefined.
    let (message, _, _) = error(&run("return tools.read({path: \"a.txt\"}).content.trim();").0);
    assert_eq!(
        message,
        "TypeError: `tools.read({path: \"a.txt\"}).content` is undefined; `tools.read({path: \"a.txt\"})` is a \
         promise, not the call's result: write `(await tools.read({path: \"a.txt\"}))`"
    );
    // Awaited: no warning.
    let (receipt, _) = run("return (await tools.read({path: \"a.txt\"})).metadata.total_lines;");
    assert_eq!(receipt["value"], 3);
    assert!(receipt["warnings"].as_array().is_none_or(Vec::is_empty), "{receipt}");
}

#[test]
fn an_uncaught_tool_error_in_a_loop_keeps_its_line_and_column() {
    let src = "for (const path of [\"a.txt\", \"missing.txt\"]) {\n  const r = await tools.read({path});\n}";
    let (message, line, column) = error(&run(src).0);
    assert!(message.starts_with("ToolError: read (call 2): `missing.txt` does not exist"), "{message}");
    // The call's start (`tools`) when it ended after the program went on,
    // QuickJS's position in it when it ended at once.
    assert_eq!(line, 2);
    assert!((19..=25).contains(&column.as_u64().unwrap()), "{column}");
}
