//! Typed wrappers over the Lua scripts: one method per state transition, each
//! one round trip. Callers bring the connection, so the same code serves the
//! pooled request/response path and the dispatcher's own threads.
//!
//! Clocks: times passed in (`due_ms`, `expires_ms`) are on this process's
//! clock. Only the delay each implies is sent; the scripts add it to Redis'
//! own clock (`TIME`) and compare due times against that clock alone, so a
//! node or producer whose clock is skewed neither promotes early nor late
//! (docs/reliability.md, "Clocks").

use std::time::Duration;

use redis::{Connection, Value};

use crate::claim::{ClaimToken, ClaimedJob, FailureCount, MAX_BATCH};
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::now_ms;
use crate::recurring::Missed;
use crate::redis::connection::query_pipeline;
use crate::redis::keyspace::Keyspace;
use crate::redis::scripts::Scripts;
pub use crate::redis::store_pause::{ChannelFlow, PausedChannel};

/// Default limits of the archive, the one definition: the glue exposes them
/// as `SolidJobs::Native::ARCHIVE_MAX_ENTRIES` / `ARCHIVE_MAX_AGE` (seconds),
/// which `lib/solid_jobs/configuration.rb` uses as its defaults.
pub const ARCHIVE_MAX_ENTRIES: u64 = 10_000;
pub const ARCHIVE_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Limits of the archive of discarded jobs.
#[derive(Debug, Clone, Copy)]
pub struct ArchivePolicy {
    pub max_entries: u64,
    pub max_age_ms: u64,
}

impl Default for ArchivePolicy {
    fn default() -> Self {
        ArchivePolicy { max_entries: ARCHIVE_MAX_ENTRIES, max_age_ms: ARCHIVE_MAX_AGE.as_millis() as u64 }
    }
}

/// Completions the `completed` list keeps the ids of (the newest, plus at
/// most one batch: `ack.lua` writes one element per batch), so a lookup
/// tells a recently completed job from an unknown id. About 40 bytes each:
/// under half a megabyte.
pub const COMPLETED_KEPT: u64 = 10_000;

/// Which claims of a node `requeue.lua` moves back to the head of their
/// channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Every claim of the node itself, which is leaving; it is deregistered.
    Shutdown,
    /// Every claim of a node whose heartbeat expired, and it is
    /// deregistered; nothing while it heartbeats. Atomic, so when several
    /// nodes recover the same dead node at once exactly one moves its claims.
    Recover,
    /// Only the claims one `claim` call recorded with this stamp (its
    /// `claimed_ms`): its reply was lost, so no worker will run them. The
    /// node stays registered.
    Release { stamp: u64 },
}

impl Requeue {
    /// The mode argument of `requeue.lua`.
    fn mode(self) -> &'static str {
        match self {
            Requeue::Shutdown => "shutdown",
            Requeue::Recover => "recover",
            Requeue::Release { .. } => "release",
        }
    }

    fn stamp(self) -> u64 {
        match self {
            Requeue::Release { stamp } => stamp,
            Requeue::Shutdown | Requeue::Recover => 0,
        }
    }
}

/// A claimed entry that could not be decoded: it is quarantined, not run.
#[derive(Debug, Clone)]
pub struct Malformed {
    pub token: ClaimToken,
    pub channel: String,
    pub raw: String,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct ClaimBatch {
    pub jobs: Vec<ClaimedJob>,
    pub malformed: Vec<Malformed>,
    /// The flow strings (`flow:<name>`) of the visited channels that have
    /// one, from the claim's trailer: which of them are paused.
    pub flow: Vec<ChannelFlow>,
    /// The claim stopped at its blocked budget (concurrency limits, from
    /// the reply trailer): its lists may still hold claimable jobs, so a
    /// short batch does not mean they were empty.
    pub more: bool,
}

impl ClaimBatch {
    pub fn len(&self) -> usize {
        self.jobs.len() + self.malformed.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A live (or archived) job as `job_state` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// ready, planned, retrying, claimed, cancelled or archived.
    pub state: String,
    pub channel: String,
    /// The envelope, when it can be read without a scan (claimed, archived).
    pub envelope: Option<String>,
}

pub struct Store {
    pub keys: Keyspace,
    pub(super) scripts: Scripts,
    pub archive: ArchivePolicy,
}

impl Store {
    pub fn new(keys: Keyspace) -> Self {
        Store { keys, scripts: Scripts::default(), archive: ArchivePolicy::default() }
    }

    /// Pushes ready envelopes (all for one channel), in chunks of MAX_BATCH.
    /// Envelopes whose id is already live are skipped; returns how many
    /// were written.
    pub fn enqueue(&self, conn: &mut Connection, channel: &str, envelopes: &[String]) -> Result<u64> {
        let mut written = 0;
        for chunk in envelopes.chunks(MAX_BATCH) {
            let mut inv = self.scripts.enqueue.prepare_invoke();
            inv.key(self.keys.channel(channel))
                .key(self.keys.channels())
                .key(self.keys.doorbell())
                .key(self.keys.jobs())
                .arg(channel);
            for e in chunk {
                inv.arg(e);
            }
            written += inv.invoke::<u64>(conn)?;
        }
        Ok(written)
    }

    /// Plans envelopes (all for one channel) for `due_ms` (this process's
    /// clock: the job is due as long after Redis' now as `due_ms` is after
    /// ours); like `enqueue`, skips live ids and returns how many were
    /// written.
    pub fn schedule(&self, conn: &mut Connection, channel: &str, due_ms: u64, envelopes: &[String]) -> Result<u64> {
        let mut written = 0;
        let delay_ms = due_ms.saturating_sub(now_ms());
        for chunk in envelopes.chunks(MAX_BATCH) {
            let mut inv = self.scripts.schedule.prepare_invoke();
            inv.key(self.keys.planned())
                .key(self.keys.channels())
                .key(self.keys.doorbell())
                .key(self.keys.jobs())
                .arg(delay_ms)
                .arg(channel);
            for e in chunk {
                inv.arg(e);
            }
            written += inv.invoke::<u64>(conn)?;
        }
        Ok(written)
    }

    /// Enqueues (or, with `due_ms`, plans) the jobs of a unique task on one
    /// channel: each `(lock hex, envelope)` is written with its lock, or not
    /// at all when the lock names a live job. `lock_ttl_ms` (the `for:`
    /// option) bounds each lock; 0 for none. `archive_max_age_ms` is the
    /// producer's `archive_max_age`: an archived `:until_done` holder counts
    /// only while its archive entry is younger (on Redis' clock), trimmed
    /// or not. Returns, per envelope, the id it stands for: its own when
    /// written, the holder's for a duplicate.
    pub fn enqueue_unique(
        &self,
        conn: &mut Connection,
        channel: &str,
        due_ms: Option<u64>,
        lock_ttl_ms: u64,
        archive_max_age_ms: u64,
        jobs: &[(String, Envelope)],
    ) -> Result<Vec<String>> {
        let mut ids = Vec::with_capacity(jobs.len());
        let delay = due_ms.filter(|&d| d > now_ms()).map(|d| d.saturating_sub(now_ms()).to_string());
        for chunk in jobs.chunks(MAX_BATCH) {
            let mut inv = self.scripts.enqueue_unique.prepare_invoke();
            inv.key(if delay.is_some() { self.keys.planned() } else { self.keys.channel(channel) })
                .key(self.keys.channels())
                .key(self.keys.doorbell())
                .key(self.keys.jobs())
                .key(self.keys.archive())
                .arg(delay.as_deref().unwrap_or(""))
                .arg(channel)
                .arg(lock_ttl_ms)
                .arg(self.keys.prefix())
                .arg(archive_max_age_ms);
            for (hex, env) in chunk {
                inv.arg(hex).arg(&env.id).arg(env.encode());
            }
            ids.extend(inv.invoke::<Vec<String>>(conn)?);
        }
        Ok(ids)
    }

    /// Cancels a waiting (ready, planned, retrying) job. Ok(false) when it is
    /// not live or already cancelled; an error when it is running.
    /// true when a waiting job was cancelled, false when the id is unknown
    /// or already cancelled; Err(JobRunning) when the job is claimed.
    pub fn cancel(&self, conn: &mut Connection, job_id: &str) -> Result<bool> {
        let out: redis::RedisResult<i64> = self
            .scripts
            .cancel
            .key(self.keys.jobs())
            .key(self.keys.cancelling())
            .key(self.keys.nodes())
            .arg(job_id)
            .arg(self.keys.prefix())
            .invoke(conn);
        match out {
            Ok(n) => Ok(n == 1),
            Err(e) if e.code() == Some("RUNNING") => Err(Error::JobRunning(job_id.to_owned())),
            Err(e) => Err(e.into()),
        }
    }

    /// Where a job is: its state, channel and, when claimed or archived, its
    /// envelope. None when the job is unknown or completed.
    pub fn job_state(&self, conn: &mut Connection, job_id: &str) -> Result<Option<JobState>> {
        let found: Option<(String, String, String, String)> = self
            .scripts
            .find
            .key(self.keys.jobs())
            .key(self.keys.nodes())
            .arg(job_id)
            .arg(self.keys.prefix())
            .invoke(conn)?;
        if let Some((state, channel, node, token)) = found {
            let envelope = if node.is_empty() {
                None
            } else {
                let record: Option<String> = redis::cmd("HGET").arg(self.keys.claims(&node)).arg(&token).query(conn)?;
                record.and_then(|r| crate::redis::claim::decode_record(&r).map(|(_, _, raw)| raw.to_owned()))
            };
            return Ok(Some(JobState { state, channel, envelope }));
        }
        let archived: Option<String> = redis::cmd("HGET").arg(self.keys.archive_entries()).arg(job_id).query(conn)?;
        Ok(archived.map(|record| {
            let record: serde_json::Value = serde_json::from_str(&record).unwrap_or_default();
            JobState {
                state: "archived".into(),
                channel: record.get("channel").and_then(|c| c.as_str()).unwrap_or_default().to_owned(),
                envelope: record.get("raw").and_then(|r| r.as_str()).map(str::to_owned),
            }
        }))
    }

    /// Claims up to `max` jobs for `node_id` from `channels` in that order.
    /// `stamp` is recorded as the claims' `claimed_ms`; a caller that makes
    /// it unique per call can release the batch if the reply is lost.
    pub fn claim(
        &self,
        conn: &mut Connection,
        node_id: &str,
        channels: &[&str],
        max: usize,
        stamp: u64,
    ) -> Result<ClaimBatch> {
        let mut inv = self.scripts.claim.prepare_invoke();
        self.claim_invocation(&mut inv, node_id, channels, max, stamp);
        let flat: Vec<Value> = inv.invoke(conn)?;
        parse_claim(flat, stamp)
    }

    /// Completes `done` as [`Store::ack_resendable`] does, then claims as
    /// [`Store::claim`] does, in one script call (`ack_claim.lua`, decision
    /// 51). Returns the stale tokens, and the claim or why it was refused
    /// (`NODE_EXPIRED`): the completions applied either way. An `Err` means
    /// neither is known to have applied or not.
    pub fn ack_claim(
        &self,
        conn: &mut Connection,
        node_id: &str,
        done: &[(ClaimToken, String)],
        channels: &[&str],
        max: usize,
        stamp: u64,
    ) -> Result<(Vec<ClaimToken>, Result<ClaimBatch>)> {
        if done.len() > MAX_BATCH {
            // A caller that cut the batch itself would count the rest as
            // written: refused, not cut.
            return Err(Error::Invalid(format!("at most {MAX_BATCH} completions per claim, not {}", done.len())));
        }
        let mut inv = self.scripts.ack_claim.prepare_invoke();
        inv.arg(2 + 2 * done.len());
        self.ack_invocation(&mut inv, node_id, done, true);
        self.claim_invocation(&mut inv, node_id, channels, max, stamp);
        let (stale, claimed): (Vec<ClaimToken>, Value) = inv.invoke(conn)?;
        let claimed = match claimed {
            Value::Array(flat) => parse_claim(flat, stamp),
            refused => Err(Error::Redis(redis::from_redis_value::<String>(&refused)?)),
        };
        Ok((stale, claimed))
    }

    fn claim_invocation(
        &self,
        inv: &mut redis::ScriptInvocation<'_>,
        node_id: &str,
        channels: &[&str],
        max: usize,
        stamp: u64,
    ) {
        inv.key(self.keys.claims(node_id))
            .key(self.keys.fence())
            .key(self.keys.node(node_id))
            .key(self.keys.jobs())
            .key(self.keys.metric("cancelled"))
            .key(self.keys.cancelling())
            .key(self.keys.attempts());
        for c in channels {
            inv.key(self.keys.channel(c));
        }
        for c in channels {
            inv.key(self.keys.flow(c));
        }
        inv.arg(max.min(MAX_BATCH)).arg(stamp);
        for c in channels {
            inv.arg(*c);
        }
    }

    /// Completes claims; returns the stale tokens (rejected, nothing changed).
    /// Completing a claim twice is stale the second time, as for a caller
    /// of the adapter API that acks twice.
    pub fn ack(&self, conn: &mut Connection, node_id: &str, done: &[(ClaimToken, String)]) -> Result<Vec<ClaimToken>> {
        self.ack_batches(conn, node_id, done, false)
    }

    /// [`Store::ack`] for a writer that never completes a claim twice and
    /// resends a batch, unchanged, only when it got no reply (a node's
    /// acker): the batch again, after it applied, gets the first answer and
    /// changes nothing, instead of reading as stale. One more write per
    /// call (the node's `acked` marker).
    pub fn ack_resendable(
        &self,
        conn: &mut Connection,
        node_id: &str,
        done: &[(ClaimToken, String)],
    ) -> Result<Vec<ClaimToken>> {
        self.ack_batches(conn, node_id, done, true)
    }

    fn ack_batches(
        &self,
        conn: &mut Connection,
        node_id: &str,
        done: &[(ClaimToken, String)],
        resendable: bool,
    ) -> Result<Vec<ClaimToken>> {
        let mut stale = Vec::new();
        for chunk in done.chunks(MAX_BATCH) {
            let mut inv = self.scripts.ack.prepare_invoke();
            self.ack_invocation(&mut inv, node_id, chunk, resendable);
            let s: Vec<ClaimToken> = inv.invoke(conn)?;
            stale.extend(s);
        }
        Ok(stale)
    }

    /// `ack.lua`'s keys and arguments for one batch (at most MAX_BATCH).
    fn ack_invocation(
        &self,
        inv: &mut redis::ScriptInvocation<'_>,
        node_id: &str,
        done: &[(ClaimToken, String)],
        resendable: bool,
    ) {
        inv.key(self.keys.claims(node_id))
            .key(self.keys.attempts())
            .key(self.keys.metric("processed"))
            .key(self.keys.metric("stale"))
            .key(self.keys.jobs())
            .key(self.keys.acked(node_id))
            .key(self.keys.completed())
            .arg(if resendable { "1" } else { "0" })
            .arg(COMPLETED_KEPT);
        for (token, id) in done {
            inv.arg(*token).arg(id);
        }
    }

    /// Counts one failure of a claimed job. The script keeps failure times on
    /// Redis' clock; the returned `first_failure_ms` is moved onto this
    /// process's clock (now here, minus how long ago Redis says the first
    /// failure was), so `now_ms() - first_failure_ms` is the time the job has
    /// been failing whichever nodes recorded its failures.
    pub fn record_failure(
        &self,
        conn: &mut Connection,
        node_id: &str,
        token: ClaimToken,
        job_id: &str,
        error_class: &str,
        message: &str,
    ) -> Result<FailureCount> {
        self.record_attempt(conn, node_id, token, job_id, error_class, message, false)
    }

    /// Counts one attempt of a claimed job whose task the worker does not
    /// know, apart from the task's own failures: the returned count and
    /// time are the unknown attempts' (`unknown`, `first_unknown_ms` in the
    /// attempts record), and the failure count the task's policy reads later
    /// is left as it was. A retry or discard must follow.
    pub fn record_unknown(
        &self,
        conn: &mut Connection,
        node_id: &str,
        token: ClaimToken,
        job_id: &str,
        error_class: &str,
        message: &str,
    ) -> Result<FailureCount> {
        self.record_attempt(conn, node_id, token, job_id, error_class, message, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn record_attempt(
        &self,
        conn: &mut Connection,
        node_id: &str,
        token: ClaimToken,
        job_id: &str,
        error_class: &str,
        message: &str,
        unknown: bool,
    ) -> Result<FailureCount> {
        let v: Value = self
            .scripts
            .record_failure
            .key(self.keys.claims(node_id))
            .key(self.keys.attempts())
            .key(self.keys.metric("failed"))
            .key(self.keys.metric("stale"))
            .arg(token)
            .arg(job_id)
            .arg(error_class)
            .arg(message)
            .arg(if unknown { "1" } else { "0" })
            .invoke(conn)?;
        match v {
            Value::Int(-1) => Err(Error::StaleClaim(token)),
            other => {
                let (failures, first, redis_now): (u32, u64, u64) = redis::from_redis_value(&other)?;
                let first_failure_ms = now_ms().saturating_sub(redis_now.saturating_sub(first));
                Ok(FailureCount { failures, first_failure_ms })
            }
        }
    }

    /// Moves a claimed job to the retry set, due at `due_ms` (this process's
    /// clock; sent as a delay, see the module documentation). The envelope
    /// is rewritten with `queued_ms = due_ms` so latency counts from
    /// readiness.
    pub fn retry(&self, conn: &mut Connection, node_id: &str, job: &ClaimedJob, due_ms: u64) -> Result<()> {
        let mut env = job.envelope.clone();
        env.queued_ms = due_ms;
        // The route, not the bare channel: promotion puts a prioritized job
        // back in its own level's list (decision 41).
        let route = job.route();
        let member = format!("{route}|{}", env.encode());
        let ok: i64 = self
            .scripts
            .retry
            .key(self.keys.claims(node_id))
            .key(self.keys.retrying())
            .key(self.keys.doorbell())
            .key(self.keys.metric("stale"))
            .key(self.keys.jobs())
            .key(self.keys.settled(job.token))
            .key(self.keys.metric("retried"))
            .arg(job.token)
            .arg(due_ms.saturating_sub(now_ms()))
            .arg(member)
            .arg(&job.envelope.id)
            .arg(&route)
            .invoke(conn)?;
        if ok == 1 {
            Ok(())
        } else {
            Err(Error::StaleClaim(job.token))
        }
    }

    /// Gives a job up. `token` is `None` for an entry that is not claimed.
    /// With `archive` false the job is dropped without a trace but a metric.
    pub fn discard(
        &self,
        conn: &mut Connection,
        node_id: &str,
        token: Option<ClaimToken>,
        job_id: &str,
        record: &serde_json::Value,
        archive: bool,
    ) -> Result<()> {
        // A unique job's lock, named by its envelope (the record's `raw`).
        let lock = record
            .get("raw")
            .and_then(|r| r.as_str())
            .and_then(|raw| Envelope::decode(raw).ok())
            .and_then(|env| crate::unique::lock_of(env.meta.as_ref()));
        let (hex, mode) = lock.map_or((String::new(), ""), |(hex, mode)| (hex, mode.as_str()));
        let ok: i64 = self
            .scripts
            .discard
            .key(self.keys.claims(node_id))
            .key(self.keys.archive())
            .key(self.keys.archive_entries())
            .key(self.keys.attempts())
            .key(self.keys.metric("discarded"))
            .key(self.keys.metric("stale"))
            .key(self.keys.jobs())
            .key(self.keys.settled(token.unwrap_or_default()))
            .arg(token.map(|t| t.to_string()).unwrap_or_default())
            .arg(job_id)
            .arg(record.to_string())
            .arg(self.archive.max_entries)
            .arg(self.archive.max_age_ms)
            .arg(if archive { "1" } else { "0" })
            .arg(hex)
            .arg(mode)
            .invoke(conn)?;
        if ok == 1 {
            Ok(())
        } else {
            Err(Error::StaleClaim(token.unwrap_or_default()))
        }
    }

    /// Quarantines a claimed entry that cannot run, keeping it with a reason.
    pub fn quarantine(
        &self,
        conn: &mut Connection,
        node_id: &str,
        token: ClaimToken,
        channel: &str,
        raw: &str,
        reason: &str,
    ) -> Result<()> {
        let id = serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_owned))
            .filter(|id| uuid::Uuid::parse_str(id).is_ok())
            .unwrap_or_else(|| format!("quarantined-{}", uuid::Uuid::new_v4()));
        let record = serde_json::json!({
            "id": id, "channel": channel, "reason": reason, "raw": raw,
            "discarded_ms": now_ms(), "kind": "quarantined",
        });
        self.discard(conn, node_id, Some(token), &id, &record, true)
    }

    /// Promotes planned and retrying jobs due on Redis' clock; returns
    /// (moved, how long until the next one is due).
    pub fn promote(&self, conn: &mut Connection, limit: usize) -> Result<(u64, Option<Duration>)> {
        // >>> rate limits: the one invocation lives in store_rate.rs.
        self.promote_waking(conn, limit, false).map(|(moved, next, _)| (moved, next))
        // <<< rate limits
    }

    /// Requeues claims of `node_id` (which ones: see [`Requeue`]) at the head
    /// of their channels; returns how many. None when `Requeue::Recover`
    /// finds the node alive.
    pub fn requeue(&self, conn: &mut Connection, node_id: &str, which: Requeue) -> Result<Option<u64>> {
        let n: i64 = self.requeue_invocation(node_id, which, false).invoke(conn)?;
        Ok(u64::try_from(n).ok())
    }

    /// `requeue.lua` for `node_id`; with `report`, it returns each job moved
    /// instead of a count.
    fn requeue_invocation(&self, node_id: &str, which: Requeue, report: bool) -> redis::ScriptInvocation<'_> {
        let mut inv = self.scripts.requeue.prepare_invoke();
        inv.key(self.keys.claims(node_id))
            .key(self.keys.node(node_id))
            .key(self.keys.nodes())
            .key(self.keys.doorbell())
            .key(self.keys.archive_entries())
            .key(self.keys.jobs())
            .arg(self.keys.prefix())
            .arg(node_id)
            .arg(which.mode())
            .arg(which.stamp())
            .arg(if report { "1" } else { "0" });
        inv
    }

    /// Puts an archived job back on its channel with `queued_ms` = now and a
    /// fresh failure count. Returns false when it is no longer archived.
    pub fn unarchive(&self, conn: &mut Connection, job_id: &str) -> Result<bool> {
        let record: Option<String> = redis::cmd("HGET").arg(self.keys.archive_entries()).arg(job_id).query(conn)?;
        let Some(record) = record else { return Ok(false) };
        let record: serde_json::Value =
            serde_json::from_str(&record).map_err(|e| Error::Envelope(format!("archive record of {job_id}: {e}")))?;
        let raw = record
            .get("raw")
            .and_then(|r| r.as_str())
            .ok_or_else(|| Error::Envelope(format!("archive record of {job_id} has no envelope")))?;
        let mut env = Envelope::decode(raw)
            .map_err(|e| Error::Envelope(format!("archived job {job_id} cannot be re-enqueued: {e}")))?;
        env.queued_ms = now_ms();
        let route = crate::priority::route_of(&env);
        let ok: i64 = self
            .scripts
            .unarchive
            .key(self.keys.archive())
            .key(self.keys.archive_entries())
            .key(self.keys.channel(&route))
            .key(self.keys.channels())
            .key(self.keys.doorbell())
            .key(self.keys.jobs())
            .arg(job_id)
            .arg(&route)
            .arg(env.encode())
            .invoke(conn)?;
        Ok(ok == 1)
    }

    /// Recovers every registered node whose heartbeat expired; returns how
    /// many jobs went back to their channels. What each worker's heartbeat
    /// does, on demand.
    pub fn recover_dead_nodes(&self, conn: &mut Connection) -> Result<u64> {
        let nodes: Vec<String> = redis::cmd("SMEMBERS").arg(self.keys.nodes()).query(conn)?;
        let mut total = 0;
        for node in nodes {
            total += self.requeue(conn, &node, Requeue::Recover)?.unwrap_or(0);
        }
        Ok(total)
    }

    /// Registers `node_id` (or refreshes its registration) for `ttl_ms`,
    /// releases expired publication barriers, and takes up to
    /// `take_requests` control requests from the node's mailbox (only its
    /// heartbeat thread asks for any; other callers pass 0 and leave the
    /// mailbox alone). Reports whether any served channel has ready jobs and
    /// which registered nodes have expired. Leaves the node's claims alone:
    /// see [`Store::heartbeat_holding`].
    pub fn heartbeat(
        &self,
        conn: &mut Connection,
        node_id: &str,
        ttl_ms: u64,
        description: &str,
        channels: &[&str],
        take_requests: usize,
    ) -> Result<Heartbeat> {
        self.heartbeat_holding(conn, node_id, ttl_ms, description, channels, take_requests, None)
    }

    /// [`Store::heartbeat`], and with `held` (what the node holds) in the
    /// same script call: every claim recorded under the node that it does
    /// not hold, stamped below `held.floor`, goes back to the head of its
    /// channel (their job ids are in `Heartbeat::handed_back`), and the
    /// node's holding record is written for `IntegrityCheck`.
    #[allow(clippy::too_many_arguments)]
    pub fn heartbeat_holding(
        &self,
        conn: &mut Connection,
        node_id: &str,
        ttl_ms: u64,
        description: &str,
        channels: &[&str],
        take_requests: usize,
        held: Option<&Held>,
    ) -> Result<Heartbeat> {
        let mut inv = self.scripts.heartbeat.prepare_invoke();
        inv.key(self.keys.node(node_id))
            .key(self.keys.nodes())
            .key(self.keys.control(node_id))
            .key(self.keys.publishing())
            .key(self.keys.planned())
            .key(self.keys.doorbell())
            .key(self.keys.jobs())
            .key(self.keys.metric("cancelled"))
            .key(self.keys.cancelling())
            .key(self.keys.attempts())
            .key(self.keys.archive_entries());
        for c in channels {
            inv.key(self.keys.channel(c));
        }
        inv.arg(node_id).arg(ttl_ms).arg(description).arg(self.keys.prefix()).arg(take_requests);
        match held {
            // A floor of 0 reconciles nothing; stamps start above it.
            Some(held) => {
                inv.arg(held.floor.max(1)).arg(held.check);
                for token in &held.tokens {
                    inv.arg(*token);
                }
            }
            None => {
                inv.arg(0);
            }
        }
        let out: Vec<Value> = inv.invoke(conn)?;
        let int =
            |i: usize| -> Result<u64> { Ok(out.get(i).map(redis::from_redis_value::<u64>).transpose()?.unwrap_or(0)) };
        let strings = |range: std::ops::Range<usize>| -> Result<Vec<String>> {
            out.get(range).unwrap_or_default().iter().map(|v| redis::from_redis_value(v).map_err(Error::from)).collect()
        };
        let ready = int(0)? == 1;
        let released = int(1)?;
        let incarnation = out.get(2).map(redis::from_redis_value::<String>).transpose()?.unwrap_or_default();
        let fence = int(3)?;
        let previous_check = Some(int(4)?).filter(|&c| c > 0);
        let u = int(5)? as usize;
        let handed_back = strings(6..6 + u)?;
        let k = int(6 + u)? as usize;
        let requests = strings(7 + u..7 + u + k)?;
        let dead = strings(7 + u + k..out.len().max(7 + u + k))?;
        Ok(Heartbeat { ready, released, requests, dead, incarnation, fence, previous_check, handed_back })
    }

    /// Writes publications behind the publication barrier (`hold.lua`):
    /// invisible until `release` or until `expires_ms`, when a node's
    /// heartbeat releases them. `due_ms` None: ready once released. Both
    /// times are on this process's clock and sent as delays (see the module
    /// documentation). Returns the members to release
    /// (`due_ms|channel|envelope`, with the due time Redis recorded), one
    /// per envelope (ids already live are skipped by the script, as by
    /// `enqueue`; releasing their member finds nothing).
    pub fn hold(
        &self,
        conn: &mut Connection,
        channel: &str,
        due_ms: Option<u64>,
        expires_ms: u64,
        envelopes: &[String],
    ) -> Result<Vec<String>> {
        let now = now_ms();
        let ttl_ms = expires_ms.saturating_sub(now);
        // 0 means ready once released, so a due time not in the future is 0.
        let delay_ms = due_ms.map_or(0, |d| d.saturating_sub(now));
        let mut members = Vec::with_capacity(envelopes.len());
        for chunk in envelopes.chunks(MAX_BATCH) {
            let mut inv = self.scripts.hold.prepare_invoke();
            inv.key(self.keys.publishing())
                .key(self.keys.channels())
                .key(self.keys.jobs())
                .arg(ttl_ms)
                .arg(channel)
                .arg(delay_ms);
            for e in chunk {
                inv.arg(e);
            }
            let (_written, due): (u64, u64) = inv.invoke(conn)?;
            members.extend(chunk.iter().map(|e| format!("{due}|{channel}|{e}")));
        }
        Ok(members)
    }

    /// Lifts the publication barrier for `members` (from `hold`); returns
    /// how many became visible (a member whose barrier expired was already
    /// released by a heartbeat and is skipped).
    pub fn release(&self, conn: &mut Connection, members: &[String]) -> Result<u64> {
        let mut released = 0;
        for chunk in members.chunks(MAX_BATCH) {
            let mut inv = self.scripts.release.prepare_invoke();
            inv.key(self.keys.publishing())
                .key(self.keys.planned())
                .key(self.keys.doorbell())
                .key(self.keys.jobs())
                .key(self.keys.metric("cancelled"))
                .key(self.keys.cancelling())
                .key(self.keys.attempts())
                .key(self.keys.archive_entries())
                .arg(self.keys.prefix());
            for m in chunk {
                inv.arg(m);
            }
            released += inv.invoke::<u64>(conn)?;
        }
        Ok(released)
    }

    /// Appends a control request to a node's mailbox, which lives as long as
    /// a node could take to read it (`ttl_ms`) so an unread mailbox of a
    /// dead node disappears.
    pub fn request_control(&self, conn: &mut Connection, node_id: &str, request: &str, ttl_ms: u64) -> Result<()> {
        let key = self.keys.control(node_id);
        let mut pipe = redis::pipe();
        pipe.atomic().rpush(&key, request).ignore().pexpire(&key, ttl_ms as i64).ignore();
        query_pipeline::<()>(&pipe, conn)?;
        Ok(())
    }

    /// Removes a job from the archive for good. Returns false when it was
    /// not archived.
    pub fn forget_archived(&self, conn: &mut Connection, job_id: &str) -> Result<bool> {
        let removed: i64 = self
            .scripts
            .forget
            .key(self.keys.archive())
            .key(self.keys.archive_entries())
            .key(self.keys.jobs())
            .arg(job_id)
            .invoke(conn)?;
        Ok(removed == 1)
    }

    /// The registered nodes as a health check sees them, on Redis' clock
    /// (one read-only script: a probe's bound is one round trip). At most
    /// `limit` nodes are listed; `registered` counts them all.
    pub fn node_health(&self, conn: &mut Connection, limit: usize) -> Result<NodeHealth> {
        let v: Vec<Value> =
            self.scripts.health.key(self.keys.nodes()).arg(self.keys.prefix()).arg(limit).invoke(conn)?;
        let number = |v: Option<&Value>| -> Result<i64> {
            v.map(redis::from_redis_value::<i64>)
                .transpose()?
                .ok_or_else(|| Error::Invalid("short health reply".into()))
        };
        let now_ms = number(v.first())? as u64;
        let registered = number(v.get(1))? as u64;
        let mut nodes = Vec::new();
        for triple in v.get(2..).unwrap_or_default().chunks(3) {
            if let [id, ttl, description] = triple {
                nodes.push(NodeBeat {
                    id: redis::from_redis_value(id)?,
                    ttl_ms: redis::from_redis_value(ttl)?,
                    description: redis::from_redis_value(description)?,
                });
            }
        }
        Ok(NodeHealth { now_ms, registered, nodes })
    }

    /// Proposes tick `tick_ms` of a recurring schedule (`recurring.lua`):
    /// enqueues `envelope` (its job) only if Redis' clock has reached the
    /// tick and no node decided this tick, or a later one, before. One
    /// round trip, one atomic script.
    pub fn enqueue_tick(&self, conn: &mut Connection, tick: &TickProposal<'_>) -> Result<TickDecision> {
        let (outcome, now_ms, last, before): (String, u64, i64, i64) = self
            .scripts
            .recurring
            .key(self.keys.recurring(tick.name))
            .key(self.keys.channel(&tick.envelope.channel))
            .key(self.keys.channels())
            .key(self.keys.doorbell())
            .key(self.keys.jobs())
            .arg(tick.tick_ms)
            .arg(tick.next_ms.unwrap_or(0))
            .arg(tick.missed.as_str())
            .arg(tick.on_time_ms)
            .arg(tick.retention_ms)
            .arg(&tick.envelope.channel)
            .arg(tick.envelope.encode())
            .arg(&tick.envelope.id)
            .invoke(conn)?;
        let outcome = match outcome.as_str() {
            "enqueued" => TickOutcome::Enqueued,
            "skipped" => TickOutcome::Skipped,
            "seen" => TickOutcome::Seen,
            "early" => TickOutcome::Early,
            "stale" => TickOutcome::Stale,
            other => return Err(Error::Invalid(format!("unexpected recurring.lua outcome {other:?}"))),
        };
        Ok(TickDecision { outcome, now_ms, last_ms: u64::try_from(last).ok(), previous_ms: u64::try_from(before).ok() })
    }

    /// Requeues the claims of `node_id` while its heartbeat is absent, and
    /// reports each job moved. None while the node is alive.
    pub fn recover_node(&self, conn: &mut Connection, node_id: &str) -> Result<Option<Vec<RecoveredJob>>> {
        self.requeue_reporting(conn, node_id, Requeue::Recover)
    }

    /// `requeue` that also reports each job moved (the same one script
    /// call; the reply carries the moved records), for per-job log lines
    /// at shutdown. None while a node to recover is alive.
    pub fn requeue_reporting(
        &self,
        conn: &mut Connection,
        node_id: &str,
        which: Requeue,
    ) -> Result<Option<Vec<RecoveredJob>>> {
        let v: Value = self.requeue_invocation(node_id, which, true).invoke(conn)?;
        let Value::Array(items) = v else { return Ok(None) };
        let mut jobs = Vec::new();
        for triple in items.get(1..).unwrap_or_default().chunks(3) {
            if let [t, c, r] = triple {
                let token: u64 = redis::from_redis_value(t)?;
                let channel: String = redis::from_redis_value(c)?;
                let raw: String = redis::from_redis_value(r)?;
                jobs.push(RecoveredJob { token, channel, envelope: Envelope::decode(&raw).ok() });
            }
        }
        Ok(Some(jobs))
    }
}

/// What `Store::node_health` read.
#[derive(Debug)]
pub struct NodeHealth {
    /// Redis' clock when it was read.
    pub now_ms: u64,
    pub registered: u64,
    pub nodes: Vec<NodeBeat>,
}

/// One registered node: the remaining life of its heartbeat key (PTTL:
/// -2 once it expired) and the description its last heartbeat wrote.
#[derive(Debug)]
pub struct NodeBeat {
    pub id: String,
    pub ttl_ms: i64,
    pub description: Option<String>,
}

/// What one heartbeat learned (see `Store::heartbeat`).
#[derive(Debug, Default)]
pub struct Heartbeat {
    pub ready: bool,
    /// Publication barriers that expired and were released.
    pub released: u64,
    /// Control requests taken from the node's mailbox, oldest first.
    pub requests: Vec<String>,
    /// Registered nodes whose heartbeat has expired.
    pub dead: Vec<String>,
    /// The namespace's incarnation: it changes only when Redis lost the
    /// namespace (every key gone) and a heartbeat created it again.
    pub incarnation: String,
    /// The fence counter: below a token a node was given only after Redis
    /// went back in time (claims raise it past its clock floor).
    pub fence: u64,
    /// The check stamp of the holding record this heartbeat replaced (see
    /// [`Held::check`]); None when there was none (or no reconciliation).
    pub previous_check: Option<u64>,
    /// Job ids (or `token N` for a record without one) of claims recorded
    /// under the node that it did not hold, handed back to their channels.
    pub handed_back: Vec<String>,
}

/// What a node holds, for the heartbeat to reconcile its claims against:
/// every token claimed and not yet settled in Redis, and `floor`, the stamp
/// of the node's oldest claim call whose outcome it does not know yet (or
/// of its next one). A claim stamped at or above the floor may still be on
/// its way to the node and is left alone.
///
/// `check` stamps this heartbeat's holding record (increasing per node): a
/// later heartbeat that finds a record with an older check than the last
/// one Redis acknowledged learns that Redis lost writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub floor: u64,
    pub check: u64,
    pub tokens: Vec<ClaimToken>,
}

/// A job moved back to its channel from a node's claims (a dead node's,
/// or this node's own at shutdown).
#[derive(Debug, Clone)]
pub struct RecoveredJob {
    /// The dead node's claim token.
    pub token: ClaimToken,
    pub channel: String,
    /// None when the envelope does not decode (it was requeued anyway).
    pub envelope: Option<Envelope>,
}

/// One tick a node proposes to `recurring.lua` (see `Store::enqueue_tick`).
#[derive(Debug)]
pub struct TickProposal<'a> {
    pub name: &'a str,
    pub tick_ms: u64,
    /// The schedule's tick after this one, for the state's retention.
    pub next_ms: Option<u64>,
    pub missed: Missed,
    /// A tick decided later than this after its time was missed.
    pub on_time_ms: u64,
    /// The least time the state outlives the next tick.
    pub retention_ms: u64,
    /// The tick's job.
    pub envelope: &'a Envelope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickOutcome {
    /// This proposal enqueued the tick's job.
    Enqueued,
    /// A missed tick the schedule's policy does not run, now decided.
    Skipped,
    /// This tick, or a later one, was decided before: nothing written.
    Seen,
    /// Redis' clock has not reached the tick: nothing written.
    Early,
    /// A missed tick, while a later one is due by Redis' clock: nothing
    /// written (only the latest missed tick may be decided).
    Stale,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickDecision {
    pub outcome: TickOutcome,
    /// Redis' clock when the script ran.
    pub now_ms: u64,
    /// The schedule's last decided tick after the call (None: none yet).
    pub last_ms: Option<u64>,
    /// The schedule's last decided tick before the call, as Redis holds it
    /// (None: no state, or `Early`, which reads none). Below a tick this
    /// node saw decided, Redis has lost writes.
    pub previous_ms: Option<u64>,
}

/// A claim script's reply (see `claim.lua`): the jobs in claim order, the
/// entries that did not decode, and the trailer.
fn parse_claim(flat: Vec<Value>, stamp: u64) -> Result<ClaimBatch> {
    let mut batch = ClaimBatch::default();
    for triple in flat.chunks(3) {
        let (token, channel, raw): (ClaimToken, String, String) = match triple {
            [t, c, r] => (redis::from_redis_value(t)?, redis::from_redis_value(c)?, redis::from_redis_value(r)?),
            _ => return Err(Error::Redis("claim script returned a partial record".into())),
        };
        // The trailer (token 0, never a real token): the channels' flow
        // strings, and `more` in its third field.
        if token == 0 {
            batch.flow = ChannelFlow::parse_trailer(&channel);
            batch.more = raw == "1";
            continue;
        }
        // >>> priority: the reply names the route (`name` or `name:p`).
        let (channel, priority) = match crate::priority::split_route(&channel) {
            Ok((name, p)) => (name.to_owned(), p),
            Err(_) => (channel, crate::priority::DEFAULT),
        };
        // <<< priority
        match Envelope::decode(&raw) {
            Ok(envelope) => batch.jobs.push(ClaimedJob {
                token,
                channel,
                priority,
                raw,
                envelope,
                claimed_ms: stamp,
                taken_at: None,
                source: 0,
                attempts: 0,
            }),
            Err(e) => batch.malformed.push(Malformed { token, channel, raw, reason: e.to_string() }),
        }
    }
    Ok(batch)
}
