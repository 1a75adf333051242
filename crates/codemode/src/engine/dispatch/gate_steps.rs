//! The dispatcher's side of the gate: what the gate's steps consult for a
//! call, refusals as completions, and a tool's timeout.

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, ToolContext};
use crate::engine::Shared;
use crate::gate::later::{ApprovalClock, LaterContext};
use crate::gate::{self, CallRequest, Early, GateContext, Posture};
use crate::receipt::spill::{self};
use crate::receipt::{CallStatus, Caller, Decision, Ledger, ledger::CallEnd};
use crate::vm::clock::RunClock;

use super::finish::Finisher;
use super::{Completion, ErrorPayload};

/// The gate's synchronous steps for `request` against `catalog`, for a run that started
/// under posture `start` (its posture and epoch); `known` is the call's
/// entry in `catalog` when already looked up (the steps then use it).
pub(crate) fn decide_early(
    shared: &Shared,
    catalog: &Catalog,
    known: Option<&crate::catalog::Entry>,
    request: &CallRequest<'_>,
    start: (Posture, u64),
    run_id: &str,
) -> Early {
    let (posture, epoch) = shared.posture.get();
    let cx = GateContext {
        catalog,
        policy: &shared.config.policy,
        max_calls: shared.limits.max_calls,
        posture,
        posture_at_start: (epoch != start.1).then_some(start.0),
        guard: gate::protection::Guard {
            protections: &shared.protections,
            confinement: &shared.confinement,
            run_id,
        },
        known,
    };
    gate::decide_early(request, &cx)
}

/// The context a tool gets for the call `finish` finishes, in run `run_id`
/// timed by `clock`: its elicitor asks the run's approver and records
/// into `finish`'s questions (elicitor.rs).
pub(crate) fn call_context(
    finish: &Finisher,
    run_id: &Arc<str>,
    clock: &Arc<RunClock>,
    caller: Caller,
) -> ToolContext {
    let shared = &finish.shared;
    let elicitor = crate::engine::elicitor::CallElicitor {
        approver: finish.approver.clone(),
        clock: clock.clone(),
        run_id: run_id.clone(),
        seq: finish.seq,
        tool: finish.tool.clone(),
        caller,
        questions: finish.questions.clone(),
    };
    ToolContext {
        workspace: shared.workspace.clone(),
        run_id: run_id.clone(),
        seq: finish.seq,
        caller,
        confinement: shared.confinement.clone(),
        elicitor: Some(Arc::new(elicitor)),
        undo: finish.undo.clone(),
        restore: finish.restore.clone(),
        trace: finish.trace.as_ref().map(|t| t.call_context(finish.seq)),
        durable_start: None,
    }
}

/// What an approval request shows as its subject: the primary argument as
/// the tool will see it, or for `mcp_connect__<server>` the command line
/// or URL starting the server runs.
pub(crate) fn approval_subject(
    shared: &Shared,
    tool: &str,
    primary: Option<&crate::gate::primary::Primary>,
) -> Option<String> {
    primary.map(|p| p.subject().to_owned()).or_else(|| shared.mcp.as_ref()?.connect_subject(tool))
}

/// What the gate's later steps consult, for a run timed by `clock`.
pub(crate) fn later_context<'a>(
    shared: &'a Shared,
    approver: &'a dyn crate::gate::Approver,
    catalog: &'a Catalog,
    clock: &'a RunClock,
) -> LaterContext<'a> {
    LaterContext {
        catalog,
        policy: &shared.config.policy,
        posture: &shared.posture,
        approver,
        clock: clock as &dyn ApprovalClock,
        protections: &shared.protections,
        confinement: &shared.confinement,
    }
}

/// How long a tool that watches its [`Abandon`] signal may take, after its
/// timeout, to commit or give up before it is dropped.
pub(crate) const ABANDON_GRACE: Duration = Duration::from_secs(10);

/// The per-call timeout of `spec`'s tool: the policy's setting, else the
/// tool's own, else the engine's default.
pub(crate) fn timeout_of(shared: &Shared, spec: &crate::catalog::ToolSpec) -> Duration {
    shared
        .config
        .policy
        .tools
        .get(&spec.name)
        .and_then(|t| t.timeout_ms)
        .or(spec.timeout_ms)
        .map(Duration::from_millis)
        .unwrap_or(shared.limits.tool_timeout)
}

/// Why a call of `tool` is refused when `server` is not running and its
/// tool list, from the schema cache, does not have it: an unknown tool,
/// with the nearest names, saying the list is cached and how to refresh it.
pub(crate) fn not_in_cached_list(catalog: &Catalog, tool: &str, server: &str) -> String {
    let near = catalog.suggest(tool);
    let hint = if near.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
        format!("did you mean {}? ", names.join(", "))
    };
    let name = spill::cut_text(tool);
    let connect = crate::mcp::naming::connect_name(server);
    format!(
        "unknown tool `{name}`: {hint}MCP server `{server}` is not running and its tool list, cached from its last \
         listing, does not have it (the server was not started for it); if the server has it now, refresh the \
         list with `{connect}` (or `codemode mcp tools {server}`)"
    )
}

/// Opens and closes the receipt of a refused call.
pub(crate) fn refuse(ledger: &mut Ledger, tool: &str, caller: Caller, reason: String) -> Completion {
    let reason = spill::cut_owned(reason);
    let seq = ledger.open(tool, caller, Decision::Refused, Some(reason.clone()));
    let payload = error_payload("refused", &reason, tool, seq);
    Completion {
        seq,
        end: CallEnd {
            status: CallStatus::Refused,
            decision: Decision::Refused,
            elapsed: Duration::ZERO,
            bytes: 0,
            truncated: None,
            error: Some(reason),
            note: None,
            elicitations: Vec::new(),
            queued: None,
            attempts: 1,
            progress: None,
        },
        ok: false,
        payload,
        text: None,
        pause: None,
        journaled: false,
    }
}

/// The JSON a failed call rejects with; the message and the tool name are
/// cut to [`spill::TEXT_BYTES`] each (the program gets the same bounded
/// text as the receipt).
pub(crate) fn error_payload(kind: &str, message: &str, tool: &str, seq: u64) -> String {
    let (message, tool) = (spill::cut_text(message), spill::cut_text(tool));
    serde_json::to_string(&ErrorPayload { kind, message: &message, tool: &tool, seq })
        .expect("strings serialise")
}

/// Why a call the approver paused is refused where the run cannot pause.
pub(crate) fn not_pausable(reason: &str) -> String {
    format!(
        "the approver paused this call ({reason}), but only a journaled program run can pause \
         (not a direct call or a batch); decide it with another approver or allow it by a rule"
    )
}
