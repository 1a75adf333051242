//! VM threads: where programs run.
//!
//! JavaScript is CPU work, so it runs on its own threads, apart from the
//! tool runtime: a busy program delays only the programs on its own VM
//! thread, never tool I/O. Each thread runs a current-thread tokio runtime
//! with a `LocalSet` that holds many VMs (`Vm`s are `!Send`); a new run
//! goes to the thread with the fewest runs, passing over a thread held by
//! a run answered without its VM (engine/overrun_watch.rs) while another
//! thread is not.

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
}

impl VmPool {
    /// Starts `threads` VM threads. The first makes a spare VM blank at
    /// once; with `spares`, every thread makes one whenever it has just
    /// finished its runs (blank.rs).
    pub(crate) fn new(threads: usize, spares: bool) -> std::io::Result<Self> {
        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let (tx, rx) = mpsc::unbounded_channel::<Job>();
            let active = Arc::new(AtomicUsize::new(0));
            let stalled = Arc::new(AtomicUsize::new(0));
            let (count, stalls) = (active.clone(), stalled.clone());
            std::thread::Builder::new().name(format!("codemode-vm-{i}")).stack_size(VM_THREAD_STACK).spawn(
                move || {
                    STALLED.with(|s| *s.borrow_mut() = Some(stalls));
                    worker_main(rx, count, i == 0, spares)
                },
            )?;
            workers.push(Worker { jobs: tx, active, stalled });
        }
        Ok(VmPool { workers })
    }

    /// Runs `job` on the least busy VM thread not held by a run answered
    /// without its VM (the least busy of all when every thread is). Returns
    /// the job back if every thread has stopped.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let worker = self
            .workers
            .iter()
            .min_by_key(|w| (w.stalled.load(Ordering::Relaxed) > 0, w.active.load(Ordering::Relaxed)))
            .expect("a pool has at least one thread");
        worker.active.fetch_add(1, Ordering::Relaxed);
        worker.jobs.send(job).map_err(|e| {
            worker.active.fetch_sub(1, Ordering::Relaxed);
            e.0
        })
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
            let active = active.clone();
            tokio::task::spawn_local(async move {
                job().await;
                // The thread has nothing else to run: the next run's VM
                // is half made now, off its path.
                if active.fetch_sub(1, Ordering::Relaxed) == 1 && spares {
                    super::blank::make_spare();
                }
            });
        }
    });
    // Let programs still running finish before the thread ends.
    rt.block_on(local);
}
