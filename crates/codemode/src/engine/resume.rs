//! Journals of runs: the header a new run's journal starts with, and
//! resuming a paused run from its journal ([`Engine::resume`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Engine, Shared};
use crate::journal::approvals::RecordedDecision;
use crate::journal::digest;
use crate::journal::record::{self, DecisionRecord, Header, ProgramRecord};
use crate::journal::replay::{Decided, Journal, Replay};
use crate::journal::writer::{Opening, RunLog};
use crate::journal::{RunState, StoreError};
use crate::receipt::{ErrorKind, Receipt, RunError};
use crate::vm::clock::RunClock;
use crate::vm::journaling::Journaling;
use codemode_program::Program;

/// The configuration file (its policy and sandbox) and the limits as the
/// journal records them, computed once per engine (for the posture the
/// engine started with).
pub(crate) struct JournalFacts {
    posture: crate::gate::Posture,
    policy: serde_json::Value,
    policy_sha256: String,
    limits: serde_json::Value,
}

impl JournalFacts {
    pub(crate) fn new(
        config: &crate::config::ConfigFile,
        limits: &codemode_base::limits::Limits,
    ) -> JournalFacts {
        let posture = config.policy.posture;
        let policy_json = crate::config::policy_json(config, posture);
        JournalFacts {
            posture,
            policy_sha256: digest::json_sha256(&policy_json),
            policy: policy_json,
            limits: digest::limits_json(limits),
        }
    }

    /// The policy JSON and digest under `posture`.
    fn policy(&self, shared: &Shared, posture: crate::gate::Posture) -> (serde_json::Value, String) {
        if posture == self.posture {
            return (self.policy.clone(), self.policy_sha256.clone());
        }
        let json = crate::config::policy_json(&shared.config, posture);
        let sha = digest::json_sha256(&json);
        (json, sha)
    }
}

/// The header line of run `run_id`'s journal.
fn header(shared: &Shared, program: &Program, run_id: &str, posture: crate::gate::Posture) -> Header {
    let now = std::time::SystemTime::now();
    let (policy, policy_sha256) = shared.journal_facts.policy(shared, posture);
    Header {
        t: "header".into(),
        journal_version: record::JOURNAL_VERSION,
        run_id: run_id.to_owned(),
        started_at: super::rfc3339_utc(now),
        started_unix_ms: crate::vm::journaling::now_ms() as u64,
        codemode_version: env!("CARGO_PKG_VERSION").to_owned(),
        workspace: shared.workspace.display().to_string(),
        program: ProgramRecord {
            name: program.name().to_owned(),
            sha256: digest::sha256_hex(program.source().as_bytes()),
            source: program.source().to_owned(),
            path: program.path().map(|p| p.display().to_string()),
            input: program.input().cloned(),
        },
        catalog_sha256: shared.catalog.load().digest().to_owned(),
        catalog_servers: Some(shared.catalog.load().mcp_servers()),
        policy_sha256,
        policy,
        limits: shared.journal_facts.limits.clone(),
    }
}

/// The journaling of a new run, when the engine keeps journals.
pub(crate) fn new_run(shared: &Shared, program: &Program, run_id: &Arc<str>) -> Option<Journaling> {
    let store = shared.journal.as_ref()?;
    let header = header(shared, program, run_id, shared.posture.get().0);
    let header = serde_json::to_string(&header).expect("a header serialises");
    let opening = Opening::Create { store: store.clone(), run_id: run_id.clone(), header };
    let log = RunLog::start(opening, &shared.tools);
    let durable = log.durable();
    let mut journaling = Journaling::new(Box::new(log));
    journaling.durable = Some(durable);
    Some(journaling)
}

/// What a resume needs to run: the program, its journaling and its clock.
pub(crate) struct Resumed {
    pub program: Program,
    pub journaling: Journaling,
    pub clock: Arc<RunClock>,
}

/// Runs `f` (a store operation) on the engine's tool runtime.
async fn on_tools<T: Send + 'static>(
    shared: &Shared,
    f: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    shared
        .tools
        .spawn(f)
        .await
        .unwrap_or_else(|e| Err(StoreError::Failed(format!("the journal task failed: {e}"))))
}

/// Claims paused run `run_id`, checks nothing it depends on changed, and
/// readies its replay with `decisions`; or the receipt saying why not.
pub(crate) async fn prepare(
    engine: &Engine,
    run_id: &str,
    decisions: &[(u64, Decided)],
    any_workspace: bool,
) -> Result<Resumed, Receipt> {
    let shared = &engine.shared;
    let refused = |kind: ErrorKind, message: String| refusal(shared, run_id, kind, message);
    let (lines, mut claimed) = claim(shared, run_id).await.map_err(|(kind, m)| refused(kind, m))?;
    // A cancel requested while the run last ran (its process died or
    // paused before it looked) ends it here, before anything is replayed
    // or run again: not 300 ms into the resume, with a call it allowed
    // again half run.
    if cancel_requested(shared, run_id).await {
        let ended =
            on_tools(shared, async move { claimed.end(String::new(), RunState::Cancelled).await }).await;
        let mut receipt = refused(
            ErrorKind::Cancelled,
            format!(
                "a cancel was requested for run {run_id} (`codemode runs cancel`) while it last ran: it is ended \
                 `cancelled` now, and nothing ran again"
            ),
        );
        receipt.status = crate::receipt::RunStatus::Cancelled;
        if let Err(e) = ended {
            receipt.warnings.push(format!("the run could not be ended `cancelled`: {e}"));
        }
        return Err(receipt);
    }
    // From here a refusal gives the run back, still paused; an
    // interrupted one is let go as it was (its journal dropped uncommitted
    // leaves it `running` with nobody holding it: interrupted).
    let interrupted = was_interrupted(&lines);
    let mut warnings = Vec::new();
    let checked = checked_journal(shared, run_id, &lines, (decisions, any_workspace), &mut warnings);
    let (mut journal, merged) = match checked {
        Ok(j) => j,
        Err((kind, message)) if interrupted => {
            drop(claimed);
            // A decision given for a call of an interrupted run: it has
            // none waiting until its recovery pauses on one.
            let still = match kind {
                ErrorKind::Invocation => format!(
                    "the run stays interrupted: recover it first with `codemode resume {run_id}` and no decision \
                     (a call whose outcome is unknown then pauses it, for a decision)"
                ),
                _ => STILL_INTERRUPTED.to_owned(),
            };
            let message = message.replace(STILL_PAUSED, &still);
            return Err(refused(kind, message));
        }
        Err((kind, message)) => {
            let back = on_tools(shared, async move { claimed.commit(RunState::Paused).await }).await;
            let mut receipt = refused(kind, message);
            if let Err(e) = back {
                receipt.warnings.push(format!("the run could not be given back as paused: {e}"));
            }
            return Err(receipt);
        }
    };
    // The files of the pending calls not denied are compared with what
    // they held at the pause now, before any call runs
    // (journal/files_seen.rs).
    let denied: HashSet<u64> =
        merged.decisions.iter().filter(|(_, d)| !d.allows()).map(|(s, _)| *s).collect();
    for pending in journal.pending.iter_mut().filter(|p| !denied.contains(&p.seq)) {
        pending.changed_since_pause = pending
            .bound
            .as_ref()
            .and_then(|b| crate::journal::files_seen::bound_changed(b, &shared.workspace));
    }
    // So are the files the run named before the pause, but those a
    // recovery's own writes changed since its last pause.
    let files_seen = journal.paused.as_ref().map(|p| {
        crate::journal::files_seen::FilesSeen::resumed(
            &shared.workspace,
            &p.files,
            &p.changed_files,
            &journal.written_since_pause,
        )
    });
    let log = RunLog::start(Opening::Claimed(claimed), &shared.tools);
    let mut journaling = resumed_journaling(log, journal, merged);
    if let Some(files_seen) = files_seen {
        journaling.files_seen = Arc::new(files_seen);
    }
    journaling.warnings = warnings;
    journaling.recovering = interrupted;
    let replay = journaling.replay.as_ref().expect("a resume replays");
    let h = replay.header();
    let mut program = Program::named(h.program.name.clone(), h.program.source.clone());
    if let Some(path) = &h.program.path {
        program = program.with_path(path);
    }
    if let Some(input) = &h.program.input {
        program = program.with_input(input.clone());
    }
    // The deadline counts the run's active time across its pauses.
    let active_before =
        journaling.before.as_ref().map_or(0.0, |p| (p.elapsed_ms - p.approval_wait_ms).max(0.0));
    // Replaying gets a whole deadline of its own (it redoes work already
    // counted); the run's own time left starts when the replay catches up.
    journaling.deadline_left = Some(
        shared.limits.deadline.saturating_sub(std::time::Duration::from_secs_f64(active_before / 1000.0)),
    );
    Ok(Resumed { program, journaling, clock: Arc::new(RunClock::new(shared.limits.deadline)) })
}

/// How a refusal of a paused run's resume ends its message.
const STILL_PAUSED: &str = "the run is still paused";

/// The same for an interrupted run's recovery.
const STILL_INTERRUPTED: &str =
    "the run stays interrupted (recover it with `codemode resume` once that is restored)";

/// Whether a claimed run's journal ends `running` (or has no state line
/// yet): its process ended
/// without pausing or finishing it, and this resume recovers it.
fn was_interrupted(lines: &[String]) -> bool {
    lines
        .iter()
        .rev()
        .find(|l| record::kind(l) == Some("state"))
        // A new run's journal has no `state` line until it pauses or ends.
        .is_none_or(|l| l.contains(&format!("\"state\":\"{}\"", RunState::Running.as_str())))
}

/// The receipt of a resume refused with `kind` and `message`, before
/// anything ran.
fn refusal(shared: &Shared, run_id: &str, kind: ErrorKind, message: String) -> Receipt {
    super::early_receipt(shared, run_id, &RunClock::new(shared.limits.deadline), RunError::new(kind, message))
}

/// Whether the engine's journal store holds a cancel request for run
/// `run_id` (`codemode runs cancel`, docs/JOURNAL.md "Waiting and
/// cancelling"); a store that cannot be read says no (the run's own watch
/// asks again once it runs).
async fn cancel_requested(shared: &Shared, run_id: &str) -> bool {
    let Some(store) = shared.journal.clone() else { return false };
    let ids = vec![run_id.to_owned()];
    on_tools(shared, async move { store.cancel_requests(&ids).await })
        .await
        .is_ok_and(|found| !found.is_empty())
}

/// Claims run `run_id` in the engine's journal store: its journal's lines
/// and the claim (which must be committed or given back).
///
/// # Errors
/// The kind and message of the refusal: `not_resumable` when journaling is
/// off or the store refuses the claim (unknown, ended, held elsewhere),
/// `internal` when the store fails.
async fn claim(
    shared: &Shared,
    run_id: &str,
) -> Result<(Vec<String>, Box<dyn crate::journal::RunJournal>), (ErrorKind, String)> {
    let Some(store) = shared.journal.clone() else {
        return Err((
            ErrorKind::NotResumable,
            format!("run `{run_id}` cannot be resumed: this engine keeps no journals (journaling is off)"),
        ));
    };
    let claimed = {
        let (store, id) = (store.clone(), run_id.to_owned());
        on_tools(shared, async move { store.claim(&id).await }).await
    };
    match claimed {
        Ok(c) => Ok(c),
        Err(e @ StoreError::NotResumable { state: crate::journal::NotResumableState::Unknown, .. }) => {
            Err((ErrorKind::NotResumable, no_journal_here(shared, run_id).unwrap_or_else(|| e.to_string())))
        }
        Err(e @ (StoreError::NotResumable { .. } | StoreError::Unreadable { .. })) => {
            Err((ErrorKind::NotResumable, e.to_string()))
        }
        Err(StoreError::Failed(m)) => {
            Err((ErrorKind::Internal, format!("the journal store ({}) failed: {m}", store.describe())))
        }
    }
}

/// Why run `run_id`, which the journal store does not know, cannot be
/// resumed or rolled back, when its folder in the runs folder has its
/// receipt (so `codemode runs list` shows it): it keeps no journal in this
/// store. `None` when there is no such folder (an unknown id).
pub(crate) fn no_journal_here(shared: &Shared, run_id: &str) -> Option<String> {
    crate::journal::local::check_run_id(run_id).ok()?;
    let receipt = shared.spill_root.join(run_id).join(crate::journal::RECEIPT_FILE);
    receipt.symlink_metadata().ok().filter(std::fs::Metadata::is_file)?;
    Some(format!(
        "run `{run_id}` has a receipt but no journal in this journal store ({}): a batch keeps none (nor does \
         a rollback, which runs as a batch), and a program run has none when it was made with `--journal off` \
         or another --journal, or when its journal was removed; only a program run with its journal can be \
         resumed or rolled back (what it did: `codemode runs show {run_id}`)",
        shared.journal.as_ref().map_or_else(|| "none".to_owned(), |s| s.describe())
    ))
}

/// The claimed run's journal, parsed, checked unchanged (program, catalog,
/// policy, limits) and with `decisions` checked and merged with those a
/// person recorded; `warnings` gets what the checks only warn of.
///
/// # Errors
/// The kind and message of the refusal: `not_resumable` (unreadable
/// journal), `divergence` (something changed), `invocation` (a decision
/// that does not fit).
fn checked_journal(
    shared: &Shared,
    run_id: &str,
    lines: &[String],
    (decisions, any_workspace): (&[(u64, Decided)], bool),
    warnings: &mut Vec<String>,
) -> Result<(Journal, Merged), (ErrorKind, String)> {
    let journal = Journal::parse(lines).map_err(|m| {
        (
            ErrorKind::NotResumable,
            format!(
                "run `{run_id}` cannot be resumed: its journal is unreadable ({m}); start the program again \
                 (what the run did: `codemode runs show {run_id}`)"
            ),
        )
    })?;
    check_unchanged(shared, &journal, any_workspace, warnings).map_err(|m| {
        (ErrorKind::Divergence, format!("run `{run_id}` cannot be resumed: {m}; {STILL_PAUSED}"))
    })?;
    check_decisions(&journal, decisions)
        .map_err(|m| (ErrorKind::Invocation, format!("{m}; {STILL_PAUSED}")))?;
    let merged = with_recorded(&journal, decisions)
        .map_err(|m| (ErrorKind::Invocation, format!("{m}; {STILL_PAUSED}")))?;
    Ok((journal, merged))
}

/// The journaling of the resumed run: `log` goes on with a `resumed` line
/// and one `decision` line per decision, and the replay answers from
/// `journal` with `merged`'s decisions.
fn resumed_journaling(mut log: RunLog, journal: Journal, merged: Merged) -> Journaling {
    let Merged { decisions, by_person } = merged;
    let at = super::rfc3339_utc(std::time::SystemTime::now());
    log.push(record::resumed_line(&at));
    for (seq, decided) in &decisions {
        let (allow, reason) = (decided.allows(), decided.reason().map(str::to_owned));
        let by = by_person.contains(seq).then(|| record::BY_PERSON.to_owned());
        let d = DecisionRecord { seq: *seq, allow, reason, at: at.clone(), by };
        log.hold_until_caught_up(record::tagged_line("decision", &d));
    }
    let replay =
        Replay::new(journal, decisions.iter().cloned().collect::<HashMap<_, _>>(), by_person.clone());
    let durable = log.durable();
    let mut journaling = Journaling::resumed(Box::new(log), replay);
    journaling.durable = Some(durable);
    journaling
}

/// Refuses a resume whose program, catalog or policy changed since the run
/// paused, saying what changed.
fn check_unchanged(
    shared: &Shared,
    journal: &Journal,
    any_workspace: bool,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    let h = &journal.header;
    let mut changed = Vec::new();
    if digest::sha256_hex(h.program.source.as_bytes()) != h.program.sha256 {
        changed
            .push("the journaled program does not match its own hash (the journal was altered)".to_owned());
    }
    if let Some(path) = &h.program.path
        && std::fs::symlink_metadata(path).is_err()
    {
        warnings.push(format!("the program file {path} is gone; the program as journaled ran"));
    }
    if let Some(path) = &h.program.path
        && let Ok(now) = std::fs::read(path)
        && digest::sha256_hex(&now) != h.program.sha256
    {
        changed.push(format!(
            "the program file {path} changed since the run paused (sha256 {} -> {}); a resume re-runs the program as it was: restore it, or start a new run",
            short(&h.program.sha256),
            short(&digest::sha256_hex(&now))
        ));
    }
    let workspace = shared.workspace.display().to_string();
    if h.workspace != workspace {
        if shared.journal.as_ref().is_some_and(|s| s.workspace_bound()) {
            changed.push(format!(
                "the run was made in workspace {}, not {workspace} (its journal was copied or moved): resume it \
                 there",
                h.workspace
            ));
        } else if !any_workspace {
            changed.push(format!(
                "the run was made in workspace {0}, not {workspace}: the journal store holds several workspaces' \
                 runs, and the calls approved for that workspace would act on this one's files; resume it there \
                 (--workspace {0}), or give --any-workspace to go on here",
                h.workspace
            ));
        }
    }
    // The catalog as it was when the run paused (an MCP server first
    // listed during the run added its tools), else as it started (a run
    // recovered after a crash), against this catalog without the MCP
    // servers listed since: their tools are new to the run, not changed.
    let (paused_with, servers) = match journal.paused.as_ref().and_then(|p| p.catalog_sha256.as_deref()) {
        Some(sha) => (sha, journal.paused.as_ref().and_then(|p| p.catalog_servers.as_deref())),
        None => (h.catalog_sha256.as_str(), h.catalog_servers.as_deref()),
    };
    let loaded = shared.catalog.load();
    let catalog = servers.map_or_else(|| loaded.digest().to_owned(), |s| loaded.digest_with_servers(s));
    if catalog != paused_with {
        changed.push(format!(
            "the catalog changed since the run paused (sha256 {} -> {}): a tool was added, removed or changed its schema \
             (an MCP server's tools come from the schema cache until it starts: after the cache was cleared, or on \
             another machine, `codemode mcp tools SERVER` lists them again)",
            short(paused_with),
            short(&catalog)
        ));
    }
    let (policy, policy_sha) = shared.journal_facts.policy(shared, shared.posture.get().0);
    if policy_sha != h.policy_sha256 {
        changed.push(format!(
            "the policy changed since the run paused: {}",
            digest::differences(&h.policy, &policy).join("; ")
        ));
    }
    // Limits may change (a longer deadline for the rest of the run, say):
    // journaled calls are answered from the journal whatever they are.
    if changed.is_empty() { Ok(()) } else { Err(changed.join("; ")) }
}

/// Refuses decisions for calls that are not pending.
fn check_decisions(journal: &Journal, decisions: &[(u64, Decided)]) -> Result<(), String> {
    let pending: Vec<String> = journal.pending.iter().map(|p| format!("{} (`{}`)", p.seq, p.tool)).collect();
    let mut seen = std::collections::HashSet::new();
    for (seq, _) in decisions {
        if !seen.insert(*seq) {
            return Err(format!("call {seq} is decided twice; give each pending call one --allow or --deny"));
        }
        if !journal.pending.iter().any(|p| p.seq == *seq) {
            return Err(format!(
                "call {seq} is not waiting for a decision; the pending calls are: {}",
                if pending.is_empty() { "none".to_owned() } else { pending.join(", ") }
            ));
        }
    }
    Ok(())
}

/// The decisions a resume applies: those given, and those a person
/// recorded with `codemode approve` since the pause.
struct Merged {
    decisions: Vec<(u64, Decided)>,
    /// The seqs a person decided.
    by_person: HashSet<u64>,
}

/// `decisions` with the decisions a person recorded with `codemode
/// approve` since the pause added. A decision given for a call a person
/// already decided must agree with theirs.
fn with_recorded(journal: &Journal, decisions: &[(u64, Decided)]) -> Result<Merged, String> {
    let mut merged = decisions.to_vec();
    let mut by_person = HashSet::new();
    for approval in &journal.approvals {
        let recorded = RecordedDecision::decided(approval);
        match decisions.iter().find(|(seq, _)| *seq == approval.seq) {
            Some((_, given)) if given.allows() != recorded.allows() => {
                return Err(format!(
                    "call {} was already {} by a person with `codemode approve` (at {}); leave it out of the \
                     resume's decisions, or decide it the same way",
                    approval.seq,
                    if recorded.allows() { "allowed" } else { "denied" },
                    approval.at
                ));
            }
            // Decided the same way on both: the person's decision stands.
            Some(_) => {
                merged.retain(|(seq, _)| *seq != approval.seq);
                merged.push((approval.seq, recorded));
            }
            None => merged.push((approval.seq, recorded)),
        }
        by_person.insert(approval.seq);
    }
    Ok(Merged { decisions: merged, by_person })
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
