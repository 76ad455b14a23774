//! Every Redis key SolidJobs uses. `docs/keyspace.md` documents each one;
//! keep the two in step. All keys share one namespace prefix so an operator
//! can find (and a test can delete) everything with one pattern.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyspace {
    prefix: String,
}

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::new("solid_jobs")
    }
}

impl Keyspace {
    pub fn new(namespace: &str) -> Self {
        Keyspace { prefix: format!("{namespace}:") }
    }

    /// The namespace with its trailing colon; Lua scripts that derive channel
    /// keys from records stored inside Redis receive it as an argument.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{}", self.prefix, suffix)
    }

    /// STRING: a unique job's lock (docs/unique.md); the value is the id of
    /// the job holding it, `hex` the lock name `unique::lock_hex` makes.
    pub fn unique(&self, hex: &str) -> String {
        self.key(&format!("unique:{hex}"))
    }

    /// Pattern of every unique lock, for SCAN.
    pub fn unique_pattern(&self) -> String {
        self.key("unique:*")
    }

    /// SET of the claim tokens holding a slot of concurrency key `hex`
    /// (docs/flow-control.md): SADDed by the claim that records the claim,
    /// SREMed by the script that removes the claim record. At most the
    /// limit; vanishes when empty.
    pub fn slots(&self, hex: &str) -> String {
        self.key(&format!("slots:{hex}"))
    }

    /// LIST of `route|envelope` records of jobs over concurrency key `hex`'s
    /// limit, newest left; each released slot moves the oldest back.
    pub fn blocked(&self, hex: &str) -> String {
        self.key(&format!("blocked:{hex}"))
    }

    /// Patterns of every slot set and blocked list, for SCAN.
    pub fn slots_pattern(&self) -> String {
        self.key("slots:*")
    }

    pub fn blocked_pattern(&self) -> String {
        self.key("blocked:*")
    }

    // >>> rate limits (decision 42, docs/flow-control.md "Rate limits")
    /// LIST of the Redis-clock ms of rate key `hex`'s last <= limit
    /// admissions, oldest left; PEXPIREd by the window on every write.
    pub fn rate(&self, hex: &str) -> String {
        self.key(&format!("rate:{hex}"))
    }

    /// LIST of `route|envelope` records of jobs over rate key `hex`'s
    /// limit, newest left; `promote.lua` moves the oldest back when the key
    /// wakes.
    pub fn throttled(&self, hex: &str) -> String {
        self.key(&format!("throttled:{hex}"))
    }

    /// ZSET of throttled rate keys (hex), score = Redis-clock ms when the
    /// key's oldest throttled job may be admitted.
    pub fn flow_wake(&self) -> String {
        self.key("flow:wake")
    }

    /// Patterns of every rate log and throttled list, for SCAN.
    pub fn rate_pattern(&self) -> String {
        self.key("rate:*")
    }

    pub fn throttled_pattern(&self) -> String {
        self.key("throttled:*")
    }
    // <<< rate limits

    /// LIST of ready envelopes. Producers LPUSH; claims RPOP (oldest first);
    /// requeue RPUSHes, so requeued work is the next to run.
    pub fn channel(&self, name: &str) -> String {
        self.key(&format!("channel:{name}"))
    }
    /// SET of every channel name ever written to.
    pub fn channels(&self) -> String {
        self.key("channels")
    }
    /// ZSET of `channel|envelope` scored by due time (ms): scheduled jobs.
    pub fn planned(&self) -> String {
        self.key("planned")
    }
    /// ZSET of `channel|envelope` scored by due time (ms): failed jobs waiting to retry.
    pub fn retrying(&self) -> String {
        self.key("retrying")
    }
    /// HASH job id -> JSON failure record (failures, first/last failure ms, last error).
    pub fn attempts(&self) -> String {
        self.key("attempts")
    }
    /// ZSET of archived (discarded) job ids scored by discard time (ms).
    pub fn archive(&self) -> String {
        self.key("archive")
    }
    /// HASH job id -> JSON archive record (envelope, reason, error).
    pub fn archive_entries(&self) -> String {
        self.key("archive:entries")
    }
    /// HASH claim token -> `channel|claimed_ms|envelope` for one node.
    pub fn claims(&self, node_id: &str) -> String {
        self.key(&format!("claims:{node_id}"))
    }
    /// STRING with a TTL: the node's heartbeat and description.
    pub fn node(&self, node_id: &str) -> String {
        self.key(&format!("node:{node_id}"))
    }
    /// SET of node ids that may hold claims.
    pub fn nodes(&self) -> String {
        self.key("nodes")
    }
    /// ZSET node id -> when its heartbeat key expires (Redis-clock ms):
    /// where a heartbeat looks for dead nodes, in O(log nodes). Written by
    /// heartbeat.lua, removed by requeue.lua with the node's registration.
    pub fn node_deadlines(&self) -> String {
        self.key("node_deadlines")
    }
    /// HASH job id -> `state|channel[|node|token]` for every live job:
    /// deduplication, get and cancel by id.
    pub fn jobs(&self) -> String {
        self.key("jobs")
    }
    /// STRING counter of cancelled jobs not yet dropped; while it is zero,
    /// claims skip the job index entirely.
    pub fn cancelling(&self) -> String {
        self.key("cancelling")
    }
    /// STRING with a TTL: marks claim `token` as retried or discarded, so
    /// the same settle resent after a lost reply is recognised as done.
    pub fn settled(&self, token: u64) -> String {
        self.key(&format!("settled:{token}"))
    }
    /// STRING counter: the source of monotonically increasing claim tokens
    /// (raised to a floor from Redis's clock by every claim, so it survives
    /// a rollback).
    pub fn fence(&self) -> String {
        self.key("fence")
    }
    /// STRING with a TTL: what a node held at its last heartbeat,
    /// `floor|checked_ms|token,token,...`, for `IntegrityCheck`.
    pub fn holding(&self, node_id: &str) -> String {
        self.key(&format!("holding:{node_id}"))
    }
    /// STRING with a TTL: the last completion batch a node's acker wrote
    /// and what it found stale, so the same batch resent is recognised.
    pub fn acked(&self, node_id: &str) -> String {
        self.key(&format!("acked:{node_id}"))
    }
    /// LIST: the ids of the jobs completed most recently, one element per
    /// ack batch ("<processed total after it> id1 id2 ..."), newest first,
    /// bounded by `store::COMPLETED_KEPT` completions (`ack.lua`): what
    /// tells "completed" from "unknown" once a job's records are gone.
    pub fn completed(&self) -> String {
        self.key("completed")
    }
    /// STRING: the namespace's incarnation (Redis TIME when a heartbeat
    /// found it missing); it changes only when the namespace was lost.
    pub fn incarnation(&self) -> String {
        self.key("incarnation")
    }
    /// STRING counter of a metric (`processed`, `failed`, `retried`, `discarded`, `stale`...).
    pub fn metric(&self, name: &str) -> String {
        self.key(&format!("metric:{name}"))
    }
    /// Pub/sub channel: `planned` when a new earliest due time is written,
    /// `throttled` when a new earliest rate wake is. Every node listens.
    /// (`ready` rings moved to [`Keyspace::doorbell_channel`], decision 50;
    /// a node still takes any other message here for `ready`, as a
    /// producer of an earlier version sends it.)
    pub fn doorbell(&self) -> String {
        self.key("doorbell")
    }
    /// Pub/sub channel: `ready` when a list of channel `channel` (its base
    /// list or a priority level's, `channel:<name>:<p>`) goes from empty to
    /// non-empty. Only the nodes serving the channel listen, so a push wakes
    /// no node that could not claim it (decision 50). The scripts build it
    /// as `doorbell() + ":" + channel` (`ring_channels` in prelude.lua).
    pub fn doorbell_channel(&self, channel: &str) -> String {
        self.key(&format!("doorbell:{channel}"))
    }
    /// ZSET of `due_ms|channel|envelope` scored by expiry (ms): publications
    /// written but not yet visible, while the publisher emits its events
    /// (the publication barrier, docs/observability.md).
    pub fn publishing(&self) -> String {
        self.key("publishing")
    }
    /// STREAM: the telemetry journal (capped; `seq` per source shows gaps).
    pub fn telemetry(&self) -> String {
        self.key("telemetry")
    }
    /// HASH: a node's latest observations (node, process, ractors, redis).
    pub fn observations(&self, node_id: &str) -> String {
        self.key(&format!("observations:{node_id}"))
    }
    /// LIST: a node's control mailbox (pause, resume, backtraces, shutdown).
    pub fn control(&self, node_id: &str) -> String {
        self.key(&format!("control:{node_id}"))
    }
    /// STRING with a TTL: the backtraces a node wrote on request.
    pub fn backtraces(&self, node_id: &str) -> String {
        self.key(&format!("backtraces:{node_id}"))
    }
    /// SET of task names seen by nodes and publishers.
    pub fn tasks(&self) -> String {
        self.key("tasks")
    }

    /// HASH: one recurring schedule's state (`tick_ms` last tick decided,
    /// `decided_ms`, `outcome`, `job_id`/`job_tick_ms`/`enqueued_ms` of its
    /// last job), expiring a day (or a period) after its next tick unless
    /// a node decides another (`recurring.lua`).
    pub fn recurring(&self, name: &str) -> String {
        self.key(&format!("recurring:{name}"))
    }

    /// STRING: a channel's flow control flags, read by every claim in the
    /// MGET it already makes. Byte 0 is `P` while the channel is paused
    /// (`pause.lua`, `resume.lua`); bytes 1..10 are reserved for the
    /// priority levels in use. Absent for a channel never paused.
    pub fn flow(&self, channel: &str) -> String {
        self.key(&format!("flow:{channel}"))
    }
    /// HASH channel -> `{"paused_ms","by"}` for every paused channel, for
    /// the dashboard, Catalog and `solid-jobs channel list`.
    pub fn paused(&self) -> String {
        self.key("paused")
    }

    /// SCAN pattern matching every schedule's state; what `*` matched is the schedule name.
    pub fn recurring_pattern(&self) -> String {
        self.recurring("*")
    }
    /// SCAN pattern matching every channel list; what `*` matched is the channel name.
    pub fn channel_pattern(&self) -> String {
        self.channel("*")
    }
    /// SCAN pattern matching every node's claim hash; what `*` matched is the node id.
    pub fn claims_pattern(&self) -> String {
        self.claims("*")
    }
    /// SCAN pattern matching every node's observations; what `*` matched is the node id.
    pub fn observations_pattern(&self) -> String {
        self.observations("*")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_namespaced() {
        let k = Keyspace::default();
        for key in [
            k.channel("critical"),
            k.channels(),
            k.planned(),
            k.retrying(),
            k.attempts(),
            k.archive(),
            k.archive_entries(),
            k.claims("n1"),
            k.node("n1"),
            k.nodes(),
            k.node_deadlines(),
            k.fence(),
            k.holding("n1"),
            k.acked("n1"),
            k.completed(),
            k.incarnation(),
            k.jobs(),
            k.cancelling(),
            k.settled(7),
            k.metric("processed"),
            k.doorbell(),
            k.doorbell_channel("mailers"),
            k.publishing(),
            k.telemetry(),
            k.observations("n1"),
            k.control("n1"),
            k.backtraces("n1"),
            k.tasks(),
            k.recurring("heartbeat"),
            k.recurring_pattern(),
            k.channel_pattern(),
            k.claims_pattern(),
            k.observations_pattern(),
            k.flow("mailers"),
            k.paused(),
            k.slots("ab"),
            k.blocked("ab"),
            k.slots_pattern(),
            k.blocked_pattern(),
        ] {
            assert!(key.starts_with("solid_jobs:"), "{key}");
        }
        assert_eq!(k.channel("critical"), "solid_jobs:channel:critical");
        assert_eq!(Keyspace::new("t1").claims("n"), "t1:claims:n");
        // The scripts append `:<channel>` to the doorbell they are given.
        assert_eq!(k.doorbell_channel("mailers"), format!("{}:mailers", k.doorbell()));
        // A pattern is its key with `*` in the name's place, so stripping
        // the text before `*` from a matched key yields the name.
        assert_eq!(k.channel_pattern(), "solid_jobs:channel:*");
        assert_eq!(k.observations_pattern(), "solid_jobs:observations:*");
    }
}
