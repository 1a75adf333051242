//! The journal reader (crates/codemode/src/journal/: local.rs `lines_of`, replay.rs
//! `Journal::parse` and `Replay`, legacy.rs `without_approvals`): a `journal.jsonl` file sits
//! where anything with the user's rights can change it.
//!
//! Input: the bytes of a journal file.
//!
//! Property: no panic; a journal that reads holds no more records of any kind than it has lines,
//! and its replay hands back no more results than it holds; one that does not read gets an error
//! naming the line at fault or what is wrong with the journal as a whole; the legacy migration's
//! filter keeps at most the input and is idempotent (a second pass drops nothing).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match codemode::fuzzing::journal_lines(data) {
        Ok(counts) => {
            let lines = counts["lines"].as_u64().unwrap_or(0);
            for key in ["calls", "done", "pending", "approvals", "decisions", "now", "replayed"] {
                let n = counts[key].as_u64().unwrap_or(u64::MAX);
                assert!(n <= lines, "{key}: {n} of {lines} lines");
            }
            assert!(counts["settled"].as_u64().is_some_and(|n| n <= 10 * lines), "{counts}");
        }
        Err(message) => {
            assert!(
                message.contains("line") || message.contains("journal") || message.contains("empty"),
                "an unclear error: {message}"
            );
        }
    }
    let (kept, _) = codemode::fuzzing::legacy_without_approvals(data);
    assert!(kept.len() <= data.len());
    let (again, dropped) = codemode::fuzzing::legacy_without_approvals(&kept);
    assert_eq!((again.len(), dropped), (kept.len(), 0), "the filter is not idempotent");
});
