//! Telemetry of one worker node or publisher process, collected without a
//! Redis round trip or a shared lock per job:
//!
//! - exact per-interval aggregates (counts, latency and duration
//!   percentiles) in atomics, journaled once per flush as `metrics.interval`;
//! - the whole lifecycle of a sample of jobs (the first
//!   `sample_per_interval` per second: [`budget`]) as `job.*` entries;
//! - what each worker is doing ([`workers`]) and the node's latest
//!   observations, written every observation interval;
//! - control requests and Rust-side events (`job.acknowledged`,
//!   `job.recovered`) handed to the Ruby side for the instrumenter.
//!
//! Entries never carry job arguments, envelopes, error messages or log
//! text: identifiers, timestamps, durations and error classes only.
//! One flusher writes everything in one pipelined call per tick: a node's
//! journal-writing Redis source on its heartbeat thread, a publisher's own
//! flush thread ([`flusher`]).

pub mod budget;
pub mod flusher;
pub mod histogram;
pub mod journal;
pub mod workers;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Select, Sender};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use crate::claim::ClaimedJob;
use crate::error::Result;
use crate::redis::keyspace::Keyspace;
use crate::now_ms;
use crate::redis::store::RecoveredJob;

use budget::SampleBudget;
use histogram::Histogram;
use journal::Journal;
use workers::WorkerSlots;

/// How often entries are written and aggregates closed (one interval).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Rust-side events waiting for the Ruby instrumenter; beyond this they are
/// counted and dropped rather than held without bound.
const DELIVERY_CAPACITY: usize = 10_000;
/// `job.recovered` entries journaled per recovery (all are counted).
const RECOVERED_ENTRIES: usize = 1_000;

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

/// A job as the telemetry sees it: the claim, whether its lifecycle is
/// journaled, and the worker running it (0: none yet).
#[derive(Clone, Copy)]
pub struct Tracked<'a> {
    pub job: &'a ClaimedJob,
    pub sampled: bool,
    pub worker: u32,
}

/// An event that happened on a Rust thread, for the Ruby instrumenter.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub name: &'static str,
    pub payload: Map<String, Value>,
}

/// What `job.acknowledged` needs of a completed job once its completion is
/// written (the acker knows only tokens).
struct AckNote {
    fields: Map<String, Value>,
    sampled: bool,
}

#[derive(Default)]
struct Counts {
    enqueued: AtomicU64,
    reserved: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
    acknowledged: AtomicU64,
    recovered: AtomicU64,
}

/// Written by the next flush besides the journal entries.
#[derive(Default)]
struct Outbox {
    observation: Option<Vec<(String, String)>>,
    backtraces: Option<(String, u64)>,
    tasks: Vec<String>,
}

impl Outbox {
    fn is_empty(&self) -> bool {
        self.observation.is_none() && self.backtraces.is_none() && self.tasks.is_empty()
    }
}

pub struct Telemetry {
    cfg: TelemetryConfig,
    keys: Keyspace,
    journal: Journal,
    budget: SampleBudget,
    counts: Counts,
    latency: Histogram,
    duration: Histogram,
    pub workers: WorkerSlots,
    interval_started: Mutex<Instant>,
    /// Completed jobs whose acknowledgement is reported (sampled, or every
    /// job when delivering): keyed by (source index, token). Touched per
    /// job only when delivering to an instrumenter; `pending_len` lets the
    /// acker skip the lock otherwise.
    pending_acks: Mutex<HashMap<(usize, u64), AckNote>>,
    pending_len: AtomicUsize,
    deliveries_tx: Sender<Delivery>,
    deliveries_rx: Receiver<Delivery>,
    undelivered: AtomicU64,
    requests_tx: Sender<String>,
    requests_rx: Receiver<String>,
    seen_tasks: Mutex<HashSet<String>>,
    outbox: Mutex<Outbox>,
    /// Wakes a `notices` wait early (the monitor is stopping).
    monitor_wake_tx: Sender<()>,
    monitor_wake_rx: Receiver<()>,
    /// A publisher's flush thread sleeps while nothing happens; the next
    /// publication wakes it (one atomic load per publication otherwise).
    flusher_idle: AtomicBool,
    flusher_wake_tx: Sender<()>,
    flusher_wake_rx: Receiver<()>,
}

fn error_location(location: &str) -> Value {
    if location.is_empty() {
        Value::Null
    } else {
        Value::String(location.to_owned())
    }
}

impl Telemetry {
    pub fn new(cfg: TelemetryConfig) -> Self {
        let (deliveries_tx, deliveries_rx) = bounded(DELIVERY_CAPACITY);
        let (requests_tx, requests_rx) = unbounded();
        let (monitor_wake_tx, monitor_wake_rx) = bounded(1);
        let (flusher_wake_tx, flusher_wake_rx) = bounded(1);
        Telemetry {
            monitor_wake_tx,
            monitor_wake_rx,
            flusher_idle: AtomicBool::new(false),
            flusher_wake_tx,
            flusher_wake_rx,
            keys: Keyspace::new(&cfg.namespace),
            journal: Journal::new(cfg.buffer),
            budget: SampleBudget::new(if cfg.journal { cfg.sample_per_interval } else { 0 }),
            counts: Counts::default(),
            latency: Histogram::default(),
            duration: Histogram::default(),
            workers: WorkerSlots::default(),
            interval_started: Mutex::new(Instant::now()),
            pending_acks: Mutex::new(HashMap::new()),
            pending_len: AtomicUsize::new(0),
            deliveries_tx,
            deliveries_rx,
            undelivered: AtomicU64::new(0),
            requests_tx,
            requests_rx,
            seen_tasks: Mutex::new(HashSet::new()),
            outbox: Mutex::new(Outbox::default()),
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

    fn deliver(&self, name: &'static str, payload: Map<String, Value>) {
        if self.deliveries_tx.try_send(Delivery { name, payload }).is_err() {
            self.undelivered.fetch_add(1, Relaxed);
        }
    }

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

    fn duration_us(job: &ClaimedJob) -> Option<u64> {
        job.taken_at.map(|t| t.elapsed().as_micros() as u64)
    }

    // --- worker side: called by the dispatcher around each job ---

    /// A worker took `job`. Returns whether its lifecycle is journaled.
    pub fn reserved(&self, job: &ClaimedJob, worker: u32) -> bool {
        self.workers.running(worker, &job.envelope.id);
        if !self.cfg.journal {
            return false;
        }
        self.counts.reserved.fetch_add(1, Relaxed);
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
        self.latency.record(latency_ms * 1000);
        self.job_entry("job.started", t, |m| {
            m.insert("latency_ms".into(), json!(latency_ms));
        });
    }

    /// The task returned. `source` is the job's source index in the hub.
    pub fn completed(&self, t: Tracked) {
        self.workers.waiting(t.worker);
        let duration = Self::duration_us(t.job);
        if self.cfg.journal {
            self.counts.completed.fetch_add(1, Relaxed);
            if let Some(d) = duration {
                self.duration.record(d);
            }
            self.job_entry("job.completed", t, |m| {
                m.insert("duration_ms".into(), json!(duration.map(|d| d as f64 / 1000.0)));
            });
        }
        if t.sampled || self.cfg.deliver {
            let fields = self.job_fields(t, 0);
            self.pending_acks.lock().insert((t.job.source, t.job.token), AckNote { fields, sampled: t.sampled });
            self.pending_len.fetch_add(1, Relaxed);
        }
    }

    /// The task raised; `failures` is the failure count once recorded.
    pub fn failed(&self, t: Tracked, failures: Option<u32>, error_class: &str, location: &str) {
        if !self.cfg.journal {
            return;
        }
        self.counts.failed.fetch_add(1, Relaxed);
        let duration = Self::duration_us(t.job);
        if let Some(d) = duration {
            self.duration.record(d);
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
        self.counts.retried.fetch_add(1, Relaxed);
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
        self.counts.dead.fetch_add(1, Relaxed);
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
        if self.pending_len.load(Relaxed) == 0 {
            return;
        }
        let at = now_ms();
        let mut pending = self.pending_acks.lock();
        for token in tokens {
            let Some(mut note) = pending.remove(&(source, token)) else { continue };
            self.pending_len.fetch_sub(1, Relaxed);
            note.fields.insert("at_ms".into(), json!(at));
            if self.cfg.journal {
                self.counts.acknowledged.fetch_add(1, Relaxed);
            }
            if self.cfg.deliver {
                self.deliver("job.acknowledged", note.fields.clone());
            }
            if note.sampled {
                self.record("job.acknowledged", at, note.fields);
            }
        }
    }

    /// Completions that will never be written (stale): forget their notes.
    pub fn unacknowledged(&self, source: usize, tokens: impl IntoIterator<Item = u64>) {
        if self.pending_len.load(Relaxed) == 0 {
            return;
        }
        let mut pending = self.pending_acks.lock();
        for token in tokens {
            if pending.remove(&(source, token)).is_some() {
                self.pending_len.fetch_sub(1, Relaxed);
            }
        }
    }

    /// This node moved a dead node's claims back to their channels.
    pub fn recovered(&self, dead_node: &str, jobs: &[RecoveredJob]) {
        if jobs.is_empty() {
            return;
        }
        self.counts.recovered.fetch_add(jobs.len() as u64, Relaxed);
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
                self.deliver("job.recovered", m.clone());
            }
            if i < RECOVERED_ENTRIES {
                self.record("job.recovered", at, m);
            }
        }
    }

    /// The fetcher claimed jobs of these tasks (one lock per batch).
    pub fn saw_tasks<'a>(&self, tasks: impl IntoIterator<Item = &'a str>) {
        if !self.cfg.journal {
            return;
        }
        let mut seen = self.seen_tasks.lock();
        let mut fresh = Vec::new();
        for task in tasks {
            if !seen.contains(task) {
                seen.insert(task.to_owned());
                fresh.push(task.to_owned());
            }
        }
        drop(seen);
        if !fresh.is_empty() {
            self.outbox.lock().tasks.extend(fresh);
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
        self.counts.enqueued.fetch_add(ids.len() as u64, std::sync::atomic::Ordering::SeqCst);
        // After counting (SeqCst pairs with `idle_until_activity`): either
        // this sees the flusher idle and wakes it, or the flusher sees the
        // count and stays awake.
        if self.flusher_idle.load(std::sync::atomic::Ordering::SeqCst) {
            self.flusher_idle.store(false, Relaxed);
            let _ = self.flusher_wake_tx.try_send(());
        }
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
        let mut node = node.as_object().cloned().unwrap_or_default();
        node.insert("at_ms".into(), json!(at));
        node.insert("telemetry".into(), self.stats_json());
        let fields = vec![
            ("node".to_owned(), Value::Object(node).to_string()),
            ("process".to_owned(), process.to_string()),
            ("ractors".to_owned(), Value::Array(ractors.to_vec()).to_string()),
            ("redis".to_owned(), redis.to_string()),
            ("at_ms".to_owned(), at.to_string()),
        ];
        self.outbox.lock().observation = Some(fields);
    }

    /// Journals a node-level event (a control request acted on...).
    pub fn note(&self, event: &'static str, data: &Value) {
        let mut m = data.as_object().cloned().unwrap_or_default();
        m.insert("node_id".into(), json!(self.cfg.source));
        self.record(event, now_ms(), m);
    }

    pub fn write_backtraces(&self, text: String, ttl_ms: u64) {
        self.outbox.lock().backtraces = Some((text, ttl_ms));
    }

    /// A control request taken from the node's mailbox by its heartbeat.
    pub fn request(&self, request: String) {
        let _ = self.requests_tx.send(request);
    }

    /// Waits up to `timeout` for control requests or Rust-side events and
    /// returns whatever is waiting; returns early (empty) on `wake_monitor`
    /// or when `interrupted` is triggered. Nothing polls: an idle monitor
    /// sleeps for the whole timeout.
    pub fn notices(&self, timeout: Duration, interrupted: &crate::interrupt::Interrupt) -> (Vec<String>, Vec<Delivery>) {
        let take = || -> (Vec<String>, Vec<Delivery>) {
            (self.requests_rx.try_iter().collect(), self.deliveries_rx.try_iter().take(DELIVERY_CAPACITY).collect())
        };
        let (requests, deliveries) = take();
        if !requests.is_empty() || !deliveries.is_empty() || self.monitor_wake_rx.try_recv().is_ok() {
            return (requests, deliveries);
        }
        let mut select = Select::new();
        select.recv(&self.requests_rx);
        select.recv(&self.deliveries_rx);
        let wake = select.recv(&self.monitor_wake_rx);
        let woken = select.recv(interrupted.receiver());
        if interrupted.is_set() {
            return (requests, deliveries);
        }
        // `ready` only says which channel has something; nothing is taken
        // here, so whatever arrived is collected below.
        match select.ready_timeout(timeout) {
            Ok(i) if i == wake => {
                let _ = self.monitor_wake_rx.try_recv();
                (Vec::new(), Vec::new())
            }
            Ok(i) if i == woken => (Vec::new(), Vec::new()),
            _ => take(),
        }
    }

    /// Ends a `notices` wait now (the monitor is stopping).
    pub fn wake_monitor(&self) {
        let _ = self.monitor_wake_tx.try_send(());
    }

    /// `{"seq","dropped","pending","undelivered"}` for the node observation.
    pub fn stats_json(&self) -> Value {
        json!({
            "seq": self.journal.last_seq(),
            "dropped": self.journal.dropped(),
            "pending": self.journal.pending(),
            "undelivered": self.undelivered.load(Relaxed),
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
        let interval_ms = {
            let mut started = self.interval_started.lock();
            let ms = started.elapsed().as_millis() as u64;
            *started = Instant::now();
            ms
        };
        let c = &self.counts;
        let take = |a: &AtomicU64| a.swap(0, Relaxed);
        let counts = [
            ("enqueued", take(&c.enqueued)),
            ("reserved", take(&c.reserved)),
            ("completed", take(&c.completed)),
            ("failed", take(&c.failed)),
            ("retried", take(&c.retried)),
            ("dead", take(&c.dead)),
            ("acknowledged", take(&c.acknowledged)),
            ("recovered", take(&c.recovered)),
        ];
        let latency = self.latency.take();
        let duration = self.duration.take();
        if counts.iter().all(|(_, n)| *n == 0) && latency.count == 0 && duration.count == 0 {
            return false;
        }
        let mut m = Map::new();
        m.insert("interval_ms".into(), json!(interval_ms));
        for (name, n) in counts {
            m.insert(name.into(), json!(n));
        }
        m.insert("latency_ms".into(), latency.to_json_ms());
        m.insert("duration_ms".into(), duration.to_json_ms());
        m.insert("dropped_total".into(), json!(self.journal.dropped()));
        self.record("metrics.interval", now_ms(), m);
        true
    }

    /// A publisher's flusher found nothing to do: it may sleep until the
    /// next publication (see `wait_for_activity`). Returns false when
    /// activity arrived meanwhile (then it must not sleep).
    pub fn idle_until_activity(&self) -> bool {
        self.flusher_idle.store(true, std::sync::atomic::Ordering::SeqCst);
        if self.counts.enqueued.load(std::sync::atomic::Ordering::SeqCst) > 0 || self.has_pending() {
            self.flusher_idle.store(false, Relaxed);
            return false;
        }
        true
    }

    /// Blocks while idle; false once the telemetry is gone (the thread ends).
    pub fn wait_for_activity(wake: &Receiver<()>) -> bool {
        wake.recv().is_ok()
    }

    pub fn flusher_wake(&self) -> Receiver<()> {
        self.flusher_wake_rx.clone()
    }

    /// True when a flush has something to write.
    pub fn has_pending(&self) -> bool {
        (self.cfg.journal && self.journal.pending() > 0) || !self.outbox.lock().is_empty()
    }

    /// Writes waiting entries, observations, backtraces and task names in
    /// one pipelined call. On failure everything is kept for the next try
    /// (bounded: see [`journal`]).
    pub fn flush(&self, conn: &mut redis::Connection) -> Result<()> {
        let batch = if self.cfg.journal { self.journal.take_batch() } else { Vec::new() };
        let outbox = std::mem::take(&mut *self.outbox.lock());
        if batch.is_empty() && outbox.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        journal::add_to(&mut pipe, &self.keys.telemetry(), self.cfg.journal_size, &self.cfg.source, &batch);
        let node = &self.cfg.source;
        if let Some(fields) = &outbox.observation {
            let key = self.keys.observations(node);
            pipe.hset_multiple(&key, fields).ignore();
            pipe.pexpire(&key, self.cfg.observation_ttl.as_millis() as i64).ignore();
        }
        if let Some((text, ttl)) = &outbox.backtraces {
            pipe.cmd("SET").arg(self.keys.backtraces(node)).arg(text).arg("PX").arg(*ttl).ignore();
        }
        if !outbox.tasks.is_empty() {
            pipe.sadd(self.keys.tasks(), &outbox.tasks).ignore();
        }
        match pipe.query::<()>(conn) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.journal.put_back(batch);
                let mut now = self.outbox.lock();
                now.observation = now.observation.take().or(outbox.observation);
                now.backtraces = now.backtraces.take().or(outbox.backtraces);
                now.tasks.extend(outbox.tasks);
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        ClaimedJob { token, channel: "default".into(), raw: envelope.encode(), envelope, claimed_ms: 1, taken_at: Some(Instant::now()), source: 0, attempts: 0 }
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
        assert_eq!(t.pending_len.load(Relaxed), 0);
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
