//! The in-memory side of the telemetry journal: entries recorded by any
//! thread (worker Ractors, the acker, the heartbeat) into a bounded
//! lock-free queue, and written to the `telemetry` stream in batches by one
//! flusher (a node's heartbeat thread, or a publisher's flush thread), so no
//! entry costs a round trip of its own.
//!
//! Each entry takes the next number of its source's sequence when it is
//! recorded. An entry that finds the queue full is dropped and counted, and
//! its number is never written: a reader sees the hole in the sequence and
//! knows exactly how many entries it is missing.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use redis::Pipeline;

/// Most entries written per flush; the rest wait for the next one.
pub const MAX_FLUSH: usize = 5_000;

#[derive(Debug, Clone)]
pub struct Entry {
    pub seq: u64,
    pub event: Cow<'static, str>,
    pub at_ms: u64,
    /// A JSON object: identifiers, timestamps, durations. Never arguments.
    pub data: String,
}

pub struct Journal {
    next_seq: AtomicU64,
    tx: Sender<Entry>,
    rx: Receiver<Entry>,
    dropped: AtomicU64,
    /// A batch whose write failed: written first next time. While it waits,
    /// nothing else is taken, so memory stays bounded by two batches.
    unsent: Mutex<Vec<Entry>>,
}

impl Journal {
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = bounded(capacity.max(1));
        Journal { next_seq: AtomicU64::new(1), tx, rx, dropped: AtomicU64::new(0), unsent: Mutex::new(Vec::new()) }
    }

    pub fn record(&self, event: impl Into<Cow<'static, str>>, at_ms: u64, data: String) {
        let seq = self.next_seq.fetch_add(1, Relaxed);
        if self.tx.try_send(Entry { seq, event: event.into(), at_ms, data }).is_err() {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    /// Entries dropped because the buffer was full (each left a hole).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// The last sequence number handed out.
    pub fn last_seq(&self) -> u64 {
        self.next_seq.load(Relaxed) - 1
    }

    /// Entries waiting to be written.
    pub fn pending(&self) -> usize {
        self.rx.len() + self.unsent.lock().len()
    }

    /// The next batch to write, in sequence order.
    pub fn take_batch(&self) -> Vec<Entry> {
        let mut unsent = self.unsent.lock();
        if !unsent.is_empty() {
            return std::mem::take(&mut *unsent);
        }
        let mut batch: Vec<Entry> = self.rx.try_iter().take(MAX_FLUSH).collect();
        // Threads record concurrently, so the queue may hold neighbours
        // swapped; the stream gets them in order.
        batch.sort_by_key(|e| e.seq);
        batch
    }

    /// A batch that could not be written goes back to be written first.
    pub fn put_back(&self, batch: Vec<Entry>) {
        *self.unsent.lock() = batch;
    }
}

/// Appends `entries` of `source` to the stream `key` (capped at about
/// `max_len` entries) on `pipe`.
pub fn add_to(pipe: &mut Pipeline, key: &str, max_len: u64, source: &str, entries: &[Entry]) {
    for e in entries {
        pipe.cmd("XADD")
            .arg(key)
            .arg("MAXLEN")
            .arg("~")
            .arg(max_len)
            .arg("*")
            .arg("source")
            .arg(source)
            .arg("seq")
            .arg(e.seq)
            .arg("event")
            .arg(e.event.as_ref())
            .arg("at_ms")
            .arg(e.at_ms)
            .arg("data")
            .arg(&e.data)
            .ignore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_drops_and_leaves_a_hole_in_the_sequence() {
        let j = Journal::new(2);
        for i in 0..4 {
            j.record("e", i, "{}".into());
        }
        assert_eq!(j.dropped(), 2);
        let batch = j.take_batch();
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        j.record("e", 5, "{}".into());
        assert_eq!(j.take_batch()[0].seq, 5, "3 and 4 were dropped: the reader sees the gap");
        assert_eq!(j.last_seq(), 5);
    }

    #[test]
    fn an_unsent_batch_is_written_first_and_alone() {
        let j = Journal::new(10);
        j.record("a", 1, "{}".into());
        let batch = j.take_batch();
        j.record("b", 2, "{}".into());
        j.put_back(batch);
        assert_eq!(j.take_batch()[0].event, "a");
        assert_eq!(j.take_batch()[0].event, "b");
    }
}
