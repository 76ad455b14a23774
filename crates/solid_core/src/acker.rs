//! The completions of one job source's workers, and the thread that writes
//! them. Completions are asynchronous: no worker waits for them, and a crash
//! before one is written only runs that job again (at-least-once).
//!
//! Two writers share them (decision 51). A fetcher about to claim takes
//! every pending completion into the same call ([`Completions::carry`]:
//! on Redis one `ack_claim.lua` acknowledges them and claims the next
//! batch), so while jobs flow a node makes one script call per claim, not
//! one per claim plus one per completion batch. The acker thread ([`run`])
//! writes what no claim carried: at once when nothing will be claimed soon
//! (the fetcher found its channels empty, is paused or stopping), or when a
//! completion must not wait (it releases a concurrency slot or a unique
//! lock), and otherwise after `CARRY_WAIT`.
//!
//! One batch is in flight at a time, whichever thread writes it (the
//! `writing` lock): a batch whose reply was lost is resent, unchanged and
//! alone, before anything else, so `ack.lua`'s last-batch marker recognises
//! it as applied instead of stale.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::claim::MAX_BATCH;
use crate::error::Result;
use crate::log::{log, Throttled};
use crate::redis::connection::Reconnecting;
use crate::source::Stats;

/// A safety net only: closing and flushing notify the acker, so an idle
/// acker does not need to wake on a timer to notice them.
const IDLE_WAKE: Duration = Duration::from_secs(5);

/// How long the acker holding a small batch waits for more completions
/// when no claim will carry them: below LINGER_BELOW completions a few
/// more per write are worth it (each tiny write is a script call, and a
/// blocked acker costs every completing worker a futex wake).
const LINGER: Duration = Duration::from_micros(500);
const LINGER_BELOW: usize = 64;

/// How long a completion may wait for a claim to carry it while claims
/// flow (decision 51). Above the claim interval of the regimes where the
/// call per job counts (a claim every 12 jobs: 36 ms of 3 ms jobs on one
/// worker, 75 ms of 50 ms jobs on eight); what it costs is that a job
/// finished within it runs again after a crash, and reads as running a
/// little longer. Completions that release something others wait for
/// (a concurrency slot, a unique lock) never wait for it.
pub const CARRY_WAIT: Duration = Duration::from_millis(100);

pub struct Completions<T> {
    state: Mutex<Pending<T>>,
    wake: Condvar,
    /// Held while a batch is written, by the acker or by a claim carrying
    /// it: one batch in flight per node (see the module documentation).
    writing: Mutex<()>,
    /// A claim is expected soon (the last one filled its request): the
    /// acker leaves plain completions for it, up to CARRY_WAIT.
    carried: AtomicBool,
}

struct Pending<T> {
    items: Vec<T>,
    /// When the oldest of `items` was completed.
    since: Option<Instant>,
    /// Some pending completion must not wait for a claim.
    urgent: bool,
    /// A batch whose write failed, possibly after it applied: written
    /// next, alone and unchanged.
    resend: Option<Vec<T>>,
    /// Flush requests, answered once everything completed before them is
    /// written.
    flushes: Vec<Sender<()>>,
    /// The acker has returned: a flush is answered false at once.
    ended: bool,
}

/// Completions a claim carries: written by that call, or handed back
/// ([`Carry::failed`]) to be resent by the acker. Holds the `writing` lock.
pub struct Carry<'a, T> {
    completions: &'a Completions<T>,
    _writing: MutexGuard<'a, ()>,
    pub items: Vec<T>,
}

impl<T> Default for Completions<T> {
    fn default() -> Self {
        Completions {
            state: Mutex::new(Pending {
                items: Vec::new(),
                since: None,
                urgent: false,
                resend: None,
                flushes: Vec::new(),
                ended: false,
            }),
            wake: Condvar::new(),
            writing: Mutex::new(()),
            carried: AtomicBool::new(false),
        }
    }
}

impl<T> Completions<T> {
    /// A worker completed a job. `urgent`: the completion releases
    /// something other jobs wait for, so it does not wait for a claim.
    pub fn push(&self, item: T, urgent: bool) {
        let mut st = self.state.lock();
        let first = st.items.is_empty();
        if first {
            st.since = Some(Instant::now());
        }
        st.items.push(item);
        // The acker sleeps until the oldest completion is due; it is woken
        // only when that changes, not once per completion.
        let notify = first || (urgent && !st.urgent) || st.items.len() == LINGER_BELOW || st.items.len() == MAX_BATCH;
        st.urgent |= urgent;
        drop(st);
        if notify {
            self.wake.notify_one();
        }
    }

    /// Whether the fetcher expects to claim soon; false wakes the acker,
    /// which writes what was left for a claim that will not come.
    pub fn set_carried(&self, carried: bool) {
        if self.carried.swap(carried, Ordering::AcqRel) && !carried {
            let _st = self.state.lock();
            self.wake.notify_one();
        }
    }

    /// Takes the pending completions (at most MAX_BATCH) for a claim to
    /// carry. None when there are none, when a batch must be resent first,
    /// or when the acker is writing (the claim goes alone rather than wait).
    pub fn carry(&self) -> Option<Carry<'_, T>> {
        let writing = self.writing.try_lock()?;
        let mut st = self.state.lock();
        if st.resend.is_some() || st.items.is_empty() {
            return None;
        }
        let items = take_batch(&mut st);
        Some(Carry { completions: self, _writing: writing, items })
    }

    /// Waits until everything completed before this call is written, at
    /// most `budget`; false when it was not.
    pub fn flush(&self, budget: Duration) -> bool {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut st = self.state.lock();
        if st.ended {
            return false;
        }
        st.flushes.push(tx);
        drop(st);
        self.wake.notify_one();
        rx.recv_timeout(budget).is_ok()
    }

    /// Wakes the acker so it sees its `closed` flag.
    pub fn wake(&self) {
        let _st = self.state.lock();
        self.wake.notify_one();
    }

    /// How long until the acker must write: zero now, None when nothing is
    /// pending.
    fn due_in(&self, st: &Pending<T>, closed: bool) -> Option<Duration> {
        if st.resend.is_some() || !st.flushes.is_empty() || (closed && !st.items.is_empty()) {
            return Some(Duration::ZERO);
        }
        let since = st.since.filter(|_| !st.items.is_empty())?;
        let carried = self.carried.load(Ordering::Acquire) && !st.urgent;
        let (wait, now_at) = if carried { (CARRY_WAIT, MAX_BATCH) } else { (LINGER, LINGER_BELOW) };
        if st.items.len() >= now_at {
            return Some(Duration::ZERO);
        }
        Some((since + wait).saturating_duration_since(Instant::now()))
    }
}

impl<T> Carry<'_, T> {
    /// The call failed (its reply lost, it may have applied): the acker
    /// resends these, alone and first.
    pub fn failed(self) {
        let mut st = self.completions.state.lock();
        st.resend = Some(self.items);
        drop(st);
        self.completions.wake.notify_one();
    }
}

fn take_batch<T>(st: &mut Pending<T>) -> Vec<T> {
    let items = if st.items.len() > MAX_BATCH {
        let rest = st.items.split_off(MAX_BATCH);
        std::mem::replace(&mut st.items, rest)
    } else {
        std::mem::take(&mut st.items)
    };
    if st.items.is_empty() {
        st.since = None;
        st.urgent = false;
    }
    items
}

/// Writes completions until `closed` is set and nothing is pending.
/// `write` sends one batch and returns the stale entries (rejected by the
/// backend: someone else owns the job now). A batch is retried until
/// written: dropping a completion would run a finished job again.
pub fn run<T: std::fmt::Debug>(
    completions: &Completions<T>,
    conn: Reconnecting,
    closed: &AtomicBool,
    stats: &Stats,
    write: impl FnMut(&mut Reconnecting, &[T]) -> Result<Vec<T>>,
) {
    write_until_closed(completions, conn, closed, stats, write);
    // Whatever is pending now is never written: flushes, waiting or to
    // come, are answered false at once (the senders dropped).
    let mut st = completions.state.lock();
    st.ended = true;
    st.flushes.clear();
}

fn write_until_closed<T: std::fmt::Debug>(
    completions: &Completions<T>,
    mut conn: Reconnecting,
    closed: &AtomicBool,
    stats: &Stats,
    mut write: impl FnMut(&mut Reconnecting, &[T]) -> Result<Vec<T>>,
) {
    // A failing write is retried every 50 ms or so: warn at a bounded rate.
    let write_warning = Throttled::default();
    loop {
        {
            let mut st = completions.state.lock();
            loop {
                let is_closed = closed.load(Ordering::Acquire);
                match completions.due_in(&st, is_closed) {
                    Some(wait) if wait.is_zero() => break,
                    Some(wait) => {
                        completions.wake.wait_for(&mut st, wait);
                    }
                    // A claim may still be carrying completions: wait for
                    // its call, which may hand them back to be resent.
                    None if is_closed && completions.writing.is_locked() => {
                        MutexGuard::unlocked(&mut st, || drop(completions.writing.lock()));
                    }
                    None if is_closed => return,
                    None => {
                        completions.wake.wait_for(&mut st, IDLE_WAKE);
                    }
                }
            }
        }
        // Waits for a claim carrying completions to finish (or hand them
        // back), so nothing completed before a flush is still in flight.
        let writing = completions.writing.lock();
        let flushes = loop {
            let batch = {
                let mut st = completions.state.lock();
                match st.resend.take() {
                    Some(batch) => batch,
                    None if !st.items.is_empty() => take_batch(&mut st),
                    None => break std::mem::take(&mut st.flushes),
                }
            };
            loop {
                match write(&mut conn, &batch) {
                    Ok(stale) => {
                        note_written(stats, batch.len(), &stale);
                        break;
                    }
                    Err(e) => {
                        stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                        if !e.is_connection() {
                            write_warning.log("WARN", &format!("writing completions failed: {e}; retrying"));
                        }
                        if closed.load(Ordering::Acquire) {
                            return;
                        }
                        std::thread::sleep(conn.backoff_remaining().max(Duration::from_millis(50)));
                    }
                }
            }
        };
        drop(writing);
        for reply in flushes {
            let _ = reply.send(());
        }
    }
}

/// Counts a written batch of `written` completions, and logs those the
/// backend rejected as stale (`stale`, among them).
pub fn note_written<T: std::fmt::Debug>(stats: &Stats, written: usize, stale: &[T]) {
    stats.completed.fetch_add((written - stale.len()) as u64, Ordering::Relaxed);
    if !stale.is_empty() {
        stats.stale.fetch_add(stale.len() as u64, Ordering::Relaxed);
        log(
            "WARN",
            &format!(
                "{} completion(s) rejected as stale (their jobs were recovered or redelivered: {:?}); nothing was changed",
                stale.len(),
                stale
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_carries_what_is_pending_and_a_failed_carry_is_resent_first_and_alone() {
        let c = Completions::default();
        assert!(c.carry().is_none(), "nothing pending");
        c.push(1, false);
        c.push(2, false);
        let carry = c.carry().expect("pending completions");
        assert_eq!(carry.items, [1, 2]);
        assert!(c.writing.try_lock().is_none(), "one batch in flight");
        c.push(3, false);
        carry.failed();
        assert!(c.carry().is_none(), "a resend goes first, written by the acker");
        let st = c.state.lock();
        assert_eq!(st.resend.as_deref(), Some(&[1, 2][..]));
        assert_eq!(st.items, [3]);
    }

    #[test]
    fn plain_completions_wait_for_a_claim_only_while_claims_flow() {
        let c = Completions::default();
        c.push(1, false);
        let lingering = c.due_in(&c.state.lock(), false).unwrap();
        assert!(lingering <= LINGER, "no claim expected: written after the linger");
        c.set_carried(true);
        let carried = c.due_in(&c.state.lock(), false).unwrap();
        assert!(carried > LINGER && carried <= CARRY_WAIT, "left for the next claim: {carried:?}");
        c.push(2, true);
        assert!(c.due_in(&c.state.lock(), false).unwrap() <= LINGER, "an urgent completion does not wait");
        assert_eq!(c.due_in(&c.state.lock(), true), Some(Duration::ZERO), "closing writes at once");
        let taken = c.carry().unwrap();
        assert_eq!(taken.items, [1, 2]);
        drop(taken);
        assert_eq!(c.due_in(&c.state.lock(), false), None, "nothing pending");
        assert!(!c.state.lock().urgent, "urgency goes with the batch");
    }

    /// A connection the acker under test never opens: its `write` is a stub.
    fn unused_connection() -> Reconnecting {
        Reconnecting::new(
            crate::redis::connection::Connector::with_timeouts("redis://127.0.0.1:1/0", Default::default()).unwrap(),
        )
    }

    #[test]
    fn a_flush_after_the_acker_ended_is_answered_at_once() {
        let c: Completions<u64> = Completions::default();
        let closed = AtomicBool::new(true);
        run(&c, unused_connection(), &closed, &Stats::default(), |_, _| unreachable!("nothing to write"));
        let started = Instant::now();
        assert!(!c.flush(Duration::from_secs(5)), "nothing will write it");
        assert!(started.elapsed() < Duration::from_secs(1), "not the whole budget");
    }

    #[test]
    fn a_closing_acker_waits_for_a_claim_carrying_completions_and_resends_them() {
        let c = std::sync::Arc::new(Completions::default());
        c.push(7u64, false);
        let carry = c.carry().unwrap();
        let closed = std::sync::Arc::new(AtomicBool::new(true));
        let written = std::sync::Arc::new(Mutex::new(Vec::new()));
        let acker = {
            let (c, closed, written) = (c.clone(), closed.clone(), written.clone());
            std::thread::spawn(move || {
                run(&c, unused_connection(), &closed, &Stats::default(), |_, batch: &[u64]| {
                    written.lock().extend_from_slice(batch);
                    Ok(Vec::new())
                });
            })
        };
        // Wall time: the acker has had time to end, were it not waiting (an absence: nothing to poll).
        std::thread::sleep(Duration::from_millis(50));
        assert!(!acker.is_finished(), "the acker waits for the carrying call");
        carry.failed();
        acker.join().unwrap();
        assert_eq!(*written.lock(), [7], "the handed-back batch is written before the acker ends");
    }

    #[test]
    fn a_carry_takes_at_most_one_batch() {
        let c = Completions::default();
        (0..MAX_BATCH + 5).for_each(|i| c.push(i, false));
        assert_eq!(c.carry().unwrap().items.len(), MAX_BATCH);
        assert_eq!(c.carry().unwrap().items, (MAX_BATCH..MAX_BATCH + 5).collect::<Vec<_>>());
    }
}
