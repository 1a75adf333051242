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
    }
}
