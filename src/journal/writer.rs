//! The journal of one run as it goes. The VM thread appends lines to a
//! buffer ([`RunLog`]); full buffers go to a task on the tool runtime that
//! owns the store's [`RunJournal`], so the program never waits on the
//! disk or the database; [`RunLog::finish`] sends the rest and waits for
//! the commit (durable before the run reports `paused`) or the end
//! (written before the run reports its end; see [`RunJournal::end`]). A
//! store that opens late ([`JournalStore::opens_late`]) has the journal
//! made only once the run needs it (see [`RunLog::start`]); a run that
//! ends before that is handed to [`JournalStore::record_ended`] whole.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use super::record;
use super::{JournalStore, RunJournal, RunState, StoreError};

/// Lines buffered before they are handed to the writer task, in bytes;
/// also what the writer task holds, at most, of a journal not made yet.
pub(crate) const FLUSH_BYTES: usize = 256 * 1024;

/// How long after its start a run's late journal is made even if nothing
/// else asked for it: a run that goes on longer is listed as running and
/// leaves a record if its process dies.
pub(crate) const OPEN_AFTER: Duration = Duration::from_secs(1);

enum Msg {
    /// Lines, each ending in a newline (possibly none), and whether the
    /// journal must be made now (a late one: the run began a call that may
    /// change something).
    Lines(String, bool),
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

/// One run's journal, on the VM thread: lines go into one buffer of text
/// (no allocation per line), handed to the writer task when it is full.
pub(crate) struct RunLog {
    buffer: String,
    /// Clock reads not written yet: (value, count) of a run of equal values.
    now_run: Option<(f64, u64)>,
    tx: mpsc::UnboundedSender<Msg>,
    /// Whether the writer task was told to make the journal now.
    asked_to_open: bool,
}

impl RunLog {
    /// Starts the writer task on `tools`. It opens the journal at once (so
    /// a run whose process dies leaves a journal that says so), unless the
    /// store opens late ([`JournalStore::opens_late`]): then the lines
    /// handed over are held in memory until the first of
    /// - the run waits having begun a call that may change something
    ///   ([`RunLog::hand_over`] with `may_have_changed`),
    /// - it pauses,
    /// - [`FLUSH_BYTES`] of lines are held,
    /// - [`OPEN_AFTER`] has passed since the start,
    ///
    /// and a run that ends before any of these is recorded whole after its
    /// receipt ([`JournalStore::record_ended`]).
    pub(crate) fn start(opening: Opening, tools: &Handle) -> RunLog {
        let (tx, rx) = mpsc::unbounded_channel();
        let late = matches!(&opening, Opening::Create { store, .. } if store.opens_late());
        if !late {
            let _ = tx.send(Msg::Lines(String::new(), true));
        }
        let open_at = tokio::time::Instant::now() + OPEN_AFTER;
        tools.spawn(write_task(opening, late.then_some(open_at), rx));
        RunLog { buffer: String::new(), now_run: None, tx, asked_to_open: !late }
    }

    /// Appends one line (a JSON record, no newline).
    pub(crate) fn push(&mut self, line: String) {
        self.line(|out| out.push_str(&line));
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
            let _ = self.tx.send(Msg::Lines(full, false));
        }
    }

    /// Hands what is buffered to the writer task now (without waiting for
    /// it): called whenever the program waits on its calls, so the lines
    /// of calls made and finished reach the store while the run goes (and
    /// a killed run's journal shows them), at no cost to a program that
    /// never waits. `may_have_changed`: the run has begun a call that may
    /// change something ([`crate::engine::dispatch::Dispatcher::may_have_changed`]),
    /// so a late journal is made now.
    pub(crate) fn hand_over(&mut self, may_have_changed: bool) {
        let open = may_have_changed && !self.asked_to_open;
        if !self.buffer.is_empty() || open {
            self.asked_to_open |= open;
            let lines = std::mem::take(&mut self.buffer);
            let _ = self.tx.send(Msg::Lines(lines, open));
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
        let (done, answer) = oneshot::channel();
        if self.tx.send(Msg::Commit(rest, state, done)).is_err() {
            return Err(StoreError::Failed("the journal writer stopped".into()));
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Failed("the journal writer stopped".into())))
    }
}

/// Owns the run's journal: opens it, appends what comes (what is queued
/// at once in one append), commits. `open_at`: the store opens late, and
/// the journal is made by then at the latest (see [`RunLog::start`]).
async fn write_task(
    opening: Opening,
    open_at: Option<tokio::time::Instant>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut failure: Option<StoreError> = None;
    let mut journal: Option<Box<dyn RunJournal>> = None;
    let mut opening = Some(opening);
    // The lines of a late journal not made yet.
    let mut held = String::new();
    loop {
        let holding = open_at.filter(|_| opening.is_some());
        let next = match holding {
            Some(at) => tokio::select! {
                biased;
                m = rx.recv() => m,
                () = tokio::time::sleep_until(at) => Some(Msg::Lines(String::new(), true)),
            },
            None => rx.recv().await,
        };
        let Some(mut msg) = next else { return };
        // Lines queued behind these go with them (and with the commit, if
        // it is queued too).
        if let Msg::Lines(text, open) = &mut msg {
            while let Ok(next) = rx.try_recv() {
                match next {
                    Msg::Lines(more, more_open) => {
                        text.push_str(&more);
                        *open |= more_open;
                    }
                    Msg::Commit(tail, state, done) => {
                        let mut all = std::mem::take(text);
                        all.push_str(&tail);
                        msg = Msg::Commit(all, state, done);
                        break;
                    }
                }
            }
        }
        if let Some(how) = opening.take() {
            match (how, msg) {
                // Ended before its journal was made (a store that opens
                // late): the whole journal in one go.
                (Opening::Create { store, run_id, header }, Msg::Commit(tail, state, done))
                    if holding.is_some() && state.is_final() =>
                {
                    held.push_str(&tail);
                    let _ = done.send(store.record_ended(&run_id, header, held, state).await);
                    return;
                }
                // Not needed yet: held.
                (how, Msg::Lines(text, false))
                    if holding.is_some() && held.len() + text.len() < FLUSH_BYTES =>
                {
                    held.push_str(&text);
                    opening = Some(how);
                    continue;
                }
                (how, m) => {
                    msg = with_held(std::mem::take(&mut held), m);
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
            }
        }
        match msg {
            Msg::Lines(text, _) if text.is_empty() => {}
            Msg::Lines(text, _) => {
                if let (Some(j), None) = (journal.as_mut(), &failure)
                    && let Err(e) = j.append(text).await
                {
                    failure = Some(e);
                }
            }
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

/// `msg` with the held lines `held` in front of its own.
fn with_held(mut held: String, msg: Msg) -> Msg {
    if held.is_empty() {
        return msg;
    }
    match msg {
        Msg::Lines(text, open) => {
            held.push_str(&text);
            Msg::Lines(held, open)
        }
        Msg::Commit(tail, state, done) => {
            held.push_str(&tail);
            Msg::Commit(held, state, done)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::journal::{RunSummary, StoreFuture, StoredRun};

    /// What the store was asked to do, in order.
    type Events = Arc<Mutex<Vec<String>>>;

    /// A store that opens late and records what it is asked.
    struct Recording(Events);

    struct RecordingJournal(Events);

    impl RunJournal for RecordingJournal {
        fn append(&mut self, lines: String) -> StoreFuture<'_, ()> {
            self.0.lock().unwrap().push(format!("append {lines}"));
            Box::pin(async { Ok(()) })
        }
        fn commit(&mut self, state: RunState) -> StoreFuture<'_, ()> {
            self.0.lock().unwrap().push(format!("commit {state}"));
            Box::pin(async { Ok(()) })
        }
    }

    impl JournalStore for Recording {
        fn describe(&self) -> String {
            "recording".into()
        }
        fn opens_late(&self) -> bool {
            true
        }
        fn create<'a>(&'a self, run_id: &'a str, header: String) -> StoreFuture<'a, Box<dyn RunJournal>> {
            self.0.lock().unwrap().push(format!("create {run_id} {header}"));
            let journal: Box<dyn RunJournal> = Box::new(RecordingJournal(self.0.clone()));
            Box::pin(async move { Ok(journal) })
        }
        fn record_ended<'a>(
            &'a self,
            run_id: &'a str,
            header: String,
            lines: String,
            state: RunState,
        ) -> StoreFuture<'a, ()> {
            self.0.lock().unwrap().push(format!("ended {run_id} {header} {lines}{state}"));
            Box::pin(async { Ok(()) })
        }
        fn claim<'a>(&'a self, _: &'a str) -> StoreFuture<'a, (Vec<String>, Box<dyn RunJournal>)> {
            unreachable!("not claimed in these tests")
        }
        fn load<'a>(&'a self, _: &'a str) -> StoreFuture<'a, StoredRun> {
            unreachable!("not loaded in these tests")
        }
        fn list(&self) -> StoreFuture<'_, Vec<RunSummary>> {
            unreachable!("not listed in these tests")
        }
        fn remove<'a>(&'a self, _: &'a str) -> StoreFuture<'a, ()> {
            unreachable!("not removed in these tests")
        }
    }

    /// A run's log over a recording store, and what the store saw.
    fn started() -> (RunLog, Events) {
        let events = Events::default();
        let store: Arc<dyn JournalStore> = Arc::new(Recording(events.clone()));
        let opening = Opening::Create { store, run_id: "r".into(), header: "H".into() };
        (RunLog::start(opening, &Handle::current()), events)
    }

    /// Lets the writer task run (time is paused: nothing else moves it).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn seen(events: &Events) -> Vec<String> {
        events.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn lines_of_a_run_that_only_reads_are_held_and_recorded_whole_at_its_end() {
        let (mut log, events) = started();
        log.push("a".into());
        log.hand_over(false);
        log.push("b".into());
        log.hand_over(false);
        settle().await;
        assert!(seen(&events).is_empty(), "nothing made while the run only reads: {:?}", seen(&events));
        log.push("c".into());
        log.finish(RunState::Completed).await.unwrap();
        assert_eq!(seen(&events), ["ended r H a\nb\nc\ncompleted"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_may_change_something_makes_the_journal_at_the_next_wait() {
        let (mut log, events) = started();
        log.push("a".into());
        log.hand_over(false);
        log.push("b".into());
        log.hand_over(true);
        settle().await;
        assert_eq!(seen(&events), ["create r H", "append a\nb\n"]);
        log.push("c".into());
        log.hand_over(true);
        log.finish(RunState::Completed).await.unwrap();
        assert_eq!(seen(&events), ["create r H", "append a\nb\n", "append c\n", "commit completed"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_goes_on_past_open_after_gets_its_journal_then() {
        let (mut log, events) = started();
        log.push("a".into());
        log.hand_over(false);
        tokio::time::sleep(OPEN_AFTER - Duration::from_millis(10)).await;
        settle().await;
        assert!(seen(&events).is_empty(), "{:?}", seen(&events));
        tokio::time::sleep(Duration::from_millis(20)).await;
        settle().await;
        assert_eq!(seen(&events), ["create r H", "append a\n"]);
        log.finish(RunState::Failed).await.unwrap();
        assert_eq!(seen(&events), ["create r H", "append a\n", "commit failed"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_makes_the_journal_with_every_held_line() {
        let (mut log, events) = started();
        log.push("a".into());
        log.hand_over(false);
        log.push("b".into());
        log.finish(RunState::Paused).await.unwrap();
        assert_eq!(seen(&events), ["create r H", "append a\nb\n", "commit paused"]);
    }

    #[tokio::test(start_paused = true)]
    async fn held_lines_are_bounded_by_flush_bytes() {
        let (mut log, events) = started();
        let long = "x".repeat(FLUSH_BYTES / 2);
        log.push(long.clone());
        log.hand_over(false);
        settle().await;
        assert!(seen(&events).is_empty());
        log.push(long);
        log.hand_over(false);
        settle().await;
        let seen = seen(&events);
        assert_eq!(seen.len(), 2, "made once the held lines reach FLUSH_BYTES");
        assert_eq!(seen[0], "create r H");
        assert_eq!(seen[1].len(), "append ".len() + FLUSH_BYTES + 2);
    }
}
