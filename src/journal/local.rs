//! [`LocalStore`]: journals in a folder, one sub-folder per run
//! (`<root>/<run_id>/journal.jsonl`, next to the run's receipt and spill
//! files). The default store: `<workspace>/.codemode/runs`.
//!
//! A run's state is its journal's last `state` line. The process that runs
//! or resumes a run holds an exclusive `flock` on its journal file for as
//! long as it does, so a second resume finds the lock taken ("busy"), and a
//! journal left `running` with its lock free belongs to a process that died
//! ("interrupted"). Appends go to the end of the file (`O_APPEND`); a
//! commit appends the state line and fsyncs the file (and, for a new run,
//! its folder).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{
    JournalStore, NotResumableState, RunJournal, RunState, RunSummary, StoreError, StoreFuture, StoredRun,
};

/// The journal file's name inside a run's folder.
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// Journals under a folder on this machine.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    /// When set, run folders must resolve inside this folder (the
    /// workspace, for the default root), so a `.codemode` link cannot send
    /// journals elsewhere.
    confine: Option<PathBuf>,
}

impl LocalStore {
    /// Journals under `root` (made on first use), one folder per run.
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { root: root.into(), confine: None }
    }

    /// [`LocalStore::new`], with every run folder required to resolve
    /// inside `confine` and to be reached through no symbolic link below
    /// it.
    pub(crate) fn confined(root: impl Into<PathBuf>, confine: Option<PathBuf>) -> LocalStore {
        LocalStore { root: root.into(), confine }
    }

    /// The folder holding one folder per run.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn journal_path(&self, run_id: &str) -> Result<PathBuf, StoreError> {
        check_run_id(run_id)?;
        Ok(self.root.join(run_id).join(JOURNAL_FILE))
    }
}

/// A run id names a folder: it must be one path component of safe
/// characters, so `../x` cannot reach outside the store.
pub(crate) fn check_run_id(run_id: &str) -> Result<(), StoreError> {
    let ok = !run_id.is_empty()
        && run_id.len() <= 128
        && !run_id.starts_with('.')
        && run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(StoreError::NotResumable { run_id: run_id.to_owned(), state: NotResumableState::Unknown })
    }
}

/// Runs blocking file work off the async threads.
fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> StoreFuture<'static, T> {
    Box::pin(async move {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(StoreError::Failed(format!("the journal task panicked: {e}"))))
    })
}

type Locked = nix::fcntl::Flock<File>;

/// Opens `path` for appending and takes its lock without waiting; `None`
/// when another process holds it.
fn open_locked(path: &Path) -> Result<Option<Locked>, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| StoreError::failed(format!("cannot open {}", path.display()), e))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(Some(locked)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(StoreError::failed(format!("cannot lock {}", path.display()), e)),
    }
}

/// [`open_locked`], trying again for up to about 100 ms: another process
/// probing the run's state (`runs list`, `load`) holds the lock for
/// microseconds, a process that runs or resumes the run holds it
/// throughout, so only the latter makes this give up.
fn open_locked_patiently(path: &Path) -> Result<Option<Locked>, StoreError> {
    for _ in 0..20 {
        if let Some(locked) = open_locked(path)? {
            return Ok(Some(locked));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    open_locked(path)
}

/// The state line a commit appends.
pub(crate) fn state_line(state: RunState) -> String {
    format!(
        "{{\"t\":\"state\",\"state\":\"{}\",\"at\":\"{}\"}}",
        state.as_str(),
        crate::engine::rfc3339_utc(std::time::SystemTime::now())
    )
}

/// The state the last `state` line of a journal names (`running` when
/// there is none yet).
fn last_state(file: &mut File) -> Result<RunState, std::io::Error> {
    const TAIL: u64 = 8192;
    let len = file.metadata()?.len();
    let from = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.take(TAIL).read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    let found = text.lines().rev().filter(|l| l.starts_with("{\"t\":\"state\"")).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        RunState::parse(v.get("state")?.as_str()?)
    });
    if found.is_none() && from > 0 {
        // A tail without a state line: read the whole journal.
        let mut all = String::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_string(&mut all)?;
        return Ok(all
            .lines()
            .rev()
            .filter(|l| l.starts_with("{\"t\":\"state\""))
            .find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                RunState::parse(v.get("state")?.as_str()?)
            })
            .unwrap_or(RunState::Running));
    }
    Ok(found.unwrap_or(RunState::Running))
}

fn read_lines(file: &mut File) -> Result<Vec<String>, std::io::Error> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_string(&mut text)?;
    // A line cut by a crash mid-write has no newline: it was never
    // committed, so it is left out.
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    Ok(complete.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
}

/// The state of the run whose journal is `path`, probing its lock: a
/// `running` journal nobody holds was interrupted.
fn probe(path: &Path, run_id: &str) -> Result<(RunState, bool), StoreError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotResumable {
                run_id: run_id.to_owned(),
                state: NotResumableState::Unknown,
            });
        }
        Err(e) => return Err(StoreError::failed(format!("cannot read {}", path.display()), e)),
    };
    let state = last_state(&mut file).map_err(|e| StoreError::failed(path.display(), e))?;
    let held = open_locked(path)?.is_none();
    let state = if state == RunState::Running && !held { RunState::Interrupted } else { state };
    Ok((state, held))
}

impl JournalStore for LocalStore {
    fn describe(&self) -> String {
        format!("local folder {}", self.root.display())
    }

    fn workspace_bound(&self) -> bool {
        self.confine.is_some()
    }

    fn create<'a>(&'a self, run_id: &'a str, header: String) -> StoreFuture<'a, Box<dyn RunJournal>> {
        let path = self.journal_path(run_id);
        let confine = self.confine.clone();
        blocking(move || {
            let path = path?;
            let dir = path.parent().expect("a run folder").to_path_buf();
            crate::receipt::spill::make_run_dir(&dir, confine.as_deref())
                .map_err(|e| StoreError::failed(format!("cannot make {}", dir.display()), e))?;
            let mut options = OpenOptions::new();
            options.create_new(true).read(true).append(true);
            // Only the user reads journals: they hold what the tools read.
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = options
                .open(&path)
                .map_err(|e| StoreError::failed(format!("cannot create {}", path.display()), e))?;
            let mut locked = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| StoreError::failed(format!("cannot lock {}", path.display()), e))?;
            locked
                .write_all(format!("{header}\n").as_bytes())
                .map_err(|e| StoreError::failed(format!("cannot write {}", path.display()), e))?;
            let journal: Box<dyn RunJournal> =
                Box::new(LocalJournal { file: Arc::new(Mutex::new(locked)), path, new_dir: Some(dir) });
            Ok(journal)
        })
    }

    fn claim<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, (Vec<String>, Box<dyn RunJournal>)> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        let confine = self.confine.clone();
        blocking(move || {
            let path = path?;
            // Not through a link: a linked `.codemode` would hand this
            // workspace another one's runs.
            let dir = path.parent().expect("a run folder");
            crate::receipt::spill::check_run_dir(dir, confine.as_deref())
                .map_err(|e| StoreError::failed(format!("cannot use {}", dir.display()), e))?;
            if !path.exists() {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Unknown });
            }
            let Some(mut locked) = open_locked_patiently(&path)? else {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Busy });
            };
            let state = last_state(&mut locked).map_err(|e| StoreError::failed(path.display(), e))?;
            match state {
                RunState::Paused => {}
                RunState::Running => {
                    return Err(StoreError::NotResumable {
                        run_id,
                        state: NotResumableState::State(RunState::Interrupted),
                    });
                }
                other => {
                    return Err(StoreError::NotResumable { run_id, state: NotResumableState::State(other) });
                }
            }
            let lines = read_lines(&mut locked).map_err(|e| StoreError::failed(path.display(), e))?;
            // From here the run is this process's: a crash leaves it
            // `running` with the lock free, which reads as interrupted.
            locked
                .write_all(format!("{}\n", state_line(RunState::Running)).as_bytes())
                .and_then(|()| locked.sync_data())
                .map_err(|e| StoreError::failed(format!("cannot write {}", path.display()), e))?;
            let journal: Box<dyn RunJournal> =
                Box::new(LocalJournal { file: Arc::new(Mutex::new(locked)), path, new_dir: None });
            Ok((lines, journal))
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, StoredRun> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        blocking(move || {
            let path = path?;
            let (state, _) = probe(&path, &run_id)?;
            let mut file = File::open(&path).map_err(|e| StoreError::failed(path.display(), e))?;
            let lines = read_lines(&mut file).map_err(|e| StoreError::failed(path.display(), e))?;
            Ok(StoredRun { run_id, state, lines })
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<RunSummary>> {
        let root = self.root.clone();
        blocking(move || {
            let entries = match std::fs::read_dir(&root) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(StoreError::failed(format!("cannot list {}", root.display()), e)),
            };
            let mut runs = Vec::new();
            for entry in entries.flatten() {
                let Some(run_id) = entry.file_name().to_str().map(str::to_owned) else { continue };
                if check_run_id(&run_id).is_err() {
                    continue;
                }
                let path = entry.path().join(JOURNAL_FILE);
                let Ok(meta) = path.symlink_metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                let updated_unix = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                let (state, _) = probe(&path, &run_id)?;
                runs.push(RunSummary { run_id, state, updated_unix });
            }
            runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
            Ok(runs)
        })
    }

    fn remove<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        blocking(move || {
            let path = path?;
            let dir = path.parent().expect("a run folder").to_path_buf();
            if !dir.exists() {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Unknown });
            }
            // Held while the folder goes, so no process claims it meanwhile.
            let _held = if path.exists() {
                match open_locked_patiently(&path)? {
                    Some(locked) => Some(locked),
                    None => return Err(StoreError::NotResumable { run_id, state: NotResumableState::Busy }),
                }
            } else {
                None
            };
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StoreError::failed(format!("cannot remove {}", dir.display()), e))
        })
    }
}

/// A local run journal: its file, locked.
struct LocalJournal {
    file: Arc<Mutex<Locked>>,
    path: PathBuf,
    /// The run's folder, when this journal made it (its entry in the
    /// parent is fsync'd on the first commit).
    new_dir: Option<PathBuf>,
}

impl RunJournal for LocalJournal {
    fn append(&mut self, text: String) -> StoreFuture<'_, ()> {
        let file = self.file.clone();
        let path = self.path.clone();
        blocking(move || {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            file.write_all(text.as_bytes())
                .map_err(|e| StoreError::failed(format!("cannot write {}", path.display()), e))?;
            // A full batch is synced here, off the VM thread and while the
            // run goes on, so the commit at the end has only the tail to
            // sync (a long run's end does not wait for megabytes).
            if text.len() >= super::writer::FLUSH_BYTES {
                file.sync_data()
                    .map_err(|e| StoreError::failed(format!("cannot sync {}", path.display()), e))?;
            }
            Ok(())
        })
    }

    fn commit(&mut self, state: RunState) -> StoreFuture<'_, ()> {
        let file = self.file.clone();
        let path = self.path.clone();
        // The run folder's entry is made durable when the run pauses (a
        // resume must find it after a crash of the machine); a run that
        // ended and lost its folder to a crash reads as unknown, which
        // nothing can resume either, so the two extra syncs are spared.
        let new_dir = if state == RunState::Paused { self.new_dir.take() } else { None };
        blocking(move || {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            let fail = |e: std::io::Error| StoreError::failed(format!("cannot commit {}", path.display()), e);
            file.write_all(format!("{}\n", state_line(state)).as_bytes()).map_err(fail)?;
            file.sync_data().map_err(fail)?;
            if let Some(dir) = new_dir {
                // The run folder's own entry, so the journal is found after
                // a crash of the machine.
                if let Some(parent) = dir.parent() {
                    File::open(parent).and_then(|d| d.sync_all()).map_err(fail)?;
                }
                File::open(&dir).and_then(|d| d.sync_all()).map_err(fail)?;
            }
            Ok(())
        })
    }
}
