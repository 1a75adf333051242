//! [`LocalStore`]: journals in a folder, one sub-folder per run
//! (`<root>/<run_id>/journal.jsonl`, next to the run's receipt and spill
//! files). The default store: the workspace's folder in the state folder
//! (`codemode_base::run_state`).
//!
//! A run's state is its journal's last `state` line. The process that runs
//! or resumes a run holds an exclusive `flock` on its journal file for as
//! long as it does, so a second resume finds the lock taken ("busy"), and a
//! journal left `running` with its lock free belongs to a process that died
//! ("interrupted"). Appends go to the end of the file (`O_APPEND`); a
//! pause appends the state line and fsyncs the file and its folder before
//! it returns; a run's end appends its state line, lets the lock go and
//! leaves the fsync to the store's [`Syncer`], which the store's drop waits
//! for. The store opens late ([`JournalStore::opens_late`]): a run's folder
//! and journal are made when the run first hands lines over or pauses, and
//! a run that ends before that is written whole by the [`Syncer`]
//! ([`JournalStore::record_ended`]), which the store's reads wait for.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::syncer::{NewJournal, Syncer};
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
    /// Whether the folder holds one workspace's runs (the default folder in
    /// the state folder, [`LocalStore::for_workspace`]).
    bound: bool,
    /// Syncs the journals of runs that ended; shared by the store's clones,
    /// the last of which waits for it when dropped.
    syncer: Arc<Syncer>,
    /// Permits for blocking file work ([`IO_AT_ONCE`]), shared likewise.
    io: Arc<Semaphore>,
}

impl LocalStore {
    /// Journals under `root` (made on first use), one folder per run.
    ///
    /// A run that ends has its journal written when its receipt comes
    /// back, and fsync'd by the store's threads soon after: dropping the
    /// store (its last clone; for an engine's default store, the engine)
    /// waits for those fsyncs (docs/JOURNAL.md, "Guarantees").
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore {
            root: root.into(),
            confine: None,
            bound: false,
            syncer: Arc::default(),
            io: io_permits(),
        }
    }

    /// [`LocalStore::new`] for the folder of one workspace's runs (an
    /// engine's default store, in the state folder): a resume refuses a
    /// journal whose header names another workspace
    /// ([`JournalStore::workspace_bound`]).
    pub fn for_workspace(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { bound: true, ..LocalStore::new(root) }
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

fn io_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(IO_AT_ONCE))
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

/// Blocking file operations of one store (its clones and journals
/// included) at once, at most. Runs that start or call together queue here
/// rather than each taking a thread of the blocking pool: the operations
/// are short, and the ones that make run folders take the lock of their
/// one parent folder in turn anyway.
const IO_AT_ONCE: usize = 4;

/// Runs blocking file work off the async threads, at most [`IO_AT_ONCE`]
/// at once per store.
fn blocking<T: Send + 'static>(
    io: &Arc<Semaphore>,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> StoreFuture<'static, T> {
    let io = io.clone();
    Box::pin(async move {
        let permit =
            io.acquire_owned().await.map_err(|_| StoreError::Failed("the journal store is closed".into()))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f()
        })
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

/// The journal line a store appends when a run's state changes
/// (`{"t":"state","state":"paused","at":"<RFC 3339 UTC>"}`,
/// docs/JOURNAL.md), without its newline. Every store writes the same line,
/// so a journal reads the same from any of them.
pub fn state_line(state: RunState) -> String {
    format!(
        "{{\"t\":\"state\",\"state\":\"{}\",\"at\":\"{}\"}}",
        state.as_str(),
        codemode_base::time_text::rfc3339_utc(std::time::SystemTime::now())
    )
}

/// The state the last `state` line of a journal names (`running` when
/// there is none yet).
pub(super) fn last_state(file: &mut File) -> Result<RunState, std::io::Error> {
    // The state line is the journal's last line when the run ended (about
    // 60 bytes) and near its end while it runs: a short tail first, then a
    // longer one, then the whole journal. Every run's state is read by
    // `runs list` and each prune, so this reads bytes, not text.
    let len = file.metadata()?.len();
    let mut tail = Vec::new();
    for want in [256, 8192, MAX_JOURNAL_BYTES] {
        let from = len.saturating_sub(want);
        tail.clear();
        tail.reserve(usize::try_from(len - from).unwrap_or(0));
        file.seek(SeekFrom::Start(from))?;
        Read::take(&mut *file, want).read_to_end(&mut tail)?;
        if let Some(state) = state_in(&tail) {
            return Ok(state);
        }
        if from == 0 {
            break;
        }
    }
    Ok(RunState::Running)
}

/// The state the last complete `state` line of `bytes` names. A last line
/// without its newline (cut by a crash) was never committed and is not
/// read, as [`lines_of`] leaves it out of the replay.
fn state_in(bytes: &[u8]) -> Option<RunState> {
    let complete = &bytes[..bytes.iter().rposition(|&b| b == b'\n').unwrap_or(0)];
    complete.split(|b| *b == b'\n').rev().find_map(state_of_line)
}

/// The state the last `state` line among a journal's `lines` (as a store
/// loads them) names; `None` when there is none. Unlike a store's
/// `load`, which reads a `running` run whose process is gone as
/// `interrupted`, this is what the journal itself says.
pub(crate) fn written_state(lines: &[String]) -> Option<RunState> {
    lines.iter().rev().find_map(|l| state_of_line(l.as_bytes()))
}

/// The state one journal line names, when it is a `state` line.
fn state_of_line(line: &[u8]) -> Option<RunState> {
    #[derive(serde::Deserialize)]
    struct StateLine<'a> {
        #[serde(borrow)]
        state: &'a str,
    }
    if !line.starts_with(b"{\"t\":\"state\"") {
        return None;
    }
    let line: StateLine<'_> = serde_json::from_slice(line).ok()?;
    RunState::parse(line.state)
}

/// Most bytes of a journal file read back. A run's journal grows by a
/// line per call and keeps each result whole, so a run of many calls with
/// large results can be large; a file over this was not written by
/// codemode as it stands (or its run cannot be resumed by a process that
/// must hold all of it in memory), and is refused before it is read.
pub(crate) const MAX_JOURNAL_BYTES: u64 = 1 << 30;

/// An error for a journal that is not as codemode writes them.
fn damaged(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// What a failed [`read_lines`] of run `run_id`'s journal at `path` is: a
/// damaged journal (not UTF-8, over a bound) is [`StoreError::Unreadable`],
/// final, as a damaged line is, the run staying as it was; anything else
/// is the store failing.
fn read_error(run_id: &str, path: &Path, e: std::io::Error) -> StoreError {
    match e.kind() {
        std::io::ErrorKind::InvalidData => {
            StoreError::Unreadable { run_id: run_id.to_owned(), why: e.to_string() }
        }
        _ => StoreError::failed(path.display(), e),
    }
}

/// The journal's complete lines.
///
/// # Errors
/// The file cannot be read, is over [`MAX_JOURNAL_BYTES`] or has more than
/// [`MAX_LINES`](super::replay::MAX_LINES) lines, or a complete line is
/// not UTF-8 (the journal was damaged: codemode writes only UTF-8 lines).
fn read_lines(file: &mut File) -> Result<Vec<String>, std::io::Error> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    // One byte over the bound tells a file over it, whatever its metadata says.
    file.take(MAX_JOURNAL_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_JOURNAL_BYTES {
        return Err(damaged(format!(
            "the journal is over {} MiB, the most a journal is read; it was not written by codemode as it is, \
             or its run made more or larger calls than can be resumed: start the program again",
            MAX_JOURNAL_BYTES >> 20
        )));
    }
    lines_of(&bytes)
}

/// The complete, non-empty lines of a journal's `bytes` (at most
/// [`MAX_JOURNAL_BYTES`]; the caller checks).
///
/// # Errors
/// More than [`MAX_LINES`](super::replay::MAX_LINES) lines, or a complete
/// line that is not UTF-8.
pub(crate) fn lines_of(bytes: &[u8]) -> Result<Vec<String>, std::io::Error> {
    // A line cut by a crash mid-write has no newline: it was never
    // committed, so it is left out (it may end inside a character).
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..=end],
        None => &[],
    };
    let count = complete.iter().filter(|&&b| b == b'\n').count();
    if count > super::replay::MAX_LINES {
        return Err(damaged(format!(
            "the journal has {count} lines, more than the {} a journal may have; it was not written by codemode \
             as it is",
            super::replay::MAX_LINES
        )));
    }
    let text = std::str::from_utf8(complete).map_err(|e| {
        let line = complete[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        damaged(format!("line {line} is not UTF-8 text"))
    })?;
    Ok(text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
}

/// The state of the run whose journal is `path`; a `running` journal
/// nobody holds (its lock probed) was interrupted.
fn probe(path: &Path, run_id: &str) -> Result<RunState, StoreError> {
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
    if state == RunState::Running && open_locked(path)?.is_some() {
        return Ok(RunState::Interrupted);
    }
    Ok(state)
}

impl JournalStore for LocalStore {
    fn describe(&self) -> String {
        format!("local folder {}", self.root.display())
    }

    fn workspace_bound(&self) -> bool {
        self.bound
    }

    fn folder(&self) -> Option<&Path> {
        Some(&self.root)
    }

    fn opens_late(&self) -> bool {
        true
    }

    fn records_ended_inline(&self) -> bool {
        // `record_ended` checks the folder (a few `stat` calls) and queues
        // the journal for the syncer's threads.
        true
    }

    fn flush(&self) {
        self.syncer.wait();
    }

    fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        let Ok(path) = self.journal_path(run_id) else { return Ok(()) };
        self.syncer.wait_for(&path);
        match self.syncer.take_failure(&path) {
            Some(why) => Err(StoreError::Failed(why)),
            None => Ok(()),
        }
    }

    fn record_ended<'a>(
        &'a self,
        run_id: &'a str,
        header: String,
        lines: String,
        state: RunState,
    ) -> StoreFuture<'a, ()> {
        // Made, written and fsync'd on the syncer's threads: a run that
        // never waited on a call does not wait for its folder and file
        // (each a new inode, milliseconds on a cold disk) either.
        let path = self.journal_path(run_id);
        let confine = self.confine.clone();
        let syncer = self.syncer.clone();
        Box::pin(async move {
            let path = path?;
            // What would refuse the folder (a link on the way, a place
            // outside the workspace) is said on the receipt, as for a
            // journal made at the start: a few lstat calls, no new inode.
            let dir = path.parent().expect("a run folder");
            crate::receipt::spill::check_run_dir(dir, confine.as_deref())
                .map_err(|e| StoreError::failed(format!("cannot make {}", dir.display()), e))?;
            let mut text = String::with_capacity(header.len() + lines.len() + 64);
            text.push_str(&header);
            text.push('\n');
            text.push_str(&lines);
            text.push_str(&state_line(state));
            text.push('\n');
            syncer.push_new(NewJournal { path, confine, text });
            Ok(())
        })
    }

    fn create<'a>(&'a self, run_id: &'a str, header: String) -> StoreFuture<'a, Box<dyn RunJournal>> {
        let path = self.journal_path(run_id);
        let confine = self.confine.clone();
        let (syncer, io) = (self.syncer.clone(), self.io.clone());
        blocking(&self.io, move || {
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
            let journal: Box<dyn RunJournal> = Box::new(LocalJournal {
                file: Arc::new(Mutex::new(Some(locked))),
                path,
                new_dir: Some(dir),
                syncer,
                io,
            });
            Ok(journal)
        })
    }

    fn claim<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, (Vec<String>, Box<dyn RunJournal>)> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        let confine = self.confine.clone();
        let (syncer, io) = (self.syncer.clone(), self.io.clone());
        blocking(&self.io, move || {
            syncer.wait_written();
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
                // `running` and its lock was free (this process has it
                // now): its process ended without pausing or finishing it.
                // It is recovered (docs/JOURNAL.md, "Recovery").
                RunState::Paused | RunState::Running => {}
                other => {
                    return Err(StoreError::NotResumable { run_id, state: NotResumableState::State(other) });
                }
            }
            let lines = read_lines(&mut locked).map_err(|e| read_error(&run_id, &path, e))?;
            // From here the run is this process's: a crash leaves it
            // `running` with the lock free, which reads as interrupted.
            locked
                .write_all(format!("{}\n", state_line(RunState::Running)).as_bytes())
                .and_then(|()| locked.sync_data())
                .map_err(|e| StoreError::failed(format!("cannot write {}", path.display()), e))?;
            let journal: Box<dyn RunJournal> = Box::new(LocalJournal {
                file: Arc::new(Mutex::new(Some(locked))),
                path,
                new_dir: None,
                syncer,
                io,
            });
            Ok((lines, journal))
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, StoredRun> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            syncer.wait_written();
            let path = path?;
            let state = probe(&path, &run_id)?;
            let mut file = File::open(&path).map_err(|e| StoreError::failed(path.display(), e))?;
            let lines = read_lines(&mut file).map_err(|e| read_error(&run_id, &path, e))?;
            Ok(StoredRun { run_id, state, lines })
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<RunSummary>> {
        let root = self.root.clone();
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            syncer.wait_written();
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
                let state = match probe(&path, &run_id) {
                    Ok(state) => state,
                    // Removed meanwhile by another process (a prune).
                    Err(_) if !path.exists() => continue,
                    Err(e) => return Err(e),
                };
                runs.push(RunSummary { run_id, state, updated_unix });
            }
            runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
            Ok(runs)
        })
    }

    fn remove<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            syncer.wait_written();
            let path = path?;
            let dir = path.parent().expect("a run folder").to_path_buf();
            if !dir.exists() {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Unknown });
            }
            // Another process removing the same run (two prunes at once)
            // may take the folder away at any step below: then the run is
            // gone, which is what was asked, and not a failure.
            let gone = |e: StoreError, still_there: &Path| {
                if still_there.exists() {
                    e
                } else {
                    StoreError::NotResumable { run_id: run_id.clone(), state: NotResumableState::Unknown }
                }
            };
            // Held while the folder goes, so no process claims it meanwhile.
            let _held = if path.exists() {
                // (Its journal gone: another process is removing the run.)
                match open_locked_patiently(&path).map_err(|e| gone(e, &path))? {
                    Some(locked) => Some(locked),
                    None => return Err(StoreError::NotResumable { run_id, state: NotResumableState::Busy }),
                }
            } else {
                None
            };
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::NotResumable {
                    run_id: run_id.clone(),
                    state: NotResumableState::Unknown,
                }),
                Err(e) => Err(gone(StoreError::failed(format!("cannot remove {}", dir.display()), e), &dir)),
            }
        })
    }

    fn annotate<'a>(&'a self, run_id: &'a str, line: String) -> StoreFuture<'a, ()> {
        let path = self.journal_path(run_id);
        let run_id = run_id.to_owned();
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            syncer.wait_written();
            let path = path?;
            if !path.exists() {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Unknown });
            }
            let Some(mut locked) = open_locked_patiently(&path)? else {
                return Err(StoreError::NotResumable { run_id, state: NotResumableState::Busy });
            };
            let fail = |e: std::io::Error| StoreError::failed(format!("cannot write {}", path.display()), e);
            locked.write_all(format!("{line}\n").as_bytes()).map_err(fail)?;
            locked.sync_data().map_err(fail)
        })
    }
    fn request_cancel<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, ()> {
        let path = self.journal_path(run_id);
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            syncer.wait_written();
            super::cancel_marker::request(&path?)
        })
    }

    fn cancel_requests<'a>(&'a self, run_ids: &'a [String]) -> StoreFuture<'a, Vec<String>> {
        let (root, ids) = (self.root.clone(), run_ids.to_vec());
        blocking(&self.io, move || Ok(super::cancel_marker::requested(&root, ids)))
    }
}

/// A local run journal: its file, locked (`None` once the run has ended).
struct LocalJournal {
    file: Arc<Mutex<Option<Locked>>>,
    path: PathBuf,
    /// The run's folder, when this journal made it (its entry in the
    /// parent is fsync'd on the first commit).
    new_dir: Option<PathBuf>,
    syncer: Arc<Syncer>,
    io: Arc<Semaphore>,
}

/// The error of a write to a journal whose run has ended.
/// Appends `text` to the journal file in `file` and syncs it, and the
/// run folder `new_dir`'s entry (with its parent's) when given, so the
/// journal is found after a crash of the machine. `what` names the
/// operation in the error (`cannot commit ...`).
fn write_synced(
    file: &Mutex<Option<Locked>>,
    path: &Path,
    text: &str,
    new_dir: Option<PathBuf>,
    what: &str,
) -> Result<(), StoreError> {
    let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
    let file = file.as_mut().ok_or_else(|| ended(path))?;
    let fail = |e: std::io::Error| StoreError::failed(format!("cannot {what} {}", path.display()), e);
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_data().map_err(fail)?;
    if let Some(dir) = new_dir {
        if let Some(parent) = dir.parent() {
            File::open(parent).and_then(|d| d.sync_all()).map_err(fail)?;
        }
        File::open(&dir).and_then(|d| d.sync_all()).map_err(fail)?;
    }
    Ok(())
}

fn ended(path: &Path) -> StoreError {
    StoreError::Failed(format!("{}: the run's journal was already ended", path.display()))
}

impl RunJournal for LocalJournal {
    fn append(&mut self, text: String) -> StoreFuture<'_, ()> {
        let file = self.file.clone();
        let path = self.path.clone();
        blocking(&self.io, move || {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            let file = file.as_mut().ok_or_else(|| ended(&path))?;
            // Not synced here: a pause syncs everything before it is
            // reported, a run's end leaves it to the syncer.
            file.write_all(text.as_bytes())
                .map_err(|e| StoreError::failed(format!("cannot write {}", path.display()), e))
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
        let text = format!("{}\n", state_line(state));
        blocking(&self.io, move || write_synced(&file, &path, &text, new_dir, "commit"))
    }

    fn append_durable(&mut self, text: String) -> StoreFuture<'_, ()> {
        let file = self.file.clone();
        let path = self.path.clone();
        // The run folder's entry too, the first time, so the journal is
        // found after a crash of the machine.
        let new_dir = self.new_dir.take();
        blocking(&self.io, move || write_synced(&file, &path, &text, new_dir, "write"))
    }

    fn end(&mut self, mut tail: String, state: RunState) -> StoreFuture<'_, ()> {
        if !state.is_final() {
            return Box::pin(async move {
                if !tail.is_empty() {
                    self.append(tail).await?;
                }
                self.commit(state).await
            });
        }
        let file = self.file.clone();
        let path = self.path.clone();
        let syncer = self.syncer.clone();
        blocking(&self.io, move || {
            let locked = file.lock().unwrap_or_else(|e| e.into_inner()).take();
            let mut locked = locked.ok_or_else(|| ended(&path))?;
            // The tail and the state line in one write.
            tail.push_str(&state_line(state));
            tail.push('\n');
            locked
                .write_all(tail.as_bytes())
                .map_err(|e| StoreError::failed(format!("cannot commit {}", path.display()), e))?;
            // The state is final: nothing can claim the run any more, so
            // the lock goes now; the fsync follows on the syncer's thread.
            match locked.unlock() {
                Ok(file) => syncer.push(file, path),
                // Still locked (it cannot be let go): synced here, then
                // dropped, which unlocks it.
                Err((locked, _)) => locked
                    .sync_data()
                    .map_err(|e| StoreError::failed(format!("cannot sync {}", path.display()), e))?,
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;

    fn state_of(text: &str) -> RunState {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        std::fs::write(&path, text).unwrap();
        last_state(&mut File::open(&path).unwrap()).unwrap()
    }

    /// The last state line counts, wherever the tail reads begin; one cut
    /// before its newline was never committed, as the replay says.
    #[test]
    fn the_last_committed_state_line_is_the_state() {
        let header = "{\"t\":\"header\"}\n";
        let paused = "{\"t\":\"state\",\"state\":\"paused\",\"at\":\"x\"}\n";
        let done = "{\"t\":\"state\",\"state\":\"completed\",\"at\":\"x\"}";
        assert_eq!(state_of(header), RunState::Running);
        assert_eq!(state_of(&format!("{header}{paused}")), RunState::Paused);
        assert_eq!(state_of(&format!("{header}{paused}{done}\n")), RunState::Completed);
        assert_eq!(state_of(&format!("{header}{paused}{done}")), RunState::Paused, "cut: not committed");
        // Past the short tail, and past the long one.
        let call = format!("{{\"t\":\"call\",\"x\":\"{}\"}}\n", "a".repeat(300));
        assert_eq!(state_of(&format!("{header}{paused}{call}")), RunState::Paused);
        let calls = call.repeat(40);
        assert_eq!(state_of(&format!("{header}{paused}{calls}")), RunState::Paused);
        assert_eq!(state_of(&format!("{header}{calls}")), RunState::Running);
        // A state-shaped object inside another line is not a state line.
        let inside = "{\"t\":\"done\",\"payload\":{\"t\":\"state\",\"state\":\"failed\"}}\n";
        assert_eq!(state_of(&format!("{header}{paused}{inside}")), RunState::Paused);
    }
}
