//! What a newcomer and an MCP host meet on the command line, through the
//! real binary (issue 32, items 8 and 11): the bound of the printed value
//! (`--max-value`, `[limits] max_value`, exit 6 when cut), `-q` and `-v`,
//! `call TOOL -`, shell completions and man pages, the sample policy that
//! `examples/` does not apply, and `mcp serve` refusing `/` or the home
//! folder as an implicit workspace and skipping its own entry in the
//! workspace's MCP file.

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::cli::{codemode, spawn};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A program returning an object of about 20 KB, over the 16 KiB default.
const BIG: &str = r#"return {a: "y".repeat(20000), n: 1};"#;

#[test]
fn a_value_over_its_bound_exits_6_and_max_value_raises_the_bound() {
    let ws = crate::common::workspace();
    // Cut: stdout is the kept prefix as a JSON string, stderr says so and
    // names the flag and the key, and the exit code is 6, not 0.
    let out = codemode(&["run", "-"], BIG, ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    let prefix: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(prefix.as_str().map(str::len), Some(16 << 10));
    assert!(err.contains("the value was cut (exit 6)"), "{err}");
    assert!(err.contains("--max-value SIZE / [limits] max_value"), "{err}");
    // --json says it too: the receipt's value_truncated, and exit 6.
    let out = codemode(&["run", "-", "--json"], BIG, ws.path());
    assert_eq!(out.status.code(), Some(6));
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["status"], "completed");
    assert!(receipt["value_truncated"]["original_bytes"].as_u64() > Some(20000), "{receipt}");

    // The flag raises the bound: the whole value, exit 0.
    let out = codemode(&["run", "-", "--max-value", "1MiB"], BIG, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["a"].as_str().map(str::len), Some(20000));
    assert_eq!(value["n"], 1);

    // So does `[limits] max_value`, and the flag wins over it.
    let policy = ws.path().join("mine.toml");
    std::fs::write(&policy, "[limits]\nmax_value = \"64KiB\"\n").unwrap();
    let config = policy.to_str().unwrap();
    let out = codemode(&["run", "-", "--config", config], BIG, ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = codemode(&["run", "-", "--config", config, "--max-value", "1KiB"], BIG, ws.path());
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));

    // A workspace's own codemode.toml, untrusted, may lower it, not raise it.
    std::fs::write(ws.path().join("codemode.toml"), "[limits]\nmax_value = \"1MiB\"\n").unwrap();
    let out = codemode(&["run", "-"], BIG, ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("[limits] max_value above the default"), "{err}");
    std::fs::remove_file(ws.path().join("codemode.toml")).unwrap();

    // Bad values name the range, before anything runs.
    let out = codemode(&["run", "-", "--max-value", "512"], BIG, ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("1KiB to 1GiB"), "{}", text(&out.stderr));
    std::fs::write(&policy, "[limits]\nmax_value = \"huge\"\n").unwrap();
    let out = codemode(&["run", "-", "--config", config], BIG, ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`limits.max_value`: `huge`"), "{}", text(&out.stderr));
}

#[test]
fn quiet_drops_the_summary_and_verbose_adds_the_debug_log() {
    let ws = crate::common::workspace();
    let out = codemode(&["-q", "run", "-"], "return 42;", ws.path());
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(0), "42\n".to_owned()));
    assert_eq!(text(&out.stderr), "", "nothing on stderr with -q");
    // After the command too (a global flag), and a failure still says why,
    // in one line.
    let out = codemode(&["run", "-", "--quiet"], "throw new Error('broken on purpose');", ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("codemode: failed: ") && err.contains("broken on purpose"), "{err}");
    // A cut value is still said.
    let out = codemode(&["-q", "run", "-"], BIG, ws.path());
    assert_eq!(out.status.code(), Some(6));
    assert!(text(&out.stderr).contains("the value was cut"), "{}", text(&out.stderr));
    // Without -q the summary is there.
    let out = codemode(&["run", "-"], "return 42;", ws.path());
    assert!(text(&out.stderr).contains("completed in"), "{}", text(&out.stderr));

    // -v: the library's debug lines (here the MCP server's), absent without.
    let debug = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["mcp", "serve", "--workspace", ws.path().to_str().unwrap()]);
        let mut child = spawn(&args, ws.path(), &[]);
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        writeln!(child.stdin.take().unwrap(), "{initialize}").unwrap();
        let out = child.wait_with_output().unwrap();
        text(&out.stderr)
    };
    assert!(debug(&["-v"]).contains("DEBUG"), "-v shows debug lines");
    assert!(!debug(&[]).contains("DEBUG"));
    assert!(!debug(&["-q"]).contains("serving MCP"), "-q drops the notice");

    let out = codemode(&["-q", "-v", "tools"], "", ws.path());
    assert_eq!(out.status.code(), Some(2), "-q and -v conflict");
}

#[test]
fn call_with_a_dash_reads_the_arguments_from_stdin() {
    let ws = crate::common::workspace();
    let out = codemode(
        &["call", "read", "-", "--approve", "deny"],
        r#"{"path": "a.txt", "format": "text"}"#,
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["content"], "alpha\nbeta\ngamma\n", "{envelope}");

    let out = codemode(&["call", "read", "-"], "{not json", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the arguments read from stdin are not JSON"),
        "{}",
        text(&out.stderr)
    );
    let out = codemode(&["call", "read", "-"], "[1]", ws.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("must be a JSON object"), "{}", text(&out.stderr));
}

#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    let ws = crate::common::workspace();
    let out = codemode(&["completions", "bash"], "", ws.path());
    assert_eq!(out.status.code(), Some(0));
    let bash = text(&out.stdout);
    assert!(
        bash.contains("_codemode()") && bash.contains("--max-value") && bash.contains("serve"),
        "{bash:.300}"
    );
    let out = codemode(&["completions", "zsh"], "", ws.path());
    assert!(text(&out.stdout).starts_with("#compdef codemode"), "{:.100}", text(&out.stdout));
    let out = codemode(&["completions", "tcsh"], "", ws.path());
    assert_eq!(out.status.code(), Some(2), "an unknown shell is refused");
    assert!(text(&out.stderr).contains("bash"), "the shells are listed: {}", text(&out.stderr));

    let out = codemode(&["man"], "", ws.path());
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    assert!(page.contains(".TH codemode 1") && page.contains("completions"), "{page:.300}");
    let dir = ws.path().join("man1");
    let out = codemode(&["man", "--dir", dir.to_str().unwrap()], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for page in ["codemode.1", "codemode-run.1", "codemode-mcp-serve.1"] {
        let roff = std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(roff.contains(".TH"), "{page}");
    }
}

#[test]
fn running_from_examples_applies_no_sample_policy() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    assert!(examples.join("codemode.sample.toml").is_file());
    assert!(
        !examples.join("codemode.toml").exists(),
        "a codemode.toml in examples/ would be the workspace policy"
    );
    let out = codemode(&["tools", "--json"], "", &examples);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("policy") && !err.contains("codemode.toml"), "{err}");
}

#[test]
fn serve_refuses_root_or_home_as_an_implicit_workspace() {
    // Started in / without --workspace, as MCP hosts often do.
    let out = codemode(&["mcp", "serve"], "", Path::new("/"));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the root folder /") && err.contains("--workspace"), "{err}");
    assert!(!err.contains("serving MCP"), "{err}");

    // Started in the home folder.
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn(&["mcp", "serve"], home.path(), &[("HOME", home.path())]);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the home folder") && err.contains("\"cwd\""), "{err}");

    // Named, the same folder is served: the refusal is of a workspace
    // nobody chose.
    let ws = home.path().to_str().unwrap();
    let mut child = spawn(&["mcp", "serve", "--workspace", ws], home.path(), &[("HOME", home.path())]);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(text(&out.stderr).contains("serving MCP on stdin/stdout"), "{}", text(&out.stderr));
}

#[test]
fn serve_skips_its_own_entry_in_the_workspace_mcp_file() {
    let ws = crate::common::workspace();
    let me = env!("CARGO_BIN_EXE_codemode");
    let file = serde_json::json!({"mcpServers": {
        "itself": {"command": me, "args": ["mcp", "serve"]},
        "by-name": {"command": "codemode", "args": ["mcp", "serve", "--workspace", "."]},
        "elsewhere": {"command": "codemode", "args": ["mcp", "serve", "--workspace", "/"]},
    }});
    std::fs::write(ws.path().join(".mcp.json"), file.to_string()).unwrap();

    // `mcp list` lists only the codemode serving another folder.
    let out = codemode(&["mcp", "list", "--json"], "", ws.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["elsewhere"], "{listed}");
    for name in ["itself", "by-name"] {
        assert!(
            err.contains(&format!(
                "server `{name}` is skipped: it is `codemode mcp serve` over this same workspace"
            )),
            "{err}"
        );
    }

    // Served to an MCP client: it answers, says what it skipped, and a
    // program cannot reach the skipped entry as an upstream server.
    let mut child = spawn(&["mcp", "serve", "--workspace", ws.path().to_str().unwrap()], ws.path(), &[]);
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_tools","arguments":{"code":"try { await tools.call('itself__execute_tools', {code: 'return 1'}); return 'reached'; } catch (e) { return e.kind + ': ' + e.message; }"}}}"#,
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut answers = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut result = Value::Null;
    for line in answers.by_ref() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if message["id"] == 2 {
            result = message;
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(err.contains("server `itself` is skipped"), "{err}");
    let value = result["result"]["structuredContent"]["value"].as_str().unwrap_or_default().to_owned();
    assert!(
        value.starts_with("refused: ") && value.contains("unknown tool `itself__execute_tools`"),
        "{result}"
    );
}
