//! Starting the MCP servers a program names before its first call, all
//! at once, where the gate would allow their start without asking.
//!
//! A program that calls five servers one after another would otherwise
//! wait for five starts in a row (each a process, an `initialize` and a
//! `tools/list`: from 0.3 s to over a second for an `npx` server). Before
//! the program's first call, the engine takes the servers whose tools (or
//! `mcp_connect__<server>`) the program names literally
//! ([`ToolUse`](codemode_program::ToolUse), the admission check's list)
//! and starts each one that:
//!
//! - is not running, not allowed already in this engine (a call restarts
//!   those), and not refused earlier in the run;
//! - no server command names a file that did not exist when the engine
//!   was built (a script, an env file, a folder on a `PYTHONPATH`): such a
//!   file is not protected, so a call of the run could create it while an
//!   early start's process is still reading it; the gate checks it when a
//!   call starts the server (`file_appeared`), and with one such file no
//!   server starts early;
//! - would be allowed by the gate's early steps for a program's call of
//!   `mcp_connect__<server>` (budget, mode, the rules, the posture's
//!   protections: pure functions of the policy, the catalog and the
//!   posture), with no later step needed: no hook covers it and no
//!   approval would be asked ([`later::needed`]). So only a start the
//!   person already allowed without asking (a trusted MCP configuration,
//!   an allow rule, the full-access posture) is brought forward; nothing
//!   runs that the gate would refuse or ask about.
//!
//! The start is not the gate's decision: the call that needs the server
//! is still gated as `mcp_connect__<server>` first, as every first call of
//! a server is (connect_first.rs), and finds the server up or starting.
//! Its receipt note says the server was started before the program's
//! first call (unless that start failed: then the call fails with its
//! error, as one waiting for any start does); a server so started that
//! the run never called is named in the receipt's warnings, with the
//! error when its start failed. A program with a branch not taken may so start
//! a server it does not use: its start was allowed without asking, and
//! the warning says it ran.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use codemode_program::ToolUse;
use serde_json::json;

use super::dispatch::{Dispatcher, decide_early};
use crate::gate::{CallRequest, Early, later, protection};
use crate::mcp::naming;
use crate::receipt::Caller;

/// The servers a run started before its first call, until a call of the
/// run uses each ([`Prestarted::take`]), with how each start ended.
#[derive(Clone, Default)]
pub(crate) struct Prestarted(Arc<Mutex<BTreeMap<String, Outcome>>>);

/// How a start before the first call ended, so far.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Running,
    Started,
    Failed(String),
}

impl Prestarted {
    fn insert(&self, server: &str) {
        self.lock().insert(server.to_owned(), Outcome::Running);
    }

    /// Notes how `server`'s start ended (kept only while the run has not
    /// used the server).
    fn ended(&self, server: &str, result: Result<(), String>) {
        if let Some(outcome) = self.lock().get_mut(server) {
            *outcome = match result {
                Ok(()) => Outcome::Started,
                Err(e) => Outcome::Failed(e),
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Outcome>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `server` was started by the run before its first call, that
    /// start did not fail, and no call of the run used the server since; a
    /// `true` is given once. Every call that uses the server takes it, so
    /// that a used server is not warned of (a failed start too: the call
    /// waiting for it failed with its error).
    pub(crate) fn take(&self, server: &str) -> bool {
        matches!(self.lock().remove(server), Some(Outcome::Running | Outcome::Started))
    }

    /// The receipt warnings for the servers started before the first call
    /// that no call of the run used.
    pub(crate) fn unused_warnings(&self) -> Vec<String> {
        self.lock()
            .iter()
            .map(|(server, outcome)| {
                let connect = naming::connect_name(server);
                let started = format!(
                    "MCP server `{server}` was started before the program's first call, since the program names its \
                     tools and the gate allows `{connect}` without asking"
                );
                match outcome {
                    Outcome::Failed(e) => format!("{started}; the start failed ({e}), and no call of the run used it"),
                    Outcome::Running | Outcome::Started => format!("{started}, and no call of the run used it"),
                }
            })
            .collect()
    }
}

/// The note of the call that used a server started before the program's
/// first call.
pub(crate) fn note(server: &str) -> String {
    format!(
        "started MCP server `{server}` before the program's first call (the program names its tools and the gate \
         allows `{}` without asking)",
        naming::connect_name(server)
    )
}

impl Dispatcher {
    /// Starts, all at once, the MCP servers `uses` names that the gate
    /// would let start without asking (see the module docs). Returns at
    /// once; the starts run on the tool runtime.
    pub(crate) fn prestart(&self, uses: &[ToolUse]) {
        let Some(mcp) = &self.shared.mcp else { return };
        if uses.is_empty() {
            return;
        }
        let catalog = self.shared.catalog.load();
        let named: BTreeSet<String> =
            uses.iter().filter_map(|u| mcp.server_needed_by(&catalog, &u.tool)).collect();
        if named.is_empty() {
            return;
        }
        // A file a server command names (its script, its env file, a
        // folder on its PYTHONPATH) that did not exist when the engine was
        // built is not protected: a call of this run may create it while
        // an early start's process is still reading it. The gate checks
        // such files when a call starts the server; nothing starts early.
        if protection::missing_at_build(&self.shared.protections, protection::NamedBy::McpServer) {
            return;
        }
        let policy = &self.shared.config.policy;
        let refused = |server: &str| {
            self.connect_refusals.lock().unwrap_or_else(|p| p.into_inner()).contains_key(server)
        };
        for server in named {
            if mcp.is_running(&server) || mcp.is_allowed(&server) || refused(&server) {
                continue;
            }
            let connect = naming::connect_name(&server);
            let args = json!({});
            let request = CallRequest {
                tool: &connect,
                args: &args,
                caller: Caller::Program,
                calls_made: 0,
                primary: None,
            };
            let early = decide_early(&self.shared, &catalog, None, &request, self.start, &self.run_id);
            let allowed = without_asking(early, &connect, policy, &self.shared.posture);
            if !allowed {
                continue;
            }
            // Noted before the start begins, so the receipt names it
            // whatever happens next.
            self.prestarted.insert(&server);
            let (record, name) = (self.prestarted.clone(), server.clone());
            if !mcp.prestart(&server, &self.shared.tools, move |result| record.ended(&name, result)) {
                // A start before another run's first call is running: this
                // run did not start it.
                self.prestarted.take(&server);
            }
        }
    }

    /// For a call of `mcp_connect__<server>` whose server this run started
    /// before its first call: the call's note saying so (given once).
    pub(crate) fn prestart_note(&self, tool: &str) -> Option<String> {
        if !tool.starts_with(naming::CONNECT_PREFIX) {
            return None;
        }
        let server = self.shared.mcp.as_ref()?.server_needed_by(&self.shared.catalog.load(), tool)?;
        self.prestarted.take(&server).then(|| note(&server))
    }
}

/// Whether the gate's early steps, which decided `early` for `tool`, allow
/// it with no later step needed (no hook matches it, no approval would be
/// asked under `posture`).
fn without_asking(
    early: Early,
    tool: &str,
    policy: &crate::gate::Policy,
    posture: &crate::gate::posture_epoch::PostureCell,
) -> bool {
    match early {
        Early::Continue(prep) => !later::needed(tool, &prep, policy, posture),
        Early::Refuse(..) | Early::Exhausted(_) => false,
    }
}

/// Whether the gate's early steps alone would allow `tool` for a
/// program's first call (a test's view of what [`Dispatcher::prestart`]
/// asks).
#[cfg(test)]
fn allowed_without_asking(
    catalog: &crate::catalog::Catalog,
    policy: &crate::gate::Policy,
    tool: &str,
) -> bool {
    let cx = crate::gate::GateContext::for_test(catalog, policy);
    let args = json!({});
    let request = CallRequest::for_test(tool, &args);
    let posture = crate::gate::posture_epoch::PostureCell::new(policy.posture);
    without_asking(crate::gate::decide_early(&request, &cx), tool, policy, &posture)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Loading, Tool, ToolContext, ToolFuture, ToolOutput, ToolSource, ToolSpec};
    use crate::gate::{HookSpec, Mode, Policy, Rule};
    use serde_json::Value;

    /// `mcp_connect__fs`, as an engine over a server `fs` has it.
    struct ConnectFs;

    impl Tool for ConnectFs {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(
                "mcp_connect__fs",
                "start fs",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )
            .read_only(false)
            .destructive(false)
            .source(ToolSource::Synthetic)
            .loading(Loading::Deferred)
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    #[test]
    fn only_a_start_the_gate_allows_without_asking_is_brought_forward() {
        let catalog = Catalog::new(vec![Arc::new(ConnectFs)]).unwrap();
        let allowed = |policy: &Policy| allowed_without_asking(&catalog, policy, "mcp_connect__fs");
        // Full access: allowed without asking.
        assert!(allowed(&Policy::full_access()));
        // The default posture asks before starting a server.
        assert!(!allowed(&Policy::default()));
        // An allow rule (what a trusted configuration adds) allows it.
        let mut allow = Policy::default();
        allow.rules.allow.push(Rule::parse("mcp_connect__fs").unwrap());
        assert!(allowed(&allow));
        // A deny rule refuses it, whatever the posture.
        let mut deny = Policy::full_access();
        deny.rules.deny.push(Rule::parse("mcp_connect__fs").unwrap());
        assert!(!allowed(&deny));
        // An ask rule asks, even under full access.
        let mut ask = Policy::full_access();
        ask.rules.ask.push(Rule::parse("mcp_connect__fs").unwrap());
        assert!(!allowed(&ask));
        // A hook on it would run: not brought forward.
        let mut hooked = Policy::full_access();
        hooked.hooks.push(HookSpec {
            matcher: regex::Regex::new("^mcp_connect__").unwrap(),
            command: vec!["/bin/true".into()],
            timeout: crate::gate::DEFAULT_HOOK_TIMEOUT,
        });
        assert!(!allowed(&hooked));
        // Plan mode lets a server start (how it reaches read-only tools),
        // as the gate does: under full access without asking, under the
        // default posture only with an approval.
        let mut plan = Policy::full_access();
        plan.mode = Mode::Plan;
        assert!(allowed(&plan));
        let plan_ask = Policy { mode: Mode::Plan, ..Policy::default() };
        assert!(!allowed(&plan_ask));
    }

    #[test]
    fn a_server_is_noted_once_and_the_unused_ones_are_warned_of() {
        let started = Prestarted::default();
        started.insert("fs");
        started.insert("memory");
        assert!(started.take("fs"));
        assert!(!started.take("fs"));
        let warnings = started.unused_warnings();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("`memory`") && warnings[0].contains("mcp_connect__memory"),
            "{warnings:?}"
        );
    }
}
