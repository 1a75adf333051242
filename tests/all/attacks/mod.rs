//! The attack suite: every way a program was once found to decide a later
//! call, read run state or a secret, or act beyond what a person approved,
//! run as the attack was, each with the defence that stops it
//! (docs/SECURITY.md names the structural reason each holds). A test here
//! must fail when its defence is taken out.
//!
//! One file per defence; round three's breaks (issue 30) and round two's
//! (issue 11) side by side.

mod approval_binding;
mod batch_approvals;
mod devices_elsewhere;
mod git_dir;
mod hostile_journal;
mod keyrings;
mod left_behind_sweep;
mod long_runs;
mod mount_swap;
mod moved_authorization_server;
mod mqueue;
mod path_spelling;
mod pinned_commands;
mod questions;
mod read_once;
mod recovery;
mod retention;
mod retries;
mod review_33;
mod review_35;
mod review_four;
mod rewritable_links;
mod rollback;
mod round_two;
mod run_state;
mod sandbox_writable;
mod secrets;
mod serve_grants;
mod serve_grants_review;
mod server_env;
mod server_prestart;
mod shared_network;
mod timeout_before_session;

/// Runs the binary with `args` in `ws`, the program on stdin and the trust
/// record in `config`; the receipt's value and the stderr.
fn run(
    args: &[&str],
    program: &str,
    ws: &std::path::Path,
    config: &std::path::Path,
) -> (serde_json::Value, String) {
    use std::io::Write as _;
    let mut child = crate::cli::spawn(args, ws, &[("XDG_CONFIG_HOME", config)]);
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let receipt: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    (receipt["value"].clone(), stderr)
}

/// A launcher spec (`LaunchSpec` as JSON) for `command` in `ws`
/// (`workspace-write`, no network, nothing protected or hidden), with the
/// private temporary folder `tmp` and the launcher's parent `parent`.
fn launcher_spec(
    command: &str,
    ws: &std::path::Path,
    tmp: &std::path::Path,
    parent: u64,
) -> serde_json::Value {
    serde_json::json!({
        "command": command,
        "workspace": ws.canonicalize().unwrap(),
        "profile": "workspace-write",
        "network": false,
        "protected": [],
        "hidden": [],
        "spill": null,
        "tmpdir": tmp.canonicalize().unwrap(),
        "parent": parent,
    })
}

/// Runs the launcher with `command` (in a fresh workspace) in a mount
/// namespace of its own, after the shell `setup` (which gets `$1`,
/// `after` its cleanup; both may use `$1` = `point`) has made the host's
/// mounts the test needs there; the host's own mounts are not changed.
/// The launcher is started by that shell, its parent. Returns the
/// command's stdout after the sandbox's header line.
fn launch_after_mounts(setup: &str, after: &str, point: &std::path::Path, command: &str) -> String {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let spec = launcher_spec(command, ws.path(), tmp.path(), 999_999_999);
    let script = format!(
        "{setup} || exit 99\nspec=$(printf '%s' \"$3\" | sed \"s/999999999/$$/\")\n\
         printf '%08x%s' \"${{#spec}}\" \"$spec\" | \"$2\" __sandbox-exec {protocol} spec-on-stdin\n\
         status=$?; {after}; exit $status",
        protocol = codemode::sandbox::launcher::PROTOCOL
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(point)
        .arg(env!("CARGO_BIN_EXE_codemode"))
        .arg(spec.to_string())
        .output()
        .expect("unshare (util-linux) runs");
    assert_ne!(
        out.status.code(),
        Some(99),
        "the test's mounts failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (header, said) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(header.contains("\"sandbox\""), "{header}");
    said.to_owned()
}
