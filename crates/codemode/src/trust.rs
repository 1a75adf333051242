//! Which policy and MCP files apply, and how much (DESIGN.md §5 "Trust",
//! docs/SECURITY.md).
//!
//! A file named on the command line (`--config`, `--mcp-config`) or handed
//! over by a library host is the user's own and applies whole. A file found
//! in the workspace (`codemode.toml`, `.mcp.json`) came with the workspace
//! (a cloned repository, say), so it applies whole only while the user has
//! trusted it with `codemode trust`, which records the file's canonical path
//! and SHA-256 here, like direnv's `allow`. Any change to the file revokes
//! the trust: the next run sees a different digest. An untrusted file still
//! restricts but grants nothing
//! ([`ConfigFile::without_grants`](crate::config::ConfigFile::without_grants)).
//!
//! The record is one JSON file, `trusted.json`, in the user's config folder:
//! `$XDG_CONFIG_HOME/codemode/`, else `$HOME/.config/codemode/`. It is
//! written atomically (a temporary file renamed over it) and read whole; a
//! record that cannot be read is an error, never "nothing trusted" nor
//! "everything trusted".

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The workspace files that need trust, in the order they are reported.
pub const WORKSPACE_FILES: [&str; 4] = ["codemode.toml", ".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"];

/// The record file's name inside [`TrustStore::dir`].
const RECORD_FILE: &str = "trusted.json";

/// Why the trust record could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// Neither `XDG_CONFIG_HOME` nor `HOME` is set to an absolute path.
    #[error("no config folder for the trust record: set XDG_CONFIG_HOME or HOME to an absolute path")]
    NoConfigDir,
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The file is a symbolic link: only a workspace's own file can be
    /// trusted (a link would borrow the trust of its target).
    #[error(
        "{path} is a symbolic link; only a workspace's own file can be trusted (copy the file, or name it with --config / --mcp-config)"
    )]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// The record is not the JSON this module writes.
    #[error("{path}: not a trust record ({message}); fix or delete it, then trust again")]
    Corrupt {
        /// The record file.
        path: PathBuf,
        /// The JSON error.
        message: String,
    },
}

/// One trusted file: its SHA-256 when it was trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TrustEntry {
    /// The file's SHA-256 (lower-case hex) when it was trusted.
    pub sha256: String,
    /// When it was trusted (RFC 3339, UTC).
    pub trusted_at: String,
}

/// How a file stands against the record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustState {
    /// Recorded with the file's current SHA-256: it applies whole.
    Trusted,
    /// Never trusted (or trust revoked).
    Untrusted,
    /// Trusted once, but the file changed since: untrusted until trusted
    /// again.
    Changed,
}

/// The on-disk shape: canonical path (as text) -> entry.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Format version, 1.
    version: u32,
    files: BTreeMap<String, TrustEntry>,
}

/// The user's trust record (`trusted.json` in [`TrustStore::dir`]).
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
}

impl TrustStore {
    /// The record in the user's config folder: `$XDG_CONFIG_HOME/codemode`
    /// when that is set and absolute, else `$HOME/.config/codemode`.
    ///
    /// # Errors
    /// [`TrustError::NoConfigDir`] when neither is set to an absolute path.
    pub fn user() -> Result<TrustStore, TrustError> {
        let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
        let base = absolute("XDG_CONFIG_HOME")
            .or_else(|| absolute("HOME").map(|home| home.join(".config")))
            .ok_or(TrustError::NoConfigDir)?;
        Ok(TrustStore { dir: base.join("codemode") })
    }

    /// A record in `dir` (tests, hosts with their own config folder).
    pub fn in_dir(dir: impl Into<PathBuf>) -> TrustStore {
        TrustStore { dir: dir.into() }
    }

    /// The folder holding the record.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How `file` stands: compares its current SHA-256 with the record. A
    /// symbolic link is always untrusted.
    ///
    /// # Errors
    /// The file or the record cannot be read.
    pub fn state(&self, file: &Path) -> Result<TrustState, TrustError> {
        let (key, digest) = match fingerprint(file) {
            Err(TrustError::Symlink { .. }) => return Ok(TrustState::Untrusted),
            other => other?,
        };
        Ok(match self.read()?.files.get(&key) {
            Some(entry) if entry.sha256 == digest => TrustState::Trusted,
            Some(_) => TrustState::Changed,
            None => TrustState::Untrusted,
        })
    }

    /// Records `file` (canonical path and current SHA-256) as trusted and
    /// returns the entry.
    ///
    /// # Errors
    /// The file cannot be read, or the record cannot be read or written.
    pub fn trust(&self, file: &Path) -> Result<(PathBuf, TrustEntry), TrustError> {
        let (key, sha256) = fingerprint(file)?;
        let mut record = self.read()?;
        let entry = TrustEntry {
            sha256,
            trusted_at: codemode_base::time_text::rfc3339_utc(std::time::SystemTime::now()),
        };
        record.files.insert(key.clone(), entry.clone());
        self.write(&record)?;
        Ok((PathBuf::from(key), entry))
    }

    /// Removes every entry for a file in `dir` (canonical) or for `dir`
    /// itself; returns the paths removed. A folder that no longer exists
    /// is taken as its absolute path, so its stale entries can go too
    /// (else the same file, put back there, would be trusted again).
    ///
    /// # Errors
    /// The record cannot be read or written.
    pub fn revoke(&self, dir: &Path) -> Result<Vec<PathBuf>, TrustError> {
        let dir = match canonical(dir) {
            Ok(dir) => dir,
            Err(e) if dir.symlink_metadata().is_ok() => return Err(e),
            Err(_) => std::path::absolute(dir)
                .map_err(|e| TrustError::Io { path: dir.to_owned(), message: e.to_string() })?,
        };
        let mut record = self.read()?;
        let removed: Vec<String> = record
            .files
            .keys()
            .filter(|k| {
                let p = Path::new(k.as_str());
                p == dir
                    || p.parent() == Some(dir.as_path())
                    || WORKSPACE_FILES.iter().any(|f| dir.join(f) == p)
            })
            .cloned()
            .collect();
        for key in &removed {
            record.files.remove(key);
        }
        if !removed.is_empty() {
            self.write(&record)?;
        }
        Ok(removed.into_iter().map(PathBuf::from).collect())
    }

    /// Every entry, by path.
    ///
    /// # Errors
    /// The record cannot be read.
    pub fn list(&self) -> Result<Vec<(PathBuf, TrustEntry)>, TrustError> {
        Ok(self.read()?.files.into_iter().map(|(k, v)| (PathBuf::from(k), v)).collect())
    }

    fn path(&self) -> PathBuf {
        self.dir.join(RECORD_FILE)
    }

    fn read(&self) -> Result<Record, TrustError> {
        let path = self.path();
        match codemode_base::config_file::read_config_bytes(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| TrustError::Corrupt { path, message: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Record { version: 1, ..Record::default() })
            }
            Err(e) => Err(TrustError::Io { path, message: e.to_string() }),
        }
    }

    fn write(&self, record: &Record) -> Result<(), TrustError> {
        let io =
            |path: &Path, e: std::io::Error| TrustError::Io { path: path.to_owned(), message: e.to_string() };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| io(&self.dir, e))?;
        let text = serde_json::to_string_pretty(&Record { version: 1, files: record.files.clone() })
            .expect("the record serialises");
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| io(tmp.path(), e))?;
        let path = self.path();
        tmp.persist(&path).map_err(|e| io(&path, e.error))?;
        Ok(())
    }
}

/// The path (as text: the canonical folder and the file's own name) and
/// SHA-256 (lower-case hex) of `file`, which must not be a symbolic link:
/// a link would let a workspace borrow the trust of the file it points to.
fn fingerprint(file: &Path) -> Result<(String, String), TrustError> {
    let io = |message: String| TrustError::Io { path: file.to_owned(), message };
    let meta = std::fs::symlink_metadata(file).map_err(|e| io(e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(TrustError::Symlink { path: file.to_owned() });
    }
    let name = file.file_name().ok_or_else(|| io("not a file name".into()))?;
    let folder = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let path = canonical(folder)?.join(name);
    let bytes = codemode_base::config_file::read_config_bytes(&path)
        .map_err(|e| TrustError::Io { path: path.clone(), message: e.to_string() })?;
    let digest = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    Ok((path.display().to_string(), digest))
}

fn canonical(path: &Path) -> Result<PathBuf, TrustError> {
    std::fs::canonicalize(path).map_err(|e| TrustError::Io { path: path.to_owned(), message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_holds_until_the_file_changes_and_revoke_removes_it() {
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path().join("codemode"));
        let file = ws.path().join("codemode.toml");
        std::fs::write(&file, "posture = \"full-access\"\n").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::Untrusted);
        let (path, entry) = store.trust(&file).unwrap();
        assert_eq!(path, std::fs::canonicalize(&file).unwrap());
        assert_eq!(entry.sha256.len(), 64);
        assert_eq!(store.state(&file).unwrap(), TrustState::Trusted);
        std::fs::write(&file, "posture = \"full-access\"\n# changed\n").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::Changed);
        store.trust(&file).unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::Trusted);
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.revoke(ws.path()).unwrap(), vec![std::fs::canonicalize(&file).unwrap()]);
        assert_eq!(store.state(&file).unwrap(), TrustState::Untrusted);
    }

    #[test]
    fn the_entries_of_a_removed_folder_can_be_revoked() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let parent = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(parent.path()).unwrap().join("gone");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("codemode.toml"), "posture = \"full-access\"\n").unwrap();
        store.trust(&ws.join("codemode.toml")).unwrap();
        std::fs::remove_dir_all(&ws).unwrap();
        assert_eq!(store.revoke(&ws).unwrap(), vec![ws.join("codemode.toml")]);
        assert!(store.list().unwrap().is_empty());
        // Put back as it was, it is not trusted again.
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("codemode.toml"), "posture = \"full-access\"\n").unwrap();
        assert_eq!(store.state(&ws.join("codemode.toml")).unwrap(), TrustState::Untrusted);
    }

    #[test]
    fn a_symlink_never_borrows_the_trust_of_its_target() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let trusted = tempfile::tempdir().unwrap();
        let target = trusted.path().join("codemode.toml");
        std::fs::write(&target, "posture = \"full-access\"\n").unwrap();
        store.trust(&target).unwrap();
        let other = tempfile::tempdir().unwrap();
        let link = other.path().join("codemode.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(store.state(&link).unwrap(), TrustState::Untrusted);
        assert!(matches!(store.trust(&link), Err(TrustError::Symlink { .. })));
        assert_eq!(store.state(&target).unwrap(), TrustState::Trusted);
    }

    #[test]
    fn a_corrupt_record_is_an_error_not_an_empty_record() {
        let config = tempfile::tempdir().unwrap();
        std::fs::write(config.path().join(RECORD_FILE), "{not json").unwrap();
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join(".mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let err = TrustStore::in_dir(config.path()).state(&file).unwrap_err();
        assert!(matches!(err, TrustError::Corrupt { .. }), "{err}");
    }
}
