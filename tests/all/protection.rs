//! Protected and hidden paths (gate step 7, docs/SECURITY.md): what decides
//! later calls cannot be changed by a call, and earlier runs' receipts
//! cannot be read, whatever the posture; an allow rule naming one
//! protection lifts only that one.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

use std::path::Path;

use codemode::config::{ConfigFile, SandboxConfig};
use codemode::{Engine, Policy, Program, policy::Rule, receipt::CallStatus, receipt::RunStatus};
use serde_json::{Value, json};

use crate::common::{Blob, workspace};

pub(crate) fn engine(root: &Path, policy: Policy) -> Engine {
    engine_with(root, ConfigFile::with_policy(policy))
}

fn engine_with(root: &Path, config: ConfigFile) -> Engine {
    crate::common::engine_builder().workspace(root).config(config).tool(Blob).build().unwrap()
}

pub(crate) fn refused(e: &Engine, tool: &str, args: Value) -> String {
    let r = e.call_blocking(tool, &args);
    assert_eq!(r.call.status, CallStatus::Refused, "{tool} {args} should be refused");
    r.call.error.unwrap_or_default()
}

pub(crate) fn executable(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn an_allow_rule_naming_a_protection_lifts_it_for_that_tool_only() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    let mut policy = Policy::full_access();
    policy.rules.allow = vec![Rule::parse("write(.git/**)").unwrap(), Rule::parse("edit(**)").unwrap()];
    let e = engine(&root, policy);
    assert!(e.call_blocking("write", &json!({"path": ".git/config", "content": "[core]\n"})).is_ok());
    // `edit(**)` names no protection: it lifts nothing.
    refused(&e, "edit", json!({"path": ".git/config", "edits": [{"old": "[core]", "new": "[x]"}]}));
    // Hidden .codemode stays hidden.
    refused(&e, "write", json!({"path": ".codemode/x", "content": "x"}));
}

#[test]
fn sandbox_off_needs_full_access_and_every_receipt_says_so() {
    use codemode::sandbox::{SandboxProfile, SandboxSettings};
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let off = SandboxConfig {
        settings: SandboxSettings { profile: SandboxProfile::Off, network: false, host_ipc: false },
        ..SandboxConfig::default()
    };
    let asked = ConfigFile { sandbox: off.clone(), ..ConfigFile::default() };
    let e = crate::common::engine_builder()
        .workspace(&root)
        .config(asked)
        .approver(codemode::approval::AllowApprover)
        .build()
        .unwrap();
    let err = refused(&e, "bash", json!({"command": "touch ran"}));
    assert!(err.contains("sandbox is off") && err.contains("full-access"), "{err}");
    assert!(!root.join("ran").exists());
    let e = engine_with(&root, ConfigFile { sandbox: off, ..ConfigFile::with_policy(Policy::full_access()) });
    let receipt = e.execute_blocking(Program::new("await tools.bash({command: 'touch ran'}); return 1;"));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    assert!(root.join("ran").exists());
    assert!(receipt.warnings.iter().any(|w| w.contains("sandbox is off")), "{:?}", receipt.warnings);
    // A sandboxed engine's receipts carry no such warning.
    let receipt = engine(&root, Policy::full_access()).execute_blocking(Program::new("return 1;"));
    assert!(receipt.warnings.is_empty(), "{:?}", receipt.warnings);
}

#[test]
fn a_workspace_policys_hooks_stay_protected_when_another_policy_is_loaded() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("hooks")).unwrap();
    std::fs::write(root.join("hooks/guard.sh"), ". hooks/lib.sh; exit 0\n").unwrap();
    std::fs::write(root.join("hooks/lib.sh"), "true\n").unwrap();
    std::fs::write(
        root.join("codemode.toml"),
        "[[hooks.before_call]]\nmatch = \"^bash$\"\ncommand = [\"sh\", \"hooks/guard.sh\"]\n",
    )
    .unwrap();
    // This run loads another policy (the host's); a later run may load the
    // workspace's own, whose hook sources hooks/lib.sh.
    let e = engine(&root, Policy::full_access());
    let err = refused(&e, "write", json!({"path": "hooks/lib.sh", "content": "touch /tmp/pwned"}));
    assert!(err.contains("workspace codemode.toml's hook"), "{err}");
}

/// The trust record and the binary that launches the bash sandbox, when
/// they lie inside the workspace (a workspace that is the home folder; a
/// binary built in the repository), through the real CLI.
#[test]
fn the_trust_record_and_the_sandbox_launcher_cannot_be_changed() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    // No trust record yet (a first run): its folder is made and protected
    // before the program could create a forged one.
    let launcher = root.join("bin/codemode");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_codemode"), &launcher).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_codemode"), &launcher).unwrap();
    }
    let program = "const out = [];
        for (const path of ['.config/codemode/trusted.json', 'bin/codemode']) {
          try { await tools.write({path, content: 'x'}); out.push('wrote ' + path); }
          catch (e) { out.push(e.kind); }
        }
        const r = await tools.bash({command: 'echo evil > bin/new && mv bin/new bin/codemode && echo swapped; \
          mkdir -p .config/codemode; echo {} > .config/codemode/trusted.json && echo forged; echo ok'});
        out.push(r.content.stdout.trim());
        return out;";
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        &root,
        &[("XDG_CONFIG_HOME", &root.join(".config")), ("CODEMODE_SANDBOX_LAUNCHER", &launcher)],
    );
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    assert_eq!(receipt["value"], json!(["refused", "refused", "ok"]), "{receipt}");
    assert_eq!(
        std::fs::read(&launcher).unwrap().len(),
        std::fs::metadata(env!("CARGO_BIN_EXE_codemode")).unwrap().len() as usize
    );
    assert!(root.join(".config/codemode").is_dir());
    assert!(!root.join(".config/codemode/trusted.json").exists(), "no record was forged");
}

#[test]
fn a_nested_workspaces_receipts_are_hidden_too() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let nested = root.join("pkg/.codemode/runs/run-x");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(nested.join("receipt.json"), "{\"stdout\": \"SECRET-42\"}").unwrap();
    let e = engine(&root, Policy::full_access());
    refused(&e, "read", json!({"path": "pkg/.codemode/runs/run-x/receipt.json"}));
    refused(
        &e,
        "edit",
        json!({"path": "pkg/.codemode/runs/run-x/receipt.json", "edits": [{"old": "SECRET", "new": "forged"}]}),
    );
    let grep = e.call_blocking("grep_files", &json!({"pattern": "SECRET-42"}));
    assert!(grep.is_ok() && !grep.envelope.unwrap()["content"].to_string().contains("SECRET"));
    let listed = e.call_blocking("file_search", &json!({"query": "*.json", "exclude": []}));
    assert!(!listed.envelope.unwrap()["content"].to_string().contains(".codemode"));
}

#[test]
fn a_codemode_link_inside_the_workspace_does_not_show_its_target() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(root.join("cm-data/runs/run-earlier")).unwrap();
    std::fs::write(root.join("cm-data/runs/run-earlier/receipt.json"), "SECRET-42").unwrap();
    std::os::unix::fs::symlink(root.join("cm-data"), root.join(".codemode")).unwrap();
    let e = engine(&root, Policy::full_access());
    refused(&e, "read", json!({"path": "cm-data/runs/run-earlier/receipt.json"}));
    let grep = e.call_blocking("grep_files", &json!({"pattern": "SECRET-42"}));
    assert!(!grep.envelope.unwrap()["content"].to_string().contains("SECRET"));
    // Receipts go to the state folder, not through the link.
    let receipt =
        e.execute_blocking(Program::new("return (await tools.blob({bytes: 200000})).content.length;"));
    let saved = e.save_receipt(&receipt).unwrap();
    assert!(saved.starts_with(crate::common::runs_dir(&root)), "{}", saved.display());
    assert!(!root.join("cm-data/runs").join(&receipt.run_id).exists());
}

/// A hook reached through a link inside the workspace runs the file that
/// is protected: the link is resolved once, so pointing it elsewhere later
/// changes nothing.
#[test]
fn a_hook_behind_a_link_runs_the_protected_file() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("real-hooks")).unwrap();
    executable(&root.join("real-hooks/guard.sh"), "cat > /dev/null; exit 0");
    std::fs::create_dir(root.join("evil")).unwrap();
    executable(&root.join("evil/guard.sh"), "cat > /dev/null; touch ran-evil; exit 0");
    std::os::unix::fs::symlink(root.join("real-hooks"), root.join("hooks")).unwrap();
    let config = root.join("policy.toml");
    std::fs::write(&config, "posture = \"full-access\"\n[[hooks.before_call]]\nmatch = \"^read$\"\ncommand = [\"sh\", \"hooks/guard.sh\"]\n").unwrap();
    let e = engine_with(&root, ConfigFile::load(&config).unwrap());
    // The program repoints the link (as bash could), then calls read.
    std::fs::remove_file(root.join("hooks")).unwrap();
    std::os::unix::fs::symlink(root.join("evil"), root.join("hooks")).unwrap();
    assert!(e.call_blocking("read", &json!({"path": "a.txt"})).is_ok());
    assert!(!root.join("ran-evil").exists(), "the hook ran the file the link points to now");
    refused(&e, "write", json!({"path": "real-hooks/guard.sh", "content": "x"}));
}

/// The sandbox launcher named through a link in the workspace is resolved
/// once: a program that points the link at its own script does not get
/// the next bash call run unconfined.
#[test]
fn a_launcher_behind_a_link_cannot_be_swapped() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let link = root.join("cm");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_codemode"), &link).unwrap();
    let program = "await tools.bash({command: 'printf \"#!/bin/sh\\\\ntouch escaped\\\\n\" > evil; chmod +x evil; rm cm; ln -s evil cm'});
        const r = await tools.bash({command: 'echo second'});
        return [r.content.stdout.trim(), r.metadata.sandbox.profile];";
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        &root,
        &[("CODEMODE_SANDBOX_LAUNCHER", &link)],
    );
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    assert_eq!(receipt["value"], json!(["second", "workspace-write"]), "{receipt}");
    assert!(!root.join("escaped").exists(), "the swapped launcher ran");
}
