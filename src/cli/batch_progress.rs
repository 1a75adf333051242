//! The progress of a program batch on stderr: on a terminal an indicatif
//! bar (lines done, failed, paused, rate, ETA); without one a count line
//! every few seconds (the caller's tick) and at the end; nothing with -q.

use std::io::IsTerminal as _;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::engine_args::EngineArgs;

/// Where a program batch is, shown on stderr.
pub(crate) struct Progress {
    batch_id: String,
    bar: Option<ProgressBar>,
    total: usize,
    /// Lines done before this process (a restart), and of those failed.
    before: usize,
    before_failed: usize,
    done: usize,
    failed: usize,
    paused: usize,
    started: Instant,
    /// `done + paused` when the last count line was printed.
    printed: Option<usize>,
    /// No count line on the way (`-q`, or stderr is a terminal).
    quiet: bool,
    /// The count line at the end (not with `-q`).
    last_line: bool,
}

impl Progress {
    /// Progress of batch `batch_id` of `total` lines, `before` of them done
    /// by an earlier process (`.0`, `.1` of them failed). No bar while approvals are asked at the
    /// terminal (`engine.prompts()`): the prompts would tear it.
    pub(crate) fn new(batch_id: &str, total: usize, before: (usize, usize), engine: &EngineArgs) -> Self {
        let (before, before_failed) = before;
        let quiet = super::quiet();
        let on_terminal = std::io::stderr().is_terminal();
        let terminal = on_terminal && !engine.prompts() && !quiet;
        let bar = terminal.then(|| {
            let bar = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template(
                "{bar:30} {pos}/{len} lines, {msg} [{elapsed}, {per_sec}, ETA {eta}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_position(before as u64);
            bar.reset_eta();
            bar.set_message(format!("{before_failed} failed, 0 paused"));
            bar
        });
        Progress {
            batch_id: batch_id.to_owned(),
            bar,
            total,
            before,
            before_failed,
            done: 0,
            failed: before_failed,
            paused: 0,
            started: Instant::now(),
            printed: None,
            // On a terminal with prompts (no bar), count lines would cut
            // into a question: only the last one is printed.
            quiet: quiet || on_terminal,
            last_line: !quiet,
        }
    }

    /// A line ended with run status `status` (or is paused).
    pub(crate) fn line(&mut self, status: &str) {
        match status {
            "paused" => self.paused += 1,
            "completed" => self.done += 1,
            _ => {
                self.done += 1;
                self.failed += 1;
            }
        }
        debug_assert!(self.failed >= self.before_failed);
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(format!("{} failed, {} paused", self.failed, self.paused));
        }
    }

    /// The caller's few-second tick: a count line without a terminal.
    pub(crate) fn tick(&mut self) {
        if self.bar.is_none() && !self.quiet && self.printed != Some(self.done + self.paused) {
            self.print();
        }
    }

    /// The batch ended: the bar cleared, the last count line printed.
    pub(crate) fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.last_line {
            self.print();
        }
    }

    fn print(&mut self) {
        self.printed = Some(self.done + self.paused);
        eprintln!("codemode: {}", self.count_line());
    }

    /// `batch ID: 120/300 lines done (3 failed), 2 paused, 4.1 lines/s, ETA 43 s`.
    fn count_line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let ended = self.done + self.paused;
        let rate = if secs > 0.0 { ended as f64 / secs } else { 0.0 };
        let left = self.total.saturating_sub(self.before + ended);
        let eta =
            if rate > 0.0 && left > 0 { format!(", ETA {:.0} s", left as f64 / rate) } else { String::new() };
        format!(
            "batch {}: {}/{} lines done ({} failed), {} paused, {rate:.1} lines/s{eta}",
            self.batch_id,
            self.before + self.done,
            self.total,
            self.failed,
            self.paused
        )
    }
}
