//! The Redis job source of a worker node. Rust threads claim jobs, settle
//! them and keep the node alive; workers (Ruby Ractors or threads) take jobs
//! through the [`crate::hub::Hub`] and call one settle method per job.
//!
//! Threads of one node:
//! - fetcher: keeps the prefetch window of unstarted jobs filled, in batches;
//! - acker: batches completions into one script call;
//! - heartbeat: refreshes the node key, promotes due jobs, recovers dead nodes;
//! - subscriber: turns doorbell messages into local wake-ups.
//!
//! Workers never share a Ruby object or a lock on the hot path: jobs reach
//! them through a lock-free channel, and completions leave the same way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::acker::{self, AckMsg};
use crate::channel_order::{ChannelOrder, ChannelSelector};
use crate::claim::{ClaimToken, ClaimedJob};
use crate::redis::connection::{Connector, Pool, Reconnecting};
use crate::redis::doorbell::{run_subscriber, Bells};
use crate::error::{Error, Result};
use crate::redis::keyspace::Keyspace;
use crate::log::log;
use crate::now_ms;
use crate::source::{JobSource, Stats};
use crate::prefetch::{Prefetch, PrefetchWindow};
use crate::claim::FailureCount;
use crate::redis::store::{ArchivePolicy, Store};
use crate::telemetry::{Telemetry, FLUSH_INTERVAL};

#[derive(Debug, Clone)]
pub struct RedisSourceConfig {
    pub redis_url: String,
    pub namespace: String,
    pub node_id: String,
    pub channels: Vec<(String, u32)>,
    pub order: ChannelOrder,
    /// Unstarted jobs kept claimed ahead of the workers.
    pub prefetch: Prefetch,
    pub heartbeat_interval: Duration,
    /// How long a node's heartbeat key lives. A node silent for this long is
    /// dead: any other node moves its claims back to their channels.
    pub node_ttl: Duration,
    /// JSON stored in the node key (host, pid, concurrency...).
    pub description: String,
    pub archive: ArchivePolicy,
}

impl RedisSourceConfig {
    pub fn validate(&self) -> Result<()> {
        if matches!(self.prefetch, Prefetch::Fixed(0) | Prefetch::Adaptive { workers: 0 }) {
            return Err(Error::Invalid("prefetch and workers must be at least 1".into()));
        }
        if self.node_ttl <= self.heartbeat_interval {
            return Err(Error::Invalid("node_ttl must be longer than heartbeat_interval".into()));
        }
        ChannelSelector::new(self.channels.clone(), self.order).map(|_| ())
    }
}

struct Shared {
    cfg: RedisSourceConfig,
    store: Store,
    pool: Pool,
    bells: Arc<Bells>,
    /// Claiming has stopped; workers get `Stopped`.
    stopping: AtomicBool,
    /// Background threads must exit.
    closed: Arc<AtomicBool>,
    heartbeat_closed: AtomicBool,
    inflight: AtomicUsize,
    window: PrefetchWindow,
    stats: Stats,
    /// Claiming is paused by a control request; claimed jobs still run.
    paused: AtomicBool,
    /// (index in the hub, telemetry, whether this source writes it).
    telemetry: OnceLock<(usize, Arc<Telemetry>, bool)>,
}

impl Shared {
    fn telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.get().map(|(_, t, _)| t.as_ref())
    }

    /// The telemetry this source writes, when it is the node's writer.
    fn written_telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.get().filter(|(_, _, writer)| *writer).map(|(_, t, _)| t.as_ref())
    }
}

pub struct RedisSource {
    shared: Arc<Shared>,
    jobs_rx: Receiver<ClaimedJob>,
    /// Nudges the fetcher when a worker takes a job (capacity 1: a pending
    /// nudge is enough, so workers never block on it).
    taken_tx: Sender<()>,
    acks_tx: Sender<AckMsg<(ClaimToken, String)>>,
    /// Dropped on stop: every `select!` on the fetcher's stop receiver fires.
    stop_tx: Mutex<Option<Sender<()>>>,
    threads: Mutex<Vec<(&'static str, JoinHandle<()>)>>,
}

impl RedisSource {
    /// Registers the node (one heartbeat, so the first claim is accepted) and
    /// starts the threads. Fails fast when Redis cannot be reached.
    pub fn start(cfg: RedisSourceConfig) -> Result<Self> {
        cfg.validate()?;
        let connector = Connector::new(&cfg.redis_url)?;
        let mut store = Store::new(Keyspace::new(&cfg.namespace));
        store.archive = cfg.archive;
        let pool = Pool::new(connector.clone());
        let names: Vec<&str> = cfg.channels.iter().map(|(n, _)| n.as_str()).collect();
        let ttl = cfg.node_ttl.as_millis() as u64;
        pool.with(|c| store.heartbeat(c, &cfg.node_id, ttl, &cfg.description, &names))?;

        let (jobs_tx, jobs_rx) = unbounded();
        let (taken_tx, taken_rx) = bounded(1);
        let (acks_tx, acks_rx) = unbounded();
        let (stop_tx, stop_rx) = bounded(0);
        let window = PrefetchWindow::new(cfg.prefetch);
        let shared = Arc::new(Shared {
            cfg,
            store,
            pool,
            bells: Arc::new(Bells::default()),
            stopping: AtomicBool::new(false),
            closed: Arc::new(AtomicBool::new(false)),
            heartbeat_closed: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            window,
            stats: Stats::default(),
            paused: AtomicBool::new(false),
            telemetry: OnceLock::new(),
        });

        let mut threads = Vec::new();
        let spawn = |name: &'static str, f: Box<dyn FnOnce() + Send>| -> JoinHandle<()> {
            std::thread::Builder::new().name(format!("solid-jobs-{name}")).spawn(f).expect("spawn dispatcher thread")
        };
        {
            let (bells, closed, doorbell) = (shared.bells.clone(), shared.closed.clone(), shared.store.keys.doorbell());
            let s = shared.clone();
            let reached = move |ok: bool| s.stats.note_reached(ok);
            threads.push(("subscriber", spawn("subscriber", Box::new(move || run_subscriber(connector, doorbell, bells, closed, reached)))));
        }
        {
            let s = shared.clone();
            let stop = stop_rx.clone();
            threads.push(("fetcher", spawn("fetcher", Box::new(move || fetch_loop(&s, jobs_tx, taken_rx, stop)))));
        }
        {
            let s = shared.clone();
            threads.push(("acker", spawn("acker", Box::new(move || ack_loop(&s, acks_rx)))));
        }
        {
            let s = shared.clone();
            threads.push(("heartbeat", spawn("heartbeat", Box::new(move || heartbeat_loop(&s)))));
        }
        Ok(RedisSource {
            shared,
            jobs_rx,
            taken_tx,
            acks_tx,
            stop_tx: Mutex::new(Some(stop_tx)),
            threads: Mutex::new(threads),
        })
    }

    pub fn node_id(&self) -> &str {
        &self.shared.cfg.node_id
    }

    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    pub fn inflight(&self) -> usize {
        self.shared.inflight.load(Ordering::SeqCst)
    }

    pub fn is_stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Acquire)
    }

    /// Claimed jobs waiting for a worker.
    pub fn jobs(&self) -> &Receiver<ClaimedJob> {
        &self.jobs_rx
    }

    /// A worker took `job` from `jobs()`: count it in flight, start its
    /// clock (for the prefetch window) and nudge the fetcher to refill.
    pub fn taken(&self, job: &mut ClaimedJob) {
        self.shared.inflight.fetch_add(1, Ordering::SeqCst);
        job.taken_at = Some(Instant::now());
        // Wake the fetcher only when a refill is due: a signal per job would
        // cost a futex wake and a context switch per job at high rates.
        if self.shared.window.refill(self.jobs_rx.len()).is_some() {
            let _ = self.taken_tx.try_send(());
        }
    }

    /// The task returned: complete the claim (batched, asynchronous). The job
    /// stays claimed in Redis until the batch is written, so a crash before
    /// then reruns it: at-least-once.
    pub fn complete(&self, job: &ClaimedJob) {
        if let Some(t) = job.taken_at {
            self.shared.window.record(t.elapsed());
        }
        let _ = self.acks_tx.send(AckMsg::Done((job.token, job.envelope.id.clone())));
        self.settled();
    }

    /// Counts a failure of a claimed job; the caller then retries or discards.
    pub fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        let s = &self.shared;
        let out = s.pool.with(|c| s.store.record_failure(c, &s.cfg.node_id, job.token, &job.envelope.id, error_class, message));
        if out.is_ok() {
            s.stats.failed.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Schedules a retry after `delay`; settles the job unless the write
    /// failed on the connection (then the caller may try again).
    pub fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        let s = &self.shared;
        let due = now_ms() + delay.as_millis() as u64;
        let out = s.pool.with(|c| s.store.retry(c, &s.cfg.node_id, job, due));
        self.settle_if_final(&out);
        out
    }

    /// Gives the job up (archived with `record`, or dropped); settles the job.
    pub fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()> {
        let s = &self.shared;
        let out = s.pool.with(|c| s.store.discard(c, &s.cfg.node_id, Some(job.token), &job.envelope.id, record, archive));
        self.settle_if_final(&out);
        out
    }

    /// Quarantines a job that cannot run here (unknown task...); settles it.
    pub fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()> {
        let s = &self.shared;
        let out = s.pool.with(|c| s.store.quarantine(c, &s.cfg.node_id, job.token, &job.channel, &job.raw, reason));
        if out.is_ok() {
            s.stats.quarantined.fetch_add(1, Ordering::Relaxed);
        }
        self.settle_if_final(&out);
        out
    }

    /// Settles a job without writing anything: it stays claimed and is
    /// requeued at shutdown or recovered (used when settling itself failed).
    pub fn abandon(&self, _job: &ClaimedJob) {
        self.settled();
    }

    fn settled(&self) {
        self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Settles after a write that succeeded or was rejected as stale; after a
    /// connection error the job stays unsettled so the caller can try again.
    fn settle_if_final(&self, out: &Result<()>) {
        match out {
            Ok(()) => self.settled(),
            Err(Error::StaleClaim(t)) => {
                self.shared.stats.stale.fetch_add(1, Ordering::Relaxed);
                log("WARN", &format!("claim {t} was stale when settled: the job was recovered and may run elsewhere; nothing was changed"));
                self.settled();
            }
            Err(_) => {}
        }
    }


    /// Stops claiming. Workers get `Stopped` on their next call; jobs
    /// already handed out keep running.
    pub fn stop_claiming(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.stop_tx.lock().take();
        self.shared.bells.ring_all();
    }

    /// Completes the shutdown: flushes completions, then moves every claim
    /// still held (unstarted prefetched jobs, and tasks still running when
    /// the timeout expired) back to the head of its channel, deregisters the
    /// node and joins the threads. Returns the number of jobs requeued.
    ///
    /// Order matters: completions are written before the requeue, or a job
    /// that finished would be requeued and run twice.
    pub fn shutdown(&self, flush_timeout: Duration) -> Result<u64> {
        self.stop_claiming();
        let (tx, rx) = bounded(1);
        let _ = self.acks_tx.send(AckMsg::Flush(tx));
        let flushed = rx.recv_timeout(flush_timeout).is_ok();
        // Stop heartbeating before deregistering, or a late heartbeat would
        // re-create the node key after the requeue removed it.
        self.shared.heartbeat_closed.store(true, Ordering::Release);
        self.shared.bells.ring_all();
        self.join(&["heartbeat", "fetcher"]);
        let s = &self.shared;
        if !flushed {
            // Requeueing now would put finished jobs whose completion is
            // still unwritten back to work. Leave every claim in place: the
            // heartbeat has stopped, so other nodes recover them after
            // recovery_delay, by which time the acker may have written some.
            log("WARN", "completions could not be written before shutdown; this node's claims are left for recovery by other nodes");
            self.close();
            return Ok(0);
        }
        let mut attempt = 0;
        let requeued = loop {
            match s.pool.with(|c| s.store.requeue_node(c, &s.cfg.node_id, false)) {
                Ok(n) => break Ok(n.unwrap_or(0)),
                Err(e) if e.is_connection() && attempt < 5 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100 * attempt));
                }
                Err(e) => break Err(e),
            }
        };
        self.close();
        // Last: the final acknowledgements and observations of this node.
        if let Some(t) = s.written_telemetry() {
            t.tick();
            if let Err(e) = s.pool.with(|c| t.flush(c)) {
                log("WARN", &format!("the last telemetry entries could not be written: {e}"));
            }
        }
        requeued
    }

    /// Ends the acker (woken, so it needs no timer to notice) and lets the
    /// subscriber go: it holds nothing that needs cleaning up and leaves
    /// within its read timeout, so stopping does not wait for it.
    fn close(&self) {
        let s = &self.shared;
        s.closed.store(true, Ordering::Release);
        acker::wake(&self.acks_tx);
        s.bells.ring_all();
        self.join(&["acker"]);
        self.detach("subscriber");
    }

    fn detach(&self, name: &str) {
        self.threads.lock().retain(|(n, _)| *n != name);
    }

    fn join(&self, names: &[&str]) {
        let mut threads = self.threads.lock();
        let mut keep = Vec::new();
        for (name, handle) in threads.drain(..) {
            if names.contains(&name) {
                let _ = handle.join();
            } else {
                keep.push((name, handle));
            }
        }
        *threads = keep;
    }
}

impl Drop for RedisSource {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.heartbeat_closed.store(true, Ordering::Release);
        self.shared.closed.store(true, Ordering::Release);
        acker::wake(&self.acks_tx);
        self.stop_tx.lock().take();
        self.shared.bells.ring_all();
    }
}

/// How long an idle fetcher waits for a doorbell before looking anyway.
/// With a live subscription nothing can be missed, so the safety net is the
/// heartbeat, which reports ready work; without one, poll every second.
const IDLE_POLL_UNSUBSCRIBED: Duration = Duration::from_secs(1);

fn fetch_loop(s: &Shared, jobs_tx: Sender<ClaimedJob>, taken_rx: Receiver<()>, stop_rx: Receiver<()>) {
    let mut selector = ChannelSelector::new(s.cfg.channels.clone(), s.cfg.order).expect("validated at start");
    let mut conn = Reconnecting::new(s.pool.connector().clone());
    // Each claim call records a stamp unique to this node (its claimed_ms).
    // When a call fails after it may have reached Redis, its jobs could be
    // claimed with the reply lost: the stamp lets us hand exactly those back.
    let mut last_stamp = 0u64;
    let mut unsettled_stamp: Option<u64> = None;
    while !s.stopping.load(Ordering::Acquire) {
        if let Some(stamp) = unsettled_stamp {
            match conn.run(|c| s.store.release_claims(c, &s.cfg.node_id, stamp)) {
                Ok(n) => {
                    unsettled_stamp = None;
                    if n > 0 {
                        log("WARN", &format!("requeued {n} job(s) claimed by a call whose reply was lost"));
                    }
                }
                Err(_) => {
                    let _ = stop_rx.recv_timeout(conn.backoff_remaining().max(Duration::from_millis(50)));
                    continue;
                }
            }
        }
        if s.paused.load(Ordering::Acquire) {
            // Local only: no command is sent while paused.
            let _ = stop_rx.recv_timeout(PAUSE_CHECK);
            continue;
        }
        let Some(want) = s.window.refill(jobs_tx.len()) else {
            select! {
                recv(taken_rx) -> _ => {},
                recv(stop_rx) -> _ => return,
            }
            continue;
        };
        let seen = s.bells.ready.epoch();
        let order = selector.next_order();
        let names: Vec<&str> = order.iter().map(|&i| selector.names()[i].as_str()).collect();
        last_stamp = now_ms().max(last_stamp + 1);
        let stamp = last_stamp;
        let claimed = conn.run(|c| s.store.claim(c, &s.cfg.node_id, &names, want, stamp));
        s.stats.note(&claimed);
        match claimed {
            Ok(batch) => {
                if let (Some(t), false) = (s.telemetry(), batch.jobs.is_empty()) {
                    t.saw_tasks(batch.jobs.iter().map(|j| j.envelope.task.as_str()));
                }
                // Fewer jobs than asked for: the script found every channel
                // empty. A later push rings the doorbell (lists ring on
                // empty -> non-empty), so wait for it instead of claiming
                // again just to find nothing.
                let drained = batch.jobs.len() + batch.malformed.len() < want;
                for m in batch.malformed {
                    log("WARN", &format!("quarantining undecodable entry from channel {}: {}", m.channel, m.reason));
                    match conn.run(|c| s.store.quarantine(c, &s.cfg.node_id, m.token, &m.channel, &m.raw, &m.reason)) {
                        Ok(()) => {
                            s.stats.quarantined.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => log("WARN", &format!("quarantine failed ({e}); the entry stays claimed and will be requeued")),
                    }
                }
                s.stats.claimed.fetch_add(batch.jobs.len() as u64, Ordering::Relaxed);
                for job in batch.jobs {
                    if jobs_tx.send(job).is_err() {
                        return;
                    }
                }
                if drained {
                    let wait = if s.bells.subscribed.load(Ordering::Acquire) { Duration::from_secs(3600) } else { IDLE_POLL_UNSUBSCRIBED };
                    s.bells.ready.wait_past(seen, wait);
                }
            }
            Err(e) => {
                s.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                // The script may have run with its reply lost; releasing a
                // stamp that claimed nothing is harmless.
                if e.is_connection() && conn.last_call_sent() {
                    unsettled_stamp = Some(stamp);
                }
                if matches!(&e, Error::Redis(m) if m.contains("NODE_EXPIRED")) {
                    log("WARN", "node heartbeat expired (was this process paused?); re-registering");
                    let names: Vec<&str> = s.cfg.channels.iter().map(|(n, _)| n.as_str()).collect();
                    let _ = conn.run(|c| s.store.heartbeat(c, &s.cfg.node_id, s.cfg.node_ttl.as_millis() as u64, &s.cfg.description, &names));
                } else if !e.is_connection() || conn.is_connected() {
                    log("WARN", &format!("claim failed: {e}"));
                }
                let pause = conn.backoff_remaining().max(Duration::from_millis(50));
                let _ = stop_rx.recv_timeout(pause);
            }
        }
    }
}

fn ack_loop(s: &Shared, acks_rx: Receiver<AckMsg<(ClaimToken, String)>>) {
    let conn = Reconnecting::new(s.pool.connector().clone());
    acker::run(acks_rx, conn, &s.closed, &s.stats, |conn, batch| {
        let written = conn.run(|c| s.store.ack(c, &s.cfg.node_id, batch));
        s.stats.note(&written);
        let stale = written?;
        if let Some((index, t, _)) = s.telemetry.get() {
            t.acknowledged(*index, batch.iter().map(|(token, _)| *token).filter(|token| !stale.contains(token)));
            t.unacknowledged(*index, stale.iter().copied());
        }
        Ok(batch.iter().filter(|(t, _)| stale.contains(t)).cloned().collect())
    });
}

/// How often a paused fetcher looks whether it was resumed (locally).
const PAUSE_CHECK: Duration = Duration::from_millis(100);
/// Control requests taken from the mailbox per heartbeat.
const CONTROL_TAKE: usize = 16;

/// Most due jobs promoted per script call; a larger backlog is promoted in
/// consecutive calls without waiting.
const PROMOTE_LIMIT: usize = 500;

fn heartbeat_loop(s: &Shared) {
    let mut conn = Reconnecting::new(s.pool.connector().clone());
    let names: Vec<&str> = s.cfg.channels.iter().map(|(n, _)| n.as_str()).collect();
    let ttl = s.cfg.node_ttl.as_millis() as u64;
    let mut next_beat = Instant::now() + s.cfg.heartbeat_interval;
    let mut next_due = Instant::now();
    const IDLE: Duration = Duration::from_secs(3600);
    let mut next_flush = Instant::now() + FLUSH_INTERVAL;
    while !s.heartbeat_closed.load(Ordering::Acquire) {
        let seen = s.bells.planned.epoch();
        let now = Instant::now();
        let beating = now >= next_beat;
        if beating {
            // Only the journal writer reads the mailbox: one reader per node.
            let take = if s.written_telemetry().is_some() { CONTROL_TAKE } else { 0 };
            let beat = conn.run(|c| s.store.beat(c, &s.cfg.node_id, ttl, &s.cfg.description, &names, take));
            s.stats.note(&beat);
            match beat {
                Ok(beat) => {
                    next_beat = now + s.cfg.heartbeat_interval;
                    if beat.ready {
                        s.bells.ready.ring();
                    }
                    if beat.released > 0 {
                        log("WARN", &format!("released {} publication(s) whose publisher did not (its barrier expired)", beat.released));
                    }
                    if let Some(t) = s.written_telemetry() {
                        for request in beat.requests {
                            t.request(request);
                        }
                    }
                    for node in beat.dead {
                        if let Ok(Some(jobs)) = conn.run(|c| s.store.recover_node(c, &node)) {
                            let n = jobs.len() as u64;
                            s.stats.recovered.fetch_add(n, Ordering::Relaxed);
                            if n > 0 {
                                log("WARN", &format!("recovered {n} job(s) claimed by dead node {node}"));
                            }
                            if let Some(t) = s.telemetry() {
                                t.recovered(&node, &jobs);
                            }
                        }
                    }
                }
                Err(_) => {
                    s.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                    next_beat = now + conn.backoff_remaining().max(Duration::from_millis(100));
                }
            }
        }
        if let Some(t) = s.written_telemetry() {
            if now >= next_flush || beating {
                let active = t.tick();
                if t.has_pending() {
                    let flushed = conn.run(|c| t.flush(c));
                    s.stats.note(&flushed);
                }
                // Once a second while jobs flow; an idle node writes its
                // telemetry (observations) with its heartbeats only, so it
                // wakes no more often than before.
                next_flush = if active || t.has_pending() { now + FLUSH_INTERVAL } else { now + IDLE };
            }
        } else {
            next_flush = now + IDLE;
        }
        if now >= next_due {
            match conn.run(|c| s.store.promote(c, PROMOTE_LIMIT)) {
                Ok((moved, next)) => {
                    s.stats.promoted.fetch_add(moved, Ordering::Relaxed);
                    next_due = if moved as usize >= PROMOTE_LIMIT {
                        now
                    } else {
                        match next {
                            // From the time after the call (not `now`, before it):
                            // waking a round trip early finds nothing due yet.
                            Some(ms) => Instant::now() + Duration::from_millis(ms.saturating_sub(now_ms())),
                            None => now + Duration::from_secs(3600),
                        }
                    };
                }
                Err(_) => {
                    s.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                    next_due = now + conn.backoff_remaining().max(Duration::from_millis(100));
                }
            }
        }
        // A subscription outage may hide a `planned` ring: re-check due work
        // at every heartbeat then.
        if !s.bells.subscribed.load(Ordering::Acquire) {
            next_due = next_due.min(next_beat);
        }
        let wake = next_beat.min(next_due).min(next_flush);
        let wait = wake.saturating_duration_since(Instant::now());
        if s.bells.planned.wait_past(seen, wait) {
            next_due = Instant::now();
        }
    }
}


impl JobSource for RedisSource {
    fn name(&self) -> &str {
        "redis"
    }
    fn jobs(&self) -> &Receiver<ClaimedJob> {
        RedisSource::jobs(self)
    }
    fn taken(&self, job: &mut ClaimedJob) {
        RedisSource::taken(self, job)
    }
    /// The job is still claimed in Redis: shutdown requeues it.
    fn untake(&self, _job: ClaimedJob) {
        self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
    }
    fn complete(&self, job: &ClaimedJob) {
        RedisSource::complete(self, job)
    }
    fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        RedisSource::record_failure(self, job, error_class, message)
    }
    fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        RedisSource::retry(self, job, delay)
    }
    fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()> {
        RedisSource::discard(self, job, record, archive)
    }
    fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()> {
        RedisSource::quarantine(self, job, reason)
    }
    fn abandon(&self, job: &ClaimedJob) {
        RedisSource::abandon(self, job)
    }
    fn stop_claiming(&self) {
        RedisSource::stop_claiming(self)
    }
    fn is_stopping(&self) -> bool {
        RedisSource::is_stopping(self)
    }
    fn inflight(&self) -> usize {
        RedisSource::inflight(self)
    }
    fn shutdown(&self, flush_timeout: Duration) -> Result<u64> {
        RedisSource::shutdown(self, flush_timeout)
    }
    fn stats(&self) -> &Stats {
        RedisSource::stats(self)
    }
    fn attach(&self, index: usize, telemetry: Arc<Telemetry>, writer: bool) {
        let _ = self.shared.telemetry.set((index, telemetry, writer));
    }
    fn set_paused(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::Release);
        if !paused {
            // Claim at once rather than at the next doorbell.
            self.shared.bells.ready.ring();
        }
    }
}
