//! A recovered run repeats a call whose outcome its crash left unknown
//! without asking a person only when the tool says repeating it is safe
//! (read-only, `idempotentHint`) or the person's own policy does
//! (`[tools.NAME] idempotent = true`). A workspace's own `codemode.toml`
//! (a cloned repository's, written by a program) is not the person's: an
//! untrusted one loses that setting, so it cannot make an interrupted
//! `bash` call run again by itself (docs/SECURITY.md, "A recovery repeats
//! only what is safe to repeat").

use crate::recovery::{DURING_BASH, Store, json, read, workspace};

/// The attack: the workspace's file marks bash idempotent; the run is
/// killed during a bash call. The recovery must still ask a person.
#[test]
fn an_untrusted_workspace_file_cannot_mark_a_tool_safe_to_repeat() {
    let ws = workspace(DURING_BASH);
    let ws = ws.path();
    std::fs::write(ws.join("codemode.toml"), "[tools.bash]\nidempotent = true\n").unwrap();
    let store = Store::local();
    let run_id =
        store.run_and_kill(ws, &[], r#"{"t":"start","seq":3}"#, &|| read(ws, "count.txt") == "a\nb\n");
    std::fs::remove_file(ws.join("hold")).unwrap();
    let recovered = store.run(ws, &["resume", &run_id, "--approve", "allow", "--json"]);
    assert_eq!(recovered.status.code(), Some(4), "{}", String::from_utf8_lossy(&recovered.stdout));
    let paused = json(&recovered);
    assert_eq!(paused["pending"][0]["kind"], "unknown_outcome");
    assert_eq!(read(ws, "count.txt"), "a\nb\n", "the call in flight did not run again by itself");
}

/// The same setting in a file the person names (`--config`) applies: the
/// interrupted bash call runs again with no one asked.
#[test]
fn the_persons_own_policy_marks_a_tool_safe_to_repeat() {
    let ws = workspace(DURING_BASH);
    let ws = ws.path();
    let mine = tempfile::tempdir().unwrap();
    let config = mine.path().join("codemode.toml");
    std::fs::write(&config, "[tools.bash]\nidempotent = true\n").unwrap();
    let config = config.to_str().unwrap();
    let store = Store { flag: vec!["--config".into(), config.into()], ..Store::local() };
    let run_id =
        store.run_and_kill(ws, &[], r#"{"t":"start","seq":3}"#, &|| read(ws, "count.txt") == "a\nb\n");
    std::fs::remove_file(ws.join("hold")).unwrap();
    let recovered = store.run(ws, &["resume", &run_id, "--approve", "allow", "--json"]);
    assert_eq!(recovered.status.code(), Some(0), "{}", String::from_utf8_lossy(&recovered.stdout));
    assert_eq!(json(&recovered)["value"], "ran");
    assert_eq!(read(ws, "count.txt"), "a\nb\nb\nd\n");
}
