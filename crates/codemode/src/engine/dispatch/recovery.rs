//! The dispatcher's part of durable runs (docs/JOURNAL.md, "Recovery"):
//! which calls get a durable start, and what a recovered run does with a
//! call whose outcome its crash left unknown.

use std::sync::atomic::Ordering;

use super::{Begun, Dispatcher};
use crate::catalog::ToolSpec;
use crate::journal::record::{PendingRecord, UNKNOWN_OUTCOME};
use crate::receipt::{Caller, Decision, Ledger};

impl Dispatcher {
    /// Whether a call of `spec`'s tool starts only once its start is
    /// durable (the run keeps a journal and the tool may change
    /// something); notes it for [`Dispatcher::take_durable_begun`].
    pub(super) fn note_durable(&self, spec: &ToolSpec) -> bool {
        let durable = self.durable.is_some() && !spec.is_read_only();
        if durable {
            self.durable_begun.store(true, Ordering::Relaxed);
        }
        durable
    }

    /// [`Dispatcher::note_durable`] for a call whose tool is not known yet
    /// (an MCP server's, before the server starts).
    pub(crate) fn note_durable_unknown(&self) {
        if self.durable.is_some() {
            self.durable_begun.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the call just begun may change something: the VM then
    /// hands the run's buffered lines (its `call` line among them) to the
    /// journal before the call's `start` line can follow them.
    pub(crate) fn take_durable_begun(&self) -> bool {
        self.durable_begun.swap(false, Ordering::Relaxed)
    }

    /// Whether a call of `tool` whose outcome is unknown may run again
    /// without a person: the tool is read-only, declares `idempotentHint`,
    /// or the policy says `[tools.NAME] idempotent = true`.
    fn repeat_safe(&self, tool: &str) -> bool {
        let catalog = self.shared.catalog.load();
        safe_to_repeat(&self.shared, tool, catalog.get(tool).map(|e| &e.spec))
    }

    /// Call `seq` of a recovered run, which was running when the run's
    /// process ended (its `start` line is in the journal, its `done` line
    /// is not): run again through the gate when repeating it is safe,
    /// else opened `pending` with kind `unknown_outcome`, so the run pauses
    /// on it for a person (`--allow` runs it again, `--deny` rejects it).
    pub(crate) fn begin_unknown(
        &self,
        ledger: &mut Ledger,
        tool: &str,
        args_json: &str,
        caller: Caller,
        slot_free: bool,
    ) -> Begun {
        if self.repeat_safe(tool) {
            let begun = self.begin(ledger, tool, args_json, caller, slot_free);
            let seq = ledger.calls_made() as u64;
            ledger.annotate(seq, "run again on recovery: it was running when the run's process ended, and repeating it is safe");
            return begun;
        }
        let args = codemode_base::json_text::parse(args_json).unwrap_or(serde_json::Value::Null);
        let primary = self
            .shared
            .catalog
            .load()
            .get(tool)
            .and_then(|e| crate::gate::primary::of(&e.spec, &args, &self.shared.workspace));
        let subject = super::approval_subject(&self.shared, tool, primary.as_ref());
        // An allow binds to what the path resolves to now, and to what the
        // file holds now, as a pause's does (gate/binding.rs).
        let changes = self.shared.catalog.load().get(tool).is_some_and(|e| !e.spec.is_read_only());
        let bound = primary
            .as_ref()
            .and_then(|p| crate::gate::binding::of_primary(p, &self.shared.workspace))
            .map(|mut b| {
                if changes {
                    b.content = Some(crate::journal::files_seen::bound_content(&b, &self.shared.workspace));
                }
                b
            });
        let seq = ledger.open(tool, caller, Decision::Pending, None);
        let finish = self.finisher(tool, seq, Decision::Pending, None);
        let pending = PendingRecord {
            seq,
            tool: tool.to_owned(),
            args,
            reason: format!(
                "call {seq} (`{tool}`) was running when the run's process ended: whether it changed anything \
                 is unknown; --allow runs it again, --deny rejects it in the program (ToolError kind \
                 `{UNKNOWN_OUTCOME}`)"
            ),
            subject,
            notes: Vec::new(),
            bound,
            kind: Some(UNKNOWN_OUTCOME.to_owned()),
            changed_since_pause: None,
        };
        Begun::Running { seq, future: Box::pin(std::future::ready(finish.paused(pending))) }
    }
}

/// Whether a call of `tool` (its catalog `spec`, when known) may be made
/// again without a person: the tool is read-only, declares
/// `idempotentHint`, or the policy says `[tools.NAME] idempotent = true`.
/// The rule a recovery follows for a call of unknown outcome, and a retry
/// for a transport failure (paced.rs).
pub(super) fn safe_to_repeat(shared: &crate::engine::Shared, tool: &str, spec: Option<&ToolSpec>) -> bool {
    let by_tool = spec.is_some_and(|s| s.is_read_only() || s.annotations.idempotent == Some(true));
    by_tool || shared.config.policy.tools.get(tool).is_some_and(|t| t.idempotent)
}
