//! Round two's attacks (issue 11), each run as it was found, with the
//! defence that stops it. Attack, then the test here:
//!
//! - hook script passed as an argument (`command = ["sh", "hooks/guard.sh"]`) rewritten; a module
//!   the hook sources; the `cmd:` approver's script:
//!   `files_a_hook_or_the_approver_names_and_their_folders_are_protected`
//! - `.git/config` given a `core.fsmonitor` line (run by an allowed `git status`):
//!   `git_and_codemode_folders_cannot_be_changed_even_under_full_access`
//! - a `codemode.toml` with `posture = "full-access"` written by a program, obeyed by the next run:
//!   `a_policy_file_a_program_writes_does_not_decide_the_next_run`
//! - a server command rewritten in `.mcp.json`:
//!   `a_program_cannot_rewrite_the_loaded_mcp_configuration`
//! - codemode's environment read through `/proc/$PPID/environ`:
//!   `the_engines_environment_and_proc_entry_are_invisible`
//! - `LC_*` variables passing the environment filter by prefix: `the_environment_is_filtered`
//! - keystrokes injected into the approval prompt through a shared terminal:
//!   `no_controlling_terminal_for_bash_or_an_approver`
//! - a folder swapped for a symbolic link during a batch:
//!   `a_folder_swapped_for_a_symlink_never_leads_a_call_outside_the_workspace`
//! - earlier runs' receipts read under `.codemode/runs`:
//!   `earlier_runs_receipts_cannot_be_read_but_a_runs_own_spill_files_can`
//! - two MCP tools colliding after sanitising (`files_`/`read`, `files`/`_read`):
//!   `tools_whose_names_sanitise_alike_both_get_the_hash_and_keep_their_names`
//! - `${VAR}` values in errors and receipts:
//!   `secrets_from_the_environment_stay_out_of_errors_and_receipts`
//! - `mcp_connect__<server>` asked with no subject:
//!   `a_cmd_approver_is_shown_the_command_line_with_secrets_as_written`
//! - `set -m; sleep 100 &` (and `setsid`) outliving the call:
//!   `setsid_and_job_control_children_end_with_the_call`
//!
//! Their fixtures stay with the area they test (protection.rs, trust.rs,
//! mcp_trust.rs, mcp_support.rs, sandbox.rs, tool_bash.rs, file_race.rs),
//! which also hold the tests of the defences that came after a review.

#[test]
fn files_a_hook_or_the_approver_names_and_their_folders_are_protected() {
    use crate::common::workspace;
    use crate::protection::{executable, refused};
    use codemode::config::ConfigFile;
    use serde_json::json;
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("hooks")).unwrap();
    executable(&root.join("hooks/guard.sh"), ". ./hooks/lib.sh; cat > /dev/null; exit 0");
    std::fs::write(root.join("hooks/lib.sh"), "true\n").unwrap();
    std::fs::create_dir(root.join("approve")).unwrap();
    executable(&root.join("approve/yes.sh"), "echo '{\"decision\": \"allow\"}'");
    let config = root.join("codemode.toml");
    // The hook is passed as an argument of `sh`, from the workspace.
    std::fs::write(
        &config,
        "posture = \"auto-review\"\n[[hooks.before_call]]\nmatch = \"^bash$\"\ncommand = [\"sh\", \"hooks/guard.sh\"]\n",
    )
    .unwrap();
    let approver =
        codemode::approval::approver_from_spec(&format!("cmd:{}", root.join("approve/yes.sh").display()))
            .unwrap();
    let e = crate::common::engine_builder()
        .workspace(&root)
        .config(ConfigFile::load(&config).unwrap())
        .approver_arc(approver)
        .build()
        .unwrap();
    for path in ["hooks/guard.sh", "hooks/lib.sh", "hooks/new.sh", "approve/yes.sh", "codemode.toml"] {
        let err = refused(&e, "write", json!({"path": path, "content": "exit 0"}));
        assert!(err.contains("is protected"), "{path}: {err}");
    }
    assert_eq!(std::fs::read_to_string(root.join("hooks/lib.sh")).unwrap(), "true\n");
    // Other files are still writable under auto-review.
    assert!(e.call_blocking("write", &json!({"path": "notes.txt", "content": "x"})).is_ok());
}

#[test]
fn git_and_codemode_folders_cannot_be_changed_even_under_full_access() {
    use crate::common::workspace;
    use crate::protection::{engine, refused};
    use codemode::Policy;
    use serde_json::json;
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let e = engine(&root, Policy::full_access());
    let fsmonitor = "[core]\n\tfsmonitor = touch /tmp/pwned\n";
    let err = refused(&e, "write", json!({"path": ".git/config", "content": fsmonitor}));
    assert!(err.contains("is protected") && err.contains(".git"), "{err}");
    assert!(err.contains("write(.git/**)"), "the refusal names the rule that lifts it: {err}");
    refused(&e, "edit", json!({"path": ".git/config", "edits": [{"old": "[core]", "new": fsmonitor}]}));
    refused(&e, "write", json!({"path": "docs/../.git/hooks/pre-commit", "content": "x"}));
    assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), "[core]\n");
    // A symlink inside the workspace does not dodge it.
    std::os::unix::fs::symlink(root.join(".git"), root.join("g")).unwrap();
    refused(&e, "write", json!({"path": "g/config", "content": fsmonitor}));
    // Receipts: not writable (a file at .codemode/runs would turn them off).
    refused(&e, "write", json!({"path": ".codemode/runs", "content": "x"}));
    assert!(!crate::common::runs_dir(&root).is_file());
    // A nested repository's .git too.
    let err = refused(&e, "write", json!({"path": "vendor/lib/.git/hooks/pre-commit", "content": "x"}));
    assert!(err.contains("nested repository"), "{err}");
    // Reading .git is fine.
    assert!(e.call_blocking("read", &json!({"path": ".git/config"})).is_ok());
}

#[test]
fn a_policy_file_a_program_writes_does_not_decide_the_next_run() {
    use crate::trust::{codemode, try_write};
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    // Under auto-review a program may write files without asking: it
    // writes itself a policy with posture full-access.
    let out = codemode(
        &["run", "-", "--json", "--posture", "auto-review", "--approve", "deny"],
        "await tools.write({path: 'codemode.toml', content: 'posture = \"full-access\"\\n'}); return 1;",
        ws.path(),
        config.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(ws.path().join("codemode.toml").exists());
    // The next run does not obey it.
    let (outcome, stderr) = try_write(ws.path(), config.path());
    assert_eq!(outcome, "denied", "{stderr}");
}

#[test]
fn a_program_cannot_rewrite_the_loaded_mcp_configuration() {
    use crate::mcp_trust::fixture_server;
    use serde_json::json;
    let ws = crate::common::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let pids_file = root.join("pids");
    let text = json!({"mcpServers": fixture_server(&pids_file)}).to_string();
    let path = root.join(".mcp.json");
    std::fs::write(&path, &text).unwrap();
    let config = codemode::mcp::McpConfig::load(&path).unwrap();
    let e = crate::common::engine_builder()
        .workspace(&root)
        .policy(codemode::Policy::full_access())
        .mcp(config, codemode::mcp::PoolOptions::default())
        .build()
        .unwrap();
    let evil =
        json!({"mcpServers": {"fixture": {"command": "sh", "args": ["-c", "touch pwned"]}}}).to_string();
    let r = e.call_blocking("write", &json!({"path": ".mcp.json", "content": evil}));
    assert_eq!(r.call.status, codemode::receipt::CallStatus::Refused);
    assert!(r.call.error.unwrap().contains("the MCP configuration"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn the_engines_environment_and_proc_entry_are_invisible() {
    use crate::common::workspace;
    use serde_json::Value;
    use std::io::Write as _;
    use std::process::Command;
    let ws = workspace();
    let secret = format!("codemode-secret-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args(["run", "-", "--posture", "full-access", "--json"])
        .current_dir(ws.path())
        .env("SANDBOX_TEST_SECRET", &secret)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The program (read from stdin) names the engine's host pid.
    let engine_pid = child.id();
    let program = format!(
        "const r = await tools.bash({{command: 'test -e /proc/{engine_pid} && echo engine-visible; \
         ls /proc | grep -c \"^[0-9]\"; cat /proc/*/environ /proc/$PPID/environ 2>/dev/null \
         | tr \"\\\\0\" \"\\\\n\" | grep -c SANDBOX_TEST_SECRET'}}); return r.content.stdout;"
    );
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let value = receipt["value"].as_str().unwrap_or_else(|| panic!("{receipt}"));
    assert!(!value.contains(&secret), "{value}");
    let mut lines = value.lines();
    // A handful of processes: the namespace's own (init, the shell, ls...).
    let processes: usize = lines.next().unwrap().trim().parse().unwrap_or_else(|_| panic!("{value}"));
    assert!(processes < 10, "{value}");
    assert_eq!(lines.next(), Some("0"), "no environ holds the secret: {value}");
}

#[test]
fn the_environment_is_filtered() {
    use crate::common::workspace;
    use crate::tool_bash::{LC_SECRET, SECRET, bash, engine, ok};
    use serde_json::json;
    let ws = workspace();
    let engine = engine(&ws);
    assert_eq!(std::env::var(SECRET).as_deref(), Ok("hunter2"));
    assert_eq!(std::env::var(LC_SECRET).as_deref(), Ok("hunter3"));
    let out = bash(
        &engine,
        json!({"command": format!("echo \"secret=${{{SECRET}:-unset}}\"; echo \"codemode=$CODEMODE\"; \
                                   echo \"pwd=$PWD\"; test -n \"$PATH\" && echo path; \
                                   env | cut -d= -f1 | sort")}),
    );
    let stdout = ok(&out)["content"]["stdout"].as_str().unwrap().to_owned();
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("secret=unset"));
    assert_eq!(lines.next(), Some("codemode=1"));
    assert_eq!(lines.next(), Some(format!("pwd={}", engine.workspace().display()).as_str()));
    assert_eq!(lines.next(), Some("path"));
    let allowed = [
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "PWD",
        "CODEMODE",
    ];
    let locale = [
        "LC_ALL",
        "LC_ADDRESS",
        "LC_COLLATE",
        "LC_CTYPE",
        "LC_IDENTIFICATION",
        "LC_MEASUREMENT",
        "LC_MESSAGES",
        "LC_MONETARY",
        "LC_NAME",
        "LC_NUMERIC",
        "LC_PAPER",
        "LC_TELEPHONE",
        "LC_TIME",
    ];
    // bash adds a few of its own (SHLVL, `_`, OLDPWD); nothing else.
    let shell_own = ["SHLVL", "_", "OLDPWD"];
    // Set by codemode, not passed on: the workspace's command cache.
    let caches = [
        "XDG_CACHE_HOME",
        "npm_config_cache",
        "PIP_CACHE_DIR",
        "UV_CACHE_DIR",
        "YARN_CACHE_FOLDER",
        "GOCACHE",
        "DENO_DIR",
    ];
    for name in lines {
        assert!(
            allowed.contains(&name)
                || shell_own.contains(&name)
                || locale.contains(&name)
                || caches.contains(&name),
            "`{name}` passed the environment filter"
        );
    }
}

#[test]
fn no_controlling_terminal_for_bash_or_an_approver() {
    use crate::common::workspace;
    use crate::sandbox::on_a_terminal;
    let ws = workspace();
    let approver = ws.path().join("approve.sh");
    std::fs::write(
        &approver,
        "#!/bin/sh\ncat > /dev/null\n(exec 3</dev/tty) 2>/dev/null && echo opened > approver-tty.txt \
         || echo none > approver-tty.txt\necho '{\"decision\": \"allow\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&approver, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        ws.path().join("prog.js"),
        "const r = await tools.bash({command: '(exec 3</dev/tty) 2>/dev/null && echo BASH-OPENED-TTY \
         || echo BASH-NO-TTY; tty'}); return r.content.stdout;",
    )
    .unwrap();
    let spec = format!("cmd:{}", approver.display());
    let shown = on_a_terminal(ws.path(), &["run", "prog.js", "--approve", &spec, "--json"]);
    assert!(shown.contains("BASH-NO-TTY") && shown.contains("not a tty"), "{shown}");
    assert!(!shown.contains("BASH-OPENED-TTY"), "{shown}");
    assert_eq!(std::fs::read_to_string(ws.path().join("approver-tty.txt")).unwrap(), "none\n");
}

#[cfg(target_os = "linux")]
#[test]
fn a_folder_swapped_for_a_symlink_never_leads_a_call_outside_the_workspace() {
    use crate::file_race::{assert_contained, swap_race};
    let outer = tempfile::tempdir().unwrap();
    let outer_path = std::fs::canonicalize(outer.path()).unwrap();
    let out = outer_path.join("out");
    let seen = swap_race(&outer_path.join("ws"), &out, &out);
    assert_contained(&seen);
    let mut top: Vec<String> = std::fs::read_dir(&outer_path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect();
    top.sort();
    assert_eq!(top, ["out", "ws"], "nothing new next to the workspace");
}

#[test]
fn earlier_runs_receipts_cannot_be_read_but_a_runs_own_spill_files_can() {
    use crate::common::workspace;
    use crate::protection::{engine, refused};
    use codemode::{Policy, Program, receipt::RunStatus};
    use serde_json::json;
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let e = engine(&root, Policy::full_access());
    let earlier = root.join(".codemode/runs/run-earlier");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("receipt.json"), "{\"secret\": \"bash output of a full-access run\"}")
        .unwrap();
    let err = refused(&e, "read", json!({"path": ".codemode/runs/run-earlier/receipt.json"}));
    assert!(err.contains("codemode's own folder") && err.contains("spill_path"), "{err}");
    refused(&e, "grep_files", json!({"pattern": "secret", "path": ".codemode"}));
    refused(&e, "file_search", json!({"query": "*.json", "path": ".codemode/runs"}));
    // A run reads its own spill file (what `spill_path` is for).
    let receipt = e.execute_blocking(Program::new(
        "const big = await tools.blob({bytes: 200000});
         const own = await tools.read({path: big.truncated.spill_path, limit: 1});
         let other = 'read';
         try { await tools.read({path: '.codemode/runs/run-earlier/receipt.json'}); }
         catch (err) { other = err.kind; }
         return {own: own.content.length > 0, other};",
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    assert_eq!(receipt.value, json!({"own": true, "other": "refused"}));
}

#[test]
fn tools_whose_names_sanitise_alike_both_get_the_hash_and_keep_their_names() {
    use crate::mcp_support::{config, fixture, untrusted};
    use crate::mcp_trust::engine;
    use codemode::{Engine, Policy, Program, receipt::RunStatus};
    use serde_json::json;
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let server = |name: &str, tool: &str| {
        json!({"command": "python3", "args": [fixture(), "normal"],
               "env": {"MCP_FIXTURE_TOOLS": tool, "MCP_FIXTURE_NAME": name}})
    };
    let servers = json!({"files_": server("files_", "read"), "files": server("files", "_read")});
    let listed = |engine: &Engine| -> Vec<String> {
        let mut names: Vec<String> = engine
            .tool_specs()
            .into_iter()
            .map(|s| s.name)
            .filter(|n| n.starts_with("mcp__files___read"))
            .collect();
        names.sort();
        names
    };
    let first = engine(config(servers.clone()), cache.path(), ws.path(), Policy::full_access());
    for server in ["files_", "files"] {
        let r = first.call_blocking(&format!("mcp_connect__{server}"), &json!({}));
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    let names = listed(&first);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&"mcp__files___read".to_owned()), "a plain name won: {names:?}");
    // Each name reaches its own server's tool.
    let mut answered = Vec::new();
    for name in &names {
        let r = first.execute_blocking(Program::new(format!("return (await tools['{name}']({{}})).content")));
        assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
        answered.push(r.value.as_str().unwrap().to_owned());
    }
    answered.sort();
    assert_eq!(answered, ["files/_read", "files_/read"]);
    drop(first);
    // Listing again (another engine, the servers started the other way
    // round) gives the same names.
    let second = engine(config(servers.clone()), cache.path(), ws.path(), Policy::full_access());
    for server in ["files", "files_"] {
        assert!(second.call_blocking(&format!("mcp_connect__{server}"), &json!({})).error.is_none());
    }
    assert_eq!(listed(&second), names);
    drop(second);
    // So does the schema cache, in an engine that starts nothing.
    let cached = engine(untrusted(servers), cache.path(), ws.path(), Policy::default());
    assert_eq!(listed(&cached), names);
    assert!(cached.mcp_servers().iter().all(|s| s.state == codemode::mcp::ServerState::NotStarted));
}

#[test]
fn secrets_from_the_environment_stay_out_of_errors_and_receipts() {
    use crate::mcp_trust::{SECRET, engine, failing_servers, secret_config};
    use codemode::{Policy, Program, receipt::RunStatus};
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let engine =
        engine(secret_config(&failing_servers(), true), cache.path(), ws.path(), Policy::full_access());
    let r = engine.execute_blocking(Program::new(
        r#"const out = {};
           for (const s of ["missing", "printer", "silent", "web"]) {
             try { await tools[`mcp_connect__${s}`]({}); out[s] = "started"; }
             catch (e) { out[s] = e.message; }
           }
           return out;"#,
    ));
    assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
    // Each start failed, and says why with the launch as written.
    let message = |s: &str| r.value[s].as_str().unwrap().to_owned();
    assert!(message("missing").contains("/no/such/${SECRET}/server"), "{}", message("missing"));
    assert!(message("printer").contains("--key=${SECRET}"), "{}", message("printer"));
    assert!(message("silent").contains("did not complete the handshake"), "{}", message("silent"));
    assert!(message("web").contains("web"), "{}", message("web"));
    let receipt = r.to_json_pretty();
    let saved = std::fs::read_to_string(engine.save_receipt(&r).unwrap()).unwrap();
    let status: Vec<String> = engine.mcp_servers().iter().map(|s| format!("{:?}", s.state)).collect();
    for text in
        [&receipt, &saved, &status.join("\n"), &format!("{:?}", secret_config(&failing_servers(), true))]
    {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
        assert!(!text.contains("literal-api-key-9f8e"), "a header value leaked: {text}");
    }
    assert!(status.iter().all(|s| s.contains("Failed")), "{status:?}");
}

#[test]
fn a_cmd_approver_is_shown_the_command_line_with_secrets_as_written() {
    use crate::mcp_support::{assert_gone, fixture, options, pids, root};
    use crate::mcp_trust::{ECHO, SECRET, secret_config};
    use codemode::{Program, approval::CommandApprover};
    use serde_json::{Value, json};
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pids_file = cache.path().join("pids");
    let recorded = cache.path().join("request.json");
    let servers = json!({
        "fixture": {"command": "python3", "args": [fixture(), "normal", "--token=${SECRET}"],
                    "env": {"MCP_FIXTURE_PIDS": pids_file.to_string_lossy(), "TOKEN": "${SECRET}"},
                    "cwd": cache.path().to_string_lossy()},
        "web": {"url": "http://127.0.0.1:1/mcp?key=${SECRET}"},
    });
    let approver = CommandApprover::new(
        root().join("tests/fixtures/approvers/record.sh").to_string_lossy(),
        [recorded.to_string_lossy().into_owned()],
    );
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .approver(approver)
        .mcp(secret_config(&servers, false), options(cache.path()))
        .build()
        .unwrap();
    let r = engine.execute_blocking(Program::new(ECHO));
    assert_eq!(r.value, json!({"text": "hi"}), "{}", r.to_json_pretty());
    assert_eq!(r.calls[0].decision, codemode::receipt::Decision::Approved);
    let request: Value = serde_json::from_str(&std::fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(request["tool"], "mcp_connect__fixture");
    let cwd = std::fs::canonicalize(cache.path()).unwrap();
    assert_eq!(
        request["subject"],
        format!(
            "MCP_FIXTURE_PIDS={} TOKEN=${{SECRET}} python3 {} normal --token=${{SECRET}} (in {})",
            pids_file.display(),
            fixture(),
            cwd.display()
        )
    );
    // An HTTP server's approval shows its URL.
    let _ = engine.call_blocking("mcp_connect__web", &json!({}));
    let request: Value = serde_json::from_str(&std::fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(request["subject"], "http://127.0.0.1:1/mcp?key=${SECRET}");
    assert!(!request.to_string().contains(SECRET));
    let started = pids(&pids_file);
    drop(engine);
    assert_gone(&started);
}

#[test]
fn setsid_and_job_control_children_end_with_the_call() {
    use crate::common::workspace;
    use crate::sandbox::{assert_gone, default_engine, marker, stdout};
    let ws = workspace();
    let engine = default_engine(&ws);
    let (a, b) = (marker(), marker());
    let out = stdout(&engine, &format!("setsid sleep {a} & set -m; sleep {b} & echo started"));
    assert_eq!(out, "started\n");
    // They left the shell's process group: only the PID namespace ends them.
    assert_gone(&a);
    assert_gone(&b);
}
