//! Approvals through `codemode mcp serve` as a person meets them, with the
//! official SDK clients answering (docs/SERVE.md, "Approvals"): the calls a
//! program makes together come as one question, one answer decides them
//! all, and an answer for the rest of the run lets the run's later calls
//! of that tool pass unasked. v1 is asked with `elicitation/create` while
//! the run waits; v2 (MCP 2026-07-28) gets `input_required` and retries.

use serde_json::json;

use crate::serve_clients::{Served, client, clients, execute};

/// Writes five files at once; returns `ok` or the error's kind for each.
const PARALLEL: &str = "const names = ['n1', 'n2', 'n3', 'n4', 'n5'].map((n) => n + '.txt');\n\
    const r = await Promise.all(names.map((p) => tools.write({path: p, content: 'x'}).then(() => 'ok', (e) => e.kind)));\n\
    return r.join(',');";

/// Writes three files one after another; returns `ok` or the error's kind
/// for each.
const SEQUENTIAL: &str = "const o = [];\n\
    for (const p of ['n1.txt', 'n2.txt', 'n3.txt']) {\n\
      try { await tools.write({path: p, content: 'x'}); o.push('ok'); } catch (e) { o.push(e.kind); }\n\
    }\n\
    return o.join(',');";

#[test]
fn parallel_writes_come_as_one_question_and_one_answer_decides_them_all() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        for (answer, each, written) in [("accept", "ok", true), ("decline", "denied", false)] {
            let served = Served::new();
            let plan = json!({
                "server": served.server(&[]),
                "elicitation": answer,
                "steps": [{"call": execute(PARALLEL)}, {"list": true}],
            });
            let out = client(&dir, sdk, &plan);
            let s = out.structured(0);
            assert_eq!(s["status"], "completed", "{sdk} {answer}: {}", out.text(0));
            assert_eq!(s["value"], [each; 5].join(","), "{sdk} {answer}: {}", out.text(0));
            assert_eq!(out.elicitations.len(), 1, "{sdk} {answer}: one question: {:?}", out.elicitations);
            let asked = &out.elicitations[0];
            assert!(asked.contains("allow these 5 tool calls"), "{sdk}: {asked}");
            for name in ["n1.txt", "n2.txt", "n3.txt", "n4.txt", "n5.txt"] {
                assert!(asked.contains(name), "{sdk}: {name} listed: {asked}");
                assert_eq!(served.path().join(name).exists(), written, "{sdk} {answer}: {name}");
            }
            assert!(asked.contains("Accept allows them all; decline or cancel denies them all"), "{asked}");
            let receipt = served.receipt(s["run_id"].as_str().unwrap());
            let decisions: Vec<_> =
                receipt["calls"].as_array().unwrap().iter().map(|c| &c["decision"]).collect();
            let expected = if written { "approved" } else { "denied" };
            assert!(decisions.iter().all(|d| *d == expected), "{sdk} {answer}: {receipt}");
        }
    }
}

#[test]
fn an_answer_for_the_rest_of_the_run_lets_later_calls_of_the_tool_pass_unasked() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let plan = json!({
            "server": served.server(&[]),
            "elicitation": "accept",
            "answers": [{"action": "accept", "content": {"rest_of_run": true}}, {"action": "decline"}],
            "steps": [{"call": execute(SEQUENTIAL)}, {"list": true}],
        });
        let out = client(&dir, sdk, &plan);
        let s = out.structured(0);
        assert_eq!(s["status"], "completed", "{sdk}: {}", out.text(0));
        assert_eq!(s["value"], "ok,ok,ok", "{sdk}: {}", out.text(0));
        assert_eq!(out.elicitations.len(), 1, "{sdk}: asked once: {:?}", out.elicitations);
        let asked = &out.elicitations[0];
        assert!(asked.contains("rest_of_run") && asked.contains("every `write` call of this run"), "{asked}");
        let receipt = served.receipt(s["run_id"].as_str().unwrap());
        for call in &receipt["calls"].as_array().unwrap()[1..] {
            assert_eq!(call["decision"], "approved", "{sdk}: {call}");
            let note = call["note"].as_str().unwrap_or_default();
            assert!(note.contains("for the rest of the run"), "{sdk}: the grant is recorded: {call}");
        }
    }
}

#[test]
fn an_accept_without_the_rest_of_the_run_asks_again() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let plan = json!({
            "server": served.server(&[]),
            "elicitation": "accept",
            "steps": [{"call": execute(SEQUENTIAL)}],
        });
        let out = client(&dir, sdk, &plan);
        assert_eq!(out.structured(0)["value"], "ok,ok,ok", "{sdk}: {}", out.text(0));
        assert_eq!(out.elicitations.len(), 3, "{sdk}: {:?}", out.elicitations);
    }
}

/// The rename across 29 files: v1 is asked once per batch of calls
/// the run lets wait at once (`max_in_flight`, 16 by default), v2 once for
/// all the calls the run paused on.
#[test]
fn twenty_nine_parallel_writes_ask_once_per_batch_in_flight() {
    let Some(dir) = clients() else { return };
    let code = "const names = Array.from({length: 29}, (_, i) => 'f' + i + '.txt');\n\
        const r = await Promise.all(names.map((p) => tools.write({path: p, content: 'x'}).then(() => 'ok', (e) => e.kind)));\n\
        return r.filter((x) => x === 'ok').length;";
    // v1: 16, then the 13 that waited for a slot (a third question only
    // when a loaded machine spreads their arrival past the gathering).
    for (sdk, questions) in [("v1", 2..=3), ("v2", 1..=1)] {
        let served = Served::new();
        let plan = json!({"server": served.server(&[]), "elicitation": "accept", "steps": [{"call": execute(code)}]});
        let out = client(&dir, sdk, &plan);
        assert_eq!(out.structured(0)["value"], 29, "{sdk}: {}", out.text(0));
        assert!(questions.contains(&out.elicitations.len()), "{sdk}: {:#?}", out.elicitations);
    }
}

/// A question lists at most 32 calls: on `input_required`, the calls left
/// out stay pending and are asked when the resumed run pauses on them.
#[test]
fn more_calls_than_a_question_lists_are_asked_in_the_next() {
    let Some(dir) = clients() else { return };
    let code = "const names = Array.from({length: 40}, (_, i) => 'f' + i + '.txt');\n\
        const r = await Promise.all(names.map((p) => tools.write({path: p, content: 'x'}).then(() => 'ok', (e) => e.kind)));\n\
        return r.filter((x) => x === 'ok').length;";
    let served = Served::new();
    let plan =
        json!({"server": served.server(&[]), "elicitation": "accept", "steps": [{"call": execute(code)}]});
    let out = client(&dir, "v2", &plan);
    assert_eq!(out.structured(0)["value"], 40, "{}", out.text(0));
    assert_eq!(out.elicitations.len(), 2, "{:#?}", out.elicitations);
    assert!(
        out.elicitations[0].starts_with("codemode: allow these 32 tool calls"),
        "{}",
        out.elicitations[0]
    );
    assert!(out.elicitations[1].starts_with("codemode: allow these 8 tool calls"), "{}", out.elicitations[1]);
}
