//! `SolidJobs::Native::Dispatcher`: a worker node's I/O engine. One frozen,
//! shareable instance is handed to every worker Ractor; all of its methods
//! are safe to call concurrently.

use std::time::Duration;

use magnus::{function, method, prelude::*, Error, IntoValue, RHash, RModule, Ruby, Value};
use solid_core::channel_order::ChannelOrder;
use solid_core::dispatcher::{Dispatcher as Core, DispatcherConfig, NextJob};
use solid_core::prefetch::Prefetch;
use solid_core::store::ArchivePolicy;

use super::job::Job;
use crate::helpers::errors::{arg_error, to_ruby as err};
use crate::helpers::nogvl::without_gvl;

#[magnus::wrap(class = "SolidJobs::Native::Dispatcher", free_immediately, size, frozen_shareable)]
pub struct Dispatcher {
    core: Core,
}

fn seconds(s: f64, what: &str) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s).map_err(|_| arg_error(format!("{what} must be a non-negative number of seconds")))
}

impl Dispatcher {
    /// Positional arguments; `SolidJobs::Conductor` normalizes options.
    /// `prefetch` 0 means adaptive for `workers` workers.
    #[allow(clippy::too_many_arguments)]
    fn new(
        redis_url: String,
        namespace: String,
        node_id: String,
        channels: Vec<(String, u32)>,
        order: String,
        prefetch: usize,
        workers: usize,
        heartbeat_interval: f64,
        node_ttl: f64,
        description: String,
        archive_max_entries: u64,
        archive_max_age: f64,
    ) -> Result<Self, Error> {
        let cfg = DispatcherConfig {
            redis_url,
            namespace,
            node_id,
            channels,
            order: ChannelOrder::parse(&order).map_err(err)?,
            prefetch: if prefetch == 0 { Prefetch::Adaptive { workers } } else { Prefetch::Fixed(prefetch) },
            heartbeat_interval: seconds(heartbeat_interval, "heartbeat_interval")?,
            node_ttl: seconds(node_ttl, "node_ttl")?,
            description,
            archive: ArchivePolicy { max_entries: archive_max_entries, max_age_ms: seconds(archive_max_age, "archive_max_age")?.as_millis() as u64 },
        };
        let core = without_gvl(|_| Core::start(cfg))?.map_err(err)?;
        Ok(Dispatcher { core })
    }

    /// A Job, nil when nothing arrived within `timeout` seconds (or the wait
    /// was interrupted), false once the node is stopping.
    fn next_job(ruby: &Ruby, rb_self: &Self, timeout: f64) -> Result<Value, Error> {
        let timeout = seconds(timeout, "timeout")?;
        match without_gvl(|interrupted| rb_self.core.next_job(timeout, interrupted))? {
            NextJob::Job(job) => Ok(Job::new(job).into_value_with(ruby)),
            NextJob::Empty => Ok(ruby.qnil().as_value()),
            NextJob::Stopped => Ok(ruby.qfalse().as_value()),
        }
    }

    fn complete(&self, job: &Job) -> Result<(), Error> {
        self.core.complete(job.settle()?);
        Ok(())
    }

    /// [failures, first_failure_ms]; raises StaleClaimError when recovered.
    /// Does not settle the job: retry or discard must follow.
    fn record_failure(&self, job: &Job, error_class: String, message: String) -> Result<(u32, u64), Error> {
        if job.is_settled_flag() {
            return Err(crate::helpers::errors::internal("job was already settled"));
        }
        let f = without_gvl(|_| self.core.record_failure(&job.claimed, &error_class, &message))?.map_err(err)?;
        Ok((f.failures, f.first_failure_ms))
    }

    fn retry(&self, job: &Job, delay: f64) -> Result<(), Error> {
        let delay = seconds(delay, "retry delay")?;
        job.settle_with(|claimed| without_gvl(|_| self.core.retry(claimed, delay)))
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
        job.settle_with(|claimed| without_gvl(|_| self.core.discard(claimed, &record, archive)))
    }

    fn quarantine(&self, job: &Job, reason: String) -> Result<(), Error> {
        job.settle_with(|claimed| without_gvl(|_| self.core.quarantine(claimed, &reason)))
    }

    fn abandon(&self, job: &Job) -> Result<(), Error> {
        self.core.abandon(job.settle()?);
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
                if interrupted.load(std::sync::atomic::Ordering::Acquire) || std::time::Instant::now() >= deadline {
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

    fn node_id(&self) -> String {
        self.core.node_id().to_owned()
    }

    fn stats(&self) -> Result<RHash, Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.core.stats();
        let h = RHash::new();
        for (k, v) in [
            ("claimed", &s.claimed),
            ("completed", &s.completed),
            ("failed", &s.failed),
            ("stale", &s.stale),
            ("quarantined", &s.quarantined),
            ("recovered", &s.recovered),
            ("promoted", &s.promoted),
            ("redis_errors", &s.redis_errors),
        ] {
            h.aset(k, v.load(Relaxed))?;
        }
        h.aset("inflight", self.core.inflight())?;
        Ok(h)
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Dispatcher", ruby.class_object())?;
    class.define_singleton_method("new", function!(Dispatcher::new, 12))?;
    class.define_method("next_job", method!(Dispatcher::next_job, 1))?;
    class.define_method("complete", method!(Dispatcher::complete, 1))?;
    class.define_method("record_failure", method!(Dispatcher::record_failure, 3))?;
    class.define_method("retry", method!(Dispatcher::retry, 2))?;
    class.define_method("discard", method!(Dispatcher::discard, 7))?;
    class.define_method("quarantine", method!(Dispatcher::quarantine, 2))?;
    class.define_method("abandon", method!(Dispatcher::abandon, 1))?;
    class.define_method("stop_claiming", method!(Dispatcher::stop_claiming, 0))?;
    class.define_method("stopping?", method!(Dispatcher::is_stopping, 0))?;
    class.define_method("wait_idle", method!(Dispatcher::wait_idle, 1))?;
    class.define_method("shutdown", method!(Dispatcher::shutdown, 1))?;
    class.define_method("inflight", method!(Dispatcher::inflight, 0))?;
    class.define_method("node_id", method!(Dispatcher::node_id, 0))?;
    class.define_method("stats", method!(Dispatcher::stats, 0))?;
    Ok(())
}
