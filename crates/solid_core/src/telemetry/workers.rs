//! What each worker of a node is doing, for `ractor.observed`: one slot per
//! worker id, written only by that worker (and read by the observer every
//! few seconds), so the per-job cost is an uncontended lock and a copy of
//! the job id into a reused buffer. Nothing is estimated: a slot says what
//! its worker last reported.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;
use serde_json::json;

/// Worker ids a node can report (1..MAX_WORKERS); matches the largest
/// `concurrency` the configuration accepts.
pub const MAX_WORKERS: usize = 1024;

const UNREGISTERED: u8 = 0;
const WAITING: u8 = 1;
const RUNNING: u8 = 2;
const STOPPED: u8 = 3;

#[derive(Default)]
struct Slot {
    state: AtomicU8,
    ractor_id: AtomicU64,
    /// The current job's id (empty while waiting); the buffer is reused.
    job: Mutex<String>,
}

pub struct WorkerSlots {
    slots: Box<[Slot]>,
}

impl Default for WorkerSlots {
    fn default() -> Self {
        WorkerSlots { slots: (0..=MAX_WORKERS).map(|_| Slot::default()).collect() }
    }
}

impl WorkerSlots {
    fn slot(&self, worker: u32) -> Option<&Slot> {
        self.slots.get(worker as usize).filter(|_| worker > 0)
    }

    pub fn register(&self, worker: u32, ractor_id: u64) {
        if let Some(s) = self.slot(worker) {
            s.ractor_id.store(ractor_id, Ordering::Relaxed);
            s.state.store(WAITING, Ordering::Release);
        }
    }

    pub fn ractor_id(&self, worker: u32) -> Option<u64> {
        self.slot(worker).map(|s| s.ractor_id.load(Ordering::Relaxed)).filter(|&id| id > 0)
    }

    pub fn running(&self, worker: u32, job_id: &str) {
        if let Some(s) = self.slot(worker) {
            let mut job = s.job.lock();
            job.clear();
            job.push_str(job_id);
            s.state.store(RUNNING, Ordering::Release);
        }
    }

    pub fn waiting(&self, worker: u32) {
        if let Some(s) = self.slot(worker) {
            s.job.lock().clear();
            s.state.store(WAITING, Ordering::Release);
        }
    }

    pub fn stopped(&self, worker: u32) {
        if let Some(s) = self.slot(worker) {
            s.job.lock().clear();
            s.state.store(STOPPED, Ordering::Release);
        }
    }

    /// One `ractor.observed` object per registered worker. A worker that
    /// has not left its loop while the node stops is `stopping`.
    pub fn observe(&self, node_stopping: bool, at_ms: u64) -> Vec<serde_json::Value> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(worker, s)| {
                let state = match (s.state.load(Ordering::Acquire), node_stopping) {
                    (UNREGISTERED, _) => return None,
                    (STOPPED, _) => "stopped",
                    (_, true) => "stopping",
                    (RUNNING, false) => "running",
                    _ => "waiting",
                };
                let job = s.job.lock();
                let job_ids: Vec<&str> = if job.is_empty() { vec![] } else { vec![job.as_str()] };
                Some(json!({
                    "ractor_id": s.ractor_id.load(Ordering::Relaxed),
                    "worker_id": worker,
                    "state": state,
                    "job_ids": job_ids,
                    "at_ms": at_ms,
                }))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_report_what_their_workers_said() {
        let w = WorkerSlots::default();
        w.register(1, 7);
        w.register(2, 8);
        w.running(1, "job-a");
        let seen = w.observe(false, 5);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0]["state"], "running");
        assert_eq!(seen[0]["job_ids"], json!(["job-a"]));
        assert_eq!(seen[1]["state"], "waiting");
        w.waiting(1);
        w.stopped(2);
        let seen = w.observe(true, 6);
        assert_eq!(seen[0]["state"], "stopping");
        assert_eq!(seen[0]["job_ids"], json!([]));
        assert_eq!(seen[1]["state"], "stopped");
        w.running(0, "ignored");
        w.running(MAX_WORKERS as u32 + 1, "ignored");
    }
}
