//! Telemetry of one worker node or publisher process, collected without a
//! Redis round trip or a shared lock per job:
//!
//! - exact per-interval aggregates (counts, latency and duration
//!   percentiles) in atomics, journaled once per flush as `metrics.interval`
//!   ([`aggregates`]);
//! - the whole lifecycle of a sample of jobs (the first
//!   `sample_per_interval` per second: [`budget`]) as `job.*` entries
//!   ([`jobs`], with the [`notes`] the acknowledgement needs);
//! - what each worker is doing ([`workers`]) and the node's latest
//!   observations, written every observation interval;
//! - control requests ([`control`]) and Rust-side events
//!   (`job.acknowledged`, `job.recovered`: [`delivery`]) handed to the Ruby
//!   side for the instrumenter.
//!
//! Entries never carry job arguments, envelopes, error messages or log
//! text: identifiers, timestamps, durations and error classes only.
//! One flusher writes everything in one pipelined call per tick
//! ([`outbox`]): a node's journal-writing Redis source on its heartbeat
//! thread, a publisher's own flush thread ([`flusher`]).
//!
//! [`Telemetry`] is the composite callers use: each part keeps its own
//! state, and the methods here and in [`jobs`] combine them.

mod aggregates;
pub mod budget;
mod control;
mod delivery;
pub mod flusher;
pub mod histogram;
mod jobs;
pub mod journal;
mod notes;
mod outbox;
pub mod workers;

use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;
use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::now_ms;
use crate::redis::keyspace::Keyspace;

use aggregates::Aggregates;
use budget::SampleBudget;
use control::Mailbox;
use delivery::Deliveries;
pub use delivery::Delivery;
use flusher::FlusherWake;
pub use jobs::Tracked;
use journal::Journal;
use notes::AckNotes;
use outbox::Outbox;
use workers::WorkerSlots;

/// How often entries are written and aggregates closed (one interval).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    pub namespace: String,
    /// The journal source: a node id, or `publisher:<host>:<pid>:<id>`.
    pub source: String,
    /// Write to Redis: the journal (entries, aggregates, task names) and
    /// the observations hash. Control and instrumenter events work either
    /// way.
    pub journal: bool,
    /// Jobs per interval whose whole lifecycle is journaled.
    pub sample_per_interval: u32,
    /// Entries held in memory waiting for a flush; more are dropped.
    pub buffer: usize,
    /// Approximate cap of the journal stream (XADD MAXLEN ~).
    pub journal_size: u64,
    /// Queue Rust-side events for a (non-default) Ruby instrumenter.
    pub deliver: bool,
    /// Lifetime of the observations hash (3x the observation interval).
    pub observation_ttl: Duration,
}

pub struct Telemetry {
    cfg: TelemetryConfig,
    journal: Journal,
    budget: SampleBudget,
    aggregates: Aggregates,
    pub workers: WorkerSlots,
    /// Completed jobs whose acknowledgement is reported.
    acks: AckNotes,
    deliveries: Deliveries,
    mailbox: Mailbox,
    outbox: Outbox,
    /// A publisher's flush thread sleeps while nothing happens.
    flusher: FlusherWake,
    /// The latest observation in short, with when it was made: what a
    /// SolidEngine announcement carries (`summary`).
    latest: parking_lot::Mutex<Option<(u64, Value)>>,
}

impl Telemetry {
    pub fn new(cfg: TelemetryConfig) -> Self {
        Telemetry {
            journal: Journal::new(cfg.buffer),
            budget: SampleBudget::new(if cfg.journal { cfg.sample_per_interval } else { 0 }),
            aggregates: Aggregates::default(),
            workers: WorkerSlots::default(),
            acks: AckNotes::default(),
            deliveries: Deliveries::new(),
            mailbox: Mailbox::new(),
            outbox: Outbox::new(
                Keyspace::new(&cfg.namespace),
                cfg.source.clone(),
                cfg.journal_size,
                cfg.observation_ttl,
            ),
            flusher: FlusherWake::new(),
            latest: parking_lot::Mutex::new(None),
            cfg,
        }
    }

    pub fn source(&self) -> &str {
        &self.cfg.source
    }

    pub fn journal_enabled(&self) -> bool {
        self.cfg.journal
    }

    fn record(&self, event: &'static str, at_ms: u64, data: Map<String, Value>) {
        if self.cfg.journal {
            self.journal.record(event, at_ms, Value::Object(data).to_string());
        }
    }

    /// The latest observation in short (see `summarize`), with `age_ms`
    /// since it was made: a reader compares ages, never clocks. None before
    /// the first observation, or with the journal off.
    pub fn summary(&self) -> Option<Value> {
        let (at, mut summary) = self.latest.lock().clone()?;
        summary["age_ms"] = json!(now_ms().saturating_sub(at));
        Some(summary)
    }

    /// The fetcher claimed jobs of these tasks (one lock per batch).
    pub fn saw_tasks<'a>(&self, tasks: impl IntoIterator<Item = &'a str>) {
        if self.cfg.journal {
            self.outbox.saw_tasks(tasks);
        }
    }

    // --- observations and control ---

    /// The latest observations, written to `observations:<node>` at the
    /// next flush and journaled as process/ractor/redis.observed entries.
    pub fn observe(&self, node: &Value, process: &Value, ractors: &[Value], redis: &Value) {
        if !self.cfg.journal {
            return;
        }
        let at = now_ms();
        let source = self.cfg.source.as_str();
        let with_node = |v: &Value| {
            let mut m = v.as_object().cloned().unwrap_or_default();
            m.insert("node_id".into(), json!(source));
            m
        };
        self.record("process.observed", at, with_node(process));
        for r in ractors {
            self.record("ractor.observed", at, with_node(r));
        }
        self.record("redis.observed", at, with_node(redis));
        *self.latest.lock() = Some((at, summarize(node, process, ractors)));
        let mut node = node.as_object().cloned().unwrap_or_default();
        node.insert("at_ms".into(), json!(at));
        node.insert("telemetry".into(), self.stats_json());
        let fields = vec![
            ("node".to_owned(), Value::Object(node).to_string()),
            ("process".to_owned(), process.to_string()),
            ("ractors".to_owned(), Value::Array(ractors.to_vec()).to_string()),
            ("redis".to_owned(), redis.to_string()),
            // Written with the observations, so they expire with them: a
            // gone node's series end, as a restarted process's would.
            ("histograms".to_owned(), self.aggregates.cumulative_json().to_string()),
            ("at_ms".to_owned(), at.to_string()),
        ];
        self.outbox.observation(fields);
    }

    /// Journals a node-level event (a control request acted on...).
    pub fn note(&self, event: &'static str, data: &Value) {
        let mut m = data.as_object().cloned().unwrap_or_default();
        m.insert("node_id".into(), json!(self.cfg.source));
        self.record(event, now_ms(), m);
    }

    pub fn write_backtraces(&self, text: String, ttl_ms: u64) {
        self.outbox.backtraces(text, ttl_ms);
    }

    /// A control request taken from the node's mailbox by its heartbeat.
    pub fn request(&self, request: String) {
        self.mailbox.request(request);
    }

    /// Waits up to `timeout` for control requests or Rust-side events and
    /// returns whatever is waiting (see `control::Mailbox::notices`).
    pub fn notices(&self, timeout: Duration, interrupted: &Interrupt) -> (Vec<String>, Vec<Delivery>) {
        self.mailbox.notices(&self.deliveries, timeout, interrupted)
    }

    /// Ends a `notices` wait now (the monitor is stopping).
    pub fn wake_monitor(&self) {
        self.mailbox.wake_monitor();
    }

    /// `{"seq","dropped","pending","undelivered"}` for the node observation.
    pub fn stats_json(&self) -> Value {
        json!({
            "seq": self.journal.last_seq(),
            "dropped": self.journal.dropped(),
            "pending": self.journal.pending(),
            "undelivered": self.deliveries.undelivered(),
            "sample_per_interval": self.cfg.sample_per_interval,
        })
    }

    // --- the flusher ---

    /// Closes the interval: journals `metrics.interval` (when anything
    /// happened) and renews the sample budget. Once per FLUSH_INTERVAL
    /// while jobs flow; an idle process ticks with its heartbeat only.
    /// Returns whether the interval saw any activity.
    pub fn tick(&self) -> bool {
        self.budget.renew();
        if !self.cfg.journal {
            return false;
        }
        let Some(mut m) = self.aggregates.close() else { return false };
        m.insert("dropped_total".into(), json!(self.journal.dropped()));
        self.record("metrics.interval", now_ms(), m);
        true
    }

    /// A publisher's flusher found nothing to do: it may sleep until the
    /// next publication (see `wait_for_activity`). Returns false when
    /// activity arrived meanwhile (then it must not sleep).
    pub fn idle_until_activity(&self) -> bool {
        self.flusher.going_idle();
        if self.aggregates.counts.enqueued.load(Ordering::SeqCst) > 0 || self.has_pending() {
            self.flusher.stay_awake();
            return false;
        }
        true
    }

    /// Blocks while idle; false once the telemetry is gone (the thread ends).
    pub fn wait_for_activity(wake: &Receiver<()>) -> bool {
        wake.recv().is_ok()
    }

    pub fn flusher_wake(&self) -> Receiver<()> {
        self.flusher.receiver()
    }

    /// True when a flush has something to write.
    pub fn has_pending(&self) -> bool {
        (self.cfg.journal && self.journal.pending() > 0) || !self.outbox.is_empty()
    }

    /// Writes waiting entries, observations, backtraces and task names in
    /// one pipelined call. On failure everything is kept for the next try
    /// (bounded: see [`journal`]).
    pub fn flush(&self, conn: &mut redis::Connection) -> Result<()> {
        self.outbox.flush(conn, self.cfg.journal.then_some(&self.journal))
    }
}

/// An observation in a few hundred bytes, whatever the concurrency: the
/// node's state, its workers counted by state (not listed), and the process
/// figures a dashboard shows. It travels in a SolidEngine `NODE`
/// announcement, whose description is bounded (4 KiB).
fn summarize(node: &Value, process: &Value, ractors: &[Value]) -> Value {
    let mut workers = Map::new();
    for r in ractors {
        let state = r.get("state").and_then(Value::as_str).unwrap_or("unknown");
        let n = workers.entry(state.to_owned()).or_insert(json!(0));
        *n = json!(n.as_u64().unwrap_or(0) + 1);
    }
    let process: Map<String, Value> = ["state", "rss_bytes", "cpu_seconds", "gc_count", "gc_time_ms"]
        .iter()
        .filter_map(|k| process.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    json!({
        "state": node.get("state").cloned().unwrap_or(Value::Null),
        "workers": workers,
        "process": process,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::claim::ClaimedJob;
    use crate::envelope::Envelope;

    pub fn config(journal: bool, deliver: bool) -> TelemetryConfig {
        TelemetryConfig {
            namespace: "t".into(),
            source: "node-1".into(),
            journal,
            sample_per_interval: 2,
            buffer: 100,
            journal_size: 1000,
            deliver,
            observation_ttl: Duration::from_secs(15),
        }
    }

    fn job(token: u64) -> ClaimedJob {
        let envelope = Envelope::build("Task", json!(["secret-argument"]), "default", 3, 1, 1).unwrap();
        ClaimedJob {
            token,
            channel: "default".into(),
            priority: crate::priority::DEFAULT,
            raw: envelope.encode(),
            envelope,
            claimed_ms: 1,
            taken_at: Some(Instant::now()),
            source: 0,
            attempts: 0,
        }
    }

    /// What a SolidEngine announcement carries: workers counted by state
    /// (any concurrency fits), the process figures, an age, no clock.
    #[test]
    fn the_summary_counts_workers_and_keeps_the_process_figures() {
        let t = Telemetry::new(config(true, false));
        assert!(t.summary().is_none(), "nothing observed yet");
        let ractors: Vec<Value> =
            (0..64).map(|i| json!({"state": if i < 3 { "running" } else { "waiting" }})).collect();
        let process = json!({"state": "ok", "rss_bytes": 1234, "cpu_seconds": 1.5, "gc_count": 7, "argv": "x"});
        t.observe(&json!({"state": "running", "hostname": "h"}), &process, &ractors, &json!({}));
        let summary = t.summary().unwrap();
        assert_eq!(summary["state"], "running");
        assert_eq!(summary["workers"], json!({"running": 3, "waiting": 61}));
        assert_eq!(summary["process"], json!({"state": "ok", "rss_bytes": 1234, "cpu_seconds": 1.5, "gc_count": 7}));
        assert!(summary["age_ms"].as_u64().unwrap() < 1_000);
        assert!(summary.to_string().len() < 400, "{summary}");
        let off = Telemetry::new(config(false, false));
        off.observe(&json!({}), &process, &ractors, &json!({}));
        assert!(off.summary().is_none(), "telemetry off: nothing to announce");
    }

    #[test]
    fn sampled_jobs_are_journaled_whole_and_every_job_is_counted() {
        let t = Telemetry::new(config(true, false));
        t.workers.register(1, 9);
        let jobs: Vec<ClaimedJob> = (1..=5).map(job).collect();
        for j in &jobs {
            let sampled = t.reserved(j, 1);
            let tr = Tracked { job: j, sampled, worker: 1 };
            t.started(tr);
            t.completed(tr);
        }
        t.acknowledged(0, 1..=5);
        t.tick();
        let batch = t.journal.take_batch();
        let events: Vec<&str> = batch.iter().map(|e| e.event.as_ref()).collect();
        assert_eq!(events.iter().filter(|e| **e == "job.reserved").count(), 2, "budget of 2: {events:?}");
        assert_eq!(events.iter().filter(|e| **e == "job.acknowledged").count(), 2);
        let interval: Value = serde_json::from_str(&batch.last().unwrap().data).unwrap();
        assert_eq!(batch.last().unwrap().event, "metrics.interval");
        assert_eq!(interval["completed"], 5);
        assert_eq!(interval["acknowledged"], 2);
        assert_eq!(interval["duration_ms"]["count"], 5);
        let reserved: Value = serde_json::from_str(&batch[0].data).unwrap();
        assert_eq!(reserved["ractor_id"], 9);
        assert_eq!(reserved["reservation_id"], 1);
        assert!(batch.iter().all(|e| !e.data.contains("secret-argument")), "no arguments in the journal");
        assert_eq!(t.acks.len(), 0);
    }

    #[test]
    fn delivering_queues_every_acknowledgement_for_the_instrumenter() {
        let t = Telemetry::new(config(false, true));
        let j = job(7);
        let sampled = t.reserved(&j, 1);
        assert!(!sampled, "no journal, no sample");
        t.completed(Tracked { job: &j, sampled, worker: 1 });
        t.acknowledged(0, [7]);
        let (requests, deliveries) = t.notices(Duration::ZERO, &crate::interrupt::Interrupt::new());
        assert!(requests.is_empty());
        assert_eq!(deliveries.len(), 1);
        assert_eq!(deliveries[0].name, "job.acknowledged");
        assert!(!Value::Object(deliveries[0].payload.clone()).to_string().contains("secret-argument"));
        assert_eq!(t.journal.pending(), 0, "journal off");
    }

    #[test]
    fn an_idle_interval_journals_nothing() {
        let t = Telemetry::new(config(true, false));
        t.tick();
        assert_eq!(t.journal.pending(), 0);
    }
}
