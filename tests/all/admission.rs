//! The admission check, through the binary: a program whose literal tool
//! calls the gate would refuse runs no call; computed names and arguments
//! run as before (docs/RECEIPTS.md, "Admission").

use serde_json::Value;

use crate::cli::codemode;

/// Runs `source` with `codemode run - --json` and `flags` in a fresh
/// workspace; the exit code, the receipt and the workspace.
fn run(source: &str, flags: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    let ws = crate::common::workspace();
    let mut args = vec!["run", "-", "--json", "--posture", "full-access"];
    args.extend_from_slice(flags);
    let out = codemode(&args, source, ws.path());
    let receipt = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), receipt, ws)
}

#[test]
fn a_misspelled_tool_at_the_fifth_call_fails_before_the_first() {
    let source = "await tools.write({path: 'out.txt', content: 'x'});\n\
                  for (const p of ['a.txt', 'a.txt', 'a.txt']) await tools.read({path: p});\n\
                  const n = 1;\n\
                  return await tools.raed({path: 'a.txt'});\n";
    let (code, receipt, ws) = run(source, &[]);
    assert_eq!(code, Some(1), "{receipt}");
    assert_eq!(receipt["status"], "failed");
    let error = &receipt["error"];
    assert_eq!(error["kind"], "admission", "{receipt}");
    assert_eq!((error["line"].as_u64(), error["column"].as_u64()), (Some(4), Some(20)), "{receipt}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("line 4, column 20: unknown tool `raed`: did you mean `read`"), "{message}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(0), "no call was made: {receipt}");
    assert!(!ws.path().join("out.txt").exists(), "the write before it did not run");
}

#[test]
fn literal_arguments_that_cannot_fit_the_schema_are_refused_with_each_place() {
    let source = "const a = await tools.read({path: 5});\n\
                  const b = await tools.read({limit: 2});\n\
                  const c = await tools.grep_files({pattern: 'x', pathh: '.'});\n";
    let (code, receipt, _ws) = run(source, &[]);
    assert_eq!(code, Some(1));
    let error = &receipt["error"];
    assert_eq!(error["kind"], "admission", "{receipt}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("found 3 tool calls"), "{message}");
    assert!(
        message.contains("line 1, column 23: arguments do not match the input schema of `read`: at /path"),
        "{message}"
    );
    assert!(
        message.contains("line 2, column 23:") && message.contains("\"path\" is a required property"),
        "{message}"
    );
    assert!(message.contains("line 3, column 23:") && message.contains("pathh"), "{message}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(0));
}

#[test]
fn computed_names_and_arguments_run_as_before() {
    let source = "const name = 'read', p = 'a.txt', args = {path: p};\n\
                  const out = [];\n\
                  out.push((await tools[name]({path: p})).metadata.total_lines);\n\
                  out.push((await tools.read(args)).metadata.total_lines);\n\
                  out.push((await tools.read({...args, limit: 1})).metadata.total_lines);\n\
                  out.push((await tools.call(name, {[`pa${'th'}`]: p})).metadata.total_lines);\n\
                  try { await tools.maybe_there({}) } catch (e) { out.push(e.kind) }\n\
                  out.push(await tools.read({path: 5}).catch(e => e.kind));\n\
                  return out;";
    let (code, receipt, _ws) = run(source, &[]);
    assert_eq!(code, Some(0), "{receipt}");
    assert_eq!(receipt["value"], serde_json::json!([3, 3, 3, 3, "refused", "refused"]), "{receipt}");
}

#[test]
fn a_program_that_binds_its_own_tools_is_not_checked() {
    let source = "const tools = {raed: async () => 7};\nreturn await tools.raed({});";
    let (code, receipt, _ws) = run(source, &[]);
    assert_eq!((code, &receipt["value"]), (Some(0), &Value::from(7)), "{receipt}");
}

#[test]
fn the_check_can_be_turned_off_by_flag_or_policy() {
    let source = "await tools.read({path: 'a.txt'});\nreturn await tools.raed({path: 'a.txt'});";
    // Off: the first call runs, and the gate refuses the second when made.
    let (code, receipt, _ws) = run(source, &["--no-admission"]);
    assert_eq!(code, Some(1));
    assert_eq!(receipt["error"]["kind"], "exception", "{receipt}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(2), "{receipt}");
    assert_eq!(receipt["calls"][1]["decision"], "refused", "{receipt}");

    let ws = crate::common::workspace();
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "posture = \"full-access\"\nadmission = false\n").unwrap();
    let out = codemode(&["run", "-", "--json", "--config", policy.to_str().unwrap()], source, ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["error"]["kind"], "exception", "{receipt}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(2), "{receipt}");
}

#[test]
fn typescript_programs_are_checked_at_the_users_positions() {
    let source = "type R = {content: string};\nconst n: number = 1;\nexport default await tools.raed({path: 'a.txt'});";
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("p.ts"), source).unwrap();
    let out = codemode(&["run", "p.ts", "--json"], "", ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["error"]["kind"], "admission", "{receipt}");
    assert_eq!((receipt["error"]["line"].as_u64(), receipt["error"]["column"].as_u64()), (Some(3), Some(28)));
}

#[test]
fn without_json_the_reasons_go_to_stderr() {
    let ws = crate::common::workspace();
    let out = codemode(&["run", "-"], "return await tools.raed({path: 'a.txt'});", ws.path());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error (admission) at line 1, column 20: the program was not run"), "{err}");
    assert!(
        err.contains("\n  line 1, column 20: unknown tool `raed`: did you mean `read`?\n"),
        "one line per call: {err}"
    );
}

#[test]
fn mcp_tools_pass_while_their_server_can_give_them() {
    let ws = crate::cli::mcp_workspace();
    let cache = tempfile::tempdir().unwrap();
    let run = |source: &str| {
        let args = ["run", "-", "--json", "--posture", "full-access"];
        let mut child = crate::cli::spawn(&args, ws.path(), &[("XDG_CACHE_HOME", cache.path())]);
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), source.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // A tool of a server not started yet exists for the check.
    let receipt = run("return (await tools.mcp__fixture__echo({text: 'hi'})).content");
    assert_eq!(receipt["status"], "completed", "{receipt}");
    // A name no configured server can give is unknown before any call.
    let receipt =
        run("await tools.read({path: 'a.txt'});\nreturn await tools.mcp__nosuch__echo({text: 'hi'});");
    assert_eq!(receipt["error"]["kind"], "admission", "{receipt}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(0), "{receipt}");
}

#[test]
fn a_first_call_with_arguments_only_the_gate_sees_is_refused_by_the_schema() {
    // A native tool's schema is compiled on its first use: the first call
    // of `read` in a fresh process, with arguments the admission check
    // cannot see, is refused with the same text as when the schema was
    // compiled with the engine.
    let source = "const args = {path: 3};\n\
                  try { await tools.read(args); } catch (e) { return [e.kind, e.message]; }\n";
    let (code, receipt, _ws) = run(source, &[]);
    assert_eq!(code, Some(0), "{receipt}");
    assert_eq!(
        receipt["value"],
        serde_json::json!([
            "refused",
            "read (call 1): arguments do not match the input schema of `read`: at /path: 3 is not of type \"string\""
        ]),
        "{receipt}"
    );
}

/// Plan mode refuses every tool that is not read-only: a program that
/// names one is refused before its first call (it used to read, then fail
/// at the write), and a read-only program runs.
#[test]
fn plan_mode_refuses_a_program_that_names_a_writer_before_it_runs() {
    let source = "const a = await tools.read({path: 'a.txt'});\nawait tools.write({path: 'out.txt', content: 'x'});\nreturn 1;";
    let (code, receipt, ws) = run(source, &["--mode", "plan"]);
    assert_eq!(code, Some(1), "{receipt}");
    assert_eq!(receipt["error"]["kind"], "admission", "{receipt}");
    assert_eq!(receipt["error"]["line"], 2, "{receipt}");
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(message.contains("plan mode refuses `write`"), "{message}");
    assert_eq!(receipt["calls"].as_array().map(Vec::len), Some(0), "not even the read ran: {receipt}");
    assert!(!ws.path().join("out.txt").exists());
    let (code, receipt, _) =
        run("return (await tools.read({path: 'a.txt'})).metadata.total_lines;", &["--mode", "plan"]);
    assert_eq!(code, Some(0), "{receipt}");
}
