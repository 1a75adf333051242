//! A fault found beside issue 30's breaks: server mode's approval questions
//! kept a 3,000-blank run and blank-looking characters (U+2800, U+3164,
//! U+3000, U+00A0), which push a command's tail out of sight of the person
//! deciding, while the terminal prompt already showed them.
//!
//! The defence: every question a person reads (the `elicitation/create`
//! of a 2025-11-25 client, a 2026-07-28 client's `input_required`, the
//! pending calls of a paused result, `codemode approve`'s listing) shows a
//! command through the terminal prompt's one function,
//! `codemode::display_text::visible`: runs of spaces counted, blank-looking
//! and invisible characters escaped.

use serde_json::json;

use crate::cli::codemode;
use crate::serve_stdio::Served;

/// A command whose dangerous tail hides behind padding and blanks: a long
/// run of spaces ended by blank-looking characters, then (the second
/// review's) short runs of spaces between format characters no list named.
fn padded_command() -> String {
    format!(
        "echo safe{}\u{2800}\u{3164}\u{3000}\u{a0}\u{200b}\u{2066}; echo mid{}; echo tail >> owned.txt",
        " ".repeat(3000),
        format!("{}\u{FFFB}", " ".repeat(16)).repeat(300)
    )
}

/// The program that asks for it.
fn program(command: &str) -> String {
    format!("return await tools.bash({{command: {}}}).then(() => 'ran', e => 'refused');", json!(command))
}

/// Fails unless `text` shows the command's tail in sight: no long run of
/// blanks, no raw blank-looking or invisible character, the tail there.
fn assert_in_sight(text: &str, what: &str) {
    assert!(!text.contains(&" ".repeat(17)), "{what} keeps a run of blanks: {text}");
    for c in ['\u{2800}', '\u{3164}', '\u{3000}', '\u{a0}', '\u{200b}', '\u{2066}', '\u{FFFB}'] {
        assert!(!text.contains(c), "{what} holds U+{:04X} raw: {text}", u32::from(c));
    }
    assert!(text.contains("echo safe[3000 spaces and 6 invisible characters]; echo mid"), "{what}: {text}");
    assert!(text.contains("echo mid[4800 spaces and 300 invisible characters]; echo tail"), "{what}: {text}");
    assert!(text.contains("echo tail >> owned.txt"), "{what} shows the tail: {text}");
}

#[test]
fn an_elicited_question_shows_the_whole_command_in_sight() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({"elicitation": {}}));
    let id = s.request(
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"code": program(&padded_command())}}),
    );
    let mut asked = Vec::new();
    let r = s.response(id, |s, m| {
        if m["method"] == "elicitation/create" {
            asked.push(m["params"]["message"].as_str().unwrap().to_owned());
            s.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "decline"}}));
        }
    });
    assert_eq!(asked.len(), 1, "{r}");
    assert_in_sight(&asked[0], "the elicitation");
    assert_eq!(r["result"]["structuredContent"]["value"], "refused", "{r}");
    assert!(!ws.path().join("owned.txt").exists());
    assert!(s.close().success());
}

#[test]
fn a_paused_result_and_the_approve_listing_show_the_whole_command_in_sight() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let id = s.request(
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"code": program(&padded_command())}}),
    );
    let r = s.response(id, |_, m| panic!("no question reaches a client without elicitation: {m}"));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["status"], "paused", "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    let pending =
        text.lines().find(|l| l.starts_with("pending: call 1")).expect("the pending call is listed");
    assert_in_sight(pending, "the paused result");
    assert!(text.contains("decide: codemode approve"), "offered, being shown whole: {text}");
    assert_eq!(sc["pending"][0]["seq"], 1, "{r}");
    let run_id = sc["run_id"].as_str().unwrap().to_owned();
    assert!(s.close().success());

    let listed = codemode(&["approve", &run_id], "", ws.path());
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    let text = String::from_utf8_lossy(&listed.stdout);
    let on = text.lines().find(|l| l.trim_start().starts_with("on: ")).expect("what call 1 acts on");
    assert_in_sight(on, "codemode approve's listing");
    let args = text.lines().find(|l| l.trim_start().starts_with("arguments: ")).expect("its arguments");
    assert_in_sight(args, "codemode approve's arguments");
}
