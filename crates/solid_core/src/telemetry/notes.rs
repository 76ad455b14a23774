//! Per-job notes: what `job.acknowledged` needs of a completed job once its
//! completion is written, since the acker knows only tokens. Kept for
//! sampled jobs, or for every job while delivering to an instrumenter;
//! otherwise the acker's check is one atomic load and no lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use parking_lot::Mutex;
use serde_json::{Map, Value};

pub(super) struct AckNote {
    pub fields: Map<String, Value>,
    pub sampled: bool,
}

/// Notes keyed by (source index in the hub, claim token).
#[derive(Default)]
pub(super) struct AckNotes {
    pending: Mutex<HashMap<(usize, u64), AckNote>>,
    len: AtomicUsize,
}

impl AckNotes {
    pub fn insert(&self, source: usize, token: u64, note: AckNote) {
        self.pending.lock().insert((source, token), note);
        self.len.fetch_add(1, Relaxed);
    }

    /// Removes and returns the notes of `tokens` of `source` (one lock per
    /// batch; none while no job is noted).
    pub fn take(&self, source: usize, tokens: impl IntoIterator<Item = u64>) -> Vec<AckNote> {
        if self.len.load(Relaxed) == 0 {
            return Vec::new();
        }
        let mut pending = self.pending.lock();
        let taken: Vec<AckNote> = tokens.into_iter().filter_map(|token| pending.remove(&(source, token))).collect();
        self.len.fetch_sub(taken.len(), Relaxed);
        taken
    }

    /// Notes waiting for their acknowledgement.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }
}
