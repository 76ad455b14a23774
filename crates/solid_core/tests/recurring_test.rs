//! `recurring.lua` and the scheduler against a real Redis: one enqueue per
//! (schedule, tick), Redis' clock decides, the missed-tick policies, the
//! state's retention.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::recurring::{Missed, RecurringSchedule};
use solid_core::redis::connection::Connector;
use solid_core::redis::doorbell::Bell;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::scheduler::{Clocks, Scheduler, SystemClocks};
use solid_core::redis::store::{Store, TickOutcome, TickProposal};
use solid_core::schedule::Schedule;
use solid_core::Envelope;
use support::RedisServer;

fn schedule(name: &str, every: u64, missed: Missed) -> RecurringSchedule {
    RecurringSchedule {
        name: name.into(),
        ticks: Schedule::every(every).unwrap(),
        task: "Ping".into(),
        arguments: json!([7]),
        channel: "default".into(),
        max_failures: 3,
        missed,
        flow: Default::default(),
        flow_label: None,
    }
}

fn redis_now(c: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1000 + us / 1000
}

fn propose(store: &Store, c: &mut redis::Connection, s: &RecurringSchedule, tick: u64) -> (TickOutcome, Envelope) {
    propose_before(store, c, s, tick, tick + 1000)
}

/// A proposal of `tick` whose schedule's next tick is `next`.
fn propose_before(
    store: &Store,
    c: &mut redis::Connection,
    s: &RecurringSchedule,
    tick: u64,
    next: u64,
) -> (TickOutcome, Envelope) {
    let env = s.envelope(tick, tick).unwrap();
    let p = TickProposal {
        name: &s.name,
        tick_ms: tick,
        next_ms: Some(next),
        missed: s.missed,
        on_time_ms: 60_000,
        retention_ms: 86_400_000,
        envelope: &env,
    };
    (store.enqueue_tick(c, &p).unwrap().outcome, env)
}

/// Runs one node's scheduler thread, built by `build` from a connection to
/// `redis`, while `during` runs on this thread; then stops it as a
/// shutdown does, and returns what `during` returned.
fn while_scheduling<'s, C: Clocks, R>(
    redis: &RedisServer,
    store: &'s Store,
    build: impl FnOnce(&'s Store, Connector) -> Scheduler<'s, C> + Send,
    during: impl FnOnce() -> R,
) -> R {
    let closed = AtomicBool::new(false);
    let bell = Bell::default();
    let connector = Connector::new(&redis.url()).unwrap();
    std::thread::scope(|scope| {
        let (stop, ring) = (&closed, &bell);
        let runner = scope.spawn(move || build(store, connector).run(stop, ring));
        let out = during();
        closed.store(true, Ordering::Release);
        bell.ring();
        runner.join().unwrap();
        out
    })
}

/// Waits until Redis' clock is at `until` or later, every tick from
/// `first` to its now is enqueued, and the next tick is 300 ms or more
/// away, for at most 20 s. A stop then falls between two ticks: stopped
/// just as a tick fell due, the nodes might not have proposed it yet.
fn until_between_ticks(c: &mut redis::Connection, first: u64, until: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = redis_now(c);
        let got = jobs_by_tick(c);
        let missing: Vec<u64> = (first..=now).step_by(1000).filter(|t| !got.contains_key(t)).collect();
        if now >= until && now % 1000 < 700 && missing.is_empty() {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "at {now}: ticks {missing:?} not enqueued, got {got:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `done` holds, for at most 10 s, then as long again as a
/// second enqueue would take, were the node to make one.
fn until_decided(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Wall time: an extra enqueue is an absence to check, not a state to poll.
    std::thread::sleep(Duration::from_millis(1_000));
}

/// Jobs on the default channel, counted by their meta tick.
fn jobs_by_tick(c: &mut redis::Connection) -> HashMap<u64, usize> {
    let all: Vec<String> = c.lrange("solid_jobs:channel:default", 0, -1).unwrap();
    let mut by = HashMap::new();
    for raw in all {
        let env = Envelope::decode(&raw).unwrap();
        let tick = env.meta.as_ref().unwrap()["tick_ms"].as_u64().unwrap();
        *by.entry(tick).or_insert(0) += 1;
    }
    by
}

#[test]
fn a_tick_is_enqueued_once_and_never_before_redis_reaches_it() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let s = schedule("ping", 1, Missed::Latest);
    let now = redis_now(&mut c);
    let tick = now / 1000 * 1000;

    let (first, env) = propose(&store, &mut c, &s, tick);
    assert_eq!(first, TickOutcome::Enqueued);
    assert_eq!(propose(&store, &mut c, &s, tick).0, TickOutcome::Seen);
    assert_eq!(propose(&store, &mut c, &s, tick - 1000).0, TickOutcome::Seen);
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(tick, 1)]));
    // An ordinary job: indexed as ready, its channel registered.
    let state: String = c.hget("solid_jobs:jobs", &env.id).unwrap();
    assert_eq!(state, "ready|default");
    assert!(c.sismember::<_, _, bool>("solid_jobs:channels", "default").unwrap());
    let job_id: String = c.hget("solid_jobs:recurring:ping", "job_id").unwrap();
    assert_eq!(job_id, env.id);

    // Ten seconds ahead of Redis (a node whose clock runs fast): refused.
    let (early, _) = propose(&store, &mut c, &s, tick + 10_000);
    assert_eq!(early, TickOutcome::Early);
    assert_eq!(jobs_by_tick(&mut c).len(), 1);
    let decided: u64 = c.hget("solid_jobs:recurring:ping", "tick_ms").unwrap();
    assert_eq!(decided, tick, "an early proposal writes nothing");

    // The state outlives the next tick by the retention.
    let ttl: i64 = c.pttl("solid_jobs:recurring:ping").unwrap();
    assert!(ttl > 86_000_000 && ttl <= 86_402_000, "{ttl}");
}

#[test]
fn missed_ticks_follow_the_policy_and_an_unknown_schedule_starts_at_its_next_tick() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let now = redis_now(&mut c) / 1000 * 1000;
    let late = now - 600_000;

    // No state: a late tick is not run, whatever the policy. (Each late
    // tick here is its schedule's latest: the next is after now.)
    let latest = schedule("latest", 1, Missed::Latest);
    let skip = schedule("skip", 1, Missed::Skip);
    assert_eq!(propose_before(&store, &mut c, &latest, late, now + 60_000).0, TickOutcome::Skipped);
    assert_eq!(propose_before(&store, &mut c, &skip, late - 1000, now + 60_000).0, TickOutcome::Skipped);
    assert!(jobs_by_tick(&mut c).is_empty());

    // A missed tick that is not the latest by Redis' clock (its next tick
    // is due too) is refused, whatever the policy: nothing written.
    assert_eq!(propose(&store, &mut c, &latest, late + 1000).0, TickOutcome::Stale);
    assert_eq!(propose(&store, &mut c, &skip, late + 1000).0, TickOutcome::Stale);
    let state: HashMap<String, String> = c.hgetall("solid_jobs:recurring:latest").unwrap();
    assert_eq!(state["tick_ms"], late.to_string(), "a stale proposal decides nothing");

    // With state (a schedule that ran before the downtime): :latest runs
    // the latest missed tick once, :skip does not.
    assert_eq!(propose_before(&store, &mut c, &latest, late + 2000, now + 60_000).0, TickOutcome::Enqueued);
    assert_eq!(propose_before(&store, &mut c, &skip, late + 2000, now + 60_000).0, TickOutcome::Skipped);
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(late + 2000, 1)]));
    // Both run an on-time tick.
    assert_eq!(propose(&store, &mut c, &latest, now).0, TickOutcome::Enqueued);
    assert_eq!(propose(&store, &mut c, &skip, now).0, TickOutcome::Enqueued);
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(late + 2000, 1), (now, 2)]));
}

#[test]
fn concurrent_proposers_enqueue_each_tick_once() {
    let redis = RedisServer::start();
    let store = Arc::new(Store::new(Keyspace::default()));
    let s = schedule("ping", 1, Missed::Latest);
    let base = redis_now(&mut redis.conn()) / 1000 * 1000 - 30_000;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (store, s, url) = (store.clone(), s.clone(), redis.url());
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut enqueued = 0;
                for k in 0..30 {
                    if propose(&store, &mut c, &s, base + k * 1000).0 == TickOutcome::Enqueued {
                        enqueued += 1;
                    }
                }
                enqueued
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let by = jobs_by_tick(&mut redis.conn());
    assert_eq!(total, by.values().sum::<usize>());
    assert!(by.values().all(|&n| n == 1), "{by:?}");
    // Each proposer walks every tick in order, so every tick is enqueued by
    // whichever got there first, and by no other.
    assert_eq!(by.len(), 30, "{by:?}");
}

#[test]
fn scheduler_threads_of_several_nodes_enqueue_one_job_per_tick() {
    let redis = RedisServer::start();
    let store = Arc::new(Store::new(Keyspace::default()));
    let closed = Arc::new(AtomicBool::new(false));
    let bell = Arc::new(Bell::default());
    let started = redis_now(&mut redis.conn());
    let nodes: Vec<_> = (0..4)
        .map(|_| {
            let (store, closed, bell) = (store.clone(), closed.clone(), bell.clone());
            let connector = Connector::new(&redis.url()).unwrap();
            std::thread::spawn(move || {
                Scheduler::new(&store, connector, vec![schedule("ping", 1, Missed::Latest)]).run(&closed, &bell)
            })
        })
        .collect();
    // Past three ticks, stopped between two.
    until_between_ticks(&mut redis.conn(), started / 1000 * 1000, started + 3_500);
    closed.store(true, std::sync::atomic::Ordering::Release);
    bell.ring();
    for n in nodes {
        n.join().unwrap();
    }
    let stopped = redis_now(&mut redis.conn());
    let by = jobs_by_tick(&mut redis.conn());
    assert!(by.values().all(|&n| n == 1), "{by:?}");
    // Every tick from the start's up to the stop's, each once.
    let first = started / 1000 * 1000;
    let expected: Vec<u64> = (first..=stopped).step_by(1000).collect();
    let mut got: Vec<u64> = by.keys().copied().collect();
    got.sort();
    assert_eq!(got, expected, "started {started} stopped {stopped}");
}

/// After downtime (the state's last tick ten periods back), a node's
/// scheduler proposes only the latest missed tick: `:latest` enqueues it
/// once, `:skip` records it skipped; never the ticks in between.
#[test]
fn after_downtime_the_scheduler_runs_the_latest_missed_tick_once_or_skips_it() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let now = redis_now(&mut c);
    // A period whose latest tick is over two minutes late (so missed) and
    // whose next is not due during the test.
    let every = [3_600u64, 5_400, 7_200, 9_000]
        .into_iter()
        .find(|p| now % (p * 1000) > 120_000 && p * 1000 - now % (p * 1000) > 20_000)
        .unwrap();
    let latest = now / (every * 1000) * (every * 1000);
    for name in ["latest", "skip"] {
        let _: () = c.hset(format!("solid_jobs:recurring:{name}"), "tick_ms", latest - 10 * every * 1000).unwrap();
    }
    let schedules = vec![schedule("latest", every, Missed::Latest), schedule("skip", every, Missed::Skip)];
    let mut watch = redis.conn();
    while_scheduling(
        &redis,
        &store,
        |store, connector| Scheduler::new(store, connector, schedules),
        || {
            until_decided("both schedules decided", || {
                let skip: Option<String> = watch.hget("solid_jobs:recurring:skip", "outcome").unwrap();
                !jobs_by_tick(&mut watch).is_empty() && skip.is_some()
            })
        },
    );
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(latest, 1)]), "one job, the latest missed tick's");
    let env = Envelope::decode(&c.lindex::<_, String>("solid_jobs:channel:default", 0).unwrap()).unwrap();
    assert_eq!(env.meta.unwrap()["schedule"], "latest");
    let skipped: (u64, String) =
        redis::cmd("HMGET").arg("solid_jobs:recurring:skip").arg("tick_ms").arg("outcome").query(&mut c).unwrap();
    assert_eq!(skipped, (latest, "skipped".to_owned()));
}

/// Real time for the scheduler's elapsed clock, and a wall clock the test
/// steps by `offset_ms` (what NTP or an operator does to a node).
#[derive(Clone, Default)]
struct SteppedWall {
    offset_ms: Arc<AtomicI64>,
}

impl Clocks for SteppedWall {
    fn wall_ms(&self) -> u64 {
        (SystemClocks.wall_ms() as i64 + self.offset_ms.load(Ordering::Relaxed)) as u64
    }

    fn elapsed_ms(&self) -> u64 {
        SystemClocks.elapsed_ms()
    }
}

/// A node whose wall clock steps back an hour, then forward two, goes on
/// proposing every tick on time: its waits come from Redis' clock as last
/// answered plus real elapsed time, never from its wall clock.
#[test]
fn a_wall_clock_stepped_back_or_forward_stops_no_tick() {
    let redis = RedisServer::start();
    let store = Store::new(Keyspace::default());
    let clocks = SteppedWall::default();
    let started = redis_now(&mut redis.conn());
    let k = clocks.clone();
    let build = |store, connector| Scheduler::with_clocks(store, connector, vec![schedule("ping", 1, Missed::Skip)], k);
    let mut watch = redis.conn();
    while_scheduling(&redis, &store, build, || {
        // Wall time: ticks pass before, during and after each step.
        std::thread::sleep(Duration::from_millis(1_500));
        clocks.offset_ms.store(-3_600_000, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2_500));
        clocks.offset_ms.store(3_600_000, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2_500));
        until_between_ticks(&mut watch, started / 1000 * 1000, 0);
    });
    let stopped = redis_now(&mut redis.conn());
    let by = jobs_by_tick(&mut redis.conn());
    assert!(by.values().all(|&n| n == 1), "{by:?}");
    let expected: Vec<u64> = (started / 1000 * 1000..=stopped).step_by(1000).collect();
    let mut got: Vec<u64> = by.keys().copied().collect();
    got.sort();
    assert_eq!(got, expected, "every tick of the run once, through both steps");
}

/// Redis forgets the last decision and its job (a crash under appendfsync
/// everysec, a failover, a restore: simulated by putting the state back and
/// dropping the job, and breaking the connections as a restart does). A
/// node that already decided that tick must not trust its memory: it
/// notices the broken connection within the longest sleep, asks Redis
/// again, and the forgotten tick, still the latest, is enqueued again,
/// once, although its next tick is far away.
#[test]
fn a_decision_redis_forgot_is_proposed_again_not_lost() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let now = redis_now(&mut c);
    // A period whose latest tick is over two minutes back (so it runs as
    // the latest missed tick of a schedule that ran before) and whose next
    // tick is not due during the test.
    let every = [3_600u64, 5_400, 7_200, 9_000]
        .into_iter()
        .find(|p| now % (p * 1000) > 120_000 && p * 1000 - now % (p * 1000) > 30_000)
        .unwrap();
    let tick = now / (every * 1000) * (every * 1000);
    let before = tick - every * 1000;
    let state = "solid_jobs:recurring:hourly";
    let _: () = c.hset(state, "tick_ms", before).unwrap();
    let schedules = vec![schedule("hourly", every, Missed::Latest)];
    while_scheduling(
        &redis,
        &store,
        |store, connector| Scheduler::new(store, connector, schedules),
        || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while jobs_by_tick(&mut c).is_empty() {
                assert!(std::time::Instant::now() < deadline, "the latest tick was enqueued");
                std::thread::sleep(Duration::from_millis(50));
            }
            // Redis loses the decision and the job written with it.
            let _: () = c.hset(state, "tick_ms", before).unwrap();
            let _: () = c.del("solid_jobs:channel:default").unwrap();
            let _: () = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .arg("SKIPME")
                .arg("yes")
                .query(&mut c)
                .unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(12);
            while jobs_by_tick(&mut c).is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            // Wall time: time for a second enqueue, were the node to make one.
            std::thread::sleep(Duration::from_millis(1_000));
        },
    );
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(tick, 1)]), "the forgotten tick enqueued again, once");
    let decided: u64 = c.hget(state, "tick_ms").unwrap();
    assert_eq!(decided, tick);
}

/// After downtime, a node whose wall clock runs 5 minutes slow proposes,
/// before its first reply, the tick latest by its own clock: a missed tick,
/// but not the latest by Redis' clock. Redis refuses it (`stale`) and the
/// node, its estimate corrected, proposes the latest: one job for the
/// downtime, the latest missed tick's, never an older one as well.
#[test]
fn a_slow_node_after_downtime_enqueues_only_the_latest_missed_tick() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    // every: 60, at least 5 s before the next tick, so none falls due
    // during the run.
    while 60_000 - redis_now(&mut c) % 60_000 <= 5_000 {
        std::thread::sleep(Duration::from_millis(500));
    }
    let latest = redis_now(&mut c) / 60_000 * 60_000;
    // The schedule last ran an hour ago, before a downtime.
    let _: () = c.hset("solid_jobs:recurring:minutely", "tick_ms", latest - 3_600_000).unwrap();
    let clocks = SteppedWall::default();
    clocks.offset_ms.store(-300_000, Ordering::Relaxed);
    let build = |store, connector| {
        Scheduler::with_clocks(store, connector, vec![schedule("minutely", 60, Missed::Latest)], clocks)
    };
    let mut watch = redis.conn();
    while_scheduling(&redis, &store, build, || {
        until_decided("the latest missed tick enqueued", || !jobs_by_tick(&mut watch).is_empty())
    });
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(latest, 1)]), "one job, for the latest missed tick");
}

fn redis_pid(c: &mut redis::Connection) -> i32 {
    let info: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    info.lines().find_map(|l| l.strip_prefix("process_id:")).unwrap().trim().parse().unwrap()
}

fn signal(pid: i32, sig: &str) {
    assert!(std::process::Command::new("kill").arg(sig).arg(pid.to_string()).status().unwrap().success());
}

/// A Redis paused longer than the on-time window (SIGSTOP: a VM freeze, a
/// long fork, a debugger) still accepts connections into its backlog and
/// buffers the proposals the node sends and gives up on (read timeout),
/// each for a later tick. On resume it runs them all: without the `stale`
/// rule each was a missed tick enqueued, a burst. Now only the latest
/// missed tick may be decided. The window is 3 s here (the default is 60)
/// so the pause is 15 s, not over a minute.
#[test]
fn a_paused_redis_runs_no_burst_of_missed_ticks_on_resume() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let pid = redis_pid(&mut c);
    let window = 3_000;
    let build = |store, connector| {
        Scheduler::new(store, connector, vec![schedule("second", 1, Missed::Latest)])
            .with_on_time(Duration::from_millis(window))
    };
    let (paused_at, resumed_at) = while_scheduling(&redis, &store, build, || {
        // Wall time: ticks run before the pause, and the pause outlasts the window.
        std::thread::sleep(Duration::from_millis(2_500));
        let paused_at = redis_now(&mut c);
        signal(pid, "-STOP");
        std::thread::sleep(Duration::from_secs(15));
        let resumed_at = SystemClocks.wall_ms();
        signal(pid, "-CONT");
        // Until a tick of after the resume is enqueued: what Redis had
        // buffered during the pause ran before it.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let by = jobs_by_tick(&mut c);
            if by.keys().any(|&t| t >= resumed_at) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no tick after the resume within 15 s: {by:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        (paused_at, resumed_at)
    });
    let by = jobs_by_tick(&mut redis.conn());
    assert!(by.values().all(|&n| n == 1), "each tick once: {by:?}");
    // Ticks from the pause that Redis decided more than the window late
    // (it decided nothing while paused): missed ticks that ran.
    let missed: Vec<u64> = by
        .keys()
        .copied()
        .filter(|&t| t > paused_at && t + window + 1_000 < resumed_at)
        .map(|t| (t - paused_at) / 1000)
        .collect();
    assert!(missed.len() <= 1, "at most the latest missed tick runs; ran ticks at {missed:?} s into the pause");
    assert!(by.keys().any(|&t| t >= resumed_at - 1_000), "ticks flow again after the resume: {by:?}");
}
