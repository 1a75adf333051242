//! Symbolic links on the way to a path: where codemode refuses to read or
//! write through a link a program could point elsewhere.

use std::path::{Component, Path, PathBuf};

/// The first symbolic link on the way from `root` (not itself checked)
/// down to `path` (checked), or `None` when there is none or `path` is not
/// beneath `root`. Folders above `root` are the user's own layout.
pub fn link_below<'a>(path: &'a Path, root: &Path) -> Option<&'a Path> {
    path.ancestors()
        .take_while(|a| a.starts_with(root) && *a != root)
        .find(|a| a.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()))
}

/// `path` with `.` and `..` worked out as text, without touching the file
/// system (links kept: `/a/b/../c` is `/a/c`); a `..` at the root stays at
/// the root.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_linked_file_or_folder_below_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/f"), "x").unwrap();
        std::os::unix::fs::symlink("real", root.join("linked")).unwrap();
        std::os::unix::fs::symlink("real/f", root.join("f-link")).unwrap();
        assert_eq!(link_below(&root.join("linked/f"), root), Some(root.join("linked").as_path()));
        assert_eq!(link_below(&root.join("f-link"), root), Some(root.join("f-link").as_path()));
        assert_eq!(link_below(&root.join("real/f"), root), None);
        // The root itself, and paths outside it, are not checked.
        assert_eq!(link_below(&root.join("linked/f"), &root.join("linked")), None);
        assert_eq!(link_below(Path::new("/elsewhere/f"), root), None);
    }
}
