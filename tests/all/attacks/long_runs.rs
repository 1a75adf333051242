//! Cancel requests out of a program's reach (docs/SECURITY.md, "Runs
//! longer than a request"): a run is cancelled from another process through
//! a `cancel` file in its folder in the state folder. A program (of the
//! same workspace, under full access) that knows another run's folder
//! cannot make that file, with the file tools or with bash, so it cannot
//! cancel another run; the run it aimed at ends as it would have.
//!
//! The defence this fails without: the state folder among the hidden
//! folders (engine/confinement.rs: the file tools refuse it, the bash
//! sandbox covers it). With the sandbox off (`[sandbox] profile = "off"`)
//! bash makes the file and the other run is cancelled: the test checks
//! that too, so it shows the file is what cancels.

use std::path::Path;
use std::time::Duration;

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::sandbox::{SandboxProfile, SandboxSettings};
use serde_json::json;

/// Starts `codemode run` of a program that sleeps 3 s then returns
/// `finished`, in `ws`; the child and the folder of its run (once its
/// journal is there).
fn victim(ws: &Path) -> (std::process::Child, std::path::PathBuf) {
    std::fs::write(ws.join("victim.js"), "await tools.bash({command: 'sleep 3'}); return 'finished'")
        .unwrap();
    let mut child = crate::cli::spawn(&["run", "--posture", "full-access", "victim.js"], ws, &[]);
    let runs = crate::common::runs_dir(ws);
    for _ in 0..500 {
        let found = std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("journal.jsonl").exists());
        if let Some(folder) = found {
            return (child, folder);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the victim's journal never appeared in {}", runs.display());
}

/// A program that tries to make `marker` with write, edit and bash.
fn attack(marker: &Path) -> String {
    let target = json!(marker.display().to_string());
    format!(
        "const out = []; \
         try {{ await tools.write({{path: {target}, content: ''}}); out.push('write made it') }} catch (e) {{ out.push('write ' + e.kind) }} \
         const r = await tools.bash({{command: 'touch ' + JSON.stringify({target}) + ' && echo made'}}); \
         out.push('bash ' + r.content.stdout.trim()); return out"
    )
}

#[test]
fn a_program_cannot_cancel_another_run_by_writing_its_cancel_file() {
    let ws = crate::common::workspace();
    let (child, folder) = victim(ws.path());
    let marker = folder.join("cancel");
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(codemode::Policy::full_access())
        .build()
        .unwrap();
    let receipt = engine.execute_blocking(codemode::Program::new(attack(&marker)));
    let tried = receipt.value.to_string();
    assert!(!marker.exists(), "the program made the cancel file: {tried}");
    assert!(!tried.contains("made"), "{tried}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"finished\"");
}

/// The same attack with the bash sandbox off: bash makes the file, and the
/// other run is cancelled within a second; what the defence stops.
#[test]
fn without_the_sandbox_bash_makes_the_cancel_file_and_the_run_is_cancelled() {
    let ws = crate::common::workspace();
    let (child, folder) = victim(ws.path());
    let marker = folder.join("cancel");
    let config = ConfigFile {
        sandbox: SandboxConfig {
            settings: SandboxSettings { profile: SandboxProfile::Off, network: false, host_ipc: false },
            ..SandboxConfig::default()
        },
        ..ConfigFile::with_policy(codemode::Policy::full_access())
    };
    let engine = crate::common::engine_builder().workspace(ws.path()).config(config).build().unwrap();
    let receipt = engine.execute_blocking(codemode::Program::new(attack(&marker)));
    assert!(marker.exists(), "{}", receipt.value);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
}
