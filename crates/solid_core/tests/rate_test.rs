//! Rate limits against a real Redis, at the script level
//! (docs/flow-control.md "Rate limits", decision 42): a claim admits a
//! job of rate key `hex` only while fewer than `rl` admissions lie within
//! the window on Redis' clock; the others wait in `throttled:<hex>`, their
//! key in `flow:wake` at the time the oldest admission leaves the window,
//! and a waking promotion moves them back.

mod support;

use std::time::Duration;

use redis::Commands;
use serde_json::{json, Map};
use solid_core::flow::{concurrency_hex, meta_into, rate_hex, with_rate, FlowSpec, Limit};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::Store;
use solid_core::{now_ms, ClaimedJob, Envelope};
use support::RedisServer;

fn hex(key: &str) -> String {
    rate_hex("Api", &json!(key))
}

fn rated(key: &str, limit: u64, window_ms: u64, n: i64) -> Envelope {
    let spec = with_rate(FlowSpec::default(), "Api", limit, window_ms, 50, &json!(key));
    let mut meta = Map::new();
    meta_into(&mut meta, &spec, Some(key)).unwrap();
    Envelope::build("Api", json!([key, n]), "default", 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap()
}

fn plain(n: i64) -> Envelope {
    Envelope::build("Plain", json!([n]), "default", 3, now_ms(), now_ms()).unwrap()
}

fn push(store: &Store, c: &mut redis::Connection, envs: &[Envelope]) {
    store.enqueue(c, "default", &envs.iter().map(Envelope::encode).collect::<Vec<_>>()).unwrap();
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

fn ids(jobs: &[ClaimedJob]) -> Vec<String> {
    jobs.iter().map(|j| j.envelope.id.clone()).collect()
}

fn throttled(c: &mut redis::Connection, key: &str) -> usize {
    c.llen(format!("solid_jobs:throttled:{}", hex(key))).unwrap()
}

fn log(c: &mut redis::Connection, key: &str) -> Vec<u64> {
    c.lrange(format!("solid_jobs:rate:{}", hex(key)), 0, -1).unwrap()
}

fn wake(c: &mut redis::Connection, key: &str) -> Option<u64> {
    c.zscore("solid_jobs:flow:wake", hex(key)).unwrap()
}

fn redis_ms(c: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1000 + us / 1000
}

#[test]
fn a_rate_of_three_claims_three_throttles_the_rest_and_the_wake_moves_them_back() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..5).map(|n| rated("a", 3, 1_200, n)).collect();
    push(&store, &mut c, &envs);
    let mut bell = redis::Client::open(_redis.url()).unwrap().get_connection().unwrap();
    let mut pubsub = bell.as_pubsub();
    // `throttled` rings the namespace's doorbell, `ready` the channel's (decision 50).
    pubsub.subscribe(&["solid_jobs:doorbell", "solid_jobs:doorbell:default"]).unwrap();
    pubsub.set_read_timeout(Some(Duration::from_millis(500))).unwrap();

    let before = redis_ms(&mut c);
    let first = claim(&store, &mut c, 10);
    assert_eq!(ids(&first), ids_of(&envs[..3]));
    assert_eq!(throttled(&mut c, "a"), 2);
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default").unwrap(), 0, "throttled jobs left the channel");
    let admitted = log(&mut c, "a");
    assert_eq!(admitted.len(), 3);
    assert!(admitted.iter().all(|&t| t >= before && t <= redis_ms(&mut c)), "{admitted:?} on Redis' clock");
    let pttl: i64 = c.pttl(format!("solid_jobs:rate:{}", hex("a"))).unwrap();
    assert!(pttl > 0 && pttl <= 1_200, "the log expires with its window: {pttl}");
    assert_eq!(wake(&mut c, "a"), Some(admitted[0] + 1_200), "the wake is when the oldest admission leaves the window");
    assert_eq!(c.hget::<_, _, String>("solid_jobs:jobs", &envs[3].id).unwrap(), "throttled|default");
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:throttled").unwrap(), 2);
    assert_eq!(c.get::<_, Option<i64>>("solid_jobs:metric:blocked").unwrap(), None, "throttled is not blocked");
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "solid_jobs:doorbell");
    assert_eq!(msg.get_payload::<String>().unwrap(), "throttled", "a new earliest wake rang");

    // Nothing due yet: a waking promotion moves nothing, and says when.
    let (_, next, waiting) = store.promote_waking(&mut c, 100, true).unwrap();
    assert!(waiting, "the key still waits for its wake");
    assert_eq!(throttled(&mut c, "a"), 2);
    assert!(next.unwrap() <= Duration::from_millis(1_200), "{next:?}");
    // A claim meanwhile finds the channel empty.
    assert!(claim(&store, &mut c, 10).is_empty());

    // Wall time: the 1.2 s window of every admission passes on Redis' clock.
    std::thread::sleep(Duration::from_millis(1_250));
    // A node without a rate limited task does not wake them.
    store.promote_waking(&mut c, 100, false).unwrap();
    assert_eq!(throttled(&mut c, "a"), 2);
    store.promote_waking(&mut c, 100, true).unwrap();
    assert_eq!(throttled(&mut c, "a"), 0, "the whole window expired: room for both");
    assert_eq!(wake(&mut c, "a"), None);
    assert!(!store.promote_waking(&mut c, 100, true).unwrap().2, "no wake left: the node may stop waking");
    assert_eq!(c.hget::<_, _, String>("solid_jobs:jobs", &envs[3].id).unwrap(), "ready|default");
    let msg = pubsub.get_message().unwrap();
    assert_eq!(
        (msg.get_channel_name(), msg.get_payload::<String>().unwrap().as_str()),
        ("solid_jobs:doorbell:default", "ready")
    );
    let second = claim(&store, &mut c, 10);
    assert_eq!(ids(&second), ids_of(&envs[3..]), "moved back oldest first");
    assert_eq!(log(&mut c, "a").len(), 2, "the old log expired with its window: only the new admissions");
}

fn ids_of(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.id.clone()).collect()
}

#[test]
fn admissions_never_exceed_the_limit_in_any_window_under_repeated_claims_and_wakes() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..40).map(|n| rated("b", 4, 1_000, n)).collect();
    push(&store, &mut c, &envs);
    let mut starts: Vec<u64> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while starts.len() < 40 && std::time::Instant::now() < deadline {
        let jobs = claim(&store, &mut c, 3);
        let at = redis_ms(&mut c);
        starts.extend(jobs.iter().map(|_| at));
        let acks: Vec<(u64, String)> = jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect();
        store.ack(&mut c, "n1", &acks).unwrap();
        store.promote_waking(&mut c, 100, true).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(starts.len(), 40, "all admitted in the end");
    for (i, &s) in starts.iter().enumerate() {
        // Claims read at `at` after the claim: the admission was earlier,
        // so the window of 1,000 ms around Redis' stamps is conservative
        // by the round trip only; use the exact log instead below.
        let within = starts[i..].iter().filter(|&&t| t < s + 1_000 - 50).count();
        assert!(within <= 4, "{within} claims within a window from {s}");
    }
    assert!(log(&mut c, "b").len() <= 4);
}

/// A job of key "k" with a concurrency limit of 1 and a rate of `rate`
/// per `window_ms`.
fn both(rate: u64, window_ms: u64, n: i64) -> Envelope {
    let c = Limit { hex: concurrency_hex("Api", &json!("k")), limit: 1 };
    let spec = with_rate(FlowSpec { concurrency: Some(c), rate: None }, "Api", rate, window_ms, 50, &json!("k"));
    let mut meta = Map::new();
    meta_into(&mut meta, &spec, Some("k")).unwrap();
    Envelope::build("Api", json!([n]), "default", 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap()
}

#[test]
fn a_concurrency_blocked_job_takes_no_rate_and_plain_jobs_flow_past_a_throttled_key() {
    let (_redis, mut c, store) = setup();
    let both = |n| both(2, 60_000, n);
    let envs = vec![both(0), both(1), plain(2), rated("x", 1, 60_000, 3), rated("x", 1, 60_000, 4), plain(5)];
    push(&store, &mut c, &envs);
    let jobs = claim(&store, &mut c, 10);
    assert_eq!(ids(&jobs), vec![envs[0].id.clone(), envs[2].id.clone(), envs[3].id.clone(), envs[5].id.clone()]);
    let key: Vec<u64> = c.lrange(format!("solid_jobs:rate:{}", rate_hex("Api", &json!("k"))), 0, -1).unwrap();
    assert_eq!(key.len(), 1, "the blocked job consumed no rate");
    assert_eq!(c.llen::<_, usize>(format!("solid_jobs:blocked:{}", concurrency_hex("Api", &json!("k")))).unwrap(), 1);
    assert_eq!(throttled(&mut c, "x"), 1);
    // The admitted limited job holds its slot like any concurrency limited one.
    let slot: usize = c.scard(format!("solid_jobs:slots:{}", concurrency_hex("Api", &json!("k")))).unwrap();
    assert_eq!(slot, 1);
}

#[test]
fn a_cancelled_throttled_job_is_dropped_when_its_key_wakes() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..3).map(|n| rated("c", 1, 1_000, n)).collect();
    push(&store, &mut c, &envs);
    assert_eq!(claim(&store, &mut c, 10).len(), 1);
    assert!(store.cancel(&mut c, &envs[1].id).unwrap());
    assert_eq!(c.get::<_, Option<i64>>("solid_jobs:cancelling").unwrap(), None, "no claim needs to look for it");
    // Wall time: the 1 s window of the admission passes on Redis' clock.
    std::thread::sleep(Duration::from_millis(1_050));
    store.promote_waking(&mut c, 100, true).unwrap();
    assert_eq!(throttled(&mut c, "c"), 0);
    assert_eq!(c.hget::<_, _, Option<String>>("solid_jobs:jobs", &envs[1].id).unwrap(), None, "forgotten");
    assert_eq!(ids(&claim(&store, &mut c, 10)), vec![envs[2].id.clone()]);
}

/// The baton: a released slot moves the key's oldest blocked job back;
/// that job found the rate full and was throttled; cancelled there, it is
/// dropped when the key wakes, and its key's next blocked job is moved back
/// in its place. (Dropped without that, the key's other blocked jobs waited
/// for a slot release that could never come: none of its jobs ran.)
#[test]
fn a_cancelled_throttled_job_passes_its_slot_on_to_the_next_blocked_job() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..3).map(|n| both(1, 1_000, n)).collect();
    push(&store, &mut c, &envs);
    let first = claim(&store, &mut c, 10);
    assert_eq!(ids(&first), vec![envs[0].id.clone()], "one slot: the others are blocked");
    let blocked = format!("solid_jobs:blocked:{}", concurrency_hex("Api", &json!("k")));
    assert_eq!(c.llen::<_, usize>(&blocked).unwrap(), 2);
    store.ack(&mut c, "n1", &[(first[0].token, first[0].envelope.id.clone())]).unwrap();
    assert!(claim(&store, &mut c, 10).is_empty(), "the moved-back job finds the rate full");
    assert_eq!(throttled(&mut c, "k"), 1);
    assert_eq!(c.llen::<_, usize>(&blocked).unwrap(), 1);
    assert!(store.cancel(&mut c, &envs[1].id).unwrap());
    // Wall time: the 1 s window of the admission passes on Redis' clock.
    std::thread::sleep(Duration::from_millis(1_050));
    store.promote_waking(&mut c, 100, true).unwrap();
    assert_eq!(throttled(&mut c, "k"), 0);
    assert_eq!(c.llen::<_, usize>(&blocked).unwrap(), 0, "the slot went on to the next blocked job");
    assert_eq!(ids(&claim(&store, &mut c, 10)), vec![envs[2].id.clone()]);
}

#[test]
fn a_hot_key_wakes_one_window_at_a_time() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..7).map(|n| rated("d", 2, 1_000, n)).collect();
    push(&store, &mut c, &envs);
    assert_eq!(claim(&store, &mut c, 10).len(), 2);
    assert_eq!(throttled(&mut c, "d"), 5);
    // Wall time: the 1 s window of both admissions passes on Redis' clock.
    std::thread::sleep(Duration::from_millis(1_050));
    store.promote_waking(&mut c, 100, true).unwrap();
    assert_eq!(throttled(&mut c, "d"), 3, "room for two: two moved");
    let next = wake(&mut c, "d").expect("jobs left: the key wakes again");
    assert!(next > redis_ms(&mut c), "{next}");
    assert_eq!(claim(&store, &mut c, 10).len(), 2);
    assert_eq!(throttled(&mut c, "d"), 3, "nothing throttled again");
}

#[test]
fn a_handed_back_job_goes_to_the_head_unstarted_keeping_its_admission() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..2).map(|n| rated("h", 5, 60_000, n)).collect();
    push(&store, &mut c, &envs);
    let jobs = claim(&store, &mut c, 10);
    assert_eq!(jobs.len(), 2);
    assert_eq!(store.hand_back(&mut c, "n1", &[jobs[1].token]).unwrap(), 1);
    assert_eq!(c.hlen::<_, usize>("solid_jobs:claims:n1").unwrap(), 1, "only that claim left");
    let head: Vec<String> = c.lrange("solid_jobs:channel:default", -1, -1).unwrap();
    assert_eq!(head, vec![jobs[1].raw.clone()]);
    assert_eq!(c.hget::<_, _, String>("solid_jobs:jobs", &jobs[1].envelope.id).unwrap(), "ready|default");
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:handed_back").unwrap(), 1);
    assert_eq!(log(&mut c, "h").len(), 2, "the admission is not given back");
    // A resent hand-back finds no claim: nothing moves twice.
    assert_eq!(store.hand_back(&mut c, "n1", &[jobs[1].token]).unwrap(), 0);
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default").unwrap(), 1);
}

/// A limit lowered after jobs were admitted (or a group whose tasks give
/// different limits) while the key stays busy: its log holds more entries
/// than the new limit, and the newest `limit` of them decide. Five
/// admissions 200 ms apart at 5 per second, then jobs at 1 per second: once
/// the oldest entry leaves the window none is admitted (the log's newest is
/// still within it), where deciding by the oldest admitted one per claim.
#[test]
fn a_lowered_limit_holds_at_once_while_the_key_stays_busy() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &(0..5).map(|n| rated("k", 5, 1_000, n)).collect::<Vec<_>>());
    for _ in 0..5 {
        assert_eq!(claim(&store, &mut c, 1).len(), 1);
        // Wall time: the scenario's admissions are 200 ms apart.
        std::thread::sleep(Duration::from_millis(200));
    }
    let entries = log(&mut c, "k");
    assert_eq!(entries.len(), 5);
    push(&store, &mut c, &(5..10).map(|n| rated("k", 1, 1_000, n)).collect::<Vec<_>>());
    // Past the oldest entry's window (1 s plus the 50 ms slack), within the
    // newest's: every claim and wake here admits nothing at 1 per second.
    while redis_ms(&mut c) <= entries[0] + 1_100 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut admitted = 0;
    while redis_ms(&mut c) < entries[4] + 1_000 {
        store.promote_waking(&mut c, 100, true).unwrap();
        admitted += claim(&store, &mut c, 10).len();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(admitted, 0, "admitted while the newest admission was within the window");
    while redis_ms(&mut c) <= entries[4] + 1_100 {
        std::thread::sleep(Duration::from_millis(20));
    }
    store.promote_waking(&mut c, 100, true).unwrap();
    assert_eq!(claim(&store, &mut c, 10).len(), 1, "then one per window");
    assert_eq!(log(&mut c, "k").len(), 1, "the log trimmed to the limit in force");
}
