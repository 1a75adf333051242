//! Replaying a paused run's journal in a fresh VM.
//!
//! The program runs again from the start. Its calls are matched by seq
//! against the journal: a journaled call is answered from the journal (the
//! tool does not run again); a pending call gets the decision given on
//! resume; a call past the journal runs live. Results the program got
//! asynchronously are handed back in the order it got them, and only
//! then are live results delivered, so the program takes the same path up
//! to where the journal ends. Clock reads and the random seed come from
//! the journal too. A call that differs from the journal at its position
//! is a divergence: the run stops with an error naming both.

use std::collections::{HashMap, HashSet, VecDeque};

use super::completion::Completion;
use super::record::{
    self, ApprovalRecord, CallRecord, DecisionRecord, DoneRecord, Header, How, NowRecord, PausedRecord,
    PendingRecord, SeedRecord, SettleRecord,
};
use crate::receipt::Caller;

/// A decision given on resume for a pending call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Run it (decision `approved`).
    Allow,
    /// Do not run it (decision `denied`, with this reason).
    Deny(String),
}

/// A journal read back.
#[derive(Debug)]
pub(crate) struct Journal {
    pub header: Header,
    pub calls: HashMap<u64, CallRecord>,
    pub done: HashMap<u64, DoneRecord>,
    /// Async results in the order the program got them.
    pub settle_order: Vec<u64>,
    /// Results never handed to the program (finished while the run paused),
    /// in the order they finished.
    pub unsettled: Vec<u64>,
    /// Calls the run paused on with no result yet.
    pub pending: Vec<PendingRecord>,
    pub decisions: Vec<DecisionRecord>,
    /// Decisions a person recorded with `codemode approve` that no resume
    /// has applied yet, in seq order (one per seq).
    pub approvals: Vec<ApprovalRecord>,
    pub now: Vec<(f64, u64)>,
    pub seed: Option<[u32; 4]>,
    /// The last pause.
    pub paused: Option<PausedRecord>,
    /// The highest call seq journaled.
    pub last_seq: u64,
}

impl Journal {
    /// Reads `lines` (header first).
    ///
    /// # Errors
    /// A line that is not a journal record of this version, with its number.
    pub(crate) fn parse(lines: &[String]) -> Result<Journal, String> {
        let first = lines.first().ok_or("the journal is empty")?;
        let mut j = Journal::new(read_header(first)?);
        for (n, line) in lines.iter().enumerate().skip(1) {
            j.read_line(n, line)?;
        }
        j.pending.sort_by_key(|p| p.seq);
        j.approvals.retain(|a| j.pending.iter().any(|p| p.seq == a.seq));
        j.approvals.sort_by_key(|a| a.seq);
        Ok(j)
    }

    /// A journal of `header` with no records yet.
    fn new(header: Header) -> Journal {
        Journal {
            header,
            calls: HashMap::new(),
            done: HashMap::new(),
            settle_order: Vec::new(),
            unsettled: Vec::new(),
            pending: Vec::new(),
            decisions: Vec::new(),
            approvals: Vec::new(),
            now: Vec::new(),
            seed: None,
            paused: None,
            last_seq: 0,
        }
    }

    /// Reads the record on line `n` (0-based) into the journal. While
    /// reading, `pending` holds the calls paused on with no result since
    /// (unsorted), and `approvals` those recorded since their call's last
    /// pause.
    ///
    /// # Errors
    /// The line is not a record of a known kind, or not of its kind's shape.
    fn read_line(&mut self, n: usize, line: &str) -> Result<(), String> {
        let kind = record::kind(line).ok_or_else(|| bad(n, &"not a journal record"))?;
        match kind {
            "call" => {
                let c: CallRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.last_seq = self.last_seq.max(c.seq);
                self.calls.insert(c.seq, c);
            }
            "done" => {
                let d: DoneRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                match d.how {
                    How::Settled => self.settle_order.push(d.seq),
                    How::Unsettled => self.unsettled.push(d.seq),
                    How::Inline => {}
                }
                self.pending.retain(|p| p.seq != d.seq);
                self.approvals.retain(|a| a.seq != d.seq);
                self.done.insert(d.seq, d);
            }
            "settle" => {
                let s: SettleRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.unsettled.retain(|&q| q != s.seq);
                self.settle_order.push(s.seq);
            }
            "pending" => {
                let p: PendingRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                // Paused on again: a decision recorded for an earlier
                // pause of this call does not carry over to this one.
                self.approvals.retain(|a| a.seq != p.seq);
                self.pending.retain(|q| q.seq != p.seq);
                self.pending.push(p);
            }
            "decision" => {
                let d: DecisionRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.approvals.retain(|a| a.seq != d.seq);
                self.decisions.push(d);
            }
            "approval" => {
                let a: ApprovalRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                // One decision per pause of a call: the first stands.
                if !self.approvals.iter().any(|b| b.seq == a.seq) {
                    self.approvals.push(a);
                }
            }
            "now" => {
                let r: NowRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.now.push((r.v, r.n));
            }
            "seed" => self.seed = Some(serde_json::from_str::<SeedRecord>(line).map_err(|e| bad(n, &e))?.v),
            "paused" => self.paused = Some(serde_json::from_str(line).map_err(|e| bad(n, &e))?),
            "state" | "resumed" => {}
            other => return Err(bad(n, &format!("unknown record kind `{other}`"))),
        }
        Ok(())
    }
}

/// The journal's header from its first line, when it is one of this
/// journal format version.
///
/// # Errors
/// The line is not a header, or a header of another version.
fn read_header(first: &str) -> Result<Header, String> {
    let header: Header = serde_json::from_str(first).map_err(|e| bad(0, &e))?;
    if header.t != "header" {
        return Err("the journal does not start with its header".into());
    }
    if header.journal_version != record::JOURNAL_VERSION {
        return Err(format!(
            "the journal is of format version {}; this codemode reads version {}",
            header.journal_version,
            record::JOURNAL_VERSION
        ));
    }
    Ok(header)
}

/// The error for line `n` (0-based): `journal line <n + 1>: <e>`.
fn bad(n: usize, e: &dyn std::fmt::Display) -> String {
    format!("journal line {}: {e}", n + 1)
}

/// What a call the program makes gets during a replay.
pub(crate) enum ReplayCall {
    /// Past the journal: run it live.
    Live,
    /// Answered from the journal at once (as it was).
    Inline(Completion),
    /// Answered from the journal later, in its turn among the settles.
    InTurn { decision: crate::receipt::Decision },
    /// A pending call allowed on resume: run it live, approved, with this
    /// note in the receipt.
    Allowed { pending: PendingRecord, note: String },
    /// A pending call denied on resume, for `reason`; `note` for the
    /// receipt when a person decided it with `codemode approve`.
    Denied { reason: String, note: Option<String> },
    /// A pending call with no decision given: gate it again.
    Undecided,
    /// The program asked for another call than the journal holds here.
    Diverged(String),
}

/// The state of one replay, on the VM thread.
pub(crate) struct Replay {
    journal: Journal,
    decisions: HashMap<u64, Decided>,
    /// The seqs of `decisions` a person recorded with `codemode approve`.
    by_person: HashSet<u64>,
    /// Async journaled results not yet handed back, in order.
    settle_order: VecDeque<u64>,
    /// Journaled results the program never got (paused meanwhile): handed
    /// back after `settle_order`, each written down as a new settle.
    unsettled: VecDeque<u64>,
    /// Calls answered `InTurn` that the program has made.
    issued: HashSet<u64>,
    now: VecDeque<(f64, u64)>,
}

/// What the replay hands back next, before any live result.
pub(crate) enum NextSettle {
    /// Hand this journaled result to the program now. `new` is set when
    /// it was never handed over before (a `settle` line is written).
    Now { completion: Completion, new: bool },
    /// Nothing journaled is left to hand back: live results may go.
    Caught,
    /// The journal's next result is for a call the program has not made:
    /// the program took another path.
    Diverged(String),
}

impl Replay {
    /// The replay of `journal` with `decisions` for its pending calls, of
    /// which those in `by_person` were recorded with `codemode approve`.
    pub(crate) fn new(journal: Journal, decisions: HashMap<u64, Decided>, by_person: HashSet<u64>) -> Replay {
        let settle_order = journal.settle_order.iter().copied().collect();
        let unsettled = journal.unsettled.iter().copied().collect();
        let now = journal.now.iter().copied().collect();
        Replay { journal, decisions, by_person, settle_order, unsettled, issued: HashSet::new(), now }
    }

    /// The journal's header.
    pub(crate) fn header(&self) -> &Header {
        &self.journal.header
    }

    /// The last pause, for the run's times.
    pub(crate) fn paused(&self) -> Option<&PausedRecord> {
        self.journal.paused.as_ref()
    }

    /// The journaled seed of `Math.random`, if the run read one.
    pub(crate) fn seed(&self) -> Option<[u32; 4]> {
        self.journal.seed
    }

    /// The next journaled clock read, if any is left.
    pub(crate) fn now(&mut self) -> Option<f64> {
        let (v, n) = self.now.front_mut()?;
        let value = *v;
        *n -= 1;
        if *n == 0 {
            self.now.pop_front();
        }
        Some(value)
    }

    /// What call `seq` (the program's next) of `tool` with `args_json`
    /// gets.
    pub(crate) fn call(&mut self, seq: u64, tool: &str, caller: Caller, args_json: &str) -> ReplayCall {
        let Some(journaled) = self.journal.calls.get(&seq) else { return ReplayCall::Live };
        if !journaled.same(tool, caller, args_json) {
            return ReplayCall::Diverged(format!(
                "the program's call {seq} is `{tool}` with {}, but the journal holds `{}` with {} there: \
                 the program took another path than before the pause (see docs/JOURNAL.md: what replay requires)",
                shorten(args_json),
                journaled.tool,
                shorten(&journaled.args_shown()),
            ));
        }
        if let Some(done) = self.journal.done.get(&seq) {
            return match done.how {
                How::Inline => ReplayCall::Inline(done.completion()),
                How::Settled | How::Unsettled => {
                    self.issued.insert(seq);
                    ReplayCall::InTurn { decision: done.end.decision }
                }
            };
        }
        if let Some(p) = self.journal.pending.iter().find(|p| p.seq == seq) {
            let by_person = self.by_person.contains(&seq);
            return match self.decisions.get(&seq) {
                Some(Decided::Allow) => ReplayCall::Allowed {
                    pending: p.clone(),
                    note: if by_person { APPROVED_BY_PERSON } else { "approved on resume" }.to_owned(),
                },
                Some(Decided::Deny(reason)) => ReplayCall::Denied {
                    reason: reason.clone(),
                    note: by_person.then(|| DENIED_BY_PERSON.to_owned()),
                },
                None => ReplayCall::Undecided,
            };
        }
        // Journaled but never finished: it was in flight when a process
        // ended, which a resumable journal never holds.
        ReplayCall::Diverged(format!(
            "the journal holds call {seq} (`{tool}`) without its result or a pause; the journal is incomplete"
        ))
    }

    /// The journaled result to hand back next, if any.
    pub(crate) fn next_settle(&mut self) -> NextSettle {
        let (seq, new) = match (self.settle_order.front(), self.unsettled.front()) {
            (Some(&seq), _) => (seq, false),
            (None, Some(&seq)) => (seq, true),
            (None, None) => return NextSettle::Caught,
        };
        if !self.issued.contains(&seq) {
            let tool = self.journal.calls.get(&seq).map_or("?", |c| c.tool.as_str());
            return NextSettle::Diverged(format!(
                "the journal hands the result of call {seq} (`{tool}`) to the program next, but the program \
                 has not made call {seq}: it took another path than before the pause"
            ));
        }
        if new {
            self.unsettled.pop_front();
        } else {
            self.settle_order.pop_front();
        }
        let completion = self.journal.done.get(&seq).expect("a settled seq has its result").completion();
        NextSettle::Now { completion, new }
    }

    /// The journaled results of calls the program made again but did not
    /// get back yet (the run is ending).
    pub(crate) fn undelivered(&self) -> Vec<Completion> {
        self.settle_order
            .iter()
            .chain(&self.unsettled)
            .filter(|seq| self.issued.contains(seq))
            .filter_map(|seq| self.journal.done.get(seq).map(DoneRecord::completion))
            .collect()
    }

    /// The calls the run was paused on, as a receipt lists them.
    pub(crate) fn pending_calls(&self) -> Vec<crate::receipt::PendingCall> {
        self.journal.pending.iter().map(PendingRecord::to_pending_call).collect()
    }

    /// Whether every journaled call has been made again and every
    /// journaled result handed back.
    pub(crate) fn caught_up(&self) -> bool {
        self.settle_order.is_empty() && self.unsettled.is_empty()
    }
}

/// The receipt's note on a call a person allowed with `codemode approve`.
pub(crate) const APPROVED_BY_PERSON: &str = "approved by a person with `codemode approve`";

/// The receipt's note on a call a person denied with `codemode approve`.
pub(crate) const DENIED_BY_PERSON: &str = "denied by a person with `codemode approve`";

/// At most 200 characters of `text`, for messages.
fn shorten(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let cut = crate::receipt::spill::utf8_prefix(text, MAX);
    format!("{cut}... ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> String {
        let h = Header {
            t: "header".into(),
            journal_version: record::JOURNAL_VERSION,
            run_id: "run-x".into(),
            started_at: "2026-12-01T00:00:00Z".into(),
            started_unix_ms: 0,
            codemode_version: "0".into(),
            workspace: "/ws".into(),
            program: record::ProgramRecord {
                name: "p.js".into(),
                sha256: "0".into(),
                source: String::new(),
                path: None,
            },
            catalog_sha256: "c".into(),
            policy_sha256: "p".into(),
            policy: serde_json::json!({}),
            limits: serde_json::json!({}),
        };
        serde_json::to_string(&h).unwrap()
    }

    fn done(seq: u64, how: &str, status: &str, decision: &str) -> String {
        format!(
            r#"{{"t":"done","seq":{seq},"how":"{how}","ok":{},"end":{{"status":"{status}","decision":"{decision}","elapsed_ms":1.0,"bytes":0}},"payload":{{"kind":"x"}}}}"#,
            status == "ok"
        )
    }

    /// Three parallel writes paused; a resume denied 2 and allowed 3, and
    /// paused again on 1 before either result reached the program. A resume
    /// that then fails on 2's denial never hands back 3's result: 3 still
    /// ran, and its end must be known.
    #[test]
    fn results_not_handed_back_are_known_with_their_end() {
        let call = |seq: u64| record::call_line(seq, "write", Caller::Program, "{}");
        let lines = vec![
            header(),
            call(1),
            call(2),
            call(3),
            r#"{"t":"pending","seq":1,"tool":"write","args":{},"reason":"r"}"#.to_owned(),
            done(2, "unsettled", "refused", "denied"),
            done(3, "unsettled", "ok", "approved"),
        ];
        let journal = Journal::parse(&lines).unwrap();
        assert_eq!(journal.unsettled, [2, 3]);
        assert_eq!(journal.pending.len(), 1);
        let mut replay = Replay::new(journal, HashMap::new(), HashSet::new());
        assert!(matches!(replay.call(1, "write", Caller::Program, "{}"), ReplayCall::Undecided));
        assert!(matches!(replay.call(2, "write", Caller::Program, "{}"), ReplayCall::InTurn { .. }));
        assert!(matches!(replay.call(3, "write", Caller::Program, "{}"), ReplayCall::InTurn { .. }));
        match replay.next_settle() {
            NextSettle::Now { completion, new } => assert_eq!((completion.seq, new), (2, true)),
            _ => panic!("2 is handed back first"),
        }
        let left = replay.undelivered();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].seq, left[0].end.status), (3, crate::receipt::CallStatus::Ok));
        assert!(matches!(replay.call(4, "read", Caller::Program, "{}"), ReplayCall::Live));
        assert!(matches!(
            replay.call(1, "read", Caller::Program, "{}"),
            ReplayCall::Diverged(m) if m.contains("call 1")
        ));
    }
}
