//! An MCP server's metadata chooses the authorization server a run's
//! re-authorization goes to. After a login with a pre-registered client
//! (a configured client id and secret), a server that answers 401 and
//! names another authorization server must not receive the client id or
//! secret: the re-authorization fails, naming the new server
//! (docs/SECURITY.md, "Step-up and a moved authorization server").
//! Fixture: tests/fixtures/mcp/moving_auth_server.py.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_support::root;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The fixture server on a free port, logging what reaches its second
/// authorization server to `log`.
fn moving_server(log: &Path) -> (Server, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(root().join("tests/python/.venv/bin/python"))
        .arg(root().join("tests/fixtures/mcp/moving_auth_server.py"))
        .arg(port.to_string())
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    for _ in 0..1500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (server, port);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the fixture server did not listen");
}

#[test]
fn a_pre_registered_client_is_never_sent_to_an_authorization_server_the_mcp_server_moved_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("as2.log");
    let (_server, port) = moving_server(&log);
    let browser = crate::mcp_support::allowing_browser(dir.path());
    let home = dir.path().join("config");
    std::fs::create_dir(&home).unwrap();
    let config = dir.path().join("mcp.json");
    let server = json!({"url": format!("http://127.0.0.1:{port}/mcp"),
        "oauth": {"clientId": "PREREG-ID", "clientSecret": "PRESECRET"}});
    std::fs::write(&config, json!({"mcpServers": {"web": server}}).to_string()).unwrap();
    std::fs::write(
        dir.path().join("p.js"),
        "await tools.call('mcp_connect__web', {}); return (await tools.call('mcp__web__whoami', {})).content;",
    )
    .unwrap();
    let env: [(&str, &Path); 2] = [("XDG_CONFIG_HOME", &home), ("BROWSER", &browser)];
    let config_arg = config.to_str().unwrap();
    let login = crate::cli::spawn(
        &["mcp", "login", "web", "--mcp-config", config_arg, "--timeout", "60"],
        dir.path(),
        &env,
    )
    .wait_with_output()
    .unwrap();
    assert!(login.status.success(), "{}", String::from_utf8_lossy(&login.stderr));
    // The run may log in again (`--login`): the server then names another
    // authorization server.
    let run = crate::cli::spawn(
        &[
            "run",
            "p.js",
            "--json",
            "--journal",
            "off",
            "--posture",
            "full-access",
            "--login",
            "--mcp-config",
            config_arg,
        ],
        dir.path(),
        &env,
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let receipt: Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|_| panic!("no receipt: {stderr}"));
    let whoami =
        receipt["calls"].as_array().unwrap().iter().find(|c| c["tool"] == "mcp__web__whoami").cloned();
    assert_eq!(whoami.as_ref().map(|c| c["status"].clone()), Some(json!("failed")), "{receipt:#}\n{stderr}");
    assert!(stderr.contains("not sent to another authorization server"), "{stderr}");
    assert!(stderr.contains(&format!("http://127.0.0.1:{port}/as2")), "{stderr}");
    // Nothing reached the new authorization server.
    let reached = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(reached.trim().is_empty(), "the new authorization server received: {reached}");
    assert!(!stderr.contains("PRESECRET") && !String::from_utf8_lossy(&run.stdout).contains("PRESECRET"));
}
