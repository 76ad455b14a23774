//! Concurrency limits against a real Redis, at the script level
//! (docs/flow-control.md, decision 39): a slot is a claim token in
//! `slots:<hex>`, added by the claim that records the claim and removed by
//! whichever script removes the claim record, so after every release path
//! `SCARD slots` equals the key's live claims, and a stale or resent settle
//! releases nothing.

mod support;

use redis::Commands;
use serde_json::{json, Map};
use solid_core::flow::{concurrency_hex, meta_into, FlowSpec, Limit};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Held, Requeue, Store};
use solid_core::{now_ms, ClaimedJob, Envelope};
use support::RedisServer;

fn hex(key: &str) -> String {
    concurrency_hex("Sync", &json!(key))
}

fn limited(key: &str, limit: u64, n: i64) -> Envelope {
    let mut meta = Map::new();
    meta_into(&mut meta, &FlowSpec { concurrency: Some(Limit { hex: hex(key), limit }), rate: None }, Some(key))
        .unwrap();
    Envelope::build("Sync", json!([key, n]), "default", 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap()
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

fn slots(c: &mut redis::Connection, key: &str) -> usize {
    c.scard(format!("solid_jobs:slots:{}", hex(key))).unwrap()
}

fn blocked(c: &mut redis::Connection, key: &str) -> usize {
    c.llen(format!("solid_jobs:blocked:{}", hex(key))).unwrap()
}

fn claims(c: &mut redis::Connection) -> usize {
    c.hlen("solid_jobs:claims:n1").unwrap()
}

fn state(c: &mut redis::Connection, id: &str) -> Option<String> {
    c.hget("solid_jobs:jobs", id).unwrap()
}

fn acks(jobs: &[ClaimedJob]) -> Vec<(u64, String)> {
    jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect()
}

#[test]
fn a_limit_of_two_claims_two_blocks_the_rest_and_each_ack_moves_one_back() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..5).map(|n| limited("t", 2, n)).collect();
    push(&store, &mut c, &envs);
    let mut bell = redis::Client::open(_redis.url()).unwrap().get_connection().unwrap();
    let mut pubsub = bell.as_pubsub();
    // `ready` rings on the channel's own doorbell (decision 50).
    pubsub.subscribe("solid_jobs:doorbell:default").unwrap();
    pubsub.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();

    let first = claim(&store, &mut c, 10);
    assert_eq!(
        first.iter().map(|j| j.envelope.id.clone()).collect::<Vec<_>>(),
        vec![envs[0].id.clone(), envs[1].id.clone()]
    );
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (2, 3));
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default").unwrap(), 0, "blocked jobs left the channel");
    assert_eq!(state(&mut c, &envs[2].id).unwrap(), "blocked|default");
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:blocked").unwrap(), 3);

    // Ack one: its slot goes, and the oldest blocked job is at the head.
    assert!(store.ack(&mut c, "n1", &acks(&first[..1])).unwrap().is_empty());
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (1, 2));
    let head: Vec<String> = c.lrange("solid_jobs:channel:default", -1, -1).unwrap();
    assert_eq!(head, vec![envs[2].encode()]);
    assert_eq!(state(&mut c, &envs[2].id).unwrap(), "ready|default");
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "ready", "the empty list rang once");
    drop(pubsub);

    let second = claim(&store, &mut c, 10);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].envelope.id, envs[2].id);
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (2, 2));

    // Drain: every ack hands on; nothing left behind.
    let mut live = vec![first[1].clone(), second[0].clone()];
    let mut acked = 1;
    while let Some(job) = live.pop() {
        store.ack(&mut c, "n1", &acks(&[job])).unwrap();
        live.extend(claim(&store, &mut c, 10));
        assert!(slots(&mut c, "t") <= 2);
        assert_eq!(slots(&mut c, "t"), claims(&mut c));
        acked += 1;
    }
    assert_eq!(acked, 5, "every job ran once");
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t"), claims(&mut c)), (0, 0, 0));
    let keys: Vec<String> = c.keys("solid_jobs:slots:*").unwrap();
    assert!(keys.is_empty(), "an empty slot set vanishes");
}

#[test]
fn other_keys_and_plain_jobs_flow_past_a_saturated_key() {
    let (_redis, mut c, store) = setup();
    let mut envs: Vec<Envelope> = (0..4).map(|n| limited("hot", 1, n)).collect();
    envs.push(limited("cold", 1, 0));
    envs.push(plain(0));
    push(&store, &mut c, &envs);
    let jobs = claim(&store, &mut c, 3);
    let ids: Vec<&str> = jobs.iter().map(|j| j.envelope.id.as_str()).collect();
    assert_eq!(ids, vec![envs[0].id.as_str(), envs[4].id.as_str(), envs[5].id.as_str()]);
    assert_eq!(blocked(&mut c, "hot"), 3);
}

#[test]
fn a_resent_or_stale_settle_releases_nothing() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &(0..4).map(|n| limited("t", 1, n)).collect::<Vec<_>>());
    let a = claim(&store, &mut c, 10);
    assert_eq!((a.len(), blocked(&mut c, "t")), (1, 3));
    // The acker's batch applied, its reply lost, resent: no second release.
    assert!(store.ack_resendable(&mut c, "n1", &acks(&a)).unwrap().is_empty());
    assert_eq!(blocked(&mut c, "t"), 2);
    assert!(store.ack_resendable(&mut c, "n1", &acks(&a)).unwrap().is_empty());
    assert_eq!(blocked(&mut c, "t"), 2, "the resent batch moved nothing back");
    // A plain ack of the same token again is stale: nothing either.
    assert_eq!(store.ack(&mut c, "n1", &acks(&a)).unwrap(), vec![a[0].token]);
    assert_eq!(blocked(&mut c, "t"), 2);

    // retry, and the same retry resent ('done'): one release.
    let b = claim(&store, &mut c, 10);
    assert_eq!(b.len(), 1);
    store.retry(&mut c, "n1", &b[0], now_ms() + 60_000).unwrap();
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (0, 1));
    store.retry(&mut c, "n1", &b[0], now_ms() + 60_000).unwrap();
    assert_eq!(blocked(&mut c, "t"), 1, "a resent retry moved nothing back");

    // discard, and a stale discard.
    let d = claim(&store, &mut c, 10);
    assert_eq!(d.len(), 1);
    let record = json!({"id": d[0].envelope.id, "raw": d[0].raw});
    store.discard(&mut c, "n1", Some(d[0].token), &d[0].envelope.id, &record, true).unwrap();
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (0, 0));
    store.discard(&mut c, "n1", Some(d[0].token), &d[0].envelope.id, &record, true).unwrap();
    let e = claim(&store, &mut c, 10);
    assert_eq!((e.len(), slots(&mut c, "t")), (1, 1));
    store.ack(&mut c, "n1", &acks(&e)).unwrap();
    assert_eq!((slots(&mut c, "t"), claims(&mut c)), (0, 0));
}

#[test]
fn quarantine_of_an_undecodable_limited_entry_releases_its_slot() {
    let (_redis, mut c, store) = setup();
    let good = limited("t", 1, 0).encode();
    // The same tail, a body Rust refuses (max_failures is not a number).
    let bad = good.replace(r#""max_failures":3"#, r#""max_failures":"x""#);
    assert_ne!(bad, good);
    store.enqueue(&mut c, "default", &[bad, limited("t", 1, 1).encode()]).unwrap();
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert_eq!((batch.jobs.len(), batch.malformed.len(), blocked(&mut c, "t")), (0, 1, 1));
    let m = &batch.malformed[0];
    store.quarantine(&mut c, "n1", m.token, &m.channel, &m.raw, &m.reason).unwrap();
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (0, 0));
    assert_eq!(claim(&store, &mut c, 10).len(), 1);
}

#[test]
fn requeue_in_every_mode_and_heartbeat_reconcile_release_slots() {
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &(0..3).map(|n| limited("t", 1, n)).collect::<Vec<_>>());

    // release: a claim whose reply was lost.
    let stamp = now_ms();
    let lost = store.claim(&mut c, "n1", &["default"], 10, stamp).unwrap().jobs;
    assert_eq!((lost.len(), slots(&mut c, "t"), blocked(&mut c, "t")), (1, 1, 2));
    store.requeue(&mut c, "n1", Requeue::Release { stamp }).unwrap();
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t"), claims(&mut c)), (0, 1, 0));
    assert_eq!(c.llen::<_, usize>("solid_jobs:channel:default").unwrap(), 2, "requeued and moved back");

    // heartbeat reconcile of a claim the node does not hold.
    let unheld = store.claim(&mut c, "n1", &["default"], 10, 1_000).unwrap().jobs;
    assert_eq!((unheld.len(), slots(&mut c, "t")), (1, 1));
    let hb = store
        .heartbeat_holding(
            &mut c,
            "n1",
            60_000,
            "{}",
            &["default"],
            0,
            Some(&Held { floor: 2_000, check: 1, tokens: vec![] }),
        )
        .unwrap();
    assert_eq!(hb.handed_back, vec![unheld[0].envelope.id.clone()]);
    assert_eq!((slots(&mut c, "t"), claims(&mut c)), (0, 0));

    // shutdown.
    assert_eq!(claim(&store, &mut c, 10).len(), 1);
    store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap();
    assert_eq!((slots(&mut c, "t"), claims(&mut c)), (0, 0));

    // recover: a dead node's claims (and slots) come back.
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert_eq!(claim(&store, &mut c, 10).len(), 1);
    assert_eq!(slots(&mut c, "t"), 1);
    let _: () = c.del("solid_jobs:node:n1").unwrap();
    store.requeue(&mut c, "n1", Requeue::Recover).unwrap();
    assert_eq!((slots(&mut c, "t"), claims(&mut c)), (0, 0));
    let total: usize = c.llen::<_, usize>("solid_jobs:channel:default").unwrap() + blocked(&mut c, "t");
    assert_eq!(total, 3, "every job is ready or blocked, none lost");
}

#[test]
fn a_cancelled_blocked_job_is_dropped_by_the_mover_and_passes_the_baton() {
    let (_redis, mut c, store) = setup();
    let envs: Vec<Envelope> = (0..3).map(|n| limited("t", 1, n)).collect();
    push(&store, &mut c, &envs);
    let a = claim(&store, &mut c, 10);
    assert_eq!(blocked(&mut c, "t"), 2);
    assert!(store.cancel(&mut c, &envs[1].id).unwrap());
    assert_eq!(c.get::<_, Option<i64>>("solid_jobs:cancelling").unwrap(), None, "no claim has to look for it");
    store.ack(&mut c, "n1", &acks(&a)).unwrap();
    assert_eq!(state(&mut c, &envs[1].id), None, "dropped by the mover");
    assert_eq!(state(&mut c, &envs[2].id).unwrap(), "ready|default", "and the next one moved back");
    let b = claim(&store, &mut c, 10);
    assert_eq!(b[0].envelope.id, envs[2].id);

    // A moved-back job cancelled while ready: the claim drops it and hands on.
    push(&store, &mut c, &(3..5).map(|n| limited("t", 1, n)).collect::<Vec<_>>());
    assert_eq!(claim(&store, &mut c, 10).len(), 0);
    assert_eq!(blocked(&mut c, "t"), 2);
    store.ack(&mut c, "n1", &acks(&b)).unwrap();
    let ready: Vec<String> = c.lrange("solid_jobs:channel:default", 0, -1).unwrap();
    let moved = Envelope::decode(&ready[0]).unwrap();
    assert!(store.cancel(&mut c, &moved.id).unwrap());
    let c2 = claim(&store, &mut c, 10);
    assert_eq!(c2.len(), 1, "the baton went on to the last blocked job");
    assert_ne!(c2[0].envelope.id, moved.id);
    assert_eq!(blocked(&mut c, "t"), 0);
}

#[test]
fn the_blocked_budget_stops_a_claim_and_says_more() {
    let (_redis, mut c, store) = setup();
    let mut envs: Vec<Envelope> = (0..1_200).map(|n| limited("hot", 1, n)).collect();
    envs.push(plain(0));
    push(&store, &mut c, &envs);
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert!(batch.more, "1,000 blocked: stopped with more");
    assert_eq!(batch.jobs.len(), 1);
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert!(!batch.more);
    assert_eq!(batch.jobs.len(), 1, "the plain job behind the backlog");
    assert_eq!(batch.jobs[0].envelope.id, envs[1_200].id);
    assert_eq!(blocked(&mut c, "hot"), 1_199);
}

#[test]
fn a_claim_made_without_a_slot_passes_no_baton() {
    // A node older than this feature claimed the limited job without SADD:
    // its release (SREM returns 0) moves nothing back.
    let (_redis, mut c, store) = setup();
    push(&store, &mut c, &(0..2).map(|n| limited("t", 1, n)).collect::<Vec<_>>());
    let a = claim(&store, &mut c, 10);
    assert_eq!(blocked(&mut c, "t"), 1);
    let _: () = c.srem(format!("solid_jobs:slots:{}", hex("t")), a[0].token).unwrap();
    store.ack(&mut c, "n1", &acks(&a)).unwrap();
    assert_eq!(blocked(&mut c, "t"), 1, "no baton from a slotless claim");
}

#[test]
fn a_unique_limited_job_holds_its_lock_and_its_slot_and_releases_both() {
    let (_redis, mut c, store) = setup();
    let lock = solid_core::unique::lock_hex("Sync", &json!("u"));
    let mut meta = solid_core::unique::meta(&lock, solid_core::unique::Mode::Running);
    meta_into(&mut meta, &FlowSpec { concurrency: Some(Limit { hex: hex("t"), limit: 1 }), rate: None }, None).unwrap();
    let u = Envelope::build("Sync", json!(["u"]), "default", 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap();
    store.enqueue_unique(&mut c, "default", None, 0, 86_400_000, &[(lock.clone(), u.clone())]).unwrap();
    push(&store, &mut c, &[limited("t", 1, 9)]);
    let a = claim(&store, &mut c, 10);
    assert_eq!((a.len(), slots(&mut c, "t"), blocked(&mut c, "t")), (1, 1, 1));
    assert_eq!(a[0].envelope.id, u.id);
    store.ack(&mut c, "n1", &acks(&a)).unwrap();
    assert_eq!(c.get::<_, Option<String>>(format!("solid_jobs:unique:{lock}")).unwrap(), None);
    assert_eq!((slots(&mut c, "t"), blocked(&mut c, "t")), (0, 0));

    push(&store, &mut c, &[plain(1)]);
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert_eq!((batch.jobs.len(), batch.more), (2, false));
}

/// A released slot passes over a blocked job whose channel is paused: the
/// job goes back to its (paused) list, and the slot to the key's next
/// blocked job, here of another channel. (The baton once stopped at the
/// paused job: the key's other channels waited for the resume with the
/// slot free.)
#[test]
fn a_released_slot_passes_over_a_blocked_job_of_a_paused_channel() {
    let (_redis, mut c, store) = setup();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a", "b"], 0).unwrap();
    let job = |channel: &str, n: i64| {
        let mut meta = Map::new();
        meta_into(&mut meta, &FlowSpec { concurrency: Some(Limit { hex: hex("k"), limit: 1 }), rate: None }, Some("k"))
            .unwrap();
        Envelope::build("Sync", json!(["k", n]), channel, 3, now_ms(), now_ms()).unwrap().with_meta(meta).unwrap()
    };
    let (a0, a1, b1) = (job("a", 0), job("a", 1), job("b", 1));
    store.enqueue(&mut c, "a", &[a0.encode()]).unwrap();
    let running = store.claim(&mut c, "n1", &["a"], 1, now_ms()).unwrap().jobs;
    assert_eq!(running.len(), 1);
    store.enqueue(&mut c, "a", &[a1.encode()]).unwrap();
    store.enqueue(&mut c, "b", &[b1.encode()]).unwrap();
    assert!(store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap().jobs.is_empty(), "the one slot is held");
    assert_eq!(blocked(&mut c, "k"), 2);
    assert!(store.pause_channel(&mut c, "a", None).unwrap());
    store.ack(&mut c, "n1", &acks(&running)).unwrap();
    assert_eq!(blocked(&mut c, "k"), 0, "the paused channel's job was passed over");
    assert_eq!(state(&mut c, &a1.id).as_deref(), Some("ready|a"), "waiting in its paused list");
    let b = store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap().jobs;
    assert_eq!(b.iter().map(|j| j.envelope.id.clone()).collect::<Vec<_>>(), vec![b1.id.clone()]);
    assert!(store.resume_channel(&mut c, "a").unwrap());
    assert!(
        store.claim(&mut c, "n1", &["a"], 10, now_ms()).unwrap().jobs.is_empty(),
        "resumed, a1 finds the slot held"
    );
    assert_eq!(blocked(&mut c, "k"), 1);
}
