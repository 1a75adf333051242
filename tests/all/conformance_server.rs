//! The official MCP conformance suite's server scenarios against
//! `codemode mcp serve --http 127.0.0.1:0`: the suite plays the client. A
//! scenario passes when the suite reports no failed check, except the
//! checks it marks untestable because they need the suite's own diagnostic
//! tools (`test_missing_capability`, ...), which a server with its own
//! tools does not have; each test names those it expects, so any other
//! failure fails it. docs/SERVE.md ("Conformance") lists which other
//! server scenarios apply and why the rest do not.

use std::process::Command;

use serde_json::Value;

use crate::conformance::{checks, suite, tail};
use crate::serve_http::Served;

/// Runs server `scenario` of the suite `line` (`conformance-0.1` for
/// 2025-11-25, `conformance-0.2` for 2026-07-28) against a fresh server and
/// panics unless every check passed but the `untestable` ones.
fn scenario(line: &str, scenario: &str, untestable: &[&str]) {
    let Some((node, entry)) = suite(line) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP conformance suite is not installed under CI: .ci/run runs `npm ci --prefix tests/conformance`"
        );
        eprintln!(
            "\n*** SKIPPED conformance server {line} {scenario}: `npm ci --prefix tests/conformance` installs the suite ***\n"
        );
        return;
    };
    let ws = crate::common::workspace();
    let served = Served::start(&["--http", "127.0.0.1:0"], ws.path(), &[]);
    let work = tempfile::tempdir().unwrap();
    let output = Command::new(&node)
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(&entry)
        .args(["server", "--url", &served.url, "--scenario", scenario, "--output-dir"])
        .arg(work.path().join("results"))
        .current_dir(work.path())
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    let checks = checks(work.path());
    let failed: Vec<&Value> = checks.iter().filter(|c| c["status"] == "FAILURE").collect();
    let unexpected: Vec<String> = failed
        .iter()
        .filter(|c| {
            let id = c["id"].as_str().unwrap_or_default();
            !(untestable.contains(&id) && c["details"]["untestable"] == true)
        })
        .map(|c| format!("{}: {} {}", c["id"], c["description"], c["errorMessage"]))
        .collect();
    let passed = checks.iter().filter(|c| c["status"] == "SUCCESS").count();
    assert!(
        unexpected.is_empty() && passed > 0,
        "conformance server {line} {scenario}: {passed} passed, failed:\n{}\n--- suite output (tail) ---\n{}\n--- codemode stderr ---\n{}",
        unexpected.join("\n"),
        tail(&stdout, 3000),
        served.stderr(),
    );
    let seen: Vec<&str> = failed.iter().filter_map(|c| c["id"].as_str()).collect();
    for id in untestable {
        assert!(seen.contains(id), "{scenario}: {id} was expected untestable but passed: update the list");
    }
}

// 2025-11-25 (suite 0.1).

#[test]
fn server_initialize() {
    scenario("conformance-0.1", "server-initialize", &[]);
}

#[test]
fn ping() {
    scenario("conformance-0.1", "ping", &[]);
}

#[test]
fn dns_rebinding_protection() {
    scenario("conformance-0.1", "dns-rebinding-protection", &[]);
}

#[test]
fn tools_list() {
    scenario("conformance-0.1", "tools-list", &[]);
}

#[test]
fn server_sse_polling() {
    scenario("conformance-0.1", "server-sse-polling", &[]);
}

#[test]
fn server_sse_multiple_streams() {
    scenario("conformance-0.1", "server-sse-multiple-streams", &[]);
}

// 2026-07-28 (suite 0.2).

#[test]
fn modern_server_initialize() {
    scenario("conformance-0.2", "server-initialize", &[]);
}

#[test]
fn modern_ping() {
    scenario("conformance-0.2", "ping", &[]);
}

#[test]
fn modern_dns_rebinding_protection() {
    scenario("conformance-0.2", "dns-rebinding-protection", &[]);
}

#[test]
fn server_stateless() {
    // These four need the suite's diagnostic tools.
    let untestable = [
        "sep-2575-server-rejects-undeclared-capability",
        "sep-2575-missing-capability-http-400",
        "sep-2575-http-server-no-independent-requests-on-stream",
        "sep-2575-server-no-log-without-loglevel",
    ];
    scenario("conformance-0.2", "server-stateless", &untestable);
}

#[test]
fn http_header_validation() {
    scenario("conformance-0.2", "http-header-validation", &[]);
}

#[test]
fn server_session_lifecycle() {
    scenario("conformance-0.2", "server-session-lifecycle", &[]);
}

#[test]
fn modern_tools_list() {
    scenario("conformance-0.2", "tools-list", &[]);
}

#[test]
fn modern_server_sse_multiple_streams() {
    scenario("conformance-0.2", "server-sse-multiple-streams", &[]);
}
