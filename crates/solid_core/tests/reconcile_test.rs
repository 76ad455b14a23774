//! What keeps claims right when the network or Redis misbehaves, against a
//! real Redis: the heartbeat hands back claims a node does not hold, claim
//! tokens stay above a floor from Redis's clock when the fence counter goes
//! back, a completion batch resent after a lost reply is recognised as
//! applied, and the namespace's incarnation changes only when it was lost.

mod support;

use redis::Commands;
use serde_json::json;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Held, Store};
use solid_core::{now_ms, Envelope};
use support::RedisServer;

fn env(n: i64) -> Envelope {
    Envelope::build("Foo", json!([n]), "default", 3, now_ms(), now_ms()).unwrap()
}

fn register(store: &Store, c: &mut redis::Connection, node: &str) {
    store.heartbeat(c, node, 60_000, "{}", &["default"], 0).unwrap();
}

fn beat(store: &Store, c: &mut redis::Connection, held: &Held) -> solid_core::redis::store::Heartbeat {
    store.heartbeat_holding(c, "n1", 60_000, "{}", &["default"], 0, Some(held)).unwrap()
}

#[test]
fn the_heartbeat_hands_back_claims_the_node_does_not_hold() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<Envelope> = (0..4).map(env).collect();
    store.enqueue(&mut c, "default", &envs.iter().map(Envelope::encode).collect::<Vec<_>>()).unwrap();
    register(&store, &mut c, "n1");
    let stamp = 1_000;
    let held = store.claim(&mut c, "n1", &["default"], 2, stamp).unwrap();
    // A claim whose reply never reached the node (it arrived late, on a
    // connection the node had given up).
    let lost = store.claim(&mut c, "n1", &["default"], 1, stamp + 1).unwrap();
    // A claim call still in flight: stamped at the floor.
    let in_flight = store.claim(&mut c, "n1", &["default"], 1, stamp + 2).unwrap();
    let tokens: Vec<u64> = held.jobs.iter().map(|j| j.token).collect();

    let hb = beat(&store, &mut c, &Held { floor: stamp + 2, check: 1, tokens: tokens.clone() });
    assert_eq!(hb.handed_back, vec![lost.jobs[0].envelope.id.clone()]);
    assert!(hb.ready, "the handed-back job is ready on a served channel");
    let left: Vec<u64> = c.hkeys("solid_jobs:claims:n1").unwrap();
    let mut expected = tokens.clone();
    expected.push(in_flight.jobs[0].token);
    assert_eq!(left.len(), 3);
    assert!(expected.iter().all(|t| left.contains(t)), "{left:?} vs {expected:?}");
    // Back at the head of its channel, ready in the job index.
    let head: Vec<String> = c.lrange("solid_jobs:channel:default", -1, -1).unwrap();
    assert_eq!(head, vec![lost.jobs[0].raw.clone()]);
    let state: String = c.hget("solid_jobs:jobs", &lost.jobs[0].envelope.id).unwrap();
    assert_eq!(state, "ready|default");
    // The holding record names the floor and the tokens held.
    let record: String = c.get("solid_jobs:holding:n1").unwrap();
    let parts: Vec<&str> = record.splitn(3, '|').collect();
    assert_eq!(parts[0], (stamp + 2).to_string());
    let listed: Vec<u64> = parts[2].split(',').map(|t| t.parse().unwrap()).collect();
    assert_eq!(listed.len(), 2);
    assert!(tokens.iter().all(|t| listed.contains(t)));

    // Nothing else to hand back; the record replaced is reported, so the
    // node can tell whether Redis went back. A heartbeat without holdings
    // reconciles nothing.
    let hb = beat(&store, &mut c, &Held { floor: stamp + 2, check: 2, tokens });
    assert!(hb.handed_back.is_empty());
    assert_eq!(hb.previous_check, Some(1));
    assert!(store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap().handed_back.is_empty());
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 3);
}

#[test]
fn tokens_stay_above_every_earlier_token_when_the_fence_goes_back() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.enqueue(&mut c, "default", &(0..3).map(|i| env(i).encode()).collect::<Vec<_>>()).unwrap();
    register(&store, &mut c, "n1");
    let before = now_ms() * 1024;
    let first = store.claim(&mut c, "n1", &["default"], 2, now_ms()).unwrap();
    assert!(first.jobs[0].token >= before, "the clock floor: {} < {before}", first.jobs[0].token);
    assert_eq!(first.jobs[1].token, first.jobs[0].token + 1);
    let fence: u64 = c.get("solid_jobs:fence").unwrap();
    assert_eq!(fence, first.jobs[1].token);
    // Redis loses the counter's last writes (a rollback): it goes back.
    let _: () = c.set("solid_jobs:fence", 1229).unwrap();
    let hb = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert_eq!(hb.fence, 1229, "the heartbeat reports the counter, so a node can tell it went back");
    // Wall time: the clock floor (now_ms * 1024) moves on a millisecond.
    std::thread::sleep(std::time::Duration::from_millis(2));
    let second = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap();
    assert!(second.jobs[0].token > first.jobs[1].token, "tokens never repeat");
    // A counter ahead of the clock keeps counting from where it is.
    let ahead = second.jobs[0].token + 10_000_000;
    let _: () = c.set("solid_jobs:fence", ahead).unwrap();
    store.enqueue(&mut c, "default", &[env(9).encode()]).unwrap();
    let third = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap();
    assert_eq!(third.jobs[0].token, ahead + 1);
    // The stored field is the token's exact decimal form (settles name it so).
    let fields: Vec<String> = c.hkeys("solid_jobs:claims:n1").unwrap();
    assert!(fields.contains(&third.jobs[0].token.to_string()), "{fields:?}");
}

#[test]
fn a_completion_batch_resent_after_its_reply_was_lost_is_recognised_as_applied() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.enqueue(&mut c, "default", &(0..3).map(|i| env(i).encode()).collect::<Vec<_>>()).unwrap();
    register(&store, &mut c, "n1");
    let batch = store.claim(&mut c, "n1", &["default"], 3, now_ms()).unwrap();
    let done: Vec<(u64, String)> = batch.jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect();
    // One claim was recovered meanwhile: that completion is stale.
    let _: () = c.hdel("solid_jobs:claims:n1", done[1].0).unwrap();
    assert_eq!(store.ack_resendable(&mut c, "n1", &done).unwrap(), vec![done[1].0]);
    // The same batch again (its reply was lost): the same answer, nothing counted twice.
    assert_eq!(store.ack_resendable(&mut c, "n1", &done).unwrap(), vec![done[1].0]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 2);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:stale").unwrap(), 1);
    // A different batch naming completed claims is stale, as before.
    assert_eq!(store.ack_resendable(&mut c, "n1", &done[..1]).unwrap(), vec![done[0].0]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:stale").unwrap(), 2);
    // A plain ack (the adapter API: a caller may ack twice) knows no resends.
    assert_eq!(store.ack(&mut c, "n1", &done[..1]).unwrap(), vec![done[0].0]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:stale").unwrap(), 3);
}

#[test]
fn the_incarnation_changes_only_when_the_namespace_is_lost() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let first = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap().incarnation;
    assert!(!first.is_empty());
    let again = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap().incarnation;
    assert_eq!(first, again);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let after = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap().incarnation;
    assert_ne!(first, after);
}

#[test]
fn a_failure_resent_after_its_reply_was_lost_is_counted_once() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env(1);
    store.enqueue(&mut c, "default", &[e.encode()]).unwrap();
    register(&store, &mut c, "n1");
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    let first = store.record_failure(&mut c, "n1", job.token, &e.id, "RuntimeError", "boom").unwrap();
    let recorded = c.hget::<_, _, String>("solid_jobs:attempts", &e.id).unwrap();
    let again = store.record_failure(&mut c, "n1", job.token, &e.id, "RuntimeError", "boom").unwrap();
    assert_eq!((first.failures, again.failures), (1, 1));
    // The resend rewrote nothing: the record keeps the first failure's
    // time on Redis' clock.
    assert_eq!(c.hget::<_, _, String>("solid_jobs:attempts", &e.id).unwrap(), recorded);
    // Each reply moves that time onto this node's clock through the
    // reply's own Redis time, so two replies agree to within the
    // milliseconds their round trips took, not exactly.
    assert!(
        first.first_failure_ms.abs_diff(again.first_failure_ms) < 1_000,
        "{} vs {}",
        first.first_failure_ms,
        again.first_failure_ms
    );
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:failed").unwrap(), 1);
}
