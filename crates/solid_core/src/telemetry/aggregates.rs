//! Exact per-interval aggregates: counts, and latency and duration
//! histograms, in atomics (every job is counted, nothing is sampled),
//! closed once per flush into one `metrics.interval` entry.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use super::histogram::Histogram;

#[derive(Default)]
pub(super) struct Counts {
    pub enqueued: AtomicU64,
    pub reserved: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub retried: AtomicU64,
    pub dead: AtomicU64,
    pub acknowledged: AtomicU64,
    pub recovered: AtomicU64,
}

pub(super) struct Aggregates {
    pub counts: Counts,
    /// Ready (queued_ms) to start, in microseconds.
    pub latency: Histogram,
    /// Take to settle, in microseconds.
    pub duration: Histogram,
    interval_started: Mutex<Instant>,
}

impl Default for Aggregates {
    fn default() -> Self {
        Aggregates {
            counts: Counts::default(),
            latency: Histogram::default(),
            duration: Histogram::default(),
            interval_started: Mutex::new(Instant::now()),
        }
    }
}

impl Aggregates {
    /// Closes the interval and starts the next: the `metrics.interval`
    /// fields (its length, counts and percentiles), or None when nothing
    /// happened in it.
    pub fn close(&self) -> Option<Map<String, Value>> {
        let interval_ms = {
            let mut started = self.interval_started.lock();
            let ms = started.elapsed().as_millis() as u64;
            *started = Instant::now();
            ms
        };
        let c = &self.counts;
        let take = |a: &AtomicU64| a.swap(0, Relaxed);
        let counts = [
            ("enqueued", take(&c.enqueued)),
            ("reserved", take(&c.reserved)),
            ("completed", take(&c.completed)),
            ("failed", take(&c.failed)),
            ("retried", take(&c.retried)),
            ("dead", take(&c.dead)),
            ("acknowledged", take(&c.acknowledged)),
            ("recovered", take(&c.recovered)),
        ];
        let latency = self.latency.take();
        let duration = self.duration.take();
        if counts.iter().all(|(_, n)| *n == 0) && latency.count == 0 && duration.count == 0 {
            return None;
        }
        let mut m = Map::new();
        m.insert("interval_ms".into(), json!(interval_ms));
        for (name, n) in counts {
            m.insert(name.into(), json!(n));
        }
        m.insert("latency_ms".into(), latency.to_json_ms());
        m.insert("duration_ms".into(), duration.to_json_ms());
        Some(m)
    }

    /// `{"latency": ..., "duration": ...}`: the cumulative buckets since the
    /// process started (see `histogram::Cumulative::to_json`).
    pub fn cumulative_json(&self) -> Value {
        json!({"latency": self.latency.total().to_json(), "duration": self.duration.total().to_json()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_reports_what_happened_in_it_and_restarts() {
        let a = Aggregates::default();
        assert!(a.close().is_none(), "nothing happened");
        a.counts.completed.fetch_add(3, Relaxed);
        a.duration.record(2_000);
        let m = a.close().expect("activity");
        assert_eq!(m["completed"], 3);
        assert_eq!(m["reserved"], 0);
        assert_eq!(m["duration_ms"]["count"], 1);
        assert!(a.close().is_none(), "the counters restarted");
    }
}
