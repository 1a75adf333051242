//! A review of the questions and grants of `codemode mcp serve`
//! (docs/SERVE.md, "Approvals"), as an attacking program would try them
//! through the official SDK clients: every call that runs was listed in a
//! question the person accepted (calls arriving during the gathering,
//! while a question is out, and past the 32 calls or 64 KiB one question
//! shows), a call runs with the arguments the question showed (a getter
//! or a later change of the arguments object cannot swap them), a command
//! grant covers the exact command only (spacing included), and a sealed
//! `requestState` opens for the arguments it was sealed for only.

use serde_json::json;

use crate::serve_clients::{Served, client, clients, execute};

/// Writes that reach the gate at different times: 20 at once, 4 with
/// content too big for many to fit one question, then groups after
/// 0.1 s (inside the gathering), 0.5 s (while a question is out) and
/// 1.3 s (after the longest gathering); returns how many were written.
const STAGGERED: &str = "const w = (p, c) => tools.write({path: p, content: c}).then(() => 'ok', (e) => e.kind);\n\
    const late = async (s, names) => { await tools.bash({command: 'sleep ' + s}); return Promise.all(names.map((n) => w(n, 'x'))); };\n\
    const big = 'y'.repeat(7000);\n\
    const all = [];\n\
    for (let i = 0; i < 20; i++) all.push(w('now' + i + '.txt', 'x'));\n\
    for (let i = 0; i < 12; i++) all.push(w('big' + i + '.txt', big + i));\n\
    const groups = await Promise.all([late('0.1', ['a0.txt', 'a1.txt']), late('0.5', ['b0.txt', 'b1.txt']), late('1.3', ['c0.txt'])]);\n\
    const r = (await Promise.all(all)).concat(groups.flat());\n\
    return r.filter((x) => x === 'ok').length;";

/// The names of the files [`STAGGERED`] writes.
fn staggered_names() -> Vec<String> {
    let mut names: Vec<String> = (0..20).map(|i| format!("now{i}.txt")).collect();
    names.extend((0..12).map(|i| format!("big{i}.txt")));
    names.extend(["a0.txt", "a1.txt", "b0.txt", "b1.txt", "c0.txt"].map(str::to_owned));
    names
}

/// A policy file allowing `sleep` commands (so only the writes ask), in a
/// folder outside the workspace.
fn sleep_policy(served: &Served, tag: &str) -> std::path::PathBuf {
    let policy = served.path().parent().unwrap().join(format!("review-{tag}-{}.toml", std::process::id()));
    std::fs::write(&policy, "[rules]\nallow = [\"bash(sleep *)\"]\n").unwrap();
    policy
}

/// Every file a run wrote after the person accepted questions (never the
/// rest of the run) is named in one of them: no call that arrived during
/// a gathering, while a question was out, or past what one question shows
/// ran without being listed.
#[test]
fn every_call_that_runs_was_listed_in_an_accepted_question() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let policy = sleep_policy(&served, sdk);
        let plan = json!({
            "server": served.server(&["--config", policy.to_str().unwrap()]),
            "elicitation": "accept",
            "elicitation_delay_ms": 300,
            "steps": [{"call": execute(STAGGERED)}],
        });
        let out = client(&dir, sdk, &plan);
        let _ = std::fs::remove_file(&policy);
        let names = staggered_names();
        assert_eq!(out.structured(0)["value"], names.len(), "{sdk}: {}", out.text(0));
        for name in &names {
            assert!(served.path().join(name).exists(), "{sdk}: {name}");
            let listed = out.elicitations.iter().any(|q| q.contains(&format!("\"{name}\"")));
            assert!(listed, "{sdk}: {name} ran but no question listed it: {:#?}", out.elicitations);
        }
        for q in &out.elicitations {
            // Each question's calls stay within what one question shows.
            assert!(q.len() < 80 << 10, "{sdk}: a question of {} bytes", q.len());
        }
    }
}

/// Arguments whose `command` getter answers differently on each read, and
/// an arguments object changed after the call was made: what runs is what
/// the question showed.
const SWAPPED: &str = "let n = 0;\n\
    const args = { get command() { n += 1; return n === 1 ? 'echo shown >> count.txt' : 'echo SWAPPED >> count.txt'; } };\n\
    const o = [];\n\
    try { await tools.bash(args); o.push('ok'); } catch (e) { o.push(e.kind); }\n\
    const w = {path: 'w.txt', content: 'shown'};\n\
    const p = tools.write(w);\n\
    w.content = 'SWAPPED'; w.path = 'other.txt';\n\
    try { await p; o.push('ok'); } catch (e) { o.push(e.kind); }\n\
    return o.join(',') + ':' + n;";

#[test]
fn a_call_runs_with_the_arguments_the_question_showed() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let plan = json!({
            "server": served.server(&[]),
            "elicitation": "accept",
            "steps": [{"call": execute(SWAPPED)}],
        });
        let out = client(&dir, sdk, &plan);
        let value = out.structured(0)["value"].as_str().unwrap_or_default().to_owned();
        assert!(value.starts_with("ok,ok"), "{sdk}: {}", out.text(0));
        let count = std::fs::read_to_string(served.path().join("count.txt")).unwrap_or_default();
        assert!(!count.contains("SWAPPED"), "{sdk}: ran {count:?}; asked {:#?}", out.elicitations);
        let shown_everywhere = out.elicitations.iter().all(|q| !q.contains("SWAPPED"));
        assert!(shown_everywhere, "{sdk}: {:#?}", out.elicitations);
        assert_eq!(std::fs::read_to_string(served.path().join("w.txt")).unwrap(), "shown", "{sdk}");
        assert!(!served.path().join("other.txt").exists(), "{sdk}");
    }
}

/// Runs a command granted for the rest of the run, then the same command
/// with other spacing, a trailing newline and a comment turned into a
/// second line; returns `ok` or the error's kind for each.
const RESPACED: &str = "const o = [];\n\
    const t = async (c) => { try { await tools.bash({command: c}); o.push('ok'); } catch (e) { o.push(e.kind); } };\n\
    await t('echo a  b >> count.txt # rm x');\n\
    await t('echo a  b >> count.txt # rm x');\n\
    await t('echo a b >> count.txt # rm x');\n\
    await t('echo a  b >> count.txt #\\nrm x');\n\
    await t('echo a  b >> count.txt # rm x\\n');\n\
    return o.join(',');";

/// A command grant covers the exact text the person saw: a command that
/// collapses to the same spelling (as rules match it) is asked again.
#[test]
fn a_command_grant_covers_the_exact_text_only() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    std::fs::write(served.path().join("x"), "keep").unwrap();
    let grant = json!({"action": "accept", "content": {"rest_of_run": true}});
    let plan = json!({
        "server": served.server(&["--posture", "auto-review"]),
        "elicitation": "accept",
        "answers": [grant, {"action": "decline"}],
        "steps": [{"call": execute(RESPACED)}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["value"], "ok,ok,denied,denied,denied", "{}", out.text(0));
    assert!(served.path().join("x").exists());
    assert_eq!(out.elicitations.len(), 4, "{:#?}", out.elicitations);
}

/// A `requestState` sealed for one program does not resume the run when
/// it comes back with another program's arguments, even with an answer
/// taking the rest of the run.
#[test]
fn a_request_state_opens_for_its_own_arguments_only() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let first = execute("await tools.write({path: 'n1.txt', content: 'x'}); return 1");
    let other = execute("await tools.write({path: 'EVIL.txt', content: 'x'}); return 2");
    let answer = json!({"approve": {"action": "accept", "content": {"rest_of_run": true}}});
    let plan = json!({
        "server": served.server(&[]),
        "elicitation": "accept",
        "steps": [
            {"call": first, "allow_input_required": true},
            {"call": other, "state_from": 0, "responses": answer, "allow_input_required": true},
        ],
    });
    let out = client(&dir, "v2", &plan);
    assert!(out.steps[0].to_string().contains("requestState"), "{}", out.steps[0]);
    let refused = out.steps[1].to_string();
    assert!(refused.contains("failed verification"), "{refused}");
    assert!(!served.path().join("EVIL.txt").exists());
    assert!(!served.path().join("n1.txt").exists());
}

/// Writes `n1.txt`, then `n2.txt`.
const TWO_WRITES: &str = "await tools.write({path: 'n1.txt', content: 'x'});\n\
    await tools.write({path: 'n2.txt', content: 'x'});\n\
    return 'done';";

/// A `requestState` answered once is not answered again: the first
/// question's state, sent back a second time with an answer taking the
/// rest of the run after the person allowed its call alone, does not let
/// the run's next write (asked in the second question) pass.
#[test]
fn an_answered_request_state_cannot_be_replayed_for_a_grant() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let call = execute(TWO_WRITES);
    let once = json!({"approve": {"action": "accept", "content": {}}});
    let grant = json!({"approve": {"action": "accept", "content": {"rest_of_run": true}}});
    let plan = json!({
        "server": served.server(&[]),
        "elicitation": "accept",
        "steps": [
            {"call": call, "allow_input_required": true},
            {"call": call, "state_from": 0, "responses": once, "allow_input_required": true},
            {"call": call, "state_from": 0, "responses": grant, "allow_input_required": true},
        ],
    });
    let out = client(&dir, "v2", &plan);
    assert!(served.path().join("n1.txt").exists(), "{:#?}", out.steps);
    assert!(out.steps[1].to_string().contains("requestState"), "the second write is asked: {}", out.steps[1]);
    assert!(out.steps[2].to_string().contains("is not waiting for a decision"), "{}", out.steps[2]);
    assert!(
        !served.path().join("n2.txt").exists(),
        "a replayed state granted the next write: {:#?}",
        out.steps[2]
    );
}
