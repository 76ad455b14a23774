//! What a backend provides to a worker node: claimed jobs on a channel, and
//! one way to settle each. Implemented for Redis ([`crate::redis::source`])
//! and SolidEngine ([`crate::engine::source`]); the [`crate::hub::Hub`] merges
//! any number of sources for the workers of one process.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::claim::{ClaimedJob, FailureCount};
use crate::error::{Error, Result};
use crate::feed::Feed;
use crate::telemetry::Telemetry;

pub trait JobSource: Send + Sync {
    /// Short name for logs and stats (`redis`, `engine`).
    fn name(&self) -> &str;
    /// The buffer between this source's fetcher and the workers, with its
    /// flags and counters; the provided methods below read it.
    fn feed(&self) -> &Feed;
    /// Claimed jobs waiting for a worker.
    fn jobs(&self) -> &Receiver<ClaimedJob> {
        self.feed().jobs()
    }
    /// A worker took `job` from `jobs()`.
    fn taken(&self, job: &mut ClaimedJob) {
        self.feed().taken(job)
    }
    /// Undoes `taken` for a job that will not run (the node began stopping
    /// as it was taken); shutdown hands it back like any unstarted job.
    fn untake(&self, job: ClaimedJob);
    /// Hands back, unstarted, a rate limited job that waited in the
    /// prefetch window longer than its start slack (decision 42): None when
    /// it went back to its list, the job itself when the backend cannot (it
    /// then runs). The default cannot.
    fn hand_back(&self, job: ClaimedJob) -> Option<ClaimedJob> {
        Some(job)
    }
    /// The task returned. May be written asynchronously: the job stays
    /// claimed until it is, so a crash before then reruns it.
    fn complete(&self, job: &ClaimedJob);
    /// Counts a failure; a retry or discard must follow.
    fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount>;
    /// Counts an attempt of a job whose task the worker does not know (a
    /// rolling deploy), apart from the task's own failures where the
    /// backend keeps failure counts; a retry or discard must follow. The
    /// default counts it as a failure (a backend that counts deliveries).
    fn record_unknown(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        self.record_failure(job, error_class, message)
    }
    fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()>;
    /// Gives the job up: into the archive (`archive`), or dropped.
    fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()>;
    /// Gives up a job that cannot run here (undecodable, unknown task).
    fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()>;
    /// Settles without writing: the job stays claimed for requeue/recovery.
    fn abandon(&self, job: &ClaimedJob);
    /// Stops claiming. Workers get `Stopped` on their next call; jobs
    /// already handed out keep running.
    fn stop_claiming(&self) {
        self.feed().stop()
    }
    fn is_stopping(&self) -> bool {
        self.feed().is_stopping()
    }
    /// Jobs handed to workers and not yet settled.
    fn inflight(&self) -> usize {
        self.feed().inflight()
    }
    /// Writes pending completions and hands back every job still held.
    /// Returns how many were handed back. Returns within `budget` even when
    /// the backend never answers: what could not be handed back by then is
    /// left to the backend's own recovery (dead-node recovery, lease expiry).
    fn shutdown(&self, budget: Duration) -> Result<u64>;
    fn stats(&self) -> &Stats {
        self.feed().stats()
    }
    /// Hands the source the node's telemetry, once, before workers start.
    /// `index` is its place in the hub (completions are reported by source
    /// and token); `writer` marks the one Redis source whose heartbeat
    /// thread writes the journal and observations and reads the node's
    /// control mailbox.
    fn attach(&self, _index: usize, _telemetry: Arc<Telemetry>, _writer: bool) {}
    /// Stops (true) or resumes (false) claiming new jobs without stopping
    /// the node: jobs already claimed still reach the workers.
    fn set_paused(&self, paused: bool) {
        self.feed().set_paused(paused)
    }
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
    /// Claim calls the fetcher made, and those of them that found nothing
    /// (a wake-up for nothing). Observation only (benchmark/nodes.rb).
    pub claim_calls: AtomicU64,
    pub empty_claims: AtomicU64,
    /// When an operation last got a reply from the backend (epoch ms; 0: never).
    pub last_ok_ms: AtomicU64,
    /// When an operation last failed to reach the backend (epoch ms; 0: never).
    pub last_error_ms: AtomicU64,
}

impl Stats {
    /// Notes the outcome of an operation the source performs anyway: any
    /// reply, even an error reply, proves the connection; only a failure to
    /// reach the backend counts against it. No command is ever sent just to
    /// find out (no PING).
    pub fn note<T>(&self, out: &Result<T>) {
        self.note_reached(!matches!(out, Err(e) if e.is_connection()));
    }

    pub fn note_reached(&self, reached: bool) {
        let at = if reached { &self.last_ok_ms } else { &self.last_error_ms };
        at.store(crate::now_ms(), Relaxed);
    }

    /// The connection as `redis.observed` reports it: `connected` while the
    /// last operation succeeded; `disconnected` after a failure, with the
    /// last success marked stale and its age; `unavailable` when nothing
    /// ever succeeded.
    pub fn connection(&self, now: u64) -> serde_json::Value {
        let ok = self.last_ok_ms.load(Relaxed);
        let error = self.last_error_ms.load(Relaxed);
        if ok == 0 {
            return serde_json::json!({"state": "unavailable", "at_ms": now});
        }
        let connected = ok >= error;
        serde_json::json!({
            "state": if connected { "connected" } else { "disconnected" },
            "at_ms": now,
            "last_ok_ms": ok,
            "stale": !connected,
            "age_ms": now.saturating_sub(ok),
        })
    }
}
