//! Pruning a workspace's old runs to its retention (`[journal] keep_runs`,
//! `keep_days`) after or while a command's run goes (docs/JOURNAL.md,
//! "Retention"); what goes wrong is a warning on stderr, never an error.

use std::time::SystemTime;

use codemode::Engine;
use codemode::journal::{PruneOptions, PruneReport, Retention};

/// Prunes `engine`'s workspace's runs to `retention`, keeping `run_id`
/// (the run just made; empty for none), as from `started` (see
/// [`pruning`]). Never an error: what goes wrong is a warning on stderr.
/// Blocking: not for async code.
pub(crate) fn prune_runs(engine: &Engine, retention: Retention, run_id: &str, started: Option<SystemTime>) {
    let pruned = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(pruning(engine, retention, run_id, false, started)));
    warn_of_pruning(pruned);
}

/// The pruning of [`prune_runs`], also as a future a command spawns on its
/// own runtime when its run starts, so old runs go while it runs: then
/// `being_made` says whether the run will leave a folder or a journal
/// (`run_id` then counts as the newest run before it is found;
/// [`PruneOptions::being_made`]). Show its outcome with
/// [`warn_of_pruning`].
///
/// It prunes as if it started at `started` (default: when first polled):
/// a run changed since is left to the next prune. `codemode run` and
/// `resume` give their own start ([`super::started`]): a short run may end
/// before its pruning is first polled, and runs other processes ended
/// meanwhile are as new as it. A batch does not: its own lines' runs are
/// made after it started, and its pruning is what keeps them bounded.
pub(crate) fn pruning(
    engine: &Engine,
    retention: Retention,
    run_id: &str,
    being_made: bool,
    started: Option<SystemTime>,
) -> impl std::future::Future<Output = Result<PruneReport, String>> + Send + 'static {
    let runs = engine.runs();
    let options = match run_id {
        "" => PruneOptions::default(),
        id if being_made => PruneOptions::keeping_run_being_made(id),
        id => PruneOptions::keeping(id),
    };
    // Read every run's state once per tenth of keep_runs new runs, not
    // after each one (a kept run's journal is opened each time: at the
    // default 200 kept, that doubled a run's cost).
    let mut options = options.slack(retention.keep_runs / 10);
    // Only this workspace's runs: another workspace's paused run in a
    // shared store is not this retention's to remove.
    options.workspace = Some(engine.workspace().to_path_buf());
    options.now = started;
    async move { runs.prune(retention, &options).await.map_err(|e| e.to_string()) }
}

/// Shows what went wrong in a [`pruning`]: a warning on stderr per run
/// that could not be removed, or one when the runs could not be listed.
pub(crate) fn warn_of_pruning(pruned: Result<PruneReport, String>) {
    match pruned {
        Ok(report) => {
            for failure in &report.failures {
                eprintln!("codemode: warning: an old run could not be removed: {failure}");
            }
        }
        Err(e) => eprintln!("codemode: warning: old runs were not pruned: {e}"),
    }
}
