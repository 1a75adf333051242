//! Folders that decide later calls (run state with its recorded
//! decisions, the trust record, MCP login tokens, the MCP schema cache)
//! reached through a symbolic link a program could rewrite: refused when
//! the engine is built (docs/SECURITY.md, "Run state is outside the
//! workspace" and "Trust").
//!
//! The sandbox covers or protects such a folder by its real path and pins
//! the real folders on its way as mount points (they cannot be renamed),
//! but a link cannot be pinned: a link on the way that lies in the
//! workspace, or in a folder the sandbox makes writable, can be pointed by
//! a bash command at a folder the program made, and every later lookup of
//! the path (this process's next receipt, the next process's trust record
//! or paused run) goes there. Where the folder is is the user's layout;
//! it must not be the program's.

use std::path::{Path, PathBuf};

use super::builder::BuildError;

/// A folder that decides later calls, as the engine names it.
pub(super) struct Decisive<'a> {
    /// The folder, as the engine will use it.
    pub path: &'a Path,
    /// What it is (`the state folder`, `the trust record's folder`).
    pub what: &'a str,
    /// What the user sets to name it without the link (`set
    /// XDG_STATE_HOME to`), or how to name it otherwise.
    pub set: &'a str,
    /// The path whose real location the error gives as the value to set
    /// (`$XDG_STATE_HOME` for the state folder).
    pub shown: PathBuf,
}

/// Refuses the first of `folders` whose path, resolved the way the kernel
/// does, meets a symbolic link beneath one of `roots` (the workspace and the
/// folders the sandbox makes writable, each canonical).
///
/// # Errors
/// [`BuildError::RewritableLink`] naming the folder, the link, the root it
/// lies in, and what to set instead.
pub(super) fn refuse(roots: &[&Path], folders: &[Decisive<'_>]) -> Result<(), BuildError> {
    for folder in folders {
        let met = codemode_base::links::links_met(folder.path);
        for root in roots {
            let Some(link) = met.iter().find(|link| link.starts_with(root)) else { continue };
            return Err(BuildError::RewritableLink(message(folder, link, root, roots[0])));
        }
    }
    Ok(())
}

/// [`refuse`] for every folder of the engine that decides later calls
/// (its runs folder, its hidden run-state folders, the trust record's
/// folder, the MCP login tokens' folder and the MCP schema cache), against
/// the workspace and the folders `confinement` lets the bash sandbox write.
///
/// # Errors
/// As [`refuse`].
pub(super) fn refuse_for_engine(
    confinement: &crate::sandbox::Confinement,
    state: &super::run_state::RunStateFolders,
    mcp_cache: Option<&Path>,
) -> Result<(), BuildError> {
    let parent = |p: &'_ Path| p.parent().unwrap_or(p).to_path_buf();
    // `$XDG_STATE_HOME` for the default state folder (`<it>/codemode`).
    let state_home = state.hidden.first().map(|h| parent(h)).unwrap_or_else(|| state.spill_root.clone());
    let state_set = "set XDG_STATE_HOME (or name the state folder) to";
    let mut folders = vec![Decisive {
        path: &state.spill_root,
        what: "the runs folder",
        set: state_set,
        shown: state_home.clone(),
    }];
    folders.extend(state.hidden.iter().map(|h| Decisive {
        path: h,
        what: "the run-state folder",
        set: state_set,
        shown: state_home.clone(),
    }));
    let user = super::confinement::decisive_folders(mcp_cache);
    for (folder, what) in &user {
        // Each is `<home>/codemode[/...]`: what to set is `<home>`.
        let home =
            folder.ancestors().find(|a| a.ends_with("codemode")).map_or_else(|| folder.clone(), parent);
        let set =
            if *what == "the MCP schema cache" { "set XDG_CACHE_HOME to" } else { "set XDG_CONFIG_HOME to" };
        folders.push(Decisive { path: folder, what, set, shown: home });
    }
    let mut roots: Vec<&Path> = vec![&confinement.workspace];
    roots.extend(confinement.writable.iter().map(PathBuf::as_path));
    refuse(&roots, &folders)
}

/// The error for `folder` reached through `link`, beneath `root`.
fn message(folder: &Decisive<'_>, link: &Path, root: &Path, workspace: &Path) -> String {
    let in_root = if root == workspace {
        format!("the workspace {}", root.display())
    } else {
        format!("{}, which the bash sandbox lets commands write", root.display())
    };
    // Where the path leads now: the folder to name when it is the
    // user's, not a program's.
    let now = format!(
        "{} (where it leads now; check that it is yours)",
        codemode_base::links::resolve_as_kernel(&folder.shown).display()
    );
    format!(
        "{} {} is reached through the symbolic link {}, which is inside {in_root}: a program's bash \
         command could point the link elsewhere and decide what later runs read there (recorded \
         decisions, trust, logins); {} {now}, written without the link",
        folder.what,
        folder.path.display(),
        link.display(),
        folder.set,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_workspace_or_a_writable_folder_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, dots, real) = (top.join("ws"), top.join("dots"), top.join("real"));
        for d in [&ws, &dots, &real] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Outside both, leading into the writable folder and through a
        // link there.
        std::os::unix::fs::symlink(&real, dots.join("state")).unwrap();
        std::os::unix::fs::symlink(dots.join("state"), top.join("state")).unwrap();
        let state = top.join("state/codemode");
        let shown = top.join("state");
        let folder =
            [Decisive { path: &state, what: "the state folder", set: "set XDG_STATE_HOME to", shown }];
        assert!(refuse(&[&ws], &folder).is_ok(), "the link is outside the workspace");
        let err = refuse(&[&ws, &dots], &folder).unwrap_err().to_string();
        assert!(err.contains(&dots.join("state").display().to_string()), "{err}");
        assert!(err.contains("which the bash sandbox lets commands write"), "{err}");
        assert!(err.contains(&format!("XDG_STATE_HOME to {} (where it leads now", real.display())), "{err}");
        // In the workspace.
        std::os::unix::fs::symlink(&real, ws.join(".config")).unwrap();
        let trust = ws.join(".config/codemode");
        let folder = [Decisive {
            path: &trust,
            what: "the trust record's folder",
            set: "set XDG_CONFIG_HOME",
            shown: trust.clone(),
        }];
        let err = refuse(&[&ws, &dots], &folder).unwrap_err().to_string();
        assert!(err.contains("inside the workspace") && err.contains("XDG_CONFIG_HOME"), "{err}");
    }
}
