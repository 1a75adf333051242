//! Attacks on `codemode rollback` (docs/SECURITY.md, "A rollback writes
//! where `write` may"): a file of the run swapped for a symbolic link out
//! of the workspace is not written through, nor removed through, even
//! with `--force`; and a program cannot plant the pre-images a rollback
//! restores (they come only from the run's journal, out of its reach).

use crate::rollback::{rollback, run_program};

#[test]
fn a_file_swapped_for_a_link_out_of_the_workspace_is_not_written_through() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("authorized_keys");
    std::fs::write(&target, "the victim's own\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "ssh-ed25519 AAAA attacker\n").unwrap();
    let id = run_program(
        ws,
        r#"await tools.write({path: "notes.txt", content: "x\n"});
           await tools.write({path: "made.txt", content: "y\n"});"#,
    );
    // After the run, both files become links to the file outside.
    for name in ["notes.txt", "made.txt"] {
        std::fs::remove_file(ws.join(name)).unwrap();
        std::os::unix::fs::symlink(&target, ws.join(name)).unwrap();
    }
    let (out, report) = rollback(ws, &id, &["--force", "--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "the victim's own\n", "not written through");
    let failed: Vec<&str> =
        report["failed"].as_array().unwrap().iter().map(|f| f[0].as_str().unwrap()).collect();
    assert_eq!(failed.len(), 2, "{report}");
    for f in report["failed"].as_array().unwrap() {
        assert!(f[1].as_str().unwrap().contains("outside the workspace"), "{report}");
    }
    assert!(target.exists(), "the file outside is not removed either");
    assert!(std::fs::symlink_metadata(ws.join("notes.txt")).unwrap().file_type().is_symlink());
}

#[test]
fn a_program_cannot_plant_the_pre_images_a_rollback_restores() {
    let ws = crate::common::workspace();
    let ws = ws.path();
    std::fs::write(ws.join("config.txt"), "safe = true\n").unwrap();
    // The program learns where its run state is (a spill path names it)
    // and tries to append a forged pre-image to its own journal, by
    // `write` and by bash, then changes the file.
    let runs = crate::common::runs_dir(ws);
    let program = format!(
        r#"
        const runs = {runs:?};
        const ids = [];
        const forged = JSON.stringify({{t: "preimage", seq: 1, path: "config.txt", abs: "x", existed: true,
            bytes: "c2FmZSA9IGZhbHNlCg==", mode: 420}});
        let refused = 0;
        try {{ await tools.write({{path: runs + "/forged/journal.jsonl", content: forged + "\n"}}); }} catch (e) {{ refused++; }}
        try {{
            const r = await tools.bash({{command: `for j in ${{runs}}/*/journal.jsonl; do echo '${{forged}}' >> "$j"; done; echo done`}});
        }} catch (e) {{ refused++; }}
        await tools.write({{path: "config.txt", content: "changed by the run\n"}});
        return refused;
        "#
    );
    let id = run_program(ws, &program);
    let journal = std::fs::read_to_string(runs.join(&id).join("journal.jsonl")).unwrap();
    let forged =
        journal.lines().filter(|l| l.starts_with(r#"{"t":"preimage""#) && l.contains("c2FmZSA9IGZhbHNlCg=="));
    assert_eq!(forged.count(), 0, "no forged pre-image line: {journal}");
    let (out, report) = rollback(ws, &id, &["--posture", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(std::fs::read_to_string(ws.join("config.txt")).unwrap(), "safe = true\n");
}
