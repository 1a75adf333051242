//! A run's journal as the VM sees it: the recorder of its events, the
//! replay (on a resume), the `Math.random` seed and the clock, and what the run loop
//! does with each call's end while journaling.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::journal::record::PausedRecord;
use crate::journal::recorder::RunRecorder;
use crate::journal::replay::Replay;

/// One run's journaling, on the VM thread.
pub(crate) struct Journaling {
    /// Where the run's events go (the engine's: the run's journal).
    pub log: Box<dyn RunRecorder>,
    /// Set on a resume, until the run is past the journal.
    pub replay: Option<Replay>,
    /// The seed handed to `Math.random`, once asked for.
    seed: Option<[u32; 4]>,
    /// Times of the run before this process took it (on a resume).
    pub before: Option<PausedRecord>,
    /// On a resume, the deadline the run has left once the replay has
    /// caught up (replaying is not counted).
    pub deadline_left: Option<std::time::Duration>,
    /// What the receipt must say about how the run was resumed.
    pub warnings: Vec<String>,
    /// A resume of a run whose process died (a recovery), not of a paused
    /// one: stopped in its replay, it stays interrupted, not paused.
    pub recovering: bool,
    /// The run's journal as the tool runtime reaches it: the dispatcher
    /// makes the starts and ends of calls that may change something
    /// durable through it.
    pub durable: Option<crate::journal::durable::DurableLog>,
    /// The files the run's calls name by path, which its pause records,
    /// and on a resume those changed since the pause
    /// (journal/files_seen.rs).
    pub files_seen: std::sync::Arc<crate::journal::files_seen::FilesSeen>,
}

impl Journaling {
    /// Journaling of a new run.
    pub(crate) fn new(log: Box<dyn RunRecorder>) -> Journaling {
        Journaling {
            log,
            replay: None,
            seed: None,
            before: None,
            deadline_left: None,
            warnings: Vec::new(),
            recovering: false,
            durable: None,
            files_seen: Default::default(),
        }
    }

    /// Journaling of a resumed run.
    pub(crate) fn resumed(log: Box<dyn RunRecorder>, replay: Replay) -> Journaling {
        let before = replay.paused().cloned();
        Journaling {
            log,
            replay: Some(replay),
            seed: None,
            before,
            deadline_left: None,
            warnings: Vec::new(),
            recovering: false,
            durable: None,
            files_seen: Default::default(),
        }
    }

    /// The next clock read: from the journal while it has one, else now
    /// (written down).
    pub(crate) fn now(&mut self) -> f64 {
        if let Some(v) = self.replay.as_mut().and_then(Replay::now) {
            return v;
        }
        let v = now_ms();
        self.log.clock_read(v);
        v
    }

    /// `Math.random`'s seed: the journal's, else a new one (written down).
    pub(crate) fn seed(&mut self) -> [u32; 4] {
        if let Some(seed) = self.seed {
            return seed;
        }
        let seed = match self.replay.as_ref().and_then(Replay::seed) {
            Some(seed) => seed,
            None => {
                let seed = new_seed();
                self.log.random_seed(seed);
                seed
            }
        };
        self.seed = Some(seed);
        seed
    }
}

/// Milliseconds since the Unix epoch, as `Date.now()` gives them.
pub(crate) fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64)
}

/// A fresh seed for `Math.random` (never all zero, which xoshiro cannot
/// leave).
pub(crate) fn new_seed() -> [u32; 4] {
    use std::hash::{BuildHasher, Hasher};
    let mut seed = [0u32; 4];
    for (i, part) in seed.iter_mut().enumerate() {
        // RandomState is seeded from the OS's random source per process and
        // varies per instance.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        *part = h.finish() as u32;
    }
    if seed == [0; 4] {
        seed[0] = 1;
    }
    seed
}
