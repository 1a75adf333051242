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
    /// The file is a symbolic link, or is reached through one (a folder
    /// on the way): only a workspace's own file can be trusted (a link
    /// would borrow the trust of its target).
    #[error(
        "{path} {}; only a workspace's own file can be trusted (copy the file in place of the link, or name it with --config / --mcp-config)",
        link_how(.path, .link)
    )]
    Symlink {
        /// The file.
        path: PathBuf,
        /// The link: the file itself, or a folder on the way.
        link: PathBuf,
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

/// How a file stands to the link it was reached through, for
/// [`TrustError::Symlink`].
fn link_how(path: &Path, link: &Path) -> String {
    if path == link {
        "is a symbolic link".to_owned()
    } else {
        format!("is reached through the symbolic link {}", link.display())
    }
}

/// One trusted file: its SHA-256 when it was trusted, and the digests of
/// the workspace files its commands name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TrustEntry {
    /// The file's SHA-256 (lower-case hex) when it was trusted.
    pub sha256: String,
    /// When it was trusted (RFC 3339, UTC).
    pub trusted_at: String,
    /// The workspace files its hooks and servers name (absolute path ->
    /// [`pin_digest`] when it was trusted): a change to any of them
    /// revokes the trust as a change to the file does. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pinned: BTreeMap<String, String>,
}

/// How a file stands against the record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustState {
    /// Recorded with the file's current SHA-256 and every pinned file as it
    /// was: it applies whole.
    Trusted,
    /// Never trusted (or trust revoked), or a symbolic link.
    Untrusted,
    /// Trusted once, but the file changed since: untrusted until trusted
    /// again.
    Changed,
    /// The file is as trusted, but a workspace file one of its commands
    /// names (a hook's script, a server's program, an interpreter) changed
    /// since: untrusted until trusted again.
    PinChanged {
        /// The pinned file that changed (or appeared, or went).
        file: PathBuf,
    },
}

/// The workspace files a configuration's commands (hooks, MCP stdio
/// servers) name, to pin with its trust ([`TrustStore::trust`]) and to
/// protect while a run lasts ([`command_files`](codemode_base::command_files)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandPins {
    /// Absolute paths beneath the workspace, existing or not, without
    /// repeats.
    pub files: Vec<PathBuf>,
    /// The commands whose files cannot all be known, one line each: what
    /// the command is (`hook `sh -c ...``, `server `x``) and why.
    pub undetermined: Vec<String>,
    /// Workspace folders a command loads code from (a server's `env`
    /// `PYTHONPATH=lib`), with what names them (`server `x`'s env
    /// PYTHONPATH`): protected while a run lasts, but not pinned (a folder
    /// has no one digest), so `codemode trust` notes each.
    pub folders: Vec<(PathBuf, String)>,
    /// The paths in `files` and in `folders`, so that adding one costs the
    /// same however many came before (a configuration of many servers, each
    /// naming up to [`MAX_FILES`](codemode_base::command_files::MAX_FILES)
    /// files, was quadratic in their total).
    seen: (std::collections::HashSet<PathBuf>, std::collections::HashSet<PathBuf>),
}

impl CommandPins {
    /// Adds the folder `folder`, named by `what`, once.
    pub fn add_folder(&mut self, folder: PathBuf, what: String) {
        if self.seen.1.insert(folder.clone()) {
            self.folders.push((folder, what));
        }
    }

    /// Adds what `found` holds for the command described `what`.
    pub fn add(&mut self, what: &str, found: codemode_base::command_files::CommandFiles) {
        for file in found.files {
            if self.seen.0.insert(file.clone()) {
                self.files.push(file);
            }
        }
        if let Some(why) = found.undetermined {
            self.undetermined.push(format!("{what}: {why}"));
        }
    }
}

/// A file whose trust is decided, read once ([`ReadFile::read_in`]): its
/// digest, its parse and its trust all come from these bytes, so a file
/// swapped between two reads cannot be parsed as one and trusted as the
/// other.
#[derive(Debug, Clone)]
pub struct ReadFile {
    /// The canonical workspace and the file's path beneath it as written
    /// (no link on the way followed); for [`ReadFile::read`], the
    /// canonical folder and the file's own name.
    path: PathBuf,
    bytes: Vec<u8>,
    sha256: String,
    /// The symbolic link the file was reached through (the file itself or
    /// a folder on the way): never trusted.
    link: Option<PathBuf>,
}

impl ReadFile {
    /// Reads `file` once, bounded ([`MAX_CONFIG_BYTES`](codemode_base::config_file::MAX_CONFIG_BYTES)).
    /// A symbolic link is read through (its target's restrictions still
    /// apply) but marked: it is never trusted, as a link would let a
    /// workspace borrow the trust of the file it points to. Folders on the
    /// way are followed (the path is their canonical form): a workspace's
    /// file is read with [`ReadFile::read_in`].
    ///
    /// # Errors
    /// [`TrustError::Io`]: the file or its folder cannot be read, or it is
    /// not a regular file of at most 1 MiB.
    pub fn read(file: &Path) -> Result<ReadFile, TrustError> {
        let name = file
            .file_name()
            .ok_or_else(|| TrustError::Io { path: file.to_owned(), message: "not a file name".to_owned() })?;
        let folder = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        ReadFile::read_at(canonical(folder)?.join(name), None)
    }

    /// Reads the workspace file `file` (`workspace` joined with a path
    /// such as `.cursor/mcp.json`) once, as [`ReadFile::read`] does, and
    /// judged by where it is in the workspace: its path is the canonical
    /// `workspace` joined with the rest as written, never the target of a
    /// link on the way. A file reached through a symbolic link (itself, or
    /// a folder between the workspace and it, such as a `.cursor` linked to
    /// another project's) is read through but marked, never trusted: the
    /// record of the file the link names is not this workspace's.
    ///
    /// # Errors
    /// [`TrustError::Io`]: `file` is not beneath `workspace` (or climbs out
    /// with `..`), the workspace or the file cannot be read, or it is not a
    /// regular file of at most 1 MiB.
    pub fn read_in(workspace: &Path, file: &Path) -> Result<ReadFile, TrustError> {
        let outside = || TrustError::Io {
            path: file.to_owned(),
            message: format!("not a file beneath the workspace {}", workspace.display()),
        };
        let rest = file.strip_prefix(workspace).map_err(|_| outside())?;
        let workspace = if workspace.as_os_str().is_empty() { Path::new(".") } else { workspace };
        if rest.as_os_str().is_empty()
            || rest.components().any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(outside());
        }
        let root = canonical(workspace)?;
        let path = root.join(rest);
        let link = codemode_base::links::link_below(&path, &root).map(Path::to_path_buf);
        let mut read = ReadFile::read_at(path, link)?;
        if read.link.is_none() {
            // With no link on the way, the file is where its path says:
            // its canonical path is itself, inside the workspace. A link
            // put on the way since the check above is caught here.
            match std::fs::canonicalize(&read.path) {
                Ok(real) if real == read.path => {}
                _ => read.link = Some(read.path.clone()),
            }
        }
        Ok(read)
    }

    /// Reads the file at `path`: as itself, unless `link` (a link on the
    /// way) says to read it through, marked.
    fn read_at(path: PathBuf, link: Option<PathBuf>) -> Result<ReadFile, TrustError> {
        let io =
            |path: &Path, e: std::io::Error| TrustError::Io { path: path.to_owned(), message: e.to_string() };
        let through =
            |path: &Path| codemode_base::config_file::read_config_bytes(path).map_err(|e| io(path, e));
        let (bytes, link) = match link {
            Some(link) => (through(&path)?, Some(link)),
            None => match codemode_base::config_file::read_own_bytes(&path) {
                Ok(bytes) => (bytes, None),
                Err(e) if codemode_base::config_file::is_link_refused(&e) => {
                    (through(&path)?, Some(path.clone()))
                }
                Err(e) => return Err(io(&path, e)),
            },
        };
        let sha256 = hex(&Sha256::digest(&bytes));
        Ok(ReadFile { path, bytes, sha256, link })
    }

    /// The file: the canonical workspace and its path beneath it
    /// ([`ReadFile::read_in`]), or its canonical folder and its own name
    /// ([`ReadFile::read`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes read, as text.
    ///
    /// # Errors
    /// [`TrustError::Io`] when they are not UTF-8.
    pub fn text(&self) -> Result<&str, TrustError> {
        std::str::from_utf8(&self.bytes).map_err(|_| TrustError::Io {
            path: self.path.clone(),
            message: "the file is not UTF-8 text".into(),
        })
    }

    /// The SHA-256 of the bytes read (lower-case hex).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether the file was reached through a symbolic link, itself or a
    /// folder on the way (never trusted).
    pub fn is_link(&self) -> bool {
        self.link.is_some()
    }

    /// The symbolic link the file was reached through: the file itself, or
    /// a folder between the workspace and it; `None` when there is none.
    pub fn link(&self) -> Option<&Path> {
        self.link.as_deref()
    }
}

/// What a pinned file is now, as [`TrustEntry::pinned`] records it: the
/// SHA-256 of a regular file (read without following a link as its last
/// component, any size), `link:<target>` for a symbolic link, `missing`,
/// or `not a file` (a folder, a FIFO, a device: never read).
pub fn pin_digest(path: &Path) -> String {
    use std::io::Read as _;
    match path.symlink_metadata() {
        Err(_) => return "missing".to_owned(),
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(path).unwrap_or_default();
            return format!("link:{}", target.display());
        }
        Ok(meta) if !meta.is_file() => return "not a file".to_owned(),
        Ok(_) => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let Ok(mut file) = options.open(path) else { return "unreadable".to_owned() };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return "not a file".to_owned();
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return "unreadable".to_owned(),
        }
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The record's format version ([`Record::version`]).
const RECORD_VERSION: u32 = 1;

/// The on-disk shape: canonical path (as text) -> entry.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Format version, [`RECORD_VERSION`]; a record of another version is
    /// refused (read as corrupt), never rewritten.
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

    /// How `file` stands: reads it once ([`ReadFile::read`]) and compares
    /// it with the record ([`TrustStore::state_of`]).
    ///
    /// # Errors
    /// The file or the record cannot be read.
    pub fn state(&self, file: &Path) -> Result<TrustState, TrustError> {
        self.state_of(&ReadFile::read(file)?)
    }

    /// How the file read as `file` stands: its SHA-256 against the record,
    /// then each file pinned with it against its digest now. A symbolic
    /// link is always untrusted.
    ///
    /// # Errors
    /// The record cannot be read.
    pub fn state_of(&self, file: &ReadFile) -> Result<TrustState, TrustError> {
        if file.link.is_some() {
            return Ok(TrustState::Untrusted);
        }
        let record = self.read()?;
        let Some(entry) = record.files.get(&file.path.display().to_string()) else {
            return Ok(TrustState::Untrusted);
        };
        if entry.sha256 != file.sha256 {
            return Ok(TrustState::Changed);
        }
        for (pinned, digest) in &entry.pinned {
            if pin_digest(Path::new(pinned)) != *digest {
                return Ok(TrustState::PinChanged { file: PathBuf::from(pinned) });
            }
        }
        Ok(TrustState::Trusted)
    }

    /// Records the file read as `file` (its canonical path and the SHA-256
    /// of the bytes read) as trusted, with the [`pin_digest`] of each of
    /// `pinned` (the workspace files its commands name), and returns the
    /// entry.
    ///
    /// # Errors
    /// [`TrustError::Symlink`] for a link; the record cannot be read or
    /// written.
    pub fn trust(&self, file: &ReadFile, pinned: &[PathBuf]) -> Result<(PathBuf, TrustEntry), TrustError> {
        if let Some(link) = &file.link {
            return Err(TrustError::Symlink { path: file.path.clone(), link: link.clone() });
        }
        let mut record = self.read()?;
        let entry = TrustEntry {
            sha256: file.sha256.clone(),
            trusted_at: codemode_base::time_text::rfc3339_utc(std::time::SystemTime::now()),
            pinned: pinned.iter().map(|p| (p.display().to_string(), pin_digest(p))).collect(),
        };
        record.files.insert(file.path.display().to_string(), entry.clone());
        self.write(&record)?;
        Ok((file.path.clone(), entry))
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
        // Read as itself: a record that is a link is refused (a program
        // could point it at a record of its own making).
        match codemode_base::config_file::read_own_bytes(&path) {
            Ok(bytes) => {
                let record: Record = serde_json::from_slice(&bytes)
                    .map_err(|e| TrustError::Corrupt { path: path.clone(), message: e.to_string() })?;
                // Another version may hold what this one cannot read, and
                // a rewrite would lose it.
                if record.version != RECORD_VERSION {
                    let message = format!(
                        "version {}, and this codemode reads version {RECORD_VERSION}",
                        record.version
                    );
                    return Err(TrustError::Corrupt { path, message });
                }
                Ok(record)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Record { version: RECORD_VERSION, ..Record::default() })
            }
            Err(e) => Err(TrustError::Io { path, message: e.to_string() }),
        }
    }

    fn write(&self, record: &Record) -> Result<(), TrustError> {
        let io =
            |path: &Path, e: std::io::Error| TrustError::Io { path: path.to_owned(), message: e.to_string() };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| io(&self.dir, e))?;
        let text =
            serde_json::to_string_pretty(&Record { version: RECORD_VERSION, files: record.files.clone() })
                .expect("the record serialises");
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| io(tmp.path(), e))?;
        let path = self.path();
        tmp.persist(&path).map_err(|e| io(&path, e.error))?;
        Ok(())
    }
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
        let (path, entry) = store.trust(&ReadFile::read(&file).unwrap(), &[]).unwrap();
        assert_eq!(path, std::fs::canonicalize(&file).unwrap());
        assert_eq!(entry.sha256.len(), 64);
        assert_eq!(store.state(&file).unwrap(), TrustState::Trusted);
        std::fs::write(&file, "posture = \"full-access\"\n# changed\n").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::Changed);
        store.trust(&ReadFile::read(&file).unwrap(), &[]).unwrap();
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
        store.trust(&ReadFile::read(&ws.join("codemode.toml")).unwrap(), &[]).unwrap();
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
        store.trust(&ReadFile::read(&target).unwrap(), &[]).unwrap();
        let other = tempfile::tempdir().unwrap();
        let link = other.path().join("codemode.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(store.state(&link).unwrap(), TrustState::Untrusted);
        assert!(matches!(store.trust(&ReadFile::read(&link).unwrap(), &[]), Err(TrustError::Symlink { .. })));
        assert_eq!(store.state(&target).unwrap(), TrustState::Trusted);
    }

    #[test]
    fn a_folder_linked_to_a_trusted_projects_never_borrows_its_trust() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let good = tempfile::tempdir().unwrap();
        std::fs::create_dir(good.path().join(".cursor")).unwrap();
        let target = good.path().join(".cursor/mcp.json");
        std::fs::write(&target, "{}").unwrap();
        store.trust(&ReadFile::read_in(good.path(), &target).unwrap(), &[]).unwrap();
        let evil = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(good.path().join(".cursor"), evil.path().join(".cursor")).unwrap();
        let read = ReadFile::read_in(evil.path(), &evil.path().join(".cursor/mcp.json")).unwrap();
        let root = std::fs::canonicalize(evil.path()).unwrap();
        // Judged where it is in this workspace, through a link: untrusted,
        // and never trusted.
        assert_eq!(read.path(), root.join(".cursor/mcp.json"));
        assert_eq!(read.link(), Some(root.join(".cursor").as_path()));
        assert_eq!(read.bytes(), b"{}");
        assert_eq!(store.state_of(&read).unwrap(), TrustState::Untrusted);
        let err = store.trust(&read, &[]).unwrap_err();
        assert!(err.to_string().contains("reached through the symbolic link"), "{err}");
        // The trusted project itself still is.
        let own = ReadFile::read_in(good.path(), &target).unwrap();
        assert_eq!(store.state_of(&own).unwrap(), TrustState::Trusted);
        // A path that leaves the workspace is refused.
        assert!(ReadFile::read_in(evil.path(), &evil.path().join("../x/codemode.toml")).is_err());
        assert!(ReadFile::read_in(evil.path(), &target).is_err());
    }

    #[test]
    fn the_digest_and_the_trust_come_from_the_bytes_read() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join("codemode.toml");
        std::fs::write(&file, "posture = \"ask\"\n").unwrap();
        let trusted = ReadFile::read(&file).unwrap();
        store.trust(&trusted, &[]).unwrap();
        // Read once, then swapped for other bytes: what was read stays
        // what is judged, and the other bytes are judged as themselves.
        let read = ReadFile::read(&file).unwrap();
        std::fs::write(&file, "posture = \"full-access\"\n").unwrap();
        assert_eq!(read.text().unwrap(), "posture = \"ask\"\n");
        assert_eq!(store.state_of(&read).unwrap(), TrustState::Trusted);
        let swapped = ReadFile::read(&file).unwrap();
        assert_eq!(swapped.text().unwrap(), "posture = \"full-access\"\n");
        assert_eq!(store.state_of(&swapped).unwrap(), TrustState::Changed);
    }

    #[test]
    fn a_pinned_file_that_changes_or_appears_revokes_the_trust() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join("codemode.toml");
        std::fs::write(&file, "[[hooks.before_call]]\ncommand = [\"python3\", \"hooks/guard.py\"]\n")
            .unwrap();
        let script = ws.path().join("hooks/guard.py");
        let missing = ws.path().join("hooks/later.py");
        std::fs::create_dir(ws.path().join("hooks")).unwrap();
        std::fs::write(&script, "print()\n").unwrap();
        let (_, entry) =
            store.trust(&ReadFile::read(&file).unwrap(), &[script.clone(), missing.clone()]).unwrap();
        assert_eq!(entry.pinned[&missing.display().to_string()], "missing");
        assert_eq!(store.state(&file).unwrap(), TrustState::Trusted);
        std::fs::write(&script, "print('allow')\n").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::PinChanged { file: script.clone() });
        std::fs::write(&script, "print()\n").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::Trusted);
        std::fs::write(&missing, "x").unwrap();
        assert_eq!(store.state(&file).unwrap(), TrustState::PinChanged { file: missing });
    }

    #[test]
    fn a_trust_record_that_is_a_link_is_refused() {
        let config = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("forged.json"), "{\"version\":1,\"files\":{}}").unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("forged.json"), config.path().join(RECORD_FILE))
            .unwrap();
        let err = TrustStore::in_dir(config.path()).list().unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
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
        // Another version is refused, and never rewritten (its fields
        // would be lost).
        let newer = r#"{"version": 2, "files": {}, "groups": {"x": 1}}"#;
        std::fs::write(config.path().join(RECORD_FILE), newer).unwrap();
        let store = TrustStore::in_dir(config.path());
        let err = store.list().unwrap_err();
        assert!(err.to_string().contains("version 2, and this codemode reads version 1"), "{err}");
        assert!(store.trust(&ReadFile::read(&file).unwrap(), &[]).is_err());
        assert_eq!(std::fs::read_to_string(config.path().join(RECORD_FILE)).unwrap(), newer);
    }
}
