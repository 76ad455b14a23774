//! `recurring.lua` and the scheduler against a real Redis: one enqueue per
//! (schedule, tick), Redis' clock decides, the missed-tick policies, the
//! state's retention.

mod support;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::recurring::{every as every_secs, Missed, RecurringSchedule};
use solid_core::redis::connection::Connector;
use solid_core::redis::doorbell::Bell;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::scheduler::Scheduler;
use solid_core::redis::store::{Store, TickOutcome, TickProposal};
use solid_core::Envelope;
use support::RedisServer;

fn schedule(name: &str, every: u64, missed: Missed) -> RecurringSchedule {
    RecurringSchedule {
        name: name.into(),
        ticks: every_secs(every).unwrap(),
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
    let env = s.envelope(tick, tick).unwrap();
    let p = TickProposal {
        name: &s.name,
        tick_ms: tick,
        next_ms: Some(tick + 1000),
        missed: s.missed,
        on_time_ms: 60_000,
        retention_ms: 86_400_000,
        envelope: &env,
    };
    (store.enqueue_tick(c, &p).unwrap().outcome, env)
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

    // No state: a late tick is not run, whatever the policy.
    let latest = schedule("latest", 1, Missed::Latest);
    let skip = schedule("skip", 1, Missed::Skip);
    assert_eq!(propose(&store, &mut c, &latest, late).0, TickOutcome::Skipped);
    assert_eq!(propose(&store, &mut c, &skip, late - 1000).0, TickOutcome::Skipped);
    assert!(jobs_by_tick(&mut c).is_empty());

    // With state (a schedule that ran before the downtime): :latest runs
    // the latest missed tick once, :skip does not.
    assert_eq!(propose(&store, &mut c, &latest, late + 1000).0, TickOutcome::Enqueued);
    assert_eq!(propose(&store, &mut c, &skip, late + 1000).0, TickOutcome::Skipped);
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(late + 1000, 1)]));
    // Both run an on-time tick.
    assert_eq!(propose(&store, &mut c, &latest, now).0, TickOutcome::Enqueued);
    assert_eq!(propose(&store, &mut c, &skip, now).0, TickOutcome::Enqueued);
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(late + 1000, 1), (now, 2)]));
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
    std::thread::sleep(Duration::from_millis(3_500));
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
    let closed = AtomicBool::new(false);
    let bell = Bell::default();
    std::thread::scope(|scope| {
        let connector = Connector::new(&redis.url()).unwrap();
        let schedules = vec![schedule("latest", every, Missed::Latest), schedule("skip", every, Missed::Skip)];
        let (store, closed, bell) = (&store, &closed, &bell);
        let runner = scope.spawn(move || Scheduler::new(store, connector, schedules).run(closed, bell));
        std::thread::sleep(Duration::from_millis(1_500));
        closed.store(true, std::sync::atomic::Ordering::Release);
        bell.ring();
        runner.join().unwrap();
    });
    assert_eq!(jobs_by_tick(&mut c), HashMap::from([(latest, 1)]), "one job, the latest missed tick's");
    let env = Envelope::decode(&c.lindex::<_, String>("solid_jobs:channel:default", 0).unwrap()).unwrap();
    assert_eq!(env.meta.unwrap()["schedule"], "latest");
    let skipped: (u64, String) =
        redis::cmd("HMGET").arg("solid_jobs:recurring:skip").arg("tick_ms").arg("outcome").query(&mut c).unwrap();
    assert_eq!(skipped, (latest, "skipped".to_owned()));
}
