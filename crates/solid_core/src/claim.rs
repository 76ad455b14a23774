//! A claimed job: what a worker runs and what it needs to settle the claim.
//!
//! These types live at the top of the crate, not under `redis/` or
//! `engine/`: both backends produce them (a Redis claim, a SolidEngine
//! reservation), and the hub, the telemetry and the glue consume them
//! without knowing which backend a job came from. How a backend stores a
//! claim (the Redis claim hash record: [`crate::redis::claim`]) stays with
//! that backend.

use crate::envelope::Envelope;

/// The fencing token of one claim, unique across all nodes: on Redis a
/// value of the monotonically increasing `fence` counter, on SolidEngine the
/// reservation's fence. Settling a claim (ack, retry, discard) succeeds
/// only while the backend still holds this token for the job; once the job
/// was recovered or redelivered, the token is stale and rejected.
pub type ClaimToken = u64;

/// Most jobs moved by one backend call: a claim, a completion batch, one
/// script call (Lua's `unpack` has a stack limit, and a bounded call keeps
/// the backend responsive for everyone else).
pub const MAX_BATCH: usize = 1000;

#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub token: ClaimToken,
    pub channel: String,
    /// The job's priority, 0 (first) to 9 (last), 5 by default: with the
    /// channel it names the list the job came from ([`ClaimedJob::route`]).
    pub priority: u8,
    /// The exact bytes popped from the channel list; requeue pushes these back.
    pub raw: String,
    pub envelope: Envelope,
    pub claimed_ms: u64,
    /// When a worker took the job; its duration feeds the prefetch window.
    pub taken_at: Option<std::time::Instant>,
    /// Index of the job source (backend) in the hub that delivered it.
    pub source: usize,
    /// Deliveries of this job so far, including this one, when the backend
    /// counts them (SolidEngine); 0 when it does not (Redis).
    pub attempts: u32,
}

/// What recording a failure reports, whichever backend counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureCount {
    pub failures: u32,
    pub first_failure_ms: u64,
}

impl ClaimedJob {
    /// The job's route (`channel`, or `channel:p` for a priority other than
    /// 5): what a retry's `retrying` member names, so promotion puts the
    /// job back in its own level's list (decision 41).
    pub fn route(&self) -> String {
        crate::priority::route(&self.channel, self.priority)
    }
}

#[cfg(test)]
impl ClaimedJob {
    /// A job of `task` (no arguments) claimed from "default" under `token`,
    /// not yet taken: the fixture the feed's and the hub's unit tests share.
    pub(crate) fn for_test(task: &str, token: ClaimToken) -> Self {
        let envelope = Envelope::build(task, serde_json::json!([]), "default", 1, 0, 0).unwrap();
        ClaimedJob {
            token,
            channel: "default".into(),
            priority: crate::priority::DEFAULT,
            raw: envelope.encode(),
            envelope,
            claimed_ms: 0,
            taken_at: None,
            source: 0,
            attempts: 0,
        }
    }
}
