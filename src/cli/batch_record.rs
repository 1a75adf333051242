//! The record a program batch keeps of its lines (docs/BATCH.md, "The
//! batch's record"): `<runs folder>/.batches/<BATCH_ID>.jsonl`, beside the
//! runs' journals of the local store (a name starting with `.` is never
//! taken for a run).
//!
//! One JSON object per line: the header (`{"t":"batch"}`: the program and
//! input it is of), then `{"t":"start", line, run_id}` before a line's run
//! starts and `{"t":"end", line, run_id, status, output}` once it ended.
//! Each is appended with one write and made durable (fsync) before the
//! batch goes on, so a batch killed at any point finds on restart every
//! line that ended, and the run of every line that started. A last line
//! torn by a crash is cut off when the record is opened again. The process
//! running the batch holds an exclusive lock (`flock`) on the file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The folder of batch records inside a runs folder.
const BATCHES: &str = ".batches";

/// What a batch is of: checked on restart, so a changed program or input
/// file is not taken for the same batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Header {
    pub batch_id: String,
    /// Seconds since the Unix epoch.
    pub created_unix: u64,
    pub program: Source,
    pub input: Source,
    /// How many usable input lines the batch has.
    pub lines: usize,
}

/// A file the batch is of: where it was read from and the SHA-256 of its
/// bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Source {
    pub path: String,
    pub sha256: String,
}

/// One line of the record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Entry {
    Batch(Header),
    /// Input line `line` (1-based) got run `run_id`, which starts next.
    Start {
        line: usize,
        run_id: String,
    },
    /// Input line `line`'s run ended (or paused) with `status`; `output`
    /// is the JSON line printed for it.
    End {
        line: usize,
        run_id: String,
        status: String,
        output: Value,
    },
}

/// Where a line stands, by the record's last entry for it.
#[derive(Debug, Clone)]
pub(crate) enum LineState {
    Started { run_id: String },
    Ended { run_id: String, status: String, output: Value },
}

/// The run statuses after which a line is not run again: every status but
/// `paused`.
pub(crate) fn is_final(status: &str) -> bool {
    status != "paused"
}

/// A batch id: 1 to 100 letters, digits, `.`, `_` or `-`, not starting
/// with `.`.
pub(crate) fn check_batch_id(id: &str) -> anyhow::Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        bail!(
            "`{}` is not a batch id: use 1 to 100 letters, digits, `.`, `_` or `-`, not starting with `.`",
            super::run::printable(id)
        );
    }
    Ok(())
}

/// A new batch id: `batch-YYYYMMDDThhmmssZ-xxxxxxxx`.
pub(crate) fn new_batch_id() -> String {
    codemode::Engine::new_run_id().replacen("run-", "batch-", 1)
}

/// The record file of batch `id` under the runs folder `folder`.
pub(crate) fn path(folder: &Path, id: &str) -> PathBuf {
    folder.join(BATCHES).join(format!("{id}.jsonl"))
}

/// The record of a batch this process runs: held (locked) while it lives.
pub(crate) struct Record {
    file: Flock<File>,
    path: PathBuf,
}

impl Record {
    /// Opens (or makes, with `header`) the record of `header.batch_id`
    /// under `folder`, locks it, and returns it with the entries it holds.
    ///
    /// # Errors
    /// The folder or file cannot be made or read; another process holds
    /// the batch; the record is of another program or input.
    pub(crate) fn open(folder: &Path, header: &Header) -> anyhow::Result<(Record, Vec<Entry>)> {
        let path = path(folder, &header.batch_id);
        let dir = path.parent().expect("a batches folder").to_path_buf();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot make {}", dir.display()))?;
        let mut options = OpenOptions::new();
        options.create(true).read(true).append(true).mode(0o600);
        let file = options.open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut file = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            anyhow::anyhow!(
                "batch {} is running in another process (its record {} is held); wait for it, or follow it \
                 with `codemode batch status {}`",
                header.batch_id,
                path.display(),
                header.batch_id
            )
        })?;
        let entries = read_whole(&mut file, &path, true)?;
        let mut record = Record { file, path };
        match entries.first() {
            None => {
                record.append(&Entry::Batch(header.clone()))?;
                if let Ok(d) = File::open(&dir) {
                    let _ = d.sync_all();
                }
            }
            Some(Entry::Batch(was)) => check_same(was, header)?,
            Some(_) => bail!(
                "{} does not start with a batch header; it is not a batch record",
                record.path.display()
            ),
        }
        Ok((record, entries))
    }

    /// Appends `entry` in one write and makes it durable (fsync).
    pub(crate) fn append(&mut self, entry: &Entry) -> anyhow::Result<()> {
        let mut line = serde_json::to_string(entry)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("cannot write the batch record {}", self.path.display()))
    }
}

use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};

/// Refuses a restart whose program or input differs from the record's.
fn check_same(was: &Header, now: &Header) -> anyhow::Result<()> {
    let mut changed = Vec::new();
    if was.program.sha256 != now.program.sha256 {
        changed.push(format!("the program ({} then, {} now)", was.program.path, now.program.path));
    }
    if was.input.sha256 != now.input.sha256 {
        changed.push(format!("the input ({} then, {} now)", was.input.path, now.input.path));
    }
    if !changed.is_empty() {
        bail!(
            "batch {} was started with other bytes: {} changed; a restart must give the same program and input \
             (or start a new batch without --batch-id)",
            was.batch_id,
            changed.join(" and ")
        );
    }
    Ok(())
}

/// The entries of a record; with `repair`, a last line torn by a crash
/// (no newline) is cut off the file.
fn read_whole(file: &mut File, path: &Path, repair: bool) -> anyhow::Result<Vec<Entry>> {
    let mut bytes = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read the batch record {}", path.display()))?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if repair && whole < bytes.len() {
        file.set_len(whole as u64).with_context(|| format!("cannot repair {}", path.display()))?;
    }
    let mut entries = Vec::new();
    for (i, line) in bytes[..whole].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let entry = serde_json::from_slice(line).with_context(|| {
            format!("the batch record {} is unreadable at line {}", path.display(), i + 1)
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// What `codemode batch status` reads: the record's entries and whether a
/// process holds the batch now.
pub(crate) fn read(folder: &Path, id: &str) -> anyhow::Result<(Vec<Entry>, bool)> {
    let path = path(folder, id);
    let file = File::open(&path).with_context(|| {
        format!(
            "no batch {id} in {} (check the id, and give the --workspace or --journal the batch ran with)",
            folder.display()
        )
    })?;
    let (mut file, held) = match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(locked) => (locked.unlock().map_err(|(_, e)| anyhow::anyhow!("cannot unlock: {e}"))?, false),
        Err((file, _)) => (file, true),
    };
    Ok((read_whole(&mut file, &path, false)?, held))
}

/// Each line's state by the record's last entry for it.
pub(crate) fn states(entries: &[Entry]) -> BTreeMap<usize, LineState> {
    let mut states = BTreeMap::new();
    for entry in entries {
        match entry {
            Entry::Batch(_) => {}
            Entry::Start { line, run_id } => {
                states.insert(*line, LineState::Started { run_id: run_id.clone() });
            }
            Entry::End { line, run_id, status, output } => {
                let ended = LineState::Ended {
                    run_id: run_id.clone(),
                    status: status.clone(),
                    output: output.clone(),
                };
                states.insert(*line, ended);
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(id: &str, program: &str) -> Header {
        let source = |sha: &str| Source { path: "p".into(), sha256: sha.into() };
        Header {
            batch_id: id.into(),
            created_unix: 0,
            program: source(program),
            input: source("i"),
            lines: 3,
        }
    }

    #[test]
    fn a_record_keeps_its_entries_cuts_a_torn_line_and_refuses_another_program() {
        let dir = tempfile::tempdir().unwrap();
        let (mut record, entries) = Record::open(dir.path(), &header("b1", "x")).unwrap();
        assert!(entries.is_empty());
        record.append(&Entry::Start { line: 1, run_id: "r1".into() }).unwrap();
        assert!(Record::open(dir.path(), &header("b1", "x")).is_err(), "held by this one");
        drop(record);
        // A torn last line, as a crash mid-write leaves.
        let mut f = OpenOptions::new().append(true).open(path(dir.path(), "b1")).unwrap();
        f.write_all(b"{\"t\":\"end\",\"li").unwrap();
        let (_record, entries) = Record::open(dir.path(), &header("b1", "x")).unwrap();
        assert_eq!(entries.len(), 2);
        assert!(matches!(states(&entries)[&1], LineState::Started { .. }));
        drop(_record);
        let e = Record::open(dir.path(), &header("b1", "y")).err().unwrap().to_string();
        assert!(e.contains("the program"), "{e}");
    }

    #[test]
    fn batch_ids_are_one_safe_name() {
        assert!(check_batch_id("nightly-2026.12_05").is_ok());
        assert!(check_batch_id(&new_batch_id()).is_ok());
        for bad in ["", ".hidden", "a/b", "../x", &"x".repeat(101)] {
            assert!(check_batch_id(bad).is_err(), "{bad}");
        }
    }
}
