//! `SolidJobs::Native::Dispatcher`: a worker node's I/O engine (the `Hub`
//! over its job sources) and its telemetry and control. One frozen,
//! shareable instance is handed to every worker Ractor; all of its methods
//! are safe to call concurrently.

use std::time::Duration;

use magnus::{function, method, prelude::*, Error, IntoValue, RArray, RHash, RModule, Ruby, Value};
use solid_core::engine::source::EngineSource;
use solid_core::hub::{Hub, NextJob};
use solid_core::redis::source::RedisSource;
use solid_core::source::JobSource;

use super::job::Job;
use crate::helpers::convert::{seconds, to_ruby};
use crate::helpers::errors::{arg_error, internal, to_ruby as err};
use crate::helpers::node_state::{current_worker, register_current_worker, NodeState};
use crate::helpers::nogvl::without_gvl;
use crate::helpers::settings::{from_hash, NodeTelemetrySettings, SourceSettings};

#[magnus::wrap(class = "SolidJobs::Native::Dispatcher", free_immediately, size, frozen_shareable)]
pub struct Dispatcher {
    core: Hub,
    node: NodeState,
}

/// Starts one job source (GVL released: it connects).
fn start_source(settings: SourceSettings) -> Result<Box<dyn JobSource>, Error> {
    Ok(match settings {
        SourceSettings::Redis(s) => {
            let cfg = s.into_config()?;
            Box::new(without_gvl(|_| RedisSource::start(cfg))?.map_err(err)?)
        }
        SourceSettings::Engine(s) => {
            let cfg = s.into_config()?;
            Box::new(without_gvl(|_| EngineSource::start(cfg))?.map_err(err)?)
        }
    })
}

fn parse(json: &str, what: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(json).map_err(|e| arg_error(format!("{what} must be a JSON object: {e}")))
}

impl Dispatcher {
    /// new([source settings Hash, ...], telemetry settings Hash): one source
    /// per backend this process works (`helpers/settings.rs` has the keys;
    /// `SolidJobs::Conductor` builds the Hashes). Every Hash is checked
    /// before any source starts; sources started before one that fails to
    /// start are shut down again.
    fn new(ruby: &Ruby, sources: RArray, telemetry: RHash) -> Result<Self, Error> {
        let telemetry: NodeTelemetrySettings = from_hash(ruby, telemetry.as_value(), "node telemetry settings")?;
        let node = NodeState::new(telemetry.into_config()?);
        let settings = sources
            .into_iter()
            .enumerate()
            .map(|(i, s)| from_hash::<SourceSettings>(ruby, s, &format!("source settings {i}")))
            .collect::<Result<Vec<_>, Error>>()?;
        if settings.is_empty() {
            return Err(arg_error("a dispatcher needs at least one source".into()));
        }
        let mut started: Vec<Box<dyn JobSource>> = Vec::new();
        for s in settings {
            match start_source(s) {
                Ok(s) => started.push(s),
                Err(e) => {
                    for s in &started {
                        let _ = without_gvl(|_| s.shutdown(Duration::from_secs(1)));
                    }
                    return Err(e);
                }
            }
        }
        let core = Hub::new(started);
        node.attach(core.sources());
        Ok(Dispatcher { core, node })
    }

    /// A job taken by the calling worker, as the telemetry tracks it.
    fn taken(&self, job: solid_core::ClaimedJob) -> Job {
        let worker = current_worker();
        let sampled = self.node.telemetry.reserved(&job, worker);
        Job::tracked(job, sampled, worker)
    }

    /// After a settle: an outcome that ended the claim without being
    /// written (stale) leaves the worker waiting, like an abandon.
    fn settled(&self, job: &Job, out: &Result<(), Error>, written: impl FnOnce()) {
        match out {
            Ok(()) => written(),
            Err(_) if job.is_settled_flag() => self.node.telemetry.abandoned(job.worker),
            Err(_) => {}
        }
    }

    /// A Job, nil when nothing arrived within `timeout` seconds (or the wait
    /// was interrupted), false once the node is stopping.
    fn next_job(ruby: &Ruby, rb_self: &Self, timeout: f64) -> Result<Value, Error> {
        let timeout = seconds(timeout, "timeout")?;
        match without_gvl(|interrupted| rb_self.core.next_job(timeout, interrupted))? {
            NextJob::Job(job) => Ok(rb_self.taken(job).into_value_with(ruby)),
            NextJob::Empty => Ok(ruby.qnil().as_value()),
            NextJob::Stopped => Ok(ruby.qfalse().as_value()),
        }
    }

    /// next_job_in(lane, timeout): `next_job` for a worker of `lane` (0 =
    /// worker Ractors, 1 = thread workers), which also receives the jobs
    /// handed over to that lane.
    fn next_job_in(ruby: &Ruby, rb_self: &Self, lane: usize, timeout: f64) -> Result<Value, Error> {
        if lane >= solid_core::hub::LANES {
            return Err(arg_error(format!("lane must be below {}", solid_core::hub::LANES)));
        }
        let timeout = seconds(timeout, "timeout")?;
        match without_gvl(|interrupted| rb_self.core.next_job_in(Some(lane), timeout, interrupted))? {
            NextJob::Job(job) => Ok(rb_self.taken(job).into_value_with(ruby)),
            NextJob::Empty => Ok(ruby.qnil().as_value()),
            NextJob::Stopped => Ok(ruby.qfalse().as_value()),
        }
    }

    /// assign_lane(task_name, lane): jobs of that task go to `lane`'s workers.
    fn assign_lane(&self, task: String, lane: usize) -> Result<(), Error> {
        if lane >= solid_core::hub::LANES {
            return Err(arg_error(format!("lane must be below {}", solid_core::hub::LANES)));
        }
        self.core.assign_lane(&task, lane);
        Ok(())
    }

    /// open_lanes([ractor_lane_capacity, thread_lane_capacity]), once,
    /// before lane workers start.
    fn open_lanes(&self, capacities: [usize; solid_core::hub::LANES]) -> Result<(), Error> {
        if !self.core.open_lanes(capacities) {
            return Err(arg_error("lanes are already open".into()));
        }
        Ok(())
    }

    /// Passes a job this worker took, unstarted, to the workers of `lane`,
    /// waiting (GVL released) for room. This Job object is settled by it;
    /// the lane's worker receives a new one for the same claim.
    #[allow(clippy::result_large_err)]
    fn hand_over(&self, job: &Job, lane: usize) -> Result<(), Error> {
        if lane >= solid_core::hub::LANES || !self.core.lanes_open() {
            return Err(arg_error(format!("no lane {lane}: lanes are open only on nodes with thread workers")));
        }
        let claimed = job.settle()?.clone();
        // Its new worker reports it; this one is free again.
        self.node.telemetry.abandoned(job.worker);
        // With lanes open and `wait` the job is always accepted (or given
        // back to its source when the node stops); should it ever come back,
        // it stays claimed for requeue rather than vanish from the count.
        if let Err(back) = without_gvl(|_| self.core.hand_over(claimed, lane, true))? {
            self.core.abandon(&back);
        }
        Ok(())
    }

    fn complete(&self, job: &Job) -> Result<(), Error> {
        let claimed = job.settle()?;
        // Before the completion is queued, so its acknowledgement finds it.
        self.node.telemetry.completed(job.as_tracked());
        self.core.complete(claimed);
        Ok(())
    }

    /// record_failure(job, error_class, message, location) -> [failures,
    /// first_failure_ms]; raises StaleClaimError when recovered. Does not
    /// settle the job: retry or discard must follow. `location` ("path:line"
    /// of the raise, or "") goes to the journal's job.failed; the message
    /// does not (it may quote arguments).
    fn record_failure(
        &self,
        job: &Job,
        error_class: String,
        message: String,
        location: String,
    ) -> Result<(u32, u64), Error> {
        if job.is_settled_flag() {
            return Err(internal("job was already settled"));
        }
        let f = without_gvl(|_| self.core.record_failure(&job.claimed, &error_class, &message))?.map_err(err)?;
        job.failures.store(f.failures, std::sync::atomic::Ordering::Relaxed);
        self.node.telemetry.failed(job.as_tracked(), Some(f.failures), &error_class, &location);
        Ok((f.failures, f.first_failure_ms))
    }

    /// record_unknown(job, error_class, message) -> [unknown attempts,
    /// first_unknown_ms]: `record_failure` for a job whose task this worker
    /// does not know, counted apart from the task's own failures (on Redis;
    /// SolidEngine counts deliveries). Raises StaleClaimError when
    /// recovered; retry or discard must follow.
    fn record_unknown(&self, job: &Job, error_class: String, message: String) -> Result<(u32, u64), Error> {
        if job.is_settled_flag() {
            return Err(internal("job was already settled"));
        }
        let f = without_gvl(|_| self.core.record_unknown(&job.claimed, &error_class, &message))?.map_err(err)?;
        // Events count the unknown attempts as this job's failures, as its
        // archive record does (docs/observability.md).
        job.failures.store(f.failures, std::sync::atomic::Ordering::Relaxed);
        self.node.telemetry.failed(job.as_tracked(), Some(f.failures), &error_class, "");
        Ok((f.failures, f.first_failure_ms))
    }

    fn retry(&self, job: &Job, delay: f64) -> Result<(), Error> {
        let delay = seconds(delay, "retry delay")?;
        let out = job.settle_with(|claimed| without_gvl(|_| self.core.retry(claimed, delay)));
        self.settled(job, &out, || {
            let failures = job.failures.load(std::sync::atomic::Ordering::Relaxed);
            let retry_at = solid_core::now_ms() + delay.as_millis() as u64;
            self.node.telemetry.retry_scheduled(job.as_tracked(), failures, retry_at);
        });
        out
    }

    /// discard(job, reason, error_class, message, backtrace, failures, archive)
    #[allow(clippy::too_many_arguments)]
    fn discard(
        &self,
        job: &Job,
        reason: String,
        error_class: Option<String>,
        message: Option<String>,
        backtrace: Vec<String>,
        failures: u32,
        archive: bool,
    ) -> Result<(), Error> {
        let c = &job.claimed;
        let record = serde_json::json!({
            "id": c.envelope.id,
            "task": c.envelope.task,
            "channel": c.channel,
            "raw": c.raw,
            "reason": reason,
            "error_class": error_class,
            "message": message,
            "backtrace": backtrace,
            "failures": failures,
            "discarded_ms": solid_core::now_ms(),
            "kind": "discarded",
        });
        let out = job.settle_with(|claimed| without_gvl(|_| self.core.discard(claimed, &record, archive)));
        self.settled(job, &out, || {
            self.node.telemetry.dead(job.as_tracked(), failures, if archive { "archived" } else { "dropped" })
        });
        out
    }

    fn quarantine(&self, job: &Job, reason: String) -> Result<(), Error> {
        let out = job.settle_with(|claimed| without_gvl(|_| self.core.quarantine(claimed, &reason)));
        self.settled(job, &out, || self.node.telemetry.dead(job.as_tracked(), 0, "quarantined"));
        out
    }

    fn abandon(&self, job: &Job) -> Result<(), Error> {
        self.core.abandon(job.settle()?);
        self.node.telemetry.abandoned(job.worker);
        Ok(())
    }

    fn stop_claiming(&self) {
        self.core.stop_claiming();
    }

    fn is_stopping(&self) -> bool {
        self.core.is_stopping()
    }

    fn wait_idle(&self, timeout: f64) -> Result<bool, Error> {
        let timeout = seconds(timeout, "timeout")?;
        without_gvl(|interrupted| {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let slice =
                    deadline.saturating_duration_since(std::time::Instant::now()).min(Duration::from_millis(100));
                if self.core.wait_idle(slice) {
                    return true;
                }
                if interrupted.is_set() || std::time::Instant::now() >= deadline {
                    return false;
                }
            }
        })
    }

    fn shutdown(&self, flush_timeout: f64) -> Result<u64, Error> {
        let t = seconds(flush_timeout, "flush_timeout")?;
        without_gvl(|_| self.core.shutdown(t))?.map_err(err)
    }

    fn inflight(&self) -> usize {
        self.core.inflight()
    }

    fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        use solid_core::source::Stats;
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        let h = ruby.hash_new();
        for (k, get) in [
            ("claimed", (|s| &s.claimed) as fn(&Stats) -> &AtomicU64),
            ("completed", |s| &s.completed),
            ("failed", |s| &s.failed),
            ("stale", |s| &s.stale),
            ("quarantined", |s| &s.quarantined),
            ("recovered", |s| &s.recovered),
            ("promoted", |s| &s.promoted),
            ("redis_errors", |s| &s.redis_errors),
        ] {
            let total: u64 = rb_self.core.sources().iter().map(|src| get(src.stats()).load(Relaxed)).sum();
            h.aset(k, total)?;
        }
        h.aset("inflight", rb_self.core.inflight())?;
        h.aset("lane_depths", rb_self.core.lane_depths())?;
        Ok(h)
    }

    // Telemetry and control: worker registration, observations, control
    // requests and the events that happen on Rust threads, for the
    // Conductor's monitor thread.

    /// register_worker(worker_id, ractor_id): called once by each worker,
    /// on its own thread, before it asks for jobs.
    fn register_worker(&self, worker: u32, ractor_id: u64) {
        register_current_worker(worker);
        self.node.telemetry.workers.register(worker, ractor_id);
    }

    /// The calling worker left its loop.
    fn worker_stopped(&self) {
        self.node.telemetry.workers.stopped(current_worker());
    }

    /// The worker is about to run `job`'s task.
    fn started(&self, job: &Job) {
        self.node.telemetry.started(job.as_tracked());
    }

    /// observe(node_json, process_json) -> [ractors_json, redis_json]:
    /// records the node's latest observations (written at the next flush)
    /// and returns what the dispatcher itself observed, for the
    /// instrumenter's events.
    fn observe(&self, node: String, process: String) -> Result<(String, String), Error> {
        let (node, process) = (parse(&node, "node")?, parse(&process, "process")?);
        let now = solid_core::now_ms();
        let t = &self.node.telemetry;
        let ractors = t.workers.observe(self.core.is_stopping(), now);
        let redis = self
            .core
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
        let timeout = seconds(timeout, "timeout")?;
        let t = rb_self.node.telemetry.clone();
        let (requests, deliveries) = without_gvl(|interrupted| t.notices(timeout, interrupted))?;
        let events = ruby.ary_new_capa(deliveries.len());
        for d in deliveries {
            let payload = ruby.hash_new();
            for (k, v) in &d.payload {
                payload.aset(ruby.to_symbol(k), to_ruby(ruby, v)?)?;
            }
            events.push((d.name, payload))?;
        }
        Ok((requests, events))
    }

    /// Ends a `notices` wait at once (the monitor is stopping).
    fn wake_monitor(&self) {
        self.node.telemetry.wake_monitor();
    }

    /// Stops claiming new jobs; workers finish what this node already
    /// claimed (running and prefetched), then wait.
    fn pause(&self) {
        self.node.set_paused(true);
        for s in self.core.sources() {
            s.set_paused(true);
        }
    }

    fn resume(&self) {
        self.node.set_paused(false);
        for s in self.core.sources() {
            s.set_paused(false);
        }
    }

    fn is_paused(&self) -> bool {
        self.node.is_paused()
    }

    /// write_backtraces(json, ttl_ms): written at the next flush.
    fn write_backtraces(&self, text: String, ttl_ms: u64) {
        self.node.telemetry.write_backtraces(text, ttl_ms);
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
        self.node.telemetry.note(event, &data);
        Ok(())
    }

    /// {"seq", "dropped", "pending", "undelivered", "sample_per_interval"}
    fn telemetry_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let h = ruby.hash_new();
        if let serde_json::Value::Object(m) = rb_self.node.telemetry.stats_json() {
            for (k, v) in m {
                h.aset(k, v.as_u64().unwrap_or(0))?;
            }
        }
        Ok(h)
    }

    /// The workers' states as JSON (for backtraces).
    fn worker_states(&self) -> String {
        serde_json::Value::Array(self.node.telemetry.workers.observe(self.core.is_stopping(), solid_core::now_ms()))
            .to_string()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Dispatcher", ruby.class_object())?;
    class.define_singleton_method("new", function!(Dispatcher::new, 2))?;
    class.define_method("next_job", method!(Dispatcher::next_job, 1))?;
    class.define_method("next_job_in", method!(Dispatcher::next_job_in, 2))?;
    class.define_method("hand_over", method!(Dispatcher::hand_over, 2))?;
    class.define_method("assign_lane", method!(Dispatcher::assign_lane, 2))?;
    class.define_method("open_lanes", method!(Dispatcher::open_lanes, 1))?;
    class.define_method("complete", method!(Dispatcher::complete, 1))?;
    class.define_method("record_failure", method!(Dispatcher::record_failure, 4))?;
    class.define_method("record_unknown", method!(Dispatcher::record_unknown, 3))?;
    class.define_method("retry", method!(Dispatcher::retry, 2))?;
    class.define_method("discard", method!(Dispatcher::discard, 7))?;
    class.define_method("quarantine", method!(Dispatcher::quarantine, 2))?;
    class.define_method("abandon", method!(Dispatcher::abandon, 1))?;
    class.define_method("stop_claiming", method!(Dispatcher::stop_claiming, 0))?;
    class.define_method("stopping?", method!(Dispatcher::is_stopping, 0))?;
    class.define_method("wait_idle", method!(Dispatcher::wait_idle, 1))?;
    class.define_method("shutdown", method!(Dispatcher::shutdown, 1))?;
    class.define_method("inflight", method!(Dispatcher::inflight, 0))?;
    class.define_method("stats", method!(Dispatcher::stats, 0))?;
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
