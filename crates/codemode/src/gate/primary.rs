//! The primary argument of a call, in the spellings rules are matched
//! against (`docs/POLICY.md`, "Rules").
//!
//! A path is matched as written (with `.` and `..` resolved as text) and as
//! the tool will really reach it (symlinks followed, through the deepest
//! folder that exists), both relative to the workspace when inside it. A
//! deny or ask rule covers the call when it covers either spelling; an allow
//! rule only when it covers both, so a symlink can neither dodge a deny rule
//! nor stretch an allow rule. A command is matched with runs of whitespace
//! collapsed to one space.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::catalog::{PrimaryArgument, ToolSpec};

/// The spellings of one call's primary argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Primary {
    /// As written, normalised (workspace-relative for paths inside it).
    pub written: String,
    /// As the tool will reach it, when that differs: the resolved path, or
    /// a command's exact text when the spelling collapsed its whitespace.
    pub resolved: Option<String>,
    /// The argument is a shell command (text), not a path.
    pub command: bool,
    /// The absolute path the tool will reach (paths only).
    pub target: Option<PathBuf>,
    /// The command, as given, has shell control characters (`; & | < > $`,
    /// a backquote, a newline or carriage return): it may be more than one
    /// plain command.
    pub chained: bool,
}

/// Characters that make a shell command more than one plain command.
pub(crate) const SHELL_CONTROL: &[char] = &[';', '&', '|', '<', '>', '$', '`', '\n', '\r'];

impl Primary {
    /// Every spelling rules are matched against, written first. A command
    /// has one: its text with whitespace collapsed.
    pub(crate) fn spellings(&self) -> impl Iterator<Item = &str> {
        let resolved = if self.command { None } else { self.resolved.as_deref() };
        std::iter::once(self.written.as_str()).chain(resolved)
    }

    /// What the call acts on, as the tool will see it: the resolved path,
    /// or the command exactly as given (spacing kept).
    pub(crate) fn subject(&self) -> &str {
        self.resolved.as_deref().unwrap_or(&self.written)
    }
}

/// The primary argument of a call of `spec` with `args`, or `None` when the
/// tool has none or the call does not give it. `workspace` is canonical.
pub(crate) fn of(spec: &ToolSpec, args: &Value, workspace: &Path) -> Option<Primary> {
    match spec.primary_argument.as_ref()? {
        PrimaryArgument::Text(name) => {
            let text = args.get(name)?.as_str()?;
            let written = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let chained = text.contains(SHELL_CONTROL);
            // `resolved` holds the exact text when the spelling collapsed it,
            // so approvers see the command that will really run.
            let resolved = (written != text).then(|| text.to_owned());
            Some(Primary { written, resolved, command: true, target: None, chained })
        }
        PrimaryArgument::Path(name) => {
            let raw = args.get(name)?.as_str()?;
            let lexical = codemode_base::links::lexical(&workspace.join(raw));
            let written = shown(workspace, &lexical);
            let target = resolve(&lexical);
            let resolved = target.as_deref().map(|r| shown(workspace, r)).filter(|r| *r != written);
            Some(Primary { written, resolved, command: false, target, chained: false })
        }
    }
}

/// `path` with symlinks followed through its deepest existing ancestor.
fn resolve(path: &Path) -> Option<PathBuf> {
    let mut tail = Vec::new();
    let mut existing = path;
    while existing.symlink_metadata().is_err() {
        tail.push(existing.file_name()?);
        existing = existing.parent()?;
    }
    let mut real = std::fs::canonicalize(existing).ok()?;
    for name in tail.iter().rev() {
        real.push(name);
    }
    Some(real)
}

/// `path` relative to `workspace` with `/` separators when inside it, else
/// absolute. A `\` becomes `/` only where it is a separator (Windows): on
/// Unix it is a character of a name, and turning it into `/` would match
/// rules against a path the tool does not open (`docs\x` at the root is
/// not under `docs/`).
fn shown(workspace: &Path, path: &Path) -> String {
    match path.strip_prefix(workspace) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) if std::path::MAIN_SEPARATOR == '\\' => rel.to_string_lossy().replace('\\', "/"),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

/// The primary argument of a `bash` call running `command`, for tests of
/// the steps that read it.
#[cfg(test)]
pub(crate) fn of_command(command: &str) -> Primary {
    let spec = ToolSpec::new("bash", "", serde_json::json!({}))
        .primary_argument(PrimaryArgument::Text("command".into()));
    of(&spec, &serde_json::json!({ "command": command }), Path::new("/")).expect("a command is given")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path_spec() -> ToolSpec {
        ToolSpec::new("write", "", json!({})).primary_argument(PrimaryArgument::Path("path".into()))
    }

    #[test]
    fn paths_are_normalised_and_resolved_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(ws.join("secrets")).unwrap();
        let p = |raw: &str| of(&path_spec(), &json!({"path": raw}), &ws).unwrap();
        assert_eq!(p("./secrets/../secrets/x").written, "secrets/x");
        assert_eq!(p(ws.join("secrets/x").to_str().unwrap()).written, "secrets/x");
        assert_eq!(p("secrets/x").resolved, None);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(ws.join("secrets"), ws.join("link")).unwrap();
            let linked = p("link/new/file.txt");
            assert_eq!(linked.written, "link/new/file.txt");
            assert_eq!(linked.resolved.as_deref(), Some("secrets/new/file.txt"));
            assert_eq!(linked.subject(), "secrets/new/file.txt");
            // An absolute path through a symlink to the workspace resolves
            // into it.
            let outer = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(&ws, outer.path().join("wslink")).unwrap();
            let via = p(outer.path().join("wslink/secrets/a").to_str().unwrap());
            assert_eq!(via.resolved.as_deref(), Some("secrets/a"));
        }
    }

    /// A backslash is a character of a file name on Unix, not a separator:
    /// the gate once spelt `docs\..\x` (one file at the root) as
    /// `docs/../x`, which `write(docs/**)` matched, and which the gate
    /// reading its own spelling again took as `x`.
    #[cfg(unix)]
    #[test]
    fn a_backslash_is_part_of_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let p = |raw: &str| of(&path_spec(), &json!({"path": raw}), &ws).unwrap();
        let written = p("docs\\..\\..\\x").written;
        assert_eq!(written, "docs\\..\\..\\x");
        assert_eq!(p(&written).written, written, "the spelling reads back as itself");
        let rule = crate::rule::Rule::parse("write(docs/**)").unwrap();
        assert!(!rule.matches("write", Some(&written)), "a file at the root is not under docs/");
    }

    #[test]
    fn commands_collapse_whitespace() {
        let spec =
            ToolSpec::new("bash", "", json!({})).primary_argument(PrimaryArgument::Text("command".into()));
        let p = of(&spec, &json!({"command": "  rm   -rf\tdocs "}), Path::new("/")).unwrap();
        assert_eq!(p.written, "rm -rf docs");
        assert_eq!(p.subject(), "  rm   -rf\tdocs ", "approvers see the exact command");
        assert!(p.command && !p.chained);
        let chained = of(&spec, &json!({"command": "git status\nrm x"}), Path::new("/")).unwrap();
        assert!(chained.chained, "the newline counts even though the spelling collapses it");
    }
}
