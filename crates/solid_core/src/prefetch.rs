//! How many claimed-but-unstarted jobs a node keeps ready for its workers.
//!
//! Too few and workers wait a claim round trip between jobs; too many and a
//! node hoards work other nodes could run (and hands more back at shutdown).
//! The adaptive window keeps about `TARGET_BUFFERED_WORK` of work per worker
//! buffered, from a moving average of how long jobs take: thousands of no-op
//! jobs, a handful of 3 ms ones, one per worker for slow ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Work buffered per worker. Comfortably above a claim round trip (well
/// under 1 ms on a LAN), so workers never wait for the next claim.
pub const TARGET_BUFFERED_WORK: Duration = Duration::from_millis(10);
/// Upper bound of the adaptive window. With no-op jobs a 512 window starved
/// the workers: refilled at half, its 256 remaining jobs ran out before the
/// next claim of 256 came back. A claim is still at most claim::MAX_BATCH.
pub const MAX_WINDOW: usize = 2048;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// Always this many jobs buffered (`config.prefetch`).
    Fixed(usize),
    /// Sized from observed job durations, for this many workers.
    Adaptive { workers: usize },
}

pub struct PrefetchWindow {
    mode: Prefetch,
    /// Moving average of job duration in ns; 0 until the first sample.
    avg_ns: AtomicU64,
}

impl PrefetchWindow {
    pub fn new(mode: Prefetch) -> Self {
        PrefetchWindow { mode, avg_ns: AtomicU64::new(0) }
    }

    /// Records one job's duration. Racy read-modify-write on purpose: a lost
    /// sample only makes the average a little less smooth, and no worker
    /// waits on a lock for it.
    pub fn record(&self, took: Duration) {
        let sample = took.as_nanos().min(u64::MAX as u128) as u64;
        let avg = self.avg_ns.load(Ordering::Relaxed);
        let next = if avg == 0 { sample.max(1) } else { (avg - avg / 8 + sample / 8).max(1) };
        self.avg_ns.store(next, Ordering::Relaxed);
    }

    /// How many jobs to claim when `buffered` are waiting: the window's
    /// free part once the buffer is at most half full, else None (wait for
    /// workers). Refilling at half, not at every free slot, makes each claim
    /// a batch of at least half the window instead of one job per round trip.
    pub fn refill(&self, buffered: usize) -> Option<usize> {
        let window = self.window();
        (buffered * 2 <= window && buffered < window).then(|| (window - buffered).min(crate::claim::MAX_BATCH))
    }

    pub fn window(&self) -> usize {
        match self.mode {
            Prefetch::Fixed(n) => n.max(1),
            Prefetch::Adaptive { workers } => {
                let workers = workers.max(1);
                let avg = self.avg_ns.load(Ordering::Relaxed);
                if avg == 0 {
                    return (workers * 2).min(MAX_WINDOW);
                }
                let per_worker = (TARGET_BUFFERED_WORK.as_nanos() as u64 / avg).max(1) as usize;
                per_worker.saturating_mul(workers).clamp(workers.min(MAX_WINDOW), MAX_WINDOW)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_at_half_empty() {
        let w = PrefetchWindow::new(Prefetch::Fixed(8));
        assert_eq!(w.refill(0), Some(8));
        assert_eq!(w.refill(4), Some(4));
        assert_eq!(w.refill(5), None);
        assert_eq!(PrefetchWindow::new(Prefetch::Fixed(1)).refill(0), Some(1));
        assert_eq!(PrefetchWindow::new(Prefetch::Fixed(1)).refill(1), None);
    }

    #[test]
    fn fixed_is_fixed() {
        let w = PrefetchWindow::new(Prefetch::Fixed(7));
        w.record(Duration::from_secs(1));
        assert_eq!(w.window(), 7);
    }

    #[test]
    fn adaptive_follows_job_duration() {
        let w = PrefetchWindow::new(Prefetch::Adaptive { workers: 2 });
        assert_eq!(w.window(), 4, "before any sample");
        for _ in 0..100 {
            w.record(Duration::from_micros(5));
        }
        assert_eq!(w.window(), MAX_WINDOW, "tiny jobs: the cap");
        for _ in 0..200 {
            w.record(Duration::from_millis(3));
        }
        assert_eq!(w.window(), 6, "3 ms jobs: about 10 ms per worker");
        for _ in 0..200 {
            w.record(Duration::from_secs(2));
        }
        assert_eq!(w.window(), 2, "slow jobs: one per worker");
    }
}
