//! Redis out of memory (`maxmemory` reached, `noeviction`) against a real
//! Redis: the scripts that keep a node alive and drain work still run,
//! those that add work are refused with `Error::OutOfMemory` and write
//! nothing.

mod support;

use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Requeue, Store};
use solid_core::{now_ms, Envelope};
use support::RedisServer;

fn env(n: i64) -> Envelope {
    Envelope::build("Foo", json!([n]), "default", 3, now_ms(), now_ms()).unwrap()
}

fn set_maxmemory(c: &mut redis::Connection, bytes: u64) {
    redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(bytes).query::<()>(c).unwrap();
}

#[test]
fn a_node_heartbeats_claims_settles_promotes_and_recovers_while_redis_is_out_of_memory() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..6).map(|i| env(i).encode()).collect();
    store.enqueue(&mut c, "default", &envs).unwrap();
    store.schedule(&mut c, "default", now_ms() + 300, &[env(6).encode()]).unwrap();
    let held = store.hold(&mut c, "default", None, now_ms() + 60_000, &[env(7).encode()]).unwrap();
    // A node that claims one job and dies (its key lives 1 ms).
    store.heartbeat(&mut c, "dead", 1, "{}", &["default"], 0).unwrap();
    // Wall time: the dead node's 1 ms key expires on Redis' clock.
    std::thread::sleep(Duration::from_millis(5));
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert_eq!(store.claim(&mut c, "n1", &["default"], 1, 1).unwrap().jobs.len(), 1);
    let _: () = c.rename("solid_jobs:claims:n1", "solid_jobs:claims:dead").unwrap();

    // Any used memory is above a 1-byte limit: Redis is out of memory.
    set_maxmemory(&mut c, 1);

    // Producers are refused, clearly, and nothing is written.
    let refused = store.enqueue(&mut c, "default", &[env(8).encode()]).unwrap_err();
    assert!(refused.is_out_of_memory(), "{refused:?}");
    assert!(refused.to_string().contains("OOM"), "{refused}");
    assert!(store.schedule(&mut c, "default", now_ms() + 60_000, &[env(9).encode()]).unwrap_err().is_out_of_memory());
    assert!(store
        .hold(&mut c, "default", None, now_ms() + 60_000, &[env(10).encode()])
        .unwrap_err()
        .is_out_of_memory());
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 5);
    assert_eq!(c.zcard::<_, i64>("solid_jobs:planned").unwrap(), 1);

    // The node's heartbeat refreshes its key (it starts with a SET) and
    // finds the dead node; recovery moves the dead node's claim back.
    let beat = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert_eq!(beat.dead, vec!["dead".to_string()]);
    assert!(c.pttl::<_, i64>("solid_jobs:node:n1").unwrap() > 50_000);
    assert_eq!(store.recover_node(&mut c, "dead").unwrap().map(|jobs| jobs.len()), Some(1));
    // Promotion and lifting the publication barrier still move jobs on.
    // Wall time: the job scheduled 300 ms ahead falls due on Redis' clock.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(store.promote(&mut c, 100).unwrap().0, 1);
    assert_eq!(store.release(&mut c, &held).unwrap(), 1);

    // Claims and every settle work: 6 enqueued + 1 promoted + 1 released.
    let batch = store.claim(&mut c, "n1", &["default"], 100, 2).unwrap();
    assert_eq!(batch.jobs.len(), 8);
    let (failing, rest) = batch.jobs.split_at(2);
    let done: Vec<(u64, String)> = rest[..4].iter().map(|j| (j.token, j.envelope.id.clone())).collect();
    assert!(store.ack(&mut c, "n1", &done).unwrap().is_empty());
    assert_eq!(
        store.record_failure(&mut c, "n1", failing[0].token, &failing[0].envelope.id, "E", "m").unwrap().failures,
        1
    );
    store.retry(&mut c, "n1", &failing[0], now_ms() + 60_000).unwrap();
    store.record_failure(&mut c, "n1", failing[1].token, &failing[1].envelope.id, "E", "m").unwrap();
    let record = json!({"id": failing[1].envelope.id, "raw": failing[1].raw});
    store.discard(&mut c, "n1", Some(failing[1].token), &failing[1].envelope.id, &record, true).unwrap();
    // A leaving node hands the rest back.
    assert_eq!(store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap(), Some(2));
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 4);

    // Once memory is available again, producers write again.
    set_maxmemory(&mut c, 0);
    assert_eq!(store.enqueue(&mut c, "default", &[env(11).encode()]).unwrap(), 1);
}
