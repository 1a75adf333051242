//! A decision binds to what the person saw (docs/SECURITY.md). A call that
//! acts on a path is asked about as that path resolved when it was asked
//! (links followed, `docs/deploy.yml` reached through `docs -> ci/flows`
//! is `ci/flows/deploy.yml`); a program may change a link or rename a
//! folder while the person decides, or between a pause and the resume.
//! So the approval records the object ([`bind`]: the resolved path and the
//! device and inode of the deepest folder on the way that existed), and
//! the call runs after the approval only if its path still resolves to it
//! ([`check`]), in the same run (the `after_approval` step) and on resume
//! (the journal's `pending` record keeps the object).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::primary::{self, Primary};
use crate::catalog::ToolSpec;
use crate::journal::record::BoundObject;

/// The object a call acts on now, from its primary argument: for a tool
/// whose primary argument is a path, its resolved path (relative to
/// `workspace` when inside it, so that a run paused in one checkout and
/// resumed in another on a shared store binds the same object) and the
/// folder on the way; `None` for a command and when the path cannot be
/// resolved.
pub(crate) fn of_primary(primary: &Primary, workspace: &Path) -> Option<BoundObject> {
    if primary.command {
        return None;
    }
    let target = primary.target.as_deref()?;
    let folder = existing_folder(target)?;
    let path = target.strip_prefix(workspace).unwrap_or(target);
    Some(BoundObject {
        path: path.to_string_lossy().into_owned(),
        folder: folder.to_string_lossy().into_owned(),
        id: id_of(&folder),
        content: None,
    })
}

/// Why a call whose path resolves to nothing (a link to a missing target,
/// a loop of links) is refused instead of asked: no object can be shown to
/// the person nor bound, and the link could name anything by the time the
/// call runs.
pub(crate) fn unbindable(written: &str) -> String {
    format!(
        "`{written}` goes through a link that resolves to nothing (a missing target or a loop), so what the call \
         would act on cannot be shown to a person or bound to the approval; the call is refused rather than \
         asked. Make the link name an existing folder, or use the path it should name"
    )
}

/// [`check`] for a pending call allowed on resume, then whether its file
/// changed since the pause (found when the resume started:
/// `PendingRecord::changed_since_pause`, journal/files_seen.rs): a call on
/// a path recorded without its object (a journal written before approvals
/// were bound) is refused too, since nothing says what the person saw.
pub(crate) fn check_pending(
    pending: &crate::journal::record::PendingRecord,
    spec: &ToolSpec,
    workspace: &Path,
) -> Result<(), String> {
    let args = &pending.args;
    match pending.bound.as_ref() {
        Some(bound) => {
            check(bound, spec, args, workspace)?;
            pending.changed_since_pause.clone().map_or(Ok(()), Err)
        }
        None => match primary::of(spec, args, workspace) {
            Some(p) if !p.command => Err(format!(
                "the pending call on `{}` was recorded without the object it was asked about (a journal of an \
                 earlier version), so the approval cannot be bound to what the person saw; make the call again \
                 in a new run",
                p.written
            )),
            _ => Ok(()),
        },
    }
}

/// Whether a call of `spec` with `args` still acts on `bound`: `Err` with
/// the reason to refuse it (what the path resolves to now and what was
/// approved) when its path resolves elsewhere, or the folder on the way
/// is another one now (renamed into place, removed).
pub(crate) fn check(
    bound: &BoundObject,
    spec: &ToolSpec,
    args: &Value,
    workspace: &Path,
) -> Result<(), String> {
    let shown = |path: &str| {
        Path::new(path)
            .strip_prefix(workspace)
            .map_or_else(|_| path.to_owned(), |r| r.to_string_lossy().into_owned())
    };
    let approved = shown(&bound.path);
    let why = "the approval was given for what the path named when it was asked; make the call again to be \
               asked about what it names now";
    let Some(now) = primary::of(spec, args, workspace) else {
        return Err(format!("the call no longer names a path, but `{approved}` was approved; {why}"));
    };
    let written = now.written.clone();
    let Some(current) = of_primary(&now, workspace) else {
        return Err(format!("`{written}` cannot be resolved now, but `{approved}` was approved; {why}"));
    };
    if current.path != bound.path {
        return Err(format!(
            "`{written}` now resolves to `{}`, not `{approved}` that was approved (a link or a folder on the \
             way changed); {why}",
            shown(&current.path)
        ));
    }
    // The folder's identity says something only in the checkout it was
    // taken in (a resume on another replica has its own folders; there
    // the path, relative to the workspace, is what binds).
    let same_checkout = Path::new(&bound.folder).starts_with(workspace);
    if same_checkout && bound.id.is_some() && id_of(Path::new(&bound.folder)) != bound.id {
        return Err(format!(
            "the folder `{}` on the way to `{written}` is not the one it was when `{approved}` was approved \
             (it was renamed, replaced or removed); {why}",
            shown(&bound.folder)
        ));
    }
    Ok(())
}

/// The deepest existing folder at or above `target`'s parent.
fn existing_folder(target: &Path) -> Option<PathBuf> {
    target.ancestors().skip(1).find(|a| a.is_dir()).map(Path::to_path_buf)
}

/// The device and inode numbers of `folder` (links followed), on Unix.
#[cfg(unix)]
fn id_of(folder: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(folder).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn id_of(_: &Path) -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::PrimaryArgument;
    use serde_json::json;

    fn bind(spec: &ToolSpec, args: &Value, workspace: &Path) -> Option<BoundObject> {
        of_primary(&primary::of(spec, args, workspace)?, workspace)
    }

    fn write_spec() -> ToolSpec {
        ToolSpec::new("write", "", json!({})).primary_argument(PrimaryArgument::Path("path".into()))
    }

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        std::fs::create_dir_all(ws.join("ci/flows")).unwrap();
        (dir, ws)
    }

    #[test]
    fn a_path_that_still_names_the_object_passes() {
        let (_d, ws) = setup();
        let args = json!({"path": "docs/new/deploy.yml"});
        let bound = bind(&write_spec(), &args, &ws).unwrap();
        assert_eq!(bound.folder, ws.join("docs").to_string_lossy());
        // A folder made on the way, and the file itself rewritten, change nothing.
        std::fs::create_dir(ws.join("docs/new")).unwrap();
        std::fs::write(ws.join("docs/new/deploy.yml"), "x").unwrap();
        assert_eq!(check(&bound, &write_spec(), &args, &ws), Ok(()));
        assert!(bind(&write_spec(), &json!({}), &ws).is_none(), "no path, no binding");
        // Another checkout of the same files (a resume on another replica)
        // binds the same object.
        let (_other, elsewhere) = setup();
        assert_eq!(check(&bound, &write_spec(), &args, &elsewhere), Ok(()));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_or_a_folder_renamed_into_place_is_refused() {
        let (_d, ws) = setup();
        let args = json!({"path": "docs/deploy.yml"});
        let bound = bind(&write_spec(), &args, &ws).unwrap();
        std::fs::rename(ws.join("docs"), ws.join("old-docs")).unwrap();
        std::os::unix::fs::symlink("ci/flows", ws.join("docs")).unwrap();
        let err = check(&bound, &write_spec(), &args, &ws).unwrap_err();
        assert!(
            err.contains("`docs/deploy.yml` now resolves to `ci/flows/deploy.yml`, not `docs/deploy.yml`"),
            "{err}"
        );
        // Another folder renamed to the same name: same path, another folder.
        std::fs::remove_file(ws.join("docs")).unwrap();
        std::fs::rename(ws.join("ci/flows"), ws.join("docs")).unwrap();
        let err = check(&bound, &write_spec(), &args, &ws).unwrap_err();
        assert!(err.contains("the folder `docs` on the way to `docs/deploy.yml` is not the one"), "{err}");
    }
}
