//! The dispatcher: the one path every call takes, direct or nested.
//!
//! `begin` parses the arguments, asks the gate, opens the call's receipt,
//! and starts the tool. A tool future is polled once right here (on the
//! caller's thread, inside the tool runtime's context): an in-memory tool
//! answers without a thread hop; anything that waits is handed back as a
//! [`CallFuture`] for the caller to run on the tool runtime. Results are
//! bounded (and spilled) before they leave.

use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::Shared;
use super::connect_first::{GateRun, Refusals};
use crate::catalog::{Catalog, Entry, ToolContext};
use crate::gate::later;
use crate::gate::{self, CallRequest, Early, Posture, Preparation};
use crate::receipt::spill::SpillArea;
use crate::receipt::{CallStatus, Caller, Decision, Ledger, Truncation, ledger::CallEnd};
use crate::tools::Abandon;
use crate::vm::clock::RunClock;

pub(crate) use crate::journal::completion::Completion;
pub(crate) use crate::vm::calls::{Begun, CallFuture};

mod admission;
mod finish;
mod gate_steps;
mod later_steps;
mod paced;
mod recovery;

use finish::Finished;
pub(crate) use finish::Finisher;
pub(crate) use gate_steps::{
    approval_subject, call_context, decide_early, later_context, not_pausable, timeout_of,
};
use gate_steps::{error_payload, not_in_cached_list, refuse};
use later_steps::LaterSteps;

impl Completion {
    /// The completion of a call whose task panicked, which the gate let
    /// run with `decision`.
    pub(crate) fn panicked(seq: u64, tool: &str, decision: Decision) -> Completion {
        let message = "the tool panicked; this is a bug in the tool";
        Completion {
            seq,
            end: CallEnd {
                status: CallStatus::Failed,
                decision,
                elapsed: Duration::ZERO,
                bytes: 0,
                truncated: None,
                error: Some(message.to_owned()),
                note: None,
                elicitations: Vec::new(),
                queued: None,
                attempts: 1,
                progress: None,
            },
            ok: false,
            payload: error_payload("failed", message, tool, seq),
            text: None,
            pause: None,
            journaled: false,
        }
    }
}

/// The envelope a successful call resolves to (DESIGN.md §3).
#[derive(Serialize)]
pub(crate) struct Envelope<'a> {
    content: &'a Value,
    metadata: &'a Option<Value>,
    truncated: &'a Option<Truncation>,
}

/// The envelope without its content, for text results.
#[derive(Serialize)]
pub(crate) struct EnvelopeRest<'a> {
    metadata: &'a Option<Value>,
    truncated: &'a Option<Truncation>,
}

/// The error a failed call rejects with; the prelude turns it into a
/// `ToolError`.
#[derive(Serialize)]
pub(crate) struct ErrorPayload<'a> {
    kind: &'a str,
    message: &'a str,
    tool: &'a str,
    seq: u64,
}

/// Starts calls for one run.
pub(crate) struct Dispatcher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) run_id: Arc<str>,
    pub(crate) spill: Arc<SpillArea>,
    pub(crate) clock: Arc<RunClock>,
    /// The engine's posture and its epoch when the run started.
    pub(crate) start: (Posture, u64),
    /// The run's turn, for the toolbox's eviction order.
    turn: u64,
    /// MCP servers the gate refused to start in this run, with the
    /// decision and reason: later calls of their tools get the same answer
    /// without asking again (connect_first.rs).
    pub(crate) connect_refusals: super::connect_first::Refusals,
    /// The MCP servers this run started before its first call, until a
    /// call uses each (prestart.rs).
    pub(crate) prestarted: super::prestart::Prestarted,
    /// Whether a call the approver pauses may pause the run (a journaled
    /// program run); elsewhere such a call is refused.
    pub(crate) pausable: bool,
    /// Who decides this run's approvals and answers its elicitations: the
    /// engine's approver unless the run was started with its own
    /// ([`RunOptions::approver`](super::RunOptions::approver)).
    pub(crate) approver: Arc<dyn crate::gate::Approver>,
    /// The run's calls that may have changed files (how long a prompt's
    /// `a` for bash or a server's start holds).
    pub(crate) changes: crate::gate::RunChanges,
    /// The run's journal, when it keeps one: calls that may change
    /// something start once their start is durable (recovery.rs).
    pub(crate) durable: Option<crate::journal::durable::DurableLog>,
    /// Set when a call that may change something was begun and not yet
    /// told to the VM ([`Dispatcher::take_durable_begun`]).
    pub(crate) durable_begun: std::sync::atomic::AtomicBool,
    /// Where the run's `write` and `edit` calls keep pre-images (a
    /// journaled program run): `None` keeps none (journal/undo.rs).
    pub(crate) undo: Option<Arc<crate::journal::UndoLog>>,
    /// A rollback's plan: its `write` calls restore files by it.
    pub(crate) restore: Option<Arc<crate::journal::undo::RestorePlan>>,
    /// The run's trace record, when it is traced (telemetry/mod.rs).
    pub(crate) trace: Option<Arc<crate::telemetry::RunTrace>>,
    /// The files a journaled run's calls named by path, and those a
    /// resume found changed since the pause, whose change is refused
    /// (journal/files_seen.rs). `None` for a run without a journal.
    pub(crate) files_seen: Option<Arc<crate::journal::files_seen::FilesSeen>>,
}

impl Dispatcher {
    /// The dispatcher of run `run_id`, timed by `clock`, started under the
    /// engine's current posture.
    pub(crate) fn new(shared: Arc<Shared>, run_id: Arc<str>, clock: Arc<RunClock>) -> Self {
        let spill = Arc::new(SpillArea::new(
            &shared.spill_root,
            &run_id,
            shared.spill_confine.clone(),
            shared.limits.spill_bytes,
        ));
        let start = shared.posture.get();
        let turn = shared.discovery.begin_turn();
        let approver = shared.approver.clone();
        Dispatcher {
            approver,
            shared,
            run_id,
            spill,
            clock,
            start,
            turn,
            connect_refusals: Arc::default(),
            prestarted: Default::default(),
            pausable: false,
            changes: crate::gate::RunChanges::default(),
            durable: None,
            durable_begun: std::sync::atomic::AtomicBool::new(false),
            undo: None,
            restore: None,
            trace: None,
            files_seen: None,
        }
    }

    /// Notes in a traced run that the gate step `step` decided call `seq`.
    fn decided_by(&self, seq: u64, step: &'static str, took: Option<Duration>) {
        if let Some(trace) = &self.trace {
            trace.decided(seq, step, took);
        }
    }

    /// This dispatcher's calls may pause the run (a journaled program run).
    pub(crate) fn pausable(self) -> Self {
        Dispatcher { pausable: true, ..self }
    }

    /// This dispatcher's `write` and `edit` calls keep pre-images in
    /// `undo`, when given (journal/undo.rs).
    pub(crate) fn keeping_preimages(self, undo: Option<Arc<crate::journal::UndoLog>>) -> Self {
        Dispatcher { undo, ..self }
    }

    /// This dispatcher's `write` calls restore files by `plan` (a
    /// rollback's batch).
    pub(crate) fn restoring(self, plan: Option<Arc<crate::journal::undo::RestorePlan>>) -> Self {
        Dispatcher { restore: plan, ..self }
    }

    /// This dispatcher asks `approver` instead of the engine's, when given.
    pub(crate) fn with_approver(self, approver: Option<Arc<dyn crate::gate::Approver>>) -> Self {
        match approver {
            Some(approver) => Dispatcher { approver, ..self },
            None => self,
        }
    }

    /// The finisher of call `seq` of `tool`, started now, with no question
    /// asked yet.
    pub(crate) fn finisher(
        &self,
        tool: &str,
        seq: u64,
        decision: Decision,
        notes: Option<String>,
    ) -> Finisher {
        self.finisher_named(Arc::from(tool), seq, decision, notes)
    }

    /// [`Dispatcher::finisher`] with the tool's name already shared (a
    /// catalog entry's).
    pub(crate) fn finisher_named(
        &self,
        tool: Arc<str>,
        seq: u64,
        decision: Decision,
        notes: Option<String>,
    ) -> Finisher {
        Finisher {
            shared: self.shared.clone(),
            approver: self.approver.clone(),
            spill: self.spill.clone(),
            tool,
            seq,
            started: Instant::now(),
            decision,
            notes,
            questions: Arc::default(),
            durable: self.durable.clone(),
            undo: self.undo.clone(),
            restore: self.restore.clone(),
            trace: self.trace.clone(),
            queued: None,
            attempts: 1,
            clock: self.clock.clone(),
        }
    }

    /// The context a tool gets for the call `finish` finishes.
    fn tool_context(&self, finish: &Finisher, caller: Caller) -> ToolContext {
        call_context(finish, &self.run_id, &self.clock, caller)
    }

    /// Starts a call that paused the run and was allowed on resume: the
    /// gate decided it then (the policy and catalog are checked unchanged),
    /// so it runs with the arguments it would have run with, decision
    /// `approved`.
    pub(crate) fn begin_allowed(
        &self,
        ledger: &mut Ledger,
        pending: &crate::journal::record::PendingRecord,
        caller: Caller,
        note: String,
    ) -> Begun {
        let catalog = self.shared.catalog.load();
        let tool = pending.tool.as_str();
        let Some(entry) = catalog.get(tool) else {
            let reason = format!("`{tool}` is no longer in the catalog (its MCP server's tool list changed)");
            return Begun::Settled(refuse(ledger, tool, caller, reason));
        };
        // The allow holds for the object the person was asked about: a path
        // that resolves elsewhere now is refused (gate/binding.rs).
        if let Err(reason) = gate::binding::check_pending(pending, &entry.spec, &self.shared.workspace) {
            return Begun::Settled(refuse(ledger, tool, caller, reason));
        }
        let calls_made = ledger.calls_made();
        self.note_durable(&entry.spec);
        if !entry.spec.is_read_only() {
            self.changes.record(tool, pending.subject.as_deref());
        }
        let seq = ledger.open(tool, caller, Decision::Approved, None);
        let notes: Vec<String> = pending.notes.iter().cloned().chain([note]).collect();
        let finish = self.finisher_named(entry.name.clone(), seq, Decision::Approved, Some(notes.join("; ")));
        // A tool of an MCP server not started in this process (the calls
        // before it were answered from the journal): the server's start is
        // gated first, as for any first call of a server.
        if let crate::catalog::ToolSource::Mcp { server } = &entry.spec.source
            && self.shared.mcp.as_ref().is_some_and(|mcp| !mcp.is_allowed(server))
        {
            return self.begin_allowed_connecting(
                calls_made,
                finish,
                pending.args.clone(),
                caller,
                server.clone(),
            );
        }
        let cx = self.tool_context(&finish, caller);
        let timeout = timeout_of(&self.shared, &entry.spec);
        Begun::Running { seq, future: finish.run_entry(entry, pending.args.clone(), cx, timeout) }
    }

    /// A call that paused the run and was denied on resume: decision
    /// `denied`, the program's ToolError of `kind` (`denied`, or
    /// `unknown_outcome` for a call a recovery left to a person), handed to the program when the replay has caught up (so
    /// the program meets it where it would have).
    pub(crate) fn begin_denied(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        caller: Caller,
        reason: String,
        note: Option<String>,
        kind: &str,
    ) -> Begun {
        let seq = ledger.open(tool, caller, Decision::Denied, Some(reason.clone()));
        let finish = self.finisher(tool, seq, Decision::Denied, note);
        let completion = finish.refused(Decision::Denied, kind, reason);
        Begun::Running { seq, future: Box::pin(std::future::ready(completion)) }
    }

    /// The run's spill area (results and the return value share its budget).
    pub(crate) fn spill_area(&self) -> &SpillArea {
        &self.spill
    }

    /// Gates and starts one call of `tool` with `args_json` (a JSON text).
    ///
    /// With `slot_free` false (the run's in-flight limit is reached) the tool
    /// is not polled here: the call comes back `Running` and starts when the
    /// caller gives it a slot.
    pub(crate) fn begin(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun {
        let args: Value = match codemode_base::json_text::parse(args_json) {
            Ok(v) => v,
            Err(e) => {
                let reason = format!("the arguments: {e}");
                return Begun::Settled(refuse(ledger, tool, caller, reason));
            }
        };
        self.begin_value(ledger, tool, args, caller, slot_free)
    }

    /// [`Dispatcher::begin`] with the arguments already parsed (a batch's
    /// calls come as JSON values).
    pub(crate) fn begin_value(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args: Value,
        caller: Caller,
        slot_free: bool,
    ) -> Begun {
        let shared = &self.shared;
        let catalog = shared.catalog.load();
        let entry = catalog.get(tool);
        // A tool of an MCP server the gate has not let start yet: the gate
        // decides `mcp_connect__<server>` first (connect_first.rs). A tool
        // the catalog does not know yet (its server never listed) goes there
        // at once; a known one passes the synchronous steps first, so bad arguments
        // start nothing.
        if entry.is_none()
            && let Some(unlisted) = self.unlisted(&catalog, tool)
        {
            return match unlisted {
                Unlisted::Refuse(reason) => Begun::Settled(refuse(ledger, tool, caller, reason)),
                Unlisted::Connect(server) => self.begin_connecting(ledger, tool, args, caller, server),
            };
        }
        let primary = entry.and_then(|e| gate::primary::of(&e.spec, &args, &shared.workspace));
        let calls_made = ledger.calls_made();
        let request = CallRequest { tool, args: &args, caller, calls_made, primary: primary.as_ref() };
        let prep = match self.synchronous_steps(ledger, &catalog, entry, &request) {
            ControlFlow::Continue(prep) => prep,
            ControlFlow::Break(refused) => return refused,
        };
        let entry = entry.expect("the gate checked the tool exists");
        if let (Some(seen), Some(p)) = (&self.files_seen, &primary)
            && let Some(target) = &p.target
        {
            // A resumed run goes on from what it saw before its pause: a
            // file changed since is not changed again from that, under
            // either spelling (journal/files_seen.rs).
            let written = shared.workspace.join(&p.written);
            let spellings = [written.as_path(), target.as_path()];
            if !entry.spec.is_read_only()
                && let Some(reason) = seen.refusal(&spellings, &p.written)
            {
                let completion = refuse(ledger, tool, caller, reason);
                self.decided_by(completion.seq, "resume", None);
                return Begun::Settled(completion);
            }
            // A `read` made now sees the file as it is (a grep or a
            // search does not, nor another tool's read of it).
            let reads = tool == "read" && entry.spec.source == crate::catalog::ToolSource::Native;
            seen.note(&spellings, reads);
        }
        let durable = self.note_durable(&entry.spec);
        if let Some(server) = self.server_not_started(entry) {
            return self.begin_connecting(ledger, tool, args, caller, server);
        }
        // A call that hooks or an approval decide is `pending` until they
        // have (so a run that stops first does not call it `auto`).
        let later = later::needed(tool, &prep, &shared.config.policy, &shared.posture);
        if !later && !prep.reader && self.changes.watching() {
            self.changes.record(tool, approval_subject(shared, tool, primary.as_ref()).as_deref());
        }
        let seq = ledger.open(tool, caller, if later { Decision::Pending } else { Decision::Auto }, None);
        if !later && prep.allowed_by.is_some() {
            self.decided_by(seq, "rules", None);
        }
        if entry.spec.loading == crate::catalog::Loading::Deferred {
            shared.discovery.note_called(tool, self.turn);
        }
        let timeout = timeout_of(shared, &entry.spec);
        let note = if later { None } else { self.prestart_note(tool) };
        let finish = self.finisher_named(entry.name.clone(), seq, Decision::Auto, note);
        let cx = self.tool_context(&finish, caller);
        // `tool_search` with MCP servers not listed yet: discovery first
        // (discover.rs), once the search's own gate has passed.
        let discovering = self.discovering(tool, caller, calls_made, seq);
        // Hooks and approvals wait: that part of the gate, and then the
        // tool, run on the tool runtime.
        if later {
            let steps = LaterSteps {
                finish,
                args,
                caller,
                prep,
                subject: approval_subject(shared, tool, primary.as_ref()),
                clock: self.clock.clone(),
                run_id: self.run_id.clone(),
                pausable: self.pausable,
                changes: self.changes.clone(),
                discovering,
                timeout,
                cx,
            };
            return Begun::Running { seq, future: Box::pin(steps.run()) };
        }
        if let Some((gate, refusals)) = discovering {
            let future = Box::pin(super::discover::search(finish, gate, refusals, args, timeout));
            return Begun::Running { seq, future };
        }
        // A call that may change something starts once its start is
        // durable: not polled here.
        self.first_poll(ledger, entry, finish, (args, cx), timeout, slot_free && !durable)
    }

    /// The gate's synchronous steps for `request`: go on with what they
    /// learnt, or stop with the call opened and settled as refused
    /// (`Exhausted` when the refusal ends the run).
    fn synchronous_steps(
        &self,
        ledger: &mut Ledger,
        catalog: &Catalog,
        entry: Option<&Entry>,
        request: &CallRequest<'_>,
    ) -> ControlFlow<Begun, Preparation> {
        let (tool, caller) = (request.tool, request.caller);
        match decide_early(&self.shared, catalog, entry, request, self.start, &self.run_id) {
            Early::Continue(prep) => ControlFlow::Continue(prep),
            Early::Refuse(reason, step) => {
                let completion = refuse(ledger, tool, caller, reason);
                self.decided_by(completion.seq, step, None);
                ControlFlow::Break(Begun::Settled(completion))
            }
            Early::Exhausted(reason) => {
                let completion = refuse(ledger, tool, caller, reason.clone());
                self.decided_by(completion.seq, "budget", None);
                ControlFlow::Break(Begun::Exhausted { completion, reason })
            }
        }
    }

    /// The MCP server of `entry`'s tool, when the gate has not let it start
    /// yet (its start is gated first: connect_first.rs).
    fn server_not_started(&self, entry: &Entry) -> Option<String> {
        match (&self.shared.mcp, &entry.spec.source) {
            (Some(mcp), crate::catalog::ToolSource::Mcp { server }) if !mcp.is_allowed(server) => {
                Some(server.clone())
            }
            _ => None,
        }
    }

    /// For a `tool_search` call `seq` while MCP servers are not listed yet:
    /// the gate and connect refusals its discovery runs with (discover.rs).
    fn discovering(
        &self,
        tool: &str,
        caller: Caller,
        calls_made: usize,
        seq: u64,
    ) -> Option<(GateRun, Refusals)> {
        (tool == crate::catalog::tool_search::TOOL_SEARCH
            && self.shared.mcp.as_ref().is_some_and(|mcp| !mcp.unlisted_servers().is_empty()))
        .then(|| (self.gate_run(caller, calls_made, seq), self.connect_refusals.clone()))
    }

    /// What to do with a call of `tool`, which the catalog does not list,
    /// before the gate's steps: `None` when it is no MCP server's (the gate
    /// then refuses it as unknown).
    fn unlisted(&self, catalog: &Catalog, tool: &str) -> Option<Unlisted> {
        let mcp = self.shared.mcp.as_ref()?;
        if let Some(why) = mcp.why_hidden(tool) {
            return Some(Unlisted::Refuse(why));
        }
        if let Some(server) = mcp.server_of_unlisted(tool) {
            let server = server.to_owned();
            // A server not running whose cached list lacks the tool is
            // not started for it; a running one lists again (once). The
            // list is the server's, not this run's catalog: a run that
            // began while another run was starting the server has a
            // catalog without its tools, which are listed by now. A server
            // reached over HTTP is connected to instead (no process
            // starts): the list cached for its URL may be another
            // server's by now (a redeployment, another server on a port).
            if !mcp.is_running(&server)
                && !mcp.is_remote(&server)
                && mcp.is_listed(&server)
                && !mcp.lists_tool(&server, tool)
            {
                return Some(Unlisted::Refuse(not_in_cached_list(catalog, tool, &server)));
            }
            return Some(Unlisted::Connect(server));
        }
        if let Some(server) = mcp.disabled_server_of(tool) {
            let reason = format!(
                "MCP server `{server}` is disabled in the MCP configuration (`disabled: true`); enable it to call `{tool}`"
            );
            return Some(Unlisted::Refuse(reason));
        }
        None
    }

    /// Starts call `finish.seq` of `entry`'s tool and polls it once here,
    /// inside the tool runtime's context, so a tool that creates timers or
    /// I/O registers them with that runtime. Settled at once when the tool
    /// answered (or panicked) on that poll; `Running` otherwise.
    /// With `poll_now` false (no slot free, or the call waits for its
    /// durable start), or for a call under limits (paced.rs), it is not
    /// polled here: it comes back `Running`.
    fn first_poll(
        &self,
        ledger: &mut Ledger,
        entry: &Entry,
        finish: Finisher,
        (args, cx): (Value, ToolContext),
        timeout: Duration,
        poll_now: bool,
    ) -> Begun {
        let seq = finish.seq;
        // A call under limits waits for its slots first: not polled here.
        if !poll_now || finish.paced(entry) {
            return Begun::Running { seq, future: finish.run_entry(entry, args, cx, timeout) };
        }
        let _enter = self.shared.tools.enter();
        let abandon = Abandon::for_tool(&entry.spec);
        let first = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut future = Abandon::scope(&abandon, entry.tool.call(args, cx));
            let poll = future.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            (future, poll)
        }));
        let (future, poll) = match first {
            Ok(pair) => pair,
            Err(_) => {
                let c = finish.failed("failed", "the tool panicked; this is a bug in the tool".into());
                ledger.finish(seq, c.end.clone());
                return Begun::Settled(c);
            }
        };
        match poll {
            Poll::Ready(result) => match finish.finish(result) {
                Finished::Done(c) => {
                    ledger.finish(seq, c.end.clone());
                    Begun::Settled(c)
                }
                // Spilling writes a file: do it off this thread.
                Finished::NeedsSpill(over) => Begun::Running { seq, future: finish.spill_later(over) },
            },
            Poll::Pending => Begun::Running { seq, future: finish.run(future, timeout, abandon) },
        }
    }
}

/// What happens to a call of a tool the catalog does not list.
enum Unlisted {
    /// Refused with this reason (a hidden tool, a disabled server's, or
    /// one its server's cached list lacks).
    Refuse(String),
    /// Its MCP server's start is gated first (connect_first.rs).
    Connect(String),
}

/// The VM's view of the dispatcher: every `tools.call` of a program goes
/// here, and the VM applies what comes back.
impl crate::vm::calls::CallHost for Dispatcher {
    fn begin(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun {
        Dispatcher::begin(self, ledger, tool, args_json, caller, slot_free)
    }

    fn begin_allowed(
        &self,
        ledger: &mut Ledger,
        pending: &crate::journal::record::PendingRecord,
        caller: Caller,
        note: String,
    ) -> Begun {
        Dispatcher::begin_allowed(self, ledger, pending, caller, note)
    }

    fn begin_denied(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        caller: Caller,
        reason: String,
        note: Option<String>,
        kind: &str,
    ) -> Begun {
        Dispatcher::begin_denied(self, ledger, tool, caller, reason, note, kind)
    }

    fn begin_unknown(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun {
        Dispatcher::begin_unknown(self, ledger, tool, args_json, caller, slot_free)
    }

    fn take_durable_begun(&self) -> bool {
        Dispatcher::take_durable_begun(self)
    }

    fn spill_area(&self) -> &SpillArea {
        Dispatcher::spill_area(self)
    }

    fn catalog_sha256(&self) -> String {
        self.shared.catalog.load().digest().to_owned()
    }

    fn catalog_servers(&self) -> Vec<String> {
        self.shared.catalog.load().mcp_servers()
    }

    fn files_at_pause(&self) -> crate::vm::calls::FilesAtPause {
        self.files_seen.as_ref().map(|f| f.at_pause(&self.shared.workspace)).unwrap_or_default()
    }

    fn run_warnings(&self) -> Vec<String> {
        let mut warnings = super::run_warnings(&self.shared, self.spill_area().failures());
        warnings.extend(self.prestarted.unused_warnings());
        warnings
    }

    fn admit(&self, uses: &[codemode_program::ToolUse]) -> Option<crate::receipt::RunError> {
        Dispatcher::admit(self, uses)
    }

    fn prestart(&self, uses: &[codemode_program::ToolUse]) {
        Dispatcher::prestart(self, uses)
    }
}
