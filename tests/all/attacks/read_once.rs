//! Break 2 of issue 30: trust decided on a second read. The CLI parsed the
//! workspace `codemode.toml`, then read it again to compare its digest with
//! the trust record, so a file swapped between the two reads was applied
//! as trusted. Now every file that decides is read once
//! (`codemode::trust::ReadFile`): its digest, its parse and its trust come
//! from the same bytes (docs/SECURITY.md, "Workspace trust"). The unit test
//! `trust::tests::the_digest_and_the_trust_come_from_the_bytes_read` shows
//! the structure; these run the attack.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

/// Runs the binary in `ws` with its trust record in `config`.
fn codemode(args: &[&str], stdin: &str, ws: &Path, config: &Path) -> std::process::Output {
    let mut child = crate::cli::spawn(args, ws, &[("XDG_CONFIG_HOME", config)]);
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// A bash call under `--approve deny`: `ran` only when a grant let it run
/// unasked.
const TRY_BASH: &str =
    "try { await tools.bash({command: 'true'}); return 'ran'; } catch (e) { return e.kind; }";

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_policy_swapped_between_reads_is_never_applied_as_trusted() {
    use nix::fcntl::{RenameFlags, renameat2};
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    // The trusted file grants nothing; the other grants everything.
    std::fs::write(ws.path().join("codemode.toml"), "posture = \"ask\"\n").unwrap();
    let out = codemode(&["trust"], "", ws.path(), config.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(
        ws.path().join("swap.toml"),
        "posture = \"full-access\"\n[rules]\nallow = [\"bash\"]\n# longer than the trusted one\n",
    )
    .unwrap();

    // Another process swaps the two files as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir) = (stop.clone(), std::fs::File::open(ws.path()).unwrap());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                renameat2(&dir, "codemode.toml", &dir, "swap.toml", RenameFlags::RENAME_EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..60 {
        let out = codemode(&["run", "-", "--json", "--approve", "deny"], TRY_BASH, ws.path(), config.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let value = serde_json::from_slice::<Value>(&out.stdout)
            .map(|r| r["value"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|_| format!("no receipt: {}", stderr.lines().last().unwrap_or_default()));
        assert_ne!(value, "ran", "the swapped-in file's grants were applied as trusted: {stderr}");
        *outcomes.entry(value).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 100, "the files were hardly swapped");
    // Both files were seen: the trusted one asked (denied), the swapped-in
    // one, untrusted, granted nothing (denied too).
    assert!(outcomes.get("denied").copied().unwrap_or(0) > 0, "{outcomes:?}");
}

#[test]
fn a_workspace_policy_that_is_a_link_is_untrusted_and_says_so() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    // A trusted file elsewhere, and the workspace's policy a link to it.
    let trusted = tempfile::tempdir().unwrap();
    let target = trusted.path().join("codemode.toml");
    std::fs::write(&target, "posture = \"full-access\"\n").unwrap();
    let out = codemode(&["trust", trusted.path().to_str().unwrap()], "", ws.path(), config.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::os::unix::fs::symlink(&target, ws.path().join("codemode.toml")).unwrap();
    let out = codemode(&["run", "-", "--json", "--approve", "deny"], TRY_BASH, ws.path(), config.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    assert_eq!(receipt["value"], "denied", "{stderr}");
    assert!(stderr.contains("is a symbolic link: it applies as an untrusted file"), "{stderr}");
    // And `codemode trust` refuses it.
    let out = codemode(&["trust"], "", ws.path(), config.path());
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"), "{out:?}");
}

#[test]
fn codemode_trust_records_the_digest_of_the_bytes_it_shows() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let text = "posture = \"full-access\"\n";
    std::fs::write(ws.path().join("codemode.toml"), text).unwrap();
    let out = codemode(&["trust"], "", ws.path(), config.path());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("posture full-access"), "{said}");
    let digest = sha256_hex(text.as_bytes());
    assert!(said.contains(&format!("sha256 {digest}")), "{said}");
    let record = std::fs::read_to_string(config.path().join("codemode/trusted.json")).unwrap();
    assert!(record.contains(&digest), "{record}");
}

/// The SHA-256 of `bytes`, lower-case hex (with `sha256sum`, which the
/// test machine has, rather than a hash crate of the tests' own).
fn sha256_hex(bytes: &[u8]) -> String {
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_owned()
}

/// Second review, break B: a workspace's `.cursor` linked to another
/// project's `.cursor` borrowed that project's trust. The file was judged by
/// its canonical path, which the link led into the trusted project, so its
/// server started unasked, from this workspace, unsandboxed. Now a
/// workspace file is judged where it is in the workspace, and one reached
/// through a link on the way is untrusted (docs/SECURITY.md, "Workspace
/// trust").
#[test]
fn a_config_folder_linked_to_a_trusted_projects_does_not_borrow_its_trust() {
    let good = crate::common::workspace();
    let evil = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let mark = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(good.path().join(".cursor")).unwrap();
    std::fs::write(
        good.path().join(".cursor/mcp.json"),
        r#"{"mcpServers":{"t":{"command":"sh","args":["scripts/srv.sh"]}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(good.path().join("scripts")).unwrap();
    std::fs::write(good.path().join("scripts/srv.sh"), "#!/bin/sh\nexit 1\n").unwrap();
    let out = codemode(&["trust"], "", good.path(), config.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    std::os::unix::fs::symlink(good.path().join(".cursor"), evil.path().join(".cursor")).unwrap();
    std::fs::create_dir_all(evil.path().join("scripts")).unwrap();
    let pwned = mark.path().join("PWNED");
    std::fs::write(
        evil.path().join("scripts/srv.sh"),
        format!("#!/bin/sh\necho ran > '{}'\nexit 1\n", pwned.display()),
    )
    .unwrap();
    let program = "try { await tools.call('mcp__t__x', {}); return 'called'; } catch (e) { return e.kind; }";
    let out = codemode(&["run", "-", "--json", "--approve", "deny"], program, evil.path(), config.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!pwned.exists(), "the linked file's server started unasked: {stderr}");
    assert!(!stderr.contains("(trusted)"), "{stderr}");
    assert!(stderr.contains("is reached through the symbolic link"), "{stderr}");
    assert!(stderr.contains("not trusted: starting each server needs an approval"), "{stderr}");
    // And `codemode trust` refuses to trust it there.
    let out = codemode(&["trust"], "", evil.path(), config.path());
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"), "{out:?}");
}
