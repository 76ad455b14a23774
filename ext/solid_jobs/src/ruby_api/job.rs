//! `SolidJobs::Native::Job`: one claimed job, owned by the worker that
//! received it. It is settled exactly once (complete, retry, discard,
//! quarantine or abandon); the dispatcher refuses a second settle.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use magnus::{method, prelude::*, Error, RModule, Ruby, Value};
use solid_core::ClaimedJob;

use crate::helpers::convert::to_ruby;
use crate::helpers::envelopes::envelope_to_ruby;
use crate::helpers::errors::internal;

#[magnus::wrap(class = "SolidJobs::Native::Job", free_immediately, size)]
pub struct Job {
    pub claimed: ClaimedJob,
    settled: AtomicBool,
    /// Whether the telemetry journals this job's whole lifecycle.
    pub sampled: bool,
    /// The worker that took it (0: none known).
    pub worker: u32,
    /// Failures recorded for it (set by record_failure), for the events
    /// of the retry or discard that follows.
    pub failures: AtomicU32,
}

impl Job {
    pub fn tracked(claimed: ClaimedJob, sampled: bool, worker: u32) -> Self {
        Job { claimed, settled: AtomicBool::new(false), sampled, worker, failures: AtomicU32::new(0) }
    }

    /// The job as the telemetry sees it.
    pub fn as_tracked(&self) -> solid_core::telemetry::Tracked<'_> {
        solid_core::telemetry::Tracked { job: &self.claimed, sampled: self.sampled, worker: self.worker }
    }

    /// Marks the job settled; errors when it already was.
    pub fn settle(&self) -> Result<&ClaimedJob, Error> {
        if self.settled.swap(true, Ordering::AcqRel) {
            return Err(internal(&format!("job {} was already settled", self.claimed.envelope.id)));
        }
        Ok(&self.claimed)
    }

    /// Runs a settling write; marks the job settled only when the outcome is
    /// final (written, or rejected as stale), so a connection error can be
    /// retried with the same job.
    pub fn settle_with(
        &self,
        op: impl FnOnce(&ClaimedJob) -> Result<solid_core::Result<()>, Error>,
    ) -> Result<(), Error> {
        if self.is_settled_flag() {
            return Err(internal(&format!("job {} was already settled", self.claimed.envelope.id)));
        }
        let out = op(&self.claimed)?;
        if solid_core::source::is_final(&out) {
            self.settled.store(true, Ordering::Release);
        }
        out.map_err(crate::helpers::errors::to_ruby)
    }

    fn id(&self) -> String {
        self.claimed.envelope.id.clone()
    }
    fn task(&self) -> String {
        self.claimed.envelope.task.clone()
    }
    /// The task name log lines use (an Active Job job's own class).
    fn logged_task(&self) -> String {
        self.claimed.envelope.logged_task().to_owned()
    }
    fn channel(&self) -> String {
        self.claimed.channel.clone()
    }
    fn token(&self) -> u64 {
        self.claimed.token
    }
    fn max_failures(&self) -> u32 {
        self.claimed.envelope.max_failures
    }
    fn queued_ms(&self) -> u64 {
        self.claimed.envelope.queued_ms
    }
    fn claimed_ms(&self) -> u64 {
        self.claimed.claimed_ms
    }
    fn arguments(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        to_ruby(ruby, &rb_self.claimed.envelope.arguments)
    }
    fn envelope(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        envelope_to_ruby(ruby, &rb_self.claimed.envelope)
    }
    fn raw(&self) -> String {
        self.claimed.raw.clone()
    }
    fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }
    /// The delivery number where the backend counts deliveries (SolidEngine),
    /// else nil.
    fn attempt(&self) -> Option<u32> {
        Some(self.claimed.attempts).filter(|&a| a > 0)
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Job", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("id", method!(Job::id, 0))?;
    class.define_method("task", method!(Job::task, 0))?;
    class.define_method("logged_task", method!(Job::logged_task, 0))?;
    class.define_method("channel", method!(Job::channel, 0))?;
    class.define_method("token", method!(Job::token, 0))?;
    class.define_method("max_failures", method!(Job::max_failures, 0))?;
    class.define_method("queued_ms", method!(Job::queued_ms, 0))?;
    class.define_method("claimed_ms", method!(Job::claimed_ms, 0))?;
    class.define_method("arguments", method!(Job::arguments, 0))?;
    class.define_method("envelope", method!(Job::envelope, 0))?;
    class.define_method("raw", method!(Job::raw, 0))?;
    class.define_method("settled?", method!(Job::is_settled, 0))?;
    class.define_method("attempt", method!(Job::attempt, 0))?;
    Ok(())
}

impl Job {
    pub fn is_settled_flag(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }
}
