//! Runs an earlier codemode kept in the workspace (`<workspace>/.codemode/runs`),
//! moved once to the workspace's folder in the state folder, where run
//! state lives now (docs/JOURNAL.md, "Runs on disk").
//!
//! The old folder was reachable by programs (a nested workspace's
//! `.codemode/` was not hidden from an outer workspace's bash; a program
//! could make a run folder there, a whole paused run copied from another,
//! at any time), so what it holds may have been written by a program and
//! comes in as history only, never as a run that goes on: a run that had
//! not ended (paused, or left running) is ended as `interrupted` by a
//! `state` line the move appends, so `codemode resume` and `codemode
//! approve` refuse it, `codemode approve` never shows its pending calls to
//! a person, and retention treats it as ended. The move also drops every
//! decision recorded with `codemode approve` (every `approval` line, found
//! by the same reading the resume uses, [`super::record::kind`], and as
//! JSON) and a last line without its newline (never committed). A run
//! that ended moves as it is.

use std::path::{Path, PathBuf};

use super::StoreError;
use super::local::JOURNAL_FILE;

/// What [`move_legacy_runs`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MovedRuns {
    /// The old folder, `<workspace>/.codemode/runs`.
    pub from: PathBuf,
    /// Where the runs went.
    pub to: PathBuf,
    /// How many run folders moved.
    pub moved: usize,
    /// Run folders left where they were (one of that id exists at the new
    /// place, or it could not be copied), by name.
    pub left: Vec<String>,
    /// How many recorded, not yet applied decisions were dropped.
    pub dropped_decisions: usize,
    /// How many of the runs moved had not ended (paused, or left running)
    /// and were ended as `interrupted`: they cannot be resumed.
    pub ended: usize,
}

impl std::fmt::Display for MovedRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "moved {} run(s) from {} to {} (run state is kept outside the workspace now)",
            self.moved,
            self.from.display(),
            self.to.display()
        )?;
        if self.ended > 0 {
            write!(
                f,
                "; {} paused run(s) among them can no longer be resumed (runs moved from the old folder \
                 come in as history, ended as interrupted): start them again",
                self.ended
            )?;
        }
        if self.dropped_decisions > 0 {
            write!(
                f,
                "; {} decision(s) recorded there with codemode approve were dropped",
                self.dropped_decisions
            )?;
        }
        if !self.left.is_empty() {
            write!(f, "; left in place: {}", self.left.join(", "))?;
        }
        Ok(())
    }
}

/// Moves the run folders of `<workspace>/.codemode/runs` (a real folder,
/// not reached through a link) into `to`, once: the old folder is claimed
/// by renaming it first, so two processes never move one run twice, and
/// removed when empty. `None` when there is nothing to move.
///
/// # Errors
/// [`StoreError::Failed`] when `to` cannot be made.
pub fn move_legacy_runs(workspace: &Path, to: &Path) -> Result<Option<MovedRuns>, StoreError> {
    let hidden = workspace.join(codemode_base::HIDDEN_NAME);
    let from = hidden.join("runs");
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !real_dir(&hidden) || !real_dir(&from) {
        return Ok(None);
    }
    let claimed = hidden.join(format!("runs.moving-{}", std::process::id()));
    if std::fs::rename(&from, &claimed).is_err() {
        // Another process claimed it first, or it is not ours to move.
        return Ok(None);
    }
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(to)
            .map_err(|e| StoreError::failed(format!("cannot make {}", to.display()), e))?;
    }
    let mut moved =
        MovedRuns { from, to: to.to_path_buf(), moved: 0, left: Vec::new(), dropped_decisions: 0, ended: 0 };
    let entries = std::fs::read_dir(&claimed).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    for entry in entries {
        let name = entry.file_name();
        let shown = name.to_string_lossy().into_owned();
        let src = entry.path();
        let dst = to.join(&name);
        if !real_dir(&src) || dst.exists() {
            moved.left.push(shown);
            continue;
        }
        match copy_run(&src, &dst) {
            Ok(copied) => {
                moved.moved += 1;
                moved.dropped_decisions += copied.dropped;
                moved.ended += usize::from(copied.ended);
                let _ = std::fs::remove_dir_all(&src);
            }
            Err(_) => {
                let _ = std::fs::remove_dir_all(&dst);
                moved.left.push(shown);
            }
        }
    }
    // Empty now: gone. Not empty: back where it was, for a person to see.
    if std::fs::remove_dir(&claimed).is_err() {
        let _ = std::fs::rename(&claimed, &moved.from);
    }
    Ok((moved.moved > 0 || !moved.left.is_empty()).then_some(moved))
}

/// What [`copy_run`] did to a run's journal.
struct Copied {
    /// How many `approval` lines were dropped.
    dropped: usize,
    /// Whether the run had not ended and was ended as `interrupted`.
    ended: bool,
}

/// Copies one run folder's regular files (links and folders inside are
/// left behind), the journal without its `approval` lines and, when its
/// state as a store reads it is not final, ended as `interrupted`.
fn copy_run(src: &Path, dst: &Path) -> std::io::Result<Copied> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().mode(0o700).create(dst)?;
    let mut copied = Copied { dropped: 0, ended: false };
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let target = dst.join(entry.file_name());
        // A journal over the bound is copied as it is (no run reads it back).
        let readable = entry.metadata()?.len() <= super::local::MAX_JOURNAL_BYTES;
        if entry.file_name() == JOURNAL_FILE && readable {
            let bytes = std::fs::read(entry.path())?;
            let (kept, n) = without_approvals(&bytes);
            copied.dropped += n;
            std::fs::write(&target, kept)?;
            copied.ended = end_as_interrupted(&target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(copied)
}

/// Appends an `interrupted` state line to the journal at `path` unless the
/// state a store reads from it ([`super::local::last_state`]) is final; the
/// appended line is its last, so it is the state every reader finds.
/// Returns whether it appended.
fn end_as_interrupted(path: &Path) -> std::io::Result<bool> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new().read(true).append(true).open(path)?;
    if super::local::last_state(&mut file)?.is_final() {
        return Ok(false);
    }
    writeln!(file, "{}", super::local::state_line(super::RunState::Interrupted))?;
    file.sync_all()?;
    Ok(true)
}

/// `journal` without its `approval` lines (decisions recorded with
/// `codemode approve`) and without a last line lacking its newline, and
/// how many approval lines there were. A line is an approval
/// when the resume's reader would take it for one ([`super::record::kind`],
/// which reads the kind from the line's first key) or when it parses as
/// JSON with `"t": "approval"`; a line that is neither is kept as it is,
/// and the resume's reader judges it.
pub(crate) fn without_approvals(journal: &[u8]) -> (Vec<u8>, usize) {
    let is_approval = |line: &[u8]| {
        let line = line.trim_ascii_end();
        let by_kind = std::str::from_utf8(line).ok().and_then(super::record::kind) == Some("approval");
        let by_json = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .is_some_and(|v| v.get("t").and_then(serde_json::Value::as_str) == Some("approval"));
        by_kind || by_json
    };
    let mut dropped = 0;
    let mut kept = Vec::with_capacity(journal.len());
    for line in journal.split_inclusive(|b| *b == b'\n') {
        // A last line without its newline was never committed: left out,
        // so that the state line appended after it stands alone.
        if !line.ends_with(b"\n") {
            continue;
        }
        if is_approval(line) {
            dropped += 1;
        } else {
            kept.extend_from_slice(line);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_approval_line_is_dropped_in_any_spelling_a_resume_reads() {
        let journal = concat!(
            "{\"t\":\"header\"}\n",
            "{\"t\":\"pending\",\"seq\":1}\n",
            "{\"t\":\"approval\",\"seq\":1,\"decision\":\"allow\"}\n",
            "{\"t\":\"decision\",\"seq\":1}\n",
            "{\"t\":\"pending\",\"seq\":2}\n",
            // A duplicate key: not JSON serde accepts, but an approval to
            // the resume's reader (it reads the first key).
            "{\"t\":\"approval\",\"t\":\"x\",\"seq\":2,\"decision\":\"allow\"}\n",
            // Another key first: JSON with `t` an approval.
            "{\"seq\":2,\"t\":\"approval\",\"decision\":\"allow\"}\n",
        );
        let (kept, dropped) = without_approvals(journal.as_bytes());
        let kept = String::from_utf8(kept).unwrap();
        assert_eq!(dropped, 3, "{kept}");
        assert!(!kept.contains("approval"), "{kept}");
        assert!(kept.contains("{\"t\":\"decision\",\"seq\":1}"), "{kept}");
        assert_eq!(kept.lines().count(), 4, "{kept}");
    }

    #[test]
    fn a_run_that_had_not_ended_comes_in_ended_and_an_ended_one_as_it_was() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let old = ws.path().join(".codemode/runs");
        let paused = "{\"t\":\"header\"}\n{\"t\":\"state\",\"state\":\"paused\",\"at\":\"x\"}\n";
        let done = "{\"t\":\"header\"}\n{\"t\":\"state\",\"state\":\"completed\",\"at\":\"x\"}\n";
        // A paused state line cut short: never committed, left out.
        let cut = "{\"t\":\"header\"}\n{\"t\":\"state\",\"state\":\"paused\"}";
        for (id, text) in [("run-p", paused), ("run-c", done), ("run-x", cut)] {
            std::fs::create_dir_all(old.join(id)).unwrap();
            std::fs::write(old.join(id).join(JOURNAL_FILE), text).unwrap();
        }
        let moved = move_legacy_runs(ws.path(), state.path()).unwrap().unwrap();
        assert_eq!((moved.moved, moved.ended), (3, 2), "{moved}");
        let state_of = |id: &str| {
            let mut file = std::fs::File::open(state.path().join(id).join(JOURNAL_FILE)).unwrap();
            super::super::local::last_state(&mut file).unwrap()
        };
        assert_eq!(state_of("run-p"), super::super::RunState::Interrupted);
        assert_eq!(state_of("run-x"), super::super::RunState::Interrupted);
        assert_eq!(state_of("run-c"), super::super::RunState::Completed);
        let cut = std::fs::read_to_string(state.path().join("run-x").join(JOURNAL_FILE)).unwrap();
        assert_eq!(cut.lines().count(), 2, "{cut}");
    }

    #[test]
    fn runs_move_once_and_a_link_is_not_followed() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let to = state.path().join("runs");
        let run = ws.path().join(".codemode/runs/run-1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("receipt.json"), "{}").unwrap();
        std::fs::write(run.join(JOURNAL_FILE), "{\"t\":\"approval\",\"seq\":3}\n").unwrap();
        let moved = move_legacy_runs(ws.path(), &to).unwrap().unwrap();
        assert_eq!((moved.moved, moved.dropped_decisions, moved.ended), (1, 1, 1), "{moved}");
        assert!(moved.to_string().contains("can no longer be resumed"), "{moved}");
        assert!(to.join("run-1/receipt.json").is_file());
        let journal = std::fs::read_to_string(to.join("run-1").join(JOURNAL_FILE)).unwrap();
        assert!(journal.starts_with("{\"t\":\"state\",\"state\":\"interrupted\""), "{journal}");
        assert_eq!(journal.lines().count(), 1, "{journal}");
        assert!(!ws.path().join(".codemode/runs").exists());
        assert_eq!(move_legacy_runs(ws.path(), &to).unwrap(), None, "once");
        // A `.codemode` that is a link is not read through.
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("elsewhere/runs/run-2")).unwrap();
        std::os::unix::fs::symlink(state.path().join("elsewhere"), other.path().join(".codemode")).unwrap();
        assert_eq!(move_legacy_runs(other.path(), &to).unwrap(), None);
        assert!(state.path().join("elsewhere/runs/run-2").is_dir());
    }
}
