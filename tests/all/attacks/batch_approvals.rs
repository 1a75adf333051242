//! A batch asks once per distinct question (`BatchApprover`,
//! docs/BATCH.md "Approvals"), but never reuses an answer the policy
//! wants given each time: a call an ask rule sends to a person, and a
//! command (`bash`), whose approval holds only for what its own run
//! changed. Without those limits, one line's `y` would run every other
//! line's identical call unasked.

use serde_json::Value;

use crate::cli::codemode;

/// Runs `program` over 6 input lines under posture ask with a `cmd:`
/// approver that records every question and allows; the questions.
fn questions(program: &str, policy: &str) -> Vec<Value> {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("p.js"), program).unwrap();
    std::fs::write(ws.join("policy.toml"), policy).unwrap();
    std::fs::write(ws.join("x.sh"), "true\n").unwrap();
    let asked = ws.join("asked.jsonl");
    let script = ws.join("approver.sh");
    std::fs::write(
        &script,
        format!("cat >> {0}; echo >> {0}; echo '{{\"decision\": \"allow\"}}'\n", asked.display()),
    )
    .unwrap();
    let input: String = (1..=6).map(|n| format!("{{\"n\": {n}}}\n")).collect();
    std::fs::write(ws.join("in.jsonl"), input).unwrap();
    let approve = format!("cmd:sh {}", script.display());
    let args = [
        "batch",
        "--program",
        "p.js",
        "in.jsonl",
        "--posture",
        "ask",
        "--approve",
        &approve,
        "--config",
        "policy.toml",
    ];
    let out = codemode(&args, "", ws);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&asked)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn an_ask_rules_call_is_asked_in_every_line_of_a_batch() {
    let asked = questions(
        "await tools.write({path: 'secret.txt', content: 'same'}); return 1;",
        "[rules]\nask = [\"write(secret.txt)\"]\n",
    );
    assert_eq!(asked.len(), 6, "asked once per line: {asked:?}");
}

#[test]
fn an_identical_command_is_asked_in_every_line_of_a_batch() {
    let asked = questions("await tools.bash({command: 'sh x.sh'}); return 1;", "");
    let commands = asked.iter().filter(|q| q["tool"] == "bash").count();
    assert_eq!(commands, 6, "asked once per line: {asked:?}");
}
