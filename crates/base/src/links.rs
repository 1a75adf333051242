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

/// The first symbolic link that lies beneath `root` (canonical) among the
/// links met while resolving `path` (absolute) the way the kernel does,
/// each link followed where it leads (at most 40) and `..` taken from
/// where the links led, the part that does not exist taken as written;
/// `None` when no such link is met. A link beneath a folder a program may
/// write (the workspace) could be pointed elsewhere by it, and with it
/// whatever `path` decides (where run state is kept).
/// Unlike [`link_below`], `path` need not be beneath `root` as written: a
/// link outside may lead into `root` and through a link there.
pub fn link_met_beneath(path: &Path, root: &Path) -> Option<PathBuf> {
    links_met(path).into_iter().find(|link| link.starts_with(root))
}

/// Every symbolic link met while resolving `path` (absolute) as
/// [`resolve_as_kernel`] does, each by its own resolved location, in the
/// order met; empty when the path leads nowhere through a link.
pub fn links_met(path: &Path) -> Vec<PathBuf> {
    // Most paths have no link on their way: one `realpath` says so.
    if std::fs::canonicalize(path).is_ok_and(|real| real == path) {
        return Vec::new();
    }
    let mut met = Vec::new();
    resolve_with(path, &mut |link| met.push(link.to_path_buf()));
    met
}

/// Where `path` (absolute) leads, resolved the way the kernel does: each
/// symbolic link followed where it leads, dangling or not (at most 40),
/// `..` taken from where the links led, the part that does not exist taken
/// as written. Unlike `std::fs::canonicalize`, a path that does not exist
/// yet (a folder a link names before it is made) resolves too: it is where
/// making it would make it.
pub fn resolve_as_kernel(path: &Path) -> PathBuf {
    match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(_) => resolve_with(path, &mut |_| {}),
    }
}

/// The walk of [`resolve_as_kernel`], telling `on_link` each link met (its
/// location, itself resolved).
fn resolve_with(path: &Path, on_link: &mut dyn FnMut(&Path)) -> PathBuf {
    let parts = |p: &Path| -> Vec<PathBuf> {
        p.components()
            .rev()
            .filter(|c| *c != Component::CurDir)
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect()
    };
    let mut todo = parts(path);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part.has_root() {
            at = PathBuf::from("/");
            continue;
        }
        if part.as_os_str() == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let Ok(target) = next.symlink_metadata().and_then(|m| {
            if m.file_type().is_symlink() {
                std::fs::read_link(&next)
            } else {
                Err(std::io::ErrorKind::Other.into())
            }
        }) else {
            // A folder or file, or missing (then the rest is as written).
            at = next;
            continue;
        };
        on_link(&next);
        links += 1;
        if links > 40 {
            // A loop: the rest as written, from here.
            at = next;
            continue;
        }
        todo.extend(parts(&target));
    }
    at
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
    fn a_link_met_beneath_the_root_is_found_however_the_path_reaches_it() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, out) = (top.join("ws"), top.join("out"));
        std::fs::create_dir_all(ws.join("real/state")).unwrap();
        std::fs::create_dir_all(out.join("state")).unwrap();
        // Beneath the root as written: the link there.
        std::os::unix::fs::symlink(ws.join("real"), ws.join("local")).unwrap();
        assert_eq!(link_met_beneath(&ws.join("local/state/codemode"), &ws), Some(ws.join("local")));
        // No link at all, and a missing rest.
        assert_eq!(link_met_beneath(&ws.join("real/state/codemode/x"), &ws), None);
        // A link outside leading to one inside (relative target too).
        std::os::unix::fs::symlink("../ws/local", out.join("via")).unwrap();
        assert_eq!(link_met_beneath(&out.join("via/state"), &ws), Some(ws.join("local")));
        // A link inside leading outside is still one met inside.
        std::os::unix::fs::symlink(out.join("state"), ws.join("away")).unwrap();
        assert_eq!(link_met_beneath(&ws.join("away/codemode"), &ws), Some(ws.join("away")));
        // Links outside only.
        std::os::unix::fs::symlink(out.join("state"), out.join("alias")).unwrap();
        assert_eq!(link_met_beneath(&out.join("alias/codemode"), &ws), None);
        // `..` after a link goes up from where the link led: `alias/..` is
        // `out`, and `out/via` then leads back in through `local`.
        assert_eq!(link_met_beneath(&out.join("alias/../via/state"), &ws), Some(ws.join("local")));
        // A loop ends.
        std::os::unix::fs::symlink(out.join("loop"), out.join("loop")).unwrap();
        assert_eq!(link_met_beneath(&out.join("loop/x"), &ws), None);
        // Where a path leads: through a dangling link into a folder not
        // made yet, and `..` after a link.
        std::os::unix::fs::symlink(ws.join("config"), out.join("dangling")).unwrap();
        assert_eq!(resolve_as_kernel(&out.join("dangling/codemode")), ws.join("config/codemode"));
        std::os::unix::fs::symlink(ws.join("real/state"), out.join("deep")).unwrap();
        assert_eq!(resolve_as_kernel(&out.join("deep/../x")), ws.join("real/x"));
    }

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
