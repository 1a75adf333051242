//! A journal file sits where anything with the user's rights can change it
//! (docs/JOURNAL.md, "Errors of a resume"): a hostile line must end a
//! resume in a clear error or be read harmlessly, never crash the VM thread
//! (kind `internal`).

use codemode::journal::Decided;
use codemode::{Program, approval::PauseApprover, receipt::ErrorKind, receipt::RunStatus};

/// A clock read counted zero times (`"n":0`, which codemode never writes)
/// was subtracted past zero on replay: a panic on the VM thread.
#[test]
fn a_clock_read_counted_zero_times_does_not_crash_the_resume() {
    let ws = crate::common::workspace();
    let engine = || {
        crate::common::engine_builder()
            .workspace(ws.path())
            .approver(PauseApprover)
            .build()
            .expect("engine builds")
    };
    let source = r#"
        const stamp = Date.now();
        await tools.write({path: "out.txt", content: "x"});
        return stamp;
    "#;
    let paused = engine().execute_blocking(Program::new(source));
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    let journal = crate::common::runs_dir(ws.path()).join(&paused.run_id).join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let now = text.lines().find(|l| l.starts_with(r#"{"t":"now""#)).expect("a clock read is journaled");
    let zero = now.replace(r#""n":1"#, r#""n":0"#);
    assert_ne!(now, zero, "{now}");
    std::fs::write(&journal, text.replace(now, &zero)).unwrap();
    let seq = paused.pending[0].seq;
    let resumed = engine().resume_blocking(&paused.run_id, &[(seq, Decided::Allow)]);
    let kind = resumed.error.as_ref().map(|e| e.kind);
    assert_ne!(kind, Some(ErrorKind::Internal), "{:?}", resumed.error);
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
}
