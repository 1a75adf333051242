//! VM threads: where programs run.
//!
//! JavaScript is CPU work, so it runs on its own threads, apart from the
//! tool runtime: a busy program delays only the programs on its own VM
//! thread, never tool I/O. Each thread runs a current-thread tokio runtime
//! with a `LocalSet` that holds many VMs (`Vm`s are `!Send`); a new run
//! goes to the thread with the fewest runs, passing over a thread held by
//! a run answered without its VM (engine/overrun_watch.rs) while another
//! thread is not. When every thread is held so, the run goes to a reserve
//! thread, started then (as many at most as the pool's own threads):
//! programs that QuickJS does not interrupt in time cost a core each until
//! it does, but do not stop the others.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use codemode_base::limits::VM_THREAD_STACK;

/// Work for a VM thread: makes the (`!Send`) future there.
pub(crate) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
    active: Arc<AtomicUsize>,
    /// Runs on this thread answered without their VM and still going.
    stalled: Arc<AtomicUsize>,
}

thread_local! {
    /// The stalled count of the VM thread this is (none elsewhere).
    static STALLED: std::cell::RefCell<Option<Arc<AtomicUsize>>> = const { std::cell::RefCell::new(None) };
}

/// The count of runs answered without their VM on this VM thread (to be
/// raised while such a run still holds it), or `None` off VM threads.
pub(crate) fn stalled_here() -> Option<Arc<AtomicUsize>> {
    STALLED.with(|s| s.borrow().clone())
}

/// The VM threads of an engine. Threads end when the pool is dropped and
/// their running programs have finished.
pub(crate) struct VmPool {
    workers: Vec<Worker>,
    /// Threads started when every thread in `workers` was held by a run
    /// answered without its VM; at most as many as `workers`.
    reserve: std::sync::Mutex<Vec<Worker>>,
    spares: bool,
}

impl VmPool {
    /// Starts `threads` VM threads. The first makes a spare VM blank at
    /// once; with `spares`, every thread makes one whenever it has just
    /// finished its runs (blank.rs).
    pub(crate) fn new(threads: usize, spares: bool) -> std::io::Result<Self> {
        let workers = (0..threads).map(|i| start_worker(i, i == 0, spares)).collect::<Result<_, _>>()?;
        Ok(VmPool { workers, reserve: Default::default(), spares })
    }

    /// Runs `job` on the least busy VM thread not held by a run answered
    /// without its VM; when every thread is, on a reserve thread (the
    /// least busy of all once there are as many as the pool's own).
    /// Returns the job back if every thread has stopped.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let worker = least_busy(&self.workers).expect("a pool has at least one thread");
        if worker.stalled.load(Ordering::Relaxed) == 0 {
            return send(worker, job);
        }
        let mut reserve = self.reserve.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if least_busy(&reserve).is_none_or(|w| w.stalled.load(Ordering::Relaxed) > 0)
            && reserve.len() < self.workers.len()
        {
            match start_worker(self.workers.len() + reserve.len(), false, self.spares) {
                Ok(started) => {
                    tracing::warn!(
                        "every VM thread is held by a program past its deadline that QuickJS has not \
                         interrupted yet; started reserve VM thread {}",
                        reserve.len() + 1
                    );
                    reserve.push(started);
                }
                Err(e) => tracing::warn!("could not start a reserve VM thread: {e}"),
            }
        }
        match least_busy(&reserve) {
            Some(spare) if spare.stalled.load(Ordering::Relaxed) == 0 => send(spare, job),
            _ => send(worker, job),
        }
    }
}

/// The worker with the fewest runs among those not held by a run answered
/// without its VM, else with the fewest runs.
fn least_busy(workers: &[Worker]) -> Option<&Worker> {
    workers.iter().min_by_key(|w| (w.stalled.load(Ordering::Relaxed) > 0, w.active.load(Ordering::Relaxed)))
}

/// Hands `job` to `worker`'s thread; the job back if the thread stopped.
fn send(worker: &Worker, job: Job) -> Result<(), Job> {
    worker.active.fetch_add(1, Ordering::Relaxed);
    worker.jobs.send(job).map_err(|e| {
        worker.active.fetch_sub(1, Ordering::Relaxed);
        e.0
    })
}

/// Starts VM thread `i` (`first`: it makes a spare VM at once).
fn start_worker(i: usize, first: bool, spares: bool) -> std::io::Result<Worker> {
    let (tx, rx) = mpsc::unbounded_channel::<Job>();
    let active = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(AtomicUsize::new(0));
    let (count, stalls) = (active.clone(), stalled.clone());
    std::thread::Builder::new().name(format!("codemode-vm-{i}")).stack_size(VM_THREAD_STACK).spawn(
        move || {
            STALLED.with(|s| *s.borrow_mut() = Some(stalls));
            worker_main(rx, count, first, spares)
        },
    )?;
    Ok(Worker { jobs: tx, active, stalled })
}

/// A job's end on its thread, also when the job panicked: the thread
/// counts one run fewer (else it would look busy for good and new runs
/// would go elsewhere); when that was its last and the job ended normally,
/// the next run's VM is half made now, off its path (with spares).
struct JobEnding {
    active: Arc<AtomicUsize>,
    spares: bool,
}

impl Drop for JobEnding {
    fn drop(&mut self) {
        if self.active.fetch_sub(1, Ordering::Relaxed) == 1 && self.spares && !std::thread::panicking() {
            super::blank::make_spare();
        }
    }
}

fn worker_main(mut jobs: mpsc::UnboundedReceiver<Job>, active: Arc<AtomicUsize>, first: bool, spares: bool) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("a VM thread could not start its runtime: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    // The first run goes to the first thread (all are idle): its VM is
    // half made before it is asked for (blank.rs).
    if first {
        super::blank::make_spare();
    }
    local.block_on(&rt, async {
        while let Some(job) = jobs.recv().await {
            let ending = JobEnding { active: active.clone(), spares };
            tokio::task::spawn_local(async move {
                let _ending = ending;
                job().await;
            });
        }
    });
    // Let programs still running finish before the thread ends.
    rt.block_on(local);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_whose_run_panicked_does_not_count_it_as_running() {
        let pool = VmPool::new(1, false).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let job: Job = Box::new(|| Box::pin(async { panic!("a run's task panics") }));
        pool.submit(job).unwrap_or_else(|_| panic!("the thread took no job"));
        let after: Job = Box::new(move || {
            Box::pin(async move {
                tokio::task::yield_now().await;
                let _ = tx.send(());
            })
        });
        pool.submit(after).unwrap_or_else(|_| panic!("the thread took no job"));
        rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the thread ran the next job");
        let active = &pool.workers[0].active;
        for _ in 0..3000 {
            if active.load(Ordering::Relaxed) == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the thread still counts {} runs", active.load(Ordering::Relaxed));
    }
}
