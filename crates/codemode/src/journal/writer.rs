//! The journal of one run as it goes. The VM thread appends lines to a
//! buffer ([`RunLog`]); full buffers go to a task on the tool runtime that
//! owns the store's [`RunJournal`], so the program never waits on the
//! disk or the database; [`RunLog::finish`] sends the rest and waits for
//! the commit (durable before the run reports `paused`) or the end
//! (written before the run reports its end; see [`RunJournal::end`]). A
//! store that opens late ([`JournalStore::opens_late`]) has the journal
//! made when the run first hands lines over or pauses; a run that ends
//! before that is handed to [`JournalStore::record_ended`] whole. For such
//! a store the writer task itself starts only with the first lines sent
//! to it: a run that never sends any records its journal from the VM
//! thread (when the store [records ended runs
//! inline](JournalStore::records_ended_inline)), with no task and no
//! hand-off to the tool runtime and back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use super::record;
use super::{JournalStore, RunJournal, RunState, StoreError};

/// Lines buffered before they are handed to the writer task, in bytes.
pub(crate) const FLUSH_BYTES: usize = 256 * 1024;

pub(crate) enum Msg {
    /// Lines, each ending in a newline.
    Lines(String),
    /// Lines to append and make durable with every line before them; each
    /// ticket gets the outcome once they are (`durable.rs`).
    Durable(String, Vec<super::durable::Ticket>),
    /// The last lines (possibly none) and the state to commit or end with.
    Commit(String, RunState, oneshot::Sender<Result<(), StoreError>>),
}

/// Where the writer task gets its journal from.
pub(crate) enum Opening {
    /// A new run: create its journal with this header line.
    Create { store: Arc<dyn JournalStore>, run_id: Arc<str>, header: String },
    /// A resumed run: the journal its claim returned.
    Claimed(Box<dyn RunJournal>),
}

/// The way to a run's writer task: messages sent here start the task
/// first if it has not started ([`RunLog::start`]). Cheap to clone.
#[derive(Clone)]
pub(crate) struct ToWriter {
    tx: mpsc::UnboundedSender<Msg>,
    task: Arc<WriterTask>,
}

impl ToWriter {
    /// Queues `msg` for the writer task, starting the task if need be.
    ///
    /// # Errors
    /// The message back when the task has stopped (the run ended).
    pub(crate) fn send(&self, msg: Msg) -> Result<(), Msg> {
        let sent = self.tx.send(msg).map_err(|e| e.0);
        self.task.start();
        sent
    }
}

/// A run's writer task, before and after it starts.
struct WriterTask {
    started: AtomicBool,
    unstarted: Mutex<Option<Unstarted>>,
}

/// What starting the writer task takes.
struct Unstarted {
    opening: Opening,
    late: bool,
    rx: mpsc::UnboundedReceiver<Msg>,
    tools: Handle,
}

impl WriterTask {
    /// Starts the task on the tool runtime unless it has started.
    fn start(&self) {
        if self.started.load(Ordering::Acquire) {
            return;
        }
        let unstarted = self.unstarted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(Unstarted { opening, late, rx, tools }) = unstarted {
            self.started.store(true, Ordering::Release);
            tools.spawn(write_task(opening, late, rx));
        }
    }

    /// The new run's journal, when the task never started and the store
    /// records an ended run from the caller's thread: then the task never
    /// will (its receiver is dropped here).
    fn take_for_inline_end(&self) -> Option<(Arc<dyn JournalStore>, Arc<str>, String)> {
        let mut unstarted = self.unstarted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match unstarted.as_ref() {
            Some(Unstarted { late: true, opening: Opening::Create { store, .. }, .. })
                if store.records_ended_inline() => {}
            _ => return None,
        }
        match unstarted.take() {
            Some(Unstarted { opening: Opening::Create { store, run_id, header }, .. }) => {
                Some((store, run_id, header))
            }
            _ => None,
        }
    }
}

/// A way into a run's journal writer from off the VM thread: lines pushed
/// here go to the journal after whatever the writer already has (not after
/// the VM thread's buffer: they are for records keyed by seq, such as
/// pre-images, `undo`).
#[derive(Clone)]
pub(crate) struct SideLog(ToWriter);

impl SideLog {
    /// Appends one line (a JSON record, no newline). Lost when the run's
    /// journal has already ended.
    pub(crate) fn push(&self, mut line: String) {
        line.push('\n');
        let _ = self.0.send(Msg::Lines(line));
    }

    /// Appends one line and waits, blocking this thread (a tool's blocking
    /// thread, never the runtime's), until it and every line before it are
    /// durable: one sync, shared with whatever else is queued (group
    /// commit). A pre-image is kept so before its file is replaced.
    ///
    /// # Errors
    /// The store's error, or the writer having stopped (the run ended).
    pub(crate) fn push_durable_blocking(&self, mut line: String) -> Result<(), super::StoreError> {
        line.push('\n');
        let (ticket, answer) = tokio::sync::oneshot::channel();
        let stopped = || super::StoreError::Failed("the journal writer stopped".into());
        self.0.send(Msg::Durable(line, vec![ticket])).map_err(|_| stopped())?;
        answer.blocking_recv().unwrap_or_else(|_| Err(stopped()))
    }
}

/// One run's journal, on the VM thread: lines go into one buffer of text
/// (no allocation per line), handed to the writer task when it is full.
pub(crate) struct RunLog {
    buffer: String,
    /// Clock reads not written yet: (value, count) of a run of equal values.
    now_run: Option<(f64, u64)>,
    /// Lines written only once a resume's replay has caught up (its
    /// `decision` lines).
    held: Vec<String>,
    tx: ToWriter,
}

impl RunLog {
    /// The handle that makes a call's `start` and `done` durable from the
    /// tool runtime (`durable.rs`).
    pub(crate) fn durable(&self) -> super::durable::DurableLog {
        super::durable::DurableLog::new(self.tx.clone())
    }
}

impl RunLog {
    /// The run's journal, written by a task on `tools`. It opens the
    /// journal at once (so a run whose process dies leaves a journal that
    /// says so), unless the store opens late ([`JournalStore::opens_late`]):
    /// then the task starts when the run first hands lines over or pauses
    /// (or a call's line must be made durable), and a run that ends before
    /// that is recorded whole ([`JournalStore::record_ended`]).
    pub(crate) fn start(opening: Opening, tools: &Handle) -> RunLog {
        let (tx, rx) = mpsc::unbounded_channel();
        let late = matches!(&opening, Opening::Create { store, .. } if store.opens_late());
        let task = Arc::new(WriterTask {
            started: AtomicBool::new(false),
            unstarted: Mutex::new(Some(Unstarted { opening, late, rx, tools: tools.clone() })),
        });
        let tx = ToWriter { tx, task };
        if !late {
            let _ = tx.send(Msg::Lines(String::new()));
        }
        RunLog { buffer: String::new(), now_run: None, held: Vec::new(), tx }
    }

    /// A way into this run's journal writer from other threads.
    pub(crate) fn side(&self) -> SideLog {
        SideLog(self.tx.clone())
    }

    /// Appends one line (a JSON record, no newline).
    pub(crate) fn push(&mut self, line: String) {
        self.line(|out| out.push_str(&line));
    }

    /// Keeps `line` until [`RunLog::release_held`]: a resume's decisions,
    /// written once its replay has caught up.
    pub(crate) fn hold_until_caught_up(&mut self, line: String) {
        self.held.push(line);
    }

    /// Appends the lines held by [`RunLog::hold_until_caught_up`].
    pub(crate) fn release_held(&mut self) {
        for line in std::mem::take(&mut self.held) {
            self.push(line);
        }
    }

    /// Appends one line that `write` writes into the buffer.
    pub(crate) fn line(&mut self, write: impl FnOnce(&mut String)) {
        self.flush_now();
        self.line_raw(write);
    }

    fn line_raw(&mut self, write: impl FnOnce(&mut String)) {
        write(&mut self.buffer);
        self.buffer.push('\n');
        if self.buffer.len() >= FLUSH_BYTES {
            // The next buffer starts at full size: no regrowing per batch.
            let full =
                std::mem::replace(&mut self.buffer, String::with_capacity(FLUSH_BYTES + FLUSH_BYTES / 8));
            let _ = self.tx.send(Msg::Lines(full));
        }
    }

    /// Hands what is buffered to the writer task now (without waiting for
    /// it): called whenever the program waits on its calls, so the lines
    /// of calls made and finished reach the store while the run goes (and
    /// a killed run's journal shows them), at no cost to a program that
    /// never waits.
    pub(crate) fn hand_over(&mut self) {
        if !self.buffer.is_empty() {
            let lines = std::mem::take(&mut self.buffer);
            let _ = self.tx.send(Msg::Lines(lines));
        }
    }

    /// Records one read of the clock (runs of equal values take one line).
    pub(crate) fn now(&mut self, value: f64) {
        match &mut self.now_run {
            Some((v, n)) if *v == value => *n += 1,
            _ => {
                self.flush_now();
                self.now_run = Some((value, 1));
            }
        }
    }

    fn flush_now(&mut self) {
        if let Some((v, n)) = self.now_run.take() {
            self.line_raw(|out| out.push_str(&record::now_line(v, n)));
        }
    }

    /// Sends what is buffered and commits with `state`; resolves when the
    /// journal is durable (`paused`), or, for a final state, written
    /// ([`RunJournal::end`]).
    ///
    /// # Errors
    /// The first store error of the run (creating, appending or
    /// committing).
    pub(crate) async fn finish(mut self, state: RunState) -> Result<(), StoreError> {
        self.flush_now();
        let rest = std::mem::take(&mut self.buffer);
        if state.is_final()
            && let Some((store, run_id, header)) = self.tx.task.take_for_inline_end()
        {
            // Nothing was sent: the whole journal goes to the store from here.
            return store.record_ended(&run_id, header, rest, state).await;
        }
        let (done, answer) = oneshot::channel();
        if self.tx.send(Msg::Commit(rest, state, done)).is_err() {
            return Err(StoreError::Failed("the journal writer stopped".into()));
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Failed("the journal writer stopped".into())))
    }
}

/// Owns the run's journal: opens it, appends what comes (what is queued
/// at once in one append), commits.
async fn write_task(opening: Opening, late: bool, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let mut failure: Option<StoreError> = None;
    let mut journal: Option<Box<dyn RunJournal>> = None;
    let mut opening = Some(opening);
    let mut carried: Option<Msg> = None;
    loop {
        let mut msg = match carried.take() {
            Some(msg) => msg,
            None => match rx.recv().await {
                Some(msg) => msg,
                None => return,
            },
        };
        // Lines queued behind these go with them (and with the commit, if
        // it is queued too).
        // (Group commit: durable lines queued together share one sync.)
        if matches!(msg, Msg::Lines(_) | Msg::Durable(..)) {
            (msg, carried) = gather(msg, &mut rx);
        }
        if journal.is_none() && failure.is_none() {
            match (opening.take(), msg) {
                // Ended before its journal was made (a store that opens
                // late): the whole journal in one go.
                (Some(Opening::Create { store, run_id, header }), Msg::Commit(tail, state, done))
                    if late && state.is_final() =>
                {
                    let _ = done.send(store.record_ended(&run_id, header, tail, state).await);
                    return;
                }
                (Some(how), m) => {
                    msg = m;
                    match how {
                        Opening::Claimed(j) => journal = Some(j),
                        Opening::Create { store, run_id, header } => {
                            match store.create(&run_id, header).await {
                                Ok(j) => journal = Some(j),
                                Err(e) => failure = Some(e),
                            }
                        }
                    }
                }
                (None, m) => msg = m,
            }
        }
        match msg {
            Msg::Lines(text) if text.is_empty() => {}
            Msg::Lines(text) => {
                if let (Some(j), None) = (journal.as_mut(), &failure)
                    && let Err(e) = j.append(text).await
                {
                    failure = Some(e);
                }
            }
            Msg::Durable(text, tickets) => durable(journal.as_deref_mut(), &mut failure, text, tickets).await,
            Msg::Commit(tail, state, done) => {
                let result = match (journal.as_mut(), failure.take()) {
                    (_, Some(e)) => Err(e),
                    (Some(j), None) if state.is_final() => j.end(tail, state).await,
                    (Some(j), None) => super::append_then_commit(j.as_mut(), tail, state).await,
                    (None, None) => Err(StoreError::Failed("the journal was never opened".into())),
                };
                let _ = done.send(result);
                // The journal (and the run's lock) goes with the task.
                return;
            }
        }
    }
}

/// Appends `text` and makes it durable (unless the run's journal has
/// failed already), then answers every ticket; a failure is the run's.
async fn durable(
    journal: Option<&mut (dyn RunJournal + 'static)>,
    failure: &mut Option<StoreError>,
    text: String,
    tickets: Vec<super::durable::Ticket>,
) {
    let result = match (journal, &*failure) {
        (_, Some(e)) => Err(e.clone()),
        (Some(j), None) => j.append_durable(text).await,
        (None, None) => Err(StoreError::Failed("the journal was never opened".into())),
    };
    if let Err(e) = &result
        && failure.is_none()
    {
        *failure = Some(e.clone());
    }
    for ticket in tickets {
        let _ = ticket.send(result.clone());
    }
}

/// `first` with the messages queued behind it: lines join it (and a
/// commit queued too takes them all); durable lines make the whole batch
/// durable, with every ticket answered once it is.
fn gather(first: Msg, rx: &mut mpsc::UnboundedReceiver<Msg>) -> (Msg, Option<Msg>) {
    let (mut text, mut tickets) = match first {
        Msg::Lines(text) => (text, Vec::new()),
        Msg::Durable(text, tickets) => (text, tickets),
        commit => return (commit, None),
    };
    while let Ok(next) = rx.try_recv() {
        match next {
            Msg::Lines(more) => text.push_str(&more),
            Msg::Durable(more, more_tickets) => {
                text.push_str(&more);
                tickets.extend(more_tickets);
            }
            Msg::Commit(tail, state, done) if tickets.is_empty() => {
                text.push_str(&tail);
                return (Msg::Commit(text, state, done), None);
            }
            // Made durable first, then committed.
            commit => return (Msg::Durable(text, tickets), Some(commit)),
        }
    }
    (if tickets.is_empty() { Msg::Lines(text) } else { Msg::Durable(text, tickets) }, None)
}
