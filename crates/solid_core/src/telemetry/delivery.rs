//! Rust-side events (`job.acknowledged`, `job.recovered`) queued for the
//! Ruby instrumenter, which the node's monitor thread hands them to. The
//! queue is bounded: beyond it events are counted and dropped rather than
//! held without bound.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_channel::{bounded, Receiver, Sender};
use serde_json::{Map, Value};

/// Events waiting for the instrumenter, at most.
pub(super) const DELIVERY_CAPACITY: usize = 10_000;

/// An event that happened on a Rust thread, for the Ruby instrumenter.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub name: &'static str,
    pub payload: Map<String, Value>,
}

pub(super) struct Deliveries {
    tx: Sender<Delivery>,
    rx: Receiver<Delivery>,
    undelivered: AtomicU64,
}

impl Deliveries {
    pub fn new() -> Self {
        let (tx, rx) = bounded(DELIVERY_CAPACITY);
        Deliveries { tx, rx, undelivered: AtomicU64::new(0) }
    }

    pub fn send(&self, name: &'static str, payload: Map<String, Value>) {
        if self.tx.try_send(Delivery { name, payload }).is_err() {
            self.undelivered.fetch_add(1, Relaxed);
        }
    }

    /// Events dropped because the queue was full.
    pub fn undelivered(&self) -> u64 {
        self.undelivered.load(Relaxed)
    }

    /// Everything waiting now (a full queue at most).
    pub fn take(&self) -> Vec<Delivery> {
        self.rx.try_iter().take(DELIVERY_CAPACITY).collect()
    }

    pub fn receiver(&self) -> &Receiver<Delivery> {
        &self.rx
    }
}
