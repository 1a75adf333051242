//! Helpers for the MCP tests: where the real servers and the fixture live,
//! pools over a temporary cache, and checks that no process is left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codemode::mcp::{McpConfig, McpPool, PoolOptions};
use codemode::{receipt::Caller, tool::ToolContext};
use serde_json::Value;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `node_modules/@modelcontextprotocol/<name>/dist/index.js`.
pub fn node_server(name: &str) -> String {
    root()
        .join("tests/node/node_modules/@modelcontextprotocol")
        .join(name)
        .join("dist/index.js")
        .to_string_lossy()
        .into_owned()
}

pub fn time_server() -> String {
    root().join("tests/python/.venv/bin/mcp-server-time").to_string_lossy().into_owned()
}

pub fn fixture() -> String {
    root().join("tests/fixtures/mcp/misbehaving.py").to_string_lossy().into_owned()
}

pub fn wrapper() -> String {
    root().join("tests/fixtures/mcp/wrapper.sh").to_string_lossy().into_owned()
}

/// A config from the `mcpServers` object `servers`.
pub fn config(servers: Value) -> McpConfig {
    let text = serde_json::json!({"mcpServers": servers}).to_string();
    McpConfig::parse(&text, Path::new("/"), &|_| None).unwrap()
}

/// [`config`], as a workspace file the user has not trusted: each server's
/// start needs an approval as the posture says.
pub fn untrusted(servers: Value) -> McpConfig {
    McpConfig { trusted: false, ..config(servers) }
}

/// A pool with its schema cache in `cache` and short timeouts.
pub fn pool(servers: Value, cache: &Path) -> McpPool {
    McpPool::new(config(servers), options(cache))
}

pub fn options(cache: &Path) -> PoolOptions {
    PoolOptions {
        cache_dir: Some(cache.to_owned()),
        default_call_timeout: Duration::from_secs(30),
        list_timeout: Duration::from_secs(20),
        ..PoolOptions::default()
    }
}

pub fn cx() -> ToolContext {
    ToolContext::new(root(), "test-run", 1, Caller::Program)
}

/// The pids the fixture processes wrote to `file`.
pub fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Whether `pid` is a live process (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// Asserts every pid ends (polling, at most 10 s: a bound, not a timing).
pub fn assert_gone(pids: &[i32]) {
    assert!(!pids.is_empty(), "no pid was recorded");
    for _ in 0..1000 {
        if pids.iter().all(|&p| !alive(p)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
    panic!("processes left behind: {left:?}");
}

/// A `BROWSER` program in `dir` whose user clicks "allow": it fetches the
/// authorization URL it is given and follows the redirect to codemode's
/// loopback listener (the OAuth fixture servers grant at once).
pub fn allowing_browser(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let python = root().join("tests/python/.venv/bin/python");
    let browser = dir.join("browser");
    std::fs::write(
        &browser,
        format!(
            "#!/bin/sh\nexec {} -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()' \"$1\"\n",
            python.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    browser
}
