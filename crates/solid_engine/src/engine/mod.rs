//! The job state machine.
//!
//! ```text
//!   PUSH AT(future)      due                 FETCH              ACK
//!  ───────────────▶ scheduled ──────▶ ready ───────▶ reserved ─────▶ completed
//!                      │  ▲   PUSH ──▶  │  ▲ lease expiry │  │ FAIL
//!               CANCEL │  └─── RETRY ───┼──┼────────────────┘  └─────▶ dead
//!                      ▼                │  └─ RELEASE ─┘
//!                  cancelled ◀──────────┘ CANCEL
//! ```
//!
//! Lease expiry and RELEASE both put the job back at the head of its
//! channel; RELEASE also takes back the attempt (the reservation never
//! reached a task).
//!
//! Guarantees:
//! - Pure and deterministic: no I/O, no threads, no clock. Every operation
//!   takes `now_ms`; the same calls with the same times give the same result.
//! - Fencing: each reservation gets a fresh token from one monotonic
//!   counter. Only the current token can ack, retry, fail, extend or
//!   release; any
//!   other token is `STALE` and changes nothing.
//! - A lease is valid while `now_ms < deadline`. Expiry, promotion of due
//!   jobs and retention pruning are applied lazily at the start of every
//!   operation (and by `tick`), so results never depend on when a
//!   housekeeping thread last ran.
//! - O(1) work per job (amortised): jobs live in a `HashMap`; ready queues,
//!   heaps and retention lists hold `(id, seq)` entries that are deleted
//!   lazily: an entry is valid only while the job still carries that `seq`
//!   (or, for leases, that fence and deadline), so removing a job from the
//!   middle of a queue is just a state change.

mod replay;
mod types;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

pub use types::*;

use crate::error::Error;

/// Accounting overhead per job beyond its payload, used only to decide when
/// the log is much larger than the live state.
const JOB_OVERHEAD_BYTES: u64 = 96;

/// The latest time the engine keeps (due times, lease deadlines): the
/// largest the protocol can show (a RESP integer is an i64). Times past
/// it (a delay of i64::MAX added to now) saturate to it, "never" in
/// practice, instead of wrapping to a negative time that is already past.
pub const MAX_TIME_MS: u64 = i64::MAX as u64;

/// `now + delay`, saturated at [`MAX_TIME_MS`].
pub fn time_after(now_ms: u64, delay_ms: u64) -> u64 {
    now_ms.saturating_add(delay_ms).min(MAX_TIME_MS)
}

/// ACKMANY's answer per pair (docs/protocol.md).
pub const NOT_ACKED: i64 = 0;
pub const ACKED: i64 = 1;
pub const ALREADY_ACKED: i64 = 2;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Lease used when FETCH / EXTEND pass 0.
    pub lease_ms: u64,
    /// How long completed and cancelled jobs stay visible to GET and dedup.
    pub completed_retention_ms: u64,
    /// How many dead jobs are kept (the newest).
    pub dead_max: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { lease_ms: 30_000, completed_retention_ms: 60_000, dead_max: 10_000 }
    }
}

struct Job {
    channel: u32,
    state: State,
    attempts: u32,
    /// Token of the job's current queue/heap/list entry (lazy deletion).
    seq: u64,
    /// The current reservation's fence (meaningful while reserved).
    fence: u64,
    /// Due time (scheduled), lease deadline (reserved), finish time
    /// (completed, dead, cancelled).
    time_ms: u64,
    payload: Payload,
    reason: Option<Payload>,
}

/// What a housekeeping tick changed; the server wakes blocked fetchers when
/// jobs became ready.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    pub promoted: usize,
    pub expired: usize,
    pub pruned: usize,
}

impl Tick {
    pub fn made_ready(&self) -> bool {
        self.promoted + self.expired > 0
    }
}

pub struct Engine {
    config: EngineConfig,
    jobs: HashMap<JobId, Job, Hasher>,
    ready: HashMap<u32, VecDeque<(JobId, u64)>, Hasher>,
    /// (due, seq, id)
    scheduled: BinaryHeap<Reverse<(u64, u64, JobId)>>,
    /// (deadline, fence, id)
    leases: BinaryHeap<Reverse<(u64, u64, JobId)>>,
    /// Completed and cancelled jobs in finish order: (finished at, seq, id).
    finished: VecDeque<(u64, u64, JobId)>,
    /// Dead jobs, oldest first: (seq, id).
    dead: VecDeque<(u64, JobId)>,
    next_seq: u64,
    next_fence: u64,
    stats: Stats,
    /// Live jobs per channel and state (STATS' gauges, split by channel),
    /// touched on every transition.
    channels: ChannelMap,
    live_bytes: u64,
    /// `Some` when durability is on: the events not yet taken by storage.
    journal: Option<Vec<Event>>,
    /// `Some` in a server: how many jobs became ready on which channel
    /// since the server last took them, so it wakes that many blocked
    /// FETCHes of those channels and no others.
    readied: Option<Vec<(u32, usize)>>,
}

fn gauge(stats: &mut Stats, state: State) -> &mut u64 {
    match state {
        State::Scheduled => &mut stats.scheduled,
        State::Ready => &mut stats.ready,
        State::Reserved => &mut stats.reserved,
        State::Completed => &mut stats.completed,
        State::Dead => &mut stats.dead,
        State::Cancelled => &mut stats.cancelled,
    }
}

/// The engine's maps are hashed with foldhash, seeded at random per map
/// (hashbrown's default), not std's SipHash, which made PUSH+FETCH+ACK
/// 1.1-1.4x slower (decision 49). Job ids and channel ids come from
/// clients: the random seed makes colliding keys hard to choose blind, but
/// foldhash does not claim SipHash's resistance to a client that can time
/// its requests; the engine accepts that for its authenticated clients.
type Hasher = foldhash::fast::RandomState;
type ChannelMap = HashMap<u32, ChannelCounts, Hasher>;

/// Channels whose per-channel gauges are kept at zero rather than removed:
/// a channel that drains after every job (the common case) would otherwise
/// remove and re-insert its entry per job. Past this many entries an empty
/// one is removed at once, so a client spreading jobs over a million
/// channel ids leaves no more entries than live jobs beyond it.
const EMPTY_CHANNELS_KEPT: usize = 1024;

/// Moves one job of `channel` from state `from` to `to` in the per-channel
/// gauges (None: the job is created, or forgotten).
fn count_channel(channels: &mut ChannelMap, channel: u32, from: Option<State>, to: Option<State>) {
    let counts = channels.entry(channel).or_default();
    if let Some(gauge) = from.and_then(|s| counts.gauge(s)) {
        *gauge -= 1;
    }
    if let Some(gauge) = to.and_then(|s| counts.gauge(s)) {
        *gauge += 1;
    }
    if counts.is_empty() && channels.len() > EMPTY_CHANNELS_KEPT {
        channels.remove(&channel);
    }
}

fn set_state(stats: &mut Stats, channels: &mut ChannelMap, job: &mut Job, to: State) {
    *gauge(stats, job.state) -= 1;
    *gauge(stats, to) += 1;
    count_channel(channels, job.channel, Some(job.state), Some(to));
    job.state = to;
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config,
            jobs: HashMap::default(),
            ready: HashMap::default(),
            scheduled: BinaryHeap::new(),
            leases: BinaryHeap::new(),
            finished: VecDeque::new(),
            dead: VecDeque::new(),
            next_seq: 1,
            next_fence: 1,
            stats: Stats::default(),
            channels: ChannelMap::default(),
            live_bytes: 0,
            journal: None,
            readied: None,
        }
    }

    /// Starts counting the jobs that become ready, per channel (see
    /// [`Engine::take_readied`]); recovery runs without it.
    pub fn track_readied(&mut self) {
        self.readied.get_or_insert_with(Vec::new);
    }

    /// (channel, jobs) that became ready since the last call, in order.
    /// Every way a job becomes ready counts: push, retry, release, lease
    /// expiry, a due job promoted by any operation's tick.
    pub fn take_readied(&mut self, out: &mut Vec<(u32, usize)>) {
        if let Some(readied) = self.readied.as_mut() {
            out.append(readied);
        }
    }

    fn note_ready(&mut self, channel: u32) {
        if let Some(readied) = self.readied.as_mut() {
            match readied.last_mut() {
                Some((c, n)) if *c == channel => *n += 1,
                _ => readied.push((channel, 1)),
            }
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Turns journaling of [`Event`]s on (durable modes) or off (memory).
    pub fn set_journal(&mut self, enabled: bool) {
        self.journal = if enabled { Some(Vec::new()) } else { None };
    }

    /// Moves the journaled events into `out`, in the order they happened.
    pub fn take_events(&mut self, out: &mut Vec<Event>) {
        if let Some(journal) = self.journal.as_mut() {
            out.append(journal);
        }
    }

    fn record(&mut self, event: impl FnOnce() -> Event) {
        if let Some(journal) = self.journal.as_mut() {
            journal.push(event());
        }
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }

    /// Room for `jobs` more jobs without growing the job table (a rebuild
    /// that knows the size ahead: growing by doubling re-hashes every job
    /// and faults in fresh pages each time).
    pub fn reserve(&mut self, jobs: usize) {
        self.jobs.reserve(jobs);
    }

    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Approximate bytes of live state (for the compaction decision).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// The next fence that will be handed out.
    pub fn next_fence(&self) -> u64 {
        self.next_fence
    }

    /// Makes sure no fence below `floor` is ever handed out (after a restart,
    /// fences issued before it must never be reissued).
    pub fn raise_fence_floor(&mut self, floor: u64) {
        self.next_fence = self.next_fence.max(floor);
    }

    /// The earliest time at which a lease expires or a scheduled job is due
    /// (possibly of an entry already deleted: waking early is harmless).
    pub fn next_deadline(&self) -> Option<u64> {
        let lease = self.leases.peek().map(|Reverse((t, _, _))| *t);
        let due = self.scheduled.peek().map(|Reverse((t, _, _))| *t);
        match (lease, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ------------------------------------------------------- housekeeping

    /// Expires leases, promotes due jobs and forgets finished jobs past their
    /// retention. Every operation calls it first.
    pub fn tick(&mut self, now_ms: u64) -> Tick {
        let mut tick = Tick::default();
        let mut expired = Vec::new();
        while let Some(&Reverse((deadline, fence, id))) = self.leases.peek() {
            if deadline > now_ms {
                break;
            }
            self.leases.pop();
            if let Some(job) = self.jobs.get_mut(&id) {
                if job.state == State::Reserved && job.fence == fence && job.time_ms == deadline {
                    set_state(&mut self.stats, &mut self.channels, job, State::Ready);
                    expired.push(id);
                }
            }
        }
        // The earliest expired lease ends up first in its channel; journaled
        // in `requeue_front` order so replay builds the same queue.
        for id in expired.into_iter().rev() {
            self.requeue_front(id);
            self.record(|| Event::Expired { id });
            tick.expired += 1;
        }
        self.stats.expired_leases_total += tick.expired as u64;

        while let Some(&Reverse((due, seq, id))) = self.scheduled.peek() {
            if due > now_ms {
                break;
            }
            self.scheduled.pop();
            if self.jobs.get(&id).is_some_and(|j| j.state == State::Scheduled && j.seq == seq) {
                self.make_ready(id);
                self.record(|| Event::Promoted { id });
                tick.promoted += 1;
            }
        }

        self.collect_stale_entries();
        tick.pruned = self.prune(now_ms);
        tick
    }

    /// Forgets completed and cancelled jobs past their retention; returns
    /// how many. The one part of `tick` that is not journaled (it decides
    /// nothing about order), so a compaction that rebuilds the state from
    /// the log applies it itself; it must not promote or expire, which the
    /// log records.
    pub fn prune(&mut self, now_ms: u64) -> usize {
        let retention = self.config.completed_retention_ms;
        let mut pruned = 0;
        while let Some(&(at, seq, id)) = self.finished.front() {
            if at.saturating_add(retention) > now_ms {
                break;
            }
            self.finished.pop_front();
            let valid = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.seq == seq && matches!(j.state, State::Completed | State::Cancelled));
            if valid {
                self.forget(id);
                pruned += 1;
            }
        }
        pruned
    }

    /// Lazy deletion leaves dead entries behind: every acked job leaves its
    /// lease entry until the lease would have ended, every cancelled job its
    /// schedule entry. When dead entries outnumber live ones 3 to 1 the heap
    /// is rebuilt: O(n) work after at least 3n/4 additions, so O(1)
    /// amortised, and memory stays within 4x the live reservations.
    fn collect_stale_entries(&mut self) {
        const FLOOR: usize = 1024;
        let jobs = &self.jobs;
        if self.leases.len() > FLOOR && self.leases.len() > 4 * self.stats.reserved as usize {
            self.leases.retain(|Reverse((deadline, fence, id))| {
                jobs.get(id).is_some_and(|j| j.state == State::Reserved && j.fence == *fence && j.time_ms == *deadline)
            });
        }
        if self.scheduled.len() > FLOOR && self.scheduled.len() > 4 * self.stats.scheduled as usize {
            self.scheduled.retain(|Reverse((_, seq, id))| {
                jobs.get(id).is_some_and(|j| j.state == State::Scheduled && j.seq == *seq)
            });
        }
    }

    /// Entries in a channel's ready queue, valid or not (for tests).
    pub fn ready_queue_len(&self, channel: u32) -> usize {
        self.ready.get(&channel).map_or(0, VecDeque::len)
    }

    /// Entries in the lease and schedule heaps, valid or not (for tests).
    pub fn heap_entries(&self) -> (usize, usize) {
        (self.leases.len(), self.scheduled.len())
    }

    fn forget(&mut self, id: JobId) {
        if let Some(job) = self.jobs.remove(&id) {
            *gauge(&mut self.stats, job.state) -= 1;
            count_channel(&mut self.channels, job.channel, Some(job.state), None);
            self.live_bytes -= job.payload.len() as u64 + JOB_OVERHEAD_BYTES;
        }
    }

    /// Puts an already-`Ready` job at the back of its channel.
    fn make_ready(&mut self, id: JobId) {
        let seq = self.seq();
        let job = self.jobs.get_mut(&id).expect("job exists");
        set_state(&mut self.stats, &mut self.channels, job, State::Ready);
        job.seq = seq;
        let channel = job.channel;
        self.ready.entry(channel).or_default().push_back((id, seq));
        self.note_ready(channel);
    }

    /// Puts an already-`Ready` job at the head of its channel.
    fn requeue_front(&mut self, id: JobId) {
        let seq = self.seq();
        let job = self.jobs.get_mut(&id).expect("job exists");
        job.seq = seq;
        let channel = job.channel;
        self.ready.entry(channel).or_default().push_front((id, seq));
        self.note_ready(channel);
    }

    fn make_scheduled(&mut self, id: JobId, due_ms: u64) {
        let seq = self.seq();
        let job = self.jobs.get_mut(&id).expect("job exists");
        set_state(&mut self.stats, &mut self.channels, job, State::Scheduled);
        job.seq = seq;
        job.time_ms = due_ms;
        self.scheduled.push(Reverse((due_ms, seq, id)));
    }

    fn make_finished(&mut self, id: JobId, state: State, at_ms: u64) {
        let seq = self.seq();
        let job = self.jobs.get_mut(&id).expect("job exists");
        set_state(&mut self.stats, &mut self.channels, job, state);
        job.seq = seq;
        job.time_ms = at_ms;
        // A finished job is kept only for GET and deduplication: its payload
        // is dropped, or retention at full speed would hold gigabytes.
        self.live_bytes -= job.payload.len() as u64;
        job.payload = Payload::from(&[][..]);
        self.finished.push_back((at_ms, seq, id));
    }

    fn make_dead(&mut self, id: JobId, at_ms: u64, reason: Payload) {
        let seq = self.seq();
        let job = self.jobs.get_mut(&id).expect("job exists");
        set_state(&mut self.stats, &mut self.channels, job, State::Dead);
        job.seq = seq;
        job.time_ms = at_ms;
        job.reason = Some(reason);
        self.dead.push_back((seq, id));
        // Keep only the newest `dead_max`; stale entries are just dropped.
        while self.stats.dead as usize > self.config.dead_max {
            let Some((seq, id)) = self.dead.pop_front() else { break };
            if self.jobs.get(&id).is_some_and(|j| j.state == State::Dead && j.seq == seq) {
                self.forget(id);
            }
        }
    }

    /// Inserts a new job (replacing nothing: the caller checked). New jobs
    /// start as `Ready` in the gauges and then move to their real state.
    fn insert(&mut self, id: JobId, channel: u32, payload: Payload) {
        self.live_bytes += payload.len() as u64 + JOB_OVERHEAD_BYTES;
        self.stats.ready += 1;
        count_channel(&mut self.channels, channel, None, Some(State::Ready));
        self.jobs.insert(
            id,
            Job { channel, state: State::Ready, attempts: 0, seq: 0, fence: 0, time_ms: 0, payload, reason: None },
        );
    }

    /// A reserved job with exactly this fence, or the right error.
    fn reserved_mut(&mut self, id: JobId, fence: u64) -> Result<&mut Job, Error> {
        match self.jobs.get_mut(&id) {
            None => Err(Error::NotFound(id)),
            Some(job) if job.state == State::Reserved && job.fence == fence => Ok(job),
            Some(_) => Err(Error::Stale { id, fence }),
        }
    }

    // ---------------------------------------------------------- commands

    /// Creates a job unless one with this id is retained (then nothing
    /// changes). Returns whether it was created. `due_ms` in the past or
    /// absent means ready at once.
    pub fn push(&mut self, now_ms: u64, channel: u32, id: JobId, payload: Payload, due_ms: Option<u64>) -> bool {
        self.tick(now_ms);
        self.push_one(now_ms, channel, id, payload, due_ms.unwrap_or(0))
    }

    /// PUSHMANY: one channel and one due time (0 = now) for every job.
    pub fn push_many(
        &mut self,
        now_ms: u64,
        channel: u32,
        due_ms: u64,
        jobs: impl IntoIterator<Item = (JobId, Payload)>,
    ) -> u64 {
        self.tick(now_ms);
        let mut created = 0;
        for (id, payload) in jobs {
            created += u64::from(self.push_one(now_ms, channel, id, payload, due_ms));
        }
        created
    }

    fn push_one(&mut self, now_ms: u64, channel: u32, id: JobId, payload: Payload, due_ms: u64) -> bool {
        if self.jobs.contains_key(&id) {
            return false;
        }
        let due_ms = if due_ms > now_ms { due_ms.min(MAX_TIME_MS) } else { 0 };
        self.insert(id, channel, payload.clone());
        if due_ms > 0 {
            self.make_scheduled(id, due_ms);
        } else {
            self.make_ready(id);
        }
        self.stats.pushed_total += 1;
        self.record(|| Event::Pushed { id, channel, due_ms, payload });
        true
    }

    /// Reserves up to `count` ready jobs, visiting `channels` in the given
    /// order. `lease_ms == 0` means the configured default.
    pub fn fetch(&mut self, now_ms: u64, count: usize, lease_ms: u64, channels: &[u32], out: &mut Vec<Reservation>) {
        self.tick(now_ms);
        let lease_ms = if lease_ms == 0 { self.config.lease_ms } else { lease_ms };
        let deadline = time_after(now_ms, lease_ms);
        let target = out.len() + count;
        for channel in channels {
            if out.len() >= target {
                break;
            }
            let Some(queue) = self.ready.get_mut(channel) else { continue };
            while out.len() < target {
                let Some((id, seq)) = queue.pop_front() else { break };
                let Some(job) = self.jobs.get_mut(&id) else { continue };
                if job.state != State::Ready || job.seq != seq {
                    continue;
                }
                let fence = self.next_fence;
                self.next_fence += 1;
                set_state(&mut self.stats, &mut self.channels, job, State::Reserved);
                job.attempts += 1;
                job.fence = fence;
                job.time_ms = deadline;
                self.leases.push(Reverse((deadline, fence, id)));
                out.push(Reservation {
                    id,
                    channel: *channel,
                    fence,
                    attempts: job.attempts,
                    payload: job.payload.clone(),
                });
                if let Some(journal) = self.journal.as_mut() {
                    journal.push(Event::Reserved { id, fence });
                }
            }
            if queue.is_empty() {
                self.ready.remove(channel);
            }
        }
    }

    pub fn ack(&mut self, now_ms: u64, id: JobId, fence: u64) -> Result<(), Error> {
        self.tick(now_ms);
        self.ack_one(now_ms, id, fence)
    }

    /// Acks each pair: [`ACKED`] where acked now, [`ALREADY_ACKED`] where the
    /// job was completed by this same fence before (an ACKMANY resent after
    /// its reply was lost: the first attempt applied), [`NOT_ACKED`] where
    /// stale or unknown. A single ACK stays strict (a second one is STALE):
    /// ACKMANY is what a node's acker sends, and it never acks twice.
    pub fn ack_many(&mut self, now_ms: u64, pairs: &[(JobId, u64)]) -> Vec<i64> {
        self.tick(now_ms);
        pairs
            .iter()
            .map(|&(id, fence)| match self.ack_one(now_ms, id, fence) {
                Ok(()) => ACKED,
                Err(_) if self.jobs.get(&id).is_some_and(|j| j.state == State::Completed && j.fence == fence) => {
                    ALREADY_ACKED
                }
                Err(_) => NOT_ACKED,
            })
            .collect()
    }

    fn ack_one(&mut self, now_ms: u64, id: JobId, fence: u64) -> Result<(), Error> {
        self.reserved_mut(id, fence)?;
        self.make_finished(id, State::Completed, now_ms);
        self.stats.acked_total += 1;
        self.record(|| Event::Acked { id, at_ms: now_ms });
        Ok(())
    }

    /// The job becomes scheduled, due `now + delay`; attempts are kept.
    pub fn retry(&mut self, now_ms: u64, id: JobId, fence: u64, delay_ms: u64) -> Result<(), Error> {
        self.tick(now_ms);
        self.reserved_mut(id, fence)?;
        let due_ms = time_after(now_ms, delay_ms);
        self.make_scheduled(id, due_ms);
        self.stats.retried_total += 1;
        self.record(|| Event::Retried { id, due_ms });
        // A zero delay is due now: make it ready without waiting for a tick.
        self.tick(now_ms);
        Ok(())
    }

    pub fn fail(&mut self, now_ms: u64, id: JobId, fence: u64, reason: Payload) -> Result<(), Error> {
        self.tick(now_ms);
        self.reserved_mut(id, fence)?;
        self.make_dead(id, now_ms, reason.clone());
        self.stats.failed_total += 1;
        self.record(|| Event::Failed { id, at_ms: now_ms, reason });
        Ok(())
    }

    /// Hands back a reservation that never reached a task: the job becomes
    /// ready at the head of its channel (like lease expiry) and the attempt
    /// is taken back (`attempts - 1`, never below 0). Only the current
    /// fence may release; the fence is stale afterwards.
    pub fn release(&mut self, now_ms: u64, id: JobId, fence: u64) -> Result<(), Error> {
        self.tick(now_ms);
        self.release_one(id, fence)?;
        self.requeue_released(&[id]);
        Ok(())
    }

    /// RELEASEMANY: `true` where released, `false` where stale or unknown.
    /// The released jobs end up at the heads of their channels in the order
    /// given (the first pair first), as a batch of expired leases does.
    pub fn release_many(&mut self, now_ms: u64, pairs: &[(JobId, u64)]) -> Vec<bool> {
        self.tick(now_ms);
        let mut released = Vec::new();
        let results = pairs
            .iter()
            .map(|&(id, fence)| {
                let ok = self.release_one(id, fence).is_ok();
                if ok {
                    released.push(id);
                }
                ok
            })
            .collect();
        self.requeue_released(&released);
        results
    }

    /// Ends a reservation without queueing the job yet: `Ready`, one
    /// attempt less. A second pair for the same job is then stale.
    fn release_one(&mut self, id: JobId, fence: u64) -> Result<(), Error> {
        self.reserved_mut(id, fence)?;
        let job = self.jobs.get_mut(&id).expect("job exists");
        set_state(&mut self.stats, &mut self.channels, job, State::Ready);
        job.attempts = job.attempts.saturating_sub(1);
        Ok(())
    }

    /// Queues released jobs at the heads of their channels so that the
    /// first of `ids` ends up first, and journals them in the order of the
    /// `requeue_front` calls, so replay builds the same queues.
    fn requeue_released(&mut self, ids: &[JobId]) {
        for &id in ids.iter().rev() {
            self.requeue_front(id);
            self.record(|| Event::Released { id });
        }
        self.stats.released_total += ids.len() as u64;
    }

    /// Moves the lease deadline to `now + lease_ms` (0 = default lease).
    /// Not journaled: a recovered reservation is ready again anyway.
    pub fn extend(&mut self, now_ms: u64, id: JobId, fence: u64, lease_ms: u64) -> Result<(), Error> {
        self.tick(now_ms);
        let lease_ms = if lease_ms == 0 { self.config.lease_ms } else { lease_ms };
        let deadline = time_after(now_ms, lease_ms);
        let job = self.reserved_mut(id, fence)?;
        job.time_ms = deadline;
        self.leases.push(Reverse((deadline, fence, id)));
        Ok(())
    }

    /// `Ok(true)`: it was scheduled or ready and is now cancelled;
    /// `Ok(false)`: unknown or already finished; `Busy`: reserved.
    pub fn cancel(&mut self, now_ms: u64, id: JobId) -> Result<bool, Error> {
        self.tick(now_ms);
        match self.jobs.get(&id).map(|j| j.state) {
            Some(state @ (State::Scheduled | State::Ready)) => {
                if state == State::Ready {
                    // Removed now rather than skipped at FETCH: on a channel
                    // nobody fetches, push/cancel churn would otherwise grow
                    // its queue without bound. O(queue); cancel is rare.
                    let channel = self.jobs[&id].channel;
                    if let Some(queue) = self.ready.get_mut(&channel) {
                        queue.retain(|(queued, _)| *queued != id);
                    }
                }
                self.make_finished(id, State::Cancelled, now_ms);
                self.stats.cancelled_total += 1;
                self.record(|| Event::Cancelled { id, at_ms: now_ms });
                Ok(true)
            }
            Some(State::Reserved) => Err(Error::Busy(id)),
            _ => Ok(false),
        }
    }

    pub fn get(&mut self, now_ms: u64, id: JobId) -> Option<JobInfo> {
        self.tick(now_ms);
        self.jobs.get(&id).map(|job| JobInfo {
            id,
            channel: job.channel,
            state: job.state,
            attempts: job.attempts,
            payload: job.payload.clone(),
            due_ms: (job.state == State::Scheduled).then_some(job.time_ms),
        })
    }

    /// Channels with live jobs, by channel id (all of them for an empty
    /// `only`, else those asked for, in the order asked, zeros for one with
    /// none). Due scheduled jobs and expired leases are counted as what
    /// they have become, as every other command sees them.
    pub fn channels(&mut self, now_ms: u64, only: &[u32]) -> Vec<ChannelInfo> {
        self.tick(now_ms);
        let mut ids: Vec<u32> = if only.is_empty() {
            self.channels.iter().filter(|(_, c)| !c.is_empty()).map(|(id, _)| *id).collect()
        } else {
            only.to_vec()
        };
        if only.is_empty() {
            ids.sort_unstable();
        }
        ids.into_iter()
            .map(|channel| ChannelInfo {
                channel,
                counts: self.channels.get(&channel).copied().unwrap_or_default(),
                oldest_ready: self.head_of(channel),
            })
            .collect()
    }

    /// The job the next FETCH of `channel` would take. Entries of jobs that
    /// left the queue since (taken, cancelled, requeued elsewhere) are
    /// dropped on the way, as FETCH drops them.
    fn head_of(&mut self, channel: u32) -> Option<JobId> {
        let queue = self.ready.get_mut(&channel)?;
        let head = loop {
            let Some(&(id, seq)) = queue.front() else { break None };
            if self.jobs.get(&id).is_some_and(|job| job.state == State::Ready && job.seq == seq) {
                break Some(id);
            }
            queue.pop_front();
        };
        if queue.is_empty() {
            self.ready.remove(&channel);
        }
        head
    }

    /// Up to `count` dead jobs, newest first.
    pub fn dead(&self, count: usize) -> Vec<DeadJob> {
        self.dead
            .iter()
            .rev()
            .filter_map(|&(seq, id)| {
                let job = self.jobs.get(&id)?;
                (job.state == State::Dead && job.seq == seq).then(|| DeadJob {
                    id,
                    channel: job.channel,
                    attempts: job.attempts,
                    reason: job.reason.clone().unwrap_or_else(|| Payload::from(&b""[..])),
                    payload: job.payload.clone(),
                })
            })
            .take(count)
            .collect()
    }
}
