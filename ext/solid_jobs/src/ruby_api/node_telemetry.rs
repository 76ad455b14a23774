//! The telemetry and control half of `SolidJobs::Native::Dispatcher`:
//! worker registration, observations, control requests and the events
//! that happen on Rust threads, for the Conductor's monitor thread.
//!
//! Workers are identified by the native thread they run on: each worker
//! Ractor (or thread) registers once, and every later call from that thread
//! is attributed to it, so the per-job methods need no extra argument.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use magnus::{method, prelude::*, Error, RArray, RHash, RModule, Ruby};
use solid_core::source::JobSource;
use solid_core::telemetry::{Telemetry, TelemetryConfig};

use super::dispatcher::Dispatcher;
use super::job::Job;
use crate::helpers::errors::arg_error;
use crate::helpers::nogvl::without_gvl;

thread_local! {
    static WORKER: Cell<u32> = const { Cell::new(0) };
}

/// The worker registered on the calling thread (0: not a worker).
pub fn current_worker() -> u32 {
    WORKER.with(|w| w.get())
}

/// A node's telemetry and its paused flag.
pub struct NodeState {
    pub telemetry: Arc<Telemetry>,
    paused: AtomicBool,
}

/// `[namespace, node_id, journal, sample_per_interval, buffer, journal_size,
///   deliver, observation_ttl_seconds]`
pub fn node_state(spec: RArray) -> Result<NodeState, Error> {
    let ttl: f64 = spec.entry(7)?;
    let cfg = TelemetryConfig {
        namespace: spec.entry(0)?,
        source: spec.entry(1)?,
        journal: spec.entry(2)?,
        sample_per_interval: spec.entry(3)?,
        buffer: spec.entry(4)?,
        journal_size: spec.entry(5)?,
        deliver: spec.entry(6)?,
        observation_ttl: Duration::try_from_secs_f64(ttl).map_err(|_| arg_error("observation ttl must be a positive number of seconds".into()))?,
    };
    Ok(NodeState { telemetry: Arc::new(Telemetry::new(cfg)), paused: AtomicBool::new(false) })
}

/// Hands the telemetry to every source; the first Redis source writes it.
pub fn attach(state: &NodeState, sources: &[Box<dyn JobSource>]) {
    let writer = sources.iter().position(|s| s.name() == "redis");
    for (i, s) in sources.iter().enumerate() {
        s.attach(i, state.telemetry.clone(), Some(i) == writer);
    }
}

fn parse(json: &str, what: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(json).map_err(|e| arg_error(format!("{what} must be a JSON object: {e}")))
}

impl Dispatcher {
    /// register_worker(worker_id, ractor_id): called once by each worker,
    /// on its own thread, before it asks for jobs.
    fn register_worker(&self, worker: u32, ractor_id: u64) {
        WORKER.with(|w| w.set(worker));
        self.node().telemetry.workers.register(worker, ractor_id);
    }

    /// The calling worker left its loop.
    fn worker_stopped(&self) {
        self.node().telemetry.workers.stopped(current_worker());
    }

    /// The worker is about to run `job`'s task.
    fn started(&self, job: &Job) {
        self.node().telemetry.started(job.as_tracked());
    }

    /// observe(node_json, process_json) -> [ractors_json, redis_json]:
    /// records the node's latest observations (written at the next flush)
    /// and returns what the dispatcher itself observed, for the
    /// instrumenter's events.
    fn observe(&self, node: String, process: String) -> Result<(String, String), Error> {
        let (node, process) = (parse(&node, "node")?, parse(&process, "process")?);
        let now = solid_core::now_ms();
        let t = &self.node().telemetry;
        let ractors = t.workers.observe(self.core().is_stopping(), now);
        let redis = self
            .core()
            .sources()
            .iter()
            .find(|s| s.name() == "redis")
            .map(|s| s.stats().connection(now))
            .unwrap_or_else(|| serde_json::json!({"state": "unavailable", "at_ms": now}));
        t.observe(&node, &process, &ractors, &redis);
        Ok((serde_json::Value::Array(ractors).to_string(), redis.to_string()))
    }

    /// notices(timeout) -> [[control request JSON, ...], [[event, payload Hash], ...]]:
    /// waits (GVL released) for control requests from the mailbox and for
    /// events that happened on Rust threads. Payloads are built here with
    /// Symbol keys, ready for the instrumenter (no JSON round trip).
    fn notices(ruby: &Ruby, rb_self: &Self, timeout: f64) -> Result<(Vec<String>, RArray), Error> {
        let timeout = Duration::try_from_secs_f64(timeout).map_err(|_| arg_error("timeout must be >= 0".into()))?;
        let t = rb_self.node().telemetry.clone();
        let (requests, deliveries) = without_gvl(|interrupted| t.notices(timeout, interrupted))?;
        let events = ruby.ary_new_capa(deliveries.len());
        for d in deliveries {
            let payload = RHash::new();
            for (k, v) in &d.payload {
                payload.aset(ruby.to_symbol(k), crate::helpers::convert::to_ruby(v)?)?;
            }
            events.push((d.name, payload))?;
        }
        Ok((requests, events))
    }

    /// Ends a `notices` wait at once (the monitor is stopping).
    fn wake_monitor(&self) {
        self.node().telemetry.wake_monitor();
    }

    /// Stops claiming new jobs; workers finish what this node already
    /// claimed (running and prefetched), then wait.
    fn pause(&self) {
        self.node().paused.store(true, Ordering::Release);
        for s in self.core().sources() {
            s.set_paused(true);
        }
    }

    fn resume(&self) {
        self.node().paused.store(false, Ordering::Release);
        for s in self.core().sources() {
            s.set_paused(false);
        }
    }

    fn is_paused(&self) -> bool {
        self.node().paused.load(Ordering::Acquire)
    }

    /// write_backtraces(json, ttl_ms): written at the next flush.
    fn write_backtraces(&self, text: String, ttl_ms: u64) {
        self.node().telemetry.write_backtraces(text, ttl_ms);
    }

    /// journal_note(event, data_json): a node-level journal entry.
    fn journal_note(&self, event: String, data: String) -> Result<(), Error> {
        let data = parse(&data, "data")?;
        let event: &'static str = match event.as_str() {
            "node.control" => "node.control",
            "node.started" => "node.started",
            "node.stopped" => "node.stopped",
            other => return Err(arg_error(format!("unknown node event {other:?}"))),
        };
        self.node().telemetry.note(event, &data);
        Ok(())
    }

    /// {"seq", "dropped", "pending", "undelivered", "sample_per_interval"}
    fn telemetry_stats(&self) -> Result<RHash, Error> {
        let h = RHash::new();
        if let serde_json::Value::Object(m) = self.node().telemetry.stats_json() {
            for (k, v) in m {
                h.aset(k, v.as_u64().unwrap_or(0))?;
            }
        }
        Ok(h)
    }

    /// The workers' states as JSON (for backtraces).
    fn worker_states(&self) -> String {
        serde_json::Value::Array(self.node().telemetry.workers.observe(self.core().is_stopping(), solid_core::now_ms())).to_string()
    }
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class: magnus::RClass = native.const_get("Dispatcher")?;
    class.define_method("register_worker", method!(Dispatcher::register_worker, 2))?;
    class.define_method("worker_stopped", method!(Dispatcher::worker_stopped, 0))?;
    class.define_method("started", method!(Dispatcher::started, 1))?;
    class.define_method("observe", method!(Dispatcher::observe, 2))?;
    class.define_method("notices", method!(Dispatcher::notices, 1))?;
    class.define_method("wake_monitor", method!(Dispatcher::wake_monitor, 0))?;
    class.define_method("pause", method!(Dispatcher::pause, 0))?;
    class.define_method("resume", method!(Dispatcher::resume, 0))?;
    class.define_method("paused?", method!(Dispatcher::is_paused, 0))?;
    class.define_method("write_backtraces", method!(Dispatcher::write_backtraces, 2))?;
    class.define_method("journal_note", method!(Dispatcher::journal_note, 2))?;
    class.define_method("telemetry_stats", method!(Dispatcher::telemetry_stats, 0))?;
    class.define_method("worker_states", method!(Dispatcher::worker_states, 0))?;
    Ok(())
}
