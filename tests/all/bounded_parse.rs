//! A program is bounded before the VM runs it (docs/LIMITS.md, "Before the
//! VM"): a text that would make the TypeScript parser backtrack ends as
//! kind `limit` before it is parsed, through `codemode run` under an
//! address-space cap and through `mcp serve`, which goes on answering.

use serde_json::{Value, json};

use crate::serve_stdio::Served;

/// The fuzzer's find (docs/FUZZING.md): 75 bytes that took 4.2 GB to fail.
fn backtracking(repeat: usize) -> String {
    "a<({[".repeat(repeat)
}

/// Address space the whole `codemode run` process may reserve, KiB: the
/// unbounded parse of the 75-byte text needed 4.2 GB; a run needs well
/// under this, 1 GiB of it the stack reserved (not used) for parsing
/// programs nested past 256 levels, as the 1,000-fold text is.
const ADDRESS_SPACE_KIB: u64 = 2_500_000;

/// `codemode run FILE --json` under the address-space cap; its exit code
/// and receipt.
fn run_capped(ws: &std::path::Path, file: &str, source: &str) -> (Option<i32>, Value) {
    std::fs::write(ws.join(file), source).unwrap();
    let script = format!("ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" run {file} --deadline 20 --json");
    let out = std::process::Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_codemode")])
        .current_dir(ws)
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .output()
        .unwrap();
    let receipt = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no receipt for {file}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), receipt)
}

#[test]
fn a_75_byte_text_that_makes_the_parser_backtrack_ends_as_limit_under_an_address_space_cap() {
    let ws = crate::common::workspace();
    // 75 bytes, a few KiB, and the whole 64 KiB source limit; as
    // TypeScript and as JavaScript (tried as TypeScript when it does not
    // parse as JavaScript).
    for repeat in [15, 1_000, (64 << 10) / 5] {
        for file in ["p.ts", "p.js"] {
            let (code, receipt) = run_capped(ws.path(), file, &backtracking(repeat));
            assert_eq!(code, Some(1), "x{repeat} {file}: {receipt}");
            assert_eq!(receipt["status"], "failed", "{receipt}");
            assert_eq!(receipt["error"]["kind"], "limit", "x{repeat} {file}: {receipt}");
            let message = receipt["error"]["message"].as_str().unwrap();
            assert!(message.contains("open at once here") && message.contains("2000000"), "{message}");
            assert!(receipt["elapsed_ms"].as_f64().unwrap() < 20_000.0, "{receipt}");
        }
    }
    // The same process cap runs an ordinary program: the cap is not what
    // made the runs above fail.
    let (code, receipt) = run_capped(ws.path(), "one.ts", "const n: number = 1;\nexport default n + 1;");
    assert_eq!((code, &receipt["value"]), (Some(0), &json!(2)), "{receipt}");
}

#[test]
fn a_regular_expression_holding_a_quote_does_not_hide_the_text_after_it() {
    // Read as a division, `/"/` opened a string for the estimate, which
    // then skipped the rest of the line; the parser reads a regular
    // expression and then the backtracking text (2.2 GB and a minute
    // before the scan told them apart). The TypeScript comparison read
    // both ways, likewise.
    let ws = crate::common::workspace();
    for (file, head) in [("head.ts", "if (c) /\"/.test(s); "), ("compare.ts", "x = a < 1 + 2 > /\"/; ")] {
        let (code, receipt) = run_capped(ws.path(), file, &format!("{head}{}", backtracking(15)));
        assert_eq!(code, Some(1), "{file}: {receipt}");
        assert_eq!(receipt["error"]["kind"], "limit", "{file}: {receipt}");
    }
}

#[test]
fn a_valid_javascript_program_that_throws_is_not_parsed_again_as_backtracking_typescript() {
    // A comparison with an object literal is JavaScript; as TypeScript the
    // same text backtracks. The error's position was found by parsing the
    // program again as TypeScript (throw_site.rs): 5 GB and minutes.
    let ws = crate::common::workspace();
    let nested = format!("{}1{}", "a<({[".repeat(15), "]:1})".repeat(15));
    let source = format!("const a = 1;\nconst x = {nested};\nthrow new Error('boom ' + x);");
    let (code, receipt) = run_capped(ws.path(), "throws.js", &source);
    assert_eq!(code, Some(1), "{receipt}");
    assert_eq!(receipt["error"]["kind"], "exception", "{receipt}");
    assert_eq!(receipt["error"]["line"], 3, "{receipt}");
}

#[test]
fn nesting_without_brackets_ends_with_a_receipt_not_an_abort() {
    // Assignments, conditionals and labels nest the parsers' recursion
    // without a bracket; 16,000 of them overflowed the VM thread's stack
    // (in the parse, and again where an error's position is looked up).
    let ws = crate::common::workspace();
    for (unit, end) in [("a=", "1"), ("a?b:", "1"), ("a:", "b"), ("x=>", "1")] {
        let source = format!("{}{end}", unit.repeat(16_000));
        let (code, receipt) = run_capped(ws.path(), "nested.js", &source);
        assert!(matches!(code, Some(0 | 1)), "{unit}: {code:?} {receipt}");
        assert_ne!(receipt["error"]["kind"], "internal", "{unit}: {receipt}");
    }
}

#[test]
fn mcp_serve_answers_the_backtracking_text_with_a_limit_error_and_the_next_request_normally() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let id =
        s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": backtracking(15)}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("limit") && text.contains("`<` open at once"), "{text}");
    let id =
        s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": "return 40 + 2"}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("42"), "{r}");
    assert!(s.close().success());
}
