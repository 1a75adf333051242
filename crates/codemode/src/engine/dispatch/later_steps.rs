//! A call whose gate's later steps wait (hooks, an approval): they are
//! decided on the tool runtime, and then the tool runs there.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::super::connect_first::{GateRun, Refusals};
use super::{Completion, Finisher, later_context, not_pausable};
use crate::catalog::ToolContext;
use crate::gate::later::{self, Final, LaterCall};
use crate::gate::{Preparation, RunChanges};
use crate::receipt::{Caller, Decision};
use crate::vm::clock::RunClock;

/// A call that passed the gate's synchronous steps, opened `pending`,
/// whose hooks or approval are still to decide.
pub(super) struct LaterSteps {
    /// The call's finisher (decision `auto` until the later steps decide).
    pub(super) finish: Finisher,
    pub(super) args: Value,
    pub(super) caller: Caller,
    /// What the synchronous steps learnt.
    pub(super) prep: Preparation,
    /// What the call acts on, as an approval names it.
    pub(super) subject: Option<String>,
    pub(super) clock: Arc<RunClock>,
    pub(super) run_id: Arc<str>,
    /// Whether an approver's pause may pause the run.
    pub(super) pausable: bool,
    pub(super) changes: RunChanges,
    /// `tool_search` with MCP servers not listed yet: the discovery's gate
    /// and the run's connect refusals (discover.rs).
    pub(super) discovering: Option<(GateRun, Refusals)>,
    pub(super) timeout: Duration,
    /// The context the tool gets.
    pub(super) cx: ToolContext,
}

impl LaterSteps {
    /// Decides the later steps, then runs the tool (or the discovery),
    /// pauses the run, or refuses the call.
    pub(super) async fn run(self) -> Completion {
        let LaterSteps {
            finish,
            args,
            caller,
            prep,
            subject,
            clock,
            run_id,
            pausable,
            changes,
            discovering,
            timeout,
            cx,
        } = self;
        let seq = finish.seq;
        let shared = finish.shared.clone();
        let catalog = shared.catalog.load();
        let Some(entry) = catalog.get(&finish.tool) else {
            let reason = "the tool left the catalog (its MCP server's tool list changed)".to_owned();
            return finish.refused(Decision::Refused, "refused", reason);
        };
        let call = LaterCall {
            tool: &finish.tool,
            args,
            caller,
            run_id: &run_id,
            seq,
            workspace: &shared.workspace,
            prep,
            annotations: &entry.spec.annotations,
            subject,
            changes: &changes,
        };
        let approver = finish.approver.clone();
        let asked = std::time::Instant::now();
        let (end, step) =
            later::decide_rest(call, later_context(&shared, approver.as_ref(), &catalog, &clock)).await;
        if let Some(trace) = &finish.trace {
            trace.decided(seq, step, Some(asked.elapsed()));
        }
        match end {
            Final::Run { args, decision, notes } => {
                clock.decided(seq, decision);
                if clock.should_stop() {
                    // The run was told to stop (its deadline passed while
                    // JavaScript ran, a cancel, a limit) while this call
                    // waited on its hooks or approval: it never runs. The
                    // run's end (or the overrun watch, when the VM does
                    // not come back: engine/overrun_watch.rs) drops this
                    // future and records the call as cut, approved.
                    return std::future::pending::<Completion>().await;
                }
                let finish =
                    Finisher { decision, notes: (!notes.is_empty()).then(|| notes.join("; ")), ..finish };
                if let Some((gate, refusals)) = discovering {
                    return super::super::discover::search(finish, gate, refusals, args, timeout).await;
                }
                finish.run_entry(entry, args, cx, timeout).await
            }
            Final::Refuse(reason) => finish.refused(Decision::Refused, "refused", reason),
            Final::Deny(reason) => finish.refused(Decision::Denied, "denied", reason),
            Final::Pause { args, reason, subject, notes, bound } if pausable => {
                let tool = finish.tool.to_string();
                finish.paused(crate::journal::record::PendingRecord {
                    seq,
                    tool,
                    args,
                    reason,
                    subject,
                    notes,
                    bound: bound.map(|b| *b),
                    kind: None,
                    changed_since_pause: None,
                })
            }
            Final::Pause { reason, .. } => {
                finish.refused(Decision::Refused, "refused", not_pausable(&reason))
            }
        }
    }
}
