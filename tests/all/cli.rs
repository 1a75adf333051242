//! `codemode run`: output and exit codes, through the real binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// The binary with `args` in `cwd`, in the tests' state folder and with
/// no trust record, not started.
pub fn command(args: &[&str], cwd: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_codemode"));
    command
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args(args)
        .current_dir(cwd)
        // No trust record unless a test gives its own: a workspace's own
        // files are untrusted (docs/SECURITY.md).
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        // The sandbox launcher this build made (see common::engine_builder).
        .env(codemode::sandbox::LAUNCHER_ENV, env!("CARGO_BIN_EXE_codemode"));
    command
}

/// Starts the binary with `args` in `cwd`, with `env` added, every stdio
/// stream piped.
pub fn spawn(args: &[&str], cwd: &std::path::Path, env: &[(&str, &std::path::Path)]) -> std::process::Child {
    command(args, cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// Runs the binary with `args` in `cwd`, `stdin` as its input, to its end.
/// A command that ends before it reads its input (a bad flag) closes the
/// pipe: that is no failure of the helper, its output says what happened.
pub fn codemode(args: &[&str], stdin: &str, cwd: &std::path::Path) -> Output {
    let mut child = spawn(args, cwd, &[]);
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

#[test]
fn exit_codes_follow_the_run_status() {
    let ws = crate::common::workspace();
    let cases = [
        ("return 1;", 0, "completed"),
        ("throw new Error('x');", 1, "failed"),
        ("const = ;", 1, "failed"),
        ("while (true) {}", 3, "timed_out"),
    ];
    for (src, code, status) in cases {
        let out = codemode(&["run", "-", "--json", "--deadline", "0.3"], src, ws.path());
        assert_eq!(out.status.code(), Some(code), "{src}: {}", String::from_utf8_lossy(&out.stderr));
        let receipt: Value = serde_json::from_slice(&out.stdout).expect("--json prints the receipt");
        assert_eq!(receipt["status"], status, "{src}");
    }
}

#[test]
fn bad_invocations_exit_2_with_a_clear_message() {
    let ws = crate::common::workspace();
    let out = codemode(&["run", "no-such-file.js"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-file.js") && err.contains("- for stdin"), "{err}");

    let out = codemode(&["run", "-", "--deadline", "-1"], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--deadline"));

    let out = codemode(&["run", "-", "--workspace", "/no/such/dir"], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir"));

    let out = codemode(&["frobnicate"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn without_json_the_value_goes_to_stdout_and_the_summary_to_stderr() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "console.log('hi'); const r = await tools.read({path: 'a.txt'}); return r.metadata.total_lines;",
    )
    .unwrap();
    let out = codemode(&["run", "prog.js"], "", ws.path());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("completed") && err.contains("1 call") && err.contains("[log] hi"), "{err}");

    // A string is printed as JSON, so it differs from a number.
    let out = codemode(&["run", "-"], "return 'plain text';", ws.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "\"plain text\"\n");
}

#[test]
fn the_workspace_flag_sets_where_tools_look() {
    let ws = crate::common::workspace();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = codemode(
        &["run", "-", "--json", "--workspace", ws.path().to_str().unwrap()],
        "return (await tools.file_search({query: 'guide'})).content;",
        elsewhere.path(),
    );
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["value"], serde_json::json!(["docs/guide.md"]));
}

#[cfg(unix)]
#[test]
fn sigint_cancels_the_run_and_still_prints_the_receipt() {
    let ws = crate::common::workspace();
    let child = spawn(&["run", "-", "--json"], ws.path(), &[]);
    let mut child = child;
    child.stdin.take().unwrap().write_all(b"console.log('started'); while (true) {}").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "cancelled");
    assert_eq!(receipt["logs"][0]["text"], "started");
}

#[test]
fn with_json_invocation_errors_are_json_on_stdout_too() {
    let ws = crate::common::workspace();
    let out = codemode(&["run", "missing.js", "--json"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v["error"]["kind"], "invocation");
    assert!(v["error"]["message"].as_str().unwrap().contains("missing.js"));
}

#[test]
fn control_characters_from_the_program_are_escaped_on_stderr() {
    let ws = crate::common::workspace();
    let out = codemode(&["run", "-"], "console.log('\\u001b[2Jgotcha\\r');", ws.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}') && err.contains("\\u{1b}[2Jgotcha\\r"), "{err}");
}

#[cfg(unix)]
#[test]
fn sigterm_cancels_the_run_and_still_prints_the_receipt() {
    let ws = crate::common::workspace();
    let mut child = spawn(&["run", "-", "--json"], ws.path(), &[]);
    child.stdin.take().unwrap().write_all(b"while (true) {}").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "cancelled");
}

#[test]
fn call_makes_one_direct_call_through_the_gate() {
    let ws = crate::common::workspace();
    let out = codemode(&["call", "read", r#"{"path": "a.txt", "limit": 1}"#], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["metadata"]["total_lines"], 3);

    // Without a terminal the default approver denies writers.
    let out = codemode(&["call", "write", r#"{"path": "w.txt", "content": "x"}"#], "", ws.path());
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "denied");
    assert!(!ws.path().join("w.txt").exists());

    let out = codemode(
        &["call", "write", r#"{"path": "w.txt", "content": "x"}"#, "--approve", "allow", "--receipt"],
        "",
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["call"]["decision"], "approved");
    assert_eq!(v["call"]["caller"], "direct");
    assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "x");

    let out = codemode(&["call", "read", "{not json"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ARGS_JSON"));
}

#[test]
fn run_takes_mode_posture_approver_and_config() {
    let ws = crate::common::workspace();
    let prog = "try { await tools.write({path: 'w.txt', content: 'x'}); return 'wrote'; } catch (e) { return e.kind; }";
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "-", "--json"];
        args.extend_from_slice(extra);
        let out = codemode(&args, prog, ws.path());
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        let _ = std::fs::remove_file(ws.path().join("w.txt"));
        v["value"].clone()
    };
    assert_eq!(run(&[]), "denied");
    assert_eq!(run(&["--approve", "allow"]), "wrote");
    assert_eq!(run(&["--posture", "full-access"]), "wrote");
    assert_eq!(run(&["--mode", "plan", "--approve", "allow"]), "refused");

    std::fs::write(
        ws.path().join("codemode.toml"),
        "posture = \"full-access\"\n[rules]\ndeny = [\"write(w.txt)\"]\n",
    )
    .unwrap();
    assert_eq!(run(&[]), "refused", "the workspace's codemode.toml is read");
    let other = ws.path().join("other.toml");
    std::fs::write(&other, "posture = \"full-access\"\n").unwrap();
    assert_eq!(run(&["--config", other.to_str().unwrap()]), "wrote");

    std::fs::write(&other, "posture = \"full-access\"\n\n[rules]\nallow = [\"mcp__github__*\"]\n").unwrap();
    let out = codemode(&["run", "-", "--config", other.to_str().unwrap()], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":4:") && err.contains("mcp__github__*"), "{err}");

    let out = codemode(&["run", "-", "--approve", "maybe"], "return 1;", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown approver"));
}

#[cfg(unix)]
#[test]
fn a_cmd_approver_decides_for_the_cli() {
    let ws = crate::common::workspace();
    let approve = ws.path().join("approve.sh");
    std::fs::write(
        &approve,
        "#!/bin/sh\ncat > /dev/null\necho '{\"decision\": \"allow\", \"reason\": \"looks fine\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&approve, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = format!("cmd:{}", approve.display());
    let out = codemode(
        &["run", "-", "--json", "--approve", &spec],
        "await tools.write({path: 'c.txt', content: 'y'}); return 'ok';",
        ws.path(),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["calls"][0]["decision"], "approved");
    assert!(v["calls"][0]["note"].as_str().unwrap().contains("looks fine"));
}

#[cfg(unix)]
#[test]
fn on_a_terminal_the_cli_prompts_for_approval() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "try { await tools.write({path: 'w.txt', content: 'typed'}); return 'wrote'; } catch (e) { return e.kind; }",
    )
    .unwrap();
    for (answer, written) in [("y", true), ("n", false)] {
        let out = Command::new("python3")
            .env("XDG_STATE_HOME", crate::common::XDG_STATE)
            .args([driver, answer, env!("CARGO_BIN_EXE_codemode"), "run", "prog.js"])
            .current_dir(ws.path())
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{shown}");
        assert!(shown.contains("approve?") && shown.contains("write"), "{shown}");
        assert!(shown.contains(if written { "wrote" } else { "denied" }), "{shown}");
        assert_eq!(ws.path().join("w.txt").exists(), written, "answer {answer}");
        let _ = std::fs::remove_file(ws.path().join("w.txt"));
    }
}

/// Regression: a program piped on stdin met "codemode ran without a
/// terminal" although a person sat at one; the prompt asks on the
/// controlling terminal, `a` allows every later write of the run (three
/// parallel writes, one prompt), and bash's prompt has no [DESTRUCTIVE]
/// label (its annotation says a command may destroy data, not this one).
#[cfg(unix)]
#[test]
fn a_program_on_stdin_is_approved_at_the_terminal_and_a_allows_for_the_run() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("prog.js"),
        "await Promise.all(['a', 'b', 'c'].map((f) => tools.write({path: f + '.txt', content: f})));\n\
         try { await tools.bash({command: 'git log --oneline'}); } catch (e) { return e.kind; }\nreturn 'ran';",
    )
    .unwrap();
    let line = format!("exec '{}' run --json - < prog.js", env!("CARGO_BIN_EXE_codemode"));
    let out = Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args([driver, "a,n", "sh", "-c", &line])
        .env("DRIVE_PROMPT_EACH", "1")
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .current_dir(ws.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let prompts: Vec<&str> = shown.split("approval needed for ").skip(1).collect();
    assert_eq!(prompts.len(), 2, "one prompt for the three writes, one for bash: {shown}");
    assert!(prompts[0].starts_with("`write`") && prompts[0].contains("a: allows every `write`"), "{shown}");
    // bash: no label, and `a` would allow only this command.
    assert!(
        prompts[1].starts_with("`bash`\n") && prompts[1].contains("a: allows this exact command"),
        "{shown}"
    );
    let json = &shown[shown.find("{\n").unwrap_or_else(|| panic!("no receipt: {shown}"))..];
    let r: Value = serde_json::from_str(json.trim_end()).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(r["value"], "denied", "{r}");
    let writes: Vec<&Value> =
        r["calls"].as_array().unwrap().iter().filter(|c| c["tool"] == "write").collect();
    assert_eq!(writes.len(), 3);
    for w in writes {
        assert_eq!((w["decision"].as_str(), w["status"].as_str()), (Some("approved"), Some("ok")), "{r}");
        assert!(w["note"].as_str().unwrap_or_default().contains("for the rest of the run"), "{r}");
    }
    for f in ["a", "b", "c"] {
        assert_eq!(std::fs::read_to_string(ws.path().join(format!("{f}.txt"))).unwrap(), f);
    }
}

/// `--approve prompt` without a controlling terminal is a clear usage
/// error, not a prompt read from stdin.
#[cfg(unix)]
#[test]
fn approve_prompt_without_a_terminal_is_a_clear_error() {
    use std::os::unix::process::CommandExt as _;
    let ws = crate::common::workspace();
    let mut command = Command::new(env!("CARGO_BIN_EXE_codemode"));
    command.env("XDG_STATE_HOME", crate::common::XDG_STATE);
    command.args(["run", "-", "--approve", "prompt"]).current_dir(ws.path());
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A session of its own: no controlling terminal, even when the tests
    // run at one.
    unsafe {
        command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(std::io::Error::from));
    }
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"y\nreturn 1").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--approve prompt") && err.contains("/dev/tty"), "{err}");
}

/// Regression: an allow rule that did not cover a command (a quoted `|`)
/// was reported as "no approver: codemode ran without a terminal"; the
/// refusal names the rule and why it did not cover the call.
#[test]
fn a_denial_names_the_allow_rule_that_did_not_cover_the_call() {
    let ws = crate::common::workspace();
    let config = ws.path().join("policy.toml");
    std::fs::write(&config, "[rules]\nallow = [\"bash(git log*)\"]\n").unwrap();
    let prog =
        "try { await tools.bash({command: \"git log --format='%h|%s'\"}); } catch (e) { return e.message; }";
    let out = codemode(&["run", "-", "--json", "--config", config.to_str().unwrap()], prog, ws.path());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = r["value"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(message.contains("the allow rule `bash(git log*)` does not cover the command"), "{message}");
    assert!(message.contains("shell control characters") && message.contains("`|`"), "{message}");
    assert!(message.contains("ran without a terminal"), "the approver's part stays: {message}");
    // A command the rule covers runs without asking.
    let out = codemode(
        &["run", "-", "--json", "--config", config.to_str().unwrap()],
        "try { await tools.bash({command: 'git log -1'}); return 'asked no one'; } catch (e) { return e.message; }",
        ws.path(),
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["calls"][0]["decision"], "auto", "{r}");
}

/// Regression: a failed run's stack was only in the receipt; the summary
/// shows its first three frames, at the user's positions (the first at the
/// `throw`).
#[test]
fn a_failed_runs_summary_shows_the_first_stack_frames() {
    let ws = crate::common::workspace();
    let prog = "function a(s) {\n  throw new TypeError(`${s.slice(0, 10)}`);\n}\nfunction b(s) { return a(s); }\nfunction c(s) { return b(s); }\nfunction d(s) { return c(s); }\nd('abcdefghijklmnop');\n";
    let out = codemode(&["run", "-"], prog, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at line 2, column 3: TypeError: abcdefghij"), "{err}");
    let shown: Vec<&str> =
        err.lines().skip_while(|l| !l.contains("where the error was thrown")).skip(1).collect();
    assert!(shown.len() >= 4, "{err}");
    assert!(shown[0].trim_start().starts_with("at a (") && shown[0].ends_with(":2:3)"), "{err}");
    assert!(shown[1].contains("at b (") && shown[2].contains("at c ("), "{err}");
    assert!(shown[3].contains("more frames in the receipt"), "{err}");
    assert!(!err.contains("at d ("), "{err}");
}

#[test]
fn an_uncaught_tool_error_shows_no_frames_of_codemodes_prelude() {
    let ws = crate::common::workspace();
    let prog =
        "async function load(p) {\n  return await tools.read({path: p});\n}\nawait load('missing.txt');\n";
    let out = codemode(&["run", "-"], prog, ws.path());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read (call 1)") && err.contains("missing.txt"),
        "the summary names the call: {err}"
    );
    // A ToolError is made where the call settles, in the prelude: those
    // frames are codemode's, so none is shown as where the error was.
    assert!(!err.contains("codemode:prelude"), "{err}");
}

#[test]
fn the_summary_is_the_compact_rendering_and_points_at_the_saved_receipt() {
    let ws = crate::common::workspace();
    let prog = "for (let i = 0; i < 300; i++) { try { await tools.read({path: i % 2 ? 'a.txt' : 'nope' + i}); } catch {} } return 'done';";
    let out = codemode(&["run", "-"], prog, ws.path());
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.len() < 8 << 10, "{}", err.len());
    assert!(err.contains("read: 150 failed, 150 ok"), "{err}");
    assert!(err.contains("(130 more calls not ok in the receipt)"), "{err}");
    let path =
        err.lines().find_map(|l| l.trim().strip_prefix("full receipt: ")).expect("the summary says where");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(saved["calls"].as_array().unwrap().len(), 300);
    assert_eq!(saved["value"], "done");
}

#[test]
fn tools_lists_execute_tools_first_then_the_eager_tools() {
    let ws = crate::common::workspace();
    let out = codemode(&["tools", "--json"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> =
        listing["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["execute_tools", "read", "write", "edit", "file_search", "grep_files", "bash", "tool_search"]
    );
    let exec = &listing["tools"][0];
    assert_eq!(exec["source"], "synthetic");
    // A program as `code`, or tool calls as `batch` (docs/BATCH.md).
    let inputs: Vec<&String> = exec["input_schema"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(inputs, ["code", "batch"]);
    let description = exec["description"].as_str().unwrap();
    for part in
        ["ToolError", "\"cancelled\"", "declare const tools: Tools;", "\n  read(args: {", "\n  bash(args: {"]
    {
        assert!(description.contains(part), "no {part:?} in the execute_tools description");
    }
    assert_eq!(listing["tools"][1]["annotations"]["readOnlyHint"], true);
    assert_eq!(listing["tools"][1]["loading"], "eager");

    let digest = codemode(&["tools", "--digest"], "", ws.path());
    let digest = String::from_utf8(digest.stdout).unwrap();
    assert_eq!(digest.trim(), listing["catalog_sha256"].as_str().unwrap());
    assert_eq!(digest.trim().len(), 64);
    // The digest is the one receipts carry.
    let run = codemode(&["run", "-", "--json"], "return 1", ws.path());
    let receipt: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(receipt["catalog_sha256"], listing["catalog_sha256"]);

    let human = codemode(&["tools"], "", ws.path());
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.lines().next().unwrap().starts_with("execute_tools"), "{text}");
    assert!(text.contains("grep_files") && text.contains("read-only"), "{text}");
    assert!(text.contains(&format!("catalog sha256 {}", digest.trim())), "{text}");
}

#[test]
fn search_ranks_tools_and_reports_bad_regexes() {
    let ws = crate::common::workspace();
    let out = codemode(&["search", "run a shell command", "--json", "--limit", "2"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["tools"][0]["name"], "bash");
    let files = codemode(&["search", "file", "--json", "--limit", "2"], "", ws.path());
    let found: Value = serde_json::from_slice(&files.stdout).unwrap();
    assert_eq!(found["tools"].as_array().unwrap().len(), 2, "--limit bounds the list");

    let human = codemode(&["search", "^grep", "--regex"], "", ws.path());
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.starts_with("1. grep_files (native)"), "{text}");
    assert!(text.contains("args: "), "{text}");

    let bad = codemode(&["search", "(", "--regex"], "", ws.path());
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("not a valid regular expression"), "{err}");

    // Bad invocations exit 2.
    for args in
        [&["search", "read", "--limit", "500"][..], &["search", "read", "--limit", "0"], &["search", "  "]]
    {
        let out = codemode(args, "", ws.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("limit") || err.contains("QUERY is empty"), "{err}");
    }
}

#[test]
fn types_prints_declarations_that_compile() {
    let ws = crate::common::workspace();
    let out = codemode(&["types"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let dts = String::from_utf8(out.stdout).unwrap();
    for part in
        ["declare const tools: Tools;", "\n  read(args: {", "\n  bash(args: {", "declare class ToolError"]
    {
        assert!(dts.contains(part), "no {part:?} in\n{dts}");
    }
    // Both forms of tools.search compile: a query and options, or one
    // object as every tool call takes.
    let usage = "async function f() { const r = await tools.read({ path: 'a.txt' }); return r.metadata; }\nvoid f();\n\
                 async function g() { const a = await tools.search('issues', { limit: 5 }); \
                 const b = await tools.search({ query: 'issues', mode: 'regex', limit: 5 }); return [a, b]; }\nvoid g();\n";
    let (ok, output) = crate::typescript::compile(&[("tools.d.ts", &dts), ("usage.ts", usage)]);
    assert!(ok, "{output}");

    let out = codemode(&["types", "--eager", "--no-preamble"], "", ws.path());
    assert_eq!(out.status.code(), Some(0));
    let bare = String::from_utf8(out.stdout).unwrap();
    assert!(bare.starts_with("interface Tools {") && bare.contains("\n  read(args: {"), "{bare}");
    assert!(!bare.contains("declare const tools"), "{bare}");

    let out = codemode(&["types", "--workspace", "/no/such/dir"], "", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir"));
}

/// A workspace with a `.mcp.json` naming the test fixture server, whose
/// pids go to `<ws>/pids`.
pub fn mcp_workspace() -> tempfile::TempDir {
    let ws = crate::common::workspace();
    let config = serde_json::json!({"mcpServers": {"fixture": {
        "command": "python3",
        "args": [crate::mcp_support::fixture(), "normal"],
        "env": {"MCP_FIXTURE_PIDS": ws.path().join("pids").to_string_lossy()}
    }}});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    ws
}

#[test]
fn mcp_list_starts_nothing_and_mcp_tools_starts_and_lists() {
    let ws = mcp_workspace();
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut child = spawn(args, ws.path(), &[("XDG_CACHE_HOME", cache.path())]);
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    };
    let out = run(&["mcp", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["name"], "fixture");
    assert_eq!(rows[0]["state"], "not started");
    assert_eq!(rows[0]["tools"], Value::Null);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MCP servers from"),
        "the workspace config is announced"
    );
    assert!(!ws.path().join("pids").exists(), "mcp list started a server");

    // Starting a server runs its command: under the default posture it
    // needs an approval (none without a terminal).
    let out = run(&["mcp", "tools", "fixture"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("approver"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!ws.path().join("pids").exists(), "a denied start ran the server");
    let out = run(&["mcp", "tools", "fixture", "--json", "--approve", "allow"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> =
        listing["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"mcp__fixture__echo"), "{names:?}");
    let started = crate::mcp_support::pids(&ws.path().join("pids"));
    crate::mcp_support::assert_gone(&started);

    // The listing is cached: list now knows the count, and tools --all,
    // search and types show the server's tools, all starting nothing.
    let out = run(&["mcp", "list"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("not started") && text.contains(&format!("{} tools", names.len())), "{text}");
    let all: Value = serde_json::from_slice(&run(&["tools", "--all", "--json"]).stdout).unwrap();
    let echo = all["tools"].as_array().unwrap().iter().find(|t| t["name"] == "mcp__fixture__echo").unwrap();
    assert_eq!((&echo["source"], &echo["loading"]), (&json!("mcp:fixture"), &json!("deferred")));
    let listed: Value = serde_json::from_slice(&run(&["tools", "--json"]).stdout).unwrap();
    assert!(
        !listed["tools"].as_array().unwrap().iter().any(|t| t["name"] == "mcp__fixture__echo"),
        "deferred"
    );
    let found: Value =
        serde_json::from_slice(&run(&["search", "^mcp__fixture__echo$", "--regex", "--json"]).stdout)
            .unwrap();
    assert_eq!(found["tools"][0]["source"], "mcp:fixture");
    let types = String::from_utf8(run(&["types"]).stdout).unwrap();
    assert!(types.contains("declare namespace mcp__fixture"), "{types}");
    assert_eq!(crate::mcp_support::pids(&ws.path().join("pids")).len(), started.len());

    let out = run(&["mcp", "tools", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("configured: fixture"));

    // A policy that denies the connection: exit 1, nothing started.
    std::fs::write(ws.path().join("codemode.toml"), "[rules]\ndeny = [\"mcp_connect__fixture\"]\n").unwrap();
    let out = run(&["mcp", "tools", "fixture", "--approve", "allow"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mcp_connect__fixture"));
    assert_eq!(crate::mcp_support::pids(&ws.path().join("pids")).len(), started.len());
}

#[test]
fn a_run_that_starts_mcp_servers_leaves_no_process_behind() {
    let ws = mcp_workspace();
    let cache = tempfile::tempdir().unwrap();
    let mut child = spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws.path(),
        &[("XDG_CACHE_HOME", cache.path())],
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"return (await tools.mcp__fixture__echo({text: 'hi'})).content")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "completed");
    crate::mcp_support::assert_gone(&crate::mcp_support::pids(&ws.path().join("pids")));
}

#[test]
fn a_receipt_or_spill_file_that_cannot_be_written_is_said_not_lost() {
    let ws = crate::common::workspace();
    // A file where the runs folder should be: nothing can be saved there.
    crate::common::block_runs_dir(ws.path());
    let program = "const r = await tools.read({path: 'big.txt'}); return 'x'.repeat(40000);";
    std::fs::write(ws.path().join("big.txt"), "line\n".repeat(10)).unwrap();
    let out = codemode(&["run", "-"], program, ws.path());
    // Completed with its value cut (exit 6).
    assert_eq!(out.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: the receipt could not be saved"), "{stderr}");
    assert!(stderr.contains("warning: value: could not write the spill file"), "{stderr}");
    // With --json the receipt carries the spill failure as a warning.
    let out = codemode(&["run", "-", "--json"], program, ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = receipt["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with("value: could not write")),
        "{warnings:?}"
    );
    // A run with nothing to warn about has no `warnings` key.
    let fine = crate::common::workspace();
    let out = codemode(&["run", "-", "--json"], "return 1;", fine.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(receipt.get("warnings").is_none(), "{receipt}");
}

/// A program file whose name is not UTF-8 (Linux file names are bytes)
/// runs like any other: its name is not refused before it is read.
#[test]
fn a_program_file_whose_name_is_not_utf8_runs() {
    use std::os::unix::ffi::OsStrExt as _;
    let ws = crate::common::workspace();
    let name = std::ffi::OsStr::from_bytes(b"prog-\xff.js");
    std::fs::write(ws.path().join(name), "return 6 * 7;").unwrap();
    let out = command(&["run"], ws.path()).arg(name).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
}

/// A program inside work QuickJS does not interrupt (a loop of slow
/// built-ins: the interrupt check comes every 10,000 branches) does not
/// stop at a cancel; a second Ctrl-C ends the process 2.5 s later (a
/// bash call being ended gets its kill grace first), saying so
/// (it used to take minutes, or a SIGKILL), and the run, whose journal
/// was written, reads as interrupted.
#[cfg(unix)]
#[test]
fn a_second_signal_ends_a_run_that_does_not_stop() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("spin.js"),
        "const big = [];\nfor (let i = 0; i < 100000; i++) big.push({a: i, b: [i, i, i]});\n\
         await tools.write({path: 'started', content: ''});\n\
         for (;;) JSON.stringify(big);\n",
    )
    .unwrap();
    let mut child = spawn(&["run", "spin.js", "--approve", "allow"], ws.path(), &[]);
    drop(child.stdin.take());
    crate::common::wait_until_exists(&ws.path().join("started"), "the program never started");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let signal = |name: &str| crate::common::send_signal(name, child.id());
    // (Each JSON.stringify takes hundreds of ms in a debug build, and the
    // next interrupt check is thousands of them away.)
    signal("INT");
    std::thread::sleep(std::time::Duration::from_millis(100));
    signal("INT");
    let status = exited_within(&mut child, 30, "the second signal did not end the process");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("was cancelled but a second signal came"), "{err}");
    let listed = codemode(&["runs", "list", "--json"], "", ws.path());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("\"interrupted\""), "{listed:?}");
}

/// A program inside work QuickJS does not interrupt (a loop of sorts of a
/// large typed array: thousands of slow built-in calls between two
/// interrupt checks) cannot hold `codemode run` past its deadline: the
/// engine answers for it `OVERRUN_GRACE` after the deadline, with a
/// `timed_out` receipt saying so, and the process ends (it used to run
/// for minutes; engine/overrun_watch.rs).
#[test]
fn a_run_stuck_in_slow_built_ins_is_answered_after_its_deadline_and_a_grace() {
    let ws = crate::common::workspace();
    write_stuck_program(ws.path());
    let mut child =
        spawn(&["run", "stuck.js", "--approve", "allow", "--deadline", "1", "--json"], ws.path(), &[]);
    drop(child.stdin.take());
    let status = exited_within(&mut child, 90, "the run was not answered at its deadline and a grace");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(3), "{err}");
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a receipt on stdout");
    assert_eq!(receipt["status"], "timed_out", "{receipt}");
    assert_eq!(receipt["error"]["kind"], "timeout", "{receipt}");
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("QuickJS does not interrupt") && message.contains("without its VM"),
        "{message}"
    );
    // The call it made before is in its journal, as the message says.
    let run_id = receipt["run_id"].as_str().unwrap();
    let shown = codemode(&["runs", "show", run_id], "", ws.path());
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("write  approved/ok"), "{shown}");
    // Its journal ended as its receipt did: not `interrupted`, which
    // `codemode resume` would recover into the same loop.
    assert!(shown.starts_with(&format!("{run_id}  timed_out")), "{shown}");
    let resumed = codemode(&["resume", run_id], "", ws.path());
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(5), "{said}");
    assert!(said.contains("already ended (timed_out)"), "{said}");
}

/// Waits up to `secs` seconds for `child` to exit (liveness, not speed);
/// kills it and panics with `why` when it does not.
pub fn exited_within(child: &mut std::process::Child, secs: u64, why: &str) -> std::process::ExitStatus {
    let waited = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if waited.elapsed() > std::time::Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{why}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A call put to an approver before its program got stuck (past its
/// deadline, inside work QuickJS does not interrupt) does not run when
/// the approval comes after the deadline, while the VM that would cut it
/// cannot: the approved call is cut, as at any deadline.
#[cfg(unix)]
#[test]
fn a_call_approved_after_the_deadline_of_a_stuck_program_never_runs() {
    let ws = crate::common::workspace();
    let approve = ws.path().join("approve.sh");
    std::fs::write(&approve, "#!/bin/sh\ncat > /dev/null\nsleep 3\necho '{\"decision\": \"allow\"}'\n")
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&approve, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        ws.path().join("late.js"),
        "const late = tools.write({path: 'late.txt', content: 'late'});\n\
         const a = new Float64Array(1 << 20);\n\
         for (;;) a.sort();\n",
    )
    .unwrap();
    let spec = format!("cmd:{}", approve.display());
    let mut child =
        spawn(&["run", "late.js", "--approve", &spec, "--deadline", "1", "--json"], ws.path(), &[]);
    drop(child.stdin.take());
    let status = exited_within(&mut child, 90, "the run was not answered at its deadline and a grace");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!ws.path().join("late.txt").exists(), "the call approved after the deadline ran");
}

/// A run cancelled by a signal while inside work QuickJS does not
/// interrupt is answered by the engine `OVERRUN_GRACE` after the cancel:
/// `codemode run` prints its receipt (`cancelled`, saying why) and exits
/// 128 + the signal, instead of ending without one.
#[cfg(unix)]
#[test]
fn a_run_cancelled_while_stuck_in_slow_built_ins_still_gets_its_receipt() {
    let ws = crate::common::workspace();
    write_stuck_program(ws.path());
    let mut child = spawn(&["run", "stuck.js", "--approve", "allow", "--json"], ws.path(), &[]);
    drop(child.stdin.take());
    crate::common::wait_until_exists(&ws.path().join("started"), "the program never started");
    std::thread::sleep(std::time::Duration::from_millis(300));
    crate::common::send_signal("TERM", child.id());
    let status = exited_within(&mut child, 60, "the cancelled run was not answered");
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a receipt on stdout");
    assert_eq!((&receipt["status"], &receipt["error"]["kind"]), (&json!("cancelled"), &json!("cancelled")));
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(message.contains("was cancelled and had not stopped"), "{message}");
    let run_id = receipt["run_id"].as_str().unwrap();
    let shown = codemode(&["runs", "show", run_id], "", ws.path());
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.starts_with(&format!("{run_id}  cancelled")), "{shown}");
}

/// Writes `stuck.js` in `ws`: a write of `started`, then a loop of sorts
/// of a large typed array (thousands of slow built-in calls between two
/// of QuickJS's interrupt checks).
fn write_stuck_program(ws: &std::path::Path) {
    let program = "await tools.write({path: 'started', content: ''});\n\
                   const a = new Float64Array(1 << 20);\n\
                   for (;;) a.sort();\n";
    std::fs::write(ws.join("stuck.js"), program).unwrap();
}

/// A resume stuck in its replay (inside work QuickJS does not interrupt,
/// before anything new ran) and answered by the engine after its deadline
/// and a grace leaves the run paused, as a resume stopped in its replay by
/// its own VM does: its journal is not ended `timed_out`, and a person's
/// decision can still be applied by a later resume. (Which of the two
/// stops it depends on when QuickJS next looks: on an idle machine the
/// engine's watch does, on a loaded one its VM did; both must leave the
/// run paused.)
#[test]
fn a_resume_stuck_in_its_replay_leaves_the_run_paused() {
    let ws = crate::common::workspace();
    // The loop's clock reads are journaled: the replay runs it as long.
    let program = "const a = new Float64Array(1 << 21);\n\
                   const t = Date.now();\n\
                   while (Date.now() - t < 13000) a.sort();\n\
                   await tools.write({path: 'x.txt', content: 'from the run'});\n\
                   return 'done';\n";
    std::fs::write(ws.path().join("replay.js"), program).unwrap();
    let out =
        codemode(&["run", "replay.js", "--approve", "pause", "--deadline", "120", "--json"], "", ws.path());
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let paused: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = paused["run_id"].as_str().unwrap();
    let mut child = spawn(&["resume", run_id, "--allow", "1", "--deadline", "1", "--json"], ws.path(), &[]);
    drop(child.stdin.take());
    exited_within(&mut child, 120, "the stuck resume was not answered");
    let out = child.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a receipt on stdout");
    assert_eq!(receipt["status"], "paused", "{receipt}");
    let warnings = receipt["warnings"].to_string();
    assert!(warnings.contains("still paused"), "{warnings}");
    let shown = codemode(&["runs", "show", run_id], "", ws.path());
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.starts_with(&format!("{run_id}  paused")), "{shown}");
    assert!(!ws.path().join("x.txt").exists(), "the pending write ran");
}
