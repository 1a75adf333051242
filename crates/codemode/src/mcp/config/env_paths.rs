//! The workspace paths a stdio server's environment names (docs/SECURITY.md,
//! "Protected paths"). `PYTHONPATH=lib` makes the server import
//! `lib/json.py` before its own script's `json`; `NODE_OPTIONS=--require
//! ./x.js`, `LD_PRELOAD`, `PATH` and the rest do the same for other
//! programs. A trusted server runs outside the sandbox, so what these
//! variables name must be pinned (a file) or protected (a folder) as its
//! script is.
//!
//! Path lists ([`PATH_LISTS`]) are split on `:`, the `*OPTIONS` variables
//! ([`OPTION_VARIABLES`]) on blanks (only the operands of the options that
//! load a file count); each path is resolved against the server's working
//! folder (an empty entry is that folder). A value with `$`, a glob or a
//! quote cannot be read this way: the server's files are undetermined.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use codemode_base::command_files::MAX_LOOKUPS;

/// Variables whose value is a `:`-separated list of paths (or one path)
/// that a program loads code from (`LD_PRELOAD` is also split on blanks).
const PATH_LISTS: &[&str] = &[
    "PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "NODE_PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "CLASSPATH",
    "GEM_PATH",
    "GEM_HOME",
    "BUNDLE_GEMFILE",
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
];

/// Variables holding command-line options, with the options whose operand
/// (the next word, `--opt=X`, or for a one-letter option `-rX`) loads a
/// file or adds a folder to the load path.
const OPTION_VARIABLES: &[(&str, &[&str])] = &[
    ("NODE_OPTIONS", &["--require", "-r", "--import", "--loader", "--experimental-loader"]),
    ("RUBYOPT", &["-r", "-I"]),
    ("PERL5OPT", &["-I"]),
];

/// What [`env_paths`] found in one server's environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvPaths {
    /// Files (or missing paths) beneath the workspace, as named and as
    /// resolved, with the variable that names each.
    pub files: Vec<(PathBuf, String)>,
    /// Existing folders beneath the workspace (not the workspace itself),
    /// as named and as resolved, with the variable that names each.
    pub folders: Vec<(PathBuf, String)>,
    /// Why the paths cannot all be known (the first reason found). Never
    /// quotes a value: an `envFile`'s values are secrets.
    pub undetermined: Option<String>,
    /// The paths in `files` and in `folders`, to keep each list without
    /// repeats in time linear in its length.
    seen: (HashSet<PathBuf>, HashSet<PathBuf>),
    /// Paths looked at so far: past [`MAX_LOOKUPS`] the reading stops and
    /// the paths are undetermined, as for a command's words.
    lookups: usize,
}

/// The workspace paths the variables of `env` name for a server running
/// in `cwd` (absolute); `workspace` is canonical. See the module docs.
pub(crate) fn env_paths(env: &BTreeMap<String, String>, cwd: &Path, workspace: &Path) -> EnvPaths {
    let mut out = EnvPaths::default();
    for (key, value) in env {
        let words: Vec<String> = if PATH_LISTS.contains(&key.as_str()) {
            let blanks = key == "LD_PRELOAD";
            value.split(|c: char| c == ':' || (blanks && c.is_whitespace())).map(str::to_owned).collect()
        } else if let Some((_, options)) = OPTION_VARIABLES.iter().find(|(k, _)| k == key) {
            if value.contains(['"', '\'', '\\']) {
                out.undetermined
                    .get_or_insert(format!("its `env` {key} holds quotes codemode does not read"));
                continue;
            }
            operands(value, options)
        } else {
            continue;
        };
        for word in words {
            out.add(key, &word, cwd, workspace);
        }
    }
    out
}

/// The operands of `options` in the blank-separated `value`.
fn operands(value: &str, options: &[&str]) -> Vec<String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        for option in options {
            if word == option {
                out.extend(words.get(i + 1).map(|w| (*w).to_owned()));
            } else if let Some(rest) = word.strip_prefix(option) {
                let short = !option.starts_with("--");
                if let Some(rest) = rest.strip_prefix('=').or(short.then_some(rest)) {
                    out.push(rest.to_owned());
                }
            }
        }
    }
    // A module name (`--require dotenv/config`, `-rjson`) is found as the
    // program's own imports are; only a path is a path.
    out.into_iter()
        .map(|w| w.strip_prefix("file://").map_or(w.clone(), str::to_owned))
        .filter(|w| w.starts_with('.') || w.starts_with('/') || w.contains('$'))
        .collect()
}

/// What was found, not how the reading kept count.
impl PartialEq for EnvPaths {
    fn eq(&self, other: &Self) -> bool {
        (&self.files, &self.folders, &self.undetermined)
            == (&other.files, &other.folders, &other.undetermined)
    }
}

impl Eq for EnvPaths {}

impl EnvPaths {
    fn add(&mut self, key: &str, word: &str, cwd: &Path, workspace: &Path) {
        self.lookups = self.lookups.saturating_add(1);
        if self.lookups > MAX_LOOKUPS {
            self.undetermined.get_or_insert(format!(
                "its `env` names more than {MAX_LOOKUPS} paths; codemode stops reading it there"
            ));
            return;
        }
        if word.contains(['$', '*', '?', '[', '`']) {
            self.undetermined
                .get_or_insert(format!("its `env` {key} holds `$` or a glob, so its paths cannot be known"));
            return;
        }
        let named = codemode_base::links::lexical(&cwd.join(word));
        let real = std::fs::canonicalize(&named).ok();
        for path in std::iter::once(named.clone()).chain(real) {
            if !path.starts_with(workspace) && !workspace.starts_with(&path) {
                continue;
            }
            if workspace.starts_with(&path) {
                self.undetermined.get_or_insert(format!(
                    "its `env` {key} names the workspace itself (or a folder holding it), which codemode \
                     cannot protect whole: name a folder of the workspace instead"
                ));
                return;
            }
            let (list, seen) = if path.is_dir() {
                (&mut self.folders, &mut self.seen.1)
            } else {
                (&mut self.files, &mut self.seen.0)
            };
            if seen.insert(path.clone()) {
                list.push((path, key.to_owned()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn paths(list: &[(PathBuf, String)]) -> Vec<PathBuf> {
        list.iter().map(|(p, _)| p.clone()).collect()
    }

    #[test]
    fn path_lists_and_loader_options_name_workspace_files_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("lib")).unwrap();
        std::fs::create_dir_all(ws.join("srv/bin")).unwrap();
        std::fs::write(ws.join("srv/pre.js"), "").unwrap();
        let found = env_paths(
            &env(&[
                ("PYTHONPATH", "../lib:/usr/lib/python3"),
                ("PATH", "bin:/usr/bin"),
                (
                    "NODE_OPTIONS",
                    "--max-old-space-size=100 --require ./pre.js --import=./later.mjs -r dotenv",
                ),
                ("LD_PRELOAD", "./x.so ./y.so"),
                ("HOME", "lib"),
            ]),
            &ws.join("srv"),
            &ws,
        );
        assert_eq!(
            paths(&found.folders),
            [ws.join("srv/bin"), ws.join("lib")],
            "in the order of the variables"
        );
        let files = paths(&found.files);
        for f in ["srv/pre.js", "srv/later.mjs", "srv/x.so", "srv/y.so"] {
            assert!(files.contains(&ws.join(f)), "{f} in {files:?}");
        }
        assert_eq!(files.len(), 4, "{files:?}");
        assert_eq!(found.undetermined, None);
    }

    /// A cloned workspace's `.mcp.json` can give a server's `env` a path
    /// list of a megabyte: its entries were each looked up and kept without
    /// repeats by a scan of those before (10,000 entries held `codemode
    /// run` 68 s, 20,000 244 s). Now the reading stops at the bound a
    /// command's words have, and the server's files are undetermined.
    #[test]
    fn a_long_path_list_is_read_to_a_bound_and_undetermined() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let list: Vec<String> = (0..3 * MAX_LOOKUPS).map(|i| format!("a{i}")).collect();
        let found = env_paths(&env(&[("NODE_PATH", &list.join(":"))]), &ws, &ws);
        assert_eq!(found.files.len(), MAX_LOOKUPS, "read to the bound, each entry once");
        let why = found.undetermined.expect("past the bound the paths are undetermined");
        assert!(why.contains(&format!("more than {MAX_LOOKUPS} paths")), "{why}");
        // Under the bound, nothing changes.
        let found = env_paths(&env(&[("NODE_PATH", "a:a:b")]), &ws, &ws);
        assert_eq!(paths(&found.files), [ws.join("a"), ws.join("b")]);
        assert_eq!(found.undetermined, None);
    }

    #[test]
    fn a_variable_a_glob_or_the_workspace_itself_is_undetermined() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        for (key, value) in [
            ("PYTHONPATH", "$HOME/lib"),
            ("CLASSPATH", "lib/*"),
            ("PATH", ":/usr/bin"),
            ("PYTHONPATH", "."),
            ("NODE_OPTIONS", "--require \"./a b.js\""),
        ] {
            let found = env_paths(&env(&[(key, value)]), &ws, &ws);
            let why = found.undetermined.unwrap_or_else(|| panic!("{key}={value}"));
            assert!(!why.contains(value), "never quotes the value: {why}");
        }
        assert_eq!(env_paths(&env(&[("PYTHONPATH", "/usr/lib")]), &ws, &ws), EnvPaths::default());
    }
}
