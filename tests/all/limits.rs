//! Every limit ends in its own error kind or call status, and the engine
//! stays usable afterwards.

use std::time::{Duration, Instant};

use codemode::{Limits, Program, receipt::CallStatus, receipt::ErrorKind, receipt::RunStatus};
use serde_json::json;

use crate::common::{deadline, engine_with, workspace};

#[test]
fn a_busy_loop_times_out_and_the_next_program_runs() {
    let ws = workspace();
    let engine = engine_with(&ws, deadline(300));
    let started = Instant::now();
    let r = engine.execute_blocking(Program::new(
        "let n = 0;\nfunction spin() { while (true) { n++; } }\nawait tools.echo({});\nspin();",
    ));
    let took = started.elapsed();
    assert_eq!(r.status, RunStatus::TimedOut);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout);
    // QuickJS does not record where its interrupt check stopped a frame
    // (the frame shows its last call, or its start): no position is
    // given, and the stack starts at the call the loop is in, which is
    // where it says (docs/RECEIPTS.md).
    assert_eq!((e.line, e.column), (None, None), "{e:?}");
    assert_eq!(e.stack.as_deref().map(str::trim), Some("at <anonymous> (program.js:4:1)"), "{e:?}");
    assert_eq!(r.calls[0].status, CallStatus::Ok);
    // The deadline plus a small slack (the interrupt handler runs every few
    // thousand JS operations): a functional bound, not a benchmark.
    assert!(took < Duration::from_millis(300 + 700), "took {took:?}");
    let next = engine.execute_blocking(Program::new("return (await tools.echo({ok: 1})).content.ok;"));
    assert_eq!(next.status, RunStatus::Completed);
    assert_eq!(next.value, json!(1));
}

#[test]
fn a_deadline_while_waiting_on_calls_leaves_them_in_flight() {
    let ws = workspace();
    let engine = engine_with(&ws, deadline(300));
    let r = engine.execute_blocking(Program::new(
        "await tools.sleep({ms: 1});\nawait Promise.all([tools.sleep({ms: 60000}), tools.sleep({ms: 60000})]);",
    ));
    assert_eq!(r.status, RunStatus::TimedOut);
    assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Timeout);
    let statuses: Vec<CallStatus> = r.calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [CallStatus::Ok, CallStatus::InFlight, CallStatus::InFlight]);
    assert!(r.calls[1].note.as_deref().unwrap().contains("deadline"));
}

#[test]
fn a_paused_clock_does_not_count_against_the_deadline() {
    let ws = workspace();
    let engine = engine_with(&ws, deadline(300));
    let run = engine.start(Program::new("await tools.sleep({ms: 700}); return 'made it';"));
    let pause = run.pause_clock();
    std::thread::sleep(Duration::from_millis(900));
    drop(pause);
    let r = run.wait_blocking();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!("made it"));
    // The program ended (at about 700 ms) while the clock was still paused.
    assert!(r.approval_wait_ms >= 600.0, "{}", r.approval_wait_ms);
}

#[test]
fn cancelling_a_run_returns_a_cancelled_receipt() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let run = engine.start(Program::new("await tools.echo({});\nawait tools.sleep({ms: 60000});"));
    std::thread::sleep(Duration::from_millis(100));
    run.cancel();
    let r = run.wait_blocking();
    assert_eq!(r.status, RunStatus::Cancelled);
    assert_eq!(r.error.unwrap().kind, ErrorKind::Cancelled);
    assert_eq!(r.calls[0].status, CallStatus::Ok);
    assert_eq!(r.calls[1].status, CallStatus::InFlight);
}

#[test]
fn allocating_past_the_memory_limit_is_kind_memory_and_the_engine_stays_usable() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.memory_bytes = 16 << 20;
    let engine = engine_with(&ws, limits);
    for src in [
        "const a = []; while (true) a.push('x'.repeat(1000) + a.length);",
        "const a = []; while (true) a.push(new Array(10000).fill(1.5));",
    ] {
        let r = engine.execute_blocking(Program::new(src));
        assert_eq!(r.status, RunStatus::Failed, "{src}");
        assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Memory, "{src}: {:?}", r.error);
    }
    let next = engine.execute_blocking(Program::new("return [1, 2, 3].length;"));
    assert_eq!(next.value, json!(3));
}

#[test]
fn deep_recursion_is_kind_stack() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let r = engine.execute_blocking(Program::new("function f(n) { return f(n + 1) + 1; }\nreturn f(0);"));
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Stack);
    assert_eq!(e.line, Some(1));
    assert_eq!(engine.execute_blocking(Program::new("return 'fine';")).value, json!("fine"));
}

#[test]
fn a_value_nested_200_levels_deep_is_kind_limit_and_says_how_deep() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let r = engine
        .execute_blocking(Program::new("let v = 1;\nfor (let i = 0; i < 200; i++) v = [v];\nreturn v;"));
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Limit, "{}", e.message);
    assert!(
        e.message.contains("the return value") && e.message.contains("nest 200 levels deep"),
        "{}",
        e.message
    );
    // The same value as a call's arguments: the call is refused, saying why.
    let r = engine.execute_blocking(Program::new(
        "let v = 1;\nfor (let i = 0; i < 200; i++) v = {a: v};\ntry { await tools.echo({v}); } catch (e) { return [e.kind, e.message]; }",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value[0], json!("refused"));
    let message = r.value[1].as_str().unwrap();
    assert!(message.contains("nest 201 levels deep, over the limit of 127"), "{message}");
    assert_eq!(r.calls[0].status, CallStatus::Refused);
    // 127 levels, the most serde_json reads, come back whole both ways.
    let r = engine.execute_blocking(Program::new(
        "let v = 1;\nfor (let i = 0; i < 126; i++) v = [v];\nreturn (await tools.echo({v})).content.v;",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let mut depth = 0;
    let mut at = &r.value;
    while let Some(inner) = at.get(0) {
        depth += 1;
        at = inner;
    }
    assert_eq!((depth, at), (126, &json!(1)));
}

#[test]
fn the_call_budget_ends_the_run_with_kind_limit() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.max_calls = 5;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "for (let i = 0; ; i++) { try { await tools.echo({i}); } catch (e) { console.log('caught', e.kind); } }",
    ));
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(e.message.contains("5 tool calls"), "{}", e.message);
    assert_eq!(r.calls.len(), 6, "five calls ran and the sixth was refused");
    assert!(r.calls[..5].iter().all(|c| c.status == CallStatus::Ok));
    assert_eq!(r.calls[5].status, CallStatus::Refused);
}

#[test]
fn source_over_the_limit_is_refused_before_running() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.source_bytes = 100;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(format!("await tools.echo({{}}); // {}", "x".repeat(200))));
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.unwrap().kind, ErrorKind::Limit);
    assert!(r.calls.is_empty());
}

#[test]
fn a_slow_tool_is_cut_by_its_timeout() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.tool_timeout = Duration::from_millis(50);
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "try { await tools.sleep({ms: 10000}); } catch (e) { return [e.kind, e.message]; }",
    ));
    assert_eq!(r.value[0], json!("timeout"), "{:?}", r.value);
    assert!(r.value[1].as_str().unwrap().contains("50 ms"));
    assert_eq!(r.calls[0].status, CallStatus::Failed);
}

#[test]
fn a_promise_nothing_can_settle_ends_the_run() {
    let r = crate::common::run("await new Promise(() => {});");
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.unwrap().kind, ErrorKind::Limit);
}

#[test]
fn the_log_bound_counts_what_it_drops() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.log_lines = 10;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new("for (let i = 0; i < 25; i++) console.log('line', i);"));
    assert_eq!(r.logs.len(), 10);
    assert_eq!(r.logs[9].text, "line 9");
    assert_eq!(r.logs_dropped, 15);
}

#[test]
fn the_log_byte_bound_cuts_and_counts() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.log_bytes = 1000;
    let engine = engine_with(&ws, limits);
    let r = engine
        .execute_blocking(Program::new("for (let i = 0; i < 5; i++) console.log(String(i).repeat(300));"));
    let kept: usize = r.logs.iter().map(|l| l.text.len()).sum();
    assert!(kept <= 1000, "{kept}");
    assert_eq!(r.logs.len(), 4, "three whole lines and one cut");
    assert!(r.logs[3].text.ends_with("[cut at the log bound; 300 bytes in all]"), "{}", r.logs[3].text);
    assert_eq!(r.logs_dropped, 1);
}

#[test]
fn invalid_limits_are_refused_at_build_naming_the_field() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.stack_bytes = 64 << 20;
    let err = crate::common::builder(&ws).limits(limits).build().unwrap_err();
    assert!(err.to_string().contains("stack_bytes"), "{err}");
}

#[test]
fn deeply_nested_programs_end_with_a_receipt_not_an_abort() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let deep = |open: &str, close: &str, n: usize| format!("return {}1{};", open.repeat(n), close.repeat(n));
    // 10,000 parentheses and 30,000 brackets: past QuickJS's stack, well
    // under the source limit; the parser must not overflow its thread.
    for source in [deep("(", ")", 10_000), deep("[", "]", 30_000).replace("1", "")] {
        let r = engine.execute_blocking(Program::new(source));
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Stack, "{:?}", r.error);
    }
    // Deep TypeScript types are stripped, not evaluated: the program runs.
    let ts = format!("let x: {}number{} = []; return x.length", "[".repeat(5_000), "]".repeat(5_000));
    let r = engine.execute_blocking(Program::named("deep.ts", ts));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(0));
    // Nested type arguments count as `<` the parser may try again
    // (speculation.rs): 8 deep run; 5,000 deep are refused before the
    // parse, with kind `limit`, not parsed.
    let generic =
        |n: usize| format!("let x: {}number{} = []; return x.length", "Array<".repeat(n), ">".repeat(n));
    let r = engine.execute_blocking(Program::named("deep.ts", generic(8)));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let r = engine.execute_blocking(Program::named("deep.ts", generic(5_000)));
    assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Limit, "{:?}", r.error);
    // And the engine goes on.
    assert_eq!(engine.execute_blocking(Program::new("return 2")).value, json!(2));
}

/// Issue 31: the files a command names were read with a file-system lookup
/// per word and `PATH` entry and no bound, so a cloned workspace's
/// `.mcp.json` naming a server with thousands of script words held `codemode
/// run` for seconds to minutes before the program started. Now the reading
/// stops at its bound, and the untrusted server is not started, saying why.
#[test]
fn a_workspace_server_naming_thousands_of_files_is_read_to_a_bound() {
    let ws = workspace();
    let words: Vec<String> = (0..20_000).map(|i| format!("s{i}.py")).collect();
    let config = json!({"mcpServers": {"many": {"command": "python3", "args": words}}});
    std::fs::write(ws.path().join(".mcp.json"), config.to_string()).unwrap();
    // Unbounded, this held `codemode run` 152 s before the program started
    // (debug build); bounded, 0.17 s (figures, not asserted).
    let mut child = crate::cli::spawn(&["run", "-"], ws.path(), &[]);
    {
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"return 1;").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server `many` is not started"), "{stderr}");
    assert!(stderr.contains("more than 1000 files"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "{stderr}");
}

/// The bound above is per command: a configuration of many servers, each
/// naming just under 1,000 files, or a server whose `env` names thousands
/// of paths (`NODE_PATH=a0:a1:...`), was read in time quadratic in the
/// total (every file kept without repeats by a scan of those before, in the
/// pins, the protections and the `env` reading): 10 servers of 990 script
/// words held `codemode run` 30 s, a `NODE_PATH` of 20,000 entries 244 s.
/// Now each list is kept with a set and the `env` is read to the same
/// bound as a command's words.
#[test]
fn many_workspace_servers_and_a_long_env_path_list_are_read_to_their_bounds() {
    let ws = workspace();
    let mut servers = serde_json::Map::new();
    for k in 0..20 {
        let words: Vec<String> = (0..990).map(|i| format!("k{k}_{i}.py")).collect();
        servers.insert(format!("s{k}"), json!({"command": "python3", "args": words}));
    }
    let list: Vec<String> = (0..20_000).map(|i| format!("a{i}")).collect();
    servers.insert(
        "envy".into(),
        json!({"command": "node", "args": ["x.js"], "env": {"NODE_PATH": list.join(":")}}),
    );
    std::fs::write(ws.path().join(".mcp.json"), json!({"mcpServers": servers}).to_string()).unwrap();
    // Before, repeats were found by scanning every earlier entry: this
    // workspace held `codemode run` for minutes before the program started
    // (10,000 `NODE_PATH` entries: 68 s; 20,000: 244 s); now about a second
    // (a figure, not asserted: docs/FUZZING.md).
    let mut child = crate::cli::spawn(&["run", "-"], ws.path(), &[]);
    {
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"return 1;").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server `envy` is not started"), "{stderr}");
    assert!(stderr.contains("more than 4096 paths"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "{stderr}");
}
