use std::ffi::OsStr;

use super::*;

fn files(argv: &[&str], ws: &Path) -> CommandFiles {
    let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
    command_files(&argv, ws, ws)
}

fn ws() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join("hooks")).unwrap();
    std::fs::write(ws.join("hooks/guard.py"), "print()\n").unwrap();
    (dir, ws)
}

#[test]
fn arguments_and_the_words_of_a_shell_string_name_files() {
    let (_dir, ws) = ws();
    let guard = ws.join("hooks/guard.py");
    assert_eq!(files(&["python3", "hooks/guard.py"], &ws).files, vec![guard.clone()]);
    let string = files(&["sh", "-c", "python3 hooks/guard.py 2>/dev/null; true"], &ws);
    assert_eq!(string, CommandFiles { files: vec![guard.clone()], undetermined: None });
    assert_eq!(files(&["bash", "-lc", "exec python3 ./hooks/../hooks/guard.py"], &ws).files, vec![guard]);
    // A redirection target is written, not run.
    assert!(files(&["sh", "-c", "cat > hooks/out.py"], &ws).files.is_empty());
    // Words that name nothing: flags, names that are no file.
    assert!(files(&["sh", "-c", "touch hook-ran; cat >/dev/null"], &ws).files.is_empty());
}

#[test]
fn missing_scripts_and_programs_given_as_paths_count() {
    let (_dir, ws) = ws();
    let named = files(&["python3", "hooks/new.py"], &ws).files;
    assert_eq!(named, vec![ws.join("hooks/new.py")]);
    let named = files(&["./bin/check", "--strict"], &ws).files;
    assert_eq!(named, vec![ws.join("bin/check")]);
    let named = files(&["sh", "scripts/missing"], &ws).files;
    assert_eq!(named, vec![ws.join("scripts/missing")]);
}

#[test]
fn an_interpreter_in_the_workspace_and_a_shebang_are_named() {
    let (_dir, ws) = ws();
    std::fs::create_dir_all(ws.join(".venv/bin")).unwrap();
    std::os::unix::fs::symlink("/bin/sh", ws.join(".venv/bin/python")).unwrap();
    let named = files(&[".venv/bin/python", "hooks/guard.py"], &ws).files;
    assert_eq!(named, vec![ws.join(".venv/bin/python"), ws.join("hooks/guard.py")]);
    std::fs::write(ws.join("hooks/run"), format!("#!{}/.venv/bin/python\n", ws.display())).unwrap();
    let named = files(&["hooks/run"], &ws).files;
    assert_eq!(named, vec![ws.join("hooks/run"), ws.join(".venv/bin/python")]);
}

#[test]
fn computed_commands_are_undetermined() {
    let (_dir, ws) = ws();
    for argv in [
        &["sh", "-c", "python3 $SCRIPT"][..],
        &["sh", "-c", "python3 $(cat which)"],
        &["bash", "-c", "eval python3 hooks/guard.py"],
        &["sh", "-c", "cd hooks && python3 guard.py"],
        &["sh", "-c", "python3 hooks/*.py"],
        &["python3", "-c", "import guard"],
        &["sh", "-c", "python3 'unclosed"],
    ] {
        assert!(files(argv, &ws).undetermined.is_some(), "{argv:?}");
    }
    assert!(files(&["python3", "hooks/guard.py"], &ws).undetermined.is_none());
}

#[test]
fn a_link_names_its_target_in_the_workspace_too() {
    let (_dir, ws) = ws();
    std::os::unix::fs::symlink("hooks", ws.join("linked")).unwrap();
    let named = files(&["python3", "linked/guard.py"], &ws).files;
    assert_eq!(named, vec![ws.join("linked/guard.py"), ws.join("hooks/guard.py")]);
    // Outside the workspace: nothing.
    assert!(files(&["/bin/sh", "/etc/hostname"], &ws).files.is_empty());
}

fn with_path(argv: &[&str], ws: &Path, path: &str) -> CommandFiles {
    let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
    command_files_with_path(&argv, ws, ws, Some(OsStr::new(path)))
}

#[test]
fn shell_options_that_take_a_value_are_skipped() {
    let (_dir, ws) = ws();
    let guard = vec![ws.join("hooks/guard.py")];
    for argv in [
        &["bash", "-euo", "pipefail", "-c", "python3 hooks/guard.py"][..],
        &["bash", "-o", "pipefail", "-c", "python3 hooks/guard.py"],
        &["bash", "-O", "extglob", "-c", "python3 hooks/guard.py"],
        &["bash", "+o", "history", "-c", "python3 hooks/guard.py"],
        &["bash", "-c", "-o", "pipefail", "python3 hooks/guard.py"],
        &["sh", "-c", "--", "python3 hooks/guard.py"],
        &["bash", "--norc", "-e", "-c", "python3 hooks/guard.py", "name"],
    ] {
        assert_eq!(files(argv, &ws), CommandFiles { files: guard.clone(), undetermined: None }, "{argv:?}");
    }
    // `--rcfile` runs its file; with `-s` the operands are arguments.
    let rc = files(&["bash", "--rcfile", "hooks/rc", "-c", "python3 hooks/guard.py"], &ws);
    assert_eq!(rc.files, vec![ws.join("hooks/rc"), ws.join("hooks/guard.py")]);
    assert!(files(&["bash", "-s", "later"], &ws).files.is_empty());
    // An option codemode cannot read: the operands are not guessed.
    assert!(files(&["bash", "--unknown", "-c", "true"], &ws).undetermined.is_some());
    assert!(files(&["bash", "-e%", "-c", "true"], &ws).undetermined.is_some());
}

#[test]
fn a_missing_script_of_an_interpreter_counts_whatever_its_name() {
    let (_dir, ws) = ws();
    let later = vec![ws.join("hooks/later")];
    for argv in [
        &["python3", "hooks/later"][..],
        &["python3", "-X", "dev", "-u", "hooks/later", "--flag"],
        &["sh", "-c", "python3.12 hooks/later"],
        &["sh", "-c", "if true; then sh hooks/later; fi"],
        &["node", "--require", "./missing-module", "hooks/later"],
        &["deno", "run", "-A", "hooks/later"],
        &["php", "-f", "hooks/later"],
        &["perl", "-w", "hooks/later"],
    ] {
        let found = files(argv, &ws);
        assert_eq!(found.files, later, "{argv:?}");
        assert!(found.undetermined.is_none(), "{argv:?}");
    }
    let module = files(&["python3", "-m", "hooks.guard"], &ws);
    assert!(module.undetermined.unwrap().contains("module found by name"));
    for argv in [&["node", "-e", "1"][..], &["deno", "eval", "1"], &["bun", "--cwd", "x", "a.ts"]] {
        assert!(files(argv, &ws).undetermined.is_some(), "{argv:?}");
    }
}

#[test]
fn wrappers_run_the_command_past_their_options_and_operands() {
    let (_dir, ws) = ws();
    let guard = vec![ws.join("hooks/guard.py")];
    for argv in [
        &["env", "-S", "python3 hooks/guard.py"][..],
        &["env", "-Spython3 hooks/guard.py"],
        &["env", "--split-string=python3 -u", "hooks/guard.py"],
        &["env", "-i", "-u", "HOME", "A=1", "python3", "hooks/guard.py"],
        &["timeout", "-s", "KILL", "5", "sh", "-c", "python3 hooks/guard.py"],
        &["timeout", "5s", "python3", "hooks/guard.py"],
        &["nice", "-n", "10", "python3", "hooks/guard.py"],
        &["nohup", "setsid", "-w", "python3", "hooks/guard.py"],
        &["stdbuf", "-o", "L", "python3", "hooks/guard.py"],
        &["sudo", "-u", "nobody", "-E", "python3", "hooks/guard.py"],
        &["doas", "-u", "nobody", "python3", "hooks/guard.py"],
        &["flock", "-w", "3", "/tmp/lock", "python3", "hooks/guard.py"],
        &["flock", "/tmp/lock", "-c", "python3 hooks/guard.py"],
        &["ionice", "-c", "3", "python3", "hooks/guard.py"],
        &["chrt", "-b", "0", "python3", "hooks/guard.py"],
        &["taskset", "-c", "0-3", "python3", "hooks/guard.py"],
        &["busybox", "sh", "-c", "python3 hooks/guard.py"],
        &["sh", "-c", "exec -a name python3 hooks/guard.py"],
    ] {
        assert_eq!(files(argv, &ws), CommandFiles { files: guard.clone(), undetermined: None }, "{argv:?}");
    }
    // The shebang's rest of line is one word, as the kernel passes it.
    std::fs::write(ws.join("hooks/run"), "#!/usr/bin/env -S python3 hooks/guard.py\n").unwrap();
    assert_eq!(files(&["hooks/run"], &ws).files, vec![ws.join("hooks/run"), ws.join("hooks/guard.py")]);
    for argv in [
        &["env", "-C", "hooks", "python3", "guard.py"][..],
        &["env", "-S", "python3 $SCRIPT"],
        &["sudo", "-D", "hooks", "python3", "guard.py"],
        &["xargs", "-a", "/dev/null", "sh", "hooks/guard.py"],
        &["runner", "-c", "python3 hooks/guard.py"],
        &["fish", "-lc", "python3 hooks/guard.py; true"],
        &["sh", "-c", "for f in a b; do sh hooks/guard.py; done"],
    ] {
        assert!(files(argv, &ws).undetermined.is_some(), "{argv:?}");
    }
    // `-c` with a plain value is no shell string.
    assert!(files(&["git", "-c", "core.pager=cat", "log"], &ws).undetermined.is_none());
}

#[test]
fn a_bare_name_names_its_candidates_on_path_in_the_workspace() {
    let (_dir, ws) = ws();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.join("bin")).unwrap();
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    let path = format!("{}/bin:tools:{}:/usr/bin:/bin", ws.display(), outside.path().display());
    // Missing on every workspace entry: each names a file, so that a
    // program cannot create one for the command to run.
    let found = with_path(&["tool-x", "a"], &ws, &path);
    assert_eq!(found.files, vec![ws.join("bin/tool-x"), ws.join("tools/tool-x")]);
    // Found on the first: the later entries are not reached.
    std::fs::write(ws.join("bin/tool-x"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(ws.join("bin/tool-x"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    assert_eq!(with_path(&["tool-x"], &ws, &path).files, vec![ws.join("bin/tool-x")]);
    // An empty entry is the working folder; a `PATH=` assignment is the
    // command's PATH.
    assert_eq!(with_path(&["tool-y"], &ws, ":/usr/bin").files, vec![ws.join("tool-y")]);
    let assigned = with_path(&["sh", "-c", "PATH=tools:/usr/bin tool-y"], &ws, "/usr/bin:/bin");
    assert_eq!(assigned.files, vec![ws.join("tools/tool-y")]);
    let assigned = with_path(&["env", "PATH=tools", "tool-y"], &ws, "/usr/bin:/bin");
    assert_eq!(assigned.files, vec![ws.join("tools/tool-y")]);
    // No workspace entry: nothing.
    let found = with_path(&["python3", "hooks/guard.py"], &ws, "/usr/bin:/bin");
    assert_eq!(found.files, vec![ws.join("hooks/guard.py")]);
}

#[test]
fn a_long_command_is_read_to_a_bound_and_undetermined() {
    // Before the bounds: a 35 KB `PATH` of 6,000 workspace folders before
    // five wrappers took 42 s (12,000 files), 6,000 script names 8 s, and
    // 30,000 `x;` 4 s, each a file-system lookup per word and PATH entry.
    let (_dir, ws) = ws();
    let path = (0..6000).map(|i| format!("d{i}")).collect::<Vec<_>>().join(":");
    let scripts = (0..6000).map(|i| format!("f{i}.py")).collect::<Vec<_>>().join(" ");
    for (text, bound) in [
        (format!("PATH={path} env env env env env x"), "more than 1000 files"),
        (scripts, "more than 1000 files"),
        ("x;".repeat(30_000), "more than 4096 words and PATH entries"),
        ("true ".repeat(13_000), "more than 4096 words and PATH entries"),
    ] {
        let started = std::time::Instant::now();
        let found = files(&["sh", "-c", &text], &ws);
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(found.files.len() <= MAX_FILES);
        let why = found.undetermined.unwrap_or_default();
        assert!(why.contains(bound) && why.contains("script file"), "{why}");
    }
    // A short command is read whole.
    assert_eq!(files(&["sh", "-c", &"true ".repeat(100)], &ws).undetermined, None);
}

/// Found by the fuzz target `command_line`: a program named `..` (in a
/// shell string `..;.`) was looked up on `PATH` as `<entry>/..`, a file
/// list entry with `..` that is a folder (with `PATH=.`, the workspace),
/// which the protections would have taken as a file to protect.
#[test]
fn dot_and_dot_dot_are_never_looked_up_on_path() {
    let (_dir, ws) = ws();
    for path in ["bin:/usr/bin", ".", ""] {
        let found = command_files_with_path(
            &["sh".into(), "-c".into(), "..; .; ./; ../".into()],
            &ws,
            &ws,
            Some(OsStr::new(path)),
        );
        let bad = found.files.iter().find(|f| f.is_dir() || f.components().any(|c| c.as_os_str() == ".."));
        assert_eq!(bad, None, "PATH={path}: {:?}", found.files);
    }
}
