//! Files git includes into its configuration from inside the workspace
//! (docs/SECURITY.md, "Protected paths"). `include.path = ../.gitconfig`
//! in `.git/config`, or an `includeIf.<condition>.path` in the user's
//! `~/.gitconfig` that points into the workspace, makes a file a program
//! can write part of git's configuration: a `core.fsmonitor` line there
//! runs on the next `git status`, the person's own included.
//!
//! When the engine is built, [`workspace_includes`] reads the repository's
//! configuration (`config` and `config.worktree` of each git folder
//! [`super::git_metadata::repository_git_dirs`] finds), the user's global
//! one (`GIT_CONFIG_GLOBAL`, else `$XDG_CONFIG_HOME/git/config` and
//! `~/.gitconfig`) and the system one (`GIT_CONFIG_SYSTEM`, else
//! `/etc/gitconfig`), each bounded (`codemode_base::config_file`), with a
//! small parser of git's syntax ([`include_paths`]); follows the includes
//! of included files [`MAX_DEPTH`] levels deep; and returns the included
//! files that lie in the workspace. Every `includeIf` condition counts as
//! true: protecting a file git would not include costs nothing.

use std::path::{Path, PathBuf};

use super::protection::Protection;

/// How many levels of includes are followed (a file the configuration
/// includes is level 1). Included files inside the workspace are
/// protected, so their own includes cannot change during the run.
pub(crate) const MAX_DEPTH: usize = 3;

/// At most this many configuration files are read.
const MAX_FILES: usize = 32;

/// What a protection of an included file is called.
const INCLUDED: &str = "a file git includes into its configuration (`include.path`)";

/// The files inside the canonical `workspace` that git's configuration
/// includes (see the module docs), as named and as resolved. A missing one
/// is made, empty (its folders too), when `make_missing` (the sandbox lets
/// bash write the workspace, and cannot mount a missing path read-only);
/// otherwise it is protected by its path and its outermost missing
/// folder. A path that is the workspace or holds it is left out.
pub(crate) fn workspace_includes(workspace: &Path, make_missing: bool) -> Vec<Protection> {
    let mut files: Vec<PathBuf> = super::git_metadata::repository_git_dirs(workspace)
        .into_iter()
        .flat_map(|dir| [dir.join("config"), dir.join("config.worktree")])
        .collect();
    files.extend(user_configs());
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut included: Vec<PathBuf> = Vec::new();
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for file in files.drain(..) {
            if seen.contains(&file) || seen.len() >= MAX_FILES {
                continue;
            }
            seen.push(file.clone());
            let Ok(text) = codemode_base::config_file::read_config(&file) else { continue };
            let folder = file.parent().unwrap_or(Path::new("/"));
            for written in include_paths(&text) {
                if let Some(path) = resolve(&written, folder) {
                    included.push(path.clone());
                    next.push(path);
                }
            }
        }
        files = next;
    }
    let mut out: Vec<Protection> = Vec::new();
    for path in included {
        protect(workspace, &path, make_missing, &mut out);
    }
    out
}

/// Adds the protections of the included file `path` to `out`.
fn protect(workspace: &Path, path: &Path, make_missing: bool, out: &mut Vec<Protection>) {
    let inside = |p: &Path| p.starts_with(workspace) && !workspace.starts_with(p);
    let mut add = |path: PathBuf, what: &str| {
        if inside(&path) && !out.iter().any(|p| p.path == path) {
            out.push(Protection { path, what: what.to_owned(), missing_for: None });
        }
    };
    if path.symlink_metadata().is_err() && inside(path) && make_missing {
        let made = path.parent().is_some_and(|f| std::fs::create_dir_all(f).is_ok())
            && std::fs::OpenOptions::new().write(true).create_new(true).open(path).is_ok();
        if !made {
            tracing::warn!(file = %path.display(), "cannot make the missing file git includes");
        }
    }
    if path.symlink_metadata().is_err() {
        let mut folder = path.parent();
        while let Some(f) = folder
            && let Some(up) = f.parent()
            && !up.exists()
            && inside(up)
        {
            folder = Some(up);
        }
        if let Some(folder) = folder.filter(|f| !f.exists()) {
            add(folder.to_path_buf(), "the folder of a file git includes into its configuration");
        }
    }
    add(path.to_path_buf(), INCLUDED);
    if let Ok(real) = std::fs::canonicalize(path) {
        add(real, INCLUDED);
    }
}

/// The user's and the system's git configuration files, as git finds
/// them from codemode's environment.
fn user_configs() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut out = Vec::new();
    if let Some(global) = var("GIT_CONFIG_GLOBAL") {
        out.push(global);
    } else {
        let home = var("HOME");
        let xdg = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
        out.extend(xdg.map(|x| x.join("git/config")));
        out.extend(home.map(|h| h.join(".gitconfig")));
    }
    if var("GIT_CONFIG_NOSYSTEM").is_none() {
        out.push(var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig")));
    }
    out
}

/// The include `written` as git resolves it from a file in `folder`: `~/`
/// is the home folder, a relative path is relative to the including
/// file's folder; lexically normalised. `None` for `~user/` forms and an
/// empty value.
fn resolve(written: &str, folder: &Path) -> Option<PathBuf> {
    let path = if let Some(rest) = written.strip_prefix("~/") {
        std::env::var_os("HOME").map(PathBuf::from)?.join(rest)
    } else if written.starts_with('~') || written.is_empty() {
        return None;
    } else {
        folder.join(written)
    };
    Some(codemode_base::links::lexical(&path))
}

/// The values of `include.path` and `includeIf.<condition>.path` in the
/// git configuration text `text`, in order. Reads git's syntax: `[section]`,
/// `[section "sub"]` and `[section.sub]` headers (a key may follow on the
/// same line), `key = value` and bare `key` lines, names in any case,
/// `"` quoting, `\` escapes and line continuations, and `#` / `;`
/// comments.
pub(crate) fn include_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line.trim_start();
        if let Some(header) = rest.strip_prefix('[') {
            let Some((name, after)) = section_name(header) else {
                section.clear();
                continue;
            };
            section = name;
            rest = after.trim_start();
        }
        let key_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(rest.len());
        let (key, after) = rest.split_at(key_len);
        let Some(value) = after.trim_start().strip_prefix('=') else { continue };
        let value = read_value(value, &mut lines);
        if key.eq_ignore_ascii_case("path") && (section == "include" || section == "includeif") {
            out.push(value);
        }
    }
    out
}

/// The section name (lower case) of a header whose text after `[` is
/// `header`, and the text after its `]`.
fn section_name(header: &str) -> Option<(String, &str)> {
    let end = header.find(|c: char| c == ']' || c == '.' || c.is_whitespace())?;
    let name = header[..end].to_ascii_lowercase();
    let mut chars = header[end..].char_indices();
    // Skip a subsection (quoted, with `\` escapes; or after a `.`).
    let mut quoted = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quoted => {
                chars.next();
            }
            '"' => quoted = !quoted,
            ']' if !quoted => return Some((name, &header[end + i + 1..])),
            _ => {}
        }
    }
    None
}

/// A value that starts with `first` (after the `=`), read on through line
/// continuations from `lines`: quotes removed, escapes worked out, a
/// comment outside quotes dropped, blanks around it outside quotes
/// trimmed.
fn read_value<'a>(first: &'a str, lines: &mut impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut kept = 0; // `out`'s length up to its last character that is not an unquoted blank
    let mut quoted = false;
    let mut line = first.trim_start();
    loop {
        let mut chars = line.chars();
        let mut continued = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' => match chars.next() {
                    None => continued = true,
                    Some(e) => out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'b' => '\u{8}',
                        other => other,
                    }),
                },
                '#' | ';' if !quoted => break,
                c if c.is_whitespace() && !quoted => out.push(c),
                c => out.push(c),
            }
            if quoted || !out.ends_with(char::is_whitespace) {
                kept = out.len();
            }
        }
        match if continued { lines.next() } else { None } {
            Some(next) => line = next,
            None => break,
        }
    }
    out.truncate(kept);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_paths_reads_gits_syntax() {
        let text = "# a comment\n\
            [core]\n\tfsmonitor = x\n\tpath = not-this\n\
            [include]\n\tpath = ../.gitconfig ; a comment\n\
            [Include] PATH=\"with \\\"quotes\\\" # kept\"  \n\
            [includeIf \"gitdir:~/work/\"]\n\tpath = ~/work/.gitconfig\n\
            [includeif.onbranch:main]\n\tpath = long\\\n-name\n\
            [include \"sub\"]\n\tpath\n\
            [other]\n\tpath = no\n";
        assert_eq!(
            include_paths(text),
            ["../.gitconfig", "with \"quotes\" # kept", "~/work/.gitconfig", "long-name"]
        );
    }

    #[test]
    fn included_files_in_the_workspace_are_protected_and_missing_ones_made() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let git = ws.join(".git");
        std::fs::create_dir_all(git.join("objects")).unwrap();
        std::fs::create_dir_all(git.join("refs")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            git.join("config"),
            "[include]\n\tpath = ../.gitconfig\n\tpath = /etc/outside\n[includeIf \"onbranch:x\"]\n\tpath = ../conf/a/b\n",
        )
        .unwrap();
        // The included file's own include is followed.
        std::fs::write(ws.join(".gitconfig"), "[include]\n\tpath = nested.inc\n").unwrap();
        let found: Vec<PathBuf> = workspace_includes(&ws, false).into_iter().map(|p| p.path).collect();
        for p in [".gitconfig", "conf", "conf/a/b", "nested.inc"] {
            assert!(found.contains(&ws.join(p)), "{p} in {found:?}");
        }
        assert!(found.iter().all(|p| p.starts_with(&ws)), "{found:?}");
        assert!(!ws.join("conf").exists(), "made only when asked");
        let found: Vec<PathBuf> = workspace_includes(&ws, true).into_iter().map(|p| p.path).collect();
        assert!(ws.join("conf/a/b").is_file() && ws.join("nested.inc").is_file());
        assert!(!found.contains(&ws.join("conf")), "made, it is mounted itself: {found:?}");
    }
}
