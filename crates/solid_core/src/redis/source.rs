//! The Redis job source of a worker node. Rust threads claim jobs, settle
//! them and keep the node alive; workers (Ruby Ractors or threads) take jobs
//! through the [`crate::hub::Hub`] and call one settle method per job.
//!
//! Threads of one node:
//! - fetcher: keeps the prefetch window of unstarted jobs filled, in batches;
//! - acker: writes the completions no claim carried (decision 51: while
//!   jobs flow, each claim carries the completions made since the last);
//! - heartbeat: refreshes the node key, recovers dead nodes, writes the
//!   node's telemetry, promotes due jobs;
//! - subscriber: turns doorbell messages (the namespace's, and the served
//!   channels' own) into local wake-ups;
//! - scheduler (only with recurring schedules): proposes their ticks.
//!
//! Workers never share a Ruby object or a lock on the hot path: jobs reach
//! them through a lock-free channel, and completions leave the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Connection;

use crate::acker::{self, Completions};
use crate::channel_order::{ChannelOrder, ChannelSelector};
use crate::claim::{ClaimToken, ClaimedJob, FailureCount};
use crate::deadline;
use crate::error::{Error, Result};
use crate::feed::{Feed, Fetch, Fetcher};
use crate::log::{self, log, Level, Throttled};
use crate::notify::Watchdog;
use crate::now_ms;
use crate::prefetch::Prefetch;
use crate::recurring::RecurringSchedule;
use crate::redis::connection::{Connector, Pool, Reconnecting, Timeouts};
use crate::redis::doorbell::{run_subscriber, Bell, Bells, Doorbells};
use crate::redis::holdings::Holdings;
use crate::redis::keyspace::Keyspace;
use crate::redis::scheduler::Scheduler;
use crate::redis::store::{ArchivePolicy, ClaimBatch, Heartbeat, RecoveredJob, Requeue, Store};
use crate::source::{JobSource, Stats};
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
    /// Connect, read and write timeouts of every connection of the node.
    pub timeouts: Timeouts,
    /// The recurring schedules whose jobs go to this backend, when the node
    /// runs the scheduler; empty: no scheduler thread.
    pub schedules: Vec<RecurringSchedule>,
}

impl RedisSourceConfig {
    pub fn validate(&self) -> Result<()> {
        if matches!(self.prefetch, Prefetch::Fixed(0) | Prefetch::Adaptive { workers: 0 }) {
            return Err(Error::Invalid("prefetch and workers must be at least 1".into()));
        }
        if self.node_ttl <= self.heartbeat_interval {
            return Err(Error::Invalid("node_ttl must be longer than heartbeat_interval".into()));
        }
        let mut names = std::collections::HashSet::new();
        for s in &self.schedules {
            s.validate()?;
            if !names.insert(s.name.as_str()) {
                return Err(Error::Invalid(format!("schedule {:?} is given twice", s.name)));
            }
        }
        ChannelSelector::new(self.channels.clone(), self.order).map(|_| ())
    }
}

/// How long a thread with nothing due waits before looking anyway: in
/// practice until a bell rings or the source closes, since nothing is lost
/// while the subscription is live (an idle node sleeps, decision 24).
const IDLE_WAIT: Duration = Duration::from_secs(3600);
/// How long an idle fetcher waits for a doorbell while the subscription is
/// down (a ring could be missed then): it polls once a second.
const IDLE_POLL_UNSUBSCRIBED: Duration = Duration::from_secs(1);
/// The least pause of the heartbeat thread after a failed heartbeat or
/// promotion, before it tries again.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(100);
/// Control requests taken from the mailbox per heartbeat.
const CONTROL_TAKE: usize = 16;
/// Most due jobs promoted per script call; a larger backlog is promoted in
/// consecutive calls without waiting.
const PROMOTE_LIMIT: usize = 500;
/// How long after the next due time the promoter wakes (decision 41). Two
/// jobs scheduled for the same instant get due times up to about 2 ms
/// apart (each producer call turns the instant into a delay on its clock,
/// and the script adds it to Redis' clock, both in whole milliseconds);
/// waking this much later promotes both in one call, into their priority
/// lists, so the claim that follows takes the higher priority first.
const PROMOTE_COALESCE: Duration = Duration::from_millis(5);
/// Tries of the shutdown requeue on a broken connection, waiting
/// `REQUEUE_BACKOFF` times the try number between them.
const REQUEUE_RETRIES: u64 = 5;
const REQUEUE_BACKOFF: Duration = Duration::from_millis(100);

struct Shared {
    cfg: RedisSourceConfig,
    store: Store,
    pool: Pool,
    bells: Arc<Bells>,
    feed: Feed,
    /// Completed jobs not yet written: carried by the next claim, or
    /// written by the acker (decision 51).
    completions: Completions<(ClaimToken, String)>,
    /// Background threads must exit.
    closed: Arc<AtomicBool>,
    heartbeat_closed: AtomicBool,
    /// The scheduler thread must exit; its bell ends its sleep.
    scheduler_closed: AtomicBool,
    scheduler_bell: Bell,
    /// (index in the hub, telemetry, whether this source writes it).
    telemetry: OnceLock<(usize, Arc<Telemetry>, bool)>,
    /// The claims this node holds, sent with each heartbeat.
    holdings: Holdings,
    /// The namespace's incarnation as this node first saw it (see
    /// `Heartbeat::incarnation`), and the token above which it last
    /// reported the fence counter going back, so each is said once.
    keyspace_seen: Mutex<(Option<String>, u64)>,
    /// The channels the last claim found paused (its reply trailer). The
    /// heartbeat leaves them out of its "any work?" check, so a paused
    /// backlog does not wake an idle node every heartbeat; the claim that
    /// follows a resume (its doorbell ring wakes the fetcher) clears them.
    paused: Mutex<Vec<String>>,
    /// The priority level lists (routes `name:p`) the last claim's trailer
    /// said are in use in the served channels: the heartbeat's "any work?"
    /// check reads them too, so an idle node wakes for a prioritized job
    /// whose doorbell ring it missed (decision 24), as for a plain one.
    levels: Mutex<Vec<String>>,
}

impl Shared {
    fn stats(&self) -> &Stats {
        self.feed.stats()
    }

    fn telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.get().map(|(_, t, _)| t.as_ref())
    }

    /// The telemetry this source writes, when it is the node's writer.
    fn written_telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.get().filter(|(_, _, writer)| *writer).map(|(_, t, _)| t.as_ref())
    }

    /// This node's heartbeat (see `Store::heartbeat_holding`), taking up to
    /// `take_requests` control requests and reconciling the node's claims
    /// with what it holds. Whichever thread beats, what the heartbeat
    /// learned about the keyspace is logged here; the flag says Redis lost
    /// the namespace.
    fn heartbeat(&self, c: &mut Connection, take_requests: usize) -> Result<(Heartbeat, bool)> {
        let paused = self.paused.lock().clone();
        let levels = self.levels.lock().clone();
        let names: Vec<&str> = self
            .cfg
            .channels
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(levels.iter().map(String::as_str))
            .filter(|n| !paused.iter().any(|p| p == crate::priority::split_route(n).map_or(*n, |(c, _)| c)))
            .collect();
        let ttl_ms = self.cfg.node_ttl.as_millis() as u64;
        let held = self.holdings.snapshot();
        let heartbeat = self.store.heartbeat_holding(
            c,
            &self.cfg.node_id,
            ttl_ms,
            &self.cfg.description,
            &names,
            take_requests,
            Some(&held),
        )?;
        let went_back = self.holdings.checked(&held, heartbeat.previous_check);
        let lost = self.notice_keyspace(&heartbeat, went_back);
        Ok((heartbeat, lost))
    }

    /// A completion batch was answered (completed, or `stale`): these
    /// claims are no longer held, and the telemetry learns which completed.
    fn answered(&self, batch: &[(ClaimToken, String)], stale: &[ClaimToken]) {
        self.holdings.release(batch.iter().map(|(token, _)| *token));
        if let Some((index, t, _)) = self.telemetry.get() {
            t.acknowledged(*index, batch.iter().map(|(token, _)| *token).filter(|token| !stale.contains(token)));
            t.unacknowledged(*index, stale.iter().copied());
        }
    }

    /// A claim carried `batch` (decision 51): as the acker's write would.
    fn acknowledged(&self, batch: &[(ClaimToken, String)], stale: &[ClaimToken]) {
        self.answered(batch, stale);
        let stale: Vec<_> = batch.iter().filter(|(t, _)| stale.contains(t)).collect();
        acker::note_written(self.stats(), batch.len(), &stale);
    }

    /// Says in plain words when Redis lost this namespace or went back in
    /// time (`went_back`: the node's holding record was older than one Redis
    /// had acknowledged, by that many ms), and which claims the heartbeat
    /// handed back. Returns whether the namespace was lost.
    fn notice_keyspace(&self, heartbeat: &Heartbeat, went_back: Option<u64>) -> bool {
        let mut seen = self.keyspace_seen.lock();
        let lost = matches!(&seen.0, Some(known) if *known != heartbeat.incarnation);
        seen.0 = Some(heartbeat.incarnation.clone());
        let max_token = self.holdings.max_token();
        // Each way of noticing is said once: the fence counter stays below
        // the same token until the next claim, the record is rewritten now.
        let fence_back = heartbeat.fence < max_token && seen.1 < max_token;
        if fence_back || lost {
            seen.1 = max_token;
        }
        drop(seen);
        if lost {
            let held = self.holdings.len();
            let running = if held > 0 {
                format!("; the {held} job(s) this node holds still run, but Redis can no longer record their outcome")
            } else {
                String::new()
            };
            log(
                "ERROR",
                &format!(
                    "Redis lost all SolidJobs data in namespace {:?}: every key is gone (Redis restarted without \
                     persistence, was flushed, or was restored from a copy older than the namespace). Jobs that \
                     were waiting, planned or retrying are gone and must be enqueued again{running}",
                    self.cfg.namespace
                ),
            );
        } else if went_back.is_some() || fence_back {
            let how = match went_back {
                Some(ms) => format!("at least the last {ms} ms of them"),
                None => format!("its fence counter {} is below token {max_token} this node was given", heartbeat.fence),
            };
            log(
                "WARN",
                &format!(
                    "Redis went back in time: writes it had acknowledged are gone ({how}; it was restored from an \
                     older AOF or RDB, or failed over to a replica that was behind). Claim tokens stay above every \
                     earlier one; claims Redis brought back are handed back to their channels, so jobs completed in \
                     the lost window run again"
                ),
            );
        }
        if !heartbeat.handed_back.is_empty() {
            const SHOWN: usize = 10;
            let n = heartbeat.handed_back.len();
            let mut ids = heartbeat.handed_back.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            if n > SHOWN {
                ids.push_str(&format!(" and {} more", n - SHOWN));
            }
            log(
                "WARN",
                &format!(
                    "handed back {n} job(s) claimed under this node that it does not hold ({ids}): a claim whose \
                     reply was lost reached Redis late, or Redis lost writes and brought back claims already \
                     settled; they are at the head of their channels again"
                ),
            );
        }
        lost
    }
}

pub struct RedisSource {
    shared: Arc<Shared>,
    threads: Mutex<Vec<(&'static str, JoinHandle<()>)>>,
}

impl RedisSource {
    /// Registers the node (one heartbeat, so the first claim is accepted) and
    /// starts the threads. Fails fast when Redis cannot be reached.
    pub fn start(cfg: RedisSourceConfig) -> Result<Self> {
        cfg.validate()?;
        let connector = Connector::with_timeouts(&cfg.redis_url, cfg.timeouts)?;
        let mut store = Store::new(Keyspace::new(&cfg.namespace));
        store.archive = cfg.archive;
        let pool = Pool::new(connector.clone());
        let (feed, fetcher) = Feed::new(cfg.prefetch);
        let shared = Arc::new(Shared {
            cfg,
            store,
            pool,
            bells: Arc::new(Bells::default()),
            feed,
            completions: Completions::default(),
            closed: Arc::new(AtomicBool::new(false)),
            heartbeat_closed: AtomicBool::new(false),
            scheduler_closed: AtomicBool::new(false),
            scheduler_bell: Bell::default(),
            telemetry: OnceLock::new(),
            holdings: Holdings::default(),
            keyspace_seen: Mutex::new((None, 0)),
            paused: Mutex::new(Vec::new()),
            levels: Mutex::new(Vec::new()),
        });
        shared.pool.with(|c| shared.heartbeat(c, 0))?;

        let mut threads = Vec::new();
        let spawn = |name: &'static str, f: Box<dyn FnOnce() + Send>| -> JoinHandle<()> {
            std::thread::Builder::new().name(format!("solid-jobs-{name}")).spawn(f).expect("spawn dispatcher thread")
        };
        {
            // The served channels are fixed for the node's life, so one
            // subscription lists them all: a push on any other channel
            // wakes this node for nothing, so it does not hear it.
            let doorbells = Doorbells::of(&shared.store.keys, shared.cfg.channels.iter().map(|(n, _)| n.as_str()));
            let (bells, closed) = (shared.bells.clone(), shared.closed.clone());
            let s = shared.clone();
            let reached = move |ok: bool| s.stats().note_reached(ok);
            threads.push((
                "subscriber",
                spawn("subscriber", Box::new(move || run_subscriber(connector, doorbells, bells, closed, reached))),
            ));
        }
        {
            let s = shared.clone();
            threads.push(("fetcher", spawn("fetcher", Box::new(move || fetcher.run(&s.feed, &mut Claimer::new(&s))))));
        }
        {
            let s = shared.clone();
            threads.push(("acker", spawn("acker", Box::new(move || ack_loop(&s)))));
        }
        {
            let s = shared.clone();
            threads.push(("heartbeat", spawn("heartbeat", Box::new(move || HeartbeatThread::new(&s).run()))));
        }
        if !shared.cfg.schedules.is_empty() {
            let s = shared.clone();
            let run = move || {
                let scheduler = Scheduler::new(&s.store, s.pool.connector().clone(), s.cfg.schedules.clone());
                scheduler.run(&s.scheduler_closed, &s.scheduler_bell);
            };
            threads.push(("scheduler", spawn("scheduler", Box::new(run))));
        }
        Ok(RedisSource { shared, threads: Mutex::new(threads) })
    }

    pub fn node_id(&self) -> &str {
        &self.shared.cfg.node_id
    }

    /// Doorbell messages this node's subscriber received (observation only).
    pub fn doorbell_messages(&self) -> u64 {
        self.shared.bells.messages.load(Ordering::Relaxed)
    }

    /// Settles after a write that succeeded or was rejected as stale; after a
    /// connection error the job stays unsettled (and held) so the caller can
    /// try again.
    fn settle_if_final(&self, job: &ClaimedJob, out: &Result<()>) {
        if crate::source::is_final(out) {
            self.shared.holdings.release([job.token]);
        }
        match out {
            Ok(()) => self.shared.feed.settled(),
            Err(Error::StaleClaim(t)) => {
                self.shared.stats().stale.fetch_add(1, Ordering::Relaxed);
                log("WARN", &format!("claim {t} was stale when settled: the job was recovered and may run elsewhere; nothing was changed"));
                self.shared.feed.settled();
            }
            Err(_) => {}
        }
    }

    /// Ends the acker (woken, so it needs no timer to notice) and lets the
    /// subscriber go: it holds nothing that needs cleaning up and leaves
    /// within its read timeout, so stopping does not wait for it. An acker
    /// still blocked on a silent Redis at `deadline` is left behind too.
    fn close(&self, deadline: Instant) {
        let s = &self.shared;
        self.stop_scheduler();
        s.closed.store(true, Ordering::Release);
        s.completions.wake();
        s.bells.ring_all();
        self.join_until(&["acker"], deadline);
        self.detach("subscriber");
    }

    fn stop_scheduler(&self) {
        self.shared.scheduler_closed.store(true, Ordering::Release);
        self.shared.scheduler_bell.ring();
    }

    fn detach(&self, name: &str) {
        self.threads.lock().retain(|(n, _)| *n != name);
    }

    /// Joins the named threads, waiting no later than `deadline`: one
    /// blocked on a silent Redis is detached (it ends within its
    /// connection's timeouts, or with the process). The handles leave the
    /// lock before the wait, so a second shutdown never queues behind it.
    fn join_until(&self, names: &[&str], deadline: Instant) {
        let wanted: Vec<(&'static str, JoinHandle<()>)> = {
            let mut threads = self.threads.lock();
            let (wanted, keep) = threads.drain(..).partition(|(n, _)| names.contains(n));
            *threads = keep;
            wanted
        };
        deadline::join_until(wanted, deadline);
    }
}

/// The shutdown requeue (see `RedisSource::shutdown`), tried again a few
/// times on a broken connection, never past `deadline`.
fn requeue_own_claims(s: &Shared, deadline: Instant) -> Result<u64> {
    let mut attempt = 0;
    loop {
        match s.pool.with(|c| s.store.requeue_reporting(c, &s.cfg.node_id, Requeue::Shutdown)) {
            Ok(jobs) => {
                let jobs = jobs.unwrap_or_default();
                log_moved(&jobs, "handed back at shutdown: at the head of its channel again", "job.requeued", None);
                return Ok(jobs.len() as u64);
            }
            Err(e) if e.is_connection() && attempt < REQUEUE_RETRIES => {
                attempt += 1;
                let pause = REQUEUE_BACKOFF * attempt as u32;
                if Instant::now() + pause >= deadline {
                    return Err(e);
                }
                std::thread::sleep(pause);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Lines per batch of moved jobs, at most: a recovery of thousands of claims
/// names the first ones and counts the rest, so it cannot flood the log.
const MOVED_LINES: usize = 100;

/// One info line per job moved back to its channel (recovered from a dead
/// node, or handed back at shutdown), with its id, task and channel.
fn log_moved(jobs: &[RecoveredJob], msg: &str, event: &str, dead_node: Option<&str>) {
    if !log::enabled(Level::Info) {
        return;
    }
    for job in jobs.iter().take(MOVED_LINES) {
        let env = job.envelope.as_ref();
        log::log_fields(
            Level::Info,
            msg,
            &[
                ("job_id", env.map(|e| e.id.as_str()).into()),
                ("task", env.map(|e| e.logged_task()).into()),
                ("channel", job.channel.as_str().into()),
                ("event", event.into()),
                ("dead_node_id", dead_node.into()),
            ],
        );
    }
    if jobs.len() > MOVED_LINES {
        log::log_fields(
            Level::Info,
            &format!("and {} more job(s) {msg}", jobs.len() - MOVED_LINES),
            &[("event", event.into()), ("dead_node_id", dead_node.into())],
        );
    }
}

impl JobSource for RedisSource {
    fn name(&self) -> &str {
        "redis"
    }

    fn feed(&self) -> &Feed {
        &self.shared.feed
    }

    /// The job is still claimed in Redis: shutdown requeues it.
    fn untake(&self, _job: ClaimedJob) {
        self.shared.feed.settled();
    }

    /// One `requeue.lua` call (mode `tokens`) from the worker's thread: the
    /// claim goes back to the head of its list, its slot released, its
    /// admission kept (conservative: the rate never gains). On an error the
    /// job is abandoned, still unstarted: it stays claimed in Redis, no
    /// longer held, and the next heartbeat that reaches Redis hands it back
    /// (recovery does, if the node dies first). Running it instead would
    /// start it outside its admission's slack, over the rate.
    fn hand_back(&self, job: ClaimedJob) -> Option<ClaimedJob> {
        let s = &self.shared;
        let _ = s.pool.with(|c| s.store.hand_back(c, &s.cfg.node_id, &[job.token]));
        s.holdings.release([job.token]);
        s.feed.settled();
        None
    }

    /// The task returned: complete the claim (batched, asynchronous: the
    /// next claim carries it, or the acker writes it). The job stays
    /// claimed in Redis until then, so a crash before then reruns it:
    /// at-least-once. A job whose completion releases what other jobs wait
    /// for (a concurrency slot, a unique lock) is written without waiting
    /// for a claim.
    fn complete(&self, job: &ClaimedJob) {
        self.shared.feed.ran(job);
        let releases = job.envelope.meta.as_ref().is_some_and(|m| m.contains_key("flow") || m.contains_key("unique"));
        self.shared.completions.push((job.token, job.envelope.id.clone()), releases);
        self.shared.feed.settled();
    }

    /// Counts a failure of a claimed job; the caller then retries or discards.
    fn record_failure(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        let s = &self.shared;
        let out = s
            .pool
            .with(|c| s.store.record_failure(c, &s.cfg.node_id, job.token, &job.envelope.id, error_class, message));
        if out.is_ok() {
            s.stats().failed.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Counts an attempt of a job whose task is unknown here, apart from
    /// its failures (the unknown-task mode of `record_failure.lua`).
    fn record_unknown(&self, job: &ClaimedJob, error_class: &str, message: &str) -> Result<FailureCount> {
        let s = &self.shared;
        let out = s
            .pool
            .with(|c| s.store.record_unknown(c, &s.cfg.node_id, job.token, &job.envelope.id, error_class, message));
        if out.is_ok() {
            s.stats().failed.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Schedules a retry after `delay`; settles the job unless the write
    /// failed on the connection (then the caller may try again).
    fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        let s = &self.shared;
        let due = now_ms() + delay.as_millis() as u64;
        let out = s.pool.with(|c| s.store.retry(c, &s.cfg.node_id, job, due));
        self.settle_if_final(job, &out);
        out
    }

    /// Gives the job up (archived with `record`, or dropped); settles the job.
    fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()> {
        let s = &self.shared;
        let out =
            s.pool.with(|c| s.store.discard(c, &s.cfg.node_id, Some(job.token), &job.envelope.id, record, archive));
        self.settle_if_final(job, &out);
        out
    }

    /// Quarantines a job that cannot run here (unknown task...); settles it.
    fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()> {
        let s = &self.shared;
        let out = s.pool.with(|c| s.store.quarantine(c, &s.cfg.node_id, job.token, &job.channel, &job.raw, reason));
        if out.is_ok() {
            s.stats().quarantined.fetch_add(1, Ordering::Relaxed);
        }
        self.settle_if_final(job, &out);
        out
    }

    /// Settles a job without writing anything (used when settling itself
    /// failed): it stays claimed in Redis but is no longer held, so the next
    /// heartbeat hands it back to its channel (shutdown would too).
    fn abandon(&self, job: &ClaimedJob) {
        self.shared.holdings.release([job.token]);
        self.shared.feed.settled();
    }

    /// Stops claiming; an idle fetcher waiting for the doorbell wakes too.
    fn stop_claiming(&self) {
        self.shared.feed.stop();
        self.shared.completions.set_carried(false);
        self.shared.bells.ring_all();
    }

    /// Completes the shutdown: flushes completions, then moves every claim
    /// still held (unstarted prefetched jobs, and tasks still running when
    /// the timeout expired) back to the head of its channel, deregisters the
    /// node and joins the threads. Returns the number of jobs requeued.
    ///
    /// Order matters: completions are written before the requeue, or a job
    /// that finished would be requeued and run twice.
    ///
    /// Returns within `budget` even when Redis never answers: whatever could
    /// not be done by then is left to other nodes, which recover this node's
    /// claims once its heartbeat key expires (it is no longer refreshed).
    fn shutdown(&self, budget: Duration) -> Result<u64> {
        let deadline = Instant::now() + budget;
        self.stop_claiming();
        let flushed = self.shared.completions.flush(budget);
        // Stop heartbeating before deregistering, or a late heartbeat would
        // re-create the node key after the requeue removed it. (A heartbeat
        // stuck on a silent Redis past the deadline may still land late:
        // the key then expires and the node, holding nothing, is recovered.)
        self.shared.heartbeat_closed.store(true, Ordering::Release);
        self.shared.bells.ring_all();
        // A stopping node proposes no more ticks; the other nodes do.
        self.stop_scheduler();
        self.join_until(&["heartbeat", "fetcher", "scheduler"], deadline);
        if !flushed {
            // Requeueing now would put finished jobs whose completion is
            // still unwritten back to work. Leave every claim in place: the
            // heartbeat has stopped, so other nodes recover them after
            // recovery_delay, by which time the acker may have written some.
            log("WARN", "completions could not be written before shutdown; this node's claims are left for recovery by other nodes");
            self.close(deadline);
            return Ok(0);
        }
        let s = self.shared.clone();
        let requeued = match deadline::within(deadline, "requeue", move || requeue_own_claims(&s, deadline)) {
            Some(Ok(n)) => n,
            outcome => {
                let why = match outcome {
                    Some(Err(e)) => e.to_string(),
                    _ => "Redis did not answer before the shutdown deadline".to_owned(),
                };
                log(
                    "WARN",
                    &format!(
                        "this node's claims could not be requeued ({why}); they are left for recovery by other nodes"
                    ),
                );
                0
            }
        };
        self.close(deadline);
        // Last: the final acknowledgements and observations of this node.
        let s = self.shared.clone();
        let written = deadline::within(deadline, "last-telemetry", move || match s.written_telemetry() {
            Some(t) => {
                t.tick();
                s.pool.with(|c| t.flush(c))
            }
            None => Ok(()),
        });
        match written {
            Some(Ok(())) => {}
            Some(Err(e)) => log("WARN", &format!("the last telemetry entries could not be written: {e}")),
            None => log("WARN", "the last telemetry entries could not be written before the shutdown deadline"),
        }
        Ok(requeued)
    }

    fn attach(&self, index: usize, telemetry: Arc<Telemetry>, writer: bool) {
        let _ = self.shared.telemetry.set((index, telemetry, writer));
    }

    fn set_paused(&self, paused: bool) {
        self.shared.feed.set_paused(paused);
        if paused {
            self.shared.completions.set_carried(false);
        } else {
            // Claim at once rather than at the next doorbell.
            self.shared.bells.ready.ring();
        }
    }
}

impl Drop for RedisSource {
    fn drop(&mut self) {
        self.shared.feed.stop();
        self.shared.heartbeat_closed.store(true, Ordering::Release);
        self.shared.closed.store(true, Ordering::Release);
        self.stop_scheduler();
        self.shared.completions.wake();
        self.shared.bells.ring_all();
    }
}

/// The fetcher's Redis side: `claim.lua` in the channel order, on its own
/// connection.
struct Claimer<'a> {
    s: &'a Shared,
    selector: ChannelSelector,
    conn: Reconnecting,
    /// Each claim call records a stamp unique to this node (its claimed_ms,
    /// from `Holdings::begin_claim`). When a call fails after it may have
    /// reached Redis, its jobs could be claimed with the reply lost: the
    /// stamp lets us hand exactly those back. (A request still in flight
    /// that reaches Redis after this release is handed back by the next
    /// heartbeat: those claims are not held.)
    unsettled_stamp: Option<u64>,
    /// A failing claim is retried every few tens of milliseconds: its
    /// warnings are rate-limited.
    claim_warning: Throttled,
    expired_warning: Throttled,
}

impl<'a> Claimer<'a> {
    fn new(s: &'a Shared) -> Self {
        let selector = ChannelSelector::new(s.cfg.channels.clone(), s.cfg.order).expect("validated at start");
        Claimer {
            s,
            selector,
            conn: Reconnecting::new(s.pool.connector().clone()),
            unsettled_stamp: None,
            claim_warning: Throttled::default(),
            expired_warning: Throttled::default(),
        }
    }

    /// Quarantines what did not decode, hands the jobs to the workers, and
    /// waits for the doorbell when the claim found every channel empty.
    fn deliver(&mut self, fetcher: &Fetcher, batch: ClaimBatch, want: usize, seen: u64) -> bool {
        let s = self.s;
        if let (Some(t), false) = (s.telemetry(), batch.jobs.is_empty()) {
            t.saw_tasks(batch.jobs.iter().map(|j| j.envelope.task.as_str()));
        }
        // Fewer jobs than asked for: the script found every channel
        // empty. A later push rings the doorbell (lists ring on
        // empty -> non-empty), so wait for it instead of claiming
        // again just to find nothing.
        // A claim stopped by its blocked budget (`more`) did not find the
        // lists empty: claim again at once.
        let drained = batch.len() < want && !batch.more;
        for m in batch.malformed {
            log("WARN", &format!("quarantining undecodable entry from channel {}: {}", m.channel, m.reason));
            match self.conn.run(|c| s.store.quarantine(c, &s.cfg.node_id, m.token, &m.channel, &m.raw, &m.reason)) {
                Ok(()) => {
                    s.stats().quarantined.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => log(
                    "WARN",
                    &format!("quarantine failed ({e}); the entry stays claimed and the next heartbeat requeues it"),
                ),
            }
            // Held no longer either way: archived, or handed back by the
            // next heartbeat so another claim quarantines it again.
            s.holdings.release([m.token]);
        }
        s.stats().claimed.fetch_add(batch.jobs.len() as u64, Ordering::Relaxed);
        if !fetcher.deliver(batch.jobs) {
            return false;
        }
        if drained {
            let wait = if s.bells.subscribed.load(Ordering::Acquire) { IDLE_WAIT } else { IDLE_POLL_UNSUBSCRIBED };
            s.bells.ready.wait_past(seen, wait);
        }
        true
    }

    fn failed(&mut self, fetcher: &Fetcher, e: Error, stamp: u64) {
        let s = self.s;
        s.holdings.claim_failed(stamp);
        s.stats().redis_errors.fetch_add(1, Ordering::Relaxed);
        // The script may have run with its reply lost; releasing a
        // stamp that claimed nothing is harmless.
        if e.is_connection() && self.conn.last_call_sent() {
            self.unsettled_stamp = Some(stamp);
        }
        if matches!(&e, Error::Redis(m) if m.contains("NODE_EXPIRED")) {
            // Re-register first, and say why when we can: the
            // re-registration fails the way the heartbeats did (out of
            // memory, a script error...); when Redis lost the namespace
            // (which also removes the key), that is what the heartbeat logs
            // instead.
            match self.conn.run(|c| s.heartbeat(c, 0)) {
                Ok((_, true)) => false,
                Ok(_) => self.expired_warning.log(
                    "WARN",
                    "node heartbeat had expired (this process was paused, or cut off from Redis, for longer than \
                     recovery_delay; other nodes may have recovered its jobs); re-registered",
                ),
                Err(e) => self.expired_warning.log(
                    "WARN",
                    &format!("node heartbeat expired and re-registering failed: {e}; claiming waits until it succeeds"),
                ),
            };
        } else if !e.is_connection() || self.conn.is_connected() {
            self.claim_warning.log("WARN", &format!("claim failed: {e}"));
        }
        fetcher.pause(self.conn.pause_before_retry());
    }
}

impl Fetch for Claimer<'_> {
    /// First hands back the jobs of a claim whose reply was lost.
    fn prepare(&mut self, fetcher: &Fetcher) -> bool {
        let Some(stamp) = self.unsettled_stamp else { return true };
        let s = self.s;
        match self.conn.run(|c| s.store.requeue(c, &s.cfg.node_id, Requeue::Release { stamp })) {
            Ok(n) => {
                self.unsettled_stamp = None;
                let n = n.unwrap_or(0);
                if n > 0 {
                    log("WARN", &format!("requeued {n} job(s) claimed by a call whose reply was lost"));
                }
                true
            }
            Err(_) => {
                fetcher.pause(self.conn.pause_before_retry());
                false
            }
        }
    }

    /// Claims, carrying the completions made since the last claim
    /// (decision 51): one `ack_claim.lua` call, or `claim.lua` when there
    /// are none to carry.
    fn fetch(&mut self, fetcher: &Fetcher, want: usize) -> bool {
        let s = self.s;
        let seen = s.bells.ready.epoch();
        let order = self.selector.next_order();
        let names: Vec<&str> = order.iter().map(|&i| self.selector.names()[i].as_str()).collect();
        let stamp = s.holdings.begin_claim();
        let sent = Instant::now();
        let carry = s.completions.carry();
        let node = &s.cfg.node_id;
        let out = match &carry {
            Some(carry) => self.conn.run(|c| s.store.ack_claim(c, node, &carry.items, &names, want, stamp)),
            None => self.conn.run(|c| s.store.claim(c, node, &names, want, stamp)).map(|batch| (Vec::new(), Ok(batch))),
        };
        s.stats().note(&out);
        let claimed = match (out, carry) {
            (Ok((stale, claimed)), carry) => {
                if let Some(carry) = carry {
                    s.acknowledged(&carry.items, &stale);
                }
                claimed
            }
            (Err(e), carry) => {
                // Applied or not, the acker resends them: a batch that
                // applied is recognised by ack.lua's marker.
                if let Some(carry) = carry {
                    carry.failed();
                }
                Err(e)
            }
        };
        match claimed {
            Ok(batch) => {
                s.stats().claim_calls.fetch_add(1, Ordering::Relaxed);
                s.stats().empty_claims.fetch_add(batch.is_empty() as u64, Ordering::Relaxed);
                let tokens = batch.jobs.iter().map(|j| j.token).chain(batch.malformed.iter().map(|m| m.token));
                s.holdings.claimed(stamp, tokens);
                s.feed.claimed_in(sent.elapsed());
                // A claim that got all it asked for is followed by another
                // once the workers take half the window: completions may
                // wait for it. One that found the channels empty is not,
                // nor one that returns after the node stopped or paused
                // claiming (which cleared the flag as this call ran).
                s.completions.set_carried((batch.len() >= want || batch.more) && s.feed.is_claiming());
                // Every claim reads every channel's flow string: what it
                // says replaces what the node knew.
                *s.paused.lock() = batch.flow.iter().filter(|f| f.paused()).map(|f| f.channel.clone()).collect();
                *s.levels.lock() = batch.flow.iter().flat_map(|f| f.level_routes()).collect();
                self.deliver(fetcher, batch, want, seen)
            }
            Err(e) => {
                s.completions.set_carried(false);
                self.failed(fetcher, e, stamp);
                true
            }
        }
    }
}

/// Writes the completions no claim carried.
fn ack_loop(s: &Shared) {
    let conn = Reconnecting::new(s.pool.connector().clone());
    acker::run(&s.completions, conn, &s.closed, s.stats(), |conn, batch| {
        let written = conn.run(|c| s.store.ack_resendable(c, &s.cfg.node_id, batch));
        s.stats().note(&written);
        let stale = written?;
        s.answered(batch, &stale);
        Ok(batch.iter().filter(|(t, _)| stale.contains(t)).cloned().collect())
    });
}

/// The heartbeat thread: one thread (decision 24: an idle node wakes only
/// for its heartbeat) running, each time one is due, the steps below. Each
/// step keeps its own deadline; the thread sleeps until the earliest, or
/// until the doorbell says `planned`.
struct HeartbeatThread<'a> {
    s: &'a Shared,
    conn: Reconnecting,
    next_beat: Instant,
    /// When due planned and retrying jobs should next be promoted.
    next_due: Instant,
    /// The `throttled` bell's epoch as it was before the last promotion
    /// that woke throttled keys and found none left (decision 42): while
    /// the bell has not moved since, promotions skip the wake, so a
    /// namespace without rate limits pays nothing. None: wake (at start).
    quiet_since: Option<u64>,
    /// When the node's telemetry should next be written.
    next_flush: Instant,
    /// Failures answered by Redis (not a lost connection: that is an
    /// outage, reported by the node's observations), rate-limited.
    heartbeat_warning: Throttled,
    promote_warning: Throttled,
    recover_warning: Throttled,
    telemetry_warning: Throttled,
    /// systemd's watchdog, when the service has one: this thread's loop is
    /// what proves the node alive.
    watchdog: Option<Watchdog>,
}

impl<'a> HeartbeatThread<'a> {
    fn new(s: &'a Shared) -> Self {
        let now = Instant::now();
        HeartbeatThread {
            s,
            conn: Reconnecting::new(s.pool.connector().clone()),
            next_beat: now + s.cfg.heartbeat_interval,
            next_due: now,
            quiet_since: None,
            next_flush: now + FLUSH_INTERVAL,
            heartbeat_warning: Throttled::default(),
            promote_warning: Throttled::default(),
            recover_warning: Throttled::default(),
            telemetry_warning: Throttled::default(),
            watchdog: Watchdog::from_env(),
        }
    }

    fn run(mut self) {
        while !self.s.heartbeat_closed.load(Ordering::Acquire) {
            let seen = self.s.bells.planned.epoch();
            let now = Instant::now();
            let beating = now >= self.next_beat;
            if beating {
                self.heartbeat(now);
            }
            self.flush_telemetry(now, beating);
            if now >= self.next_due {
                self.promote(now);
            }
            if let Some(w) = &mut self.watchdog {
                w.tick(Instant::now());
            }
            self.sleep(seen);
        }
    }

    /// Refreshes the node key; acts on what the heartbeat learned.
    fn heartbeat(&mut self, now: Instant) {
        let s = self.s;
        // Only the journal writer reads the mailbox: one reader per node.
        let take = if s.written_telemetry().is_some() { CONTROL_TAKE } else { 0 };
        let heartbeat = self.conn.run(|c| s.heartbeat(c, take));
        s.stats().note(&heartbeat);
        match heartbeat {
            Ok((heartbeat, _)) => {
                self.next_beat = now + s.cfg.heartbeat_interval;
                if heartbeat.ready {
                    s.bells.ready.ring();
                }
                if heartbeat.released > 0 {
                    log(
                        "WARN",
                        &format!(
                            "released {} publication(s) whose publisher did not (its barrier expired)",
                            heartbeat.released
                        ),
                    );
                }
                self.deliver_requests(heartbeat.requests);
                self.recover(heartbeat.dead);
            }
            Err(e) => {
                s.stats().redis_errors.fetch_add(1, Ordering::Relaxed);
                if !e.is_connection() {
                    self.heartbeat_warning.log(
                        "WARN",
                        &format!("heartbeat failed: {e}; retrying (a node that cannot heartbeat for recovery_delay is recovered by the others)"),
                    );
                }
                self.next_beat = now + self.conn.backoff_remaining().max(RETRY_AFTER_ERROR);
            }
        }
    }

    /// Hands control requests taken from the mailbox to the node's monitor.
    fn deliver_requests(&self, requests: Vec<String>) {
        if let Some(t) = self.s.written_telemetry() {
            for request in requests {
                t.request(request);
            }
        }
    }

    /// Moves the claims of nodes whose heartbeat expired back to their
    /// channels (each once: see `Requeue::Recover`).
    fn recover(&mut self, dead: Vec<String>) {
        let s = self.s;
        for node in dead {
            let recovered = self.conn.run(|c| s.store.recover_node(c, &node));
            if let Err(e) = &recovered {
                if !e.is_connection() {
                    self.recover_warning.log(
                        "WARN",
                        &format!("recovering dead node {node} failed: {e}; retrying at the next heartbeat"),
                    );
                }
            }
            if let Ok(Some(jobs)) = recovered {
                let n = jobs.len() as u64;
                s.stats().recovered.fetch_add(n, Ordering::Relaxed);
                if n > 0 {
                    log("WARN", &format!("recovered {n} job(s) claimed by dead node {node}"));
                    log_moved(&jobs, "recovered from a dead node: back on its channel", "job.recovered", Some(&node));
                }
                if let Some(t) = s.telemetry() {
                    t.recovered(&node, &jobs);
                }
            }
        }
    }

    /// Writes the node's telemetry when this source is its writer: once a
    /// second while jobs flow; an idle node writes it (observations) with
    /// its heartbeats only, so it wakes no more often than before.
    fn flush_telemetry(&mut self, now: Instant, beating: bool) {
        let Some(t) = self.s.written_telemetry() else {
            self.next_flush = now + IDLE_WAIT;
            return;
        };
        if now >= self.next_flush || beating {
            let active = t.tick();
            if t.has_pending() {
                let flushed = self.conn.run(|c| t.flush(c));
                self.s.stats().note(&flushed);
                if let Err(e) = &flushed {
                    if !e.is_connection() {
                        self.telemetry_warning.log(
                            "WARN",
                            &format!(
                                "telemetry not written: {e}; kept while the buffer has room, jobs are not affected"
                            ),
                        );
                    }
                }
            }
            self.next_flush = if active || t.has_pending() { now + FLUSH_INTERVAL } else { now + IDLE_WAIT };
        }
    }

    /// Promotes due planned and retrying jobs; learns when the next is due.
    fn promote(&mut self, now: Instant) {
        let s = self.s;
        // Read before the call: a ring after it moves the epoch past this.
        // Without a live subscription rings may be missed: always wake.
        let epoch = s.bells.throttled.epoch();
        let wake = self.quiet_since != Some(epoch) || !s.bells.subscribed.load(Ordering::Acquire);
        match self.conn.run(|c| s.store.promote_waking(c, PROMOTE_LIMIT, wake)) {
            Ok((moved, next, waiting)) => {
                if wake && !waiting {
                    self.quiet_since = Some(epoch);
                }
                s.stats().promoted.fetch_add(moved, Ordering::Relaxed);
                self.next_due = if moved as usize >= PROMOTE_LIMIT {
                    now
                } else {
                    match next {
                        // A delay on Redis' clock, waited out on this
                        // node's monotonic clock: a skewed wall clock here
                        // changes nothing. From the time after the call (not
                        // `now`, before it): waking a round trip early finds
                        // nothing due yet.
                        Some(delay) => Instant::now() + delay + PROMOTE_COALESCE,
                        None => now + IDLE_WAIT,
                    }
                };
            }
            Err(e) => {
                s.stats().redis_errors.fetch_add(1, Ordering::Relaxed);
                if !e.is_connection() {
                    self.promote_warning.log("WARN", &format!("promoting due jobs failed: {e}; retrying"));
                }
                self.next_due = now + self.conn.backoff_remaining().max(RETRY_AFTER_ERROR);
            }
        }
    }

    /// Sleeps until the earliest deadline; a `planned` ring since `seen`
    /// makes promotion due at once.
    fn sleep(&mut self, seen: u64) {
        // A subscription outage may hide a `planned` ring: re-check due work
        // at every heartbeat then.
        if !self.s.bells.subscribed.load(Ordering::Acquire) {
            self.next_due = self.next_due.min(self.next_beat);
        }
        let mut wake = self.next_beat.min(self.next_due).min(self.next_flush);
        if let Some(w) = &self.watchdog {
            wake = wake.min(w.next());
        }
        let wait = wake.saturating_duration_since(Instant::now());
        if self.s.bells.planned.wait_past(seen, wait) {
            self.next_due = Instant::now();
        }
    }
}
