//! `SolidJobs::Native::Dispatcher`: a worker node's I/O engine. One frozen,
//! shareable instance is handed to every worker Ractor; all of its methods
//! are safe to call concurrently.

use std::time::Duration;

use magnus::{function, method, prelude::*, Error, IntoValue, RArray, RHash, RModule, Ruby, Value};
use solid_core::channel_order::ChannelOrder;
use solid_core::engine::source::{EngineSource, EngineSourceConfig};
use solid_core::hub::{Hub, NextJob};
use solid_core::prefetch::Prefetch;
use solid_core::redis::source::{RedisSource, RedisSourceConfig};
use solid_core::source::JobSource;
use solid_core::redis::store::ArchivePolicy;

use super::job::Job;
use super::node_telemetry::{self, NodeState};
use crate::helpers::errors::{arg_error, to_ruby as err};
use crate::helpers::nogvl::without_gvl;

#[magnus::wrap(class = "SolidJobs::Native::Dispatcher", free_immediately, size, frozen_shareable)]
pub struct Dispatcher {
    core: Hub,
    node: NodeState,
}

fn seconds(s: f64, what: &str) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s).map_err(|_| arg_error(format!("{what} must be a non-negative number of seconds")))
}

/// `["redis", url, namespace, node_id, [[channel, weight]...], order, prefetch,
///   workers, heartbeat_interval, node_ttl, description, archive_max_entries,
///   archive_max_age]`; prefetch 0 means adaptive for `workers` workers.
fn redis_source(spec: RArray) -> Result<Box<dyn JobSource>, Error> {
    let prefetch: usize = spec.entry(6)?;
    let workers: usize = spec.entry(7)?;
    let cfg = RedisSourceConfig {
        redis_url: spec.entry(1)?,
        namespace: spec.entry(2)?,
        node_id: spec.entry(3)?,
        channels: spec.entry(4)?,
        order: ChannelOrder::parse(&spec.entry::<String>(5)?).map_err(err)?,
        prefetch: if prefetch == 0 { Prefetch::Adaptive { workers } } else { Prefetch::Fixed(prefetch) },
        heartbeat_interval: seconds(spec.entry(8)?, "heartbeat_interval")?,
        node_ttl: seconds(spec.entry(9)?, "node_ttl")?,
        description: spec.entry(10)?,
        archive: ArchivePolicy {
            max_entries: spec.entry(11)?,
            max_age_ms: seconds(spec.entry(12)?, "archive_max_age")?.as_millis() as u64,
        },
    };
    let source = without_gvl(|_| RedisSource::start(cfg))?.map_err(err)?;
    Ok(Box::new(source))
}

/// `["engine", url, password or nil, [[channel, channel_id, weight]...], order,
///   prefetch, workers, lease_seconds]`
fn engine_source(spec: RArray) -> Result<Box<dyn JobSource>, Error> {
    let prefetch: usize = spec.entry(5)?;
    let workers: usize = spec.entry(6)?;
    let cfg = EngineSourceConfig {
        url: spec.entry(1)?,
        password: spec.entry(2)?,
        channels: spec.entry(3)?,
        order: ChannelOrder::parse(&spec.entry::<String>(4)?).map_err(err)?,
        prefetch: if prefetch == 0 { Prefetch::Adaptive { workers } } else { Prefetch::Fixed(prefetch) },
        lease: seconds(spec.entry(7)?, "lease")?,
    };
    let source = without_gvl(|_| EngineSource::start(cfg))?.map_err(err)?;
    Ok(Box::new(source))
}

impl Dispatcher {
    /// new([source spec, ...], telemetry spec): one source per backend this
    /// process works; `SolidJobs::Conductor` builds the specs (telemetry:
    /// see `node_telemetry::node_state`). Sources started before a failing
    /// one are shut down again.
    fn new(specs: RArray, telemetry: RArray) -> Result<Self, Error> {
        let node = node_telemetry::node_state(telemetry)?;
        let mut sources: Vec<Box<dyn JobSource>> = Vec::new();
        for spec in specs.into_iter() {
            let spec = RArray::from_value(spec).ok_or_else(|| arg_error("a source spec must be an Array".into()))?;
            let kind: String = spec.entry(0)?;
            let built = match kind.as_str() {
                "redis" => redis_source(spec),
                "engine" => engine_source(spec),
                other => Err(arg_error(format!("unknown source kind {other:?}"))),
            };
            match built {
                Ok(s) => sources.push(s),
                Err(e) => {
                    for s in &sources {
                        let _ = without_gvl(|_| s.shutdown(Duration::from_secs(1)));
                    }
                    return Err(e);
                }
            }
        }
        if sources.is_empty() {
            return Err(arg_error("a dispatcher needs at least one source".into()));
        }
        let core = Hub::new(sources);
        node_telemetry::attach(&node, core.sources());
        Ok(Dispatcher { core, node })
    }

    pub(crate) fn core(&self) -> &Hub {
        &self.core
    }

    pub(crate) fn node(&self) -> &NodeState {
        &self.node
    }

    /// A job taken by the calling worker, as the telemetry tracks it.
    fn taken(&self, job: solid_core::ClaimedJob) -> Job {
        let worker = node_telemetry::current_worker();
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
    fn record_failure(&self, job: &Job, error_class: String, message: String, location: String) -> Result<(u32, u64), Error> {
        if job.is_settled_flag() {
            return Err(crate::helpers::errors::internal("job was already settled"));
        }
        let f = without_gvl(|_| self.core.record_failure(&job.claimed, &error_class, &message))?.map_err(err)?;
        job.failures.store(f.failures, std::sync::atomic::Ordering::Relaxed);
        self.node.telemetry.failed(job.as_tracked(), Some(f.failures), &error_class, &location);
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
        self.settled(job, &out, || self.node.telemetry.dead(job.as_tracked(), failures, if archive { "archived" } else { "dropped" }));
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
                let slice = deadline.saturating_duration_since(std::time::Instant::now()).min(Duration::from_millis(100));
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

    fn stats(&self) -> Result<RHash, Error> {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        use solid_core::source::Stats;
        let h = RHash::new();
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
            let total: u64 = self.core.sources().iter().map(|src| get(src.stats()).load(Relaxed)).sum();
            h.aset(k, total)?;
        }
        h.aset("inflight", self.core.inflight())?;
        h.aset("lane_depths", self.core.lane_depths())?;
        Ok(h)
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
    Ok(())
}
