//! Entry points for the gate's reading of paths and commands (fuzz targets
//! `gate_path` and `command_line`).

use std::path::Path;

use serde_json::json;

use crate::catalog::{PrimaryArgument, ToolSpec};
use crate::gate::primary::{self, Primary};
use crate::rule::Rule;

/// The path a file tool opens for `path` (relative to the canonical
/// workspace `root`, or absolute), relative to `root` with `/` between
/// components; empty for the root itself.
///
/// # Errors
/// The tool's refusal: the path is empty or outside the workspace.
pub fn tool_path(root: &Path, path: &str) -> Result<String, String> {
    crate::tools::beneath_rel(root, path).map(|rel| rel.to_string_lossy().into_owned()).map_err(|e| e.message)
}

/// The gate's spellings of a `write` call's `path` argument in the
/// canonical `workspace`: as written (normalised, workspace-relative when
/// inside it) and as resolved through symlinks when that differs.
pub fn gate_path(workspace: &Path, path: &str) -> (String, Option<String>) {
    let spec = ToolSpec::new("write", "", json!({})).primary_argument(PrimaryArgument::Path("path".into()));
    match primary::of(&spec, &json!({ "path": path }), workspace) {
        Some(p) => (p.written, p.resolved),
        None => (String::new(), None),
    }
}

/// The gate's spelling of a `bash` call's `command` argument: the text
/// with whitespace collapsed, and whether it has shell control characters
/// (then no allow rule with a pattern covers it).
pub fn gate_command(command: &str) -> (String, bool) {
    let p = bash_primary(command);
    (p.written, p.chained)
}

/// How the rule lists would take `rule` for a call of `tool` whose primary
/// argument is `command` (a `bash` command) or `path` (a `write` path in
/// the canonical `workspace`): `(as an allow rule, as a deny or ask rule)`.
pub fn rule_covers(rule: &Rule, tool: &str, argument: &str, workspace: Option<&Path>) -> (bool, bool) {
    let p = match workspace {
        Some(ws) => {
            let spec =
                ToolSpec::new(tool, "", json!({})).primary_argument(PrimaryArgument::Path("path".into()));
            primary::of(&spec, &json!({ "path": argument }), ws)
        }
        None => Some(bash_primary(argument)),
    };
    (
        crate::gate::rules::covers_all(rule, tool, p.as_ref()),
        crate::gate::rules::covers_any(rule, tool, p.as_ref()),
    )
}

/// Whether an allow rule's `pattern` names the protected path `name` (and
/// so lifts that protection for its tool).
pub fn names_protected(pattern: &str, name: &str) -> bool {
    crate::gate::protection::names(pattern, name)
}

/// The workspace files the command `argv` names when run in `cwd` with
/// `path` as its `PATH` (hooks, `cmd:` approvers, MCP stdio servers), and
/// why they cannot all be known, if so.
pub fn command_files(
    argv: &[String],
    cwd: &Path,
    workspace: &Path,
    path: Option<&str>,
) -> (Vec<std::path::PathBuf>, Option<String>) {
    let found = codemode_base::command_files::command_files_with_path(
        argv,
        cwd,
        workspace,
        path.map(std::ffi::OsStr::new),
    );
    (found.files, found.undetermined)
}

/// The most files [`command_files`] gives for one command.
pub const MAX_COMMAND_FILES: usize = codemode_base::command_files::MAX_FILES;

fn bash_primary(command: &str) -> Primary {
    let spec = ToolSpec::new("bash", "", json!({})).primary_argument(PrimaryArgument::Text("command".into()));
    primary::of(&spec, &json!({ "command": command }), Path::new("/")).unwrap_or(Primary {
        written: String::new(),
        resolved: None,
        command: true,
        target: None,
        chained: false,
    })
}

/// The values of `include.path` and `includeIf.<condition>.path` the gate
/// finds in the git configuration text `text` (the files it protects when
/// they lie in the workspace), in order.
pub fn git_include_paths(text: &str) -> Vec<String> {
    crate::gate::git_includes::include_paths(text)
}
