//! Reading a run's journal and receipt for showing: loosely (a line or
//! field that does not parse is left out; showing never fails on one).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{CallInfo, DecisionInfo, PendingInfo};
use crate::journal::record::{
    self, ApprovalDecision, ApprovalRecord, CallRecord, DecisionRecord, DoneRecord, Header, PendingRecord,
};

/// The parts of a receipt `runs` shows, read loosely (any receipt
/// version; a field that is missing or of another shape is left out).
#[derive(Debug, Default, Deserialize)]
pub(super) struct ReceiptRead {
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) catalog_sha256: Option<String>,
    #[serde(default)]
    pub(super) calls: Option<Vec<CallInfo>>,
    #[serde(default)]
    pub(super) pending: Vec<ReceiptPending>,
}

/// A pending call as a receipt lists it.
#[derive(Debug, Deserialize)]
pub(super) struct ReceiptPending {
    pub(super) seq: u64,
    pub(super) tool: String,
    #[serde(default)]
    pub(super) arguments: Value,
}

/// [`read_receipt`] off the async threads.
pub(super) async fn read_receipt_async(path: PathBuf) -> Option<ReceiptRead> {
    tokio::task::spawn_blocking(move || read_receipt(&path)).await.ok().flatten()
}

/// The receipt at `path`, when it reads as one (at most 64 MiB).
fn read_receipt(path: &Path) -> Option<ReceiptRead> {
    const MAX: u64 = 64 << 20;
    let meta = path.symlink_metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// A journal's lines, read for showing.
#[derive(Default)]
pub(super) struct JournalRead {
    pub(super) header: Option<Header>,
    /// Every call, by seq.
    pub(super) calls: BTreeMap<u64, CallInfo>,
    /// Every `pending` line, by seq (the last one of a seq wins).
    pub(super) pending: BTreeMap<u64, PendingInfo>,
    pub(super) decisions: Vec<DecisionInfo>,
    /// `approval` lines no later `decision`, `done` or `pending` line of
    /// their call closed, by seq (the first of a seq stands).
    pub(super) approvals: BTreeMap<u64, DecisionInfo>,
}

impl JournalRead {
    /// Reads `lines` (header first); lines that do not parse are skipped.
    pub(super) fn of(lines: &[String]) -> JournalRead {
        let mut read = JournalRead::default();
        for (i, line) in lines.iter().enumerate() {
            match record::kind(line) {
                Some("call") => read.add_call(line),
                Some("done") => read.add_done(line),
                Some("pending") => read.add_pending(line),
                Some("decision") => read.add_decision(line),
                Some("approval") => read.add_approval(line),
                // The first line is the header, whatever its `t`.
                _ if i == 0 => read.header = serde_json::from_str::<Header>(line).ok(),
                _ => {}
            }
        }
        read
    }

    /// A `call` line: the call, with no result yet.
    fn add_call(&mut self, line: &str) {
        if let Ok(c) = serde_json::from_str::<CallRecord>(line) {
            self.calls.insert(
                c.seq,
                CallInfo {
                    seq: c.seq,
                    tool: c.tool,
                    caller: Some(c.caller),
                    decision: None,
                    status: None,
                    error: None,
                    note: None,
                    reverted_by: None,
                },
            );
        }
    }

    /// A `done` line: its call's result; it closes the call's approval.
    fn add_done(&mut self, line: &str) {
        if let Ok(d) = serde_json::from_str::<DoneRecord>(line) {
            self.approvals.remove(&d.seq);
            if let Some(call) = self.calls.get_mut(&d.seq) {
                call.decision = Some(d.end.decision);
                call.status = Some(d.end.status);
                call.error = d.end.error;
                call.note = d.end.note;
            }
        }
    }

    /// A `pending` line: the call waits for a decision (again); it closes
    /// an approval recorded for an earlier pause.
    fn add_pending(&mut self, line: &str) {
        if let Ok(p) = serde_json::from_str::<PendingRecord>(line) {
            self.approvals.remove(&p.seq);
            self.pending.insert(
                p.seq,
                PendingInfo {
                    seq: p.seq,
                    tool: p.tool,
                    arguments: p.args,
                    reason: Some(p.reason),
                    subject: p.subject,
                    kind: p.kind,
                },
            );
        }
    }

    /// A `decision` line: a decision given on a resume; it closes the
    /// call's approval.
    fn add_decision(&mut self, line: &str) {
        if let Ok(d) = serde_json::from_str::<DecisionRecord>(line) {
            self.approvals.remove(&d.seq);
            self.decisions.push(DecisionInfo { seq: d.seq, allow: d.allow, reason: d.reason, at: d.at });
        }
    }

    /// An `approval` line: a decision recorded with `codemode approve`
    /// (the first of a seq stands).
    fn add_approval(&mut self, line: &str) {
        if let Ok(a) = serde_json::from_str::<ApprovalRecord>(line) {
            self.approvals.entry(a.seq).or_insert(DecisionInfo {
                seq: a.seq,
                allow: a.decision == ApprovalDecision::Allow,
                reason: a.reason,
                at: a.at,
            });
        }
    }

    /// The pending calls no decision and no result has closed.
    pub(super) fn open_pending(&self) -> impl Iterator<Item = &PendingInfo> {
        self.pending.values().filter(|p| {
            !self.decisions.iter().any(|d| d.seq == p.seq)
                && self.calls.get(&p.seq).is_none_or(|c| c.status.is_none())
        })
    }
}
