//! Model-based test: the engine (lazy deletion, heaps, seq tokens) against
//! a naive reference that scans everything and removes eagerly. Random
//! operations over a small id space, so duplicates, stale fences, expiry,
//! retention and dead-list overflow all happen often.
//!
//! The restart variant journals every change through real storage (log
//! files, compactions) and restarts in the middle of the history: the
//! recovered engine must hold exactly the live engine's queues (same FIFO
//! order per channel, same schedule), and the history then goes on against
//! the same model, so any order replay got wrong shows up in later FETCHes.

use std::collections::{HashMap, VecDeque};

use super::*;
use crate::storage::{Durability, Storage};
use crate::testutil::TempDir;

/// Ready jobs per channel in FIFO order; scheduled (due, id) in the order
/// they become ready.
type Order = (Vec<(u32, Vec<u128>)>, Vec<(u64, u128)>);

#[derive(Clone, Debug)]
struct MJob {
    channel: u32,
    state: State,
    attempts: u32,
    fence: u64,
    /// due / lease deadline / finished at
    time: u64,
    /// order of entering `scheduled` (tie-break for equal due times)
    order: u64,
}

struct Model {
    cfg: EngineConfig,
    jobs: HashMap<u128, MJob>,
    queues: HashMap<u32, VecDeque<u128>>,
    finished: Vec<u128>,
    dead: Vec<u128>,
    next_fence: u64,
    next_order: u64,
}

impl Model {
    fn new(cfg: EngineConfig) -> Model {
        Model {
            cfg,
            jobs: HashMap::new(),
            queues: HashMap::new(),
            finished: Vec::new(),
            dead: Vec::new(),
            next_fence: 1,
            next_order: 0,
        }
    }

    fn remove_from_queue(&mut self, id: u128) {
        for q in self.queues.values_mut() {
            q.retain(|&x| x != id);
        }
    }

    fn tick(&mut self, now: u64) {
        let mut expired: Vec<(u64, u64, u128)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == State::Reserved && j.time <= now)
            .map(|(id, j)| (j.time, j.fence, *id))
            .collect();
        expired.sort();
        for &(_, _, id) in expired.iter().rev() {
            let job = self.jobs.get_mut(&id).unwrap();
            job.state = State::Ready;
            let channel = job.channel;
            self.queues.entry(channel).or_default().push_front(id);
        }
        let mut due: Vec<(u64, u64, u128)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == State::Scheduled && j.time <= now)
            .map(|(id, j)| (j.time, j.order, *id))
            .collect();
        due.sort();
        for (_, _, id) in due {
            self.make_ready(id);
        }
        let retention = self.cfg.completed_retention_ms;
        let jobs = &mut self.jobs;
        self.finished.retain(|id| {
            let keep = jobs[id].time + retention > now;
            if !keep {
                jobs.remove(id);
            }
            keep
        });
    }

    fn make_ready(&mut self, id: u128) {
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = State::Ready;
        let channel = job.channel;
        self.queues.entry(channel).or_default().push_back(id);
    }

    fn schedule(&mut self, id: u128, due: u64) {
        self.next_order += 1;
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = State::Scheduled;
        job.time = due;
        job.order = self.next_order;
    }

    fn push(&mut self, now: u64, channel: u32, id: u128, due: Option<u64>) -> bool {
        self.tick(now);
        if self.jobs.contains_key(&id) {
            return false;
        }
        self.jobs.insert(id, MJob { channel, state: State::Ready, attempts: 0, fence: 0, time: 0, order: 0 });
        match due {
            Some(d) if d > now => self.schedule(id, d),
            _ => self.make_ready(id),
        }
        true
    }

    fn fetch(&mut self, now: u64, count: usize, lease: u64, channels: &[u32]) -> Vec<(u128, u32, u64, u32)> {
        self.tick(now);
        let lease = if lease == 0 { self.cfg.lease_ms } else { lease };
        let mut out = Vec::new();
        for &c in channels {
            while out.len() < count {
                let Some(id) = self.queues.get_mut(&c).and_then(|q| q.pop_front()) else { break };
                let job = self.jobs.get_mut(&id).unwrap();
                job.state = State::Reserved;
                job.attempts += 1;
                job.fence = self.next_fence;
                self.next_fence += 1;
                job.time = now + lease;
                out.push((id, c, job.fence, job.attempts));
            }
        }
        out
    }

    fn check(&self, id: u128, fence: u64) -> Result<(), &'static str> {
        match self.jobs.get(&id) {
            None => Err("NOTFOUND"),
            Some(j) if j.state == State::Reserved && j.fence == fence => Ok(()),
            Some(_) => Err("STALE"),
        }
    }

    fn finish(&mut self, id: u128, state: State, now: u64) {
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = state;
        job.time = now;
        self.finished.push(id);
    }

    fn ack(&mut self, now: u64, id: u128, fence: u64) -> Result<(), &'static str> {
        self.tick(now);
        self.check(id, fence)?;
        self.finish(id, State::Completed, now);
        Ok(())
    }

    fn retry(&mut self, now: u64, id: u128, fence: u64, delay: u64) -> Result<(), &'static str> {
        self.tick(now);
        self.check(id, fence)?;
        self.schedule(id, now + delay);
        self.tick(now);
        Ok(())
    }

    fn fail(&mut self, now: u64, id: u128, fence: u64) -> Result<(), &'static str> {
        self.tick(now);
        self.check(id, fence)?;
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = State::Dead;
        job.time = now;
        self.dead.push(id);
        while self.dead.len() > self.cfg.dead_max {
            let oldest = self.dead.remove(0);
            self.jobs.remove(&oldest);
        }
        Ok(())
    }

    fn extend(&mut self, now: u64, id: u128, fence: u64, lease: u64) -> Result<(), &'static str> {
        self.tick(now);
        self.check(id, fence)?;
        let lease = if lease == 0 { self.cfg.lease_ms } else { lease };
        self.jobs.get_mut(&id).unwrap().time = now + lease;
        Ok(())
    }

    /// Ready at the head, one attempt less; `release` requeues.
    fn release_one(&mut self, id: u128, fence: u64) -> Result<(), &'static str> {
        self.check(id, fence)?;
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = State::Ready;
        job.attempts = job.attempts.saturating_sub(1);
        Ok(())
    }

    fn requeue_front(&mut self, ids: &[u128]) {
        for &id in ids.iter().rev() {
            let channel = self.jobs[&id].channel;
            self.queues.entry(channel).or_default().push_front(id);
        }
    }

    fn release(&mut self, now: u64, id: u128, fence: u64) -> Result<(), &'static str> {
        self.tick(now);
        self.release_one(id, fence)?;
        self.requeue_front(&[id]);
        Ok(())
    }

    fn release_many(&mut self, now: u64, pairs: &[(u128, u64)]) -> Vec<bool> {
        self.tick(now);
        let results: Vec<bool> = pairs.iter().map(|&(id, fence)| self.release_one(id, fence).is_ok()).collect();
        let released: Vec<u128> = pairs.iter().zip(&results).filter(|(_, ok)| **ok).map(|(p, _)| p.0).collect();
        self.requeue_front(&released);
        results
    }

    fn cancel(&mut self, now: u64, id: u128) -> Result<bool, &'static str> {
        self.tick(now);
        match self.jobs.get(&id).map(|j| j.state) {
            Some(State::Ready | State::Scheduled) => {
                self.remove_from_queue(id);
                self.finish(id, State::Cancelled, now);
                Ok(true)
            }
            Some(State::Reserved) => Err("BUSY"),
            _ => Ok(false),
        }
    }

    /// A restart: nobody holds a lease any more, so every reserved job is
    /// ready at the head of its channel, attempts kept, the oldest
    /// reservation (lowest fence) first.
    fn restart(&mut self) {
        let mut reserved: Vec<(u64, u128)> =
            self.jobs.iter().filter(|(_, j)| j.state == State::Reserved).map(|(id, j)| (j.fence, *id)).collect();
        reserved.sort();
        for &(_, id) in reserved.iter().rev() {
            let job = self.jobs.get_mut(&id).unwrap();
            job.state = State::Ready;
            let channel = job.channel;
            self.queues.entry(channel).or_default().push_front(id);
        }
    }

    /// Ready jobs per channel in FIFO order, and scheduled jobs in the
    /// order they will become ready.
    fn order(&self) -> Order {
        let mut ready: Vec<(u32, Vec<u128>)> =
            self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(c, q)| (*c, q.iter().copied().collect())).collect();
        ready.sort();
        let mut scheduled: Vec<(u64, u64, u128)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == State::Scheduled)
            .map(|(id, j)| (j.time, j.order, *id))
            .collect();
        scheduled.sort();
        (ready, scheduled.into_iter().map(|(due, _, id)| (due, id)).collect())
    }

    /// Per channel with a live job: its counts and the head of its queue,
    /// counted from scratch.
    fn channels(&mut self, now: u64) -> Vec<(u32, ChannelCounts, Option<u128>)> {
        self.tick(now);
        let mut counts: HashMap<u32, ChannelCounts> = HashMap::new();
        for job in self.jobs.values() {
            if let Some(gauge) = counts.entry(job.channel).or_default().gauge(job.state) {
                *gauge += 1;
            }
        }
        let mut out: Vec<_> = counts
            .into_iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(channel, c)| (channel, c, self.queues.get(&channel).and_then(|q| q.front().copied())))
            .collect();
        out.sort_by_key(|(channel, _, _)| *channel);
        out
    }

    fn get(&mut self, now: u64, id: u128) -> Option<(State, u32, Option<u64>)> {
        self.tick(now);
        self.jobs.get(&id).map(|j| (j.state, j.attempts, (j.state == State::Scheduled).then_some(j.time)))
    }
}

fn code(e: Error) -> &'static str {
    e.code()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The engine's queues in the model's terms: ready jobs per channel in FIFO
/// order (from `export`, which lists them in queue order), scheduled jobs
/// in the order they become ready.
fn engine_order(engine: &Engine) -> Order {
    let images = engine.export();
    let mut ready: Vec<(u32, Vec<u128>)> = Vec::new();
    for image in images.iter().filter(|i| i.state == State::Ready) {
        match ready.last_mut() {
            Some((channel, ids)) if *channel == image.channel => ids.push(image.id.0),
            _ => ready.push((image.channel, vec![image.id.0])),
        }
    }
    let scheduled = images.iter().filter(|i| i.state == State::Scheduled).map(|i| (i.time_ms, i.id.0)).collect();
    (ready, scheduled)
}

/// Journaling through real storage, for the restart variant.
struct Durable {
    dir: TempDir,
    storage: Option<Storage>,
    restarts: usize,
    compactions: usize,
    /// Restarts from a copy taken in the middle of a compaction.
    crashes: usize,
    /// Counters of the engines before the last restart (totals restart at 0).
    totals: Stats,
}

impl Durable {
    fn new(engine: &mut Engine) -> Durable {
        let dir = TempDir::new("model-restart");
        let (storage, _) = Storage::open(dir.path(), Durability::Balanced, u64::MAX, engine).unwrap();
        Durable { dir, storage: Some(storage), restarts: 0, compactions: 0, crashes: 0, totals: Stats::default() }
    }

    /// Writes what the engine journaled, as the server does after each
    /// command (and after each housekeeping tick).
    fn confirm(&self, engine: &mut Engine) {
        let storage = self.storage.as_ref().unwrap();
        let mut events = Vec::new();
        engine.take_events(&mut events);
        storage.confirm(storage.append(&events)).unwrap();
    }

    fn compact(&mut self, engine: &mut Engine, now: u64) {
        self.storage.as_ref().unwrap().compact(engine, now).unwrap();
        self.compactions += 1;
    }

    /// A compaction that the process does not survive: the data directory
    /// is what a kill at `crash_at` (0: right after the switch to the new
    /// generation; 1..=4: at that `storage::CompactionStep`) leaves. The next
    /// [`Durable::restart`] recovers from it.
    fn crash_in_compaction(&mut self, engine: &mut Engine, now: u64, crash_at: u64) {
        let storage = self.storage.as_ref().unwrap();
        let prepared = storage.prepare_compaction().unwrap();
        let compaction = storage.start_compaction(prepared, engine, now).unwrap();
        let mut copy = (crash_at == 0).then(|| self.dir.crash_copy("model-crash"));
        let mut seen = 0;
        storage
            .finish_compaction(&compaction, &mut |_step| {
                seen += 1;
                if seen == crash_at {
                    copy = Some(self.dir.crash_copy("model-crash"));
                }
            })
            .unwrap();
        self.storage = None;
        self.dir = copy.expect("the compaction reached the crash step");
        self.crashes += 1;
    }

    /// Stops the storage and recovers a new engine from the data directory.
    /// (No fsync: every record was written with write(), which is all a
    /// process restart needs; it keeps the test fast.)
    fn restart(&mut self, cfg: &EngineConfig, live: &Engine) -> Engine {
        self.storage = None;
        let s = live.stats();
        let t = &mut self.totals;
        t.acked_total += s.acked_total;
        t.expired_leases_total += s.expired_leases_total;
        t.failed_total += s.failed_total;
        t.retried_total += s.retried_total;
        t.cancelled_total += s.cancelled_total;
        t.released_total += s.released_total;
        let mut engine = Engine::new(cfg.clone());
        let (storage, _) = Storage::open(self.dir.path(), Durability::Balanced, u64::MAX, &mut engine).unwrap();
        engine.finish_recovery();
        self.storage = Some(storage);
        self.restarts += 1;
        engine
    }
}

fn run(seed: u64, steps: usize, restarts: bool) {
    let cfg = EngineConfig { lease_ms: 200, completed_retention_ms: 500, dead_max: 3 };
    let mut engine = Engine::new(cfg.clone());
    let mut durable = restarts.then(|| Durable::new(&mut engine));
    let mut model = Model::new(cfg.clone());
    let mut rng = Rng(seed);
    let mut now = 1_000u64;
    // Fences handed out, so ops often use real (current or stale) ones.
    let mut fences: Vec<(u128, u64)> = Vec::new();
    let payload = Payload::from(&b"p"[..]);
    for step in 0..steps {
        now += rng.below(25);
        let id = rng.below(24) as u128;
        let ctx = format!("seed {seed} step {step} now {now} id {id}");
        let pick_fence = |rng: &mut Rng, fences: &Vec<(u128, u64)>| -> (u128, u64) {
            if fences.is_empty() || rng.below(8) == 0 {
                (rng.below(24) as u128, rng.below(50))
            } else if rng.below(4) == 0 {
                fences[rng.below(fences.len() as u64) as usize]
            } else {
                // Mostly recent reservations: often still current.
                let recent = fences.len().min(6) as u64;
                fences[fences.len() - 1 - rng.below(recent) as usize]
            }
        };
        match rng.below(12) {
            0 | 1 => {
                let channel = 1 + rng.below(3) as u32;
                let due = if rng.below(3) == 0 { Some(now + rng.below(300)) } else { None };
                let e = engine.push(now, channel, JobId(id), payload.clone(), due);
                assert_eq!(e, model.push(now, channel, id, due), "push {ctx}");
            }
            2 | 3 => {
                let count = 1 + rng.below(4) as usize;
                let lease = [0, 50, 150][rng.below(3) as usize];
                let channels: Vec<u32> = (0..1 + rng.below(3)).map(|_| 1 + rng.below(3) as u32).collect();
                let mut got = Vec::new();
                engine.fetch(now, count, lease, &channels, &mut got);
                let got: Vec<_> = got.iter().map(|r| (r.id.0, r.channel, r.fence, r.attempts)).collect();
                assert_eq!(got, model.fetch(now, count, lease, &channels), "fetch {ctx}");
                fences.extend(got.iter().map(|g| (g.0, g.2)));
            }
            4 => {
                let (id, fence) = pick_fence(&mut rng, &fences);
                assert_eq!(engine.ack(now, JobId(id), fence).map_err(code), model.ack(now, id, fence), "ack {ctx}");
            }
            5 => {
                let (id, fence) = pick_fence(&mut rng, &fences);
                let delay = rng.below(200);
                let e = engine.retry(now, JobId(id), fence, delay).map_err(code);
                assert_eq!(e, model.retry(now, id, fence, delay), "retry {ctx}");
            }
            6 => {
                let (id, fence) = pick_fence(&mut rng, &fences);
                let e = engine.fail(now, JobId(id), fence, payload.clone()).map_err(code);
                assert_eq!(e, model.fail(now, id, fence), "fail {ctx}");
            }
            7 => {
                let (id, fence) = pick_fence(&mut rng, &fences);
                let lease = rng.below(300);
                let e = engine.extend(now, JobId(id), fence, lease).map_err(code);
                assert_eq!(e, model.extend(now, id, fence, lease), "extend {ctx}");
            }
            8 => {
                let e = engine.cancel(now, JobId(id)).map_err(code);
                assert_eq!(e, model.cancel(now, id), "cancel {ctx}");
            }
            9 => {
                let (id, fence) = pick_fence(&mut rng, &fences);
                let e = engine.release(now, JobId(id), fence).map_err(code);
                assert_eq!(e, model.release(now, id, fence), "release {ctx}");
            }
            10 => {
                let pairs: Vec<(u128, u64)> = (0..1 + rng.below(4)).map(|_| pick_fence(&mut rng, &fences)).collect();
                let wire: Vec<(JobId, u64)> = pairs.iter().map(|&(id, f)| (JobId(id), f)).collect();
                assert_eq!(engine.release_many(now, &wire), model.release_many(now, &pairs), "release_many {ctx}");
            }
            _ => {
                let e = engine.get(now, JobId(id)).map(|j| (j.state, j.attempts, j.due_ms));
                assert_eq!(e, model.get(now, id), "get {ctx}");
            }
        }
        if let Some(durable) = durable.as_mut() {
            durable.confirm(&mut engine);
            if rng.below(150) == 0 {
                durable.compact(&mut engine, now);
            }
            if rng.below(40) == 0 {
                if rng.below(2) == 0 {
                    durable.crash_in_compaction(&mut engine, now, rng.below(5));
                }
                let mut recovered = durable.restart(&cfg, &engine);
                // The live engine as the restart leaves it: reservations
                // requeued; both judged at the same time.
                engine.finish_recovery();
                model.restart();
                engine.tick(now);
                recovered.tick(now);
                durable.confirm(&mut recovered);
                assert_eq!(engine_order(&engine), model.order(), "live order before restart {ctx}");
                assert_eq!(engine_order(&recovered), engine_order(&engine), "order after restart {ctx}");
                assert_eq!(recovered.export(), engine.export(), "jobs after restart {ctx}");
                assert_eq!(recovered.next_fence(), engine.next_fence(), "fences after restart {ctx}");
                engine = recovered;
            }
        }
        let dead: Vec<u128> = engine.dead(10).iter().map(|d| d.id.0).collect();
        let mut expected = model.dead.clone();
        expected.reverse();
        assert_eq!(dead, expected, "dead list {ctx}");
        let channels: Vec<_> = engine
            .channels(now, &[])
            .into_iter()
            .map(|c| (c.channel, c.counts, c.oldest_ready.map(|id| id.0)))
            .collect();
        assert_eq!(channels, model.channels(now), "channels {ctx}");
        let asked = engine.channels(now, &[4, 2]);
        assert_eq!((asked[0].channel, asked[0].counts, asked[0].oldest_ready), (4, ChannelCounts::default(), None));
        assert_eq!(asked[1].channel, 2, "in the order asked {ctx}");
        let s = engine.stats();
        let count = |st: State| model.jobs.values().filter(|j| j.state == st).count() as u64;
        assert_eq!(
            (s.ready, s.scheduled, s.reserved, s.completed, s.dead, s.cancelled),
            (
                count(State::Ready),
                count(State::Scheduled),
                count(State::Reserved),
                count(State::Completed),
                count(State::Dead),
                count(State::Cancelled)
            ),
            "gauges {ctx}"
        );
        assert_eq!(engine.job_count(), model.jobs.len(), "job count {ctx}");
    }
    let mut s = engine.stats();
    if let Some(d) = &durable {
        let (r, c, x) = (d.restarts, d.compactions, d.crashes);
        assert!(r > 20 && c > 3 && x > 5, "restarts {r} compactions {c} crashes in a compaction {x}");
        s.acked_total += d.totals.acked_total;
        s.expired_leases_total += d.totals.expired_leases_total;
        s.failed_total += d.totals.failed_total;
        s.retried_total += d.totals.retried_total;
        s.cancelled_total += d.totals.cancelled_total;
        s.released_total += d.totals.released_total;
    }
    // The run must have exercised the interesting paths, not just pushes.
    assert!(s.acked_total > 20 && s.expired_leases_total > 20 && s.failed_total > 5, "{s:?}");
    assert!(s.retried_total > 10 && s.cancelled_total > 10 && s.released_total > 10, "{s:?}");
}

#[test]
fn engine_matches_a_naive_model() {
    for seed in 1..=40u64 {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, 2_000, false);
    }
}

/// Restarts (through real log files and snapshots) in the middle of random
/// histories: replay reproduces the live FIFO order exactly, including
/// RETRYed jobs (0 delay or a delay that fell due), promoted `PUSH AT` jobs,
/// expired leases and releases, and the history goes on matching the model.
/// Half of the restarts follow a crash in the middle of a compaction (at
/// each of its steps: the data directory as a kill there leaves it).
#[test]
fn restarts_in_random_histories_keep_the_live_order() {
    // Fewer seeds than the in-memory variant: each one writes real files.
    for seed in 1..=20u64 {
        run(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1, 2_000, true);
    }
}
