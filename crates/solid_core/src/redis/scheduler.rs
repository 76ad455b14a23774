//! The recurring scheduler of a worker node: one thread, started only when
//! the node runs schedules (a node without them pays nothing), proposing
//! each schedule's ticks to `recurring.lua` as they fall due. Every node
//! runs it; the script alone decides, so one node or twenty enqueue the
//! same jobs (decision 37).
//!
//! Clocks: the script compares ticks with Redis' clock only, so a node
//! whose clock is skewed can neither enqueue early nor twice. To wake at
//! the right moment the node estimates Redis' clock ([`RedisClock`]): the
//! Redis time of the last reply plus the time elapsed since, counted on a
//! clock that runs through a suspend and ignores wall-clock steps
//! (CLOCK_BOOTTIME on Linux). A wall clock stepped back or forward (NTP,
//! an operator) therefore moves no due time, and after a VM or laptop
//! suspend every overdue tick is due at once. Due times are Redis-clock
//! milliseconds, re-compared with the estimate on every wake, and no sleep
//! is longer than [`MAX_SLEEP`].
//!
//! Lost writes: a Redis that crashed under `appendfsync everysec`, failed
//! over to a lagging replica or was restored from an older snapshot can
//! forget decided ticks and the jobs enqueued with them. The node's memory
//! of decided ticks never outranks Redis: it is forgotten on every
//! connection failure, so the next proposal asks Redis, and a tick Redis
//! forgot is proposed (and enqueued) again if it is still the latest one.
//! A node that saw a later decision than Redis now reports logs a WARN.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::log::{log_fields, Level, Throttled, Value};
use crate::now_ms;
use crate::recurring::RecurringSchedule;
use crate::redis::connection::{Connector, Reconnecting};
use crate::redis::doorbell::Bell;
use crate::redis::store::{Store, TickDecision, TickOutcome, TickProposal};

/// A tick decided later than this after its time was missed: the window
/// covers a node's retries through a short outage and its clock estimate's
/// error, while a tick whose nodes were all down is recognised as missed.
pub const ON_TIME: Duration = Duration::from_secs(60);
/// The least time a schedule's state outlives its next tick: how long a
/// removed schedule's state lingers, and how long after a missed tick a
/// restarted node still runs it under `missed: :latest`.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The longest sleep. A sleep is measured on the monotonic clock, which
/// stops while the host is suspended, so this bounds how long a resumed
/// node takes to notice its overdue ticks: far inside [`ON_TIME`], so a
/// tick due during the suspend is proposed on time (and a `missed: :skip`
/// schedule does not drop it). One wake costs a clock read, no command.
pub const MAX_SLEEP: Duration = Duration::from_secs(5);
/// Retry delays after a failed proposal (Redis down or refusing): doubling
/// from the first to the last, and never shorter than the connection's own
/// reconnect backoff.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The clocks the scheduler reads; injected so tests can step the wall
/// clock or simulate a suspend without sleeping.
pub trait Clocks: Send {
    /// The wall clock, ms since the epoch: the estimate of Redis' clock
    /// until Redis first answers.
    fn wall_ms(&self) -> u64;
    /// Elapsed time in ms from an arbitrary origin, on a clock that counts
    /// a suspend and is never stepped.
    fn elapsed_ms(&self) -> u64;
}

/// CLOCK_BOOTTIME on Linux (CLOCK_MONOTONIC plus the time suspended);
/// elsewhere `Instant`, which on some systems stops during a suspend (the
/// bounded sleep still brings a resumed node back within [`MAX_SLEEP`] of
/// its next reply, which re-anchors the estimate).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClocks;

impl Clocks for SystemClocks {
    fn wall_ms(&self) -> u64 {
        now_ms()
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn elapsed_ms(&self) -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given and nothing
        // else; CLOCK_BOOTTIME exists on every Linux since 2.6.39.
        if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0 {
            return ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000;
        }
        instant_ms()
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn elapsed_ms(&self) -> u64 {
        instant_ms()
    }
}

#[allow(dead_code)] // the fallback on Linux only when clock_gettime fails
fn instant_ms() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The node's estimate of Redis' clock: the Redis time of the last reply,
/// taken at the midpoint of its call, plus the time elapsed since on
/// [`Clocks::elapsed_ms`]. Its error is half the call's round trip plus the
/// two clocks' drift since (ppm); it never moves with the node's wall clock.
pub struct RedisClock<C: Clocks = SystemClocks> {
    clocks: C,
    /// (Redis' clock, elapsed clock) at the last reply.
    anchor: Option<(u64, u64)>,
}

impl<C: Clocks> RedisClock<C> {
    pub fn new(clocks: C) -> Self {
        RedisClock { clocks, anchor: None }
    }

    /// Redis' clock now, as estimated; the wall clock before any reply.
    pub fn now_ms(&self) -> u64 {
        match self.anchor {
            Some((redis_ms, at)) => redis_ms + self.clocks.elapsed_ms().saturating_sub(at),
            None => self.clocks.wall_ms(),
        }
    }

    /// A reading of the elapsed clock, to bracket a call with.
    pub fn elapsed_ms(&self) -> u64 {
        self.clocks.elapsed_ms()
    }

    /// Redis answered `redis_ms` to a call sent at `sent` and answered at
    /// `received` (both from [`Self::elapsed_ms`]).
    pub fn observe(&mut self, redis_ms: u64, sent: u64, received: u64) {
        self.anchor = Some((redis_ms, sent + received.saturating_sub(sent) / 2));
    }
}

/// How long to sleep until Redis' clock reaches `due_ms`, estimated `now_ms`
/// now: never longer than [`MAX_SLEEP`], so the estimate is re-read often.
pub fn sleep_until(due_ms: u64, now_ms: u64) -> Duration {
    Duration::from_millis(due_ms.saturating_sub(now_ms)).min(MAX_SLEEP)
}

struct Slot {
    schedule: RecurringSchedule,
    /// The last tick Redis reported decided over the current connection:
    /// ticks at or before it are not proposed. Forgotten on any connection
    /// failure, since the Redis answering next may have lost it.
    decided: Option<u64>,
    /// The latest tick this node saw Redis report decided, kept across
    /// reconnects only to notice that Redis forgot decisions.
    seen: Option<u64>,
    /// When to look at this schedule next, on Redis' clock (ms).
    due_ms: u64,
    rollback: Throttled,
}

pub struct Scheduler<'a, C: Clocks = SystemClocks> {
    store: &'a Store,
    conn: Reconnecting,
    slots: Vec<Slot>,
    clock: RedisClock<C>,
    /// When the connection last answered (elapsed clock, ms).
    last_reply: u64,
    failures: u32,
    warning: Throttled,
    /// [`ON_TIME`], shorter in tests that pause Redis past it.
    on_time_ms: u64,
}

impl<'a> Scheduler<'a> {
    pub fn new(store: &'a Store, connector: Connector, schedules: Vec<RecurringSchedule>) -> Self {
        Scheduler::with_clocks(store, connector, schedules, SystemClocks)
    }
}

impl<'a, C: Clocks> Scheduler<'a, C> {
    pub fn with_clocks(store: &'a Store, connector: Connector, schedules: Vec<RecurringSchedule>, clocks: C) -> Self {
        let clock = RedisClock::new(clocks);
        let now = clock.now_ms();
        let slots = schedules
            .into_iter()
            .map(|schedule| Slot { schedule, decided: None, seen: None, due_ms: now, rollback: Throttled::default() })
            .collect();
        let last_reply = clock.elapsed_ms();
        Scheduler {
            store,
            conn: Reconnecting::new(connector),
            slots,
            clock,
            last_reply,
            failures: 0,
            warning: Throttled::default(),
            on_time_ms: ON_TIME.as_millis() as u64,
        }
    }

    /// The on-time window proposals carry (default [`ON_TIME`]): a test
    /// shortens it to make ticks missed without waiting a minute.
    pub fn with_on_time(mut self, window: Duration) -> Self {
        self.on_time_ms = window.as_millis() as u64;
        self
    }

    /// Proposes due ticks until `closed` is set; `bell` rings to end a
    /// sleep early (shutdown). A proposal is one bounded call (the
    /// connection's timeouts), so a stop waits at most that long.
    pub fn run(mut self, closed: &AtomicBool, bell: &Bell) {
        while !closed.load(Ordering::Acquire) {
            let seen = bell.epoch();
            for i in 0..self.slots.len() {
                if self.slots[i].due_ms <= self.clock.now_ms() && !closed.load(Ordering::Acquire) {
                    self.fire(i);
                }
            }
            if !closed.load(Ordering::Acquire) {
                self.check_connection();
            }
            let now = self.clock.now_ms();
            let wake = self.slots.iter().map(|s| s.due_ms).min().unwrap_or(u64::MAX);
            bell.wait_past(seen, sleep_until(wake, now));
        }
    }

    /// A PING when the connection has been idle for [`MAX_SLEEP`] (a
    /// schedule with a long period): a Redis that restarted, failed over or
    /// was restored broke the connection, and may have lost the last
    /// decisions with their jobs. Finding out now, rather than at the next
    /// tick, lets every schedule ask Redis again at once, so a forgotten
    /// latest tick is proposed again while it is still the latest.
    fn check_connection(&mut self) {
        if !self.conn.is_connected()
            || self.clock.elapsed_ms().saturating_sub(self.last_reply) < MAX_SLEEP.as_millis() as u64
        {
            return;
        }
        match self.conn.run(|c| redis::cmd("PING").query::<()>(c).map_err(crate::Error::from)) {
            Ok(()) => self.last_reply = self.clock.elapsed_ms(),
            Err(e) if e.is_connection() => {
                self.forget_decided();
                let now = self.clock.now_ms();
                for s in &mut self.slots {
                    s.due_ms = s.due_ms.min(now);
                }
            }
            Err(_) => self.last_reply = self.clock.elapsed_ms(),
        }
    }

    /// Every slot's `decided`, forgotten: the connection to Redis is new or
    /// broke, and the Redis answering next may have lost writes.
    fn forget_decided(&mut self) {
        for s in &mut self.slots {
            s.decided = None;
        }
    }

    /// The due time after `t_ms` for slot `i`: its next tick, or a re-check
    /// after the longest sleep when the schedule has none.
    fn next_due(&self, i: usize, t_ms: u64) -> u64 {
        let est = self.clock.now_ms();
        self.slots[i].schedule.ticks.next_after(t_ms).unwrap_or(est + MAX_SLEEP.as_millis() as u64)
    }

    fn fire(&mut self, i: usize) {
        let est = self.clock.now_ms();
        let ticks = self.slots[i].schedule.ticks.clone();
        let Some(tick) = ticks.latest_at_or_before(est) else {
            self.slots[i].due_ms = self.next_due(i, est);
            return;
        };
        if let Some(d) = self.slots[i].decided.filter(|&d| tick <= d) {
            self.slots[i].due_ms = self.next_due(i, d);
            return;
        }
        let slot = &self.slots[i];
        // The template was validated at start: building cannot fail.
        let envelope = match slot.schedule.envelope(tick, now_ms()) {
            Ok(e) => e,
            Err(e) => {
                self.warning.log("ERROR", &format!("schedule {}: {e}", slot.schedule.name));
                self.slots[i].due_ms = est + MAX_SLEEP.as_millis() as u64;
                return;
            }
        };
        let name = slot.schedule.name.clone();
        let proposal = TickProposal {
            name: &name,
            tick_ms: tick,
            next_ms: ticks.next_after(tick),
            missed: slot.schedule.missed,
            on_time_ms: self.on_time_ms,
            retention_ms: RETENTION.as_millis() as u64,
            envelope: &envelope,
        };
        if !self.conn.is_connected() {
            self.forget_decided();
        }
        let store = self.store;
        let sent = self.clock.elapsed_ms();
        let decided = self.conn.run(|c| store.enqueue_tick(c, &proposal));
        let received = self.clock.elapsed_ms();
        match decided {
            Ok(d) => {
                self.failures = 0;
                self.last_reply = received;
                self.clock.observe(d.now_ms, sent, received);
                if d.outcome == TickOutcome::Early {
                    // Told how far ahead of Redis this node proposed. With
                    // the clock estimate corrected, an earlier tick may be
                    // the one due now (this node's clock ran fast before
                    // the first reply): propose it at once; otherwise
                    // propose again when Redis reaches the tick.
                    let now = self.clock.now_ms();
                    let corrected = ticks.latest_at_or_before(now);
                    self.slots[i].due_ms = if corrected.is_some_and(|t| t < tick) { now } else { tick.max(now + 1) };
                    return;
                }
                if d.outcome == TickOutcome::Stale {
                    // A later tick is due by Redis' clock (this node's
                    // estimate lagged, or Redis ran the proposal long after
                    // it was sent): with the estimate corrected, propose
                    // the latest at once.
                    let now = self.clock.now_ms();
                    let corrected = ticks.latest_at_or_before(now);
                    self.slots[i].due_ms = if corrected.is_some_and(|t| t > tick) { now } else { now + 1_000 };
                    return;
                }
                self.note_rollback(i, &d);
                let last = d.last_ms.unwrap_or(tick).max(tick);
                self.slots[i].decided = Some(last);
                self.slots[i].seen = Some(last);
                self.slots[i].due_ms = self.next_due(i, last);
                if d.outcome != TickOutcome::Seen {
                    let what = if d.outcome == TickOutcome::Enqueued { "enqueued" } else { "skipped (missed)" };
                    log_fields(
                        Level::Debug,
                        &format!("recurring tick {what}"),
                        &[
                            ("schedule", Value::from(name.as_str())),
                            ("tick_ms", Value::Int(tick as i64)),
                            ("job_id", Value::from(envelope.id.as_str())),
                            ("task", Value::from(envelope.task.as_str())),
                        ],
                    );
                }
            }
            Err(e) => {
                if e.is_connection() {
                    self.forget_decided();
                } else {
                    self.warning.log("WARN", &format!("schedule {name}: proposing tick {tick} failed: {e}; retrying"));
                }
                let backoff = RETRY_FIRST.saturating_mul(1 << self.failures.min(6)).min(RETRY_MAX);
                self.failures += 1;
                let wait = backoff.max(self.conn.backoff_remaining());
                self.slots[i].due_ms = self.clock.now_ms() + wait.as_millis() as u64;
            }
        }
    }

    /// Logs (throttled per schedule) that Redis reported an earlier last
    /// decided tick than one this node saw it decide: Redis lost writes,
    /// and with them the jobs of the ticks between.
    fn note_rollback(&self, i: usize, d: &TickDecision) {
        let slot = &self.slots[i];
        let Some(seen) = slot.seen else { return };
        let forgot = match d.previous_ms {
            Some(p) => p < seen,
            // No state at all: lost unless it may have expired, which it
            // cannot before the retention has passed since the tick `seen`
            // was decided (each decision sets it to expire later still).
            None => d.now_ms < seen + RETENTION.as_millis() as u64,
        };
        if !forgot {
            return;
        }
        let held = d.previous_ms.map_or_else(|| "no decided tick".to_owned(), |p| format!("tick {}", iso(p)));
        slot.rollback.log(
            "WARN",
            &format!(
                "recurring schedule {}: Redis forgot decided ticks: it holds {held}, but this node saw tick {} \
                 ({seen} ms) decided; the jobs enqueued for the forgotten ticks were lost with them (a Redis \
                 restart without appendfsync always, a failover to a lagging replica, or a restore from an older \
                 snapshot). The schedule goes on from Redis' state; the latest tick is proposed again",
                slot.schedule.name,
                iso(seen),
            ),
        );
    }
}

fn iso(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| format!("{ms} ms"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::*;

    /// Clocks a test moves by hand: `wall` and `elapsed` in ms.
    #[derive(Clone, Default)]
    struct Hand {
        wall: Arc<AtomicU64>,
        elapsed: Arc<AtomicU64>,
    }

    impl Clocks for Hand {
        fn wall_ms(&self) -> u64 {
            self.wall.load(Ordering::Relaxed)
        }

        fn elapsed_ms(&self) -> u64 {
            self.elapsed.load(Ordering::Relaxed)
        }
    }

    impl Hand {
        fn set_wall(&self, ms: u64) {
            self.wall.store(ms, Ordering::Relaxed);
        }

        fn set_elapsed(&self, ms: u64) {
            self.elapsed.store(ms, Ordering::Relaxed);
        }

        /// Real time passes: both clocks advance.
        fn pass(&self, ms: u64) {
            self.wall.fetch_add(ms, Ordering::Relaxed);
            self.elapsed.fetch_add(ms, Ordering::Relaxed);
        }
    }

    const T0: u64 = 1_790_000_000_000;

    #[test]
    fn before_any_reply_the_wall_clock_is_the_estimate() {
        let hand = Hand::default();
        hand.set_wall(T0);
        let clock = RedisClock::new(hand.clone());
        assert_eq!(clock.now_ms(), T0);
        hand.pass(1_500);
        assert_eq!(clock.now_ms(), T0 + 1_500);
    }

    #[test]
    fn a_reply_anchors_the_estimate_at_the_midpoint_of_its_call() {
        let hand = Hand::default();
        hand.set_wall(T0);
        hand.set_elapsed(10_000);
        let mut clock = RedisClock::new(hand.clone());
        // Redis runs 30 s ahead of this node; the call took 20 ms.
        let sent = clock.elapsed_ms();
        hand.pass(20);
        clock.observe(T0 + 30_010, sent, clock.elapsed_ms());
        assert_eq!(clock.now_ms(), T0 + 30_020);
        hand.pass(980);
        assert_eq!(clock.now_ms(), T0 + 31_000);
    }

    #[test]
    fn a_wall_clock_step_back_or_forward_moves_no_estimate() {
        let hand = Hand::default();
        hand.set_wall(T0);
        let mut clock = RedisClock::new(hand.clone());
        clock.observe(T0, 0, 0);
        // NTP or an operator steps the wall clock back an hour: the
        // estimate goes on with real time.
        hand.set_wall(T0 - 3_600_000);
        hand.set_elapsed(2_000);
        assert_eq!(clock.now_ms(), T0 + 2_000);
        // And forward two hours.
        hand.set_wall(T0 + 7_200_000);
        hand.set_elapsed(3_000);
        assert_eq!(clock.now_ms(), T0 + 3_000);
        // A tick due at T0 + 4 s is one second away, whatever the wall says.
        assert_eq!(sleep_until(T0 + 4_000, clock.now_ms()), Duration::from_secs(1));
    }

    #[test]
    fn a_suspend_counts_so_overdue_ticks_are_due_at_once() {
        let hand = Hand::default();
        hand.set_wall(T0);
        let mut clock = RedisClock::new(hand.clone());
        clock.observe(T0, 0, 0);
        let due = T0 + 1_000;
        // Ten minutes suspended: CLOCK_BOOTTIME (and the wall) counted it.
        hand.pass(600_000);
        assert_eq!(clock.now_ms(), T0 + 600_000);
        assert_eq!(sleep_until(due, clock.now_ms()), Duration::ZERO);
    }

    #[test]
    fn no_sleep_is_longer_than_the_bound_which_is_inside_the_on_time_window() {
        assert_eq!(sleep_until(T0 + 3_600_000, T0), MAX_SLEEP);
        assert_eq!(sleep_until(u64::MAX, T0), MAX_SLEEP);
        assert_eq!(sleep_until(T0 + 250, T0), Duration::from_millis(250));
        assert_eq!(sleep_until(T0, T0 + 5), Duration::ZERO);
        assert!(MAX_SLEEP * 4 < ON_TIME);
    }

    #[test]
    fn system_clocks_elapsed_is_not_the_wall_clock_and_advances() {
        let c = SystemClocks;
        let a = c.elapsed_ms();
        // Wall time: the clock under test must advance.
        std::thread::sleep(Duration::from_millis(20));
        let b = c.elapsed_ms();
        assert!(b >= a + 19, "{a} {b}");
        assert!(c.elapsed_ms() < c.wall_ms() / 2, "an uptime, not an epoch time");
    }
}
