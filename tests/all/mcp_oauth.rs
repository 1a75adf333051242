//! OAuth for HTTP MCP servers, through the binary, against a real
//! OAuth-protected server (tests/fixtures/mcp/oauth_server.py, the MCP
//! Python SDK's authorization server): `codemode mcp login` with a
//! "browser" that follows the authorization server's redirect, runs that
//! use the kept token, refresh (expired, and on a 401), a refused login,
//! logout, and that no token shows in what codemode prints.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_support::root;

/// The fixture server on a free port, killed on drop; its token log.
struct OAuthServer {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl OAuthServer {
    fn start(dir: &Path) -> OAuthServer {
        OAuthServer::start_with_refresh_delay(dir, 0)
    }

    /// [`OAuthServer::start`] with a token endpoint that takes `ms`
    /// milliseconds to answer a refresh.
    fn start_with_refresh_delay(dir: &Path, ms: u64) -> OAuthServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.join("tokens.log");
        let child = std::process::Command::new(root().join("tests/python/.venv/bin/python"))
            .arg(root().join("tests/fixtures/mcp/oauth_server.py"))
            .arg(port.to_string())
            .arg(&log)
            .env("OAUTH_FIXTURE_REFRESH_DELAY_MS", ms.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = OAuthServer { child, port, log };
        for _ in 0..1500 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the OAuth fixture server did not listen on port {port}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Every token issued so far: (grant, access token).
    fn issued(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(g, t)| (g.to_owned(), t.to_owned())))
            .collect()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace with a config naming `servers` (name -> URL), a config
/// folder, and a "browser": a script that fetches the URL it is given and
/// follows redirects, as a browser whose user clicks "allow" would.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        crate::mcp_support::allowing_browser(dir.path());
        std::fs::create_dir(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("p.js"),
            "await tools.call('mcp_connect__web', {}); return (await tools.call('mcp__web__whoami', {})).content;",
        )
        .unwrap();
        Setup { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config_home(&self) -> PathBuf {
        self.path().join("config")
    }

    fn write_config(&self, file: &str, url: &str) -> PathBuf {
        let path = self.path().join(file);
        std::fs::write(&path, json!({"mcpServers": {"web": {"url": url}}}).to_string()).unwrap();
        path
    }

    fn codemode(&self, args: &[&str]) -> Output {
        let browser = self.path().join("browser");
        let home = self.config_home();
        let child =
            crate::cli::spawn(args, self.path(), &[("XDG_CONFIG_HOME", &home), ("BROWSER", &browser)]);
        child.wait_with_output().unwrap()
    }

    fn login(&self, config: &Path) -> Output {
        self.codemode(&["mcp", "login", "web", "--mcp-config", config.to_str().unwrap(), "--timeout", "60"])
    }

    /// `codemode run p.js --json`: (exit code, receipt, all printed text).
    fn run(&self, config: &Path) -> (Option<i32>, Value, String) {
        let out = self.codemode(&[
            "run",
            "p.js",
            "--json",
            "--journal",
            "off",
            "--posture",
            "full-access",
            "--mcp-config",
            config.to_str().unwrap(),
        ]);
        let printed =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let receipt = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("no receipt: {printed}"));
        (out.status.code(), receipt, printed)
    }

    fn token_file(&self, url: &str) -> PathBuf {
        codemode::mcp::oauth::token_path(&self.config_home().join("codemode/oauth"), url)
    }
}

fn edit_credentials(file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut saved["credentials"]);
    std::fs::write(file, saved.to_string()).unwrap();
}

fn access_token(file: &Path) -> String {
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    saved["credentials"]["token_response"]["access_token"].as_str().unwrap().to_owned()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn login_run_refresh_and_logout_against_a_real_oauth_server() {
    let setup = Setup::new();
    let server = OAuthServer::start(setup.path());
    let url = server.url();
    let config = setup.write_config("mcp.json", &url);

    // No login: the run fails at once, naming the command.
    let (code, receipt, printed) = setup.run(&config);
    assert_eq!(code, Some(1), "{printed}");
    assert_eq!(receipt["calls"][0]["status"], "failed", "{printed}");
    let error = receipt["calls"][0]["error"].as_str().unwrap();
    assert!(error.contains("requires authorization: run `codemode mcp login web`"), "{error}");

    // Login: discovery, registration, PKCE, the redirect; the token is kept
    // 0600 in a 0700 folder, in the file of the URL.
    let out = setup.login(&config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let file = setup.token_file(&url);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let issued = server.issued();
    assert_eq!(issued.len(), 1);
    assert_eq!(issued[0].0, "authorization_code");
    assert_eq!(access_token(&file), issued[0].1);
    assert!(!stderr.contains(&issued[0].1), "the login printed the token");

    // A run uses it; another config naming the same URL shares the login.
    for config in [config.clone(), setup.write_config("other.json", &url)] {
        let (code, receipt, printed) = setup.run(&config);
        assert_eq!(code, Some(0), "{printed}");
        assert!(receipt["value"].to_string().contains("client "), "{printed}");
        assert!(!printed.contains(&issued[0].1), "the run printed the token: {printed}");
    }
    assert_eq!(server.issued().len(), 1, "no refresh was needed");

    // The same server under another URL spelling is another login.
    let renamed = setup.write_config("renamed.json", &format!("http://localhost:{}/mcp", server.port));
    let (code, _, printed) = setup.run(&renamed);
    assert_eq!(code, Some(1), "{printed}");
    assert!(printed.contains("codemode mcp login web"), "{printed}");

    // An expired access token is refreshed before use, and the new one kept.
    edit_credentials(&file, |c| c["token_received_at"] = json!(1));
    let (code, _, printed) = setup.run(&config);
    assert_eq!(code, Some(0), "{printed}");
    let issued = server.issued();
    assert_eq!(issued.last().unwrap().0, "refresh_token", "{issued:?}");
    assert_eq!(access_token(&file), issued.last().unwrap().1);
    assert_eq!(mode(&file), 0o600);

    // A token the server refuses (401) is refreshed once and the call retried.
    edit_credentials(&file, |c| c["token_response"]["access_token"] = json!("at-refused-by-the-server"));
    let (code, _, printed) = setup.run(&config);
    assert_eq!(code, Some(0), "{printed}");
    assert_eq!(server.issued().len(), issued.len() + 1);
    assert_eq!(access_token(&file), server.issued().last().unwrap().1);

    // Tokens that are refused and cannot be refreshed: a login is needed,
    // said at once, and neither token appears in what codemode prints.
    edit_credentials(&file, |c| {
        c["token_response"]["access_token"] = json!("at-secret-refused-token-1234");
        c["token_response"]["refresh_token"] = json!("rt-secret-refused-token-5678");
    });
    let (code, receipt, printed) = setup.run(&config);
    assert_eq!(code, Some(1), "{printed}");
    assert!(receipt["calls"][0]["error"].as_str().unwrap().contains("codemode mcp login web"), "{printed}");
    assert!(!printed.contains("secret-refused-token"), "{printed}");

    // Logout removes the file, and says when there was none.
    let out = setup.codemode(&["mcp", "logout", "web", "--mcp-config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed the login for `web`"));
    assert!(!file.exists());
    let out = setup.codemode(&["mcp", "logout", "web", "--mcp-config", config.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("there was no login for `web`"));
}

#[test]
fn login_refuses_a_stdio_server_and_an_unknown_name() {
    let setup = Setup::new();
    let config = setup.path().join("mcp.json");
    std::fs::write(&config, json!({"mcpServers": {"local": {"command": "true"}}}).to_string()).unwrap();
    let out = setup.codemode(&["mcp", "login", "local", "--mcp-config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OAuth logins are for HTTP servers"));
    let out = setup.codemode(&["mcp", "login", "nope", "--mcp-config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no MCP server named `nope`"));
}

/// Two processes refreshing one login at once, against a token endpoint
/// that rotates refresh tokens and answers slowly: they take turns (the
/// login file's lock, held by rmcp from its reload to the save), the
/// second refreshes with the token the first saved, and both runs succeed;
/// the login is kept. Without the lock the second sends the old refresh
/// token, which the server has already dropped, and its run needs a new
/// login.
#[test]
fn two_processes_refreshing_one_login_do_not_lose_it() {
    let setup = Setup::new();
    let server = OAuthServer::start_with_refresh_delay(setup.path(), 1500);
    let url = server.url();
    let config = setup.write_config("mcp.json", &url);
    assert_eq!(setup.login(&config).status.code(), Some(0));
    let file = setup.token_file(&url);
    edit_credentials(&file, |c| c["token_received_at"] = json!(1));
    let (browser, home) = (setup.path().join("browser"), setup.config_home());
    let args = ["run", "p.js", "--json", "--journal", "off", "--posture", "full-access", "--mcp-config"];
    let args: Vec<&str> = args.into_iter().chain([config.to_str().unwrap()]).collect();
    let env = [("XDG_CONFIG_HOME", home.as_path()), ("BROWSER", browser.as_path())];
    let runs: Vec<_> = (0..2).map(|_| crate::cli::spawn(&args, setup.path(), &env)).collect();
    for child in runs {
        let out = child.wait_with_output().unwrap();
        let printed =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{printed}");
    }
    let refreshes = server.issued().iter().filter(|(grant, _)| grant == "refresh_token").count();
    assert_eq!(refreshes, 2, "one after the other: {:?}", server.issued());
    assert_eq!(access_token(&file), server.issued().last().unwrap().1, "the last refresh is kept");
}
