//! The `job.*` entries: the whole lifecycle of each sampled job, from the
//! worker side (reserved to acknowledged, recovered) and the publisher side
//! (enqueued, journaled), and the aggregates every job feeds. Called by the
//! dispatcher around each hub call, by the acker, and by the heartbeat.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use serde_json::{json, Map, Value};

use super::notes::AckNote;
use super::Telemetry;
use crate::claim::ClaimedJob;
use crate::now_ms;
use crate::redis::store::RecoveredJob;

/// `job.recovered` entries journaled per recovery (all are counted).
const RECOVERED_ENTRIES: usize = 1_000;

/// A job as the telemetry sees it: the claim, whether its lifecycle is
/// journaled, and the worker running it (0: none yet).
#[derive(Clone, Copy)]
pub struct Tracked<'a> {
    pub job: &'a ClaimedJob,
    pub sampled: bool,
    pub worker: u32,
}

fn error_location(location: &str) -> Value {
    if location.is_empty() {
        Value::Null
    } else {
        Value::String(location.to_owned())
    }
}

fn duration_us(job: &ClaimedJob) -> Option<u64> {
    job.taken_at.map(|t| t.elapsed().as_micros() as u64)
}

impl Telemetry {
    /// Correlation identifiers of a job. `attempt` only where the backend
    /// counts deliveries (SolidEngine); on Redis it appears with failures.
    fn job_fields(&self, t: Tracked, at_ms: u64) -> Map<String, Value> {
        let j = t.job;
        let mut m = Map::new();
        m.insert("job_id".into(), json!(j.envelope.id));
        m.insert("task".into(), json!(j.envelope.task));
        m.insert("channel".into(), json!(j.channel));
        if j.attempts > 0 {
            m.insert("attempt".into(), json!(j.attempts));
        }
        m.insert("node_id".into(), json!(self.cfg.source));
        if t.worker > 0 {
            m.insert("worker_id".into(), json!(t.worker));
            if let Some(r) = self.workers.ractor_id(t.worker) {
                m.insert("ractor_id".into(), json!(r));
            }
        }
        m.insert("reservation_id".into(), json!(j.token));
        m.insert("at_ms".into(), json!(at_ms));
        m
    }

    fn job_entry(&self, event: &'static str, t: Tracked, extra: impl FnOnce(&mut Map<String, Value>)) {
        if t.sampled {
            let at = now_ms();
            let mut m = self.job_fields(t, at);
            extra(&mut m);
            self.record(event, at, m);
        }
    }

    // --- worker side: called by the dispatcher around each job ---

    /// A worker took `job`. Returns whether its lifecycle is journaled.
    pub fn reserved(&self, job: &ClaimedJob, worker: u32) -> bool {
        self.workers.running(worker, &job.envelope.id);
        if !self.cfg.journal {
            return false;
        }
        self.aggregates.counts.reserved.fetch_add(1, Relaxed);
        let sampled = self.budget.take();
        self.job_entry("job.reserved", Tracked { job, sampled, worker }, |m| {
            m.insert("queued_ms".into(), json!(job.envelope.queued_ms));
            m.insert("created_ms".into(), json!(job.envelope.created_ms));
        });
        sampled
    }

    /// The task is about to run: latency is ready (queued_ms) to now.
    pub fn started(&self, t: Tracked) {
        if !self.cfg.journal {
            return;
        }
        let latency_ms = now_ms().saturating_sub(t.job.envelope.queued_ms);
        self.aggregates.latency.record(latency_ms * 1000);
        self.job_entry("job.started", t, |m| {
            m.insert("latency_ms".into(), json!(latency_ms));
        });
    }

    /// The task returned. `source` is the job's source index in the hub.
    pub fn completed(&self, t: Tracked) {
        self.workers.waiting(t.worker);
        let duration = duration_us(t.job);
        if self.cfg.journal {
            self.aggregates.counts.completed.fetch_add(1, Relaxed);
            if let Some(d) = duration {
                self.aggregates.duration.record(d);
            }
            self.job_entry("job.completed", t, |m| {
                m.insert("duration_ms".into(), json!(duration.map(|d| d as f64 / 1000.0)));
            });
        }
        if t.sampled || self.cfg.deliver {
            let fields = self.job_fields(t, 0);
            self.acks.insert(t.job.source, t.job.token, AckNote { fields, sampled: t.sampled });
        }
    }

    /// The task raised; `failures` is the failure count once recorded.
    pub fn failed(&self, t: Tracked, failures: Option<u32>, error_class: &str, location: &str) {
        if !self.cfg.journal {
            return;
        }
        self.aggregates.counts.failed.fetch_add(1, Relaxed);
        let duration = duration_us(t.job);
        if let Some(d) = duration {
            self.aggregates.duration.record(d);
        }
        self.job_entry("job.failed", t, |m| {
            m.insert("failures".into(), json!(failures));
            if let Some(f) = failures {
                m.entry("attempt").or_insert(json!(f));
            }
            m.insert("error_class".into(), json!(error_class));
            m.insert("error_location".into(), error_location(location));
            m.insert("duration_ms".into(), json!(duration.map(|d| d as f64 / 1000.0)));
        });
    }

    pub fn retry_scheduled(&self, t: Tracked, failures: u32, retry_at_ms: u64) {
        self.workers.waiting(t.worker);
        if !self.cfg.journal {
            return;
        }
        self.aggregates.counts.retried.fetch_add(1, Relaxed);
        self.job_entry("job.retry_scheduled", t, |m| {
            m.insert("failures".into(), json!(failures));
            m.entry("attempt").or_insert(json!(failures));
            m.insert("retry_at_ms".into(), json!(retry_at_ms));
        });
    }

    /// Given up: archived, dropped or quarantined (`reason` is a code).
    pub fn dead(&self, t: Tracked, failures: u32, reason: &str) {
        self.workers.waiting(t.worker);
        if !self.cfg.journal {
            return;
        }
        self.aggregates.counts.dead.fetch_add(1, Relaxed);
        self.job_entry("job.dead", t, |m| {
            m.insert("failures".into(), json!(failures));
            m.insert("reason".into(), json!(reason));
        });
    }

    /// Settled without a write (left claimed for requeue or recovery).
    pub fn abandoned(&self, worker: u32) {
        self.workers.waiting(worker);
    }

    /// Completions of `source` were written: `job.acknowledged` for each
    /// noted one. Called by the acker once per batch; without noted jobs it
    /// costs one atomic load.
    pub fn acknowledged(&self, source: usize, tokens: impl IntoIterator<Item = u64>) {
        let notes = self.acks.take(source, tokens);
        if notes.is_empty() {
            return;
        }
        let at = now_ms();
        for mut note in notes {
            note.fields.insert("at_ms".into(), json!(at));
            if self.cfg.journal {
                self.aggregates.counts.acknowledged.fetch_add(1, Relaxed);
            }
            if self.cfg.deliver {
                self.deliveries.send("job.acknowledged", note.fields.clone());
            }
            if note.sampled {
                self.record("job.acknowledged", at, note.fields);
            }
        }
    }

    /// Completions that will never be written (stale): forget their notes.
    pub fn unacknowledged(&self, source: usize, tokens: impl IntoIterator<Item = u64>) {
        self.acks.take(source, tokens);
    }

    /// This node moved a dead node's claims back to their channels.
    pub fn recovered(&self, dead_node: &str, jobs: &[RecoveredJob]) {
        if jobs.is_empty() {
            return;
        }
        self.aggregates.counts.recovered.fetch_add(jobs.len() as u64, Relaxed);
        let at = now_ms();
        for (i, job) in jobs.iter().enumerate() {
            let mut m = Map::new();
            m.insert("job_id".into(), json!(job.envelope.as_ref().map(|e| e.id.as_str())));
            m.insert("task".into(), json!(job.envelope.as_ref().map(|e| e.task.as_str())));
            m.insert("channel".into(), json!(job.channel));
            m.insert("node_id".into(), json!(self.cfg.source));
            m.insert("dead_node_id".into(), json!(dead_node));
            m.insert("reservation_id".into(), json!(job.token));
            m.insert("at_ms".into(), json!(at));
            if self.cfg.deliver {
                self.deliveries.send("job.recovered", m.clone());
            }
            if i < RECOVERED_ENTRIES {
                self.record("job.recovered", at, m);
            }
        }
    }

    // --- publisher side ---

    /// Jobs of `task` were written to `channel` (`at_ms`: when publication
    /// began). Sampled ones get job.enqueued and job.journaled entries.
    pub fn published(&self, task: &str, channel: &str, ids: &[String], at_ms: u64, due_ms: Option<u64>) {
        if !self.cfg.journal {
            return;
        }
        self.saw_tasks([task]);
        self.aggregates.counts.enqueued.fetch_add(ids.len() as u64, SeqCst);
        self.flusher.published();
        let written = now_ms();
        for id in ids {
            if !self.budget.take() {
                break;
            }
            let mut m = Map::new();
            m.insert("job_id".into(), json!(id));
            m.insert("task".into(), json!(task));
            m.insert("channel".into(), json!(channel));
            m.insert("source".into(), json!(self.cfg.source));
            m.insert("due_ms".into(), json!(due_ms));
            m.insert("at_ms".into(), json!(at_ms));
            self.record("job.enqueued", at_ms, m.clone());
            m.insert("at_ms".into(), json!(written));
            self.record("job.journaled", written, m);
        }
    }
}
