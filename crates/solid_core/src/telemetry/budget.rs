//! Which jobs get their whole lifecycle journaled: the first
//! `per_interval` jobs of each flush interval (one second) per source. A
//! sampled job keeps its sample from reservation to acknowledgement, so
//! its journal entries are complete. Every job is counted in the exact
//! per-interval aggregates either way.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

pub struct SampleBudget {
    per_interval: u32,
    used: AtomicU32,
}

impl SampleBudget {
    pub fn new(per_interval: u32) -> Self {
        SampleBudget { per_interval, used: AtomicU32::new(0) }
    }

    /// True when this job is sampled. Once the budget is spent this is a
    /// plain load, so a busy node does not contend on the counter.
    pub fn take(&self) -> bool {
        self.used.load(Relaxed) < self.per_interval && self.used.fetch_add(1, Relaxed) < self.per_interval
    }

    /// A new interval begins (the flusher calls this once per tick).
    pub fn renew(&self) {
        self.used.store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_samples_its_quota_per_interval() {
        let b = SampleBudget::new(3);
        assert_eq!((0..10).filter(|_| b.take()).count(), 3);
        b.renew();
        assert!(b.take());
        assert!(!SampleBudget::new(0).take());
    }
}
