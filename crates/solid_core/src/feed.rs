//! What every job source repeats between its workers and its fetcher
//! thread, written once: the buffer of claimed jobs, the prefetch window
//! that sizes it, the nudge a worker's take sends, the stop and pause
//! flags, the in-flight count and the stats.
//!
//! A source keeps the [`Feed`] (its [`crate::source::JobSource`] methods
//! read it) and moves the [`Fetcher`] into its fetch thread, which runs
//! [`Fetcher::run`] with the backend's own [`Fetch`]: how to claim a batch
//! from Redis or SolidEngine is all that differs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::claim::ClaimedJob;
use crate::prefetch::{Prefetch, PrefetchWindow};
use crate::source::Stats;

/// How often a paused fetcher looks whether it was resumed. Local only: no
/// command is sent while paused.
pub const PAUSE_CHECK: Duration = Duration::from_millis(100);

/// The workers' side, shared with the source's other threads.
pub struct Feed {
    /// Claiming has stopped; workers get `Stopped`.
    stopping: AtomicBool,
    /// Claiming is paused by a control request; claimed jobs still run.
    paused: AtomicBool,
    /// Jobs handed to workers and not yet settled.
    inflight: AtomicUsize,
    window: PrefetchWindow,
    stats: Stats,
    jobs_rx: Receiver<ClaimedJob>,
    /// Nudges the fetcher when a worker takes a job (capacity 1: a pending
    /// nudge is enough, so workers never block on it).
    taken_tx: Sender<()>,
    /// Dropped on stop: every wait on the fetcher's stop receiver ends.
    stop_tx: Mutex<Option<Sender<()>>>,
}

/// The fetch thread's side: where claimed jobs go, and what wakes it.
pub struct Fetcher {
    jobs_tx: Sender<ClaimedJob>,
    taken_rx: Receiver<()>,
    stop_rx: Receiver<()>,
}

/// How one backend claims a batch; [`Fetcher::run`] does the rest.
pub trait Fetch {
    /// Work due before the next claim, checked first on every turn (even
    /// while paused). False when it could not be done: the turn ends (after
    /// a pause, see [`Fetcher::pause`]) and it is tried again.
    fn prepare(&mut self, _fetcher: &Fetcher) -> bool {
        true
    }

    /// Claims up to `want` jobs and hands them to the workers with
    /// [`Fetcher::deliver`]. False when the workers are gone (the thread ends).
    fn fetch(&mut self, fetcher: &Fetcher, want: usize) -> bool;
}

impl Feed {
    pub fn new(prefetch: Prefetch) -> (Feed, Fetcher) {
        let (jobs_tx, jobs_rx) = unbounded();
        let (taken_tx, taken_rx) = bounded(1);
        let (stop_tx, stop_rx) = bounded(0);
        let feed = Feed {
            stopping: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            window: PrefetchWindow::new(prefetch),
            stats: Stats::default(),
            jobs_rx,
            taken_tx,
            stop_tx: Mutex::new(Some(stop_tx)),
        };
        (feed, Fetcher { jobs_tx, taken_rx, stop_rx })
    }

    /// Claimed jobs waiting for a worker.
    pub fn jobs(&self) -> &Receiver<ClaimedJob> {
        &self.jobs_rx
    }

    /// A worker took `job` from `jobs()`: count it in flight, start its
    /// clock (for the prefetch window) and nudge the fetcher to refill.
    /// In flight before anyone checks for stop (SeqCst, paired with the
    /// hub's check): either the worker sees the stop or shutdown sees the job.
    pub fn taken(&self, job: &mut ClaimedJob) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        job.taken_at = Some(Instant::now());
        // Wake the fetcher only when a refill is due: a signal per job would
        // cost a futex wake and a context switch per job at high rates.
        if self.window.refill(self.jobs_rx.len()).is_some() {
            let _ = self.taken_tx.try_send(());
        }
    }

    /// A claim round trip the fetcher measured: it feeds the window, so a
    /// node far from its backend buffers enough to cover it.
    pub fn claimed_in(&self, took: Duration) {
        self.window.record_round_trip(took);
    }

    /// A job claimed at `claimed_ms` is started (or, rate limited with
    /// start slack `slack_ms`, handed back) now: its wait bounds the window
    /// while rate limited jobs flow (see `PrefetchWindow::started`).
    pub fn started(&self, claimed_ms: u64, slack_ms: Option<u64>) {
        self.window.started(claimed_ms, slack_ms);
    }

    /// The task of a taken job returned: its duration feeds the window.
    pub fn ran(&self, job: &ClaimedJob) {
        if let Some(t) = job.taken_at {
            self.window.record(t.elapsed());
        }
    }

    /// A taken job is no longer in flight here: settled, abandoned, or
    /// given back unstarted.
    pub fn settled(&self) {
        self.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// Stops claiming: workers get `Stopped` on their next call (jobs
    /// already handed out keep running) and the fetcher leaves its wait.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop_tx.lock().take();
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Claiming goes on: neither stopping nor paused.
    pub fn is_claiming(&self) -> bool {
        !self.is_stopping() && !self.paused.load(Ordering::Acquire)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl Fetcher {
    /// The fetch loop of every source, until it stops: `prepare`; wait
    /// while paused; wait for a worker's take while the window needs no
    /// refill; otherwise `fetch` the free part of the window.
    pub fn run(&self, feed: &Feed, fetch: &mut impl Fetch) {
        while !feed.is_stopping() {
            if !fetch.prepare(self) {
                continue;
            }
            if feed.paused.load(Ordering::Acquire) {
                self.pause(PAUSE_CHECK);
                continue;
            }
            let Some(want) = feed.window.refill(self.jobs_tx.len()) else {
                select! {
                    recv(self.taken_rx) -> _ => {},
                    recv(self.stop_rx) -> _ => return,
                }
                continue;
            };
            if !fetch.fetch(self, want) {
                return;
            }
        }
    }

    /// Hands claimed jobs to the workers; false when they are gone.
    pub fn deliver(&self, jobs: impl IntoIterator<Item = ClaimedJob>) -> bool {
        jobs.into_iter().all(|job| self.jobs_tx.send(job).is_ok())
    }

    /// Waits `pause`, or less if the source stops meanwhile.
    pub fn pause(&self, pause: Duration) {
        let _ = self.stop_rx.recv_timeout(pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(token: u64) -> ClaimedJob {
        ClaimedJob::for_test("Task", token)
    }

    /// Hands out numbered jobs, `want` at a time, and says what it was asked.
    struct Counting {
        asked: Vec<usize>,
        next: u64,
    }

    impl Fetch for Counting {
        fn fetch(&mut self, fetcher: &Fetcher, want: usize) -> bool {
            self.asked.push(want);
            let jobs: Vec<ClaimedJob> = (0..want as u64).map(|i| job(self.next + i)).collect();
            self.next += want as u64;
            fetcher.deliver(jobs)
        }
    }

    #[test]
    fn the_fetcher_refills_at_half_and_waits_for_takes_until_stopped() {
        let (feed, fetcher) = Feed::new(Prefetch::Fixed(4));
        let feed = std::sync::Arc::new(feed);
        let thread = {
            let feed = feed.clone();
            std::thread::spawn(move || {
                let mut fetch = Counting { asked: Vec::new(), next: 1 };
                fetcher.run(&feed, &mut fetch);
                fetch.asked
            })
        };
        let mut taken = Vec::new();
        for _ in 0..6 {
            let mut j = feed.jobs().recv_timeout(Duration::from_secs(5)).expect("a job");
            feed.taken(&mut j);
            assert!(j.taken_at.is_some());
            taken.push(j.token);
        }
        assert_eq!(taken, [1, 2, 3, 4, 5, 6], "in claim order");
        assert_eq!(feed.inflight(), 6);
        taken.iter().for_each(|_| feed.settled());
        assert_eq!(feed.inflight(), 0);
        feed.stop();
        assert!(feed.is_stopping());
        let asked = thread.join().unwrap();
        assert_eq!(asked[0], 4, "the whole window first");
        assert!(asked[1..].iter().all(|&n| n >= 2), "then at least half of it: {asked:?}");
    }

    #[test]
    fn a_paused_fetcher_claims_nothing_until_resumed() {
        let (feed, fetcher) = Feed::new(Prefetch::Fixed(2));
        feed.set_paused(true);
        let feed = std::sync::Arc::new(feed);
        let thread = {
            let feed = feed.clone();
            std::thread::spawn(move || {
                let mut fetch = Counting { asked: Vec::new(), next: 1 };
                fetcher.run(&feed, &mut fetch);
                fetch.asked
            })
        };
        assert!(feed.jobs().recv_timeout(PAUSE_CHECK * 3).is_err(), "nothing while paused");
        feed.set_paused(false);
        assert!(feed.jobs().recv_timeout(Duration::from_secs(5)).is_ok(), "claims once resumed");
        feed.stop();
        assert_eq!(thread.join().unwrap()[0], 2);
    }
}
