//! The publication barrier, the control mailbox, reported recovery and the
//! telemetry flush, against a real Redis.

mod support;

use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::claim::ClaimedJob;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::Store;
use solid_core::telemetry::{Telemetry, TelemetryConfig, Tracked};
use solid_core::{now_ms, Envelope};
use support::RedisServer;

fn env(n: i64) -> Envelope {
    Envelope::build("Foo", json!([n]), "default", 3, now_ms(), now_ms()).unwrap()
}

#[test]
fn held_publications_are_invisible_until_released_once() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..3).map(|i| env(i).encode()).collect();
    let members = store.hold(&mut c, "default", None, now_ms() + 60_000, &envs).unwrap();
    assert_eq!(members.len(), 3);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 0, "not reservable while held");
    assert_eq!(c.zcard::<_, i64>("solid_jobs:publishing").unwrap(), 3);
    // Deduplicated like an enqueue: the index already knows these ids.
    store.hold(&mut c, "default", None, now_ms() + 60_000, &envs[..1]).unwrap();
    assert_eq!(c.zcard::<_, i64>("solid_jobs:publishing").unwrap(), 3);

    assert_eq!(store.release(&mut c, &members).unwrap(), 3);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 3);
    assert_eq!(store.release(&mut c, &members).unwrap(), 0, "released once");
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert_eq!(batch.jobs.iter().map(|j| j.raw.clone()).collect::<Vec<_>>(), envs, "FIFO kept");
}

#[test]
fn an_expired_barrier_is_released_by_any_heartbeat_and_a_late_release_is_a_no_op() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let later = Envelope::build("Foo", json!([9]), "default", 3, now_ms(), now_ms() + 600_000).unwrap();
    let ready = store.hold(&mut c, "default", None, now_ms() - 1, &[env(1).encode()]).unwrap();
    let planned = store.hold(&mut c, "default", Some(later.queued_ms), now_ms() - 1, &[later.encode()]).unwrap();
    let heartbeat = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert_eq!(heartbeat.released, 2);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
    // Due as long after the hold on Redis' clock as it was asked for here.
    let due = c.zscore::<_, _, Option<u64>>("solid_jobs:planned", format!("default|{}", later.encode())).unwrap();
    assert!(due.is_some_and(|d| d.abs_diff(later.queued_ms) < 5_000), "{due:?} vs {}", later.queued_ms);
    assert_eq!(store.release(&mut c, &[ready, planned].concat()).unwrap(), 0);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
}

#[test]
fn a_job_cancelled_behind_the_barrier_is_dropped_on_release() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env(1);
    let members = store.hold(&mut c, "default", None, now_ms() + 60_000, &[e.encode()]).unwrap();
    assert!(store.cancel(&mut c, &e.id).unwrap());
    assert_eq!(store.release(&mut c, &members).unwrap(), 0);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 0);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:cancelled").unwrap(), 1);
    assert!(store.job_state(&mut c, &e.id).unwrap().is_none());
}

#[test]
fn the_heartbeat_takes_control_requests_only_when_asked() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.request_control(&mut c, "n1", r#"{"action":"pause"}"#, 60_000).unwrap();
    store.request_control(&mut c, "n1", r#"{"action":"resume"}"#, 60_000).unwrap();
    assert!(store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap().requests.is_empty());
    let heartbeat = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 16).unwrap();
    assert_eq!(heartbeat.requests, vec![r#"{"action":"pause"}"#, r#"{"action":"resume"}"#]);
    assert!(heartbeat.dead.is_empty());
    assert!(!c.exists::<_, bool>("solid_jobs:control:n1").unwrap());
}

#[test]
fn recovery_reports_each_job_it_moves() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env(1);
    store.enqueue(&mut c, "default", &[e.encode()]).unwrap();
    store.heartbeat(&mut c, "dead", 60_000, "{}", &["default"], 0).unwrap();
    let token = store.claim(&mut c, "dead", &["default"], 1, now_ms()).unwrap().jobs[0].token;
    assert!(store.recover_node(&mut c, "dead").unwrap().is_none(), "alive");
    let _: () = c.del("solid_jobs:node:dead").unwrap();
    let jobs = store.recover_node(&mut c, "dead").unwrap().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].token, token);
    assert_eq!(jobs[0].envelope.as_ref().unwrap().id, e.id);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
}

#[test]
fn a_flush_writes_entries_observations_and_tasks_in_one_call() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let t = Telemetry::new(TelemetryConfig {
        namespace: "solid_jobs".into(),
        source: "n1".into(),
        journal: true,
        sample_per_interval: 10,
        buffer: 100,
        journal_size: 1000,
        deliver: false,
        observation_ttl: Duration::from_secs(15),
    });
    let e = env(1);
    let job = ClaimedJob {
        token: 5,
        channel: "default".into(),
        priority: solid_core::priority::DEFAULT,
        raw: e.encode(),
        envelope: e.clone(),
        claimed_ms: 0,
        taken_at: None,
        source: 0,
        attempts: 0,
    };
    t.workers.register(1, 3);
    let sampled = t.reserved(&job, 1);
    t.completed(Tracked { job: &job, sampled, worker: 1 });
    t.saw_tasks(["Foo"]);
    t.observe(
        &json!({"node_id": "n1"}),
        &json!({"cpu_seconds": 1.0}),
        &t.workers.observe(false, 1),
        &json!({"state": "connected"}),
    );
    t.tick();
    t.flush(&mut c).unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg("solid_jobs:telemetry").arg("-").arg("+").query(&mut c).unwrap();
    let events: Vec<String> =
        entries.iter().map(|(_, f)| f.iter().find(|(k, _)| k == "event").unwrap().1.clone()).collect();
    assert_eq!(
        events,
        ["job.reserved", "job.completed", "process.observed", "ractor.observed", "redis.observed", "metrics.interval"]
    );
    let seqs: Vec<u64> =
        entries.iter().map(|(_, f)| f.iter().find(|(k, _)| k == "seq").unwrap().1.parse().unwrap()).collect();
    assert_eq!(seqs, (1..=6).collect::<Vec<_>>());
    assert!(c.hexists::<_, _, bool>("solid_jobs:observations:n1", "ractors").unwrap());
    assert!(c.pttl::<_, i64>("solid_jobs:observations:n1").unwrap() > 0);
    assert!(c.sismember::<_, _, bool>("solid_jobs:tasks", "Foo").unwrap());
    assert!(!t.has_pending());
}
