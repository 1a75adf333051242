//! Undo through the real binary (docs/JOURNAL.md, "Undo (rollback)"): a
//! run that wrote and edited 30 files is rolled back to the bytes before
//! it; a file changed since is left alone and named, and `--force`
//! restores it; a second rollback has nothing left to undo; the rollback's
//! calls go through the gate.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;

use crate::cli::codemode;

/// Every file of `ws` (but the program), with its bytes and mode.
pub(crate) fn snapshot(ws: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut files = BTreeMap::new();
    for entry in walk(ws) {
        let rel = entry.strip_prefix(ws).unwrap().to_string_lossy().into_owned();
        if rel == "prog.js" || rel.starts_with(".git") {
            continue;
        }
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode() & 0o7777;
        files.insert(rel, (std::fs::read(&entry).unwrap(), mode));
    }
    files
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// `codemode run prog.js` of `program` under full access; its run id.
pub(crate) fn run_program(ws: &Path, program: &str) -> String {
    std::fs::write(ws.join("prog.js"), program).unwrap();
    let out = codemode(&["run", "prog.js", "--posture", "full-access"], "", ws);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rest = err.split("run run-").nth(1).unwrap_or_else(|| panic!("no run id: {err}"));
    format!("run-{}", &rest[..25])
}

pub(crate) fn rollback(ws: &Path, id: &str, extra: &[&str]) -> (Output, serde_json::Value) {
    let mut args = vec!["rollback", id, "--json"];
    args.extend_from_slice(extra);
    let out = codemode(&args, "", ws);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out, report)
}

fn names(report: &serde_json::Value, field: &str) -> Vec<String> {
    report[field].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_run_that_wrote_and_edited_30_files_is_rolled_back_to_the_bytes_before_it() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    // 20 files there before the run: text, one not text, one with its own mode.
    for i in 0..20 {
        std::fs::write(ws.join(format!("f{i:02}.txt")), format!("file {i}\nline two\nend {i}\n")).unwrap();
    }
    std::fs::write(ws.join("f05.txt"), b"\xff\xfe not text \x00\x01").unwrap();
    std::fs::set_permissions(ws.join("f07.txt"), std::fs::Permissions::from_mode(0o751)).unwrap();
    let before = snapshot(ws);
    // Writes over f00-f09, edits f10-f19 (f10-f14 twice), makes n20-n29
    // (some in new folders, some made then edited), and a bash call.
    let program = r#"
        for (let i = 0; i < 10; i++) await tools.write({path: `f0${i}.txt`, content: `new ${i}\n`});
        for (let i = 10; i < 20; i++) await tools.edit({path: `f${i}.txt`, edits: [{old: "line two", new: `edited ${i}`}]});
        for (let i = 10; i < 15; i++) await tools.edit({path: `f${i}.txt`, edits: [{old: `end ${i}`, new: "twice"}]});
        for (let i = 20; i < 30; i++) {
            const path = i % 3 === 0 ? `made/deep/n${i}.txt` : `n${i}.txt`;
            await tools.write({path, content: `made ${i}\n`});
            if (i % 2 === 0) await tools.edit({path, edits: [{old: "made", new: "made and edited"}]});
        }
        await tools.write({path: "f00.txt", content: "rewritten\n"});
        await tools.bash({command: "true"});
        return "done";
    "#;
    let id = run_program(ws, program);
    assert_ne!(snapshot(ws), before);
    // A person changes one file after the run.
    std::fs::write(ws.join("f03.txt"), "mine since\n").unwrap();

    let allow = ["--posture", "full-access"];
    let (out, report) = rollback(ws, &id, &allow);
    assert_eq!(out.status.code(), Some(1), "a file left alone: exit 1: {report}");
    assert_eq!(names(&report, "changed_since"), ["f03.txt"]);
    assert_eq!(names(&report, "restored").len(), 19, "{report}");
    assert_eq!(names(&report, "removed").len(), 10, "{report}");
    let not_undone = report["not_undone"].as_array().unwrap();
    assert!(not_undone.iter().any(|c| c["tool"] == "bash"), "bash is named: {report}");
    // Newest change first: f00 was changed last, then the made files.
    assert_eq!(names(&report, "restored")[0], "f00.txt");
    let mut now = snapshot(ws);
    assert_eq!(now.remove("f03.txt").unwrap().0, b"mine since\n", "left alone");
    let mut expected = before.clone();
    expected.remove("f03.txt");
    assert_eq!(now, expected, "every other byte and mode as before; made files gone");
    // The text output names it too.
    let text = codemode(&["rollback", &id, "--posture", "full-access"], "", ws);
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(shown.contains("left alone: f03.txt changed since the run"), "{shown}");

    let (out, report) = rollback(ws, &id, &["--force", "--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(names(&report, "restored"), ["f03.txt"]);
    assert_eq!(snapshot(ws), before, "byte for byte, with --force");

    let (out, report) = rollback(ws, &id, &allow);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(report["nothing_left"], true, "{report}");
    let text = codemode(&["rollback", &id], "", ws);
    assert!(String::from_utf8_lossy(&text.stdout).contains("nothing left to undo"));
    // The run shows which calls were reverted, and by which rollback.
    let show = codemode(&["runs", "show", &id], "", ws);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("reverted by run-"), "{shown}");
}

/// A rollback runs as a batch, which keeps no journal: rolling back the
/// rollback's own run is refused saying so, not with the reasons of a
/// program run (`--journal off`, a removed journal) that do not apply.
#[test]
fn a_rollbacks_own_run_is_refused_as_a_batch_without_a_journal() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let id = run_program(ws, "await tools.write({path: 'a.txt', content: 'new'}); return 1;");
    let (out, report) = rollback(ws, &id, &["--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let rollback_run = report["rollback_run_id"].as_str().unwrap_or_else(|| panic!("{report}")).to_owned();
    let out = codemode(&["rollback", &rollback_run, "--posture", "full-access"], "", ws);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("a rollback, which runs as a batch"), "{err}");
}

#[test]
fn a_rollback_goes_through_the_gate_like_any_write() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::create_dir(ws.join("keep")).unwrap();
    std::fs::write(ws.join("keep/a.txt"), "a\n").unwrap();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let before = snapshot(ws);
    let id = run_program(
        ws,
        r#"await tools.write({path: "keep/a.txt", content: "A\n"}); await tools.write({path: "b.txt", content: "B\n"});"#,
    );
    let config =
        ws.parent().unwrap().join(format!("{}-deny.toml", ws.file_name().unwrap().to_string_lossy()));
    std::fs::write(&config, "[rules]\ndeny = [\"write(keep/**)\"]\n").unwrap();
    let (out, report) =
        rollback(ws, &id, &["--config", config.to_str().unwrap(), "--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(names(&report, "restored"), ["b.txt"]);
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed[0][0], "keep/a.txt");
    assert!(failed[0][1].as_str().unwrap().contains("deny rule"), "{report}");
    assert_eq!(std::fs::read(ws.join("keep/a.txt")).unwrap(), b"A\n", "a denied path is not written");
    // Under the ask posture with a denying approver, nothing is written.
    let (_, report) = rollback(ws, &id, &["--approve", "deny"]);
    assert!(report["failed"].as_array().unwrap().iter().any(|f| f[0] == "keep/a.txt"), "{report}");
    // Allowed, it goes through; its own receipt names each file's call.
    let (out, report) = rollback(ws, &id, &["--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(snapshot(ws), before);
    let receipt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report["receipt"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(receipt["calls"][0]["tool"], "write");
    let _ = std::fs::remove_file(config);
}

#[test]
fn journaling_off_keeps_no_pre_images_and_says_so() {
    let ws = crate::common::workspace();
    let out = codemode(&["rollback", "run-20260101T000000Z-00000000", "--journal", "off"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("journaling is off"));
    let out = codemode(&["rollback", "run-20260101T000000Z-00000000"], "", ws.path());
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_served_model_asks_for_a_rollback_and_a_person_approves_each_restore() {
    use serde_json::json;
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let before = snapshot(ws);
    let mut s = crate::serve_stdio::Served::start(ws, &[]);
    s.initialize(json!({"elicitation": {}}));
    // The person accepts what the model's program writes, and (later) the
    // rollback of one file but not the other.
    let mut asked: Vec<String> = Vec::new();
    let answer = |s: &mut crate::serve_stdio::Served, m: serde_json::Value, asked: &mut Vec<String>| {
        if m["method"] == "elicitation/create" {
            let message = m["params"]["message"].as_str().unwrap().to_owned();
            let action = if message.contains("made.txt") && message.contains("rollback") {
                "decline"
            } else {
                "accept"
            };
            asked.push(message);
            let mut result = json!({"action": action});
            if action == "accept" {
                result["content"] = json!({});
            }
            s.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
        }
    };
    let code = r#"await tools.write({path: "a.txt", content: "A\n"}); await tools.write({path: "made.txt", content: "m\n"}); return 1;"#;
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |s, m| answer(s, m, &mut asked));
    let run_id = r["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(r["result"]["structuredContent"]["status"], "completed", "{r}");
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"rollback": run_id}}));
    let r = s.response(id, |s, m| answer(s, m, &mut asked));
    let value = &r["result"]["structuredContent"]["value"];
    assert_eq!(value["restored"], json!(["a.txt"]), "{r}");
    assert_eq!(value["failed"][0][0], "made.txt", "declined by the person: {r}");
    assert!(asked.iter().filter(|m| m.contains("rollback")).count() >= 1, "the person was asked: {asked:?}");
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), before["a.txt"].0);
    assert!(ws.join("made.txt").exists(), "a declined restore changes nothing");
    // The model cannot force, nor add fields.
    let id = s.request(
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"rollback": run_id, "force": true}}),
    );
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{r}");
    // Nothing left to undo is no error, and, as every such result of a
    // tool with an outputSchema must, it carries structuredContent that
    // matches the schema (the official SDK client throws otherwise). Its
    // text names the calls a rollback cannot undo (a bash call here).
    let code = r#"await tools.bash({command: "true"}); return 1;"#;
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |s, m| answer(s, m, &mut asked));
    let no_file = r["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"rollback": no_file}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], false, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("nothing left to undo"), "{r}");
    assert!(text.contains("\nnot undone: call 1 bash: "), "{r}");
    let structured = &r["result"]["structuredContent"];
    assert_eq!(structured["value"]["nothing_left"], true, "{r}");
    let id = s.request("tools/list", json!({}));
    let listed = s.response(id, |_, _| {});
    let tool =
        listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "execute_tools").unwrap();
    let schema = jsonschema::validator_for(&tool["outputSchema"]).unwrap();
    assert!(schema.is_valid(structured), "{structured}");
    assert!(s.close().success());

    // Where approvals pause (no person can be asked through the server),
    // a restore says what the person does instead.
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let mut s = crate::serve_stdio::Served::start(ws, &["--approve", "allow"]);
    s.initialize(json!({}));
    let code = r#"await tools.write({path: "b.txt", content: "B\n"}); return 1;"#;
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |_, _| {});
    let run_id = r["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    assert!(s.close().success());
    let mut s = crate::serve_stdio::Served::start(ws, &[]);
    s.initialize(json!({}));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"rollback": run_id}}));
    let r = s.response(id, |_, _| {});
    let failed = &r["result"]["structuredContent"]["value"]["failed"];
    assert_eq!(failed[0][0], "b.txt", "{r}");
    assert!(
        failed[0][1].as_str().unwrap().contains(&format!("`codemode rollback {run_id}` in a terminal")),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "B\n");
    assert!(s.close().success());
}

/// A policy names the call that undoes an MCP tool's call; the rollback
/// makes it against the real server (server-memory), in seq order with the
/// file restores, and the entity the run made is gone.
#[test]
fn a_policy_named_compensation_undoes_an_mcp_call_against_a_real_server() {
    use serde_json::json;
    let ws = crate::common::workspace();
    let ws = ws.path();
    let outside = tempfile::tempdir().unwrap();
    let memory = outside.path().join("memory.jsonl");
    let mcp = outside.path().join("mcp.json");
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"memory": {"command": "node",
            "args": [crate::mcp_support::node_server("server-memory")],
            "env": {"MEMORY_FILE_PATH": memory}}}})
        .to_string(),
    )
    .unwrap();
    let config = outside.path().join("codemode.toml");
    std::fs::write(
        &config,
        r#"[tools."mcp__memory__create_entities"]
compensate = { tool = "mcp__memory__delete_entities", args = { entityNames = ["{args.entities.0.name}"] } }
"#,
    )
    .unwrap();
    let (mcp, config) = (mcp.to_str().unwrap(), config.to_str().unwrap());
    let common = ["--posture", "full-access", "--mcp-config", mcp, "--config", config];
    std::fs::write(ws.join("prog.js"), r#"
        await tools.write({path: "c.txt", content: "c\n"});
        await tools.call("mcp__memory__create_entities", {entities: [{name: "undo-me", entityType: "note", observations: ["x"]}]});
        await tools.write({path: "b.txt", content: "b\n"});
        await tools.call("mcp__memory__add_observations", {observations: [{entityName: "undo-me", contents: ["y"]}]});
        return 1;"#).unwrap();
    let mut args = vec!["run", "prog.js"];
    args.extend_from_slice(&common);
    let out = codemode(&args, "", ws);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let id = format!("run-{}", &err.split("run run-").nth(1).unwrap()[..25]);
    assert!(std::fs::read_to_string(&memory).unwrap().contains("undo-me"));

    let (out, report) = rollback(ws, &id, &common);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["compensated"][0]["seq"], 2, "{report}");
    assert_eq!(report["compensated"][0]["by"], "mcp__memory__delete_entities");
    assert_eq!(names(&report, "removed"), ["b.txt", "c.txt"], "{report}");
    // add_observations has none named: said, not undone.
    let not_undone = report["not_undone"].as_array().unwrap();
    assert!(
        not_undone.iter().any(|c| c["seq"] == 4 && c["reason"].as_str().unwrap().contains("compensate")),
        "{report}"
    );
    assert!(!std::fs::read_to_string(&memory).unwrap().contains("undo-me"), "the entity is gone");
    assert!(!ws.join("c.txt").exists() && !ws.join("b.txt").exists());
    // Newest first, the compensation between the two restores.
    let receipt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report["receipt"].as_str().unwrap()).unwrap()).unwrap();
    let tools: Vec<&str> =
        receipt["calls"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["write", "mcp__memory__delete_entities", "write"], "{receipt}");
    let (_, report) = rollback(ws, &id, &common);
    assert_eq!(report["nothing_left"], true, "{report}");
}

/// The same through the PostgreSQL store: pre-images in its rows, the
/// rollback marks the run there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_journaled_in_postgresql_is_rolled_back_and_marked() {
    let Some(db) = crate::journal_postgres::database("rollback").await else { return };
    let ws = crate::common::workspace();
    let ws = ws.path().to_owned();
    let url = db.url.clone();
    let before = snapshot(&ws);
    let (report, again, shown) = tokio::task::spawn_blocking(move || {
        std::fs::write(
            ws.join("prog.js"),
            r#"await tools.edit({path: "a.txt", edits: [{old: "beta", new: "BETA"}]});
            await tools.write({path: "new.txt", content: "n"});"#,
        )
        .unwrap();
        let out = codemode(&["run", "prog.js", "--posture", "full-access", "--journal", &url], "", &ws);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        let id = format!("run-{}", &err.split("run run-").nth(1).unwrap()[..25]);
        let (_, report) = rollback(&ws, &id, &["--posture", "full-access", "--journal", &url]);
        let (_, again) = rollback(&ws, &id, &["--journal", &url]);
        let shown = codemode(&["runs", "show", &id, "--journal", &url], "", &ws);
        assert_eq!(snapshot(&ws), before);
        (report, again, String::from_utf8_lossy(&shown.stdout).into_owned())
    })
    .await
    .unwrap();
    assert_eq!(names(&report, "restored"), ["a.txt"], "{report}");
    assert_eq!(names(&report, "removed"), ["new.txt"], "{report}");
    assert_eq!(report["reverted"], serde_json::json!([1, 2]), "{report}");
    assert_eq!(again["nothing_left"], true, "{again}");
    assert!(shown.contains("reverted by run-"), "{shown}");
    db.drop_schema().await;
}

/// Pre-images are bounded (8 MiB a file, 16 MiB a run): past a bound the
/// call still runs, its receipt entry says it is not undoable, and the
/// rollback names it and leaves the file.
#[test]
fn a_call_past_the_pre_image_bounds_is_marked_not_undoable() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("huge.txt"), vec![b'h'; 9 << 20]).unwrap();
    for name in ["b1.txt", "b2.txt", "b3.txt"] {
        std::fs::write(ws.join(name), vec![b'b'; 6 << 20]).unwrap();
    }
    std::fs::write(
        ws.join("prog.js"),
        r#"for (const path of ["huge.txt", "b1.txt", "b2.txt", "b3.txt"]) await tools.write({path, content: "small"});"#,
    )
    .unwrap();
    let out = codemode(&["run", "prog.js", "--posture", "full-access", "--json"], "", ws);
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes: Vec<String> = receipt["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["note"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(notes[0].contains("not undoable") && notes[0].contains("8 MiB"), "{notes:?}");
    assert!(notes[1].is_empty() && notes[2].is_empty(), "{notes:?}");
    assert!(notes[3].contains("not undoable") && notes[3].contains("16 MiB"), "{notes:?}");
    let id = receipt["run_id"].as_str().unwrap();
    let (out, report) = rollback(ws, id, &["--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(names(&report, "restored"), ["b2.txt", "b1.txt"], "{report}");
    let not_undone: Vec<u64> =
        report["not_undone"].as_array().unwrap().iter().map(|c| c["seq"].as_u64().unwrap()).collect();
    assert_eq!(not_undone, [1, 4], "{report}");
    assert_eq!(std::fs::read(ws.join("huge.txt")).unwrap(), b"small");
    assert_eq!(std::fs::read(ws.join("b1.txt")).unwrap().len(), 6 << 20);
}

/// A run that can still go on (paused here) is not rolled back under
/// itself: a resume would replay against the restored files. Once ended
/// with `codemode runs cancel`, it is.
#[test]
fn a_paused_run_is_ended_before_it_is_rolled_back() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let policy = config.path().join("policy.toml");
    std::fs::write(&policy, "posture = \"full-access\"\n[rules]\nask = [\"bash\"]\n").unwrap();
    let policy = policy.to_str().unwrap();
    std::fs::write(ws.path().join("a.txt"), "old").unwrap();
    std::fs::write(
        ws.path().join("prog.js"),
        "await tools.write({path: 'a.txt', content: 'new'}); await tools.bash({command: 'true'}); return 1;",
    )
    .unwrap();
    let run =
        codemode(&["run", "prog.js", "--config", policy, "--approve", "pause", "--json"], "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let paused: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = paused["run_id"].as_str().unwrap();
    let refused = codemode(&["rollback", id, "--config", policy], "", ws.path());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(5), "{err}");
    assert!(err.contains("is paused and can still go on") && err.contains("runs cancel"), "{err}");
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "new");
    let cancel = codemode(&["runs", "cancel", id], "", ws.path());
    assert_eq!(cancel.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancel.stderr));
    let (out, report) = rollback(ws.path(), id, &["--config", policy]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).unwrap(), "old");
}

/// A process that died between a `write`'s pre-image and its post-image
/// (the pre-image is durable before the rename; the post-image follows
/// it) leaves the file either as it was before that call (no rename) or
/// with what the call wrote (renamed). Both are what the run left: the
/// rollback restores the file rather than calling it changed since the
/// run, which pushed the person to `--force`, the flag that overwrites
/// real changes. The journal is cut as such a crash leaves it.
#[test]
fn a_write_cut_between_its_pre_image_and_post_image_is_rolled_back() {
    for renamed in [false, true] {
        let ws = crate::common::workspace();
        let ws = ws.path();
        std::fs::write(ws.join("same.txt"), "original\n").unwrap();
        let id = run_program(
            ws,
            "await tools.write({path: 'same.txt', content: 'one\\n'});\n\
             await tools.write({path: 'same.txt', content: 'two\\n'});",
        );
        let journal = crate::common::runs_dir(ws).join(&id).join("journal.jsonl");
        let lines: Vec<String> =
            std::fs::read_to_string(&journal).unwrap().lines().map(str::to_owned).collect();
        let last_post = lines.iter().rposition(|l| l.contains(r#""t":"postimage""#)).unwrap();
        assert!(lines[last_post].contains(r#""seq":2"#), "{}", lines[last_post]);
        let cut: String = lines.iter().take(last_post).map(|l| format!("{l}\n")).collect();
        std::fs::write(&journal, cut).unwrap();
        if !renamed {
            std::fs::write(ws.join("same.txt"), "one\n").unwrap();
        }
        // The run reads as interrupted now; it is ended before its rollback.
        let cancelled = codemode(&["runs", "cancel", &id], "", ws);
        assert_eq!(cancelled.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancelled.stderr));
        let (out, report) = rollback(ws, &id, &["--posture", "full-access"]);
        assert_eq!(out.status.code(), Some(0), "renamed {renamed}: {report}");
        assert_eq!(names(&report, "restored"), ["same.txt"], "renamed {renamed}: {report}");
        assert_eq!(std::fs::read_to_string(ws.join("same.txt")).unwrap(), "original\n");
    }
}

/// The cut write's own pre-image is not taken for what the run left: it
/// may be a change someone else made between the run's calls (here a
/// command the run ran, standing for another writer), which the rollback
/// must not overwrite without `--force`.
#[test]
fn a_cut_writes_pre_image_made_by_another_is_left_alone() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("f.txt"), "A").unwrap();
    let id = run_program(
        ws,
        "await tools.write({path: 'f.txt', content: 'B'});\n\
         await tools.bash({command: \"printf 'someone else' > f.txt\"});\n\
         await tools.write({path: 'f.txt', content: 'C'});",
    );
    let journal = crate::common::runs_dir(ws).join(&id).join("journal.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&journal).unwrap().lines().map(str::to_owned).collect();
    let last_post = lines.iter().rposition(|l| l.contains(r#""t":"postimage""#)).unwrap();
    assert!(lines[last_post].contains(r#""seq":3"#), "{}", lines[last_post]);
    let cut: String = lines.iter().take(last_post).map(|l| format!("{l}\n")).collect();
    std::fs::write(&journal, cut).unwrap();
    // The last write's rename did not happen: the other writer's bytes are there.
    std::fs::write(ws.join("f.txt"), "someone else").unwrap();
    let cancelled = codemode(&["runs", "cancel", &id], "", ws);
    assert_eq!(cancelled.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancelled.stderr));
    let (out, report) = rollback(ws, &id, &["--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(names(&report, "changed_since"), ["f.txt"], "{report}");
    assert_eq!(std::fs::read_to_string(ws.join("f.txt")).unwrap(), "someone else");
}
