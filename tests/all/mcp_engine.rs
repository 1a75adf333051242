//! MCP servers through the engine: lazy start behind the gate's
//! `mcp_connect__<server>`, the schema cache feeding the catalog without a
//! start, annotations reaching the gate, a program composing two real
//! servers, and `list_changed` refreshing the catalog.

use std::path::Path;

use codemode::mcp::{PoolOptions, ServerState};
use codemode::{Engine, Policy, Program, policy::Posture, policy::Rule, receipt::RunStatus};
use serde_json::{Value, json};

use crate::mcp_support::*;

fn engine(servers: Value, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    let options = PoolOptions { cache_dir: Some(cache.to_owned()), ..options(cache) };
    crate::common::engine_builder()
        .workspace(ws)
        .policy(policy)
        .mcp(config(servers), options)
        .build()
        .unwrap()
}

/// [`engine`] over an untrusted configuration (starting a server needs an
/// approval).
fn untrusted_engine(servers: Value, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    let options = PoolOptions { cache_dir: Some(cache.to_owned()), ..options(cache) };
    crate::common::engine_builder()
        .workspace(ws)
        .policy(policy)
        .mcp(untrusted(servers), options)
        .build()
        .unwrap()
}

fn memory_and_filesystem(ws: &Path, memory_file: &Path) -> Value {
    json!({
        "memory": {"command": "node", "args": [node_server("server-memory")],
                   "env": {"MEMORY_FILE_PATH": memory_file.to_string_lossy()}},
        "filesystem": {"command": "node", "args": [node_server("server-filesystem"), ws.to_string_lossy()]},
    })
}

/// A workspace (its canonical path) holding `people.txt` with `people`, a
/// cache folder, and a full-access engine over server-memory and
/// server-filesystem (nothing started).
fn people_and_two_servers(
    people: &str,
) -> (tempfile::TempDir, std::path::PathBuf, tempfile::TempDir, Engine) {
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    std::fs::write(ws_path.join("people.txt"), people).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = memory_and_filesystem(&ws_path, &cache.path().join("memory.jsonl"));
    let engine = engine(servers, cache.path(), &ws_path, Policy::full_access());
    (ws, ws_path, cache, engine)
}

/// The test fixture server named `fixture`, in `mode`, with `env`.
fn fixture_server(mode: &str, env: Value) -> Value {
    json!({"fixture": {"command": "python3", "args": [fixture(), mode], "env": env}})
}

fn state(engine: &Engine, server: &str) -> ServerState {
    engine.mcp_servers().into_iter().find(|s| s.name == server).unwrap().state
}

#[test]
fn a_program_composes_two_real_servers_started_on_first_use() {
    let (_ws, ws_path, _cache, engine) = people_and_two_servers("Ada Lovelace\nAlan Turing\n");
    // Nothing started, nothing cached: only the connect tools are known.
    assert_eq!(state(&engine, "memory"), ServerState::NotStarted);
    let names: Vec<String> = engine.tool_specs().into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"mcp_connect__memory".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");

    let path = ws_path.join("people.txt").to_string_lossy().into_owned();
    let receipt = engine.execute_blocking(Program::new(format!(
        r#"const file = await tools.mcp__filesystem__read_text_file({{path: {path:?}}});
           const people = file.content.content.trim().split("\n");
           await tools.mcp__memory__create_entities({{entities: people.map(name => ({{
               name, entityType: "person", observations: ["listed in people.txt"]}}))}});
           const graph = await tools.mcp__memory__read_graph({{}});
           return graph.content.entities.map(e => e.name).sort();"#
    )));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value, json!(["Ada Lovelace", "Alan Turing"]));
    assert_eq!(state(&engine, "memory"), ServerState::Running);
    assert_eq!(state(&engine, "filesystem"), ServerState::Running);
    let first = &receipt.calls[0];
    assert!(first.note.as_deref().unwrap_or("").contains("started MCP server `filesystem`"), "{first:?}");
    // The listing joined the catalog (deferred) and the digest moved with it.
    let specs = engine.tool_specs();
    let read_graph = specs.iter().find(|s| s.name == "mcp__memory__read_graph").unwrap();
    assert_eq!(read_graph.annotations.read_only, Some(true));
    assert_eq!(receipt.catalog_sha256, engine.catalog_digest());
    engine.shutdown_mcp_blocking();
    assert_eq!(state(&engine, "memory"), ServerState::NotStarted);
}

#[test]
fn a_denied_connection_starts_no_process() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    let mut policy = Policy::full_access();
    policy.rules.deny.push(Rule::parse("mcp_connect__fixture").unwrap());
    let denied = engine(servers, cache.path(), ws.path(), policy.clone());
    let receipt = denied.execute_blocking(Program::new(
        r#"try { await tools.mcp__fixture__echo({a: 1}); return "ran"; }
           catch (e) { return [e.kind, e.message]; }"#,
    ));
    assert_eq!(receipt.value[0], "refused", "{}", receipt.to_json_pretty());
    let message = receipt.value[1].as_str().unwrap();
    assert!(
        message.contains("MCP server `fixture` may not start") && message.contains("mcp_connect__fixture"),
        "{message}"
    );
    // Directly too.
    assert!(!denied.call_blocking("mcp_connect__fixture", &json!({})).is_ok());
    assert_eq!(state(&denied, "fixture"), ServerState::NotStarted);
    assert!(!pid_file.exists(), "a process started: {:?}", std::fs::read_to_string(&pid_file));
    drop(denied);

    // Search does not offer the tools of a server that may not start, even
    // when the schema cache knows them (an engine that may start it fills
    // the cache first).
    let open = engine_for_cache(cache.path(), ws.path());
    assert!(open.call_blocking("mcp_connect__fixture", &json!({})).is_ok());
    drop(open);
    let started = pids(&pid_file).len();
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    let denied = engine(servers, cache.path(), ws.path(), policy);
    assert!(denied.tool_specs().iter().any(|s| s.name == "mcp__fixture__echo"), "from the cache");
    let found = denied.call_blocking("tool_search", &json!({"query": "^mcp__fixture__", "mode": "regex"}));
    assert_eq!(found.envelope.unwrap()["content"]["tools"], json!([]));
    let r = denied.execute_blocking(Program::new(
        "try { await tools.mcp__fixture__echo({}) } catch (e) { return e.kind }",
    ));
    assert_eq!(r.value, "refused");
    assert_eq!(pids(&pid_file).len(), started, "a denied start ran the server");
}

/// Waits up to 20 s for `pid_file` to name a process.
fn wait_for_pid(pid_file: &Path) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pids(pid_file).is_empty() {
        assert!(std::time::Instant::now() < give_up, "no process wrote {}", pid_file.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The receipt warnings that say a server was started before the first
/// call (engine/prestart.rs).
pub(crate) fn prestart_warnings(receipt: &codemode::Receipt) -> Vec<&String> {
    receipt.warnings.iter().filter(|w| w.contains("before the program's first call")).collect()
}

#[test]
fn servers_a_program_names_start_before_its_first_call() {
    let (_ws, ws_path, _cache, engine) = people_and_two_servers("Ada Lovelace\n");
    let path = ws_path.join("people.txt").to_string_lossy().into_owned();
    let receipt = engine.execute_blocking(Program::new(format!(
        r#"await tools.mcp__filesystem__read_text_file({{path: {path:?}}});
           const graph = await tools.mcp__memory__read_graph({{}});
           return graph.content.entities.length;"#
    )));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    // Both were started at once, before the first call; each call that
    // used one says so (and the gate still decided each start).
    for (call, server) in receipt.calls.iter().zip(["filesystem", "memory"]) {
        let note = call.note.as_deref().unwrap_or("");
        assert!(
            note.contains(&format!("started MCP server `{server}` before the program's first call")),
            "{call:?}"
        );
    }
    assert!(prestart_warnings(&receipt).is_empty(), "{:?}", receipt.warnings);
    engine.shutdown_mcp_blocking();
}

#[test]
fn a_server_named_on_a_branch_not_taken_starts_and_the_receipt_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let receipt = engine.execute_blocking(Program::new(
        "if (globalThis.never) await tools.mcp__fixture__echo({a: 1}); return 1;",
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert!(receipt.calls.is_empty());
    let warnings = prestart_warnings(&receipt);
    assert_eq!(warnings.len(), 1, "{:?}", receipt.warnings);
    assert!(
        warnings[0].contains("`fixture`") && warnings[0].contains("mcp_connect__fixture"),
        "{warnings:?}"
    );
    wait_for_pid(&pid_file);
    engine.shutdown_mcp_blocking();
}

/// An engine over the fixture server (pids to `<cache>/pids`) that may
/// start it, sharing `cache`.
fn engine_for_cache(cache: &Path, ws: &Path) -> Engine {
    let pid_file = cache.join("pids");
    engine(
        fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()})),
        cache,
        ws,
        Policy::full_access(),
    )
}

#[test]
fn an_unknown_tool_of_a_started_server_is_refused_with_its_real_names() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let receipt = engine.execute_blocking(Program::new(
        r#"try { await tools.mcp__fixture__ecko({}); } catch (e) { return e.message; }"#,
    ));
    let message = receipt.value.as_str().unwrap();
    assert!(message.contains("mcp__fixture__echo"), "{message}");
    assert_eq!(state(&engine, "fixture"), ServerState::Running);
    let pids = pids(&pid_file);
    drop(engine);
    assert_gone(&pids);
}

#[test]
fn the_schema_cache_fills_the_catalog_without_starting_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    {
        let first = engine(servers.clone(), cache.path(), ws.path(), Policy::full_access());
        let listing = first.call_blocking("mcp_connect__fixture", &json!({}));
        assert!(listing.is_ok(), "{listing:?}");
        let tools = &listing.envelope.unwrap()["content"]["tools"];
        assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "mcp__fixture__echo"), "{tools}");
        first.shutdown_mcp_blocking();
    }
    let started = pids(&pid_file).len();
    let second = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let specs = second.tool_specs();
    let echo = specs.iter().find(|s| s.name == "mcp__fixture__echo").expect("from the cache");
    assert_eq!(echo.loading, codemode::tool::Loading::Deferred);
    assert!(!second.listed_tools().iter().any(|s| s.name == "mcp__fixture__echo"), "deferred, not listed");
    let found = second
        .call_blocking("tool_search", &json!({"query": "^mcp__fixture__", "mode": "regex", "limit": 50}));
    assert!(found.envelope.unwrap()["content"]["tools"].as_array().unwrap().len() >= 4);
    assert_eq!(state(&second, "fixture"), ServerState::NotStarted);
    assert_eq!(pids(&pid_file).len(), started, "listing from the cache started nothing");
    // A call still starts it (after the gate), with the cached schema checked first.
    let bad = second.execute_blocking(Program::new(
        "try { await tools.mcp__fixture__echo(5) } catch (e) { return e.kind }",
    ));
    assert_eq!(bad.value, "refused");
    assert_eq!(pids(&pid_file).len(), started, "bad arguments are refused before any start");
}

#[test]
fn a_tool_the_cached_list_lacks_is_refused_without_starting_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    {
        let first = engine(servers.clone(), cache.path(), ws.path(), Policy::full_access());
        assert!(first.call_blocking("mcp_connect__fixture", &json!({})).is_ok());
        first.shutdown_mcp_blocking();
    }
    let started = pids(&pid_file).len();
    let second = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let r = second.execute_blocking(Program::new(
        "try { await tools.mcp__fixture__ecko({message: 'x'}) } catch (e) { return [e.kind, e.message] }",
    ));
    assert_eq!(r.value[0], "refused", "{}", r.value);
    let message = r.value[1].as_str().unwrap();
    assert!(
        message.contains("unknown tool `mcp__fixture__ecko`: did you mean `mcp__fixture__echo`"),
        "{message}"
    );
    assert!(message.contains("cached") && message.contains("`mcp_connect__fixture`"), "{message}");
    assert_eq!(state(&second, "fixture"), ServerState::NotStarted);
    assert_eq!(pids(&pid_file).len(), started, "no start for a tool the cached list lacks");
    second.shutdown_mcp_blocking();
}

#[test]
fn annotations_reach_the_gate() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = memory_and_filesystem(ws.path(), &cache.path().join("memory.jsonl"));
    // Posture ask with the default deny approver: read-only tools run,
    // destructive ones need an approval and are denied. Starting a server
    // needs one too; an allow rule gives it for `memory`.
    let mut policy = Policy::default();
    assert_eq!(policy.posture, Posture::Ask);
    policy.rules.allow.push(Rule::parse("mcp_connect__memory").unwrap());
    let engine = untrusted_engine(servers, cache.path(), ws.path(), policy);
    let receipt = engine.execute_blocking(Program::new(
        r#"const graph = await tools.mcp__memory__read_graph({});
           let deleted;
           try { await tools.mcp__memory__delete_entities({entityNames: ["x"]}); deleted = "ran"; }
           catch (e) { deleted = e.kind; }
           return {entities: graph.content.entities.length, deleted};"#,
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.value, json!({"entities": 0, "deleted": "denied"}));
}

#[test]
fn list_changed_refreshes_the_catalog() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_LIST_CHANGED": "1"}));
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let before = engine.catalog_digest();
    let r = engine.execute_blocking(Program::new("return (await tools.mcp__fixture__echo({a: 1})).content"));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    // The fixture adds `extra` after its first call and says so; the
    // catalog follows (poll: the notification arrives asynchronously).
    let mut found = false;
    for _ in 0..500 {
        if engine.tool_specs().iter().any(|s| s.name == "mcp__fixture__extra") {
            found = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(found, "the catalog never listed mcp__fixture__extra");
    assert_ne!(engine.catalog_digest(), before);
    let r = engine.execute_blocking(Program::new("return (await tools.mcp__fixture__extra({})).content"));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
}

#[test]
fn the_run_deadline_cancels_a_hanging_call_and_tells_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let log = cache.path().join("notifications.jsonl");
    let pid_file = cache.path().join("pids");
    let servers = fixture_server(
        "hang",
        json!({"MCP_FIXTURE_LOG": log.to_string_lossy(), "MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}),
    );
    let options = PoolOptions { cache_dir: Some(cache.path().to_owned()), ..options(cache.path()) };
    let mut limits = codemode::Limits::default();
    limits.deadline = std::time::Duration::from_millis(1500);
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy::full_access())
        .limits(limits)
        .mcp(config(servers), options)
        .build()
        .unwrap();
    let receipt =
        engine.execute_blocking(Program::new("await tools.mcp__fixture__echo({text: 'x'}); return 1"));
    assert_eq!(receipt.status, RunStatus::TimedOut, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.calls[0].status, codemode::receipt::CallStatus::InFlight);
    // The dropped request makes the client send notifications/cancelled.
    let mut cancelled = false;
    for _ in 0..500 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|l| l.contains("notifications/cancelled")) {
            cancelled = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(cancelled, "no notifications/cancelled reached the server");
    let pids = pids(&pid_file);
    drop(engine);
    assert_gone(&pids);
}

#[test]
fn starting_a_server_needs_an_approval_under_ask_and_plan_mode_reaches_read_only_tools() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pid_file = cache.path().join("pids");
    let servers = fixture_server("normal", json!({"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}));
    // An untrusted config, ask posture, deny approver: the start is
    // denied, nothing runs.
    let ask = untrusted_engine(servers.clone(), cache.path(), ws.path(), Policy::default());
    let r = ask.execute_blocking(Program::new(
        "try { await tools.mcp__fixture__echo({}) } catch (e) { return [e.kind, e.message] }",
    ));
    assert_eq!(r.value[0], "denied", "{}", r.to_json_pretty());
    assert!(r.value[1].as_str().unwrap().contains("mcp_connect__fixture"), "{}", r.value);
    assert!(!pid_file.exists());
    // Plan mode with full access: the server starts, read-only tools run,
    // the others are refused.
    let mut plan = Policy::full_access();
    plan.mode = codemode::policy::Mode::Plan;
    let engine = engine(servers, cache.path(), ws.path(), plan);
    let r = engine.execute_blocking(Program::new(
        r#"const echo = await tools.mcp__fixture__echo({text: "x"});
           let fail; try { await tools.mcp__fixture__fail({}); } catch (e) { fail = e.kind; }
           return {echo: echo.content !== null, fail};"#,
    ));
    assert_eq!(r.value, json!({"echo": true, "fail": "refused"}), "{}", r.to_json_pretty());
}

#[test]
fn servers_get_the_default_environment_and_their_own_env_only() {
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "cargo sets it for tests");
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = json!({"everything": {"command": "node", "args": [node_server("server-everything"), "stdio"],
                                         "env": {"GIVEN_BY_CONFIG": "yes"}}});
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let r =
        engine.execute_blocking(Program::new("return (await tools['mcp__everything__get-env']({})).content"));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    let text = r.value.to_string();
    assert!(text.contains("GIVEN_BY_CONFIG") && text.contains("PATH"), "{text}");
    assert!(!text.contains("CARGO_MANIFEST_DIR"), "codemode's environment leaked: {text}");
}

#[test]
fn calls_of_servers_that_cannot_serve_them_say_why() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let servers = json!({
        "nocmd": {"command": "/no/such/server"},
        "ro": {"command": "python3", "args": [fixture(), "normal"], "read_only": true},
        "off": {"command": "python3", "args": [fixture(), "normal"], "disabled": true},
    });
    let engine = engine(servers, cache.path(), ws.path(), Policy::full_access());
    let message = |src: &str| {
        let r = engine
            .execute_blocking(Program::new(format!("try {{ {src} }} catch (e) {{ return e.message }}")));
        r.value.as_str().unwrap_or_default().to_owned()
    };
    // A server that cannot start says so, on every call (not "unknown tool").
    for _ in 0..2 {
        let m = message("await tools.mcp__nocmd__x({})");
        assert!(m.contains("/no/such/server"), "{m}");
    }
    // A read_only server's other tools are hidden, and the message says why.
    let m = message("await tools.mcp__ro__fail({})");
    assert!(m.contains("read_only"), "{m}");
    assert!(message("return (await tools.mcp__ro__echo({})).content").is_empty(), "read-only tools run");
    // A disabled server is named as disabled.
    let m = message("await tools.mcp__off__echo({})");
    assert!(m.contains("disabled"), "{m}");
}

/// Counts the approvals asked for `mcp_connect__*`, answering `allow`.
struct CountingApprover {
    allow: bool,
    connects: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl codemode::Approver for CountingApprover {
    fn decide(&self, request: codemode::approval::ApprovalRequest) -> codemode::approval::ApprovalFuture {
        if request.tool.starts_with("mcp_connect__") {
            self.connects.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let answer = if self.allow {
            codemode::approval::Approval::allow()
        } else {
            codemode::approval::Approval::deny("no")
        };
        Box::pin(async move { Ok(answer) })
    }
}

#[test]
fn calls_made_together_ask_once_to_start_their_server() {
    for allow in [true, false] {
        let ws = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let connects = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let engine = crate::common::engine_builder()
            .workspace(ws.path())
            .policy(Policy::default())
            .approver(CountingApprover { allow, connects: connects.clone() })
            .mcp(untrusted(fixture_server("normal", json!({}))), options(cache.path()))
            .build()
            .unwrap();
        let r = engine.execute_blocking(Program::new(
            r#"const all = await Promise.allSettled([1, 2, 3, 4, 5].map(i => tools.mcp__fixture__echo({text: `${i}`})));
               return all.map(s => s.status === "fulfilled" ? "ok" : s.reason.kind);"#,
        ));
        assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
        let want = if allow {
            json!(["ok", "ok", "ok", "ok", "ok"])
        } else {
            json!(["denied", "denied", "denied", "denied", "denied"])
        };
        assert_eq!(r.value, want);
        assert_eq!(connects.load(std::sync::atomic::Ordering::SeqCst), 1, "allow: {allow}");
        // Only the call that started the server carries the approval.
        let approved = r.calls.iter().filter(|c| c.decision == codemode::receipt::Decision::Approved).count();
        assert_eq!(approved, usize::from(allow), "{}", r.to_json_pretty());
    }
}

/// An engine built before its server's tool list was cached, which
/// another process then cached (a batch worker starting beside others):
/// a call of the server's tool starts it and runs, rather than being
/// refused as not in the cached list its own catalog never read.
#[test]
fn a_tool_another_process_cached_after_this_engine_was_built_is_called() {
    let dir = tempfile::tempdir().unwrap();
    let servers =
        serde_json::json!({"fx": {"command": "python3", "args": [crate::mcp_support::fixture(), "normal"]}});
    let engine = || {
        crate::common::engine_builder()
            .workspace(dir.path())
            .policy(codemode::Policy::full_access())
            .mcp(
                crate::mcp_support::config(servers.clone()),
                crate::mcp_support::options(&dir.path().join("cache")),
            )
            .build()
            .unwrap()
    };
    let (late, first) = (engine(), engine());
    let program = "return (await tools.call('mcp__fx__slow', {ms: 1})).content";
    for engine in [&first, &late] {
        let receipt = engine.execute_blocking(codemode::Program::new(program));
        assert_eq!(receipt.status, codemode::receipt::RunStatus::Completed, "{}", receipt.to_json_pretty());
        engine.shutdown_mcp_blocking();
    }
}
