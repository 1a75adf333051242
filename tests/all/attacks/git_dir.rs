//! Issue 30, break 4: the git folder under another name. With `git init
//! --separate-git-dir=gitdata` (a `.git` file saying `gitdir: ...`) or
//! `.git` a link to a folder of the workspace, a program's `edit
//! gitdata/config` planted `core.fsmonitor`, and the `git status` an allow
//! rule lets run ran it unasked. Defence (docs/SECURITY.md, "Protected
//! paths"): the git folder the workspace uses is resolved when the engine
//! is built and protected like `.git/` (writer tools and the bash sandbox),
//! and a writer's path inside any folder git would take for a git folder is
//! refused whatever its name.

use std::path::{Path, PathBuf};
use std::process::Command;

use codemode::config::ConfigFile;
use codemode::policy::{Rule, Rules};
use codemode::{Engine, Policy, Program, receipt::RunStatus};
use serde_json::json;

/// What a planted fsmonitor runs: it leaves `pwned` in the workspace.
const FSMONITOR: &str = "[core]\n\tfsmonitor = \"touch pwned; false\"\n";

fn git(root: &Path, args: &[&str]) {
    let ok = Command::new("git").args(args).current_dir(root).output().unwrap().status.success();
    assert!(ok, "git {args:?}");
}

/// A workspace whose repository keeps its git folder in `gitdata`, named
/// by a `.git` file.
fn separate_git_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    git(&root, &["init", "-q", "--separate-git-dir=gitdata", "."]);
    assert!(root.join(".git").is_file());
    let data = root.join("gitdata");
    (ws, root, data)
}

/// A workspace whose `.git` is a link to its folder `gitlink`.
fn linked_git_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    git(&root, &["init", "-q", "."]);
    std::fs::rename(root.join(".git"), root.join("gitlink")).unwrap();
    std::os::unix::fs::symlink("gitlink", root.join(".git")).unwrap();
    let data = root.join("gitlink");
    (ws, root, data)
}

/// Writers allowed by rules, and `git status` (the README's rule); the
/// approver denies everything else. The sandbox is the default.
fn engine(root: &Path) -> Engine {
    let allow = ["edit", "write", "bash(git status)"].iter().map(|r| Rule::parse(r).unwrap()).collect();
    let policy = Policy { rules: Rules { allow, ..Rules::default() }, ..Policy::default() };
    crate::common::engine_builder().workspace(root).config(ConfigFile::with_policy(policy)).build().unwrap()
}

/// The attack as a program: plant an fsmonitor through the git folder's
/// other name, by edit and by write, then run the allowed `git status`.
/// Returns what each attempt got.
fn attack(root: &Path, name: &str) -> serde_json::Value {
    let source = format!(
        "const out = {{}};
         try {{ await tools.edit({{path: '{name}/config', edits: [{{old: '[core]', new: {fs}}}]}}); out.edit = 'done'; }}
         catch (e) {{ out.edit = e.kind + ': ' + e.message; }}
         try {{ await tools.write({{path: '{name}/config', content: {fs}}}); out.write = 'done'; }}
         catch (e) {{ out.write = e.kind + ': ' + e.message; }}
         const status = await tools.bash({{command: 'git status'}});
         out.status = status.content.exit_code;
         return out;",
        fs = serde_json::to_string(FSMONITOR).unwrap()
    );
    let receipt = engine(root).execute_blocking(Program::new(source));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    receipt.value
}

fn assert_held(root: &Path, data: &Path, name: &str) {
    let config = std::fs::read_to_string(data.join("config")).unwrap();
    let out = attack(root, name);
    assert_eq!(out["status"], 0, "git status ran: {out}");
    for tool in ["edit", "write"] {
        let got = out[tool].as_str().unwrap();
        assert!(got.starts_with("refused:") && got.contains("is protected"), "{tool}: {got}");
    }
    assert_eq!(std::fs::read_to_string(data.join("config")).unwrap(), config, "the config is unchanged");
    assert!(!root.join("pwned").exists(), "git status ran no planted fsmonitor");
    // bash itself, unasked (full access), in the sandbox: read-only there.
    let e = crate::common::engine_builder().workspace(root).policy(Policy::full_access()).build().unwrap();
    let command = format!(
        "printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' >> {name}/config; \
         echo x > {name}/hooks/pre-commit; git status >/dev/null 2>&1; true"
    );
    let r = e.call_blocking("bash", &json!({ "command": command }));
    assert!(r.is_ok(), "{:?}", r.error);
    assert_eq!(std::fs::read_to_string(data.join("config")).unwrap(), config, "bash cannot write it");
    assert!(!data.join("hooks/pre-commit").exists());
    assert!(!root.join("pwned").exists());
}

#[test]
fn a_separate_git_dir_is_protected_like_dot_git() {
    let (_ws, root, data) = separate_git_dir();
    assert_held(&root, &data, "gitdata");
}

#[test]
fn a_git_dir_behind_a_dot_git_link_is_protected_like_dot_git() {
    let (_ws, root, data) = linked_git_dir();
    assert_held(&root, &data, "gitlink");
}

/// A nested repository keeps its git folder under another name: writer
/// tools refuse it (structurally: it looks like a git folder), and no
/// `.git` file can be made to point elsewhere.
#[test]
fn a_nested_repositorys_git_folder_and_git_files_cannot_be_written() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("vendor")).unwrap();
    git(&root.join("vendor"), &["init", "-q", "--separate-git-dir=../vendor-git", "."]);
    let e = crate::common::engine_builder().workspace(&root).policy(Policy::full_access()).build().unwrap();
    for (path, content) in [
        ("vendor-git/config", FSMONITOR),
        ("vendor/.git", "gitdir: ../elsewhere\n"),
        (".git", "gitdir: vendor-git\n"),
        ("sub/.git", "gitdir: ../vendor-git\n"),
    ] {
        let r = e.call_blocking("write", &json!({ "path": path, "content": content }));
        let error = r.call.error.unwrap_or_default();
        assert!(error.contains("is protected"), "{path}: {error}");
    }
    assert!(!root.join(".git").exists() && !root.join("sub").exists());
}

/// Review break 5: `include.path = ../.gitconfig` in the repository's
/// config makes a workspace file part of git's configuration. The file
/// did not exist: it is made empty when the engine is built and protected
/// (writer tools refused, read-only in the sandbox), so neither the
/// allowed `git status` nor the person's own runs a planted fsmonitor.
#[test]
fn a_file_the_repository_config_includes_from_the_workspace_cannot_be_planted() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    git(&root, &["init", "-q", "."]);
    git(&root, &["config", "include.path", "../.gitconfig"]);
    let source = format!(
        "const out = {{}};
         try {{ await tools.write({{path: '.gitconfig', content: {fs}}}); out.write = 'done'; }}
         catch (e) {{ out.write = e.kind + ': ' + e.message; }}
         out.status = (await tools.bash({{command: 'git status'}})).content.exit_code;
         return out;",
        fs = serde_json::to_string(FSMONITOR).unwrap()
    );
    let receipt = engine(&root).execute_blocking(Program::new(source));
    let out = receipt.value;
    let got = out["write"].as_str().unwrap_or_default();
    assert!(got.starts_with("refused:") && got.contains("is protected"), "{out}");
    // bash itself, unasked (full access), in the sandbox.
    let e = crate::common::engine_builder().workspace(&root).policy(Policy::full_access()).build().unwrap();
    let command = "printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' > .gitconfig; true";
    let r = e.call_blocking("bash", &json!({ "command": command }));
    assert!(r.is_ok(), "{:?}", r.error);
    assert!(!std::fs::read_to_string(root.join(".gitconfig")).unwrap_or_default().contains("fsmonitor"));
    // The person's own git status, outside any sandbox.
    git(&root, &["status"]);
    assert!(!root.join("pwned").exists(), "a planted fsmonitor ran");
}
