//! Bounding results and return values, with spillover to disk.
//!
//! A value over its bound keeps a UTF-8-safe prefix; every byte of the whole
//! is written first, atomically (temp file + rename), to a spill file under
//! `<spill_root>/<run_id>/`. The size of a value is the byte length of a
//! string, or of the compact JSON text of anything else.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::Truncation;

/// A value after bounding.
#[derive(Debug)]
pub(crate) struct Bounded {
    /// The value to hand on: unchanged, or the kept prefix as a string.
    pub value: Value,
    /// Size of the whole in bytes.
    pub bytes: u64,
    /// What was cut, when anything was.
    pub truncated: Option<Truncation>,
    /// Why the spill file could not be written, when it could not.
    pub spill_error: Option<String>,
}

/// Where one run's spill files go, and how many bytes it may write there.
#[derive(Debug)]
pub(crate) struct SpillArea {
    /// The run's spill folder: `<spill root>/<run id>/spill`, beside (not
    /// holding) its journal and receipt.
    dir: PathBuf,
    /// When set, the folder must resolve (symlinks followed) inside this
    /// path: the workspace, for the default spill root, so a `.codemode`
    /// symlink cannot send spill files elsewhere.
    confine: Option<PathBuf>,
    used: AtomicU64,
    limit: u64,
    /// Why spill files could not be written, in order; they become the
    /// receipt's `warnings`, so a failed spill is never silent.
    failures: std::sync::Mutex<Vec<String>>,
}

impl SpillArea {
    /// The spill area of run `run_id` under `root` (its `spill/` folder),
    /// with a budget of `limit` bytes.
    pub(crate) fn new(root: &Path, run_id: &str, confine: Option<PathBuf>, limit: u64) -> Self {
        Self::in_dir(crate::sandbox::own_spill_folder(root, run_id), confine, limit)
    }

    /// The run's own folder `<root>/<run_id>` (its receipt goes there, out
    /// of the program's reach), unbounded.
    pub(crate) fn run_folder(root: &Path, run_id: &str, confine: Option<PathBuf>) -> Self {
        Self::in_dir(root.join(run_id), confine, u64::MAX)
    }

    fn in_dir(dir: PathBuf, confine: Option<PathBuf>, limit: u64) -> Self {
        SpillArea { dir, confine, used: AtomicU64::new(0), limit, failures: Default::default() }
    }
}

impl SpillArea {
    /// Records that a file of this area could not be written.
    pub(crate) fn failed(&self, why: String) {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(why);
    }

    /// Why spill files could not be written, in order.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Where a spilled value goes and how it is named.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpillTarget<'a> {
    pub area: &'a SpillArea,
    /// File name without extension, e.g. `call-3` or `value`.
    pub stem: &'a str,
}

/// A value measured against its bound.
#[derive(Debug)]
pub(crate) enum Measured {
    /// It fits: the value, its size, and its compact JSON when it is not a
    /// string (so callers need not serialise it again).
    Fits { value: Value, bytes: u64, json: Option<String> },
    /// It does not: its whole text (the string, or the JSON) and the spill
    /// file's extension.
    Over { text: String, ext: &'static str },
}

/// Measures `value` against `limit` bytes, serialising it at most once.
pub(crate) fn measure(value: Value, limit: usize) -> Measured {
    match value {
        Value::String(s) if s.len() <= limit => {
            Measured::Fits { bytes: s.len() as u64, value: Value::String(s), json: None }
        }
        Value::String(s) => Measured::Over { text: s, ext: "txt" },
        other => {
            let text = serde_json::to_string(&other).unwrap_or_default();
            if text.len() <= limit {
                Measured::Fits { bytes: text.len() as u64, value: other, json: Some(text) }
            } else {
                Measured::Over { text, ext: "json" }
            }
        }
    }
}

/// Keeps `value` whole when it fits in `limit` bytes; otherwise writes it to
/// a spill file and returns a UTF-8-safe prefix of its text.
pub(crate) fn bound(value: Value, limit: usize, target: SpillTarget<'_>) -> Bounded {
    match measure(value, limit) {
        Measured::Fits { value, bytes, .. } => Bounded { value, bytes, truncated: None, spill_error: None },
        Measured::Over { text, ext } => spill(text, ext, limit, target),
    }
}

/// Writes the whole `text` to a spill file (blocking I/O) and keeps a
/// UTF-8-safe prefix of at most `limit` bytes.
pub(crate) fn spill(text: String, ext: &str, limit: usize, target: SpillTarget<'_>) -> Bounded {
    let (spill_path, spill_error) = match write_spill(&target, ext, text.as_bytes()) {
        Ok(path) => (Some(path.display().to_string()), None),
        Err(e) => {
            let message = format!("could not write the spill file: {e}");
            target.area.failed(format!("{}: {message}", target.stem));
            (None, Some(message))
        }
    };
    let bytes = text.len() as u64;
    let kept = utf8_prefix(&text, limit).len();
    let truncated =
        Truncation { original_bytes: Some(bytes), kept_bytes: kept as u64, spill_path, tool_cut: None };
    let mut text = text;
    text.truncate(kept);
    Bounded { value: Value::String(text), bytes, truncated: Some(truncated), spill_error }
}

/// The most bytes of one text that a receipt or a message to the program
/// keeps: a tool's error text, a refusal's reason (with any argument it
/// quotes), a tool name, an uncaught exception's message and stack. Longer
/// text keeps a UTF-8-safe prefix followed by a marker giving the kept and
/// whole sizes, the two within this many bytes ([`cut_text`]); a tool's
/// error text and an uncaught exception's message are also written whole
/// to a spill file ([`cut_spilled`]). A cut text fits the bound, so cutting
/// it again changes nothing. Console lines have their own bound
/// (`Limits::log_bytes`). 4 KiB.
pub(crate) const TEXT_BYTES: usize = 4 << 10;

/// `text` cut to [`TEXT_BYTES`] with the marker ` [cut at K of N bytes]`,
/// or ` [cut at K of N bytes; the whole text is in PATH]`.
fn cut_with_marker(text: &str, spill_path: Option<&str>) -> String {
    let marker = |kept: usize| match spill_path {
        Some(path) => format!(" [cut at {kept} of {} bytes; the whole text is in {path}]", text.len()),
        None => format!(" [cut at {kept} of {} bytes]", text.len()),
    };
    // The marker is no longer with the real kept size than with the bound.
    let room = TEXT_BYTES.saturating_sub(marker(TEXT_BYTES).len());
    let mut kept = utf8_prefix(text, room).to_owned();
    kept.push_str(&marker(kept.len()));
    kept
}

/// `text` whole when it fits in [`TEXT_BYTES`], else its UTF-8-safe prefix
/// and a marker with the kept and whole sizes (`… [cut at 4065 of 1000061
/// bytes]`), [`TEXT_BYTES`] in all.
pub(crate) fn cut_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= TEXT_BYTES {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(cut_with_marker(text, None))
}

/// [`cut_text`] for an owned text: kept as it is when it fits.
pub(crate) fn cut_owned(text: String) -> String {
    if text.len() <= TEXT_BYTES { text } else { cut_with_marker(&text, None) }
}

/// [`cut_text`], writing the whole text first to the spill file
/// `<stem>.txt` of `target` (blocking I/O) and naming it in the marker.
/// When the file cannot be written, the marker has no path and the area
/// records why (the receipt's `warnings`).
pub(crate) fn cut_spilled(text: String, target: SpillTarget<'_>) -> String {
    if text.len() <= TEXT_BYTES {
        return text;
    }
    let path = match write_spill(&target, "txt", text.as_bytes()) {
        Ok(path) => Some(path.display().to_string()),
        Err(e) => {
            target.area.failed(format!("{}: could not write the spill file: {e}", target.stem));
            None
        }
    };
    cut_with_marker(&text, path.as_deref())
}

/// `value` formatted with `Display`, cut to [`TEXT_BYTES`] while it is
/// written: formatting stops there, so a message that quotes a huge
/// argument (a JSON Schema error names the value it rejects) costs no more
/// than the bound. A cut text ends with ` [cut at K bytes]` (its whole
/// size is not known: it was never made).
pub(crate) fn display_cut(value: impl std::fmt::Display) -> String {
    /// Room left for the marker.
    const MARKER: usize = 32;
    /// Keeps the first bytes and fails the write past them.
    struct Capped(String, bool);
    impl std::fmt::Write for Capped {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = TEXT_BYTES - MARKER - self.0.len();
            if s.len() <= room {
                self.0.push_str(s);
                return Ok(());
            }
            self.0.push_str(utf8_prefix(s, room));
            self.1 = true;
            Err(std::fmt::Error)
        }
    }
    let mut out = Capped(String::new(), false);
    let _ = std::fmt::write(&mut out, format_args!("{value}"));
    if out.1 {
        let kept = out.0.len();
        out.0.push_str(&format!(" [cut at {kept} bytes]"));
    }
    out.0
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character
/// boundary.
pub(crate) fn utf8_prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Writes `bytes` to `<area>/<stem>.<ext>` atomically and returns the path,
/// within the run's spill budget and confinement.
fn write_spill(target: &SpillTarget<'_>, ext: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let area = target.area;
    let size = bytes.len() as u64;
    if area.used.fetch_add(size, Ordering::Relaxed) + size > area.limit {
        area.used.fetch_sub(size, Ordering::Relaxed);
        return Err(std::io::Error::other(format!(
            "the run's spill budget of {} bytes is used up ({})",
            area.limit,
            codemode_base::limit_settings::setting("spill_bytes")
        )));
    }
    let written = write_file(area, target.stem, ext, bytes);
    if written.is_err() {
        area.used.fetch_sub(size, Ordering::Relaxed);
    }
    written
}

/// Makes a run's folder `dir` (and its parents) and returns it: resolved
/// through its links with `confine`, else as named (made absolute). With
/// `confine` (the workspace, for the default place), the folder must
/// resolve inside it and be reached through no symbolic link below it, so
/// a `.codemode` link cannot send receipts, spill files or journals
/// elsewhere.
///
/// # Errors
/// The folder cannot be made, or it resolves outside `confine`, or a link
/// is on the way.
pub(crate) fn make_run_dir(dir: &Path, confine: Option<&Path>) -> std::io::Result<PathBuf> {
    check_run_dir(dir, confine)?;
    // The default place, `<workspace>/.codemode`, made here for the first
    // time: it gets a `.gitignore` so runs never show in `git status`.
    let new_codemode = confine
        .map(|c| c.join(codemode_base::HIDDEN_NAME))
        .filter(|folder| dir.starts_with(folder) && folder.symlink_metadata().is_err());
    // Only the user reads runs: results may hold what the tools read.
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let Some(confine) = confine else {
        // Nothing to stay inside: see `resolve_run_dir`.
        return Ok(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()));
    };
    let resolved = std::fs::canonicalize(dir)?;
    confined(&resolved, Some(confine))?;
    if let Some(folder) = new_codemode
        && let Err(e) = write_gitignore(&folder)
    {
        tracing::warn!("could not write {}/.gitignore: {e}", folder.display());
    }
    Ok(resolved)
}

/// `resolved` must lie inside `confine`, when there is one.
fn confined(resolved: &Path, confine: Option<&Path>) -> std::io::Result<()> {
    match confine {
        Some(confine) if !resolved.starts_with(confine) => Err(std::io::Error::other(format!(
            "the run folder resolves to {}, outside the workspace (is .codemode a symlink?)",
            resolved.display()
        ))),
        _ => Ok(()),
    }
}

/// Checks a run's folder `dir` (made or not) the way [`make_run_dir`]
/// does, without making anything: with `confine`, no symbolic link on the
/// way down from it, and the deepest folder that exists resolves inside
/// it. What reads or resumes a run checks this first, so a linked
/// `.codemode` cannot hand it another workspace's runs.
///
/// # Errors
/// A link is on the way, or the folder resolves outside `confine`.
pub(crate) fn check_run_dir(dir: &Path, confine: Option<&Path>) -> std::io::Result<()> {
    resolve_run_dir(dir, confine).map(|_| ())
}

/// Checks a run's folder `dir` as [`check_run_dir`] does and returns the
/// path [`make_run_dir`] would return for it, without making anything:
/// with `confine`, its deepest existing folder resolved and the rest as
/// given; without, `dir` made absolute.
///
/// # Errors
/// As [`check_run_dir`].
pub(crate) fn resolve_run_dir(dir: &Path, confine: Option<&Path>) -> std::io::Result<PathBuf> {
    // No link on the way from the confinement down: a `.codemode` that is
    // a link (even one inside the workspace) could show earlier runs'
    // receipts under another name.
    if let Some(confine) = confine
        && let Some(link) = codemode_base::links::link_below(dir, confine)
    {
        return Err(std::io::Error::other(format!(
            "{} is a symbolic link; receipts, spill files and journals are not written through links",
            link.display()
        )));
    }
    let Some(confine) = confine else {
        // Nothing to stay inside (run state in the state folder, or a
        // folder the host named): the folder is the one named, and
        // resolving its links (a `readlink` per component, on every run's
        // answer) would decide nothing. Only what holds it is looked at:
        // a run's folder is new, and looking up a name not yet in the
        // runs folder waits for that folder's lock while another run's
        // folder is being made there (by the journal's syncer, in
        // milliseconds when the disk is busy: most of a served run's
        // answer time, before).
        // That holder is looked at once per process: a `stat` of it also
        // waits while a run's folder is made in it.
        let holder = dir.parent().unwrap_or(dir);
        if !holders_seen::contains(holder) {
            let existing = holder.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
            if !existing.is_dir() {
                return Err(std::io::Error::other(format!("{} is not a folder", existing.display())));
            }
            if existing == holder {
                holders_seen::insert(holder);
            }
        }
        return Ok(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()));
    };
    // The deepest folder that exists, before anything is made below it.
    let existing = dir.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
    let resolved = std::fs::canonicalize(existing)?;
    confined(&resolved, Some(confine))?;
    if !resolved.is_dir() {
        return Err(std::io::Error::other(format!("{} is not a folder", resolved.display())));
    }
    Ok(match dir.strip_prefix(existing) {
        Ok(rest) if !rest.as_os_str().is_empty() => resolved.join(rest),
        _ => resolved,
    })
}

/// Folders that hold run folders, seen to be folders by this process
/// ([`resolve_run_dir`] without a confinement): a few per process (one
/// per runs folder), forgotten all at once past [`holders_seen::MAX`].
/// One replaced by a file later makes the receipt's or journal's write
/// fail then, with its error, instead of the answer saying so first.
mod holders_seen {
    use std::collections::HashSet;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, OnceLock, PoisonError};

    /// Folders remembered at most.
    pub(super) const MAX: usize = 64;

    fn seen() -> &'static Mutex<HashSet<PathBuf>> {
        static SEEN: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
        SEEN.get_or_init(Mutex::default)
    }

    pub(super) fn contains(folder: &Path) -> bool {
        seen().lock().unwrap_or_else(PoisonError::into_inner).contains(folder)
    }

    pub(super) fn insert(folder: &Path) {
        let mut seen = seen().lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX {
            seen.clear();
        }
        seen.insert(folder.to_path_buf());
    }
}

/// The `.gitignore` codemode puts in a `.codemode` folder it makes.
const GITIGNORE: &str = "*\n";

/// Writes [`GITIGNORE`] into `folder` atomically (a temporary file linked
/// into place), never replacing a `.gitignore` that exists.
fn write_gitignore(folder: &Path) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(folder)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        // An ordinary file (a temporary file is made 0600).
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.write_all(GITIGNORE.as_bytes())?;
    tmp.as_file().sync_data()?;
    match tmp.persist_noclobber(folder.join(".gitignore")) {
        Ok(_) => Ok(()),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e.error),
    }
}

/// The absolute path [`write_file`] gives `<area>/<stem>.<ext>`, the area's
/// folder checked (as [`check_run_dir`]) but neither made nor written.
///
/// # Errors
/// As [`check_run_dir`].
pub(crate) fn file_path(area: &SpillArea, stem: &str, ext: &str) -> std::io::Result<PathBuf> {
    let path = resolve_run_dir(&area.dir, area.confine.as_deref())?.join(format!("{stem}.{ext}"));
    Ok(std::path::absolute(&path).unwrap_or(path))
}

/// Writes `<area>/<stem>.<ext>` atomically, within the area's confinement
/// but outside its budget (for the run's own receipt).
pub(crate) fn write_file(area: &SpillArea, stem: &str, ext: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    write_file_as(area, stem, ext, bytes, true)
}

/// [`write_file`], its data synced before the rename when `sync` (else a
/// machine crash soon after may leave the file missing or empty; readers
/// never see a part of it either way).
pub(crate) fn write_file_as(
    area: &SpillArea,
    stem: &str,
    ext: &str,
    bytes: &[u8],
    sync: bool,
) -> std::io::Result<PathBuf> {
    let dir = make_run_dir(&area.dir, area.confine.as_deref())?;
    let path = dir.join(format!("{stem}.{ext}"));
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    tmp.write_all(bytes)?;
    if sync {
        tmp.as_file().sync_data()?;
    }
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(std::path::absolute(&path).unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn area(root: &Path) -> SpillArea {
        SpillArea::new(root, "r1", None, 1 << 20)
    }

    fn target(area: &SpillArea) -> SpillTarget<'_> {
        SpillTarget { area, stem: "call-1" }
    }

    #[test]
    fn long_texts_keep_a_prefix_and_their_size_within_the_bound() {
        assert_eq!(cut_text("short"), "short");
        let long = "é".repeat(TEXT_BYTES);
        let cut = cut_text(&long);
        assert!(cut.len() <= TEXT_BYTES, "{}", cut.len());
        assert!(cut.ends_with(&format!("of {} bytes]", long.len())), "{cut:.80}");
        assert_eq!(cut_owned(cut.clone().into_owned()), cut, "a cut text is not cut again");

        let dir = tempfile::tempdir().unwrap();
        let area = area(dir.path());
        let spilled = cut_spilled(long.clone(), SpillTarget { area: &area, stem: "call-1-error" });
        assert!(spilled.len() <= TEXT_BYTES);
        let path = spilled.rsplit("the whole text is in ").next().unwrap().strip_suffix(']').unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), long);
    }

    #[test]
    fn display_cut_stops_formatting_at_the_bound() {
        let huge = Value::String("q".repeat(1 << 20));
        let text = display_cut(format_args!("at /path: {huge} is not of type \"string\""));
        assert!(text.len() <= TEXT_BYTES && text.starts_with("at /path: \"qqq"), "{text:.60}");
        assert!(text.ends_with(" bytes]"), "{}", &text[text.len() - 40..]);
        assert_eq!(display_cut("short"), "short");
    }

    #[test]
    fn small_values_pass_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let b = bound(json!({"a": 1}), 100, target(&area(dir.path())));
        assert_eq!(b.value, json!({"a": 1}));
        assert_eq!(b.bytes, 7);
        assert!(b.truncated.is_none());
        assert!(!dir.path().join("r1").exists());
    }

    #[test]
    fn long_strings_keep_a_utf8_safe_prefix_and_spill_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let s = "é".repeat(10); // 20 bytes
        let b = bound(Value::String(s.clone()), 5, target(&area(dir.path())));
        assert_eq!(b.value, Value::String("éé".into()));
        let t = b.truncated.unwrap();
        assert_eq!((t.original_bytes, t.kept_bytes), (Some(20), 4));
        let spilled = std::fs::read_to_string(t.spill_path.unwrap()).unwrap();
        assert_eq!(spilled, s);
    }

    #[test]
    fn structured_values_spill_their_json() {
        let dir = tempfile::tempdir().unwrap();
        let v = json!({"list": [1, 2, 3, 4, 5, 6, 7, 8, 9]});
        let b = bound(v.clone(), 8, target(&area(dir.path())));
        assert_eq!(b.value, Value::String("{\"list\":".into()));
        let path = b.truncated.unwrap().spill_path.unwrap();
        assert!(path.ends_with("call-1.json"));
        let back: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn an_unwritable_spill_root_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let b = bound(Value::String("abcdef".into()), 3, target(&area(&file)));
        assert_eq!(b.value, Value::String("abc".into()));
        assert!(b.truncated.unwrap().spill_path.is_none());
        assert!(b.spill_error.unwrap().contains("spill file"));
    }

    #[test]
    fn the_spill_budget_stops_spilling_but_not_cutting() {
        let dir = tempfile::tempdir().unwrap();
        let area = SpillArea::new(dir.path(), "r1", None, 10);
        let first = bound(Value::String("x".repeat(8)), 4, SpillTarget { area: &area, stem: "a" });
        assert!(first.truncated.unwrap().spill_path.is_some());
        let second = bound(Value::String("y".repeat(8)), 4, SpillTarget { area: &area, stem: "b" });
        assert_eq!(second.value, Value::String("yyyy".into()));
        assert!(second.truncated.unwrap().spill_path.is_none());
        assert!(second.spill_error.unwrap().contains("spill budget"));
        assert_eq!(area.failures().len(), 1);
        assert!(area.failures()[0].starts_with("b: could not write"), "{:?}", area.failures());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_spill_folder_outside_the_confinement_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws_path = std::fs::canonicalize(ws.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws_path.join(".codemode")).unwrap();
        let area = SpillArea::new(&ws_path.join(".codemode/runs"), "r1", Some(ws_path.clone()), 1 << 20);
        let b = bound(Value::String("z".repeat(8)), 4, SpillTarget { area: &area, stem: "v" });
        assert!(b.truncated.unwrap().spill_path.is_none());
        assert!(b.spill_error.unwrap().contains("is a symbolic link"));
        assert!(!outside.path().join("runs").exists(), "nothing is created outside");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_spill_folder_inside_the_workspace_is_refused_too() {
        let ws = tempfile::tempdir().unwrap();
        let ws_path = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(ws_path.join("cm-data")).unwrap();
        std::os::unix::fs::symlink(ws_path.join("cm-data"), ws_path.join(".codemode")).unwrap();
        let area = SpillArea::new(&ws_path.join(".codemode/runs"), "r1", Some(ws_path.clone()), 1 << 20);
        let b = bound(Value::String("z".repeat(8)), 4, SpillTarget { area: &area, stem: "v" });
        assert!(b.spill_error.unwrap().contains("is a symbolic link"));
        assert!(!ws_path.join("cm-data/runs").exists());
    }

    #[test]
    fn a_codemode_folder_made_here_gets_a_gitignore_and_an_existing_one_is_kept() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        make_run_dir(&ws.join(".codemode/runs/r1"), Some(&ws)).unwrap();
        assert_eq!(std::fs::read_to_string(ws.join(".codemode/.gitignore")).unwrap(), "*\n");
        std::fs::write(ws.join(".codemode/.gitignore"), "mine\n").unwrap();
        make_run_dir(&ws.join(".codemode/runs/r2"), Some(&ws)).unwrap();
        assert_eq!(std::fs::read_to_string(ws.join(".codemode/.gitignore")).unwrap(), "mine\n");
        let names: Vec<_> =
            std::fs::read_dir(ws.join(".codemode")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");

        // A .codemode the user made is left as it is; so is a folder
        // elsewhere (a spill_dir of the host's).
        let other = tempfile::tempdir().unwrap();
        let other = std::fs::canonicalize(other.path()).unwrap();
        std::fs::create_dir(other.join(".codemode")).unwrap();
        make_run_dir(&other.join(".codemode/runs/r1"), Some(&other)).unwrap();
        assert!(!other.join(".codemode/.gitignore").exists());
        make_run_dir(&other.join("spill/.codemode/r1"), None).unwrap();
        assert!(!other.join("spill/.codemode/.gitignore").exists());
    }

    #[test]
    fn a_runs_folder_that_is_a_file_is_refused_and_a_folder_is_looked_at_once() {
        let root = tempfile::tempdir().unwrap();
        let runs = root.path().join("runs");
        std::fs::write(&runs, "in the way").unwrap();
        let e = resolve_run_dir(&runs.join("run-1"), None).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        assert!(!holders_seen::contains(&runs), "a file is not remembered");
        std::fs::remove_file(&runs).unwrap();
        // Not made yet: its folder is checked, and it is not remembered.
        assert_eq!(resolve_run_dir(&runs.join("run-1"), None).unwrap(), runs.join("run-1"));
        assert!(!holders_seen::contains(&runs));
        std::fs::create_dir(&runs).unwrap();
        // The run's own folder is not looked up (it is new); the named
        // path comes back as named, links unresolved.
        assert_eq!(resolve_run_dir(&runs.join("run-2"), None).unwrap(), runs.join("run-2"));
        assert!(holders_seen::contains(&runs), "a folder is remembered");
    }
}
