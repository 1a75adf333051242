//! The journal reader (the `journal_lines` target).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::journal::replay::{Journal, NextSettle, Replay, ReplayCall};
use crate::receipt::Caller;

/// Reads `bytes` as the local store reads a `journal.jsonl` file (complete
/// lines only, UTF-8, at most `MAX_LINES`), parses the records as a resume
/// does, and replays them as a program making every journaled call again
/// would (each pending call allowed), reading every journaled clock value.
/// Returns what was read: `{lines, calls, done, pending, approvals,
/// decisions, now, settled, replayed}` (counts).
///
/// # Errors
/// The reader's message: a line that is not UTF-8 or not a record (naming
/// the line), too many lines, no header.
pub fn journal_lines(bytes: &[u8]) -> Result<Value, String> {
    let lines = crate::journal::local::lines_of(bytes).map_err(|e| e.to_string())?;
    let journal = Journal::parse(&lines)?;
    let mut counts = json!({
        "lines": lines.len(),
        "calls": journal.calls.len(),
        "done": journal.done.len(),
        "pending": journal.pending.len(),
        "approvals": journal.approvals.len(),
        "decisions": journal.decisions.len(),
        "now": journal.now.len(),
    });
    let mut calls: Vec<(u64, String, Caller, String)> =
        journal.calls.values().map(|c| (c.seq, c.tool.clone(), c.caller, c.args.get().to_owned())).collect();
    calls.sort_by_key(|c| c.0);
    let decisions: HashMap<u64, crate::journal::Decided> =
        journal.pending.iter().map(|p| (p.seq, crate::journal::Decided::Allow)).collect();
    let mut replay = Replay::new(journal, decisions, HashSet::new());
    let mut replayed = 0usize;
    for (seq, tool, caller, args) in &calls {
        if !matches!(replay.call(*seq, tool, *caller, args), ReplayCall::Diverged(_)) {
            replayed += 1;
        }
    }
    let mut settled = 0usize;
    while let NextSettle::Now { .. } = replay.next_settle() {
        settled += 1;
    }
    let _ = (replay.undelivered(), replay.pending_calls(), replay.caught_up());
    while replay.now().is_some() && settled < 10 * lines.len() {
        settled += 1;
    }
    counts["settled"] = json!(settled);
    counts["replayed"] = json!(replayed);
    Ok(counts)
}

/// A legacy journal as `codemode` moves it into the state folder: without
/// its `approval` lines and its last line when that has no newline. Returns
/// the kept bytes and how many approval lines were dropped.
pub fn legacy_without_approvals(bytes: &[u8]) -> (Vec<u8>, usize) {
    crate::journal::legacy::without_approvals(bytes)
}
