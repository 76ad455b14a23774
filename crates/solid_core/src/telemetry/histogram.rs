//! A lock-free histogram of durations for the per-interval percentiles of
//! `metrics.interval`. Every job is counted (nothing is sampled), so the
//! counts and the maximum are exact; a percentile is reported as the middle
//! of its bucket, within 1/16 (6.25 %) of the true value. Recording is one
//! relaxed atomic add (and a compare for the maximum), so worker Ractors
//! never wait on each other.
//!
//! Beside the interval's buckets, each histogram keeps [`Cumulative`]
//! counts that are never reset: Prometheus histograms (`/metrics`) must be
//! monotonic, which the per-interval percentiles are not, and percentiles
//! cannot be added back into buckets.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets per power of two: the relative resolution is 1/SUB.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Values below SUB have a bucket each; every power of two above has SUB.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    total: Cumulative,
}

/// Upper bounds (inclusive, microseconds) of the cumulative buckets, the
/// `le` of `/metrics` (in seconds there): Prometheus' usual decimal steps,
/// from 100 µs (a no-op task) to 30 minutes (a job waiting long in its
/// channel). They are counted exactly, not derived from the log-linear
/// buckets, whose edges do not fall on decimal values.
pub const CUMULATIVE_BOUNDS_US: [u64; 20] = [
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    300_000_000,
    1_800_000_000,
];

/// Counts since the process started, per bound (the last slot is +Inf), and
/// the sum: one more relaxed add each per record.
pub struct Cumulative {
    counts: [AtomicU64; CUMULATIVE_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Default for Cumulative {
    fn default() -> Self {
        Cumulative { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

impl Cumulative {
    fn record(&self, v: u64) {
        let slot = CUMULATIVE_BOUNDS_US.partition_point(|&bound| bound < v);
        self.counts[slot].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(v, Relaxed);
    }

    /// `{"le_us": [bounds], "counts": [per bucket, +Inf last, not
    /// cumulative], "count", "sum_us"}`. `count` is the sum of the counts
    /// read, so the +Inf bucket of a reader always equals it, even while
    /// workers record.
    pub fn to_json(&self) -> serde_json::Value {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        serde_json::json!({
            "le_us": CUMULATIVE_BOUNDS_US,
            "counts": counts,
            "count": count,
            "sum_us": self.sum_us.load(Relaxed),
        })
    }
}

/// Percentiles of one interval, in the unit recorded (microseconds here).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            total: Cumulative::default(),
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (exp - SUB_BITS)) & (SUB - 1);
    (SUB + u64::from(exp - SUB_BITS) * SUB + sub) as usize
}

/// The middle of a bucket: what a percentile falling in it reports.
fn middle(index: usize) -> u64 {
    let i = index as u64;
    if i < SUB {
        return i;
    }
    let exp = (i - SUB) / SUB + u64::from(SUB_BITS);
    let sub = (i - SUB) % SUB;
    let width = 1u64 << (exp - u64::from(SUB_BITS));
    ((SUB + sub) << (exp - u64::from(SUB_BITS))) + width / 2
}

impl Histogram {
    pub fn record(&self, v: u64) {
        self.buckets[bucket(v)].fetch_add(1, Relaxed);
        if v > self.max.load(Relaxed) {
            self.max.fetch_max(v, Relaxed);
        }
        self.total.record(v);
    }

    /// Every value recorded since the process started (`take` leaves it).
    pub fn total(&self) -> &Cumulative {
        &self.total
    }

    /// Summarizes and resets the interval: the next one starts empty (the
    /// cumulative counts go on). A value
    /// recorded during the reset lands in this interval or the next, never
    /// in both and never lost.
    pub fn take(&self) -> Summary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.swap(0, Relaxed)).collect();
        let max = self.max.swap(0, Relaxed);
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return Summary::default();
        }
        let at = |q: f64| -> u64 {
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return middle(i).min(max);
                }
            }
            max
        };
        Summary { count, p50: at(0.50), p95: at(0.95), p99: at(0.99), max }
    }
}

impl Summary {
    /// `{"p50","p95","p99","max","count"}` in milliseconds, from microseconds.
    pub fn to_json_ms(&self) -> serde_json::Value {
        let ms = |us: u64| us as f64 / 1000.0;
        serde_json::json!({"p50": ms(self.p50), "p95": ms(self.p95), "p99": ms(self.p99), "max": ms(self.max), "count": self.count})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in [0u64, 1, 15, 16, 17, 31, 32, 1000, 123_456, u64::MAX / 2, u64::MAX] {
            let b = bucket(v);
            assert!(b < BUCKETS, "{v}");
            assert!(b >= last, "{v}");
            last = b;
        }
    }

    #[test]
    fn percentiles_are_within_a_sixteenth_and_the_max_is_exact() {
        let h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        let s = h.take();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.max, 10_000);
        for (got, want) in [(s.p50, 5_000.0), (s.p95, 9_500.0), (s.p99, 9_900.0)] {
            assert!((got as f64 - want).abs() / want <= 1.0 / 16.0, "{got} vs {want}");
        }
        assert_eq!(h.take(), Summary::default(), "taking resets");
    }

    #[test]
    fn cumulative_counts_are_inclusive_exact_and_survive_take() {
        let h = Histogram::default();
        for v in [0, 100, 101, 1_000, 2_000_000_000] {
            h.record(v);
        }
        h.take();
        h.record(250);
        let j = h.total().to_json();
        let counts: Vec<u64> = serde_json::from_value(j["counts"].clone()).unwrap();
        assert_eq!(counts.len(), CUMULATIVE_BOUNDS_US.len() + 1);
        // le=100 holds 0 and 100 (inclusive), le=250 holds 101 and 250,
        // le=1000 holds 1000, +Inf the value above every bound.
        assert_eq!(&counts[..4], &[2, 2, 0, 1]);
        assert_eq!(counts[CUMULATIVE_BOUNDS_US.len()], 1);
        assert_eq!(j["count"], 6);
        assert_eq!(j["sum_us"], 2_000_001_451u64);
    }

    #[test]
    fn small_values_are_exact() {
        let h = Histogram::default();
        for v in [3, 3, 3, 7] {
            h.record(v);
        }
        let s = h.take();
        assert_eq!((s.p50, s.p99, s.max, s.count), (3, 7, 7, 4));
    }
}
