//! The workspace boundary: every path a file tool touches is resolved
//! against the workspace root and must stay inside it, after `..` and
//! symlinks are resolved.

use std::path::{Path, PathBuf};

use crate::catalog::ToolError;

/// Resolves `path` (relative to `root`, or absolute) to an existing file or
/// folder inside `root`. `root` must be canonical.
///
/// # Errors
/// The path is empty, does not exist, or leads outside the workspace (by
/// `..`, an absolute path, or a symlink).
pub(crate) fn resolve_existing(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::new("`path` is empty: give a path relative to the workspace root"));
    }
    let joined = root.join(path);
    // Refuse what is lexically outside before touching the file system, so
    // refusals do not tell which paths exist outside the workspace.
    if !lexically_inside(root, &joined) {
        return Err(ToolError::new(format!(
            "`{path}` is outside the workspace `{}`; tools only reach files inside it",
            root.display()
        )));
    }
    let real = std::fs::canonicalize(&joined).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::new(format!(
            "`{path}` does not exist in the workspace (file_search finds files by name)"
        )),
        _ => ToolError::new(format!("cannot open `{path}`: {e}")),
    })?;
    if !real.starts_with(root) {
        return Err(ToolError::new(format!(
            "`{path}` is outside the workspace `{}`; tools only reach files inside it",
            root.display()
        )));
    }
    Ok(real)
}

/// Resolves `path` for writing: the file may not exist yet, nor its parent
/// folders. The deepest existing ancestor is resolved (symlinks followed) and
/// must be inside `root`; the folders below it must be plain names (no `..`).
/// An existing file is resolved through its symlinks, so writing through a
/// link inside the workspace updates its target, and a link out is refused.
///
/// # Errors
/// The path is empty, names a folder, or leads outside the workspace.
pub(crate) fn resolve_for_write(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::new("`path` is empty: give a path relative to the workspace root"));
    }
    let outside = || {
        ToolError::new(format!(
            "`{path}` is outside the workspace `{}`; tools only reach files inside it",
            root.display()
        ))
    };
    let joined = root.join(path);
    if joined.symlink_metadata().is_ok() {
        let real = std::fs::canonicalize(&joined)
            .map_err(|e| ToolError::new(format!("cannot open `{path}`: {e}")))?;
        if !real.starts_with(root) {
            return Err(outside());
        }
        if real.is_dir() {
            return Err(ToolError::new(format!("`{path}` is a folder, not a file")));
        }
        return Ok(real);
    }
    let mut tail = Vec::new();
    let mut existing = joined.as_path();
    while existing.symlink_metadata().is_err() {
        let name = existing.file_name().ok_or_else(outside)?;
        tail.push(name.to_owned());
        existing = existing.parent().ok_or_else(outside)?;
    }
    // `file_name` is None for a trailing `..`, so a `..` below a missing
    // folder has already been refused above.
    let base =
        std::fs::canonicalize(existing).map_err(|e| ToolError::new(format!("cannot open `{path}`: {e}")))?;
    if !base.starts_with(root) {
        return Err(outside());
    }
    if !base.is_dir() {
        return Err(ToolError::new(format!(
            "`{path}` goes through `{}`, which is a file",
            relative(root, &base)
        )));
    }
    let mut real = base;
    for name in tail.iter().rev() {
        real.push(name);
    }
    if path.ends_with('/') {
        return Err(ToolError::new(format!("`{path}` ends with `/`: give a file path")));
    }
    Ok(real)
}

/// Whether `path`, with `.` and `..` resolved as text (no symlinks), stays
/// inside `root`.
fn lexically_inside(root: &Path, path: &Path) -> bool {
    use std::path::Component;
    let mut normal = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !normal.pop() {
                    return false;
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal.starts_with(root)
}

/// A walk of `dir` as the search tools see the workspace `root`: files
/// `.gitignore` and friends leave out are skipped (also outside a git
/// repository), hidden files are included, links are not followed, and
/// paths (relative to `root`) that `exclude` matches are skipped with
/// everything below them.
pub(crate) fn walk(root: &Path, dir: &Path, exclude: globset::GlobSet) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    let root = root.to_path_buf();
    builder
        .hidden(false)
        .require_git(false)
        .filter_entry(move |e| !exclude.is_match(relative(&root, e.path())));
    builder
}

/// `path` relative to `root`, with `/` separators.
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let s = rel.to_string_lossy().replace('\\', "/");
    if s.is_empty() { ".".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "s").unwrap();
        std::fs::write(root.join("ok.txt"), "o").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();

        assert!(resolve_existing(&root, "ok.txt").is_ok());
        for bad in ["../secret.txt", outer.path().join("secret.txt").to_str().unwrap(), "/etc/passwd"] {
            let e = resolve_existing(&root, bad).unwrap_err();
            assert!(e.message.contains("outside the workspace"), "{bad}: {e}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("link")).unwrap();
            let e = resolve_existing(&root, "link").unwrap_err();
            assert!(e.message.contains("outside the workspace"), "{e}");
        }
        assert!(resolve_existing(&root, "missing.txt").unwrap_err().message.contains("does not exist"));
        assert!(resolve_existing(&root, " ").unwrap_err().message.contains("empty"));
        // Paths outside are refused the same way whether they exist or not.
        let e = resolve_existing(&root, "/no/such/place").unwrap_err();
        assert!(e.message.contains("outside the workspace"), "{e}");
    }

    #[test]
    fn write_paths_stay_inside_the_workspace() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("file.txt"), "f").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();

        assert_eq!(resolve_for_write(&root, "new.txt").unwrap(), root.join("new.txt"));
        assert_eq!(resolve_for_write(&root, "a/b/c.txt").unwrap(), root.join("a/b/c.txt"));
        assert_eq!(resolve_for_write(&root, "sub/../x.txt").unwrap(), root.join("x.txt"));
        for bad in ["../escape.txt", "a/../../escape.txt", "/tmp/escape.txt", "sub/../../escape.txt"] {
            let e = resolve_for_write(&root, bad).unwrap_err();
            assert!(e.message.contains("outside the workspace"), "{bad}: {e}");
        }
        assert!(resolve_for_write(&root, "sub").unwrap_err().message.contains("folder"));
        assert!(resolve_for_write(&root, "file.txt/inner").unwrap_err().message.contains("is a file"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path(), root.join("out")).unwrap();
            std::os::unix::fs::symlink(outer.path().join("secret"), root.join("dangling")).unwrap();
            std::os::unix::fs::symlink(root.join("file.txt"), root.join("inner-link")).unwrap();
            for bad in ["out/x.txt", "out/new/x.txt", "dangling"] {
                let e = resolve_for_write(&root, bad).unwrap_err();
                assert!(
                    e.message.contains("outside the workspace") || e.message.contains("cannot open"),
                    "{bad}: {e}"
                );
            }
            assert_eq!(resolve_for_write(&root, "inner-link").unwrap(), root.join("file.txt"));
        }
    }
}
