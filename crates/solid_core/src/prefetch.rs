//! How many claimed-but-unstarted jobs a node keeps ready for its workers.
//!
//! Too few and workers wait a claim round trip between jobs; too many and a
//! node hoards work other nodes could run (and hands more back at shutdown).
//! The adaptive window keeps about `TARGET_BUFFERED_WORK` of work per worker
//! buffered, from a moving average of how long jobs take: thousands of no-op
//! jobs, a handful of 3 ms ones, one per worker for slow ones. On top of
//! that it covers the measured claim round trip: a node far from Redis (tens
//! of milliseconds away) would otherwise let its workers run dry while each
//! refill is on the way, and run a fraction of its neighbours' rate.

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
    /// Moving average of a claim's round trip in ns (request, script,
    /// reply); 0 until the first sample.
    round_trip_ns: AtomicU64,
}

impl PrefetchWindow {
    pub fn new(mode: Prefetch) -> Self {
        PrefetchWindow { mode, avg_ns: AtomicU64::new(0), round_trip_ns: AtomicU64::new(0) }
    }

    /// Records how long one claim took, from sending it to having its
    /// reply. Only the fetcher thread records, so the read-modify-write
    /// loses nothing; the average follows a changed latency within a few
    /// claims.
    pub fn record_round_trip(&self, took: Duration) {
        let sample = took.as_nanos().min(u64::MAX as u128) as u64;
        let avg = self.round_trip_ns.load(Ordering::Relaxed);
        let next = if avg == 0 { sample.max(1) } else { (avg - avg / 4 + sample / 4).max(1) };
        self.round_trip_ns.store(next, Ordering::Relaxed);
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
                let buffered = (TARGET_BUFFERED_WORK.as_nanos() as u64 / avg).max(1);
                // A refill is asked for once half the window is free, and
                // the other half must last until it arrives: twice the
                // round trip of work per worker, rounded up.
                let round_trip = self.round_trip_ns.load(Ordering::Relaxed);
                let in_flight = round_trip.saturating_mul(2).div_ceil(avg);
                let per_worker = buffered.saturating_add(in_flight).min(MAX_WINDOW as u64) as usize;
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

    #[test]
    fn adaptive_covers_the_claim_round_trip() {
        let w = PrefetchWindow::new(Prefetch::Adaptive { workers: 2 });
        for _ in 0..200 {
            w.record(Duration::from_millis(20));
        }
        assert_eq!(w.window(), 2, "20 ms jobs next to Redis: one per worker");
        for _ in 0..50 {
            w.record_round_trip(Duration::from_millis(40));
        }
        // 1 + 80 ms / 20 ms per worker: the half left when a refill is
        // asked for (5 jobs, 50 ms of work for 2 workers) outlasts it.
        assert_eq!(w.window(), 10, "40 ms round trips: the refill arrives before the buffer runs dry");
        for _ in 0..50 {
            w.record_round_trip(Duration::from_micros(200));
        }
        assert_eq!(
            w.window(),
            4,
            "back on a LAN: the window shrinks again (the round trip still rounds up to one job)"
        );
        let fixed = PrefetchWindow::new(Prefetch::Fixed(8));
        fixed.record_round_trip(Duration::from_secs(1));
        assert_eq!(fixed.window(), 8, "a fixed window stays fixed");
        let tiny = PrefetchWindow::new(Prefetch::Adaptive { workers: 4 });
        tiny.record(Duration::from_micros(1));
        tiny.record_round_trip(Duration::from_secs(1));
        assert_eq!(tiny.window(), MAX_WINDOW, "capped");
    }
}
