//! Priorities against a real Redis, at the script level (decision 41,
//! docs/flow-control.md "Priorities"): a job of priority p != 5 waits in
//! `channel:<name>:p`, the push marks level p in `flow:<name>`, and the
//! claim visits levels 0..4 in use, the base list, then 6..9, FIFO within
//! a level. Every path that puts a job back (retry and promotion, requeue,
//! the schedule) keeps its level, because every record carries the route.

mod support;

use redis::Commands;
use serde_json::json;
use solid_core::priority::{route, with_priority};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Requeue, Store};
use solid_core::{now_ms, ClaimedJob, Envelope};
use support::RedisServer;

fn job(n: i64, p: u8) -> Envelope {
    let env = Envelope::build("Job", json!([n]), "default", 3, now_ms(), now_ms()).unwrap();
    with_priority(env, p).unwrap()
}

fn push(store: &Store, c: &mut redis::Connection, envs: &[Envelope]) {
    for env in envs {
        let r = solid_core::priority::route_of(env);
        store.enqueue(c, &r, &[env.encode()]).unwrap();
    }
}

fn setup() -> (RedisServer, redis::Connection, Store) {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    (redis, c, store)
}

fn claim(store: &Store, c: &mut redis::Connection, max: usize) -> Vec<ClaimedJob> {
    store.claim(c, "n1", &["default"], max, now_ms()).unwrap().jobs
}

fn numbers(jobs: &[ClaimedJob]) -> Vec<i64> {
    jobs.iter().map(|j| j.envelope.arguments[0].as_i64().unwrap()).collect()
}

#[test]
fn claims_follow_priority_then_enqueue_order_and_report_the_route() {
    let (_redis, mut c, store) = setup();
    // n encodes (priority, order): 10*p + k.
    let order = [(7, 0), (5, 0), (0, 0), (9, 0), (5, 1), (3, 0), (0, 1), (7, 1), (3, 1), (9, 1)];
    let envs: Vec<Envelope> = order.iter().map(|&(p, k)| job(10 * p as i64 + k, p)).collect();
    push(&store, &mut c, &envs);

    // The channel set names the channel, never a route.
    let channels: Vec<String> = c.smembers("solid_jobs:channels").unwrap();
    assert_eq!(channels, vec!["default".to_owned()]);
    let flow: Vec<u8> = c.get("solid_jobs:flow:default").unwrap();
    assert_eq!(flow.len(), 11, "byte 0 the pause flag, bytes 1..=10 the levels");
    assert_eq!(flow[0], 0, "a priority does not pause");

    // Small batches: the order holds across calls, and within one call.
    let mut seen = numbers(&claim(&store, &mut c, 3));
    seen.extend(numbers(&claim(&store, &mut c, 7)));
    assert_eq!(seen, vec![0, 1, 30, 31, 50, 51, 70, 71, 90, 91]);

    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert!(batch.jobs.is_empty());
    let levels: Vec<Vec<u8>> = batch.flow.iter().map(|f| f.levels()).collect();
    assert_eq!(levels, vec![vec![0, 3, 7, 9]], "the trailer names the levels in use");
}

#[test]
fn a_plain_channel_gets_no_flow_string_and_no_trailer() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &[job(1, 5), job(2, 5)]);
    let exists: bool = c.exists("solid_jobs:flow:default").unwrap();
    assert!(!exists, "priority 5 writes nothing extra");
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert_eq!(numbers(&batch.jobs), vec![1, 2]);
    assert!(batch.flow.is_empty());
    assert!(batch.jobs.iter().all(|j| j.priority == 5 && j.route() == "default"));
    assert!(!batch.jobs[0].raw.contains("priority"));
}

#[test]
fn retry_requeue_and_schedule_keep_the_level() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &[job(1, 2), job(2, 8)]);
    let jobs = claim(&store, &mut c, 1);
    assert_eq!((jobs[0].priority, jobs[0].route()), (2, "default:2".to_owned()));
    let index: String = c.hget("solid_jobs:jobs", &jobs[0].envelope.id).unwrap();
    assert_eq!(index.split('|').nth(1), Some("default:2"), "the job index names the route: {index}");

    // Retry: the retrying member names the route; promotion puts it back
    // in level 2, ahead of level 8.
    store.retry(&mut c, "n1", &jobs[0], now_ms()).unwrap();
    let retrying: Vec<String> = c.zrange("solid_jobs:retrying", 0, -1).unwrap();
    assert!(retrying[0].starts_with("default:2|"), "{}", retrying[0]);
    // Wall time: the retry due now is past due on Redis' clock.
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.promote(&mut c, 100).unwrap();
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default:2").unwrap(), 1);

    // Requeue at shutdown: back to the head of its level.
    let again = claim(&store, &mut c, 1);
    assert_eq!(numbers(&again), vec![1]);
    store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap();
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default:2").unwrap(), 1);
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();

    // A scheduled job of level 0 due now: promoted into level 0, first.
    let early = job(0, 0);
    store.schedule(&mut c, &route("default", 0), now_ms(), &[early.encode()]).unwrap();
    // Wall time: the job due now is past due on Redis' clock.
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.promote(&mut c, 100).unwrap();
    assert_eq!(numbers(&claim(&store, &mut c, 10)), vec![0, 1, 2]);
}

#[test]
fn the_heartbeat_sees_a_level_list_it_is_given() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &[job(1, 1)]);
    let base = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert!(!base.ready, "the base list alone is empty");
    let with_level = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default", "default:1"], 0).unwrap();
    assert!(with_level.ready);
}
