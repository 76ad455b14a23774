//! The SolidEngine job source of a worker node: FETCH long-polls for
//! reservations (no doorbell needed), completions go out in ACKMANY
//! batches, and leases of long-running tasks are extended so they are not
//! redelivered while still running.
//!
//! Fencing is the server's: each reservation carries a fence, and a settle
//! with an outdated fence is rejected (`STALE`) and changes nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::acker::{self, Completions};
use crate::channel_order::{ChannelOrder, ChannelSelector};
use crate::claim::{ClaimedJob, FailureCount};
use crate::deadline;
use crate::engine::wire::{self, Reservation};
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::feed::{Feed, Fetch, Fetcher};
use crate::log::{self, log, Level};
use crate::notify::Watchdog;
use crate::now_ms;
use crate::prefetch::Prefetch;
use crate::redis::connection::{Pool, Reconnecting, Timeouts};
use crate::source::{JobSource, Stats};
use crate::telemetry::Telemetry;

#[derive(Debug, Clone)]
pub struct EngineSourceConfig {
    pub url: String,
    pub password: Option<String>,
    /// (channel name, engine channel id, weight)
    pub channels: Vec<(String, u32, u32)>,
    pub order: ChannelOrder,
    pub prefetch: Prefetch,
    /// Lease requested per reservation; running tasks are extended before it
    /// ends. Zero: the server's default lease, never extended.
    pub lease: Duration,
    /// Connect, read and write timeouts of every connection to the engine.
    pub timeouts: Timeouts,
    /// Whether and how this node announces itself (`NODE`); None: it does not.
    pub presence: Option<PresenceConfig>,
}

/// A node's announcement to the engine: sent once at start and then every
/// `every` (the heartbeat interval) on its own thread, never per job; it
/// lives `ttl` on the server (the recovery delay, like Redis's node key), and
/// a clean stop withdraws it.
#[derive(Debug, Clone)]
pub struct PresenceConfig {
    pub node_id: String,
    /// JSON, as stored in Redis's node key.
    pub description: String,
    pub every: Duration,
    pub ttl: Duration,
}

/// How long one FETCH waits on the server for work. Bounds how long a
/// stopping node waits for its fetcher, without any polling cost.
const FETCH_BLOCK: Duration = Duration::from_millis(500);

struct Held {
    id: String,
    /// Fetched, or last extended.
    renewed: Instant,
}

struct Shared {
    cfg: EngineSourceConfig,
    pool: Pool,
    names: HashMap<u32, String>,
    feed: Feed,
    closed: AtomicBool,
    /// Every reservation this node holds, from FETCH until its settle is
    /// written or it is handed back: fence -> held. Buffered jobs are here
    /// too, so their leases are extended while they wait for a worker.
    /// Locked once per fetched batch and once per completion batch (by the
    /// acker), never per job on the hot path and never during I/O.
    held: Mutex<HashMap<u64, Held>>,
    /// Fences of jobs taken from the buffer and given back untouched when
    /// the node began stopping (rare): released, not retried, at shutdown.
    untaken: Mutex<Vec<u64>>,
    /// (index in the hub, telemetry).
    telemetry: OnceLock<(usize, Arc<Telemetry>)>,
}

impl Shared {
    fn stats(&self) -> &Stats {
        self.feed.stats()
    }
}

pub struct EngineSource {
    shared: Arc<Shared>,
    completions: Arc<Completions<(String, u64)>>,
    /// Dropped when the source closes: ends the presence announcer and the
    /// lease extender, which must outlive `stop_claiming` because running
    /// tasks still need their leases.
    close_tx: Mutex<Option<Sender<()>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl EngineSource {
    /// Connects once (so a wrong URL or password fails here) and starts the threads.
    pub fn start(cfg: EngineSourceConfig) -> Result<Self> {
        let names: Vec<(String, u32)> = cfg.channels.iter().map(|(n, _, w)| (n.clone(), *w)).collect();
        ChannelSelector::new(names, cfg.order)?;
        let pool = Pool::new(wire::connector(&cfg.url, cfg.password.as_deref(), cfg.timeouts)?);
        pool.with(|c| redis::cmd("PING").query::<String>(c).map_err(Error::from))?;
        let (feed, fetcher) = Feed::new(cfg.prefetch);
        let completions = Arc::new(Completions::default());
        let (close_tx, close_rx) = bounded::<()>(0);
        let shared = Arc::new(Shared {
            names: cfg.channels.iter().map(|(n, id, _)| (*id, n.clone())).collect(),
            cfg,
            pool,
            feed,
            closed: AtomicBool::new(false),
            held: Mutex::new(HashMap::new()),
            untaken: Mutex::new(Vec::new()),
            telemetry: OnceLock::new(),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(format!("solid-engine-{name}")).spawn(f).expect("spawn engine thread")
        };
        let extend = !shared.cfg.lease.is_zero();
        let mut threads = vec![
            {
                let s = shared.clone();
                spawn("fetcher", Box::new(move || fetcher.run(&s.feed, &mut Fetching::new(&s))))
            },
            {
                let (s, c) = (shared.clone(), completions.clone());
                spawn("acker", Box::new(move || ack_loop(&s, &c)))
            },
        ];
        if let Some(presence) = shared.cfg.presence.clone() {
            let s = shared.clone();
            let close = close_rx.clone();
            threads.push(spawn("presence", Box::new(move || presence_loop(&s, &presence, close))));
        }
        if extend {
            let s = shared.clone();
            threads.push(spawn("leases", Box::new(move || extend_loop(&s, close_rx))));
        }
        Ok(EngineSource { shared, completions, close_tx: Mutex::new(Some(close_tx)), threads: Mutex::new(threads) })
    }

    fn settled(&self, job: &ClaimedJob) {
        self.shared.held.lock().remove(&job.token);
        self.shared.feed.settled();
    }

    fn settle_if_final(&self, job: &ClaimedJob, out: &Result<()>) {
        match out {
            Ok(()) => self.settled(job),
            Err(Error::StaleClaim(f)) => {
                self.shared.stats().stale.fetch_add(1, Ordering::Relaxed);
                log(
                    "WARN",
                    &format!(
                        "reservation {f} of job {} was stale when settled (its lease expired); nothing was changed",
                        job.envelope.id
                    ),
                );
                self.settled(job);
            }
            Err(_) => {}
        }
    }

    fn write(&self, f: impl Fn(&mut redis::Connection) -> Result<()>) -> Result<()> {
        self.shared.pool.with(f)
    }
}

/// Hands back what a stopping node still holds (see `EngineSource::shutdown`):
/// `unstarted` reservations are released, `running` ones retried at once
/// (RETRY with no delay: the attempt stays counted). Stops at `deadline`.
/// Returns how many were handed back.
fn hand_back_all(s: &Shared, unstarted: &[(String, u64)], running: &[(String, u64)], deadline: Instant) -> u64 {
    let released = if unstarted.is_empty() {
        0
    } else {
        match s.pool.with(|c| wire::release_many(c, unstarted)) {
            Ok(n) => n,
            Err(e) => {
                log("WARN", &format!("{} prefetched jobs could not be released to SolidEngine ({e}); they run again after their lease", unstarted.len()));
                0
            }
        }
    };
    let mut retried = 0;
    for (id, fence) in running {
        if Instant::now() >= deadline {
            break;
        }
        if s.pool.with(|c| wire::retry(c, id, *fence, 0)).is_ok() {
            retried += 1;
        }
    }
    released + retried
}

impl JobSource for EngineSource {
    fn name(&self) -> &str {
        "engine"
    }

    fn feed(&self) -> &Feed {
        &self.shared.feed
    }

    /// Not run after all (the node is stopping): shutdown releases it.
    fn untake(&self, job: ClaimedJob) {
        self.shared.untaken.lock().push(job.token);
        self.shared.feed.settled();
    }

    /// The acker forgets the reservation once the ACK is written.
    fn complete(&self, job: &ClaimedJob) {
        self.shared.feed.ran(job);
        // No claim carries an engine completion: the acker writes it.
        self.completions.push((job.envelope.id.clone(), job.token), false);
        self.shared.feed.settled();
    }

    /// SolidEngine counts deliveries, not failures: the failure count is the
    /// number of times the job was reserved (a lease that expired after a
    /// crash counts too). No round trip is needed.
    fn record_failure(&self, job: &ClaimedJob, _error_class: &str, _message: &str) -> Result<FailureCount> {
        self.shared.stats().failed.fetch_add(1, Ordering::Relaxed);
        Ok(FailureCount { failures: job.attempts.max(1), first_failure_ms: now_ms() })
    }

    fn retry(&self, job: &ClaimedJob, delay: Duration) -> Result<()> {
        let out = self.write(|c| wire::retry(c, &job.envelope.id, job.token, delay.as_millis() as u64));
        self.settle_if_final(job, &out);
        out
    }

    /// Archive: the engine's dead list (FAIL, with the reason and error).
    /// Drop: completed without running again (ACK).
    fn discard(&self, job: &ClaimedJob, record: &serde_json::Value, archive: bool) -> Result<()> {
        let out = if archive {
            let reason = format!(
                "{} ({}: {})",
                record.get("reason").and_then(|r| r.as_str()).unwrap_or("discarded"),
                record.get("error_class").and_then(|r| r.as_str()).unwrap_or("-"),
                record.get("message").and_then(|r| r.as_str()).unwrap_or("")
            );
            self.write(|c| wire::fail(c, &job.envelope.id, job.token, &reason))
        } else {
            self.write(|c| wire::ack(c, &job.envelope.id, job.token))
        };
        self.settle_if_final(job, &out);
        out
    }

    fn quarantine(&self, job: &ClaimedJob, reason: &str) -> Result<()> {
        let out = self.write(|c| wire::fail(c, &job.envelope.id, job.token, &format!("quarantined: {reason}")));
        if out.is_ok() {
            self.shared.stats().quarantined.fetch_add(1, Ordering::Relaxed);
        }
        self.settle_if_final(job, &out);
        out
    }

    /// The reservation is left to expire: the engine redelivers the job
    /// after its lease.
    fn abandon(&self, job: &ClaimedJob) {
        self.settled(job);
    }

    /// Writes completions, then hands back every reservation still held:
    /// prefetched jobs that never started are released (RELEASEMANY: ready
    /// at the head of their channel, the attempt not counted), tasks still
    /// running at the timeout are retried at once (RETRY 0: their attempt
    /// was used). What cannot be handed back (engine unreachable, or silent
    /// until the end of `budget`) is redelivered when its lease ends.
    ///
    /// Returns within `budget` even when the engine never answers.
    fn shutdown(&self, budget: Duration) -> Result<u64> {
        let deadline = Instant::now() + budget;
        self.stop_claiming();
        let flushed = self.completions.flush(budget);
        self.shared.closed.store(true, Ordering::Release);
        self.completions.wake();
        self.close_tx.lock().take();
        // Out of the lock before waiting: a second shutdown never queues
        // behind a thread blocked on a silent engine (left behind at the
        // deadline; it ends within its connection's timeouts).
        let threads: Vec<((), JoinHandle<()>)> = self.threads.lock().drain(..).map(|h| ((), h)).collect();
        deadline::join_until(threads, deadline);
        if !flushed {
            // Handing back now would put finished jobs whose ACK is still
            // unwritten back to work; their leases end and the engine
            // redelivers what really did not finish.
            log("WARN", "completions could not be written to SolidEngine before shutdown; held jobs are redelivered when their leases end");
            return Ok(0);
        }
        // Jobs never started: still in the buffer, or given back at stop.
        let mut unstarted_fences: std::collections::HashSet<u64> =
            self.shared.feed.jobs().try_iter().map(|j| j.token).collect();
        unstarted_fences.extend(self.shared.untaken.lock().drain(..));
        let mut held: Vec<(u64, Held)> = self.shared.held.lock().drain().collect();
        // Fences grow with fetch order: release the oldest first, so the
        // channel keeps its order.
        held.sort_by_key(|(fence, _)| *fence);
        let (unstarted, started): (Vec<_>, Vec<_>) =
            held.into_iter().partition(|(fence, _)| unstarted_fences.contains(fence));
        let unstarted: Vec<(String, u64)> = unstarted.into_iter().map(|(fence, h)| (h.id, fence)).collect();
        let running: Vec<(String, u64)> = started.into_iter().map(|(fence, h)| (h.id, fence)).collect();
        let count = unstarted.len() + running.len();
        let s = self.shared.clone();
        let handed_back = move || hand_back_all(&s, &unstarted, &running, deadline);
        match deadline::within(deadline, "engine-hand-back", handed_back) {
            Some(n) => Ok(n),
            None => {
                log("WARN", &format!("SolidEngine did not answer before the shutdown deadline; {count} held job(s) run again after their lease"));
                Ok(0)
            }
        }
    }

    fn attach(&self, index: usize, telemetry: Arc<Telemetry>, _writer: bool) {
        let _ = self.shared.telemetry.set((index, telemetry));
    }
}

impl Drop for EngineSource {
    fn drop(&mut self) {
        self.shared.feed.stop();
        self.shared.closed.store(true, Ordering::Release);
        self.completions.wake();
        self.close_tx.lock().take();
    }
}

/// The fetcher's SolidEngine side: FETCH in the channel order, on its own
/// connection, long-polling on the server instead of waiting for a doorbell.
struct Fetching<'a> {
    s: &'a Shared,
    selector: ChannelSelector,
    /// Engine channel ids, in the selector's order.
    ids: Vec<u32>,
    conn: Reconnecting,
}

impl<'a> Fetching<'a> {
    fn new(s: &'a Shared) -> Self {
        let names: Vec<(String, u32)> = s.cfg.channels.iter().map(|(n, _, w)| (n.clone(), *w)).collect();
        let ids = s.cfg.channels.iter().map(|(_, id, _)| *id).collect();
        let selector = ChannelSelector::new(names, s.cfg.order).expect("validated at start");
        // FETCH may wait FETCH_BLOCK on the server by design: the read
        // timeout bounds the silence beyond that.
        let conn = Reconnecting::new(s.pool.connector().with_extra_read_time(FETCH_BLOCK));
        Fetching { s, selector, ids, conn }
    }

    /// A reservation as a claimed job; one whose payload does not decode is
    /// quarantined (FAIL) instead.
    fn claimed(&mut self, r: Reservation) -> Option<ClaimedJob> {
        let s = self.s;
        let channel = s.names.get(&r.channel_id).cloned().unwrap_or_else(|| r.channel_id.to_string());
        let raw = String::from_utf8_lossy(&r.payload).into_owned();
        match Envelope::decode(&raw) {
            Ok(envelope) => {
                s.stats().claimed.fetch_add(1, Ordering::Relaxed);
                Some(ClaimedJob {
                    token: r.fence,
                    channel,
                    // Priorities are a Redis feature for now: the Publisher
                    // refuses them for engine channels.
                    priority: crate::priority::DEFAULT,
                    raw,
                    envelope,
                    claimed_ms: now_ms(),
                    taken_at: None,
                    source: 0,
                    attempts: r.attempts,
                })
            }
            Err(e) => {
                log::log_fields(
                    Level::Warn,
                    &format!("quarantining undecodable SolidEngine job {}: {e}", r.job_id),
                    &[
                        ("job_id", r.job_id.as_str().into()),
                        ("event", "job.dead".into()),
                        ("reason", "quarantined".into()),
                    ],
                );
                let reason = format!("quarantined: {e}");
                if self.conn.run(|c| wire::fail(c, &r.job_id, r.fence, &reason)).is_ok() {
                    s.stats().quarantined.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
        }
    }
}

impl Fetch for Fetching<'_> {
    fn fetch(&mut self, fetcher: &Fetcher, want: usize) -> bool {
        let s = self.s;
        let order: Vec<u32> = self.selector.next_order().into_iter().map(|i| self.ids[i]).collect();
        let lease_ms = s.cfg.lease.as_millis() as u64;
        let sent = Instant::now();
        let fetched = self.conn.run(|c| wire::fetch(c, want, lease_ms, FETCH_BLOCK.as_millis() as u64, &order));
        s.stats().note(&fetched);
        match fetched {
            Ok(reservations) => {
                // An empty answer may have waited on the server (long poll):
                // only a FETCH that found work measures the round trip.
                if !reservations.is_empty() {
                    s.feed.claimed_in(sent.elapsed());
                }
                let fetched = Instant::now();
                let batch: Vec<ClaimedJob> = reservations.into_iter().filter_map(|r| self.claimed(r)).collect();
                // Held before a worker can see them, so a job taken at once
                // is already known to `taken` and to the lease extender.
                {
                    let mut held = s.held.lock();
                    for job in &batch {
                        held.insert(job.token, Held { id: job.envelope.id.clone(), renewed: fetched });
                    }
                }
                fetcher.deliver(batch)
            }
            Err(e) => {
                s.stats().redis_errors.fetch_add(1, Ordering::Relaxed);
                if !e.is_connection() {
                    log("WARN", &format!("SolidEngine fetch failed: {e}"));
                }
                fetcher.pause(self.conn.pause_before_retry());
                true
            }
        }
    }
}

fn ack_loop(s: &Shared, completions: &Completions<(String, u64)>) {
    let conn = Reconnecting::new(s.pool.connector().clone());
    acker::run(completions, conn, &s.closed, s.stats(), |conn, batch| {
        let written = conn.run(|c| wire::ack_many(c, batch));
        s.stats().note(&written);
        let stale = written?;
        if let Some((index, t)) = s.telemetry.get() {
            t.acknowledged(*index, batch.iter().map(|(_, fence)| *fence).filter(|fence| !stale.contains(fence)));
            t.unacknowledged(*index, stale.iter().copied());
        }
        // Written (or stale): these reservations are no longer held.
        let mut held = s.held.lock();
        for (_, fence) in batch {
            held.remove(fence);
        }
        drop(held);
        Ok(batch.iter().filter(|(_, fence)| stale.contains(fence)).cloned().collect())
    });
}

/// Announces the node at once and then every `p.every` until the source
/// closes, then withdraws it. A failed announcement is retried at the next
/// tick (the entry outlives a few missed ones: its TTL is the recovery
/// delay); it never affects jobs.
fn presence_loop(s: &Shared, p: &PresenceConfig, close_rx: Receiver<()>) {
    let mut conn = Reconnecting::new(s.pool.connector().clone());
    let mut warned = false;
    loop {
        let observed = s.telemetry.get().and_then(|(_, t)| t.summary());
        let description = announcement(&p.description, observed);
        match conn.run(|c| wire::announce(c, &p.node_id, p.ttl, &description)) {
            Ok(()) => warned = false,
            Err(e) => {
                if !warned && !e.is_connection() {
                    log("WARN", &format!("announcing node {} to SolidEngine failed: {e}", p.node_id));
                }
                warned = true;
            }
        }
        match close_rx.recv_timeout(p.every) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => break,
        }
    }
    let _ = conn.run(|c| wire::announce(c, &p.node_id, Duration::ZERO, ""));
}

/// The largest description the engine takes (`presence::MAX_DESCRIPTION`
/// on the server).
const MAX_ANNOUNCEMENT: usize = 4 * 1024;

/// The node's description with its latest observation in short under
/// `observed`, so a node that writes nothing to Redis still shows its
/// workers and resources; the description alone when there is none yet,
/// or when the two would not fit the engine's bound.
fn announcement(description: &str, observed: Option<serde_json::Value>) -> String {
    let Some(observed) = observed else { return description.to_owned() };
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str(description) else {
        return description.to_owned();
    };
    map.insert("observed".into(), observed);
    let text = serde_json::Value::Object(map).to_string();
    if text.len() <= MAX_ANNOUNCEMENT {
        text
    } else {
        description.to_owned()
    }
}

/// Extends every lease this node holds (buffered jobs included) once a third
/// of it has passed since it was fetched or last extended, so neither a long
/// task nor a job waiting in the prefetch buffer is redelivered.
fn extend_loop(s: &Shared, close_rx: Receiver<()>) {
    let mut conn = Reconnecting::new(s.pool.connector().clone());
    let tick = s.cfg.lease / 3;
    let lease_ms = s.cfg.lease.as_millis() as u64;
    // systemd's watchdog, pinged by this loop: on a node served only by
    // SolidEngine it is the thread that shows the node alive (the Redis
    // heartbeat thread pings on the others; two pingers are harmless).
    let mut watchdog = Watchdog::from_env();
    loop {
        let mut wait = tick / 2;
        if let Some(w) = &watchdog {
            wait = wait.min(w.next().saturating_duration_since(Instant::now()));
        }
        match close_rx.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        if let Some(w) = &mut watchdog {
            w.tick(Instant::now());
        }
        let due: Vec<(u64, String)> = s
            .held
            .lock()
            .iter()
            .filter(|(_, h)| h.renewed.elapsed() >= tick)
            .map(|(fence, h)| (*fence, h.id.clone()))
            .collect();
        for (fence, id) in due {
            let sent = Instant::now();
            match conn.run(|c| wire::extend(c, &id, fence, lease_ms)) {
                Ok(()) => {
                    if let Some(h) = s.held.lock().get_mut(&fence) {
                        h.renewed = sent;
                    }
                }
                // Stale: completed (ACK in flight) or already redelivered;
                // nothing to extend.
                Err(Error::StaleClaim(_)) => {}
                Err(e) => {
                    if !e.is_connection() {
                        log::log_fields(
                            Level::Warn,
                            &format!("extending the lease of job {id} failed: {e}"),
                            &[("job_id", id.to_string().into())],
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_carries_the_observation_when_it_fits() {
        let description = r#"{"hostname":"h","pid":1}"#;
        assert_eq!(announcement(description, None), description);
        let with: serde_json::Value =
            serde_json::from_str(&announcement(description, Some(serde_json::json!({"state": "running"})))).unwrap();
        assert_eq!((with["pid"].as_u64(), with["observed"]["state"].as_str()), (Some(1), Some("running")));
        let huge = serde_json::json!({"pad": "x".repeat(MAX_ANNOUNCEMENT)});
        assert_eq!(
            announcement(description, Some(huge)),
            description,
            "over the engine's bound: the description alone"
        );
        assert_eq!(announcement("not json", Some(serde_json::json!({}))), "not json");
    }
}
