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

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use super::completion::Completion;
use super::record::{
    self, ApprovalRecord, CallRecord, DecisionRecord, DoneRecord, Header, How, NowRecord, PausedRecord,
    PendingRecord, SeedRecord, SettleRecord, StartRecord, UNKNOWN_OUTCOME,
};
use crate::receipt::Caller;

/// A decision given on resume for a pending call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Run it (decision `approved`).
    Allow,
    /// Run it (decision `approved`), with the person's reason: kept in the
    /// journal's `approval`/`decision` record and in the note of the call
    /// in the resumed run's receipt.
    AllowBecause(String),
    /// Do not run it (decision `denied`, with this reason).
    Deny(String),
}

impl Decided {
    /// Whether the call runs ([`Decided::Allow`] or
    /// [`Decided::AllowBecause`]).
    pub fn allows(&self) -> bool {
        !matches!(self, Decided::Deny(_))
    }

    /// The reason given with the decision, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Decided::Allow => None,
            Decided::AllowBecause(reason) | Decided::Deny(reason) => Some(reason),
        }
    }
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
    /// Calls started (a `start` line) that never ended (no `done` line)
    /// and are not waiting on a decision since: they were running when
    /// the run's process ended, and their outcome is unknown (a
    /// recovery), in seq order.
    pub unknown: Vec<u64>,
    /// The files (relative to the workspace, links inside it resolved)
    /// the run's `write` and `edit` calls changed after its last pause: a
    /// resume that recovers the run takes them for the run's own changes,
    /// not someone else's (journal/files_seen.rs).
    pub written_since_pause: Vec<String>,
}

/// Most lines a journal may have to be read back (about eight per call at
/// the highest `max_calls`, 1,000,000). Over it the journal is refused
/// before any line is read: it was not written by codemode as it stands.
pub(crate) const MAX_LINES: usize = 8_000_000;

impl Journal {
    /// Reads `lines` (header first), in time linear in their number.
    ///
    /// # Errors
    /// More than [`MAX_LINES`] lines, or a line that is not a journal
    /// record of this version, with its number.
    pub(crate) fn parse(lines: &[String]) -> Result<Journal, String> {
        if lines.len() > MAX_LINES {
            return Err(format!(
                "the journal has {} lines, more than the {MAX_LINES} a journal may have; it was not written by \
                 codemode as it is (a damaged or altered file)",
                lines.len()
            ));
        }
        let first = lines.first().ok_or("the journal is empty")?;
        let mut reading = Reading {
            journal: Journal::new(read_header(first)?),
            pending: BTreeMap::new(),
            approvals: BTreeMap::new(),
            unsettled: Vec::new(),
            settled_at: HashMap::new(),
            started_at: HashMap::new(),
            pending_at: HashMap::new(),
            preimages: Vec::new(),
            paused_at: None,
        };
        for (n, line) in lines.iter().enumerate().skip(1) {
            reading.read_line(n, line)?;
        }
        Ok(reading.finish())
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
            unknown: Vec::new(),
            written_since_pause: Vec::new(),
        }
    }
}

/// A journal being read: what later lines undo is kept by seq, so each line
/// costs the same however many came before.
struct Reading {
    /// Every field but those below (`pending`, `approvals`, `unsettled`
    /// are filled by [`Reading::finish`]).
    journal: Journal,
    /// The calls paused on with no result since.
    pending: BTreeMap<u64, PendingRecord>,
    /// Decisions recorded since their call's last pause (the first stands).
    approvals: BTreeMap<u64, ApprovalRecord>,
    /// `unsettled` results with the line they are on.
    unsettled: Vec<(u64, usize)>,
    /// The line of each call's last `start`, and of its last `pending`.
    started_at: HashMap<u64, usize>,
    pending_at: HashMap<u64, usize>,
    /// Each `preimage`'s file and line.
    preimages: Vec<(String, usize)>,
    /// The line of the last `paused`.
    paused_at: Option<usize>,
    /// The line of each call's last `settle`, which takes back the
    /// `unsettled` results before it.
    settled_at: HashMap<u64, usize>,
}

impl Reading {
    /// Reads the record on line `n` (0-based).
    ///
    /// # Errors
    /// The line is not a record of a known kind, or not of its kind's shape.
    fn read_line(&mut self, n: usize, line: &str) -> Result<(), String> {
        let j = &mut self.journal;
        let kind = record::kind(line).ok_or_else(|| bad(n, &"not a journal record"))?;
        match kind {
            "call" => {
                let c: CallRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                j.last_seq = j.last_seq.max(c.seq);
                j.calls.insert(c.seq, c);
            }
            "done" => {
                let d: DoneRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                match d.how {
                    How::Settled => j.settle_order.push(d.seq),
                    How::Unsettled => self.unsettled.push((d.seq, n)),
                    How::Inline => {}
                }
                self.pending.remove(&d.seq);
                self.approvals.remove(&d.seq);
                j.done.insert(d.seq, d);
            }
            "settle" => {
                let s: SettleRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.settled_at.insert(s.seq, n);
                j.settle_order.push(s.seq);
            }
            "pending" => {
                let p: PendingRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                // Paused on again: a decision recorded for an earlier
                // pause of this call does not carry over to this one.
                self.approvals.remove(&p.seq);
                self.pending_at.insert(p.seq, n);
                self.pending.insert(p.seq, p);
            }
            "decision" => {
                let d: DecisionRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.approvals.remove(&d.seq);
                j.decisions.push(d);
            }
            "approval" => {
                let a: ApprovalRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                // One decision per pause of a call: the first stands.
                self.approvals.entry(a.seq).or_insert(a);
            }
            "now" => {
                let r: NowRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                j.now.push((r.v, r.n));
            }
            "seed" => j.seed = Some(serde_json::from_str::<SeedRecord>(line).map_err(|e| bad(n, &e))?.v),
            "paused" => {
                j.paused = Some(serde_json::from_str(line).map_err(|e| bad(n, &e))?);
                self.paused_at = Some(n);
            }
            "preimage" => {
                // Only its file: the bytes are undo's (journal/undo.rs).
                #[derive(serde::Deserialize)]
                struct PreimagePath {
                    path: String,
                }
                let p: PreimagePath = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.preimages.push((p.path, n));
            }
            "start" => {
                let s: StartRecord = serde_json::from_str(line).map_err(|e| bad(n, &e))?;
                self.started_at.insert(s.seq, n);
            }
            // Undo's records (journal/undo.rs): a replay needs none of them.
            "state" | "resumed" | "postimage" | "reverted" => {}
            other => return Err(bad(n, &format!("unknown record kind `{other}`"))),
        }
        Ok(())
    }

    /// The journal read: pending calls and their recorded decisions in seq
    /// order, results never handed back in the order they finished.
    fn finish(self) -> Journal {
        let Reading {
            mut journal,
            mut pending,
            mut approvals,
            unsettled,
            settled_at,
            started_at,
            pending_at,
            preimages,
            paused_at,
        } = self;
        journal.written_since_pause = preimages
            .into_iter()
            .filter(|(_, n)| paused_at.is_some_and(|p| *n > p))
            .map(|(path, _)| path)
            .collect();
        // Started since its last pause (or never paused), and never ended:
        // its outcome is unknown. A call paused on since (an earlier
        // recovery asked a person about it) waits on that decision.
        let mut unknown: Vec<u64> = started_at
            .into_iter()
            .filter(|(seq, at)| !journal.done.contains_key(seq) && pending_at.get(seq).is_none_or(|p| p < at))
            .map(|(seq, _)| seq)
            .collect();
        unknown.sort_unstable();
        for seq in &unknown {
            pending.remove(seq);
        }
        journal.unknown = unknown;
        approvals.retain(|seq, _| pending.contains_key(seq));
        journal.approvals = approvals.into_values().collect();
        journal.pending = pending.into_values().collect();
        journal.unsettled = unsettled
            .into_iter()
            .filter(|(seq, n)| settled_at.get(seq).is_none_or(|settled| settled < n))
            .map(|(seq, _)| seq)
            .collect();
        journal
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
    /// receipt when a person decided it with `codemode approve`; `kind`
    /// of the program's ToolError (`denied`, or `unknown_outcome`).
    Denied { reason: String, note: Option<String>, kind: &'static str },
    /// A pending call with no decision given: gate it again.
    Undecided,
    /// A call that was running when the run's process ended (started, not
    /// ended), or one a recovery paused on for that with no decision yet:
    /// its outcome is unknown.
    Unknown,
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
    Now { completion: Box<Completion>, new: bool },
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
        // A read counted 0 times is no read (codemode never writes one).
        let now = journal.now.iter().copied().filter(|&(_, n)| n > 0).collect();
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
        let Some(journaled) = self.journal.calls.get(&seq) else {
            // A start whose call line was lost cannot be: the call line is
            // handed over before the start is written. Still, never run a
            // started call again unasked.
            if self.journal.unknown.binary_search(&seq).is_ok() {
                return ReplayCall::Unknown;
            }
            return ReplayCall::Live;
        };
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
        // `pending` is in seq order, one per seq.
        let pending = self.journal.pending.binary_search_by_key(&seq, |p| p.seq).ok();
        if let Some(p) = pending.map(|i| &self.journal.pending[i]) {
            let by_person = self.by_person.contains(&seq);
            return match self.decisions.get(&seq) {
                // A call whose file changed since the pause is refused
                // whatever was decided but a denial: the allowed path's
                // binding check refuses it (gate/binding.rs), where gating
                // it again would ask, or allow, without anyone seeing the
                // change, and a second pause would record the changed file.
                None if p.changed_since_pause.is_some() => {
                    ReplayCall::Allowed { pending: p.clone(), note: String::new() }
                }
                Some(decided @ (Decided::Allow | Decided::AllowBecause(_))) => {
                    let note = if by_person { APPROVED_BY_PERSON } else { "approved on resume" };
                    let note = match decided.reason() {
                        Some(reason) => format!("{note}: {reason}"),
                        None => note.to_owned(),
                    };
                    ReplayCall::Allowed { pending: p.clone(), note }
                }
                Some(Decided::Deny(reason)) => ReplayCall::Denied {
                    reason: reason.clone(),
                    note: by_person.then(|| DENIED_BY_PERSON.to_owned()),
                    kind: if p.kind.as_deref() == Some(UNKNOWN_OUTCOME) { UNKNOWN_OUTCOME } else { "denied" },
                },
                None if p.kind.as_deref() == Some(UNKNOWN_OUTCOME) => ReplayCall::Unknown,
                None => ReplayCall::Undecided,
            };
        }
        if self.journal.unknown.binary_search(&seq).is_ok() {
            return ReplayCall::Unknown;
        }
        // Journaled but never started or finished: it was waiting (for
        // its gate, or a slot) when the run's process ended, and never
        // ran: it runs now.
        ReplayCall::Live
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
        NextSettle::Now { completion: Box::new(completion), new }
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
                input: None,
            },
            catalog_sha256: "c".into(),
            catalog_servers: None,
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

    /// A journal file sits where anything with the user's rights can change
    /// it: hostile lines end in an error naming the line, never a panic.
    #[test]
    fn hostile_lines_are_errors_naming_the_line_or_are_read_harmlessly() {
        let err = |lines: Vec<String>| Journal::parse(&lines).unwrap_err();
        assert_eq!(err(vec![header(), "not json".into()]), "journal line 2: not a journal record");
        assert!(err(vec![header(), r#"{"t":"call","seq":-1}"#.into()]).starts_with("journal line 2: "));
        assert!(err(vec![header(), r#"{"t":"what"}"#.into()]).contains("unknown record kind `what`"));
        // A clock read counted 0 times was a panic (an overflow) on replay.
        let lines =
            vec![header(), r#"{"t":"now","v":1.5,"n":0}"#.into(), r#"{"t":"now","v":2.5,"n":1}"#.into()];
        let mut replay = Replay::new(Journal::parse(&lines).unwrap(), HashMap::new(), HashSet::new());
        assert_eq!((replay.now(), replay.now()), (Some(2.5), None));
    }

    /// Many pending calls, each ended unsettled, then settled in reverse:
    /// each line is now read by seq (reading was quadratic in them; the
    /// `journal_lines` fuzz target's timeout watches the time).
    #[test]
    fn many_pending_and_unsettled_lines_are_read_back_whole() {
        let n = 10_000u64;
        let mut lines = vec![header()];
        for seq in 1..=n {
            lines.push(format!(r#"{{"t":"pending","seq":{seq},"tool":"w","args":{{}},"reason":"r"}}"#));
        }
        for seq in 1..=n {
            lines.push(done(seq, "unsettled", "ok", "approved"));
        }
        for seq in (1..=n).rev() {
            lines.push(format!(r#"{{"t":"settle","seq":{seq}}}"#));
        }
        let journal = Journal::parse(&lines).unwrap();
        assert!(journal.pending.is_empty() && journal.unsettled.is_empty());
        assert_eq!(journal.settle_order.len(), n as usize);
    }

    #[test]
    fn a_settle_takes_back_only_the_unsettled_results_before_it() {
        let lines = vec![
            header(),
            done(1, "unsettled", "ok", "approved"),
            r#"{"t":"settle","seq":1}"#.to_owned(),
            done(1, "unsettled", "ok", "approved"),
            done(2, "unsettled", "ok", "approved"),
            r#"{"t":"pending","seq":5,"tool":"w","args":{},"reason":"r"}"#.to_owned(),
            r#"{"t":"pending","seq":3,"tool":"w","args":{},"reason":"r"}"#.to_owned(),
            r#"{"t":"approval","seq":5,"decision":"allow","by":"person","at":"x"}"#.to_owned(),
            r#"{"t":"approval","seq":5,"decision":"deny","by":"person","at":"x"}"#.to_owned(),
            r#"{"t":"approval","seq":9,"decision":"allow","by":"person","at":"x"}"#.to_owned(),
        ];
        let journal = Journal::parse(&lines).unwrap();
        assert_eq!(journal.unsettled, [1, 2]);
        assert_eq!(journal.pending.iter().map(|p| p.seq).collect::<Vec<_>>(), [3, 5]);
        assert_eq!(journal.approvals.len(), 1);
        assert_eq!(journal.approvals[0].seq, 5);
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

    /// A recovery's journal: a call started and not ended has an unknown
    /// outcome; one paused on for that waits for its decision (denied
    /// with kind `unknown_outcome`); one allowed on an earlier resume and
    /// started since is unknown again; one never started runs live.
    #[test]
    fn started_calls_without_an_end_have_an_unknown_outcome() {
        let call = |seq: u64| record::call_line(seq, "write", Caller::Program, "{}");
        let start = |seq: u64| record::start_line(seq);
        let pending = |seq: u64, kind: &str| {
            format!(r#"{{"t":"pending","seq":{seq},"tool":"write","args":{{}},"reason":"r"{kind}}}"#)
        };
        let lines = vec![
            header(),
            call(1),
            start(1),
            done(1, "unsettled", "ok", "auto"),
            call(2),
            start(2),
            call(3),
            start(3),
            pending(3, r#","kind":"unknown_outcome""#),
            call(4),
            pending(4, ""),
            start(4),
            call(5),
        ];
        let journal = Journal::parse(&lines).unwrap();
        assert_eq!(journal.unknown, [2, 4]);
        assert_eq!(journal.pending.iter().map(|p| p.seq).collect::<Vec<_>>(), [3]);
        let mut replay = Replay::new(journal, HashMap::new(), HashSet::new());
        assert!(matches!(replay.call(1, "write", Caller::Program, "{}"), ReplayCall::InTurn { .. }));
        assert!(matches!(replay.call(2, "write", Caller::Program, "{}"), ReplayCall::Unknown));
        assert!(matches!(replay.call(3, "write", Caller::Program, "{}"), ReplayCall::Unknown));
        assert!(matches!(replay.call(4, "write", Caller::Program, "{}"), ReplayCall::Unknown));
        assert!(matches!(replay.call(5, "write", Caller::Program, "{}"), ReplayCall::Live));
        let journal = Journal::parse(&lines).unwrap();
        let decided = HashMap::from([(3, Decided::Deny("no".into()))]);
        let mut replay = Replay::new(journal, decided, HashSet::new());
        assert!(matches!(
            replay.call(3, "write", Caller::Program, "{}"),
            ReplayCall::Denied { kind: "unknown_outcome", .. }
        ));
    }
}
