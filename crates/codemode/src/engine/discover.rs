//! `tool_search` in an engine with MCP servers: bounded discovery of the
//! configured servers whose tools the catalog does not hold yet.
//!
//! A server that was never listed (no live listing, nothing in the schema
//! cache) has no tools in the catalog, so a plain search cannot find them.
//! An MCP-focused search ([`Discovery::mcp_focus`]: the query names the
//! server, says `mcp`, or matches nothing in the catalog) first starts
//! such servers, each through the gate as `mcp_connect__<server>` (every
//! step: rules, hooks, posture, approval; the same step that guards a lazy
//! start, `connect_first.rs`), at most [`MAX_SERVERS`] starts per search
//! (only starts the gate allowed count: a server it refuses or denies uses
//! up no place; a search about every server tries those whose last start
//! failed after the others, so a failing server cannot starve them), and
//! waits for their starts at most [`BUDGET`] in all (time spent on
//! approvals does not count: the budget begins once the gate decided); a
//! start still going at the end is given up (its process ended), so no
//! start outlives the search. Then it searches the real schemas.
//! An unrelated search starts nothing.
//!
//! Every search of such an engine answers `unlisted_servers: [{name,
//! state, why}]`, the configured servers still not listed and why
//! (`not_started`, `refused`, `denied`, `failed`, `over_bound`,
//! `timed_out`), and `started_servers` when it started some, so a model
//! knows what it has not seen. Inside a program the search describes the
//! schemas without activating them; a direct search activates them into
//! the toolbox as usual (`tool_search.rs`).
//!
//! [`Discovery::mcp_focus`]: crate::catalog::tool_search::Discovery::mcp_focus

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Shared;
use super::connect_first::{GateRun, Refusals, StartGate, gate_start};
use super::dispatch::{Completion, Finisher};
use crate::catalog::tool_search::McpFocus;
use crate::catalog::{ToolFuture, ToolOutput};
use crate::mcp::naming;
use crate::receipt::Decision;

/// The most servers one search starts.
pub(crate) const MAX_SERVERS: usize = 3;
/// How long one search waits for the servers it starts, in all.
pub(crate) const BUDGET: Duration = Duration::from_secs(10);

/// What became of one unlisted server in a search.
enum Outcome {
    Started,
    /// The gate refused (`refused`) or denied (`denied`) its start.
    Stopped {
        kind: &'static str,
        reason: String,
    },
    Failed(String),
    OverBound,
    /// Still starting at the end of the budget: given up.
    TimedOut,
}

/// Runs a `tool_search` call whose gate passed (`finish` holds its
/// decision), with the tool's arguments `args`: starts the servers the
/// search is about (see the module docs), then searches the catalog as it
/// is after their listings, under the call's `timeout`.
pub(super) async fn search(
    finish: Finisher,
    gate: GateRun,
    refusals: Refusals,
    args: Value,
    timeout: Duration,
) -> Completion {
    let shared = finish.shared.clone();
    let mcp = shared.mcp.clone().expect("only an engine with MCP servers takes this path");
    let unlisted = mcp.unlisted_servers();
    let focus = shared.discovery.mcp_focus(&shared.catalog.load(), &args, gate.caller, &unlisted);
    let wanted = in_start_order(&mcp, focus, unlisted);
    let mut outcomes: HashMap<String, Outcome> = HashMap::new();
    let mut decision = finish.decision;
    let mut notes: Vec<String> = finish.notes.iter().cloned().collect();
    let mut allowed = Vec::new();
    // Only starts the gate allowed count towards the bound: a server a rule
    // denies, or the gate refuses, does not use up a place.
    for server in wanted {
        if allowed.len() >= MAX_SERVERS {
            outcomes.insert(server, Outcome::OverBound);
            continue;
        }
        match gate_start(&gate, &finish, &refusals, &server, false).await {
            StartGate::Allowed { decision: d, notes: n, guard, seen } => {
                if d == Decision::Approved {
                    decision = Decision::Approved;
                }
                notes.extend(n);
                allowed.push((server, guard, seen));
            }
            StartGate::Stopped { kind, reason, .. } => {
                outcomes.insert(server, Outcome::Stopped { kind, reason });
            }
        }
    }
    gate.clock.decided(gate.seq, decision);
    start_together(&shared, &mcp, allowed, &mut outcomes, &mut notes).await;
    let report = report(&mcp, &refusals, &outcomes);
    let finish = Finisher { decision, notes: (!notes.is_empty()).then(|| notes.join("; ")), ..finish };
    let (discovery, cell, caller) = (shared.discovery.clone(), shared.catalog.clone(), gate.caller);
    let future: ToolFuture = Box::pin(async move {
        let mut out: ToolOutput = discovery.search_now(&cell, args, caller)?;
        if let Some(content) = out.content.as_object_mut() {
            content.extend(report);
        }
        Ok(out)
    });
    finish.run(future, timeout, None).await
}

/// The servers a search with `focus` starts, of the `unlisted` ones, in
/// the order they are tried.
fn in_start_order(mcp: &super::mcp_link::McpLink, focus: McpFocus, unlisted: Vec<String>) -> Vec<String> {
    match focus {
        McpFocus::Named(servers) => servers,
        // Servers whose last start failed go after the others, so a
        // failing server does not take the bound from them search after
        // search; it is tried again when the bound leaves room.
        McpFocus::All => {
            let (failed, fresh): (Vec<String>, Vec<String>) =
                unlisted.into_iter().partition(|s| mcp.last_failure(s).is_some());
            fresh.into_iter().chain(failed).collect()
        }
        McpFocus::Unrelated => Vec::new(),
    }
}

/// Starts the `allowed` servers (name, start lock, listing seen) together
/// and records each one's outcome in `outcomes` (and a note per server
/// started in `notes`).
async fn start_together(
    shared: &Shared,
    mcp: &Arc<super::mcp_link::McpLink>,
    allowed: Vec<(String, tokio::sync::OwnedMutexGuard<()>, u64)>,
    outcomes: &mut HashMap<String, Outcome>,
    notes: &mut Vec<String>,
) {
    // The starts run together, each on its own task holding its server's
    // start lock; one still going at the budget's end is aborted (a start
    // dropped half-way ends its process).
    let deadline = tokio::time::Instant::now() + BUDGET;
    let starts: Vec<_> = allowed
        .into_iter()
        .map(|(server, guard, seen)| {
            let (link, name) = (mcp.clone(), server.clone());
            let task = shared.tools.spawn(async move {
                let _guard = guard;
                link.connect_since(&name, seen).await.map(|_| ()).map_err(|e| e.to_string())
            });
            (server, task)
        })
        .collect();
    for (server, mut task) in starts {
        let outcome = match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(Ok(Ok(()))) => {
                notes.push(format!("started MCP server `{server}`"));
                Outcome::Started
            }
            Ok(Ok(Err(e))) => Outcome::Failed(e),
            Ok(Err(_)) => Outcome::Failed("its start panicked; this is a bug".to_owned()),
            Err(_) => {
                task.abort();
                Outcome::TimedOut
            }
        };
        outcomes.insert(server, outcome);
    }
}

/// The fields a search adds: `started_servers` (when it started some) and
/// `unlisted_servers` (when some are still not listed).
fn report(
    mcp: &super::mcp_link::McpLink,
    refusals: &Refusals,
    outcomes: &HashMap<String, Outcome>,
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let mut started: Vec<&String> =
        outcomes.iter().filter(|(_, o)| matches!(o, Outcome::Started)).map(|(s, _)| s).collect();
    started.sort();
    if !started.is_empty() {
        out.insert("started_servers".into(), json!(started));
    }
    let refused = refusals.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let unlisted: Vec<Value> = mcp
        .unlisted_servers()
        .into_iter()
        .map(|server| {
            let connect = naming::connect_name(&server);
            let (state, why) = match outcomes.get(&server) {
                Some(Outcome::Stopped { kind, reason }) => (*kind, reason.clone()),
                Some(Outcome::Failed(e)) => ("failed", format!("its start failed: {e}")),
                Some(Outcome::OverBound) => (
                    "over_bound",
                    format!(
                        "not started: a search starts at most {MAX_SERVERS} servers; name `{server}` in the query, \
                         or call `{connect}`, to start it"
                    ),
                ),
                Some(Outcome::TimedOut) => (
                    "timed_out",
                    format!(
                        "did not finish starting within this search's {} s budget, so the start was given up; \
                         call `{connect}` to start it with its own startup timeout (`startup_timeout_ms`)",
                        BUDGET.as_secs()
                    ),
                ),
                // Listed after all (a start that ended without tools).
                Some(Outcome::Started) => ("started", "started, but listed no tools".to_owned()),
                None => match refused.get(&server) {
                    Some((decision, reason)) => {
                        (if *decision == Decision::Denied { "denied" } else { "refused" }, reason.clone())
                    }
                    None => match mcp.last_failure(&server) {
                        Some(e) => ("failed", format!("its last start failed: {e}")),
                        None => (
                            "not_started",
                            format!(
                                "not started: this search is not about MCP servers (its query does not name \
                                 `{server}`, say `mcp`, or miss every tool listed); name the server in the query, \
                                 or call `{connect}`, to start it and see its tools"
                            ),
                        ),
                    },
                },
            };
            json!({"name": server, "state": state, "why": why})
        })
        .collect();
    if !unlisted.is_empty() {
        out.insert("unlisted_servers".into(), Value::Array(unlisted));
    }
    out
}
