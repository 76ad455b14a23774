//! The workers' single entry point: merges the claimed-job channels of every
//! job source of this process (Redis, SolidEngine, ...) and routes each
//! settle call back to the source the job came from.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Select, Sender};
use parking_lot::Mutex;

use crate::claim::ClaimedJob;
use crate::error::Result;
use crate::source::JobSource;
use crate::store::FailureCount;

pub enum NextJob {
    Job(ClaimedJob),
    /// Nothing arrived in time (or the wait was interrupted); ask again.
    Empty,
    /// The node is stopping: do not ask again.
    Stopped,
}

pub struct Hub {
    sources: Vec<Box<dyn JobSource>>,
    stopping: AtomicBool,
    /// Dropped on stop, so every waiting worker wakes at once.
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
}

impl Hub {
    pub fn new(sources: Vec<Box<dyn JobSource>>) -> Self {
        let (stop_tx, stop_rx) = bounded(0);
        Hub { sources, stopping: AtomicBool::new(false), stop_tx: Mutex::new(Some(stop_tx)), stop_rx }
    }

    pub fn sources(&self) -> &[Box<dyn JobSource>] {
        &self.sources
    }

    fn source(&self, job: &ClaimedJob) -> &dyn JobSource {
        self.sources[job.source].as_ref()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Blocks up to `timeout` for the next job from any source.
    /// `interrupted` is polled every 100 ms so a caller that released the
    /// GVL can be woken by its unblocking function.
    pub fn next_job(&self, timeout: Duration, interrupted: &AtomicBool) -> NextJob {
        let deadline = Instant::now() + timeout;
        loop {
            if self.is_stopping() {
                return NextJob::Stopped;
            }
            let slice = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
            let mut select = Select::new();
            for s in &self.sources {
                select.recv(s.jobs());
            }
            let stop = select.recv(&self.stop_rx);
            match select.select_timeout(slice) {
                Ok(op) if op.index() == stop => {
                    let _ = op.recv(&self.stop_rx);
                    return NextJob::Stopped;
                }
                Ok(op) => {
                    let index = op.index();
                    let Ok(mut job) = op.recv(self.sources[index].jobs()) else { return NextJob::Stopped };
                    job.source = index;
                    // Count it in flight *before* checking for stop (both
                    // SeqCst): either this worker sees the stop, or the
                    // stopping thread sees the job in flight and waits for
                    // it. Never both miss, which would requeue a running job.
                    self.sources[index].taken(&mut job);
                    if self.is_stopping() {
                        self.sources[index].untake(job);
                        return NextJob::Stopped;
                    }
                    return NextJob::Job(job);
                }
                Err(_) => {}
            }
            if interrupted.load(Ordering::Acquire) || Instant::now() >= deadline {
                return NextJob::Empty;
            }
        }
    }

    pub fn complete(&self, job: &ClaimedJob) {
        self.source(job).complete(job)
    }
    pub fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        self.source(job).record_failure(job, error_class, message)
    }
    pub fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        self.source(job).retry(job, delay)
    }
    pub fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()> {
        self.source(job).discard(job, record, archive)
    }
    pub fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()> {
        self.source(job).quarantine(job, reason)
    }
    pub fn abandon(&self, job: &ClaimedJob) {
        self.source(job).abandon(job)
    }

    pub fn inflight(&self) -> usize {
        self.sources.iter().map(|s| s.inflight()).sum()
    }

    /// Stops claiming everywhere; waiting workers get `Stopped` at once.
    pub fn stop_claiming(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop_tx.lock().take();
        for s in &self.sources {
            s.stop_claiming();
        }
    }

    /// Waits until no handed-out job is unsettled, or `timeout` passes.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.inflight() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Shuts every source down (see `JobSource::shutdown`); returns the
    /// number of jobs handed back. Every source is shut down even when one
    /// fails; the first error is returned.
    pub fn shutdown(&self, flush_timeout: Duration) -> Result<u64> {
        self.stop_claiming();
        let mut total = 0;
        let mut first_error = None;
        for s in &self.sources {
            match s.shutdown(flush_timeout) {
                Ok(n) => total += n,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }
}
