//! Workspace trust through the real binary (docs/SECURITY.md, "Workspace
//! trust"): a workspace's own `codemode.toml` restricts but grants nothing
//! until `codemode trust`, and any change revokes the trust.
//!
//! The tests that run issue 11's attacks as they were found are in
//! attacks/round_two.rs, with these fixtures.

use std::io::Write as _;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::cli::spawn;

/// Runs the binary in `ws` with its trust record in `config`.
pub(crate) fn codemode(args: &[&str], stdin: &str, ws: &Path, config: &Path) -> Output {
    let mut child = spawn(args, ws, &[("XDG_CONFIG_HOME", config)]);
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs a program writing `out.txt` and returns what became of the call
/// (`wrote`, or the ToolError kind) and the stderr.
pub(crate) fn try_write(ws: &Path, config: &Path) -> (String, String) {
    let _ = std::fs::remove_file(ws.join("out.txt"));
    let program = "try { await tools.write({path: 'out.txt', content: 'x'}); return 'wrote'; } \
                   catch (e) { return e.kind; }";
    let out = codemode(&["run", "-", "--json", "--approve", "deny"], program, ws, config);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    (receipt["value"].as_str().unwrap_or_default().to_owned(), stderr)
}

#[test]
fn an_untrusted_workspace_policy_grants_nothing_until_trusted_and_a_change_revokes_it() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let marker = ws.path().join("hook-ran");
    std::fs::write(
        ws.path().join("codemode.toml"),
        format!(
            "posture = \"full-access\"\n[rules]\nallow = [\"write\"]\ndeny = [\"bash\"]\n\
             [[hooks.before_call]]\ncommand = [\"sh\", \"-c\", \"touch {}; cat >/dev/null\"]\n",
            marker.display()
        ),
    )
    .unwrap();

    // Untrusted: the posture, the allow rule and the hook are ignored, and
    // the CLI says so in one line naming `codemode trust`.
    let (outcome, stderr) = try_write(ws.path(), config.path());
    assert_eq!(outcome, "denied", "{stderr}");
    assert!(!marker.exists(), "an untrusted file's hook must not run");
    let line = stderr.lines().find(|l| l.contains("is not trusted")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("codemode trust") && line.contains("posture full-access"), "{line}");
    assert!(line.contains("1 allow rule") && line.contains("1 hook"), "{line}");
    // Its deny rule still applies.
    let out = codemode(
        &["run", "-", "--json", "--approve", "allow"],
        "try { await tools.bash({command: 'true'}); return 'ran'; } catch (e) { return e.kind; }",
        ws.path(),
        config.path(),
    );
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["value"], "refused", "{}", String::from_utf8_lossy(&out.stderr));

    // Trusted: applies whole.
    let out = codemode(&["trust", ws.path().to_str().unwrap()], "", ws.path(), config.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("codemode.toml") && said.contains("sha256"), "{said}");
    // It says what the file grants.
    assert!(said.contains("posture full-access") && said.contains("allow write"), "{said}");
    assert!(said.contains("hook runs sh -c touch"), "{said}");
    let (outcome, stderr) = try_write(ws.path(), config.path());
    assert_eq!(outcome, "wrote", "{stderr}");
    assert!(marker.exists(), "a trusted file's hook runs");
    assert!(stderr.contains("(trusted)"), "{stderr}");

    // Listed; a change revokes the trust.
    let out = codemode(&["trust", "--list"], "", ws.path(), config.path());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("trusted "), "{out:?}");
    let mut file = std::fs::OpenOptions::new().append(true).open(ws.path().join("codemode.toml")).unwrap();
    writeln!(file, "# changed").unwrap();
    let (outcome, _) = try_write(ws.path(), config.path());
    assert_eq!(outcome, "denied");
    let out = codemode(&["trust", "--list"], "", ws.path(), config.path());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("changed "), "{out:?}");

    // Revoked.
    codemode(&["trust", ws.path().to_str().unwrap()], "", ws.path(), config.path());
    let out = codemode(&["trust", "--revoke", ws.path().to_str().unwrap()], "", ws.path(), config.path());
    assert!(String::from_utf8_lossy(&out.stdout).contains("revoked"), "{out:?}");
    assert_eq!(try_write(ws.path(), config.path()).0, "denied");
}

#[test]
fn a_policy_named_on_the_command_line_applies_whole_without_trust() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let own = config.path().join("mine.toml");
    std::fs::write(&own, "posture = \"full-access\"\n").unwrap();
    let out = codemode(
        &["run", "-", "--json", "--approve", "deny", "--config", own.to_str().unwrap()],
        "await tools.write({path: 'out.txt', content: 'x'}); return 'wrote';",
        ws.path(),
        config.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = codemode(&["trust", ws.path().to_str().unwrap()], "", ws.path(), config.path());
    assert_eq!(out.status.code(), Some(2), "nothing to trust is a bad invocation");
    assert!(String::from_utf8_lossy(&out.stderr).contains("codemode.toml or .mcp.json"));
}

#[test]
fn trusting_an_mcp_file_shows_each_launch_line_and_what_cannot_be_protected() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("s.js"), "// server\n").unwrap();
    std::fs::write(
        ws.path().join(".mcp.json"),
        r#"{"mcpServers": {"inline": {"command": "node", "args": ["-e", "require('./s.js')"]},
                           "named": {"command": "node", "args": ["s.js"]}}}"#,
    )
    .unwrap();
    let out = codemode(&["trust"], "", ws.path(), config.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("server inline starts without approval: node -e"), "{said}");
    assert!(said.contains("note: server `inline`: `node -e` is given inline code"), "{said}");
    assert!(!said.contains("note: server `named`"), "{said}");
    // The named script is pinned with the file.
    assert!(said.contains("pins s.js (sha256 "), "{said}");
}
