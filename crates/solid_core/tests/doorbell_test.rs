//! Targeted doorbells against a real Redis (decision 50): a list going from
//! empty to non-empty rings `ready` on its channel's own doorbell,
//! `<ns>:doorbell:<channel>`, once per channel per script, so only the
//! nodes serving that channel wake; `planned` and `throttled` stay on the
//! namespace's `<ns>:doorbell`, which every node hears.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::{json, Map};
use solid_core::flow::{concurrency_hex, meta_into, FlowSpec, Limit};
use solid_core::redis::connection::Connector;
use solid_core::redis::doorbell::{run_subscriber, Bells, Doorbells};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Requeue, Store};
use solid_core::{now_ms, Envelope};
use support::RedisServer;

fn env(channel: &str, n: i64) -> Envelope {
    Envelope::build("Plain", json!([n]), channel, 3, now_ms(), now_ms()).unwrap()
}

fn encoded(channel: &str, from: i64, n: i64) -> Vec<String> {
    (from..from + n).map(|i| env(channel, i).encode()).collect()
}

/// A job of concurrency key `key` (limit `limit`) on `channel`.
fn limited(channel: &str, key: &str, limit: u64, n: i64) -> String {
    let hex = concurrency_hex("Sync", &json!(key));
    let mut meta = Map::new();
    meta_into(&mut meta, &FlowSpec { concurrency: Some(Limit { hex, limit }), rate: None }, Some(key)).unwrap();
    Envelope::build("Sync", json!([key, n]), channel, 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap().encode()
}

/// Everything published on `solid_jobs:doorbell*`, seen through a raw
/// PSUBSCRIBE: what producers send, whoever listens. A thread of its own
/// holds the subscription (a dropped `PubSub` unsubscribes).
struct Recorder {
    rings: std::sync::mpsc::Receiver<(String, String)>,
}

impl Recorder {
    fn new(redis: &RedisServer) -> Self {
        let mut conn = redis.conn();
        let (tx, rings) = std::sync::mpsc::channel();
        let (subscribed_tx, subscribed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut pubsub = conn.as_pubsub();
            pubsub.psubscribe("solid_jobs:doorbell*").unwrap();
            subscribed_tx.send(()).unwrap();
            // Ends with the server (the test's end): the read fails.
            while let Ok(msg) = pubsub.get_message() {
                let ring = (msg.get_channel_name().to_string(), msg.get_payload::<String>().unwrap());
                if tx.send(ring).is_err() {
                    return;
                }
            }
        });
        subscribed.recv_timeout(Duration::from_secs(10)).unwrap();
        Recorder { rings }
    }

    /// The (channel, payload) pairs published since the last call, in
    /// order: read until nothing more arrives for 300 ms.
    fn take(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(ring) = self.rings.recv_timeout(Duration::from_millis(300)) {
            out.push(ring);
        }
        out
    }
}

fn ready(channel: &str) -> (String, String) {
    (format!("solid_jobs:doorbell:{channel}"), "ready".to_string())
}

fn planned() -> (String, String) {
    ("solid_jobs:doorbell".to_string(), "planned".to_string())
}

fn sorted(mut rings: Vec<(String, String)>) -> Vec<(String, String)> {
    rings.sort();
    rings
}

fn setup() -> (RedisServer, redis::Connection, Store, Recorder) {
    let redis = RedisServer::start();
    let c = redis.conn();
    let recorder = Recorder::new(&redis);
    (redis, c, Store::new(Keyspace::default()), recorder)
}

/// A node's subscriber thread serving `channels`, as `RedisSource` starts it.
struct Node {
    bells: Arc<Bells>,
    closed: Arc<AtomicBool>,
}

impl Node {
    fn start(redis: &RedisServer, channels: &[&str]) -> Self {
        let bells = Arc::new(Bells::default());
        let closed = Arc::new(AtomicBool::new(false));
        let doorbells = Doorbells::of(&Keyspace::default(), channels.iter().copied());
        let connector = Connector::new(&redis.url()).unwrap();
        let (b, c) = (bells.clone(), closed.clone());
        std::thread::spawn(move || run_subscriber(connector, doorbells, b, c, |_| {}));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !bells.subscribed.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the subscriber did not subscribe");
            std::thread::sleep(Duration::from_millis(10));
        }
        Node { bells, closed }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The thread leaves within its read timeout; nobody waits for it.
        self.closed.store(true, Ordering::Release);
    }
}

#[test]
fn an_enqueue_wakes_the_nodes_serving_its_channel_and_no_other() {
    let (redis, mut c, store, mut recorder) = setup();
    let a = Node::start(&redis, &["a"]);
    let b = Node::start(&redis, &["b", "c"]);
    // One SUBSCRIBE per node: the namespace's doorbell and its channels'.
    let numsub: Vec<(String, u64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&["solid_jobs:doorbell", "solid_jobs:doorbell:a", "solid_jobs:doorbell:b", "solid_jobs:doorbell:c"])
        .query(&mut c)
        .unwrap();
    let counts: Vec<u64> = numsub.iter().map(|(_, n)| *n).collect();
    assert_eq!(counts, vec![2, 1, 1, 1], "{numsub:?}");
    // The subscription's own ring_all is behind us: epochs from here on.
    let (a_seen, b_seen) = (a.bells.ready.epoch(), b.bells.ready.epoch());

    store.enqueue(&mut c, "a", &encoded("a", 0, 2)).unwrap();
    assert!(a.bells.ready.wait_past(a_seen, Duration::from_secs(5)), "a's node was not woken");
    assert!(!b.bells.ready.wait_past(b_seen, Duration::from_millis(300)), "b's node was woken by a job on a");
    assert_eq!(recorder.take(), vec![ready("a")]);

    let a_seen = a.bells.ready.epoch();
    store.enqueue(&mut c, "c", &encoded("c", 0, 1)).unwrap();
    assert!(b.bells.ready.wait_past(b_seen, Duration::from_secs(5)), "c's node was not woken");
    assert!(!a.bells.ready.wait_past(a_seen, Duration::from_millis(300)), "a's node was woken by a job on c");
    assert_eq!(recorder.take(), vec![ready("c")]);

    // A prioritized job rings its channel's doorbell, not a level's.
    let b_seen = b.bells.ready.epoch();
    store.enqueue(&mut c, "a:1", &encoded("a", 10, 1)).unwrap();
    assert!(a.bells.ready.wait_past(a_seen, Duration::from_secs(5)), "a's node was not woken by a:1");
    assert!(!b.bells.ready.wait_past(b_seen, Duration::from_millis(300)));
    assert_eq!(recorder.take(), vec![ready("a")]);

    // `planned` stays on the namespace's doorbell: every node hears it.
    let (a_planned, b_planned) = (a.bells.planned.epoch(), b.bells.planned.epoch());
    store.schedule(&mut c, "b", now_ms() + 60_000, &encoded("b", 0, 1)).unwrap();
    assert!(a.bells.planned.wait_past(a_planned, Duration::from_secs(5)));
    assert!(b.bells.planned.wait_past(b_planned, Duration::from_secs(5)));
    assert_eq!(recorder.take(), vec![planned()]);
}

#[test]
fn enqueue_rings_only_when_the_list_was_empty() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.enqueue(&mut c, "a", &encoded("a", 0, 3)).unwrap();
    store.enqueue(&mut c, "a", &encoded("a", 3, 1)).unwrap();
    assert_eq!(recorder.take(), vec![ready("a")], "the second push found the list non-empty");
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:a").unwrap(), 4);
}

#[test]
fn a_promotion_rings_each_channel_it_filled_once() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.schedule(&mut c, "a", now_ms(), &encoded("a", 0, 3)).unwrap();
    store.schedule(&mut c, "b", now_ms(), &encoded("b", 0, 2)).unwrap();
    // A job already waits on c: its promoted one rings nothing.
    store.enqueue(&mut c, "c", &encoded("c", 0, 1)).unwrap();
    store.schedule(&mut c, "c", now_ms(), &encoded("c", 1, 1)).unwrap();
    let scheduled = recorder.take();
    assert!(scheduled.iter().all(|r| *r == planned() || *r == ready("c")), "{scheduled:?}");
    // Wall time: the jobs due now are past due on Redis' clock.
    std::thread::sleep(Duration::from_millis(5));

    let (moved, _) = store.promote(&mut c, 100).unwrap();
    assert_eq!(moved, 6);
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")]);
}

#[test]
fn a_recovery_rings_each_channel_of_the_dead_nodes_claims() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.enqueue(&mut c, "a", &encoded("a", 0, 2)).unwrap();
    store.enqueue(&mut c, "b", &encoded("b", 0, 1)).unwrap();
    store.heartbeat(&mut c, "dead", 60_000, "{}", &["a", "b"], 0).unwrap();
    let claimed = store.claim(&mut c, "dead", &["a", "b"], 10, now_ms()).unwrap();
    assert_eq!(claimed.jobs.len(), 3);
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")], "the enqueues");

    let _: () = c.del("solid_jobs:node:dead").unwrap();
    assert_eq!(store.requeue(&mut c, "dead", Requeue::Recover).unwrap(), Some(3));
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")], "one ring per channel, not per job");
}

#[test]
fn a_shutdown_requeue_onto_a_non_empty_channel_rings_nothing() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.enqueue(&mut c, "a", &encoded("a", 0, 2)).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a"], 0).unwrap();
    store.claim(&mut c, "n1", &["a"], 1, now_ms()).unwrap();
    assert_eq!(recorder.take(), vec![ready("a")]);
    assert_eq!(store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap(), Some(1));
    assert_eq!(recorder.take(), vec![], "a was not empty");
}

#[test]
fn an_ack_that_moves_a_blocked_job_back_rings_its_channel() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.enqueue(&mut c, "a", &[limited("a", "k", 1, 0), limited("a", "k", 1, 1)]).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a"], 0).unwrap();
    let first = store.claim(&mut c, "n1", &["a"], 10, now_ms()).unwrap().jobs;
    assert_eq!(first.len(), 1, "the second job is blocked");
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:a").unwrap(), 0);
    assert_eq!(recorder.take(), vec![ready("a")], "the enqueue");

    let done: Vec<(u64, String)> = first.iter().map(|j| (j.token, j.envelope.id.clone())).collect();
    assert!(store.ack(&mut c, "n1", &done).unwrap().is_empty());
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:a").unwrap(), 1, "moved back");
    assert_eq!(recorder.take(), vec![ready("a")]);
}

#[test]
fn a_released_barrier_rings_each_channel_it_filled() {
    let (_redis, mut c, store, mut recorder) = setup();
    let mut members = store.hold(&mut c, "a", None, now_ms() + 60_000, &encoded("a", 0, 2)).unwrap();
    members.extend(store.hold(&mut c, "b", None, now_ms() + 60_000, &encoded("b", 0, 1)).unwrap());
    assert_eq!(recorder.take(), vec![], "held publications ring nothing");
    assert_eq!(store.release(&mut c, &members).unwrap(), 3);
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")]);
}

#[test]
fn an_expired_barrier_released_by_a_heartbeat_rings_its_channels() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.hold(&mut c, "a", None, now_ms() - 1, &encoded("a", 0, 2)).unwrap();
    store.hold(&mut c, "b", None, now_ms() - 1, &encoded("b", 0, 1)).unwrap();
    // A node serving neither channel releases them: the ring is for the
    // nodes that do.
    let heartbeat = store.heartbeat(&mut c, "n1", 60_000, "{}", &["other"], 0).unwrap();
    assert_eq!(heartbeat.released, 3);
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")]);
}

#[test]
fn a_retry_or_a_discard_that_frees_a_slot_rings_the_blocked_jobs_channel() {
    let (_redis, mut c, store, mut recorder) = setup();
    // Two keys at limit 1, each with a blocked job behind its claimed one;
    // the blocked jobs of key k2 wait for channel b.
    store.enqueue(&mut c, "a", &[limited("a", "k1", 1, 0), limited("a", "k1", 1, 1)]).unwrap();
    store.enqueue(&mut c, "b", &[limited("b", "k2", 1, 0), limited("b", "k2", 1, 1)]).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a", "b"], 0).unwrap();
    let jobs = store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap().jobs;
    assert_eq!(jobs.len(), 2, "one per key; the others are blocked");
    assert_eq!(sorted(recorder.take()), vec![ready("a"), ready("b")], "the enqueues");

    let on_a = jobs.iter().find(|j| j.route() == "a").unwrap();
    store.retry(&mut c, "n1", on_a, now_ms() + 600_000).unwrap();
    assert_eq!(recorder.take(), vec![ready("a"), planned()], "the slot went to a's blocked job; the retry is planned");

    let on_b = jobs.iter().find(|j| j.route() == "b").unwrap();
    let record = json!({"reason": "test", "raw": on_b.raw});
    store.discard(&mut c, "n1", Some(on_b.token), &on_b.envelope.id, &record, false).unwrap();
    assert_eq!(recorder.take(), vec![ready("b")]);
}

#[test]
fn an_unarchived_job_rings_its_channel() {
    let (_redis, mut c, store, mut recorder) = setup();
    store.enqueue(&mut c, "a", &encoded("a", 0, 1)).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a"], 0).unwrap();
    let job = store.claim(&mut c, "n1", &["a"], 1, now_ms()).unwrap().jobs.remove(0);
    let record = json!({"reason": "test", "raw": job.raw});
    store.discard(&mut c, "n1", Some(job.token), &job.envelope.id, &record, true).unwrap();
    assert_eq!(recorder.take(), vec![ready("a")], "the enqueue; a discard of a plain job rings nothing");

    assert!(store.unarchive(&mut c, &job.envelope.id).unwrap());
    assert_eq!(recorder.take(), vec![ready("a")]);
}
