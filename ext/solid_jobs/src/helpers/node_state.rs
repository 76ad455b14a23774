//! A worker node's telemetry and paused flag, owned by
//! `Native::Dispatcher`, and the worker identity of the calling thread.
//!
//! Workers are identified by the native thread they run on: each worker
//! Ractor (or thread) registers once, and every later call from that thread
//! is attributed to it, so the per-job methods need no extra argument.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use solid_core::source::JobSource;
use solid_core::telemetry::{Telemetry, TelemetryConfig};

thread_local! {
    static WORKER: Cell<u32> = const { Cell::new(0) };
}

/// The worker registered on the calling thread (0: not a worker).
pub fn current_worker() -> u32 {
    WORKER.with(|w| w.get())
}

/// Attributes every later call from this thread to `worker`.
pub fn register_current_worker(worker: u32) {
    WORKER.with(|w| w.set(worker));
}

/// A node's telemetry and its paused flag.
pub struct NodeState {
    pub telemetry: Arc<Telemetry>,
    paused: AtomicBool,
}

impl NodeState {
    pub fn new(cfg: TelemetryConfig) -> Self {
        NodeState { telemetry: Arc::new(Telemetry::new(cfg)), paused: AtomicBool::new(false) }
    }

    /// Hands the telemetry to every source; the first Redis source writes it.
    pub fn attach(&self, sources: &[Box<dyn JobSource>]) {
        let writer = sources.iter().position(|s| s.name() == "redis");
        for (i, s) in sources.iter().enumerate() {
            s.attach(i, self.telemetry.clone(), Some(i) == writer);
        }
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
}
