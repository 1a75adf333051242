//! What a newcomer meets on the command line, through the real binary:
//! limits from flags and `[limits]`, printed values, an empty program, a
//! program typed at a terminal, per-command help, `batch --ordered`.

use std::process::Command;

use serde_json::Value;

use crate::cli::codemode;

/// A program making `n` `file_search` calls, returning `n`.
fn calls(n: usize) -> String {
    format!("for (let i = 0; i < {n}; i++) await tools.file_search({{query: '*.js'}});\nreturn {n};")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn limits_come_from_codemode_toml_and_the_flags_win() {
    let ws = crate::common::workspace();
    let policy = ws.path().join("mine.toml");
    std::fs::write(&policy, "[limits]\nmax_calls = 2\n").unwrap();
    let config = policy.to_str().unwrap();

    // The file's budget ends the run at the third call, and the message
    // names the flag and the key, not a Rust field alone.
    let out = codemode(&["run", "-", "--config", config], &calls(3), ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("a run may make 2 tool calls"), "{err}");
    assert!(err.contains("--max-calls / [limits] max_calls"), "{err}");

    // The flag overrides the file.
    let out = codemode(&["run", "-", "--config", config, "--max-calls", "3"], &calls(3), ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "3\n");

    // Memory, with a unit: the program's VM runs out at 2 MiB.
    let hungry = "const a = []; while (true) a.push('x'.repeat(1000) + a.length);";
    let out = codemode(&["run", "-", "--memory", "2MiB", "--json"], hungry, ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["error"]["kind"], "memory", "{receipt}");
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(message.contains("2097152 bytes") && message.contains("--memory / [limits] memory"), "{message}");

    // The file's limits reach what `codemode tools` shows the model: the
    // execute_tools description states the call budget.
    std::fs::write(&policy, "[limits]\nmax_calls = 4321\n").unwrap();
    let out = codemode(&["tools", "--json", "--config", config], "", ws.path());
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let description = listed["tools"][0]["description"].as_str().unwrap();
    assert!(description.contains("4321"), "{description}");
}

#[test]
fn bad_limit_values_name_the_flag_or_key_and_what_is_accepted() {
    let ws = crate::common::workspace();
    for (flag, value, expected) in [
        ("--memory", "12XB", "1MiB to 16GiB"),
        ("--memory", "512KiB", "1MiB to 16GiB"),
        ("--max-calls", "0", "from 1 to 1000000"),
        ("--max-in-flight", "5000", "from 1 to 1024"),
        ("--tool-timeout", "-1", "above 0 and at most 86400"),
        // Positive, but a zero duration: named like any bad value.
        ("--deadline", "1e-300", "above 0 and at most 86400"),
    ] {
        let out = codemode(&["run", "-", flag, value], "return 1;", ws.path());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag) && err.contains(expected), "{flag} {value}: {err}");
    }
    let policy = ws.path().join("mine.toml");
    for (line, expected) in [
        ("max_calls = -5", "`limits.max_calls`: -5 is out of range"),
        ("memory = \"64 parsecs\"", "`limits.memory`: `64 parsecs`"),
        ("deadline = 0", "`limits.deadline`: 0 is out of range"),
        ("deadline = 1e-300", "`limits.deadline`: 1e-300 is out of range"),
        ("max_call = 5", "max_call"),
    ] {
        std::fs::write(&policy, format!("[limits]\n{line}\n")).unwrap();
        let out = codemode(&["run", "-", "--config", policy.to_str().unwrap()], "return 1;", ws.path());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{line}: {err}");
        assert!(err.contains("mine.toml:2") && err.contains(expected), "{line}: {err}");
    }
}

#[test]
fn an_untrusted_workspace_file_may_lower_limits_but_not_raise_them() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("codemode.toml"), "[limits]\nmax_calls = 2\n").unwrap();
    let out = codemode(&["run", "-"], &calls(3), ws.path());
    assert_eq!(out.status.code(), Some(1), "a lower budget applies: {}", text(&out.stderr));

    std::fs::write(ws.path().join("codemode.toml"), "[limits]\nmax_calls = 1\nmemory = \"1GiB\"\n").unwrap();
    let out = codemode(&["run", "-", "--json"], &calls(1), ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("[limits] memory above the default"), "the raise is said to be ignored: {err}");
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "completed");
}

#[test]
fn printed_values_are_json_in_the_programs_key_order() {
    let ws = crate::common::workspace();
    let out = codemode(&["run", "-"], "return '42';", ws.path());
    assert_eq!(text(&out.stdout), "\"42\"\n");
    let out = codemode(&["run", "-"], "return 42;", ws.path());
    assert_eq!(text(&out.stdout), "42\n");
    let out = codemode(&["run", "-"], "return {zeta: 1, alpha: {b: 2, a: 1}, mid: 'x'};", ws.path());
    let printed = text(&out.stdout);
    let keys: Vec<usize> = ["zeta", "alpha", "\"b\"", "\"a\"", "mid"]
        .iter()
        .map(|k| printed.find(k).unwrap_or_else(|| panic!("{k} in {printed}")))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys in the program's order: {printed}");
    // `--json` keeps the order too.
    let out = codemode(&["run", "-", "--json"], "return {zeta: 1, alpha: 2};", ws.path());
    let receipt = text(&out.stdout);
    assert!(receipt.find("\"zeta\"").unwrap() < receipt.find("\"alpha\"").unwrap(), "{receipt}");
}

#[test]
fn an_empty_program_is_refused_and_a_value_less_one_gets_a_hint() {
    let ws = crate::common::workspace();
    for empty in ["", "  \n", "// just a comment\n/* and another */\n"] {
        let out = codemode(&["run", "-"], empty, ws.path());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{empty:?}: {err}");
        assert!(err.contains("is empty") && err.contains("return"), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert!(!crate::common::runs_dir(ws.path()).exists(), "nothing ran");

    let out = codemode(&["run", "-"], "console.log('hi')", ws.path());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "null\n");
    assert!(text(&out.stderr).contains("hint: the program has no `return`"), "{}", text(&out.stderr));
    // A program that returns null on purpose gets no hint.
    let out = codemode(&["run", "-"], "return null;", ws.path());
    assert!(!text(&out.stderr).contains("hint"), "{}", text(&out.stderr));
}

#[test]
fn run_without_a_file_at_a_terminal_says_it_reads_stdin() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cli/type_program.py");
    let ws = crate::common::workspace();
    let out = Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args([driver, "return 6 * 7;", env!("CARGO_BIN_EXE_codemode"), "run", "--approve", "deny"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    // 125: the binary never said it was reading stdin.
    assert_eq!(out.status.code(), Some(0), "{shown}{}", text(&out.stderr));
    assert!(shown.contains("reading the program from stdin; end it with Ctrl-D"), "{shown}");
    assert!(shown.contains("42"), "{shown}");
}

/// The help of `args` (`--help` appended).
fn help(args: &[&str]) -> String {
    let ws = crate::common::workspace();
    let mut args = args.to_vec();
    args.push("--help");
    let out = codemode(&args, "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn each_commands_help_lists_what_applies_and_ends_with_its_exit_codes() {
    let commands: &[&[&str]] = &[
        &["run"],
        &["resume"],
        &["approve"],
        &["call"],
        &["batch"],
        &["tools"],
        &["search"],
        &["types"],
        &["trust"],
        &["mcp"],
        &["mcp", "list"],
        &["mcp", "tools"],
        &["mcp", "login"],
        &["mcp", "logout"],
        &["mcp", "serve"],
        &["runs"],
        &["runs", "list"],
        &["runs", "show"],
        &["runs", "prune"],
        &["completions"],
        &["man"],
    ];
    for command in commands {
        let shown = help(command);
        let last = shown.trim_end().rsplit("\n\n").next().unwrap();
        assert!(last.starts_with("Exit codes: "), "{command:?} ends with its exit codes:\n{shown}");
    }
    // Commands that only read the catalog take only where it is.
    for command in
        [&["tools"][..], &["types"], &["search"], &["mcp", "list"], &["mcp", "login"], &["mcp", "logout"]]
    {
        let shown = help(command);
        for option in ["--deadline", "--posture", "--mode", "--journal", "--max-calls", "--memory"] {
            assert!(!shown.contains(option), "{command:?} lists {option}:\n{shown}");
        }
        assert!(shown.contains("--workspace") && shown.contains("--mcp-config"), "{shown}");
    }
    assert!(help(&["search"]).contains("--approve"), "a search may start an MCP server");
    // The limits are on the commands that run calls, memory only where a
    // program runs.
    for command in [&["run"][..], &["resume"], &["mcp", "serve"]] {
        let shown = help(command);
        for option in
            ["--max-calls", "--memory", "--max-in-flight", "--tool-timeout", "--deadline", "--max-value"]
        {
            assert!(shown.contains(option), "{command:?} lacks {option}:\n{shown}");
        }
    }
    let batch = help(&["batch"]);
    assert!(
        batch.contains("--max-calls")
            && batch.contains("--ordered")
            && !batch.contains("--memory")
            && !batch.contains("--max-value"),
        "{batch}"
    );
    let run = help(&["run"]);
    assert!(run.contains(".js or .ts file"), "{run}");
    let top = help(&[]);
    assert!(!top.contains("and prints its receipt"), "{top}");
    assert!(top.contains("prints the program's value on stdout as JSON"), "{top}");
    // -q and -v apply to every command.
    for command in [&["run"][..], &["call"], &["batch"], &["mcp", "serve"], &["tools"]] {
        let shown = help(command);
        assert!(shown.contains("-q, --quiet") && shown.contains("-v, --verbose"), "{command:?}:\n{shown}");
    }
}

#[test]
fn batch_ordered_prints_items_in_input_order() {
    let ws = crate::common::workspace();
    // The first item finishes last; --ordered holds the others for it.
    let input = concat!(
        r#"{"tool": "bash", "arguments": {"command": "sleep 1; echo first"}}"#,
        "\n",
        r#"{"tool": "bash", "arguments": {"command": "echo second"}}"#,
        "\n",
        r#"{"tool": "bash", "arguments": {"command": "echo third"}}"#,
        "\n",
    );
    std::fs::write(ws.path().join("in.jsonl"), input).unwrap();
    let out = codemode(&["batch", "in.jsonl", "--ordered", "--approve", "allow"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let items: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let indexes: Vec<u64> = items.iter().map(|i| i["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2], "{items:?}");
    assert!(items[0]["content"].to_string().contains("first"), "{items:?}");
}

#[test]
fn batch_max_calls_set_by_the_user_refuses_a_longer_batch_whole() {
    let ws = crate::common::workspace();
    let input = "{\"query\": \"*.js\"}\n".repeat(3);
    std::fs::write(ws.path().join("in.jsonl"), &input).unwrap();
    let out = codemode(&["batch", "in.jsonl", "--tool", "file_search", "--max-calls", "2"], "", ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("over the call budget of 2") && err.contains("--max-calls"), "{err}");
    // Without it the budget is the batch's length.
    let out = codemode(&["batch", "in.jsonl", "--tool", "file_search"], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn max_in_flight_from_the_flag_runs_calls_one_at_a_time() {
    let ws = crate::common::workspace();
    // Each command marks its start and end in one file: with one call in
    // flight, no start comes between another call's start and end.
    let program = "await Promise.all([1, 2, 3].map(i => tools.bash({command: \
        `echo start >> order.log; sleep 0.2; echo end >> order.log`}))); return 'ok';";
    let out = codemode(&["run", "-", "--approve", "allow", "--max-in-flight", "1"], program, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = std::fs::read_to_string(ws.path().join("order.log")).unwrap();
    assert_eq!(log, "start\nend\n".repeat(3), "calls overlapped");
}

#[test]
fn tool_timeout_from_the_flag_ends_a_slow_mcp_call_and_names_the_flag() {
    let ws = crate::common::workspace();
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/misbehaving.py");
    let config =
        serde_json::json!({"mcpServers": {"slowpoke": {"command": "python3", "args": [server, "normal"]}}});
    std::fs::write(ws.path().join("servers.json"), config.to_string()).unwrap();
    let program = "try { await tools.call('mcp__slowpoke__slow', {ms: 5000}); return 'done'; } \
                   catch (e) { return e.kind + ': ' + e.message; }";
    let args = ["run", "-", "--approve", "allow", "--mcp-config", "servers.json", "--tool-timeout", "0.5"];
    let out = codemode(&args, program, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let value: String = serde_json::from_slice(&out.stdout).unwrap();
    assert!(value.starts_with("timeout: ") && value.contains("timed out after 500 ms"), "{value}");
    assert!(value.contains("--tool-timeout / [limits] tool_timeout"), "{value}");
}

#[test]
fn mcp_serve_takes_the_limit_flags() {
    let ws = crate::common::workspace();
    let mut s = crate::serve_stdio::Served::start(ws.path(), &["--max-calls", "2"]);
    s.initialize(serde_json::json!({}));
    let id = s
        .request("tools/call", serde_json::json!({"name": "execute_tools", "arguments": {"code": calls(3)}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{r}");
    let error = &r["result"]["structuredContent"]["error"];
    assert_eq!(error["kind"], "limit", "{r}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("a run may make 2 tool calls") && message.contains("--max-calls"), "{message}");
    s.close();
}

#[test]
fn a_paused_runs_resume_hint_repeats_the_limit_flags() {
    let ws = crate::common::workspace();
    let program = "await tools.write({path: 'o.txt', content: 'x'}); return 'written';";
    let out = codemode(
        &["run", "-", "--approve", "pause", "--max-calls", "50", "--memory", "128MiB", "--deadline", "9"],
        program,
        ws.path(),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let hint = err.lines().find(|l| l.contains("resume with the same options")).expect("a resume hint");
    let command = hint.split("codemode resume ").nth(1).unwrap().replace("--allow SEQ", "--allow 1");
    assert!(command.contains("--max-calls 50") && command.contains("--memory 134217728"), "{hint}");
    assert!(command.contains("--deadline 9"), "{hint}");
    let mut args = vec!["resume"];
    args.extend(command.split_whitespace());
    let out = codemode(&args, "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "\"written\"\n");
}
