//! A lock-free histogram of durations for the per-interval percentiles of
//! `metrics.interval`. Every job is counted (nothing is sampled), so the
//! counts and the maximum are exact; a percentile is reported as the middle
//! of its bucket, within 1/16 (6.25 %) of the true value. Recording is one
//! relaxed atomic add (and a compare for the maximum), so worker Ractors
//! never wait on each other.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets per power of two: the relative resolution is 1/SUB.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Values below SUB have a bucket each; every power of two above has SUB.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
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
        Histogram { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max: AtomicU64::new(0) }
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
    }

    /// Summarizes and resets: the next interval starts empty. A value
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
    fn small_values_are_exact() {
        let h = Histogram::default();
        for v in [3, 3, 3, 7] {
            h.record(v);
        }
        let s = h.take();
        assert_eq!((s.p50, s.p99, s.max, s.count), (3, 7, 7, 4));
    }
}
