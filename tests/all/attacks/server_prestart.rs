//! Starting the MCP servers a program names before its first call
//! (engine/prestart.rs) must not run a server the gate would refuse, or
//! would start only after a person or a hook said yes: a program could
//! otherwise name a server's tool on a branch it never takes and have the
//! server's command run all the same. Only a start the gate's early steps
//! allow with no later step needed is brought forward.

use std::path::Path;

use codemode::mcp::{McpConfig, ServerState};
use codemode::{Engine, Policy, Program, policy::Rule, receipt::RunStatus};
use serde_json::{Value, json};

use crate::mcp_engine::prestart_warnings;
use crate::mcp_support::*;

fn engine(config: McpConfig, cache: &Path, ws: &Path, policy: Policy) -> Engine {
    crate::common::engine_builder().workspace(ws).policy(policy).mcp(config, options(cache)).build().unwrap()
}

fn fixture_server(pid_file: &Path) -> Value {
    json!({"fixture": {"command": "python3", "args": [fixture(), "normal"],
                       "env": {"MCP_FIXTURE_PIDS": pid_file.to_string_lossy()}}})
}

fn state(engine: &Engine) -> ServerState {
    engine.mcp_servers().into_iter().find(|s| s.name == "fixture").unwrap().state
}

/// The attack: a program that names a server's tool on a branch it never
/// takes, to have its process run where the gate would refuse or ask
/// before starting it. Only a start the gate allows without a person or a
/// hook is brought forward.
#[test]
fn a_server_the_gate_would_refuse_or_ask_about_is_not_started_for_a_program_naming_it() {
    let program = "if (globalThis.never) await tools.mcp__fixture__echo({a: 1}); return 1;";
    let mut denied = Policy::full_access();
    denied.rules.deny.push(Rule::parse("mcp_connect__fixture").unwrap());
    let mut asked = Policy::full_access();
    asked.rules.ask.push(Rule::parse("mcp_connect__fixture").unwrap());
    let mut hooked = Policy::full_access();
    hooked.hooks.push(codemode::policy::HookSpec {
        matcher: regex::Regex::new("^mcp_connect__").unwrap(),
        command: vec!["/bin/false".into()],
        timeout: codemode::policy::DEFAULT_HOOK_TIMEOUT,
    });
    let cases: [(&str, Policy, bool); 4] = [
        ("a deny rule", denied, true),
        ("an ask rule", asked, true),
        ("a hook", hooked, true),
        // An untrusted configuration under the default posture asks.
        ("the ask posture", Policy::default(), false),
    ];
    for (case, policy, trusted) in cases {
        let ws = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let pid_file = cache.path().join("pids");
        let servers = fixture_server(&pid_file);
        let engine = if trusted {
            engine(config(servers), cache.path(), ws.path(), policy)
        } else {
            engine(untrusted(servers), cache.path(), ws.path(), policy)
        };
        let receipt = engine.execute_blocking(Program::new(program));
        assert_eq!(receipt.status, RunStatus::Completed, "{case}: {}", receipt.to_json_pretty());
        assert!(prestart_warnings(&receipt).is_empty(), "{case}: {:?}", receipt.warnings);
        assert_eq!(state(&engine), ServerState::NotStarted, "{case}");
        engine.shutdown_mcp_blocking();
        assert!(pids(&pid_file).is_empty(), "{case}: a process started");
    }
}
