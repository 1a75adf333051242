//! The workspace files a command names (crates/base/src/command_files/:
//! shell strings, wrappers, interpreters, `#!` lines), read for hooks,
//! `cmd:` approvers and MCP stdio servers, and the gate's reading of a
//! `bash` command against rules (crates/codemode/src/gate/primary.rs,
//! gate/rules.rs), in a workspace holding `hooks/guard.py`, an executable
//! `bin/tool` whose `#!` line is `/usr/bin/env -S sh -c ...` and a link.
//!
//! Input: the first byte picks how the rest is given: as words split on
//! whitespace, as `sh -c TEXT`, or as `bash -euo pipefail -c TEXT`; the
//! first line of the rest is a rule pattern (`bash(<line>)`), the rest the
//! command. The `PATH` is `bin:/usr/bin`.
//!
//! Properties: no panic; at most `MAX_COMMAND_FILES` files, each beneath
//! the workspace (not the workspace itself), without `..`, without
//! repeats; the gate's spelling is normalised (reading it again gives it
//! back) and has no shell control character unless the command is
//! chained; an allow rule with a pattern never covers a chained command,
//! and covers a command only where it would also deny it. Time is bounded
//! by libFuzzer's `-timeout`.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use codemode::fuzzing::{MAX_COMMAND_FILES, command_files, gate_command, rule_covers};
use codemode::policy::Rule;
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static Path {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt as _;
        let ws = std::env::temp_dir().join(format!("codemode-fuzz-command-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("hooks")).expect("a workspace");
        std::fs::create_dir_all(ws.join("bin")).expect("a folder");
        std::fs::write(ws.join("hooks/guard.py"), "print()\n").expect("a file");
        let tool = ws.join("bin/tool");
        std::fs::write(&tool, "#!/usr/bin/env -S sh -c 'python3 hooks/guard.py'\n").expect("a file");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("executable");
        let _ = std::os::unix::fs::symlink("hooks", ws.join("link"));
        std::fs::canonicalize(&ws).expect("a canonical workspace")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (pattern, command) = text.split_once('\n').unwrap_or(("", text));
    let ws = workspace();

    let argv: Vec<String> = match how % 3 {
        0 => command.split_whitespace().map(str::to_owned).collect(),
        1 => vec!["sh".into(), "-c".into(), command.into()],
        _ => ["bash", "-euo", "pipefail", "-c", command].map(str::to_owned).to_vec(),
    };
    let (files, _why) = command_files(&argv, ws, ws, Some("bin:/usr/bin"));
    assert!(files.len() <= MAX_COMMAND_FILES, "{} files", files.len());
    for (i, file) in files.iter().enumerate() {
        assert!(file.starts_with(ws) && file != ws, "{file:?} is not beneath the workspace");
        assert!(!file.components().any(|c| c == Component::ParentDir), "{file:?} has `..`");
        assert!(!files[..i].contains(file), "{file:?} twice");
    }

    let (written, chained) = gate_command(command);
    assert_eq!(gate_command(&written).0, written, "{command:?}: the spelling is not normalised");
    if !chained {
        assert!(!written.contains([';', '&', '|', '<', '>', '$', '`', '\n', '\r']), "{written:?}");
    }
    if let Ok(rule) = Rule::parse(&format!("bash({pattern})")) {
        let (allow, deny) = rule_covers(&rule, "bash", command, None);
        assert!(!(allow && chained && rule.pattern.is_some()), "`{rule}` allows the chained {command:?}");
        assert!(!allow || deny, "`{rule}` allows {command:?} without covering it");
    }
});
