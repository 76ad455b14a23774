//! Wake-ups for blocked FETCHes: one waiter per job made ready.
//!
//! Each blocked FETCH is a [`Slot`] in one FIFO queue under a small mutex
//! of its own (never the engine lock). A fetcher registers its slot *while
//! holding the engine lock*, right after finding nothing; whatever makes a
//! job ready reports it (`Engine::take_readied`) under the engine lock and
//! wakes after releasing it, so the slot is in the queue by then: a wake-up
//! cannot fall between "found nothing" and "started waiting".
//!
//! Guarantees:
//! - `notify(channel, n)` wakes the oldest waiters of that channel until
//!   their counts cover `n` jobs, and no one else: with 1,000 blocked
//!   FETCHes a PUSH costs one wake-up, not 1,000 (issue 18).
//! - A woken slot has left the queue. Its owner either fetches again, or,
//!   when it will not (its client hung up), passes the wake-up on with
//!   `notify`, so a job is never left ready while a live waiter sleeps.
//! - `shutdown` ends every wait now and every later one at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// `Slot::woken` while not woken (channels are u32).
const NOT_WOKEN: u64 = u64::MAX;

pub(crate) struct Slot {
    channels: Box<[u32]>,
    count: usize,
    cv: Condvar,
    /// The channel whose job woke it; read and written only under the
    /// notifier's mutex (the atomic only makes the shared slot `Sync`).
    woken: AtomicU64,
}

pub(crate) enum Wake {
    /// A job of this channel became ready for this waiter.
    Woken(u32),
    TimedOut,
    Shutdown,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Arc<Slot>>,
    shutdown: bool,
}

#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<State>,
}

impl Notifier {
    /// Queues a waiter for `count` jobs of `channels`. Call under the
    /// engine lock, right after a fetch found nothing.
    pub(crate) fn register(&self, channels: &[u32], count: usize) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            channels: channels.into(),
            count: count.max(1),
            cv: Condvar::new(),
            woken: AtomicU64::new(NOT_WOKEN),
        });
        self.state.lock().queue.push_back(slot.clone());
        slot
    }

    /// Wakes waiters for `readied` (channel, jobs) pairs, oldest first.
    pub(crate) fn notify(&self, readied: &[(u32, usize)]) {
        let mut state = self.state.lock();
        if state.queue.is_empty() {
            return;
        }
        // A tick that expired leases across channels reports a pair per
        // run of one channel; one scan of the queue per channel is enough.
        let merged;
        let readied = if readied.len() > 4 {
            let mut list = readied.to_vec();
            list.sort_unstable_by_key(|&(channel, _)| channel);
            list.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 += later.1;
                }
                same
            });
            merged = list;
            &merged[..]
        } else {
            readied
        };
        for &(channel, jobs) in readied {
            let mut left = jobs;
            let mut i = 0;
            while left > 0 && i < state.queue.len() {
                if !state.queue[i].channels.contains(&channel) {
                    i += 1;
                    continue;
                }
                let slot = state.queue.remove(i).expect("index in range");
                slot.woken.store(u64::from(channel), Ordering::Relaxed);
                slot.cv.notify_one();
                left = left.saturating_sub(slot.count);
            }
        }
    }

    /// Hands the wake-up of `slot` (for `channel`) to the next waiters: its
    /// owner will not fetch.
    pub(crate) fn pass_on(&self, slot: &Slot, channel: u32) {
        self.notify(&[(channel, slot.count)]);
    }

    /// Waits until the slot is woken, shutdown, or `until`. A slot that
    /// timed out is still queued: wait again, or `cancel` it.
    pub(crate) fn wait(&self, slot: &Slot, until: Instant) -> Wake {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return Wake::Shutdown;
            }
            let woken = slot.woken.load(Ordering::Relaxed);
            if woken != NOT_WOKEN {
                return Wake::Woken(woken as u32);
            }
            if slot.cv.wait_until(&mut state, until).timed_out() {
                let woken = slot.woken.load(Ordering::Relaxed);
                return if woken != NOT_WOKEN { Wake::Woken(woken as u32) } else { Wake::TimedOut };
            }
        }
    }

    /// Takes the slot out of the queue. `Some(channel)`: it had been woken
    /// meanwhile, and the caller must fetch or pass the wake-up on.
    pub(crate) fn cancel(&self, slot: &Arc<Slot>) -> Option<u32> {
        let mut state = self.state.lock();
        let woken = slot.woken.load(Ordering::Relaxed);
        if woken != NOT_WOKEN {
            return Some(woken as u32);
        }
        if let Some(i) = state.queue.iter().position(|s| Arc::ptr_eq(s, slot)) {
            state.queue.remove(i);
        }
        None
    }

    /// Ends every wait now and every later one at once.
    pub(crate) fn shutdown(&self) {
        let mut state = self.state.lock();
        state.shutdown = true;
        for slot in state.queue.drain(..) {
            slot.cv.notify_one();
        }
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.state.lock().shutdown
    }

    /// FETCHes waiting for a job now (STATS `blocked_fetches`).
    pub(crate) fn waiting(&self) -> usize {
        self.state.lock().queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(notifier: &Notifier, slot: &Slot) -> Option<u32> {
        match notifier.wait(slot, Instant::now()) {
            Wake::Woken(channel) => Some(channel),
            Wake::TimedOut => None,
            Wake::Shutdown => panic!("not shut down"),
        }
    }

    #[test]
    fn a_job_wakes_the_oldest_waiter_of_its_channel_only() {
        let n = Notifier::default();
        let other = n.register(&[2], 1);
        let first = n.register(&[1], 1);
        let both = n.register(&[3, 1], 1);
        let last = n.register(&[1], 1);
        n.notify(&[(1, 1)]);
        assert_eq!(
            [&other, &first, &both, &last].map(|s| woken(&n, s)),
            [None, Some(1), None, None],
            "one job, one waiter: the oldest on channel 1"
        );
        // Two jobs wake two waiters; a count of 2 covers two jobs alone.
        n.notify(&[(1, 2)]);
        assert_eq!([&other, &both, &last].map(|s| woken(&n, s)), [None, Some(1), Some(1)]);
        let big = n.register(&[5], 2);
        let after = n.register(&[5], 1);
        n.notify(&[(5, 2)]);
        assert_eq!([&big, &after].map(|s| woken(&n, s)), [Some(5), None]);
        // A waiter that will not fetch hands its wake-up on.
        n.pass_on(&big, 5);
        assert_eq!(woken(&n, &after), Some(5));
        // Cancel: out of the queue, or "you were woken" when it raced.
        assert_eq!(n.cancel(&other), None);
        n.notify(&[(2, 1)]);
        assert_eq!(woken(&n, &other), None, "a cancelled waiter is not woken");
        let raced = n.register(&[7], 1);
        n.notify(&[(7, 1)]);
        assert_eq!(n.cancel(&raced), Some(7));
        // Many pairs (a tick over many channels) are merged per channel.
        let slots: Vec<_> = (0..4).map(|_| n.register(&[8], 1)).collect();
        let spare = n.register(&[9], 1);
        n.notify(&[(8, 1), (10, 1), (8, 1), (10, 1), (8, 1), (11, 1)]);
        assert_eq!(slots.iter().map(|s| woken(&n, s)).collect::<Vec<_>>(), [Some(8), Some(8), Some(8), None]);
        assert_eq!(woken(&n, &spare), None);
    }

    #[test]
    fn shutdown_ends_waits_now_and_later() {
        let n = Notifier::default();
        let slot = n.register(&[1], 1);
        n.shutdown();
        assert!(matches!(n.wait(&slot, Instant::now() + std::time::Duration::from_secs(5)), Wake::Shutdown));
        assert!(n.is_shutdown());
    }
}
