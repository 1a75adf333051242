//! Where journals go and how long runs are kept: the `[journal]` table of
//! `codemode.toml`, `--journal`, and [`open_store`], which turns either
//! into a store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::credentials::{is_key_value, url_rest, without_credentials};
use super::{JournalStore, LocalStore, StoreError};

/// How many runs are kept by default: 200.
pub const DEFAULT_KEEP_RUNS: u64 = 200;

/// How many days runs are kept by default: 7.
pub const DEFAULT_KEEP_DAYS: u64 = 7;

/// The `[journal]` table of `codemode.toml`.
///
/// The engine does not read it: a host (the CLI) turns `url` into a store
/// with [`open_store`] and hands it to
/// [`EngineBuilder::journal`](crate::EngineBuilder::journal), and applies
/// [`Retention`] after runs with [`Runs::prune`](super::Runs::prune).
/// Its `Debug` shows `url` with its credentials masked.
#[derive(Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct JournalSettings {
    /// Where journals go, as written: a folder outside the workspace
    /// (relative to the workspace), a PostgreSQL connection string (a
    /// `postgres://` URL or libpq's `key=value` form), or `off`
    /// ([`JournalSpec::parse`]). Default: none, the workspace's folder in
    /// the state folder (`codemode_base::run_state`).
    pub url: Option<String>,
    /// How long runs are kept. Default: [`Retention::default`].
    pub retention: Retention,
}

/// How many runs, and for how long, are kept on disk (and in the store).
///
/// A run is removed when it is older than `keep_days` (since it last
/// changed) **or** not among the `keep_runs` newest: whichever removes
/// more, so the folder stays bounded however many runs a day brings.
/// Never removed: the run just made (it counts as the newest), a run
/// another process holds (running or resuming it), and every run newer
/// (by when it last changed) than the oldest paused run `keep_days` still
/// keeps. Removed only by age,
/// and not counted against `keep_runs`: paused runs (they wait for a
/// person, who may answer tomorrow) and run folders with neither a journal
/// nor a receipt (a run still going in another process may not have
/// written either yet). `0` is taken literally: `keep_runs = 0` keeps only
/// those, `keep_days = 0` removes every run older than a second. A
/// workspace's own `codemode.toml` that is not trusted cannot set either
/// below its default (`ConfigFile::without_grants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Runs kept by count, newest first. Default: [`DEFAULT_KEEP_RUNS`].
    pub keep_runs: u64,
    /// Days a run is kept after it last changed. Default:
    /// [`DEFAULT_KEEP_DAYS`].
    pub keep_days: u64,
}

impl std::fmt::Debug for JournalSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = self.url.as_deref().map(without_credentials);
        f.debug_struct("JournalSettings").field("url", &url).field("retention", &self.retention).finish()
    }
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { keep_runs: DEFAULT_KEEP_RUNS, keep_days: DEFAULT_KEEP_DAYS }
    }
}

/// Where journals go, parsed from `--journal` or `[journal] url`. Its
/// `Debug` masks a connection string's credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JournalSpec {
    /// `off`: runs keep no journal.
    Off,
    /// A folder of the local machine (relative to the workspace when not
    /// absolute).
    Folder(PathBuf),
    /// A PostgreSQL connection string: a `postgres://` or `postgresql://`
    /// URL, or libpq's `key=value` form (`host=db user=me dbname=runs`).
    /// Show it with [`JournalSpec::shown`] or [`without_credentials`]
    /// only.
    Postgres(String),
}

impl JournalSpec {
    /// Parses `off`, a `postgres://`/`postgresql://` URL, libpq's
    /// `key=value` form (a text starting with a lower-case keyword and `=`,
    /// [`without_credentials`] says how it is read), or a folder (one whose
    /// name starts like `key=` is written `./host=x`).
    ///
    /// # Errors
    /// An empty text, or a URL of another scheme (`mysql://x`), with what
    /// is accepted.
    pub fn parse(spec: &str) -> Result<JournalSpec, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("the journal is empty; give a folder, a postgres:// URL, or off".to_owned());
        }
        if spec == "off" {
            return Ok(JournalSpec::Off);
        }
        if url_rest(spec).is_some() || is_key_value(spec) {
            return Ok(JournalSpec::Postgres(spec.to_owned()));
        }
        if let Some((scheme, _)) = spec.split_once("://")
            && !scheme.is_empty()
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
        {
            return Err(format!(
                "the journal `{scheme}://...` is not supported; give a folder, a postgres:// URL, or off"
            ));
        }
        Ok(JournalSpec::Folder(PathBuf::from(spec)))
    }

    /// The spec for messages, its credentials masked
    /// ([`without_credentials`]).
    pub fn shown(&self) -> String {
        match self {
            JournalSpec::Off => "off".to_owned(),
            JournalSpec::Folder(dir) => dir.display().to_string(),
            JournalSpec::Postgres(url) => without_credentials(url).into_owned(),
        }
    }
}

impl std::fmt::Debug for JournalSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalSpec::Off => f.write_str("Off"),
            JournalSpec::Folder(dir) => f.debug_tuple("Folder").field(dir).finish(),
            JournalSpec::Postgres(spec) => {
                f.debug_tuple("Postgres").field(&without_credentials(spec)).finish()
            }
        }
    }
}

/// The store `spec` names (`--journal`, `[journal] url`): `None` for
/// `off`, else the store. A relative folder is taken from `workspace`; a
/// folder inside the workspace (as written, or through a symbolic link) is
/// refused: a program could read its journals or append a decision to a
/// paused run's journal, which a later resume would apply.
///
/// `workspace` should be canonical (`Engine::workspace`).
///
/// A PostgreSQL spec (a `postgres://` URL, the `key=value` form) is refused here: the PostgreSQL store is a crate of
/// its own (`codemode-journal-postgres`), whose `open_store` takes every
/// spec this one takes and URLs too.
///
/// # Errors
/// [`StoreError::Failed`] for a spec [`JournalSpec::parse`] refuses, a
/// PostgreSQL spec (named without its credentials), a folder inside the
/// workspace (saying what to use instead), or a store that cannot be opened.
pub fn open_store(spec: &str, workspace: &Path) -> Result<Option<Arc<dyn JournalStore>>, StoreError> {
    match JournalSpec::parse(spec).map_err(StoreError::Failed)? {
        JournalSpec::Off => Ok(None),
        JournalSpec::Postgres(url) => Err(StoreError::Failed(format!(
            "the journal {}: this store opens folders only; a PostgreSQL journal is opened by \
             `codemode_journal_postgres::open_store` (the codemode command line does)",
            without_credentials(&url)
        ))),
        JournalSpec::Folder(dir) => {
            let dir = codemode_base::links::lexical(&workspace.join(dir));
            if codemode_base::run_state::inside(&dir, workspace) {
                return Err(StoreError::Failed(format!(
                    "the journal folder {} is inside the workspace {}: a program could read its journals \
                     or forge a paused run's decisions there; use a folder outside the workspace, or \
                     leave the journal unset for the default (the state folder, \
                     $XDG_STATE_HOME/codemode, else ~/.local/state/codemode)",
                    dir.display(),
                    workspace.display()
                )));
            }
            Ok(Some(Arc::new(LocalStore::new(dir))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_off_folders_and_postgres_urls() {
        assert_eq!(JournalSpec::parse("off"), Ok(JournalSpec::Off));
        assert_eq!(JournalSpec::parse(" runs "), Ok(JournalSpec::Folder("runs".into())));
        assert_eq!(JournalSpec::parse("./host=x"), Ok(JournalSpec::Folder("./host=x".into())));
        assert_eq!(JournalSpec::parse("/var/lib/cm"), Ok(JournalSpec::Folder("/var/lib/cm".into())));
        for url in
            ["postgres://u@h/db", "postgresql://h/db", "POSTGRES://h/db", "host=h dbname=db", "user = me"]
        {
            assert_eq!(JournalSpec::parse(url), Ok(JournalSpec::Postgres(url.to_owned())));
        }
        assert!(JournalSpec::parse("").unwrap_err().contains("empty"));
        assert!(JournalSpec::parse("mysql://h/db").unwrap_err().contains("`mysql://...` is not supported"));
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        // No PostgreSQL store here: refused, the password left out, in
        // every form.
        for spec in [
            "postgresql://me:s3cret@db/runs",
            "postgres://db/runs?password=s3cret",
            "host=db password=s3cret",
        ] {
            let e = open_store(spec, Path::new("/ws")).err().unwrap();
            let shown = e.to_string();
            assert!(shown.contains("codemode_journal_postgres") && !shown.contains("s3cret"), "{shown}");
        }
        let spec = JournalSpec::parse("host=db password='s3 cret'").unwrap();
        assert_eq!(spec.shown(), "host=db password=***");
    }

    #[test]
    fn folders_inside_the_workspace_are_refused() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        assert!(open_store("off", &ws).unwrap().is_none());
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), outside.path().join("link")).unwrap();
        let through_link = outside.path().join("link/j");
        for bad in [
            "journals",
            ".codemode/journals",
            "sub/.codemode/j",
            "./src/../journals",
            ws.join("j").to_str().unwrap(),
            through_link.to_str().unwrap(),
        ] {
            let e = open_store(bad, &ws).err().unwrap().to_string();
            assert!(
                e.contains("is inside the workspace") && e.contains("outside the workspace"),
                "{bad}: {e}"
            );
        }
        let store = open_store(outside.path().join("j").to_str().unwrap(), &ws).unwrap().unwrap();
        assert!(store.describe().contains(&outside.path().display().to_string()));
        assert!(
            open_store("../elsewhere", &ws).unwrap().is_some(),
            "outside the workspace is the user's choice"
        );
    }
}
