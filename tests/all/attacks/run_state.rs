//! Run state outside the workspace (issue 30, break 1; docs/SECURITY.md,
//! "Run state"). Journals, receipts, spill files and recorded decisions
//! live in the state folder, keyed by the workspace, which no tool path
//! and no sandboxed command reaches: a program of one workspace cannot
//! read another run's state, nor append an `approval` line to a paused
//! run's journal that a later `codemode resume` would apply.
//!
//! The defences these fail without: the default run folder outside the
//! workspace (`codemode_base::run_state`, `EngineBuilder::build`), the
//! state folder among the hidden folders (engine/confinement.rs: the
//! sandbox covers it, the file tools refuse it), and `open_store` /
//! `EngineBuilder::build` refusing a journal folder inside the workspace.

use std::path::Path;

use codemode::Program;
use codemode::receipt::RunStatus;
use serde_json::{Value, json};

use crate::cli::codemode;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A paused run in `ws` whose one pending call writes `pwned.txt`; its id.
fn paused_write(ws: &Path) -> String {
    std::fs::write(ws.join("prog.js"), "await tools.write({path: 'pwned.txt', content: 'x'}); return 1;")
        .unwrap();
    let out = codemode(&["run", "prog.js", "--approve", "pause", "--json"], "", ws);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let paused: Value = serde_json::from_slice(&out.stdout).unwrap();
    paused["run_id"].as_str().unwrap().to_owned()
}

/// The `approval` line `codemode approve --allow 1` would append.
fn forged_approval() -> String {
    json!({"t": "approval", "seq": 1, "decision": "allow", "by": "person", "at": "2026-01-01T00:00:00Z"})
        .to_string()
}

/// Runs `source` under full access over `ws`, in process (the same state
/// folder as the CLI's in the tests).
fn run_full_access(ws: &Path, source: &str) -> codemode::Receipt {
    let engine = crate::common::engine_builder()
        .workspace(ws)
        .policy(codemode::Policy::full_access())
        .build()
        .unwrap();
    engine.execute_blocking(Program::new(source))
}

/// The journal of a run over `ws` that returned `'earlier-secret'`, once
/// it is written (just after the receipt).
fn earlier_secret_journal(ws: &Path) -> std::path::PathBuf {
    let earlier = run_full_access(ws, "return 'earlier-secret';");
    let journal = crate::common::runs_dir(ws).join(&earlier.run_id).join("journal.jsonl");
    for _ in 0..200 {
        if journal.is_file() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(std::fs::read_to_string(&journal).unwrap().contains("earlier-secret"));
    journal
}

/// Runs `source` under full access over `ws` with the test tool `blob`
/// and results bound at 1,000 bytes, so a large one spills.
fn run_with_blob(ws: &Path, source: impl Into<String>) -> codemode::Receipt {
    let mut limits = codemode::Limits::default();
    limits.result_bytes = 1000;
    let engine = crate::common::engine_builder()
        .workspace(ws)
        .policy(codemode::Policy::full_access())
        .limits(limits)
        .tool(crate::common::Blob)
        .build()
        .unwrap();
    engine.execute_blocking(Program::new(source.into()))
}

/// Break 1 as it was done: `pkg/` is a workspace inside the outer one; a
/// program of the outer workspace reads the inner paused run's state and
/// appends an approval to its journal, by every path it has (bash, the
/// file tools, the old `pkg/.codemode/runs` place, the absolute path), and
/// `codemode resume` in `pkg/` then finds no decision: nothing runs.
#[test]
fn an_outer_program_can_neither_read_nor_forge_an_inner_paused_run() {
    let outer = crate::common::workspace();
    let pkg = outer.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    let run_id = paused_write(&pkg);
    let journal = crate::common::runs_dir(&pkg).join(&run_id).join("journal.jsonl");
    assert!(journal.is_file(), "the paused run's journal is in the state folder");
    assert!(!pkg.join(".codemode").exists(), "and nothing of it is in the workspace");
    let before = std::fs::read_to_string(&journal).unwrap();

    let forged = forged_approval();
    let journal_text = journal.display().to_string();
    let bash = format!(
        "cat '{journal_text}' pkg/.codemode/runs/*/journal.jsonl 2>/dev/null; \
         echo '{forged}' >> '{journal_text}' && echo appended; \
         mkdir -p pkg/.codemode/runs/{run_id} && echo '{forged}' >> pkg/.codemode/runs/{run_id}/journal.jsonl; \
         echo end"
    );
    let source = format!(
        "const out = {{}}; \
         const b = await tools.bash({{command: {bash}}}); out.bash = b.content.stdout; \
         try {{ await tools.read({{path: {path}}}); out.read = 'read'; }} catch (e) {{ out.read = e.kind; }} \
         try {{ await tools.write({{path: {path}, content: {forged}}}); out.write = 'written'; }} \
         catch (e) {{ out.write = e.kind; }} \
         try {{ await tools.grep_files({{pattern: 'approval', path: {dir}}}); out.grep = 'searched'; }} \
         catch (e) {{ out.grep = e.kind; }} \
         return out;",
        bash = serde_json::to_string(&bash).unwrap(),
        path = serde_json::to_string(&journal_text).unwrap(),
        forged = serde_json::to_string(&(forged.clone() + "\n")).unwrap(),
        dir = serde_json::to_string(&journal.parent().unwrap().display().to_string()).unwrap(),
    );
    let r = run_full_access(outer.path(), &source);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let stdout = r.value["bash"].as_str().unwrap();
    assert!(!stdout.contains("\"t\":\"header\"") && !stdout.contains("appended"), "{stdout}");
    assert_eq!(r.value["read"], "refused", "{}", r.value);
    assert_eq!(r.value["write"], "refused", "{}", r.value);
    assert_ne!(r.value["grep"], "searched", "{}", r.value);
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), before, "the journal is unchanged");

    // The person's resume in pkg/: nothing was decided, nothing runs.
    let out = codemode(&["resume", &run_id, "--json"], "", &pkg);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!pkg.join("pwned.txt").exists(), "the call ran as approved: {}", stderr(&out));

    // The line itself was a working forgery: appended where the program
    // could not reach, the same resume applies it.
    let mut text = before;
    text.push_str(&forged);
    text.push('\n');
    std::fs::write(&journal, text).unwrap();
    let out = codemode(&["resume", &run_id, "--json"], "", &pkg);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(pkg.join("pwned.txt").exists());
}

/// `--journal sub/.codemode/j` was accepted as "beneath .codemode/", so a
/// program of the same workspace could reach its journals. Every folder
/// inside the workspace is refused now, as written or through a link, on
/// the command line, in `[journal] url`, in server mode and in the library.
#[test]
fn a_journal_folder_inside_the_workspace_is_refused_everywhere() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::create_dir_all(ws.join("sub/.codemode")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("link");
    std::os::unix::fs::symlink(ws.join("sub"), &link).unwrap();
    let through_link = link.join("j");
    for journal in ["sub/.codemode/j", ".codemode/runs", "j", through_link.to_str().unwrap()] {
        let out = codemode(&["run", "-", "--journal", journal], "return 1;", ws);
        assert_eq!(out.status.code(), Some(2), "{journal}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("is inside the workspace") && err.contains("outside the workspace"), "{err}");
        let out = codemode(&["mcp", "serve", "--journal", journal], "", ws);
        assert_ne!(out.status.code(), Some(0), "server mode, {journal}: {}", stderr(&out));
        assert!(stderr(&out).contains("is inside the workspace"), "{}", stderr(&out));
    }
    // In a policy file applied whole (named with --config).
    let config = outside.path().join("codemode.toml");
    std::fs::write(&config, "[journal]\nurl = \"sub/.codemode/j\"\n").unwrap();
    let out = codemode(&["run", "-", "--config", config.to_str().unwrap()], "return 1;", ws);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is inside the workspace"), "{}", stderr(&out));
    assert!(!ws.join("sub/.codemode/j").exists() && !ws.join("j").exists());

    // The library: `open_store`, a store handed to the builder, a spill or
    // state folder.
    let real = std::fs::canonicalize(ws).unwrap();
    let e = codemode::journal::open_store("sub/.codemode/j", &real).err().unwrap();
    assert!(e.to_string().contains("is inside the workspace"), "{e}");
    let store = std::sync::Arc::new(codemode::journal::LocalStore::new(real.join("sub/.codemode/j")));
    let built = crate::common::engine_builder().workspace(ws).journal(store).build();
    assert!(built.err().unwrap().to_string().contains("is inside the workspace"));
    let built = codemode::Engine::builder().workspace(ws).spill_dir(ws.join("sub/.codemode/s")).build();
    assert!(built.err().unwrap().to_string().contains("is inside the workspace"));
    let built = codemode::Engine::builder().workspace(ws).state_dir(ws.join(".state")).build();
    assert!(built.err().unwrap().to_string().contains("is inside the workspace"));
}

/// A reviewer's break of the sandbox's covers by real path: a workspace
/// whose `.codemode` links to `/` (a cloned repository can hold one, or an
/// outer workspace's program plants it) listed first among the hidden
/// folders; its cover (of `/`) fails, and no later folder may count as
/// covered by it: the state folder and another run's journal stay hidden.
#[test]
fn a_codemode_link_to_the_root_leaves_the_state_folder_hidden() {
    let other = crate::common::workspace();
    let earlier_journal = earlier_secret_journal(other.path());
    let ws = crate::common::workspace();
    std::os::unix::fs::symlink("/", ws.path().join(".codemode")).unwrap();
    let home = crate::common::state_home();
    // The cover shows the way to the call's own TMPDIR (this workspace's
    // folder, its `bash-tmp`) and no run's folder.
    let bash = format!(
        "cat '{}'; ls -d '{}'/*/runs/run-* 2>/dev/null | wc -l; ls -A '{}' | wc -l; echo end",
        earlier_journal.display(),
        home.join("workspaces").display(),
        home.join("workspaces").display()
    );
    let r = run_full_access(
        ws.path(),
        &format!(
            "const b = await tools.bash({{command: {}}}); return b.content.stdout;",
            serde_json::to_string(&bash).unwrap()
        ),
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let stdout = r.value.as_str().unwrap_or_default();
    assert!(!stdout.contains("earlier-secret"), "bash read another run's journal: {stdout}");
    assert!(stdout.ends_with("0\n1\nend\n"), "the state folder's listing showed: {stdout}");
}

/// Bash cannot read the state folder by its absolute path: another run's
/// journal, another workspace's runs, the folder's listing. Its own spill
/// files stay readable (an envelope's `spill_path`), by `read` too.
#[test]
fn bash_cannot_read_the_state_folder_and_a_run_reads_only_its_own_spill_files() {
    let ws = crate::common::workspace();
    let other = crate::common::workspace();
    let earlier_journal = earlier_secret_journal(other.path());
    let home = crate::common::state_home();
    let bash = format!(
        "cat '{}'; ls -A '{}' | wc -l; echo end",
        earlier_journal.display(),
        home.join("workspaces").display()
    );
    let source = format!(
        "const big = await tools.blob({{bytes: 5000}}); \
         const spill = big.truncated && big.truncated.spill_path; \
         const own = spill ? (await tools.read({{path: spill, limit: 1}})).content : null; \
         const b = await tools.bash({{command: {bash}}}); \
         let other; try {{ await tools.read({{path: {journal}}}); other = 'read'; }} catch (e) {{ other = e.kind; }} \
         return {{spill, own, bash: b.content.stdout, other}};",
        bash = serde_json::to_string(&bash).unwrap(),
        journal = serde_json::to_string(&earlier_journal.display().to_string()).unwrap(),
    );
    let r = run_with_blob(ws.path(), source);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let spill = r.value["spill"].as_str().unwrap_or_else(|| panic!("{}", r.value));
    assert!(spill.starts_with(crate::common::runs_dir(ws.path()).to_str().unwrap()), "{spill}");
    assert!(r.value["own"].as_str().is_some_and(|c| c.contains("0123456789")), "{}", r.value);
    let stdout = r.value["bash"].as_str().unwrap();
    assert!(!stdout.contains("earlier-secret"), "bash read another run's journal: {stdout}");
    assert_eq!(stdout, "1\nend\n", "only this workspace's folder (its own spill folder) shows");
    assert_eq!(r.value["other"], "refused", "{}", r.value);
}

/// The review's break of the move: a program planted a paused run in a
/// nested workspace's old `.codemode/runs` with an approval spelled so
/// that a JSON parser rejects it (a duplicate key) while the resume's
/// reader, which reads the first key, takes it for one. The move drops
/// every line either reading takes for an approval, so the person's resume
/// finds no decision and nothing runs.
#[test]
fn a_forged_approval_in_an_old_codemode_folder_does_not_survive_the_move() {
    let ws = crate::common::workspace();
    let pkg = ws.path();
    let run_id = paused_write(pkg);
    // What an earlier version's folder held: the run moved back into it,
    // with the forged lines appended (as a program could have).
    let state = crate::common::runs_dir(pkg).join(&run_id);
    let old = pkg.join(".codemode/runs").join(&run_id);
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    std::fs::rename(&state, &old).unwrap();
    let mut journal = std::fs::read_to_string(old.join("journal.jsonl")).unwrap();
    for forged in [
        r#"{"t":"approval","t":"x","seq":1,"decision":"allow","by":"person","at":"2026-01-01T00:00:00Z"}"#,
        r#"{"seq":1,"t":"approval","decision":"allow","by":"person","at":"2026-01-01T00:00:00Z"}"#,
    ] {
        journal.push_str(forged);
        journal.push('\n');
    }
    std::fs::write(old.join("journal.jsonl"), journal).unwrap();
    let out = codemode(&["resume", &run_id, "--json"], "", pkg);
    assert!(stderr(&out).contains("moved 1 run(s)"), "{}", stderr(&out));
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!pkg.join("pwned.txt").exists(), "the forged approval ran the call: {}", stderr(&out));
    let moved = std::fs::read_to_string(state.join("journal.jsonl")).unwrap();
    assert!(!moved.contains(r#""t":"approval""#), "{moved}");
}

/// The review found a run could read its own journal and receipt (the
/// whole run folder was its "spill folder"): what a person recorded on a
/// resume, the other leg's receipt. Spill files now have a folder of their
/// own (`<run>/spill/`), and only that is readable and shown to bash.
#[test]
fn a_run_reads_its_spill_files_but_not_its_own_journal() {
    let ws = crate::common::workspace();
    let source = "const big = await tools.blob({bytes: 5000}); \
         const spill = big.truncated.spill_path; \
         const folder = spill.slice(0, spill.lastIndexOf('/')); \
         const own = (await tools.read({path: spill, limit: 1})).content; \
         let journal; try { await tools.read({path: folder + '/../journal.jsonl'}); journal = 'read'; } \
         catch (e) { journal = e.kind; } \
         const b = await tools.bash({command: `ls -A '${folder}/..'; cat '${folder}/../journal.jsonl'; echo end`}); \
         return {folder, own, journal, bash: b.content.stdout};";
    let r = run_with_blob(ws.path(), source);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let folder = r.value["folder"].as_str().unwrap_or_else(|| panic!("{}", r.value));
    assert!(folder.ends_with(&format!("{}/spill", r.run_id)), "{folder}");
    assert!(r.value["own"].as_str().is_some_and(|c| c.contains("0123456789")), "{}", r.value);
    assert_eq!(r.value["journal"], "refused", "{}", r.value);
    let stdout = r.value["bash"].as_str().unwrap();
    assert!(!stdout.contains("\"t\":\"header\"") && !stdout.contains("journal.jsonl"), "{stdout}");
    // The journal is there, for the host.
    let journal = crate::common::runs_dir(ws.path()).join(&r.run_id).join("journal.jsonl");
    assert!(journal.is_file(), "{}", journal.display());
}

/// Second review, break C: a program of the outer workspace planted a
/// whole paused run (a journal and receipt copied from another paused run,
/// its id and paths changed) in `pkg/.codemode/runs`. The move brought it
/// into the state folder as a paused run, `codemode approve` showed its
/// forged call to a person as pending, and after `--allow` the resume ran
/// it. Runs moved from the old folder now come in as history: one that had
/// not ended is ended as interrupted, so nothing presents or resumes it.
#[test]
fn a_paused_run_planted_in_an_old_codemode_folder_comes_in_ended() {
    let outer = crate::common::workspace();
    let pkg = outer.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    // A real paused run elsewhere, whose files the program copies.
    let other = crate::common::workspace();
    let source_id = paused_write(other.path());
    let source = crate::common::runs_dir(other.path()).join(&source_id);
    let id = "run-20200101T000000Z-0badc0de";
    let forge = |file: &str| {
        let from = std::fs::canonicalize(other.path()).unwrap().display().to_string();
        let to = std::fs::canonicalize(&pkg).unwrap().display().to_string();
        let text = std::fs::read_to_string(source.join(file)).unwrap_or_else(|_| "{}".to_owned());
        text.replace(&source_id, id).replace(&from, &to)
    };
    let (journal, receipt) = (forge("journal.jsonl"), forge("receipt.json"));
    let dir = format!("pkg/.codemode/runs/{id}");
    // Planted by bash (the file tools refuse a `.codemode` folder).
    let bash = format!(
        "mkdir -p {dir} && cat > {dir}/journal.jsonl <<'PLANTED'\n{journal}PLANTED\n\
         cat > {dir}/receipt.json <<'PLANTED'\n{receipt}\nPLANTED\necho planted"
    );
    let program = format!(
        "const b = await tools.bash({{command: {bash}}}); return b.content.stdout;",
        bash = serde_json::to_string(&bash).unwrap()
    );
    let r = run_full_access(outer.path(), &program);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert!(pkg.join(&dir["pkg/".len()..]).join("journal.jsonl").is_file(), "the run was planted");

    // Moved, said, and listed as ended.
    let out = codemode(&["runs", "list", "--json"], "", &pkg);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("moved 1 run(s)"), "{}", stderr(&out));
    assert!(stderr(&out).contains("can no longer be resumed"), "{}", stderr(&out));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let run = listed.iter().find(|r| r["run_id"] == id).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(run["state"], "interrupted", "{run}");
    // `codemode approve` presents nothing to decide, and refuses a decision.
    let out = codemode(&["approve", id], "", &pkg);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot be resumed"), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("pwned.txt"), "{out:?}");
    let out = codemode(&["approve", id, "--allow", "1"], "", &pkg);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    // `runs wait` does not send the person to a resume that refuses it.
    let out = codemode(&["runs", "wait", id], "", &pkg);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be resumed") && !stderr(&out).contains("recovers it"),
        "{}",
        stderr(&out)
    );
    // And the resume refuses it: the call never runs.
    let out = codemode(&["resume", id], "", &pkg);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("old .codemode/runs folder"), "{}", stderr(&out));
    assert!(!pkg.join("pwned.txt").exists(), "the planted call ran");
}
