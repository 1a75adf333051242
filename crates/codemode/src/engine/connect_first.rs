//! Calls of an MCP server's tools before the gate let the server start.
//!
//! The call is gated as `mcp_connect__<server>` first (every step: rules,
//! hooks, approval), with the caller of the call; a refusal ends the call
//! and starts no process. Allowed, the server starts and lists its tools,
//! the catalog is rebuilt, and the call itself then passes the whole gate
//! against the new catalog (its schema may have changed; a tool the server
//! did not list is refused with the names it did list). All of this runs
//! on the tool runtime, so the run's deadline and cancellation apply.
//!
//! A call allowed on resume (`codemode resume --allow`) whose server has not
//! started in the resuming process takes the first half only: the start is
//! gated and made, then the call runs as allowed.

use crate::gate::protection;
use std::sync::Arc;

use serde_json::{Value, json};

use super::dispatch::{Begun, Dispatcher, Finisher, decide_early, later_context, timeout_of};
use crate::catalog::Catalog;
use crate::gate::later::{self, Final, LaterCall};
use crate::gate::{self, CallRequest, Early};
use crate::journal::record::PendingRecord;
use crate::mcp::naming;
use crate::receipt::{Caller, Decision, Ledger};

/// What gating one call (all steps) decided.
enum Gated {
    Run {
        args: Value,
        decision: Decision,
        notes: Vec<String>,
    },
    Refuse(String),
    Deny(String),
    /// The approver paused the call (never the server's start).
    Pause {
        args: Value,
        reason: String,
        subject: Option<String>,
        notes: Vec<String>,
        bound: Option<Box<crate::journal::record::BoundObject>>,
    },
    /// The approver paused the server's start, which cannot pause: the
    /// refusal to give, unless the call was allowed on resume.
    PausedStart(String),
}

impl Dispatcher {
    /// What gating call `seq` inside its future needs from the run.
    pub(super) fn gate_run(&self, caller: Caller, calls_made: usize, seq: u64) -> GateRun {
        GateRun {
            dispatcher_start: self.start,
            run_id: self.run_id.clone(),
            clock: self.clock.clone(),
            caller,
            calls_made,
            seq,
            changes: self.changes.clone(),
        }
    }

    /// Opens the call's receipt and returns the future that gates the
    /// server's connection, starts it, then gates and runs the call.
    pub(super) fn begin_connecting(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args: Value,
        caller: Caller,
        server: String,
    ) -> Begun {
        let calls_made = ledger.calls_made();
        // Its tool may change something (its annotations are not known
        // yet): its start is durable (recovery.rs).
        self.note_durable_unknown();
        // `pending` until the server's start and the call are decided (a
        // run that stops first does not call it `auto`).
        let seq = ledger.open(tool, caller, Decision::Pending, None);
        let finish = self.finisher(tool, seq, Decision::Auto, None);
        let gate = self.gate_run(caller, calls_made, seq);
        let starts =
            RunStarts { refusals: self.connect_refusals.clone(), prestarted: self.prestarted.clone() };
        let pausable = self.pausable;
        let future = Box::pin(async move {
            let shared = finish.shared.clone();
            let mcp = shared.mcp.clone().expect("only MCP tools take this path");
            let (decision, mut notes) = match start_server(&gate, &finish, &starts, &server, false).await {
                Ok(started) => started,
                Err(stopped) => return *stopped,
            };
            let tool = finish.tool.clone();
            let (args, call_decision, call_notes) = match gate.decide(&finish, &tool, args).await {
                Gated::Run { args, decision, notes } => (args, decision, notes),
                Gated::Refuse(r) if shared.catalog.load().get(&tool).is_none() => {
                    let r = match (mcp.why_hidden(&tool), mcp.why_unlisted(&server)) {
                        (Some(hidden), _) => hidden,
                        (None, Some(why)) => format!("{r}. {why}"),
                        (None, None) => format!("MCP server `{server}` does not list `{tool}`: {r}"),
                    };
                    return finish.refused(Decision::Refused, "refused", r);
                }
                Gated::Refuse(r) | Gated::PausedStart(r) => {
                    return finish.refused(Decision::Refused, "refused", r);
                }
                Gated::Deny(r) => return finish.refused(Decision::Denied, "denied", r),
                Gated::Pause { args, reason, subject, notes: call_notes, bound } if pausable => {
                    let notes = notes.into_iter().chain(call_notes).collect();
                    let pending = PendingRecord {
                        seq: finish.seq,
                        tool: tool.to_string(),
                        args,
                        reason,
                        subject,
                        notes,
                        bound: bound.map(|b| *b),
                        kind: None,
                        changed_since_pause: None,
                    };
                    return finish.paused(pending);
                }
                Gated::Pause { reason, .. } => {
                    return finish.refused(
                        Decision::Refused,
                        "refused",
                        super::dispatch::not_pausable(&reason),
                    );
                }
            };
            notes.extend(call_notes);
            let catalog = shared.catalog.load();
            let Some(entry) = catalog.get(&tool) else {
                return finish.refused(Decision::Refused, "refused", "the tool left the catalog".into());
            };
            let decision = if call_decision == Decision::Approved { call_decision } else { decision };
            gate.clock.decided(seq, decision);
            let finish = Finisher { decision, ..finish };
            run_call(finish, notes, entry, args, &gate).await
        });
        Begun::Running { seq, future }
    }

    /// A call allowed on resume (`finish` holds its `approved` decision and
    /// notes) of a tool of MCP `server`, which the gate has not let start
    /// in this process: gates `mcp_connect__<server>` (every step, as
    /// [`Dispatcher::begin_connecting`] does), starts the server, then runs
    /// the call with its journaled arguments, without gating it again.
    pub(super) fn begin_allowed_connecting(
        &self,
        calls_made: usize,
        finish: Finisher,
        args: Value,
        caller: Caller,
        server: String,
    ) -> Begun {
        let seq = finish.seq;
        let gate = self.gate_run(caller, calls_made, seq);
        let starts =
            RunStarts { refusals: self.connect_refusals.clone(), prestarted: self.prestarted.clone() };
        let future = Box::pin(async move {
            let shared = finish.shared.clone();
            let notes = match start_server(&gate, &finish, &starts, &server, true).await {
                Ok((_, notes)) => notes,
                Err(stopped) => return *stopped,
            };
            let catalog = shared.catalog.load();
            let Some(entry) = catalog.get(&finish.tool) else {
                let reason = format!("MCP server `{server}` no longer lists `{}`", finish.tool);
                return finish.refused(Decision::Refused, "refused", reason);
            };
            let notes: Vec<String> = notes.into_iter().chain(finish.notes.clone()).collect();
            run_call(finish, notes, entry, args, &gate).await
        });
        Begun::Running { seq, future }
    }
}

/// Runs the gated call of `entry` with `args` and the call's `notes`.
async fn run_call(
    finish: Finisher,
    notes: Vec<String>,
    entry: &crate::catalog::Entry,
    args: Value,
    gate: &GateRun,
) -> super::dispatch::Completion {
    let finish = Finisher { notes: (!notes.is_empty()).then(|| notes.join("; ")), ..finish };
    let cx = super::dispatch::call_context(&finish, &gate.run_id, &gate.clock, gate.caller);
    let timeout = timeout_of(&finish.shared, &entry.spec);
    finish.run_entry(entry, args, cx, timeout).await
}

/// The refusals of server starts in one run, by server.
pub(super) type Refusals = Arc<std::sync::Mutex<std::collections::HashMap<String, (Decision, String)>>>;

/// What one run knows of its server starts: the refusals, and the servers
/// it started before its first call (prestart.rs).
pub(super) struct RunStarts {
    pub(super) refusals: Refusals,
    pub(super) prestarted: super::prestart::Prestarted,
}

/// Gates `mcp_connect__<server>` for the call `finish` (unless the gate
/// allowed the server already in this engine) and starts the server. One
/// call at a time decides and starts a server: calls made together
/// (`Promise.all`, a batch) wait for the first, so the connection is asked
/// for once, not once per call; a refusal holds for the rest of the run.
///
/// With `resuming` (the call was allowed on resume by `codemode resume
/// --allow`), an approver that would pause the start (resume's default
/// approver is `pause`) is taken as allowing it: the person allowed a call
/// that needs the server; deny rules and denials still refuse.
///
/// Returns the connection's decision and the notes for the call (`started
/// MCP server`, a trusted file's allowance), or the call's completion when
/// the start was refused, denied or failed.
async fn start_server(
    gate: &GateRun,
    finish: &Finisher,
    starts: &RunStarts,
    server: &str,
    resuming: bool,
) -> Result<(Decision, Vec<String>), Box<super::dispatch::Completion>> {
    let mcp = finish.shared.mcp.clone().expect("only MCP tools take this path");
    let (decision, mut notes, starting, seen) =
        match gate_start(gate, finish, &starts.refusals, server, resuming).await {
            StartGate::Allowed { decision, notes, guard, seen } => (decision, notes, guard, seen),
            StartGate::Stopped { decision, kind, reason } => {
                return Err(Box::new(finish.refused(decision, kind, reason)));
            }
        };
    // This call uses the server whatever its start gives (and even if the
    // call is cancelled while it waits): the run's early start of it, if
    // any, is not unused.
    let early = starts.prestarted.take(server);
    let was_running = mcp.is_running(server);
    if let Err(e) = mcp.connect_since(server, seen).await {
        return Err(Box::new(Finisher { decision, ..finish.clone() }.failed("failed", e.to_string())));
    }
    drop(starting);
    if early {
        notes.insert(0, super::prestart::note(server));
    } else if !was_running {
        notes.insert(0, format!("started MCP server `{server}`"));
    }
    Ok((decision, notes))
}

/// What the gate said to starting one MCP server.
pub(super) enum StartGate {
    /// The server may start: the connection's decision and notes, the
    /// server's start lock (hold it until the start is done) and the starts
    /// of the server seen before waiting for the lock (for
    /// [`McpLink::connect_since`](super::mcp_link::McpLink::connect_since)).
    Allowed { decision: Decision, notes: Vec<String>, guard: tokio::sync::OwnedMutexGuard<()>, seen: u64 },
    /// Refused or denied (`kind` is `refused` or `denied`), with the reason
    /// naming the server and `mcp_connect__<server>`.
    Stopped { decision: Decision, kind: &'static str, reason: String },
}

/// The gate half of [`start_server`]: waits for `server`'s start lock,
/// answers a refusal already given in this run, else gates
/// `mcp_connect__<server>` (unless the gate allowed the server already in
/// this engine). A refusal or denial is recorded in `refusals`, so it
/// holds for the rest of the run.
pub(super) async fn gate_start(
    gate: &GateRun,
    finish: &Finisher,
    refusals: &Refusals,
    server: &str,
    resuming: bool,
) -> StartGate {
    let mcp = finish.shared.mcp.clone().expect("only MCP tools take this path");
    let connect = naming::connect_name(server);
    // A server runs outside the sandbox: a file a server command names that
    // a tool call created during this run must not run, also on a restart
    // of a server the gate allowed already.
    if let Some(file) = protection::file_appeared(&finish.shared.protections, protection::NamedBy::McpServer)
    {
        let reason = format!(
            "MCP server `{server}` may not start: `{}`, a file an MCP server command names, did not exist when \
             the engine was built and exists now (a tool call may have created it); check the file, then start \
             a new run",
            file.display()
        );
        return StartGate::Stopped { decision: Decision::Refused, kind: "refused", reason };
    }
    // Counted before waiting: a start that fails while this call waits
    // fails it too, at once (no start per waiting call).
    let seen = mcp.pool.starts_seen(server);
    let guard = mcp.start_lock(server).await;
    let refused = refusals.lock().unwrap_or_else(|p| p.into_inner()).get(server).cloned();
    if let Some((decision, reason)) = refused {
        let kind = if decision == Decision::Denied { "denied" } else { "refused" };
        return StartGate::Stopped { decision, kind, reason };
    }
    // A server the gate already allowed (which failed to start, or is up
    // without this tool) is not gated again.
    let gated = if mcp.is_allowed(server) {
        Gated::Run { args: Value::Null, decision: Decision::Auto, notes: Vec::new() }
    } else {
        gate.decide(finish, &connect, json!({})).await
    };
    // A refusal holds for the rest of the run.
    let refuse = |decision: Decision, kind: &'static str, reason: String| {
        refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(server.to_owned(), (decision, reason.clone()));
        StartGate::Stopped { decision, kind, reason }
    };
    match gated {
        Gated::Run { decision, notes, .. } => StartGate::Allowed { decision, notes, guard, seen },
        Gated::PausedStart(_) if resuming => StartGate::Allowed {
            decision: Decision::Approved,
            notes: vec![format!("`{connect}` allowed by the resume that allowed this call")],
            guard,
            seen,
        },
        // (`decide` turns a pause of the start into `PausedStart`.)
        Gated::Refuse(r) | Gated::PausedStart(r) | Gated::Pause { reason: r, .. } => {
            let reason = format!("MCP server `{server}` may not start (`{connect}`): {r}");
            refuse(Decision::Refused, "refused", reason)
        }
        Gated::Deny(r) => {
            let reason = format!("MCP server `{server}` may not start (`{connect}` denied): {r}");
            refuse(Decision::Denied, "denied", reason)
        }
    }
}

/// What gating a call inside the future needs from the run.
pub(super) struct GateRun {
    dispatcher_start: (gate::Posture, u64),
    run_id: Arc<str>,
    pub(super) clock: Arc<crate::vm::clock::RunClock>,
    pub(super) caller: Caller,
    calls_made: usize,
    pub(super) seq: u64,
    /// The run's calls that may have changed files.
    changes: crate::gate::RunChanges,
}

impl GateRun {
    /// Every gate step for `tool` with `args`, against the current catalog.
    async fn decide(&self, finish: &Finisher, tool: &str, args: Value) -> Gated {
        let shared = &finish.shared;
        let catalog: Arc<Catalog> = shared.catalog.load();
        let primary = catalog.get(tool).and_then(|e| gate::primary::of(&e.spec, &args, &shared.workspace));
        let request = CallRequest {
            tool,
            args: &args,
            caller: self.caller,
            calls_made: self.calls_made,
            primary: primary.as_ref(),
        };
        let prep = match decide_early(shared, &catalog, None, &request, self.dispatcher_start, &self.run_id) {
            Early::Continue(prep) => prep,
            Early::Refuse(reason, step) => {
                if let Some(trace) = &finish.trace {
                    trace.decided(self.seq, step, None);
                }
                return Gated::Refuse(reason);
            }
            Early::Exhausted(reason) => return Gated::Refuse(reason),
        };
        // A connection a trusted configuration allowed says so in the
        // receipt's note.
        let trusted = shared
            .mcp
            .as_ref()
            .and_then(|m| m.trusted_allowance(tool))
            .filter(|_| prep.allowed_by.as_deref() == Some(tool))
            .map(|t| format!("`{tool}` allowed without approval: {t}"));
        if !later::needed(tool, &prep, &shared.config.policy, &shared.posture) {
            if let (Some(trace), Some(_)) = (&finish.trace, &prep.allowed_by) {
                trace.decided(self.seq, "rules", None);
            }
            if !prep.reader {
                let subject = super::dispatch::approval_subject(shared, tool, primary.as_ref());
                self.changes.record(tool, subject.as_deref());
            }
            return Gated::Run { args, decision: Decision::Auto, notes: trusted.into_iter().collect() };
        }
        let Some(entry) = catalog.get(tool) else { return Gated::Refuse(format!("unknown tool `{tool}`")) };
        let call = LaterCall {
            tool,
            args,
            caller: self.caller,
            run_id: &self.run_id,
            seq: self.seq,
            workspace: &shared.workspace,
            prep,
            annotations: &entry.spec.annotations,
            subject: super::dispatch::approval_subject(shared, tool, primary.as_ref()),
            changes: &self.changes,
        };
        let asked = std::time::Instant::now();
        let cx = later_context(shared, finish.approver.as_ref(), &catalog, &self.clock);
        let (end, step) = later::decide_rest(call, cx).await;
        // The step that decided the server's start, then the one that
        // decided the call itself: the call's span names the last.
        if let Some(trace) = &finish.trace {
            trace.decided(self.seq, step, Some(asked.elapsed()));
        }
        match end {
            Final::Run { args, decision, mut notes } => {
                if decision == Decision::Auto {
                    notes.extend(trusted);
                }
                Gated::Run { args, decision, notes }
            }
            Final::Refuse(reason) => Gated::Refuse(reason),
            Final::Deny(reason) => Gated::Deny(reason),
            // Pausing on a server's start is not journaled yet: refused,
            // with what to do instead.
            Final::Pause { reason, .. } if tool.starts_with(naming::CONNECT_PREFIX) => {
                Gated::PausedStart(format!(
                    "the approver paused `{tool}` ({reason}), but a run cannot pause on starting an MCP server \
                 inside another call yet; call `{tool}` first on its own (`await tools.call('{tool}', {{}})`), \
                 which can pause for the decision, or allow it by a rule (`{tool}`)"
                ))
            }
            // The call itself, once its server is up, pauses like any call.
            Final::Pause { args, reason, subject, notes, bound } => {
                Gated::Pause { args, reason, subject, notes, bound }
            }
        }
    }
}
