//! The prompt's `a` (allow for the rest of the run), through the binary on
//! a pseudo-terminal: it never covers a call an ask rule or a hook's `ask`
//! sends to a person, and a grant for a command holds only until another
//! call that may change files runs.

#![cfg(unix)]

use std::path::Path;
use std::process::Command;

/// Runs `codemode run ARGS` in `ws` on a pseudo-terminal, typing `answers`
/// (comma-separated) one per prompt; returns what was shown, with the
/// prompts' texts (each from the tool's name on).
fn drive(ws: &Path, answers: &str, args: &[&str]) -> Option<(String, Vec<String>)> {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return None;
    }
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approvers/drive_prompt.py");
    let out = Command::new("python3")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .args([driver, answers, env!("CARGO_BIN_EXE_codemode"), "run"])
        .args(args)
        .env("DRIVE_PROMPT_EACH", "1")
        .env("XDG_CONFIG_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/no-trust-record"))
        .current_dir(ws)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let prompts = shown.split("approval needed for ").skip(1).map(str::to_owned).collect();
    Some((shown, prompts))
}

/// Writes each path in turn, returning `path ok` or `path KIND` for each.
const WRITES: &str = "const o = [];\n\
    for (const p of PATHS) {\n\
      try { await tools.write({path: p, content: 'x'}); o.push(p + ' ok'); }\n\
      catch (e) { o.push(p + ' ' + e.kind); }\n\
    }\n\
    return o.join(',');";

fn writes(paths: &[&str]) -> String {
    WRITES.replace("PATHS", &serde_json::to_string(paths).unwrap())
}

/// Regression: `a` on a write the posture asked about allowed a later write
/// an ask rule covers, unasked. Both orders: a rule's ask answered `a`
/// allows that call alone.
#[test]
fn a_never_covers_a_call_an_ask_rule_asks_about() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("pol.toml"), "[rules]\nask = [\"write(secrets/**)\"]\n").unwrap();
    std::fs::write(ws.path().join("p1.js"), writes(&["n1.txt", "secrets/k.txt", "n2.txt"])).unwrap();
    let Some((shown, prompts)) = drive(ws.path(), "a,n", &["p1.js", "--config", "pol.toml"]) else { return };
    assert_eq!(prompts.len(), 2, "{shown}");
    assert!(prompts[1].contains("ask rule") && prompts[1].contains("a: allows this call only"), "{shown}");
    assert!(shown.contains("n1.txt ok,secrets/k.txt denied,n2.txt ok"), "{shown}");
    assert!(!ws.path().join("secrets/k.txt").exists());

    // The rule's call first, answered `a`: the next such call is asked again.
    std::fs::write(ws.path().join("p2.js"), writes(&["secrets/a.txt", "n3.txt", "secrets/b.txt"])).unwrap();
    let Some((shown, prompts)) = drive(ws.path(), "a,a,n", &["p2.js", "--config", "pol.toml"]) else {
        return;
    };
    assert_eq!(prompts.len(), 3, "{shown}");
    assert!(shown.contains("secrets/a.txt ok,n3.txt ok,secrets/b.txt denied"), "{shown}");
    assert!(ws.path().join("secrets/a.txt").exists() && !ws.path().join("secrets/b.txt").exists());
}

/// Regression: `a` on a posture's ask allowed a later write a before-call
/// hook answered `ask` about, unasked.
#[test]
fn a_never_covers_a_call_a_hook_asks_about() {
    let ws = crate::common::workspace();
    let hooks = ws.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let hook = hooks.join("ask.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$(cat)\" in *secret*) echo '{\"decision\":\"ask\",\"reason\":\"secret file\"}';; *) exit 0;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        ws.path().join("pol.toml"),
        format!("[[hooks.before_call]]\nmatch = \"^write$\"\ncommand = [\"{}\"]\n", hook.display()),
    )
    .unwrap();
    std::fs::write(ws.path().join("p.js"), writes(&["n1.txt", "secret.txt"])).unwrap();
    let Some((shown, prompts)) = drive(ws.path(), "a,n", &["p.js", "--config", "pol.toml"]) else { return };
    assert_eq!(prompts.len(), 2, "{shown}");
    assert!(prompts[1].contains("hook asks: secret file"), "{shown}");
    assert!(shown.contains("n1.txt ok,secret.txt denied"), "{shown}");
    assert!(!ws.path().join("secret.txt").exists());
}

/// Regression: under auto-review writes need no approval, so a program
/// could have `sh x.sh` allowed with `a`, rewrite x.sh, and run it again
/// unasked. The grant holds while only the command itself runs, and ends
/// at the write.
#[test]
fn a_command_grant_ends_when_another_call_may_change_files() {
    let ws = crate::common::workspace();
    std::fs::write(
        ws.path().join("p.js"),
        "const run = async () => { try { return (await tools.bash({command: 'sh x.sh'})).content.stdout.trim(); }\n\
           catch (e) { return e.kind; } };\n\
         await tools.write({path: 'x.sh', content: 'echo harmless'});\n\
         const o = [await run(), await run()];\n\
         await tools.read({path: 'x.sh'});\n\
         o.push(await run());\n\
         await tools.write({path: 'x.sh', content: 'echo EVIL'});\n\
         o.push(await run());\n\
         return o.join(',');",
    )
    .unwrap();
    let Some((shown, prompts)) = drive(ws.path(), "a,n", &["p.js", "--posture", "auto-review"]) else {
        return;
    };
    assert_eq!(prompts.len(), 2, "{shown}");
    assert!(prompts[0].contains("until another call that may change files runs"), "{shown}");
    assert!(shown.contains("harmless,harmless,harmless,denied"), "{shown}");
    assert!(!shown.contains("EVIL\n"), "{shown}");
}
