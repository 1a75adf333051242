//! Tests of reading MCP config files: transports, variables, secrets, errors, dialects.

use super::variables::expand_vars;
use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/u".into()),
        "TOKEN" => Some("s3cret".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<McpConfig, ConfigError> {
    McpConfig::parse(text, Path::new("/cfg"), &env)
}

#[test]
fn stdio_and_http_servers_with_expansion() {
    let config = parse(
        r#"{"mcpServers": {
            "files": {"command": "node", "args": ["s.js", "${HOME}/notes", "${X:-dflt}"],
                      "env": {"T": "${TOKEN}"}, "cwd": "sub", "timeout_ms": 5000,
                      "startup_timeout_ms": 700, "read_only": true, "autoApprove": []},
            "web": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "typed": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
            "off": {"command": "x", "disabled": true}
        }}"#,
    )
    .unwrap();
    let files = &config.servers["files"];
    assert_eq!(
        files.transport,
        Transport::Stdio {
            command: "node".into(),
            args: vec!["s.js".into(), "/home/u/notes".into(), "dflt".into()],
            env: [("T".to_owned(), "s3cret".to_owned())].into(),
            cwd: Some(PathBuf::from("/cfg/sub")),
        }
    );
    assert_eq!(files.timeout, Some(Duration::from_millis(5000)));
    assert_eq!(files.startup_timeout, Duration::from_millis(700));
    assert!(files.read_only && !files.disabled);
    let web = &config.servers["web"];
    assert_eq!(
        web.transport,
        Transport::Http {
            url: "https://h/mcp".into(),
            headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into()
        }
    );
    assert_eq!(web.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
    assert!(matches!(config.servers["typed"].transport, Transport::Http { .. }));
    assert_eq!(config.enabled().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["files", "typed", "web"]);
}

#[test]
fn roots_are_offered_to_local_servers_only_unless_the_config_says() {
    let config = parse(
        r#"{"mcpServers": {
            "local": {"command": "x"},
            "here": {"url": "http://127.0.0.1:3000/mcp"},
            "named": {"url": "http://localhost:3000/mcp"},
            "remote": {"url": "https://example.com/mcp"},
            "asked": {"url": "https://example.com/mcp", "roots": true},
            "kept": {"command": "x", "roots": false}
        }}"#,
    )
    .unwrap();
    let roots = |name: &str| config.servers[name].roots;
    assert!(roots("local") && roots("here") && roots("named") && roots("asked"));
    assert!(!roots("remote") && !roots("kept"));
}

#[test]
fn other_clients_server_names_load_and_a_zed_extension_server_is_skipped() {
    let config = parse(
        r#"{"context_servers": {
            "time.server": {"command": "t"},
            "my memory": {"command": "m"},
            "github.com/modelcontextprotocol/servers/tree/main/src/fetch": {"command": "f"},
            "postgres": {"source": "extension", "settings": {}}
        }}"#,
    )
    .unwrap();
    let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["github.com/modelcontextprotocol/servers/tree/main/src/fetch", "my memory", "time.server"]
    );
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("server `postgres` is skipped") && warnings[0].contains("Zed extension"));
    for bad in ["", "\\u00e9\\u00e9", "a\\u0007b"] {
        let text = format!(r#"{{"mcpServers": {{"{bad}": {{"command": "x"}}}}}}"#);
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("at least one ASCII letter or digit"), "{bad:?}: {err}");
    }
}

#[test]
fn entries_without_a_known_transport_are_skipped_naming_the_key() {
    let text = r#"{"mcpServers": {
        "nested": {"transport": {"type": "http", "url": "https://h/mcp", "headers": {"A": "b"}}},
        "legacy": {"type": "sse", "url": "https://h/sse"},
        "ws": {"type": "websocket", "url": "wss://h"},
        "bare": {"args": ["x"]},
        "ok": {"command": "node"}
    }}"#;
    let config = parse(text).unwrap();
    assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["ok"]);
    let warnings = config.warnings().join("\n");
    for needle in [
        "server `nested` is skipped",
        "its `transport` is a shape codemode does not read",
        "server `legacy` is skipped: `type` is \"sse\"",
        "does not support",
        "server `ws` is skipped: `type` is \"websocket\"",
        "server `bare` is skipped: it has neither `command`",
    ] {
        assert!(warnings.contains(needle), "{needle}: {warnings}");
    }
    // Skipped, its keys are not also warned about as ignored.
    assert!(config.ignored.is_empty(), "{:?}", config.ignored);
}

#[test]
fn errors_name_the_server_and_the_field() {
    let cases = [
        (
            r#"{"mcpServers": {"zero": {"command": "x", "max_in_flight": 0}}}"#,
            "zero",
            "max_in_flight",
            "at least 1",
        ),
        (r#"{"mcpServers": {"both": {"command": "x", "url": "http://h/mcp"}}}"#, "both", "url", "not both"),
        (
            r#"{"mcpServers": {"a": {"command": "x", "args": ["${NOPE}"]}}}"#,
            "a",
            "args[0]",
            "`NOPE` is not set",
        ),
        (r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE"}}}}"#, "a", "env.K", "unterminated"),
        (r#"{"mcpServers": {"b": {"command": "x", "timeout_ms": "5"}}}"#, "b", "timeout_ms", "invalid type"),
        (r#"{"mcpServers": {"b": {"command": "x", "timeout_ms": 0}}}"#, "b", "timeout_ms", "at least 1"),
        (r#"{"mcpServers": {"r": {"command": "x", "rate": 0}}}"#, "r", "rate", "above 0"),
        (
            r#"{"mcpServers": {"m": {"command": "x", "max_in_flight": 5000}}}"#,
            "m",
            "max_in_flight",
            "above 1024",
        ),
        (
            r#"{"mcpServers": {"r": {"command": "x", "retry": {"attempts": 1}}}}"#,
            "r",
            "retry",
            "from 2 to 10",
        ),
        (r#"{"mcpServers": {"r": {"command": "x", "retry": {"tries": 3}}}}"#, "r", "retry", "unknown key"),
        (r#"{"mcpServers": {"c": {"type": "http", "command": "x"}}}"#, "c", "url", "needs a `url`"),
        (r#"{"mcpServers": {"c": {"url": "ftp://h"}}}"#, "c", "url", "not an http"),
        (
            r#"{"mcpServers": {"d": {"url": "http://h", "headers": {"a b": "v"}}}}"#,
            "d",
            "headers.a b",
            "header name",
        ),
        (
            r#"{"mcpServers": {"d": {"url": "http://h", "headers": {"X": "${NOPE}"}}}}"#,
            "d",
            "headers.X",
            "NOPE",
        ),
        (r#"{"mcpServers": {"e": "node"}}"#, "e", "entry", "invalid type"),
    ];
    for (text, server, field, needle) in cases {
        match parse(text) {
            Err(ConfigError::Field { server: s, field: f, message }) => {
                assert_eq!((s.as_str(), f.as_str()), (server, field), "{text}");
                assert!(message.contains(needle), "{text}: {message}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(matches!(parse("[]"), Err(ConfigError::Syntax { .. })));
    assert!(matches!(parse("{"), Err(ConfigError::Syntax { .. })));
}

#[test]
fn secrets_are_shown_as_written_and_redacted_from_text() {
    let config = parse(
        r#"{"mcpServers": {
            "s": {"command": "${HOME}/bin/srv", "args": ["--token=${TOKEN}", "two words", "${X:-dflt}"],
                  "env": {"T": "${TOKEN}", "LIT": "plain"}, "cwd": "sub"},
            "w": {"url": "https://h/mcp?k=${TOKEN}",
                  "headers": {"Authorization": "Bearer ${TOKEN}", "X-Key": "literal-key-123"}}
        }}"#,
    )
    .unwrap();
    let s = &config.servers["s"];
    assert_eq!(
        s.launch_line(),
        "LIT=plain T=${TOKEN} ${HOME}/bin/srv --token=${TOKEN} 'two words' ${X:-dflt} (in /cfg/sub)"
    );
    assert_eq!(
        s.redact("cannot run /home/u/bin/srv --token=s3cret"),
        "cannot run ${HOME}/bin/srv --token=${TOKEN}"
    );
    // A default written in the file is no secret.
    assert_eq!(s.redact("dflt"), "dflt");
    let w = &config.servers["w"];
    // The headers are part of what an approval shows: a value may carry
    // a variable of the user's environment to the server.
    assert_eq!(
        w.launch_line(),
        "https://h/mcp?k=${TOKEN} (headers Authorization: Bearer ${TOKEN}, X-Key: [redacted])"
    );
    assert_eq!(
        w.shown,
        Transport::Http {
            url: "https://h/mcp?k=${TOKEN}".into(),
            headers: [
                ("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned()),
                ("X-Key".to_owned(), REDACTED.to_owned())
            ]
            .into()
        }
    );
    assert_eq!(w.redact("sent literal-key-123 and s3cret"), format!("sent {REDACTED} and ${{TOKEN}}"));
    let debug = format!("{config:?}");
    assert!(!debug.contains("s3cret") && !debug.contains("literal-key-123"), "{debug}");
    // A bad URL is quoted as written.
    let err = parse(r#"{"mcpServers": {"b": {"url": "${TOKEN}"}}}"#).unwrap_err().to_string();
    assert!(err.contains("${TOKEN}") && !err.contains("s3cret"), "{err}");
}

#[test]
fn loaded_files_are_trusted_and_name_their_source() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.json"), r#"{"mcpServers": {}}"#).unwrap();
    let loaded = McpConfig::load(&dir.path().join("./m.json")).unwrap();
    assert!(loaded.trusted);
    assert_eq!(loaded.source, Some(std::fs::canonicalize(dir.path().join("m.json")).unwrap()));
    assert!(McpConfig::default().trusted && parse(r#"{"mcpServers": {}}"#).unwrap().source.is_none());
}

#[test]
fn a_relative_cwd_has_one_spelling_whatever_the_config_path() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(real.join("sub")).unwrap();
    let text = r#"{"mcpServers": {"s": {"command": "x", "cwd": ".."}}}"#;
    let hashes: Vec<String> = [real.join("sub"), real.join("sub/."), real.join("sub/../sub")]
        .iter()
        .map(|base| McpConfig::parse(text, base, &|_| None).unwrap().servers["s"].launch_hash())
        .collect();
    assert!(hashes.iter().all(|h| h == &hashes[0]), "{hashes:?}");
    let cwd = match &McpConfig::parse(text, &real.join("sub"), &|_| None).unwrap().servers["s"].transport {
        Transport::Stdio { cwd, .. } => cwd.clone().unwrap(),
        Transport::Http { .. } => unreachable!(),
    };
    assert_eq!(cwd, real);
}

#[test]
fn expansion_keeps_plain_dollars_and_the_launch_hash_tracks_the_launch() {
    let inputs = BTreeMap::new();
    let vars = Vars { env: &env, workspace: None, inputs: &inputs };
    assert_eq!(expand_vars("a$b ${X:-} $", &vars).unwrap().0, "a$b  $");
    assert_eq!(expand_vars("$${HOME} ${HOME} $${", &vars).unwrap().0, "${HOME} /home/u ${");
    let config = parse(
        r#"{"mcpServers": {"a": {"command": "x", "timeout_ms": 1},
                                           "b": {"command": "x", "read_only": true},
                                           "c": {"command": "x", "args": ["1"]}}}"#,
    )
    .unwrap();
    let hash = |n: &str| config.servers[n].launch_hash();
    assert_eq!(hash("a"), hash("b"));
    assert_ne!(hash("a"), hash("c"));
    assert_eq!(hash("a").len(), 64);
}

#[test]
fn every_variable_form_expands_and_secrets_keep_their_written_form() {
    let text = r#"{
      // VS Code's shape, with comments and trailing commas
      "inputs": [
        {"type": "promptString", "id": "api-key", "description": "The API key", "password": true},
        {"type": "promptString", "id": "region", "default": "eu"},
      ],
      "servers": {
        "s": {"type": "stdio", "command": "${userHome}/bin/srv",
              "args": ["${workspaceFolder}/data", "${env:TOKEN}", "${input:region}"],
              "env": {"KEY": "${input:api-key}"},},
      },
    }"#;
    let env = |name: &str| match name {
        "HOME" => Some("/home/u".to_owned()),
        "TOKEN" => Some("s3cret".to_owned()),
        "CODEMODE_INPUT_API_KEY" => Some("key-from-env".to_owned()),
        _ => None,
    };
    let config = McpConfig::parse_in(text, Path::new("/cfg"), Some(Path::new("/ws")), &env).unwrap();
    let s = &config.servers["s"];
    assert_eq!(
        s.transport,
        Transport::Stdio {
            command: "/home/u/bin/srv".into(),
            args: vec!["/ws/data".into(), "s3cret".into(), "eu".into()],
            env: [("KEY".to_owned(), "key-from-env".to_owned())].into(),
            cwd: None,
        }
    );
    assert_eq!(s.redact("got key-from-env and s3cret"), "got ${input:api-key} and ${env:TOKEN}");
    assert!(s.launch_line().contains("KEY=${input:api-key}"), "{}", s.launch_line());
    // No workspace, no value for an input: errors that say what to do.
    let err = McpConfig::parse(text, Path::new("/cfg"), &env).unwrap_err().to_string();
    assert!(err.contains("workspaceFolder") && err.contains("args[0]"), "{err}");
    let no_key = |n: &str| if n == "CODEMODE_INPUT_API_KEY" { None } else { env(n) };
    let err = McpConfig::parse_in(text, Path::new("/cfg"), Some(Path::new("/ws")), &no_key)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("input `api-key` (The API key) has no value")
            && err.contains("CODEMODE_INPUT_API_KEY")
            && err.contains("`default`")
            && err.contains("env.KEY"),
        "{err}"
    );
    for (bad, needle) in
        [("${input:nope}", "names no input"), ("${config:x}", "not a variable codemode knows")]
    {
        let text = format!(r#"{{"mcpServers": {{"s": {{"command": "{bad}"}}}}}}"#);
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn env_file_values_reach_the_environment_and_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "# a comment\nAPI_TOKEN=tok-from-file\nSHARED=file\n").unwrap();
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": ".env", "env": {"SHARED": "config"}}}}"#;
    let config = McpConfig::parse(text, dir.path(), &env).unwrap();
    let s = &config.servers["s"];
    let Transport::Stdio { env: vars, .. } = &s.transport else { unreachable!() };
    assert_eq!(vars["API_TOKEN"], "tok-from-file");
    assert_eq!(vars["SHARED"], "config", "`env` wins over the file");
    assert_eq!(s.redact("saw tok-from-file"), format!("saw {REDACTED}"));
    assert!(!s.launch_line().contains("tok-from-file"), "{}", s.launch_line());
    std::fs::write(dir.path().join("bad.env"), "GOOD=1\nnot a line with secret-value\n").unwrap();
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "bad.env"}}}"#;
    let err = McpConfig::parse(text, dir.path(), &env).unwrap_err().to_string();
    assert!(err.contains("envFile") && err.contains("bad.env") && !err.contains("secret-value"), "{err}");
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "missing.env"}}}"#;
    assert!(McpConfig::parse(text, dir.path(), &env).unwrap_err().to_string().contains("missing.env"));
    // The approval shows where the redacted values come from.
    assert!(s.launch_line().ends_with(&format!("(environment from {})", dir.path().join(".env").display())));
}

#[test]
fn an_env_file_reached_through_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/real.env"), "A=1\n").unwrap();
    std::os::unix::fs::symlink("sub/real.env", dir.path().join("link.env")).unwrap();
    std::os::unix::fs::symlink("sub", dir.path().join("linked")).unwrap();
    for written in ["link.env", "linked/real.env"] {
        let text = format!(r#"{{"mcpServers": {{"s": {{"command": "x", "envFile": "{written}"}}}}}}"#);
        let err = McpConfig::parse(&text, dir.path(), &env).unwrap_err().to_string();
        assert!(err.contains("symbolic link") && err.contains("envFile"), "{written}: {err}");
    }
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "sub/real.env"}}}"#;
    assert!(McpConfig::parse(text, dir.path(), &env).is_ok());
}

#[test]
fn an_env_file_in_the_workspace_reached_through_a_linked_folder_is_refused() {
    // The config file in `.cursor/`, its envFile named from the workspace:
    // a link anywhere between the workspace and the file is refused.
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".cursor")).unwrap();
    std::fs::create_dir(ws.join("real")).unwrap();
    std::fs::write(ws.join("real/.env"), "A=1\n").unwrap();
    std::os::unix::fs::symlink("real", ws.join("linked")).unwrap();
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "${workspaceFolder}/linked/.env"}}}"#;
    let err = McpConfig::parse_in(text, &ws.join(".cursor"), Some(&ws), &env).unwrap_err().to_string();
    assert!(err.contains("symbolic link") && err.contains("linked"), "{err}");
    let text = r#"{"mcpServers": {"s": {"command": "x", "envFile": "${workspaceFolder}/real/.env"}}}"#;
    assert!(McpConfig::parse_in(text, &ws.join(".cursor"), Some(&ws), &env).is_ok());
}

#[test]
fn client_keys_map_to_codemode_settings_and_the_rest_is_warned_about() {
    let config = parse(
        r#"{"mcpServers": {
            "cline": {"command": "x", "timeout": 90, "alwaysAllow": ["read"], "disabledTools": ["rm"],
                      "description": "d", "watchPaths": []},
            "wind": {"serverUrl": "https://h/mcp", "description": "e"},
            "zed": {"command": {"path": "z", "args": ["1"]}, "source": "custom"}
        }}"#,
    )
    .unwrap();
    let cline = &config.servers["cline"];
    assert_eq!(cline.timeout, Some(Duration::from_secs(90)));
    assert_eq!(cline.disabled_tools, ["rm".to_owned()].into());
    assert_eq!(cline.auto_approve, ["read".to_owned()].into());
    assert!(
        matches!(&config.servers["wind"].transport, Transport::Http { url, .. } if url == "https://h/mcp")
    );
    assert!(matches!(&config.servers["zed"].transport, Transport::Stdio { command, args, .. }
        if command == "z" && args == &["1"]));
    assert_eq!(config.auto_approve_rules(), ["mcp__cline__read"]);
    // A disabled server with an error is skipped, not an error.
    let skipped =
        parse(r#"{"mcpServers": {"off": {"command": "${NOPE}", "disabled": true}, "on": {"command": "x"}}}"#)
            .unwrap();
    assert!(skipped.servers["off"].disabled && skipped.enabled().count() == 1);
    assert!(parse(r#"{"mcpServers": {"": {"command": "x", "disabled": true}}}"#).is_err());
    let untrusted = McpConfig { trusted: false, ..config.clone() };
    assert!(untrusted.auto_approve_rules().is_empty());
    assert_eq!(
        config.warnings(),
        [
            "MCP config: `description` (servers cline, wind) has no effect in codemode and is ignored",
            "MCP config: `watchPaths` (server cline) has no effect in codemode and is ignored",
        ]
    );
    for (text, field, needle) in [
        (r#"{"mcpServers": {"s": {"command": "x", "timeout": 60000}}}"#, "timeout", "in seconds"),
        (r#"{"mcpServers": {"s": {"command": "x", "timeout": 5, "timeout_ms": 5}}}"#, "timeout", "not both"),
        (r#"{"mcpServers": {"s": {"url": "http://h", "envFile": ".env"}}}"#, "envFile", "stdio"),
        (r#"{"mcpServers": {"---": {"command": "x"}}}"#, "name", "at least one ASCII letter or digit"),
        (
            r#"{"mcpServers": {"s": {"command": "x", "disabledTools": "rm"}}}"#,
            "disabledTools",
            "invalid type",
        ),
    ] {
        match parse(text) {
            Err(ConfigError::Field { field: f, message, .. }) => {
                assert_eq!(f, field, "{text}");
                assert!(message.contains(needle), "{text}: {message}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn an_oauth_client_secret_is_expanded_and_kept_out_of_what_is_shown() {
    for (written, shown) in [("${TOKEN}", "${TOKEN}"), ("literal-secret-9", REDACTED)] {
        let text = format!(
            r#"{{"mcpServers": {{"w": {{"url": "https://h/mcp", "oauth": {{"clientId": "c", "clientSecret": "{written}"}}}}}}}}"#
        );
        let config = parse(&text).unwrap();
        let w = &config.servers["w"];
        let secret = w.oauth.as_ref().unwrap().client_secret.clone().unwrap();
        assert_eq!(secret, if written == "${TOKEN}" { "s3cret" } else { written });
        assert_eq!(w.redact(&format!("token request with {secret}")), format!("token request with {shown}"));
        let debug = format!("{config:?}");
        assert!(!debug.contains(&secret), "{debug}");
    }
}

#[test]
fn a_server_entry_takes_its_call_limits() {
    let config = parse(
        r#"{"mcpServers": {"s": {"command": "x", "max_in_flight": 8, "rate": 2.5,
            "retry": {"attempts": 4, "base_delay_ms": 100, "jitter": false}}}}"#,
    )
    .unwrap();
    let limits = config.servers["s"].call_limits();
    assert_eq!(limits.max_in_flight, Some(8));
    assert_eq!(limits.rate.unwrap().per_second(), 2.5);
    let retry = limits.retry.unwrap();
    assert_eq!((retry.attempts, retry.base_delay, retry.jitter), (4, Duration::from_millis(100), false));
    assert!(config.ignored.is_empty(), "{:?}", config.ignored);
}
