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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Work buffered per worker. Comfortably above a claim round trip (well
/// under 1 ms on a LAN), so workers never wait for the next claim.
pub const TARGET_BUFFERED_WORK: Duration = Duration::from_millis(10);
/// How long after the last rate limited start the window stays bounded by
/// `RateCap` (decision 42): a node that stopped seeing such jobs returns to
/// its plain window.
const RATE_CAP_HOLD_MS: u64 = 10_000;

/// The least an adaptive window's refill claims while it holds no more
/// than `MAX_HELD_WORK` per worker (decision 51): a claim is one script
/// call whatever its size, and carries the completions made since the
/// last, so claims of at least this many jobs keep a node's Redis cost at
/// about one command per job when jobs take milliseconds (3 ms CPU jobs on
/// one worker claimed 2 at a time before: 9 commands per job).
pub const MIN_CLAIM: usize = 12;
/// The most unstarted work per worker the `MIN_CLAIM` floor may hold: at
/// 50 ms jobs it is 3 per worker (a window of 24 on 8 workers: a job that
/// sleeps 50 ms takes a little more), and slow jobs keep the plain window
/// (one per worker for jobs of 200 ms or more).
/// What the floor costs is the same as the window's: jobs a node holds
/// that an idle node could have run, and more handed back at shutdown.
pub const MAX_HELD_WORK: Duration = Duration::from_millis(200);

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
    rate: RateCap,
}

/// The window's bound while rate limited jobs flow (decision 42). Such a
/// job must start within its slack of its claim, or it is handed back; the
/// job-duration window (10 ms of *work* per worker) ignores how fast the
/// node actually starts jobs, so with no-op jobs on a busy host its tail
/// waited past the slack, and the hand-backs (a round trip each) made the
/// rest later still: a backlog stalled. The cap follows the waits the
/// starts see (every start's, once a rate limited one was seen): it grows
/// by one for each start within a quarter of the slack, and halves (once
/// per claim made since the last cut) when a start waited over half of it,
/// so the last job of a batch starts between a quarter and a half of the
/// slack after its claim, well inside it.
struct RateCap {
    cap: AtomicUsize,
    /// Node clock (ms) of the last rate limited start; 0: never.
    seen_ms: AtomicU64,
    /// Node clock (ms) of the last cut: starts of jobs claimed before it
    /// were sized before it and cut nothing more.
    cut_ms: AtomicU64,
    /// The start slack of the last rate limited job started.
    slack_ms: AtomicU64,
}

impl PrefetchWindow {
    pub fn new(mode: Prefetch) -> Self {
        let floor = Self::rate_floor(mode);
        let rate = RateCap {
            cap: AtomicUsize::new(floor * 2),
            seen_ms: AtomicU64::new(0),
            cut_ms: AtomicU64::new(0),
            slack_ms: AtomicU64::new(0),
        };
        PrefetchWindow { mode, avg_ns: AtomicU64::new(0), round_trip_ns: AtomicU64::new(0), rate }
    }

    fn rate_floor(mode: Prefetch) -> usize {
        match mode {
            Prefetch::Fixed(n) => n.max(1),
            Prefetch::Adaptive { workers } => workers.clamp(1, MAX_WINDOW),
        }
    }

    /// A job claimed at `claimed_ms` starts (or, rate limited and found
    /// past its slack, is handed back) at `now_ms`, both node clock.
    /// `slack_ms` is the job's start slack when it is rate limited. While
    /// the cap is in force every start's wait feeds it, plain jobs' too
    /// (measured against the last slack seen): they share the window, and
    /// a cap grown by the rate limited starts alone stayed small beside a
    /// few of them and starved the rest. Without rate limited jobs this is
    /// one atomic load.
    pub fn started(&self, claimed_ms: u64, slack_ms: Option<u64>) {
        let r = &self.rate;
        let now_ms = match slack_ms {
            Some(slack) => {
                let now = crate::now_ms();
                r.seen_ms.store(now.max(1), Ordering::Relaxed);
                r.slack_ms.store(slack, Ordering::Relaxed);
                now
            }
            None => {
                let Some(now) = self.rate_cap_in_force() else { return };
                now
            }
        };
        self.rate_wait(claimed_ms, now_ms, r.slack_ms.load(Ordering::Relaxed));
    }

    fn rate_wait(&self, claimed_ms: u64, now_ms: u64, slack_ms: u64) {
        let r = &self.rate;
        let cut = r.cut_ms.load(Ordering::Relaxed);
        if claimed_ms <= cut {
            return;
        }
        let waited = now_ms.saturating_sub(claimed_ms);
        if waited.saturating_mul(2) > slack_ms {
            if r.cut_ms.compare_exchange(cut, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                let floor = Self::rate_floor(self.mode);
                let _ = r.cap.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some((c / 2).max(floor)));
            }
        } else if waited.saturating_mul(4) < slack_ms {
            let _ = r.cap.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some((c + 1).min(MAX_WINDOW)));
        }
    }

    /// The node clock now, while the cap is in force (a rate limited job
    /// started within RATE_CAP_HOLD_MS); None without a clock read when
    /// none ever did.
    fn rate_cap_in_force(&self) -> Option<u64> {
        let seen = self.rate.seen_ms.load(Ordering::Relaxed);
        if seen == 0 {
            return None;
        }
        let now = crate::now_ms();
        (now.saturating_sub(seen) < RATE_CAP_HOLD_MS).then_some(now)
    }

    /// The rate cap, while in force.
    fn rate_cap(&self) -> Option<usize> {
        self.rate_cap_in_force().map(|_| self.rate.cap.load(Ordering::Relaxed))
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
                let window = per_worker.saturating_mul(workers).clamp(workers.min(MAX_WINDOW), MAX_WINDOW);
                let held = (MAX_HELD_WORK.as_nanos() as u64 / avg).min(MAX_WINDOW as u64) as usize;
                let window = window.max((2 * MIN_CLAIM).min(held.saturating_mul(workers)));
                self.rate_cap().map_or(window, |cap| window.min(cap))
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
        assert_eq!(w.window(), 2 * MIN_CLAIM, "3 ms jobs: claims of MIN_CLAIM (10 ms per worker would be 6)");
        for _ in 0..200 {
            w.record(Duration::from_millis(50));
        }
        assert_eq!(w.window(), 8, "50 ms jobs: the floor holds at most 200 ms of work per worker");
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
        assert_eq!(w.window(), 20, "20 ms jobs next to Redis: the claim floor, 10 (200 ms) per worker");
        for _ in 0..50 {
            w.record(Duration::from_millis(200));
        }
        assert_eq!(w.window(), 2, "200 ms jobs: one per worker, the floor holds no more");
        for _ in 0..50 {
            w.record_round_trip(Duration::from_millis(390));
        }
        // 1 + 780 ms / 200 ms per worker, rounded up: the half left when a
        // refill is asked for (5 jobs, 500 ms of work for 2 workers)
        // outlasts it.
        assert_eq!(w.window(), 10, "390 ms round trips: the refill arrives before the buffer runs dry");
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

    #[test]
    fn rate_limited_starts_bound_the_window_by_their_waits() {
        let w = PrefetchWindow::new(Prefetch::Adaptive { workers: 8 });
        for _ in 0..100 {
            w.record(Duration::from_micros(5));
        }
        assert_eq!(w.window(), MAX_WINDOW, "no-op jobs, no rate limited one yet");
        let now = crate::now_ms();
        w.started(now, Some(50));
        assert_eq!(w.window(), 17, "from twice the workers, one more per start within a quarter of the slack");
        for _ in 0..500 {
            w.rate_wait(now, now + 5, 50);
        }
        assert_eq!(w.window(), 517);
        // A start of a job claimed at `now` waited 30 ms (over half of the
        // slack): halved once, not once per such start of that claim.
        w.rate_wait(now, now + 30, 50);
        w.rate_wait(now, now + 40, 50);
        assert_eq!(w.window(), 258);
        w.rate_wait(now + 31, now + 61, 50);
        assert_eq!(w.window(), 129, "a late start of a claim made after the cut cuts again");
        for _ in 0..10 {
            w.rate_wait(now, now + 45, 50);
        }
        assert_eq!(w.window(), 129, "starts of claims from before the cut change nothing");
        // Plain jobs' starts feed the cap too while it is in force.
        w.started(now + 100, None); // claimed after the last cut (now + 61)
        assert_eq!(w.window(), 130, "a plain start within a quarter of the slack");
        let plain_only = PrefetchWindow::new(Prefetch::Adaptive { workers: 8 });
        for _ in 0..100 {
            plain_only.record(Duration::from_micros(5));
            plain_only.started(0, None);
        }
        assert_eq!(plain_only.window(), MAX_WINDOW, "no rate limited job seen: no cap, whatever plain jobs wait");
        let fixed = PrefetchWindow::new(Prefetch::Fixed(64));
        fixed.rate_wait(now, now + 45, 50);
        assert_eq!(fixed.window(), 64, "a fixed window stays fixed");
    }
}
