//! What a backend provides to a worker node: claimed jobs on a channel, and
//! one way to settle each. Implemented for Redis ([`crate::redis_source`])
//! and SolidEngine ([`crate::engine_source`]); the [`crate::hub::Hub`] merges
//! any number of sources for the workers of one process.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::claim::ClaimedJob;
use crate::error::{Error, Result};
use crate::store::FailureCount;

pub trait JobSource: Send + Sync {
    /// Short name for logs and stats (`redis`, `engine`).
    fn name(&self) -> &str;
    /// Claimed jobs waiting for a worker.
    fn jobs(&self) -> &Receiver<ClaimedJob>;
    /// A worker took `job` from `jobs()`.
    fn taken(&self, job: &mut ClaimedJob);
    /// Undoes `taken` for a job that will not run (the node began stopping
    /// as it was taken); shutdown hands it back like any unstarted job.
    fn untake(&self, job: ClaimedJob);
    /// The task returned. May be written asynchronously: the job stays
    /// claimed until it is, so a crash before then reruns it.
    fn complete(&self, job: &ClaimedJob);
    /// Counts a failure; a retry or discard must follow.
    fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount>;
    fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()>;
    /// Gives the job up: into the archive (`archive`), or dropped.
    fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()>;
    /// Gives up a job that cannot run here (undecodable, unknown task).
    fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()>;
    /// Settles without writing: the job stays claimed for requeue/recovery.
    fn abandon(&self, job: &ClaimedJob);
    fn stop_claiming(&self);
    fn is_stopping(&self) -> bool;
    /// Jobs handed to workers and not yet settled.
    fn inflight(&self) -> usize;
    /// Writes pending completions and hands back every job still held.
    /// Returns how many were handed back.
    fn shutdown(&self, flush_timeout: Duration) -> Result<u64>;
    fn stats(&self) -> &Stats;
}

/// True when a settle outcome ends the job's claim: written, or rejected as
/// stale (someone else owns the job now). A connection error is not final:
/// the caller may try again.
pub fn is_final(out: &Result<()>) -> bool {
    matches!(out, Ok(()) | Err(Error::StaleClaim(_)))
}

/// Counters exposed for observation; never used for decisions.
#[derive(Default)]
pub struct Stats {
    pub claimed: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub stale: AtomicU64,
    pub quarantined: AtomicU64,
    pub recovered: AtomicU64,
    pub promoted: AtomicU64,
    pub redis_errors: AtomicU64,
}
