//! A person's decisions for the pending calls of a paused run, recorded in
//! its journal without running anything (`codemode approve`), for the next
//! resume to apply ([`Engine::start_resume_recorded`](crate::Engine::start_resume_recorded)).
//!
//! In server mode the model that wrote a program must never decide its own
//! calls: a run whose calls need a decision pauses, a person records the
//! decisions out of band against the same journal store, and the resume the
//! model asks for applies those decisions and nothing else. The record is
//! `{"t":"approval"}` (docs/JOURNAL.md).

use super::record::{self, ApprovalDecision, ApprovalRecord};
use super::replay::{Decided, Journal};
use super::{JournalStore, RunState, StoreError};
use crate::receipt::{ErrorKind, PendingCall, RunError};

/// What [`record_decisions`] recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct RecordedDecisions {
    /// The run.
    pub run_id: String,
    /// The seqs recorded now, in the order given.
    pub recorded: Vec<u64>,
    /// The pending calls those decisions are for, in the same order, as
    /// the journal held them when they were recorded (what was decided on:
    /// show it to the person).
    pub calls: Vec<PendingCall>,
    /// The pending calls no decision is recorded for yet (a resume gates
    /// them again, which in server mode pauses the run again).
    pub undecided: Vec<PendingCall>,
    /// The calls allowed now that a resume will refuse all the same, with
    /// why: their file was changed since the run paused
    /// ([`AwaitingCall::changed_since_pause`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub will_be_refused: Vec<(u64, String)>,
}

/// A pending call of a paused run and the decision a person recorded for
/// it, if any ([`pending_decisions`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct AwaitingCall {
    /// The call: seq, tool, arguments as they will run, why it needs a
    /// decision, what it acts on.
    #[serde(flatten)]
    pub call: PendingCall,
    /// The decision recorded with `codemode approve`, not yet applied by a
    /// resume: `None` when none is.
    pub recorded: Option<RecordedDecision>,
    /// Why the resume will refuse the call even when it is allowed: its
    /// file was changed (or made, or removed) since the run paused
    /// (journal/files_seen.rs). Looked at by [`approval_listing`] in the
    /// run's workspace as its journal names it, when that folder is on
    /// this machine; `None` otherwise, and always from
    /// [`pending_decisions`], which reads no file but the journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_since_pause: Option<String>,
}

/// A decision recorded with `codemode approve`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct RecordedDecision {
    /// `true`: allow; `false`: deny.
    pub allow: bool,
    /// Why, as the person said (`--reason`); for a denial without one,
    /// `None` here and a reason saying who denied it in the receipt.
    pub reason: Option<String>,
    /// When it was recorded (RFC 3339 UTC).
    pub at: String,
}

impl RecordedDecision {
    fn of(a: &ApprovalRecord) -> RecordedDecision {
        RecordedDecision {
            allow: a.decision == ApprovalDecision::Allow,
            reason: a.reason.clone(),
            at: a.at.clone(),
        }
    }

    /// The decision a resume applies.
    pub(crate) fn decided(a: &ApprovalRecord) -> Decided {
        match a.decision {
            ApprovalDecision::Allow => a.reason.clone().map_or(Decided::Allow, Decided::AllowBecause),
            ApprovalDecision::Deny => Decided::Deny(a.reason.clone().unwrap_or_else(|| denied_reason(None))),
        }
    }
}

/// The reason a program is given for a call a person denied with
/// `codemode approve`: theirs, else one saying who denied it.
pub(crate) fn denied_reason(reason: Option<&str>) -> String {
    reason.map_or_else(|| "denied by a person with `codemode approve`".to_owned(), str::to_owned)
}

/// The pending calls of paused run `run_id` with any decision recorded for
/// them, read without holding the run; no file but the journal is read
/// (`changed_since_pause` is `None`: [`approval_listing`] looks).
///
/// # Errors
/// `not_resumable` for an unknown run, one that is not paused (running,
/// being resumed, ended, interrupted) or whose journal is unreadable;
/// `internal` when the store fails.
pub async fn pending_decisions(
    store: &dyn JournalStore,
    run_id: &str,
) -> Result<Vec<AwaitingCall>, RunError> {
    let journal = paused_journal(store, run_id).await?;
    Ok(awaiting(&journal, |_| None))
}

/// What a person deciding the pending calls of paused run `run_id` is
/// shown (`codemode approve`), from one read of its journal: each pending
/// call with any decision recorded and whether its file changed since the
/// pause, and the files the run named before the pause that changed since.
///
/// # Errors
/// As [`pending_decisions`].
pub async fn approval_listing(store: &dyn JournalStore, run_id: &str) -> Result<ApprovalListing, RunError> {
    let journal = paused_journal(store, run_id).await?;
    Ok(ApprovalListing {
        run_id: run_id.to_owned(),
        pending: awaiting(&journal, |p| changed_since_pause(&journal, p)),
        files_changed_since_pause: files_changed_since_pause(&journal),
    })
}

/// What [`approval_listing`] shows (the JSON of `codemode approve RUN
/// --json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ApprovalListing {
    /// The run.
    pub run_id: String,
    /// Its pending calls, in seq order.
    pub pending: Vec<AwaitingCall>,
    /// The files the run named before its pause (a read, a write, an edit)
    /// that changed since, as a resume would find them now
    /// (journal/files_seen.rs): after the resume, a call that would change
    /// one is refused. Looked at in the workspace the journal names, when
    /// that folder is on this machine; empty otherwise.
    pub files_changed_since_pause: Vec<String>,
}

/// The journal of paused run `run_id`, read without holding the run.
async fn paused_journal(store: &dyn JournalStore, run_id: &str) -> Result<Journal, RunError> {
    let stored = store.load(run_id).await.map_err(|e| store_error(store, e))?;
    if let Some(refused) = not_paused(store, run_id, &stored) {
        return Err(refused);
    }
    Journal::parse(&stored.lines).map_err(|m| unreadable(run_id, &m))
}

/// The pending calls of `journal`, each with its recorded decision and
/// `changed` of it.
fn awaiting(
    journal: &Journal,
    changed: impl Fn(&super::record::PendingRecord) -> Option<String>,
) -> Vec<AwaitingCall> {
    journal
        .pending
        .iter()
        .map(|p| AwaitingCall {
            call: p.to_pending_call(),
            recorded: journal.approvals.iter().find(|a| a.seq == p.seq).map(RecordedDecision::of),
            changed_since_pause: changed(p),
        })
        .collect()
}

/// Why decisions cannot be taken for run `run_id`, as `stored` (read
/// without holding it) stands, if they cannot: it is not paused.
fn not_paused(store: &dyn JournalStore, run_id: &str, stored: &super::StoredRun) -> Option<RunError> {
    // Its process died: a resume recovers it (then its calls can be
    // decided), unless its journal cannot be read. (A run ended as
    // interrupted on purpose, moved from an old folder, cannot be: the
    // store says so below.)
    if stored.state == RunState::Interrupted && !super::ended_interrupted(&stored.lines) {
        return Some(match Journal::parse(&stored.lines) {
            Err(m) => unreadable(run_id, &m),
            Ok(_) => RunError::new(
                ErrorKind::NotResumable,
                format!(
                    "run `{run_id}` is interrupted: its process ended before the run paused or ended, so no \
                     call of it waits for a decision yet; `codemode resume {run_id}` recovers it (a call it was \
                     running then waits for a person, and can be decided here)"
                ),
            ),
        });
    }
    // A run another process holds (resuming it, or still running it) is
    // busy, as a claim would say.
    let state = match stored.state {
        RunState::Paused => return None,
        RunState::Running => super::NotResumableState::Busy,
        other => super::NotResumableState::State(other),
    };
    Some(store_error(store, StoreError::NotResumable { run_id: run_id.to_owned(), state }))
}

/// Records `decisions` (by seq, as the paused receipt's `pending` lists
/// them) for the pending calls of paused run `run_id`, for the next resume
/// to apply; runs nothing. The run is claimed as a resume claims it (so a
/// run another process holds is refused), one `approval` record per
/// decision is appended, and the run is given back, still paused. A
/// decision is recorded once per pause of a call: it cannot be changed
/// before the resume applies it.
///
/// # Errors
/// - `not_resumable`: unknown run, held by another process (`Busy`: being
///   resumed, or still running), ended, interrupted, journal unreadable;
///   the run is untouched;
/// - `invocation`: no decision given, a seq given twice, a seq that is not
///   pending, or one already decided; nothing is recorded, the run stays
///   paused;
/// - `internal`: the store failed.
pub async fn record_decisions(
    store: &dyn JournalStore,
    run_id: &str,
    decisions: &[(u64, Decided)],
) -> Result<RecordedDecisions, RunError> {
    if decisions.is_empty() {
        return Err(RunError::new(
            ErrorKind::Invocation,
            format!(
                "nothing to record for run `{run_id}`: name each pending call with --allow SEQ or --deny SEQ \
                 (`codemode approve {run_id}` lists them)"
            ),
        ));
    }
    // A run that is not paused is refused before it is claimed: a claim
    // takes an interrupted run for its recovery, and giving it back would
    // leave it paused with nothing waiting.
    let stored = store.load(run_id).await.map_err(|e| store_error(store, e))?;
    if let Some(refused) = not_paused(store, run_id, &stored) {
        return Err(refused);
    }
    let (lines, mut journal) = store.claim(run_id).await.map_err(|e| store_error(store, e))?;
    // From here every way out gives the run back, still paused.
    let checked = Journal::parse(&lines).map_err(|m| unreadable(run_id, &m)).and_then(|parsed| {
        check(run_id, &parsed, decisions)?;
        Ok(parsed)
    });
    let parsed = match checked {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = journal.commit(RunState::Paused).await;
            return Err(e);
        }
    };
    let at = codemode_base::time_text::rfc3339_utc(std::time::SystemTime::now());
    let mut text = String::new();
    for (seq, decided) in decisions {
        let (decision, reason) = match decided {
            Decided::Allow => (ApprovalDecision::Allow, None),
            Decided::AllowBecause(reason) => (ApprovalDecision::Allow, Some(reason.clone())),
            Decided::Deny(reason) => (ApprovalDecision::Deny, Some(reason.clone())),
        };
        let a =
            ApprovalRecord { seq: *seq, decision, reason, by: record::BY_PERSON.to_owned(), at: at.clone() };
        text.push_str(&record::tagged_line("approval", &a));
        text.push('\n');
    }
    let appended = journal.append(text).await;
    let committed = journal.commit(RunState::Paused).await;
    if let Err(e) = appended.and(committed) {
        return Err(RunError::new(
            ErrorKind::Internal,
            format!("the journal store ({}) failed while recording the decisions: {e}", store.describe()),
        ));
    }
    let decided =
        |seq: u64| decisions.iter().any(|(s, _)| *s == seq) || parsed.approvals.iter().any(|a| a.seq == seq);
    let calls = decisions
        .iter()
        .filter_map(|(seq, _)| parsed.pending.iter().find(|p| p.seq == *seq))
        .map(|p| p.to_pending_call())
        .collect();
    let will_be_refused = decisions
        .iter()
        .filter(|(_, d)| d.allows())
        .filter_map(|(seq, _)| parsed.pending.iter().find(|p| p.seq == *seq))
        .filter_map(|p| changed_since_pause(&parsed, p).map(|why| (p.seq, why)))
        .collect();
    Ok(RecordedDecisions {
        run_id: run_id.to_owned(),
        recorded: decisions.iter().map(|(seq, _)| *seq).collect(),
        calls,
        undecided: parsed.pending.iter().filter(|p| !decided(p.seq)).map(|p| p.to_pending_call()).collect(),
        will_be_refused,
    })
}

/// [`ApprovalListing::files_changed_since_pause`] of `journal`.
fn files_changed_since_pause(journal: &Journal) -> Vec<String> {
    let workspace = std::path::Path::new(&journal.header.workspace);
    let Some(paused) = journal.paused.as_ref().filter(|_| workspace.is_dir()) else { return Vec::new() };
    super::files_seen::FilesSeen::resumed(
        workspace,
        &paused.files,
        &paused.changed_files,
        &journal.written_since_pause,
    )
    .changed(workspace)
}

/// Why a resume will refuse `pending` of `journal` even when allowed: its
/// file changed since the pause. Looked at in the workspace the journal
/// names, when that folder is on this machine.
fn changed_since_pause(journal: &Journal, pending: &super::record::PendingRecord) -> Option<String> {
    let workspace = std::path::Path::new(&journal.header.workspace);
    let bound = pending.bound.as_ref()?;
    workspace.is_dir().then(|| super::files_seen::bound_changed(bound, workspace)).flatten()
}

/// Refuses decisions for calls that are not pending, or already decided.
fn check(run_id: &str, journal: &Journal, decisions: &[(u64, Decided)]) -> Result<(), RunError> {
    let invalid = |m: String| {
        RunError::new(
            ErrorKind::Invocation,
            format!("{m}; nothing was recorded and run `{run_id}` is still paused"),
        )
    };
    let open: Vec<String> = journal
        .pending
        .iter()
        .filter(|p| !journal.approvals.iter().any(|a| a.seq == p.seq))
        .map(|p| format!("{} (`{}`)", p.seq, p.tool))
        .collect();
    let open = if open.is_empty() { "none".to_owned() } else { open.join(", ") };
    let mut seen = std::collections::HashSet::new();
    for (seq, _) in decisions {
        if !seen.insert(*seq) {
            return Err(invalid(format!(
                "call {seq} is decided twice; give each pending call one --allow or --deny"
            )));
        }
        if let Some(a) = journal.approvals.iter().find(|a| a.seq == *seq) {
            let what = if a.decision == ApprovalDecision::Allow { "allowed" } else { "denied" };
            return Err(invalid(format!(
                "call {seq} was already {what} at {} and a recorded decision cannot be changed before the run \
                 is resumed; calls still waiting for a decision: {open}",
                a.at
            )));
        }
        if !journal.pending.iter().any(|p| p.seq == *seq) {
            return Err(invalid(format!(
                "call {seq} is not waiting for a decision; calls waiting for one: {open}"
            )));
        }
    }
    Ok(())
}

fn unreadable(run_id: &str, message: &str) -> RunError {
    RunError::new(
        ErrorKind::NotResumable,
        format!(
            "run `{run_id}` cannot be decided: its journal is unreadable ({message}); start the program again \
             (what the run did: `codemode runs show {run_id}`)"
        ),
    )
}

fn store_error(store: &dyn JournalStore, e: StoreError) -> RunError {
    match e {
        e @ (StoreError::NotResumable { .. } | StoreError::Unreadable { .. }) => {
            RunError::new(ErrorKind::NotResumable, e.to_string())
        }
        StoreError::Failed(m) => RunError::new(
            ErrorKind::Internal,
            format!("the journal store ({}) failed: {m}", store.describe()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::LocalStore;

    const HEADER: &str = r#"{"t":"header","journal_version":1,"run_id":"run-a","started_at":"2026-12-01T00:00:00Z","started_unix_ms":0,"codemode_version":"0","workspace":"/ws","program":{"name":"p.js","sha256":"0","source":""},"catalog_sha256":"c","policy_sha256":"p","policy":{},"limits":{}}"#;

    fn pending(seq: u64) -> String {
        format!(
            r#"{{"t":"pending","seq":{seq},"tool":"bash","args":{{"command":"echo {seq}"}},"reason":"r","subject":"echo {seq}"}}"#
        )
    }

    fn call(seq: u64) -> String {
        record::call_line(
            seq,
            "bash",
            crate::receipt::Caller::Program,
            &format!(r#"{{"command":"echo {seq}"}}"#),
        )
    }

    /// A paused run `run-a` with calls 1 and 2 pending, in a local store.
    async fn paused(dir: &std::path::Path) -> LocalStore {
        let store = LocalStore::new(dir);
        let mut journal = store.create("run-a", HEADER.to_owned()).await.unwrap();
        let lines = [call(1), call(2), pending(1), pending(2)].map(|l| l + "\n").concat();
        journal.append(lines).await.unwrap();
        journal.commit(RunState::Paused).await.unwrap();
        store
    }

    #[test]
    fn approvals_are_read_back_until_a_resume_applies_them() {
        let approval = |seq: u64, decision: &str| {
            format!(
                r#"{{"t":"approval","seq":{seq},"decision":"{decision}","reason":"no","by":"person","at":"x"}}"#
            )
        };
        let decision =
            |seq: u64| format!(r#"{{"t":"decision","seq":{seq},"allow":true,"reason":null,"at":"x"}}"#);
        let base = [HEADER.to_owned(), call(1), call(2), call(3), pending(1), pending(2), pending(3)];
        let parse = |extra: &[String]| {
            let lines: Vec<String> = base.iter().chain(extra).cloned().collect();
            Journal::parse(&lines).unwrap().approvals.iter().map(|a| (a.seq, a.decision)).collect::<Vec<_>>()
        };
        // Recorded, in seq order; a second record for one seq does not
        // replace the first.
        assert_eq!(
            parse(&[approval(2, "deny"), approval(1, "allow"), approval(1, "deny")]),
            [(1, ApprovalDecision::Allow), (2, ApprovalDecision::Deny)]
        );
        // Applied by a resume (its decision line), or paused on again:
        // closed.
        assert_eq!(
            parse(&[approval(1, "allow"), approval(2, "allow"), decision(1)]),
            [(2, ApprovalDecision::Allow)]
        );
        assert_eq!(
            parse(&[approval(1, "allow"), approval(3, "deny"), pending(3)]),
            [(1, ApprovalDecision::Allow)]
        );
        // A journal without approval records (an older one) has none.
        assert!(parse(&[]).is_empty());
        // A decision line's `by` is optional (older journals have none).
        let lines: Vec<String> = base.iter().cloned().chain([decision(1)]).collect();
        assert_eq!(Journal::parse(&lines).unwrap().decisions[0].by, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recording_appends_approvals_and_leaves_the_run_paused() {
        let dir = tempfile::tempdir().unwrap();
        let store = paused(dir.path()).await;
        let recorded =
            record_decisions(&store, "run-a", &[(2, Decided::Deny("not now".into()))]).await.unwrap();
        assert_eq!(recorded.recorded, [2]);
        assert_eq!(recorded.calls[0].subject.as_deref(), Some("echo 2"));
        assert_eq!(recorded.undecided.iter().map(|p| p.seq).collect::<Vec<_>>(), [1]);
        let stored = store.load("run-a").await.unwrap();
        assert_eq!(stored.state, RunState::Paused);
        let approval: serde_json::Value =
            serde_json::from_str(stored.lines.iter().find(|l| l.starts_with(r#"{"t":"approval""#)).unwrap())
                .unwrap();
        assert_eq!(
            (approval["seq"].as_u64(), approval["decision"].as_str(), approval["reason"].as_str()),
            (Some(2), Some("deny"), Some("not now"))
        );
        assert_eq!(approval["by"], "person");
        let listed = pending_decisions(&store, "run-a").await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].recorded, None);
        assert_eq!(listed[0].call.subject.as_deref(), Some("echo 1"));
        assert!(
            listed[1].recorded.as_ref().is_some_and(|r| !r.allow && r.reason.as_deref() == Some("not now"))
        );

        // Already decided, not pending, twice, none: refused, nothing added.
        let before = store.load("run-a").await.unwrap().lines.len();
        for (decisions, expect) in [
            (vec![(2, Decided::Allow)], "already denied"),
            (
                vec![(7, Decided::Allow)],
                "call 7 is not waiting for a decision; calls waiting for one: 1 (`bash`)",
            ),
            (vec![(1, Decided::Allow), (1, Decided::Allow)], "decided twice"),
            (vec![], "nothing to record"),
        ] {
            let e = record_decisions(&store, "run-a", &decisions).await.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Invocation, "{}", e.message);
            assert!(e.message.contains(expect), "{}", e.message);
        }
        let after = store.load("run-a").await.unwrap();
        assert_eq!(after.state, RunState::Paused);
        let approvals = after.lines.iter().filter(|l| l.starts_with(r#"{"t":"approval""#)).count();
        assert_eq!(approvals, 1, "no approval added");
        assert!(after.lines.len() > before, "each refusal claimed and gave back the run (state lines)");

        // An unknown run: not resumable.
        let e = record_decisions(&store, "run-b", &[(1, Decided::Allow)]).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotResumable);
    }
}
