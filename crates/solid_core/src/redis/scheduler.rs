//! The recurring scheduler of a worker node: one thread, started only when
//! the node runs schedules (a node without them pays nothing), proposing
//! each schedule's ticks to `recurring.lua` as they fall due. Every node
//! runs it; the script alone decides, so one node or twenty enqueue the
//! same jobs (decision 37).
//!
//! Clocks: the node estimates Redis' clock from each reply (its own clock
//! plus the offset measured around the call), so a node whose clock is
//! skewed wakes at the right moment after its first proposal; the script
//! compares ticks with Redis' clock only, so a skewed node can neither
//! enqueue early nor twice. Waits are on the monotonic clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::log::{log_fields, Level, Throttled, Value};
use crate::now_ms;
use crate::recurring::RecurringSchedule;
use crate::redis::connection::{Connector, Reconnecting};
use crate::redis::doorbell::Bell;
use crate::redis::store::{Store, TickOutcome, TickProposal};

/// A tick decided later than this after its time was missed: the window
/// covers a node's retries through a short outage and its clock estimate's
/// error, while a tick whose nodes were all down is recognised as missed.
pub const ON_TIME: Duration = Duration::from_secs(60);
/// The least time a schedule's state outlives its next tick: how long a
/// removed schedule's state lingers, and how long after a missed tick a
/// restarted node still runs it under `missed: :latest`.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The longest sleep: the thread re-reads the clock at least this often,
/// so a wall clock stepped while it slept is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Retry delays after a failed proposal (Redis down or refusing): doubling
/// from the first to the last, and never shorter than the connection's own
/// reconnect backoff.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

struct Slot {
    schedule: RecurringSchedule,
    /// The last tick known decided (by any node).
    decided: Option<u64>,
    due: Instant,
}

pub struct Scheduler<'a> {
    store: &'a Store,
    conn: Reconnecting,
    slots: Vec<Slot>,
    /// Redis' clock minus this node's, in ms, as last measured.
    offset_ms: i64,
    failures: u32,
    warning: Throttled,
}

impl<'a> Scheduler<'a> {
    pub fn new(store: &'a Store, connector: Connector, schedules: Vec<RecurringSchedule>) -> Self {
        let now = Instant::now();
        let slots = schedules.into_iter().map(|schedule| Slot { schedule, decided: None, due: now }).collect();
        Scheduler {
            store,
            conn: Reconnecting::new(connector),
            slots,
            offset_ms: 0,
            failures: 0,
            warning: Throttled::default(),
        }
    }

    /// Proposes due ticks until `closed` is set; `bell` rings to end a
    /// sleep early (shutdown). A proposal is one bounded call (the
    /// connection's timeouts), so a stop waits at most that long.
    pub fn run(mut self, closed: &AtomicBool, bell: &Bell) {
        while !closed.load(Ordering::Acquire) {
            let seen = bell.epoch();
            let now = Instant::now();
            for i in 0..self.slots.len() {
                if self.slots[i].due <= now && !closed.load(Ordering::Acquire) {
                    self.fire(i);
                }
            }
            let wake = self.slots.iter().map(|s| s.due).min().unwrap_or(now + MAX_SLEEP);
            let wait = wake.saturating_duration_since(Instant::now()).min(MAX_SLEEP);
            bell.wait_past(seen, wait);
        }
    }

    fn redis_now_ms(&self) -> u64 {
        (now_ms() as i64 + self.offset_ms).max(0) as u64
    }

    /// When Redis' clock reaches `ms`, on the monotonic clock.
    fn at(&self, ms: Option<u64>) -> Instant {
        match ms {
            Some(ms) => Instant::now() + Duration::from_millis(ms.saturating_sub(self.redis_now_ms())),
            None => Instant::now() + MAX_SLEEP,
        }
    }

    fn fire(&mut self, i: usize) {
        let est = self.redis_now_ms();
        let slot = &self.slots[i];
        let ticks = slot.schedule.ticks.clone();
        let Some(tick) = ticks.latest_at_or_before(est) else {
            self.slots[i].due = self.at(ticks.next_after(est));
            return;
        };
        if slot.decided.is_some_and(|d| tick <= d) {
            let after = slot.decided.unwrap_or(tick).max(tick);
            self.slots[i].due = self.at(ticks.next_after(after));
            return;
        }
        // The template was validated at start: building cannot fail.
        let envelope = match slot.schedule.envelope(tick, est) {
            Ok(e) => e,
            Err(e) => {
                self.warning.log("ERROR", &format!("schedule {}: {e}", slot.schedule.name));
                self.slots[i].due = Instant::now() + MAX_SLEEP;
                return;
            }
        };
        let name = slot.schedule.name.clone();
        let proposal = TickProposal {
            name: &name,
            tick_ms: tick,
            next_ms: ticks.next_after(tick),
            missed: slot.schedule.missed,
            on_time_ms: ON_TIME.as_millis() as u64,
            retention_ms: RETENTION.as_millis() as u64,
            envelope: &envelope,
        };
        let store = self.store;
        let before = now_ms();
        let decided = self.conn.run(|c| store.enqueue_tick(c, &proposal));
        let after = now_ms();
        match decided {
            Ok(d) => {
                self.failures = 0;
                self.offset_ms = d.now_ms as i64 - ((before + after) / 2) as i64;
                if d.outcome == TickOutcome::Early {
                    // Told how far ahead of Redis this node proposed. With
                    // the clock estimate corrected, an earlier tick may be
                    // the one due now (this node's clock runs fast):
                    // propose it at once; otherwise wait out the difference
                    // on the monotonic clock.
                    let corrected = ticks.latest_at_or_before(self.redis_now_ms());
                    self.slots[i].due = if corrected.is_some_and(|t| t < tick) {
                        Instant::now()
                    } else {
                        Instant::now() + Duration::from_millis(tick.saturating_sub(d.now_ms).max(1))
                    };
                    return;
                }
                let last = d.last_ms.unwrap_or(tick).max(tick);
                self.slots[i].decided = Some(last);
                self.slots[i].due = self.at(ticks.next_after(last));
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
                if !e.is_connection() {
                    self.warning.log("WARN", &format!("schedule {name}: proposing tick {tick} failed: {e}; retrying"));
                }
                let backoff = RETRY_FIRST.saturating_mul(1 << self.failures.min(6)).min(RETRY_MAX);
                self.failures += 1;
                self.slots[i].due = Instant::now() + backoff.max(self.conn.backoff_remaining());
            }
        }
    }
}
