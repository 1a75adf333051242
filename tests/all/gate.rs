//! The gate end to end: rules, modes, postures, hooks and approvers, for
//! direct calls and for programs' calls alike.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode::{
    Approver, Engine, Policy, Program, approval::Approval, approval::ApprovalFuture,
    approval::ApprovalRequest, error::ApproverError, policy::HookSpec, policy::Mode, policy::Posture,
    policy::Rule, policy::Rules, receipt::CallStatus, receipt::Decision, receipt::RunStatus,
};
use serde_json::{Value, json};

use crate::common::{Echo, workspace};

/// An approver for tests: answers `answer` after `delay`, recording each
/// request.
#[derive(Clone)]
struct Scripted {
    answer: Result<Approval, ApproverError>,
    delay: Duration,
    seen: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Scripted {
    fn new(answer: Result<Approval, ApproverError>) -> Self {
        Scripted { answer, delay: Duration::ZERO, seen: Arc::default() }
    }
    fn allow() -> Self {
        Scripted::new(Ok(Approval::allow()))
    }
    fn deny() -> Self {
        Scripted::new(Ok(Approval::deny("not today")))
    }
    fn asked(&self) -> Vec<ApprovalRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Approver for Scripted {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        self.seen.lock().unwrap().push(request);
        let (answer, delay) = (self.answer.clone(), self.delay);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            answer
        })
    }
}

fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> Rules {
    let list = |l: &[&str]| l.iter().map(|r| Rule::parse(r).unwrap()).collect();
    Rules { allow: list(allow), ask: list(ask), deny: list(deny) }
}

fn engine(ws: &tempfile::TempDir, policy: Policy, approver: impl Approver) -> Engine {
    crate::common::engine_builder()
        .workspace(ws.path())
        .policy(policy)
        .approver(approver)
        .tool(Echo)
        .build()
        .unwrap()
}

/// A shell script in `dir`, executable.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

fn hook(matcher: &str, command: &Path, timeout_ms: u64) -> HookSpec {
    HookSpec {
        matcher: regex::Regex::new(matcher).unwrap(),
        command: vec![command.display().to_string()],
        timeout: Duration::from_millis(timeout_ms),
    }
}

#[test]
fn a_deny_rule_beats_an_allow_rule_directly_and_in_programs() {
    let ws = workspace();
    let policy = Policy { rules: rules(&["write"], &[], &["write(secrets/**)"]), ..Policy::default() };
    let e = engine(&ws, policy, Scripted::allow());
    let direct = e.call_blocking("write", &json!({"path": "secrets/key.txt", "content": "x"}));
    assert_eq!((direct.call.decision, direct.call.status), (Decision::Refused, CallStatus::Refused));
    assert!(direct.call.error.unwrap().contains("deny rule `write(secrets/**)`"));
    let r = e.execute_blocking(Program::new(
        "const out = []; \
         try { await tools.write({path: './secrets/../secrets/k', content: 'x'}); } catch (e) { out.push(e.kind); } \
         await tools.write({path: 'notes.txt', content: 'ok'}); out.push('wrote'); return out;",
    ));
    assert_eq!(r.value, json!(["refused", "wrote"]), "{:?}", r.error);
    assert_eq!(r.calls[1].decision, Decision::Auto, "the allow rule spares the approval");
    assert!(!ws.path().join("secrets").exists());
}

#[test]
fn plan_mode_refuses_writers_inside_and_outside_programs() {
    let ws = workspace();
    let approver = Scripted::allow();
    let e = engine(
        &ws,
        Policy { mode: Mode::Plan, posture: Posture::FullAccess, ..Policy::default() },
        approver.clone(),
    );
    for (tool, args) in [
        ("write", json!({"path": "x", "content": "y"})),
        ("edit", json!({"path": "a.txt", "edits": [{"old": "alpha", "new": "b"}]})),
        ("bash", json!({"command": "touch made"})),
    ] {
        let direct = e.call_blocking(tool, &args);
        assert_eq!(direct.call.status, CallStatus::Refused, "{tool}");
        assert!(direct.call.error.as_deref().unwrap().contains("plan mode"), "{tool}");
        let r = e.execute_blocking(Program::new(format!(
            "try {{ await tools.call('{tool}', {args}); return 'ran'; }} catch (e) {{ return e.kind; }}"
        )));
        assert_eq!(r.value, json!("refused"), "{tool}");
    }
    let read = e.call_blocking("read", &json!({"path": "a.txt"}));
    assert!(read.is_ok());
    assert!(approver.asked().is_empty());
    assert!(!ws.path().join("made").exists() && !ws.path().join("x").exists());
}

/// A model in plan mode is shown only the tools it may call: the served
/// description lists no writer and says why.
#[test]
fn plan_mode_lists_only_read_only_tools_to_the_model() {
    let ws = workspace();
    let plan = engine(&ws, Policy { mode: Mode::Plan, ..Policy::default() }, Scripted::allow());
    let work = engine(&ws, Policy::default(), Scripted::allow());
    let names = |e: &codemode::Engine| e.listed_tools().into_iter().map(|s| s.name).collect::<Vec<_>>();
    let (planned, worked) = (names(&plan), names(&work));
    for writer in ["write", "edit", "bash"] {
        assert!(worked.iter().any(|n| n == writer), "{writer} in {worked:?}");
        assert!(!planned.iter().any(|n| n == writer), "{writer} in {planned:?}");
    }
    assert!(planned.iter().any(|n| n == "read") && planned.iter().any(|n| n == "grep_files"), "{planned:?}");
    // What `codemode types` declares and `mcp serve --direct-tools` lists.
    let usable: Vec<String> = plan.usable_tools().into_iter().map(|s| s.name).collect();
    assert!(
        usable.iter().any(|n| n == "read") && !usable.iter().any(|n| n == "write" || n == "bash"),
        "{usable:?}"
    );
    assert!(work.usable_tools().iter().any(|s| s.name == "write"));
    let served = plan.execute_tools_spec_with(codemode::run::ToolsShown::Signatures, None).description;
    assert!(served.contains("Plan mode: only read-only tools run"), "{served}");
    assert!(
        served.contains("\nread(") && !served.contains("\nwrite(") && !served.contains("\nbash("),
        "{served}"
    );
    let worked = work.execute_tools_spec_with(codemode::run::ToolsShown::Signatures, None).description;
    assert!(!worked.contains("Plan mode") && worked.contains("\nwrite("), "{worked}");
}

#[test]
fn an_ask_denied_by_the_approver_is_caught_and_the_next_call_runs() {
    let ws = workspace();
    let approver = Scripted::deny();
    let e = engine(&ws, Policy::default(), approver.clone());
    let r = e.execute_blocking(Program::new(
        "let caught; try { await tools.write({path: 'w.txt', content: 'x'}); } \
         catch (e) { caught = [e.name, e.kind, e.message]; } \
         const r = await tools.read({path: 'a.txt'}); return [caught, r.metadata.total_lines];",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([["ToolError", "denied", "write (call 1): not today"], 3]));
    assert_eq!((r.calls[0].decision, r.calls[0].status), (Decision::Denied, CallStatus::Refused));
    assert_eq!((r.calls[1].decision, r.calls[1].status), (Decision::Auto, CallStatus::Ok));
    let asked = approver.asked();
    assert_eq!(asked.len(), 1, "readers are not asked");
    assert_eq!((asked[0].tool.as_str(), asked[0].seq), ("write", 1));
    assert!(asked[0].reason.contains("posture is ask"));
    assert!(!ws.path().join("w.txt").exists());
}

#[test]
fn an_approved_call_runs_and_says_approved() {
    let ws = workspace();
    let e = engine(&ws, Policy::default(), Scripted::allow());
    let r = e.execute_blocking(Program::new("await tools.write({path: 'w.txt', content: 'hi'}); return 1;"));
    assert_eq!(r.calls[0].decision, Decision::Approved);
    assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "hi");
}

#[test]
fn an_approver_that_fails_refuses_the_call() {
    let ws = workspace();
    let e = engine(&ws, Policy::default(), Scripted::new(Err(ApproverError("it crashed".into()))));
    let r = e.execute_blocking(Program::new(
        "try { await tools.write({path: 'w', content: ''}); } catch (e) { return [e.kind, e.message]; }",
    ));
    assert_eq!(r.value[0], json!("refused"));
    assert!(r.value[1].as_str().unwrap().contains("it crashed"));
    assert_eq!(r.calls[0].decision, Decision::Refused);
}

#[test]
fn approval_wait_does_not_count_against_the_deadline() {
    let ws = workspace();
    // The approval takes longer than the whole deadline; the margin is
    // wide, as the parallel test suite's fsyncs slow the write itself.
    let approver = Scripted { delay: Duration::from_millis(2500), ..Scripted::allow() };
    let mut limits = codemode::Limits::default();
    limits.deadline = Duration::from_millis(1500);
    let e = crate::common::engine_builder()
        .workspace(ws.path())
        .limits(limits)
        .approver(approver)
        .build()
        .unwrap();
    let r = e.execute_blocking(Program::new(
        "await tools.write({path: 'slow.txt', content: 'x'}); return 'done';",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert!(r.approval_wait_ms >= 2450.0, "{}", r.approval_wait_ms);
    assert_eq!(r.calls[0].decision, Decision::Approved);
}

#[test]
fn other_calls_keep_running_while_one_waits_for_approval() {
    let ws = workspace();
    let approver = Scripted { delay: Duration::from_millis(500), ..Scripted::allow() };
    let e = engine(&ws, Policy::default(), approver);
    let r = e.execute_blocking(Program::new(
        "const order = []; \
         const w = tools.write({path: 'w.txt', content: 'x'}).then(() => order.push('write')); \
         const r = tools.read({path: 'a.txt'}).then(() => order.push('read')); \
         await Promise.all([w, r]); return order;",
    ));
    assert_eq!(r.value, json!(["read", "write"]));
}

#[test]
fn a_posture_change_mid_program_refuses_the_rest() {
    let ws = workspace();
    let e = engine(&ws, Policy::full_access(), Scripted::allow());
    let run = e.start(Program::new(
        "const out = []; out.push((await tools.echo({n: 1})).content.n); \
         await tools.bash({command: 'sleep 0.5'}); \
         try { await tools.echo({n: 2}); out.push('ran'); } catch (e) { out.push(e.kind, e.message); } \
         return out;",
    ));
    std::thread::sleep(Duration::from_millis(200));
    e.set_posture(Posture::FullAccess);
    assert_eq!(e.posture(), Posture::FullAccess, "setting the same posture is no change");
    e.set_posture(Posture::Ask);
    let r = run.wait_blocking();
    assert_eq!(r.value[1], json!("refused"), "{:?}", r.value);
    assert!(r.value[2].as_str().unwrap().contains("posture changed"), "{}", r.value[2]);
    // A new run starts under the new posture and is not refused for it.
    let next =
        e.execute_blocking(Program::new("return (await tools.read({path: 'a.txt'})).metadata.total_lines;"));
    assert_eq!(next.value, json!(3));
}

#[test]
fn a_call_approved_while_the_posture_narrowed_is_refused() {
    let ws = workspace();
    let approver = Scripted { delay: Duration::from_millis(500), ..Scripted::allow() };
    let e = engine(&ws, Policy { posture: Posture::AutoReview, ..Policy::default() }, approver.clone());
    let outcome = std::thread::scope(|s| {
        let call = s.spawn(|| e.call_blocking("bash", &json!({"command": "touch ran"})));
        std::thread::sleep(Duration::from_millis(150));
        e.set_posture(Posture::Ask);
        call.join().unwrap()
    });
    assert_eq!(approver.asked().len(), 1);
    assert_eq!(outcome.call.status, CallStatus::Refused);
    assert!(outcome.call.error.unwrap().contains("narrowed from auto-review to ask"));
    assert!(!ws.path().join("ran").exists());
}

#[test]
fn auto_review_allows_plain_writers_and_asks_for_bash() {
    let ws = workspace();
    let approver = Scripted::deny();
    let e = engine(&ws, Policy { posture: Posture::AutoReview, ..Policy::default() }, approver.clone());
    assert!(e.call_blocking("write", &json!({"path": "w.txt", "content": "x"})).is_ok());
    let bash = e.call_blocking("bash", &json!({"command": "true"}));
    assert_eq!(bash.call.decision, Decision::Denied);
    assert_eq!(approver.asked().len(), 1);
}

#[test]
fn an_ask_rule_asks_even_under_full_access_and_for_readers() {
    let ws = workspace();
    let approver = Scripted::deny();
    let policy = Policy {
        posture: Posture::FullAccess,
        rules: rules(&[], &["read(a.txt)"], &[]),
        ..Policy::default()
    };
    let e = engine(&ws, policy, approver.clone());
    assert_eq!(e.call_blocking("read", &json!({"path": "a.txt"})).call.decision, Decision::Denied);
    assert!(e.call_blocking("read", &json!({"path": "docs/guide.md"})).is_ok());
    assert!(approver.asked()[0].reason.contains("ask rule `read(a.txt)`"));
}

#[test]
fn the_same_call_gets_the_same_decision_directly_and_from_a_program() {
    let ws = workspace();
    let policy = Policy { rules: rules(&[], &[], &["bash(rm *)"]), ..Policy::default() };
    let e = engine(&ws, policy, Scripted::deny());
    for (tool, args) in [
        ("bash", json!({"command": "rm -rf x"})),
        ("write", json!({"path": "w", "content": ""})),
        ("read", json!({"path": "a.txt"})),
        ("raed", json!({})),
        ("read", json!({"path": 7})),
    ] {
        let direct = e.call_blocking(tool, &args);
        let r = e.execute_blocking(Program::new(format!(
            "try {{ await tools.call('{tool}', {args}); }} catch {{}}"
        )));
        let nested = &r.calls[0];
        assert_eq!(
            (direct.call.decision, direct.call.status),
            (nested.decision, nested.status),
            "{tool} {args}"
        );
        assert_eq!(direct.call.error, nested.error, "{tool} {args}");
    }
}

#[test]
fn a_direct_only_tool_by_another_spelling_is_refused_before_hooks_and_approvers() {
    let ws = workspace();
    let marker = ws.path().join("hook-ran");
    let hook_script = script(ws.path(), "hook.sh", &format!("touch {}", marker.display()));
    let approver = Scripted::allow();
    let policy = Policy { hooks: vec![hook(".*", &hook_script, 5000)], ..Policy::default() };
    let e = engine(&ws, policy, approver.clone());
    let r = e.execute_blocking(Program::new(
        "try { await tools.call('Execute_Tools', {code: 'return 1'}); } catch (e) { return [e.kind, e.message]; }",
    ));
    assert_eq!(r.value[0], json!("refused"));
    assert!(r.value[1].as_str().unwrap().contains("direct-only"));
    assert!(!marker.exists(), "the hook ran");
    assert!(approver.asked().is_empty(), "the approver was asked");
}

#[test]
fn hooks_block_rewrite_and_time_out() {
    let ws = workspace();
    let dir = ws.path();
    let block = script(dir, "block.sh", "echo 'no writes to notes' >&2; exit 2");
    let rewrite = script(
        dir,
        "rewrite.sh",
        r#"cat > /dev/null; echo '{"decision": "allow", "arguments": {"path": "rewritten.txt", "content": "by hook"}, "context": "redirected"}'"#,
    );
    let bad_rewrite =
        script(dir, "bad.sh", r#"cat > /dev/null; echo '{"decision": "allow", "arguments": {"path": 5}}'"#);
    let slow = script(dir, "slow.sh", "sleep 5");
    let policy = Policy {
        posture: Posture::Ask,
        hooks: vec![
            hook("^write$", &rewrite, 5000),
            hook("^edit$", &block, 5000),
            hook("^bash$", &slow, 200),
            hook("^read$", &bad_rewrite, 5000),
        ],
        ..Policy::default()
    };
    let approver = Scripted::deny();
    let e = engine(&ws, policy, approver.clone());

    let w = e.call_blocking("write", &json!({"path": "asked.txt", "content": "original"}));
    assert!(w.is_ok(), "{:?}", w.error);
    assert_eq!(w.call.decision, Decision::Auto, "the hook's allow spares the approval");
    let note = w.call.note.unwrap();
    assert!(note.contains("rewritten") && note.contains("redirected"), "{note}");
    assert_eq!(std::fs::read_to_string(dir.join("rewritten.txt")).unwrap(), "by hook");
    assert!(!dir.join("asked.txt").exists());

    let ed = e.call_blocking("edit", &json!({"path": "a.txt", "edits": [{"old": "alpha", "new": "omega"}]}));
    assert_eq!(ed.call.status, CallStatus::Refused);
    assert!(ed.call.error.unwrap().contains("no writes to notes"));
    assert!(std::fs::read_to_string(dir.join("a.txt")).unwrap().contains("alpha"));

    let b = e.call_blocking("bash", &json!({"command": "touch bashed"}));
    assert_eq!(b.call.status, CallStatus::Refused);
    assert!(!dir.join("bashed").exists());

    let bad = e.call_blocking("read", &json!({"path": "a.txt"}));
    assert_eq!(bad.call.status, CallStatus::Refused);
    assert!(bad.call.error.unwrap().contains("rewrite is refused"));
    assert!(approver.asked().is_empty());
}

#[test]
fn a_hook_sees_the_documented_input() {
    let ws = workspace();
    let seen = ws.path().join("seen.json");
    let record = script(ws.path(), "record.sh", &format!("cat > {}", seen.display()));
    let policy = Policy { hooks: vec![hook("^read$", &record, 5000)], ..Policy::default() };
    let e = engine(&ws, policy, Scripted::deny());
    let r = e.execute_blocking(Program::new("await tools.read({path: 'a.txt'});"));
    assert_eq!(r.calls[0].status, CallStatus::Ok);
    let input: Value = serde_json::from_str(&std::fs::read_to_string(seen).unwrap()).unwrap();
    assert_eq!(input["tool"], "read");
    assert_eq!(input["arguments"], json!({"path": "a.txt"}));
    assert_eq!(input["caller"], "program");
    assert_eq!(input["run_id"], json!(r.run_id));
    assert_eq!(input["workspace"], json!(std::fs::canonicalize(ws.path()).unwrap()));
}

#[test]
fn allowed_callers_and_timeouts_from_the_policy_apply() {
    let ws = workspace();
    let mut policy = Policy::full_access();
    policy.tools.insert(
        "bash".into(),
        codemode::policy::ToolSettings {
            timeout_ms: Some(100),
            allowed_callers: Some(vec![codemode::receipt::Caller::Program]),
            ..Default::default()
        },
    );
    let e = engine(&ws, policy, Scripted::deny());
    let direct = e.call_blocking("bash", &json!({"command": "true"}));
    assert!(direct.call.error.unwrap().contains("cannot be called from a direct call"));
    let r = e.execute_blocking(Program::new(
        "try { await tools.bash({command: 'sleep 5'}); } catch (e) { return e.kind; }",
    ));
    assert_eq!(r.value, json!("timeout"));
}

#[test]
fn a_pattern_rule_on_a_tool_without_a_primary_argument_is_a_build_error() {
    let ws = workspace();
    let policy = Policy { rules: rules(&["echo(x*)"], &[], &[]), ..Policy::default() };
    let err =
        crate::common::engine_builder().workspace(ws.path()).policy(policy).tool(Echo).build().unwrap_err();
    assert!(err.to_string().contains("echo(x*)"), "{err}");
}

// Regressions from trying to break the gate.

#[cfg(unix)]
#[test]
fn symlinks_neither_dodge_deny_rules_nor_stretch_allow_rules() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("secrets")).unwrap();
    std::fs::write(root.join("secrets/key.txt"), "k").unwrap();
    std::os::unix::fs::symlink(root.join("secrets"), root.join("link")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("docs/up")).unwrap();
    let outer = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&root, outer.path().join("wslink")).unwrap();
    let policy = Policy {
        posture: Posture::Ask,
        rules: rules(&["write(docs/**)"], &[], &["write(secrets/**)", "read(secrets/**)"]),
        ..Policy::default()
    };
    let e = engine(&ws, policy, Scripted::deny());
    let via_outer = outer.path().join("wslink/secrets/a").display().to_string();
    for path in ["link/x", "link/key.txt", "./link/../link/y", via_outer.as_str()] {
        let w = e.call_blocking("write", &json!({"path": path, "content": "pwned"}));
        assert_eq!(w.call.decision, Decision::Refused, "{path}: {:?}", w.call);
        assert!(w.call.error.unwrap().contains("deny rule"), "{path}");
    }
    let r = e.call_blocking("read", &json!({"path": "link/key.txt"}));
    assert_eq!(r.call.decision, Decision::Refused);
    // `docs/up/a.txt` is written inside docs/ but reaches the root: the allow
    // rule does not cover it, so it goes to the (denying) approver.
    let stretched = e.call_blocking("write", &json!({"path": "docs/up/a.txt", "content": "x"}));
    assert_eq!(stretched.call.decision, Decision::Denied);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "alpha\nbeta\ngamma\n");
    assert_eq!(std::fs::read_to_string(root.join("secrets/key.txt")).unwrap(), "k");
}

#[test]
fn an_allow_pattern_on_bash_does_not_cover_chained_commands() {
    let ws = workspace();
    let policy = Policy { rules: rules(&["bash(git status*)"], &[], &[]), ..Policy::default() };
    let approver = Scripted::deny();
    let e = engine(&ws, policy, approver.clone());
    for command in [
        "git status; touch chained",
        "git status && touch chained",
        "git status\ntouch chained",
        "git status $(touch chained)",
    ] {
        let r = e.call_blocking("bash", &json!({"command": command}));
        assert_eq!(r.call.decision, Decision::Denied, "{command:?}");
    }
    assert!(!ws.path().join("chained").exists());
}

#[test]
fn a_hook_rewrite_is_held_to_the_deny_rules() {
    let ws = workspace();
    let hook_script = script(
        ws.path(),
        "to_secrets.sh",
        r#"cat > /dev/null; echo '{"decision": "allow", "arguments": {"path": "secrets/x.txt", "content": "moved"}}'"#,
    );
    let policy = Policy {
        posture: Posture::FullAccess,
        rules: rules(&[], &[], &["write(secrets/**)"]),
        hooks: vec![hook("^write$", &hook_script, 5000)],
        ..Policy::default()
    };
    let e = engine(&ws, policy, Scripted::allow());
    let r = e.call_blocking("write", &json!({"path": "ok.txt", "content": "x"}));
    assert_eq!(r.call.status, CallStatus::Refused);
    assert!(r.call.error.unwrap().contains("deny rule `write(secrets/**)`"));
    assert!(!ws.path().join("secrets").exists());
}

#[cfg(unix)]
#[test]
fn a_program_cannot_rewrite_its_policy_file_or_hooks() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("hooks")).unwrap();
    script(&root.join("hooks"), "check.sh", "cat > /dev/null; exit 0");
    let config = root.join("codemode.toml");
    std::fs::write(
        &config,
        "posture = \"full-access\"\n[[hooks.before_call]]\nmatch = \"^bash$\"\ncommand = [\"./hooks/check.sh\"]\n",
    )
    .unwrap();
    let config = codemode::config::ConfigFile::load(&config).unwrap();
    let e = crate::common::engine_builder().workspace(&root).config(config).build().unwrap();
    for (tool, args) in [
        ("write", json!({"path": "codemode.toml", "content": "posture = \"full-access\"\n"})),
        ("write", json!({"path": "hooks/check.sh", "content": "exit 0"})),
        (
            "edit",
            json!({"path": "./hooks/../codemode.toml", "edits": [{"old": "full-access", "new": "ask"}]}),
        ),
    ] {
        let r = e.call_blocking(tool, &args);
        assert_eq!(r.call.status, CallStatus::Refused, "{tool} {args}");
        assert!(r.call.error.unwrap().contains("is protected"), "{tool}");
    }
    assert!(e.call_blocking("read", &json!({"path": "codemode.toml"})).is_ok(), "reading it is fine");
}

#[test]
fn a_rule_name_that_differs_only_in_case_is_a_build_error() {
    let ws = workspace();
    let policy = Policy { rules: rules(&[], &[], &["Write"]), ..Policy::default() };
    let err = crate::common::engine_builder().workspace(ws.path()).policy(policy).build().unwrap_err();
    assert!(err.to_string().contains("did you mean `write`"), "{err}");
    let mut policy = Policy::default();
    policy.tools.insert("Bash".into(), codemode::policy::ToolSettings::default());
    let err = crate::common::engine_builder().workspace(ws.path()).policy(policy).build().unwrap_err();
    assert!(err.to_string().contains("[tools.Bash]"), "{err}");
}

#[test]
fn mcp_style_tools_without_a_destructive_hint_are_asked_under_auto_review() {
    struct Unhinted;
    impl codemode::Tool for Unhinted {
        fn spec(&self) -> codemode::ToolSpec {
            codemode::ToolSpec::new("drop_table", "Drops a table.", json!({"type": "object"}))
        }
        fn call(&self, _: Value, _: codemode::tool::ToolContext) -> codemode::tool::ToolFuture {
            Box::pin(async { Ok(codemode::tool::ToolOutput::new("dropped")) })
        }
    }
    let ws = workspace();
    let approver = Scripted::deny();
    let e = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(Policy { posture: Posture::AutoReview, ..Policy::default() })
        .approver(approver.clone())
        .tool(Unhinted)
        .build()
        .unwrap();
    assert_eq!(e.call_blocking("drop_table", &json!({})).call.decision, Decision::Denied);
    assert!(approver.asked()[0].destructive);
    assert!(
        e.call_blocking("write", &json!({"path": "w.txt", "content": "x"})).is_ok(),
        "write says not destructive"
    );
}

#[test]
fn a_call_still_waiting_for_its_approval_when_the_run_ends_is_pending() {
    let ws = workspace();
    // An approver that takes an hour: the run is cancelled first.
    let mut slow = Scripted::allow();
    slow.delay = Duration::from_secs(3600);
    let seen = slow.seen.clone();
    let engine = engine(&ws, Policy::default(), slow);
    let run = engine.start(Program::new(
        "const r = await tools.read({path: 'a.txt'}); await tools.write({path: 'b.txt', content: 'x'}); return 1",
    ));
    // Cancel once the approver has the request (a bound, not a timing).
    for _ in 0..1000 {
        if !seen.lock().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "the write never reached its approver");
    run.cancel();
    let receipt = run.wait_blocking();
    assert_eq!(receipt.status, RunStatus::Cancelled, "{}", receipt.to_json_pretty());
    assert_eq!(receipt.calls[0].decision, Decision::Auto);
    let write = &receipt.calls[1];
    assert_eq!((write.decision, write.status), (Decision::Pending, CallStatus::InFlight), "{write:?}");
    assert!(write.note.as_deref().unwrap().contains("waiting for its approval"), "{write:?}");
    assert!(!ws.path().join("b.txt").exists());
    assert!(receipt.render(&Default::default()).contains("pending"));
}

#[cfg(unix)]
#[test]
fn a_hook_past_its_timeout_gets_sigterm_first_so_it_can_clean_up() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let hooks = tempfile::tempdir().unwrap();
    let marker = hooks.path().join("cleaned-up");
    let slow = script(
        hooks.path(),
        "slow.sh",
        &format!("trap 'echo cleaned > {}; exit 0' TERM\nsleep 30 &\nwait", marker.display()),
    );
    let policy = Policy { hooks: vec![hook("^echo$", &slow, 300)], ..Policy::full_access() };
    let e = crate::common::engine_builder().workspace(&root).policy(policy).tool(Echo).build().unwrap();
    let r = e.call_blocking("echo", &json!({"x": 1}));
    assert_eq!(r.call.status, CallStatus::Refused);
    assert!(r.call.error.unwrap_or_default().contains("time"), "a hook timeout blocks the call");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default().trim(),
        "cleaned",
        "SIGTERM reached the hook"
    );
}

/// A hook still running when codemode is SIGKILLed dies with it (it runs
/// in a session of its own, so nothing else would end it).
#[cfg(target_os = "linux")]
#[test]
fn a_hook_dies_with_a_killed_codemode() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let hooks = tempfile::tempdir().unwrap();
    let pid_file = hooks.path().join("hook.pid");
    let slow = script(hooks.path(), "slow.sh", &format!("echo $$ > {}\nexec sleep 30", pid_file.display()));
    let config = hooks.path().join("policy.toml");
    std::fs::write(
        &config,
        format!(
            "[[hooks.before_call]]\nmatch = \"^read$\"\ncommand = [\"{}\"]\ntimeout_ms = 60000\n",
            slow.display()
        ),
    )
    .unwrap();
    let mut child = crate::cli::spawn(
        &["call", "read", r#"{"path": "a.txt"}"#, "--config", config.to_str().unwrap()],
        &root,
        &[],
    );
    let mut hook_pid = None;
    for _ in 0..500 {
        if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|t| t.trim().parse::<i32>().ok())
        {
            hook_pid = Some(pid);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let hook_pid = hook_pid.expect("the hook started");
    child.kill().unwrap();
    child.wait().unwrap();
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    };
    for _ in 0..500 {
        if !alive(hook_pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the hook {hook_pid} outlived the killed codemode");
}

/// A deny rule with a path on a search tool keeps what it matches out of
/// every search of that tool, not only searches whose `path` it matches:
/// `grep_files(secrets/**)` hides `secrets/` from a search of the whole
/// workspace, so "deny every reading tool on it" hides a folder (POLICY.md).
#[test]
fn a_denied_folder_is_kept_out_of_searches_of_the_whole_workspace() {
    let ws = tempfile::tempdir().unwrap();
    for dir in ["secrets/deep", "public"] {
        std::fs::create_dir_all(ws.path().join(dir)).unwrap();
    }
    for file in ["secrets/key.txt", "secrets/deep/token.txt", "public/key.txt"] {
        std::fs::write(ws.path().join(file), "needle\n").unwrap();
    }
    let denied = ["grep_files(secrets/**)", "file_search(secrets/**)"];
    let policy = Policy { rules: rules(&[], &[], &denied), ..Policy::full_access() };
    let engine = engine(&ws, policy, Scripted::deny());
    let r = engine.execute_blocking(Program::new(
        "const whole = await tools.grep_files({pattern: 'needle'});
         const inside = await tools.grep_files({pattern: 'needle', path: 'secrets'});
         const named = await tools.file_search({query: 'key'});
         const listed = await tools.file_search({query: 'token'});
         return {whole: whole.content.map(m => m.path), inside: inside.content, named: named.content, listed: listed.content};",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!({"whole": ["public/key.txt"], "inside": [], "named": ["public/key.txt"], "listed": []}),
        "{}",
        r.value
    );
    // The same searches without the rules find the folder's files.
    let open =
        crate::common::engine_builder().workspace(ws.path()).policy(Policy::full_access()).build().unwrap();
    let r = open.execute_blocking(Program::new(
        "return (await tools.grep_files({pattern: 'needle'})).content.length;",
    ));
    assert_eq!(r.value, json!(3));
}
