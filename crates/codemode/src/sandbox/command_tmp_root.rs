//! Where sandboxed bash calls' private `TMPDIR` folders are made: settled
//! once per confinement, in a folder no command can change.
//!
//! A command may write the workspace (`workspace-write`) and the
//! `[sandbox] writable` folders. Were the root, or any folder or link on
//! the way to it, an entry of one of those, a command could decide where
//! later calls' private folders go (point a link at `<workspace>/.git/hooks`,
//! or at a folder a program loads, `~/.vim/pack/...`; rename another call's
//! private folder and put a mount's folder in its place for the engine's
//! cleanup to empty). So the process's `TMPDIR` is walked entry by entry
//! (links followed by hand, `..` taken on the real path) and refused when
//! an entry on the way, or the root itself, lies in a place commands may
//! write; then `<cache home>/codemode/tmp` is tried the same way; when
//! neither holds, bash calls are refused with what to do.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Component, Path, PathBuf};

/// Links followed on one path before it is refused as a loop (as the
/// kernel's `ELOOP` bound).
const MAX_LINKS: usize = 40;

/// The root for private `TMPDIR` folders: `tmpdir` (the process's
/// temporary folder as given) when no command can change it, else
/// `fallback` (made 0700 when missing) when that holds; `writable` are the
/// places commands may write (canonical).
///
/// # Errors
/// Neither holds: the message says why for each and what to do.
pub fn settle(tmpdir: &Path, fallback: Option<&Path>, writable: &[&Path]) -> Result<PathBuf, String> {
    let first = out_of_commands_reach(tmpdir, writable);
    let Err(why) = first else { return first };
    let Some(fallback) = fallback else {
        return Err(refusal(tmpdir, &why, None));
    };
    let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(fallback);
    let second = made
        .map_err(|e| format!("cannot be made ({e})"))
        .and_then(|()| out_of_commands_reach(fallback, writable));
    second.map_err(|why2| refusal(tmpdir, &why, Some((fallback, &why2))))
}

/// `<XDG_CACHE_HOME or ~/.cache>/codemode/tmp`, when either variable gives
/// an absolute folder.
pub fn fallback_root() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .filter(|p| p.is_absolute())?;
    Some(base.join("codemode").join("tmp"))
}

/// The message of a refused root (and of the fallback's refusal).
fn refusal(tmpdir: &Path, why: &str, fallback: Option<(&Path, &str)>) -> String {
    let also = fallback.map(|(f, w)| format!(", nor in {} ({w})", f.display())).unwrap_or_default();
    format!(
        "bash's private temporary folders cannot be made in the engine's TMPDIR {} ({why}){also}; start \
         codemode with TMPDIR set to a folder that no command may write (outside the workspace and every \
         `[sandbox] writable` folder, reached through no link in them)",
        tmpdir.display()
    )
}

/// `path` resolved entry by entry, when none of the entries looked up on
/// the way lies in (or is) a place of `writable`, and the folder reached
/// is no such place nor beneath one.
///
/// # Errors
/// Which entry, or the folder, commands could change; a relative path; a
/// missing folder; a loop of links.
fn out_of_commands_reach(path: &Path, writable: &[&Path]) -> Result<PathBuf, String> {
    if !path.is_absolute() {
        return Err("it is not an absolute path".into());
    }
    let inside = |p: &Path| writable.iter().find(|w| p.starts_with(w)).map(|w| w.to_path_buf());
    let mut resolved = PathBuf::from("/");
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_front(&mut pending, path);
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match part.to_str() {
            Some(".") | Some("") => continue,
            Some("..") => {
                resolved.pop();
                continue;
            }
            _ => {}
        }
        if let Some(place) = inside(&resolved) {
            return Err(format!(
                "{} on its way is in {}, which commands may write",
                resolved.join(&part).display(),
                place.display()
            ));
        }
        let next = resolved.join(&part);
        let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err("too many links on its way".into());
            }
            let target = std::fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if target.is_absolute() {
                resolved = PathBuf::from("/");
            }
            push_front(&mut pending, &target);
        } else if meta.is_dir() {
            resolved = next;
        } else {
            return Err(format!("{} is not a folder", next.display()));
        }
    }
    match inside(&resolved) {
        Some(place) => {
            Err(format!("{} is in {}, which commands may write", resolved.display(), place.display()))
        }
        None => Ok(resolved),
    }
}

/// Puts `path`'s parts (after its root) before what is `pending`.
fn push_front(pending: &mut VecDeque<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    for part in parts.into_iter().rev() {
        pending.push_front(part);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_root_no_command_can_change_is_kept_by_its_real_path() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("a/t")).unwrap();
        std::os::unix::fs::symlink(top.join("a/t"), top.join("l")).unwrap();
        let ws = top.join("ws");
        std::fs::create_dir(&ws).unwrap();
        assert_eq!(settle(&top.join("l"), None, &[&ws]).unwrap(), top.join("a/t"));
        // `..` is taken on the real path, as the kernel does.
        assert_eq!(settle(&top.join("l/../t"), None, &[&ws]).unwrap(), top.join("a/t"));
        // A writable place is not steerable from within when it is the root's
        // own place only through its parent: the root itself may not be one.
        assert!(settle(&ws, None, &[&ws]).is_err());
    }

    #[test]
    fn an_entry_in_a_writable_place_on_the_way_sends_it_to_the_fallback() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        let w = top.join("w");
        std::fs::create_dir_all(w.join("t")).unwrap();
        std::fs::create_dir_all(top.join("elsewhere")).unwrap();
        // A link in a writable folder, pointing outside it: its target is
        // not writable, but the link can be rewritten.
        std::os::unix::fs::symlink(top.join("elsewhere"), w.join("tl")).unwrap();
        std::os::unix::fs::symlink(w.join("tl"), top.join("outer")).unwrap();
        let fallback = top.join("cache/codemode/tmp");
        for tmpdir in [w.join("tl"), w.join("t"), top.join("outer"), w.clone()] {
            assert_eq!(settle(&tmpdir, Some(&fallback), &[&w]).unwrap(), fallback, "{}", tmpdir.display());
        }
        let err = settle(&w.join("tl"), Some(&w.join("f")), &[&w]).unwrap_err();
        assert!(
            err.contains("which commands may write") && err.contains("start codemode with TMPDIR"),
            "{err}"
        );
        assert!(settle(Path::new("rel/tmp"), None, &[]).unwrap_err().contains("not an absolute path"));
    }
}
