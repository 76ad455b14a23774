//! The Lua scripts against a real Redis: each state transition, fencing,
//! recovery and promotion.

mod support;

use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Requeue, Store};
use solid_core::{now_ms, Envelope, Error};
use support::RedisServer;

fn env(task: &str, channel: &str, n: i64) -> Envelope {
    Envelope::build(task, json!([n]), channel, 3, now_ms(), now_ms()).unwrap()
}

fn register(store: &Store, c: &mut redis::Connection, node: &str) {
    store.heartbeat(c, node, 60_000, "{}", &["default"], 0).unwrap();
}

#[test]
fn enqueue_claim_ack_round_trip() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..5).map(|i| env("Foo", "default", i).encode()).collect();
    store.enqueue(&mut c, "default", &envs).unwrap();
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 5);
    assert!(c.sismember::<_, _, bool>("solid_jobs:channels", "default").unwrap());

    register(&store, &mut c, "n1");
    let batch = store.claim(&mut c, "n1", &["default"], 3, now_ms()).unwrap();
    assert_eq!(batch.jobs.len(), 3);
    // FIFO: the first enqueued is the first claimed.
    assert_eq!(batch.jobs[0].raw, envs[0]);
    let tokens: Vec<u64> = batch.jobs.iter().map(|j| j.token).collect();
    assert!(tokens.windows(2).all(|w| w[1] == w[0] + 1), "{tokens:?}");
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 3);

    let done: Vec<(u64, String)> = batch.jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect();
    assert!(store.ack(&mut c, "n1", &done).unwrap().is_empty());
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 0);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 3);
    // Acking twice is stale and changes nothing.
    assert_eq!(store.ack(&mut c, "n1", &done[..1]).unwrap(), vec![tokens[0]]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 3);
}

/// Decision 51: `ack_claim.lua` completes, then claims, in one call, each
/// half fenced as on its own; a resent batch (its first attempt applied,
/// the reply lost) is recognised, and the claim half still claims; a
/// refused claim (the node expired) keeps the completions it applied.
#[test]
fn ack_claim_completes_then_claims_each_half_as_alone() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..4).map(|i| env("Foo", "default", i).encode()).collect();
    store.enqueue(&mut c, "default", &envs).unwrap();
    register(&store, &mut c, "n1");
    let first = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap();
    let done: Vec<(u64, String)> = first.jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect();

    let (stale, claimed) = store.ack_claim(&mut c, "n1", &done, &["default"], 1, now_ms()).unwrap();
    assert!(stale.is_empty());
    let second = claimed.unwrap();
    assert_eq!(second.jobs[0].raw, envs[1], "FIFO");
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 1);
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 1, "the first completed, the second claimed");

    // The same batch again, as after a lost reply: applied, not stale, and
    // the claim half claims as usual.
    let (stale, claimed) = store.ack_claim(&mut c, "n1", &done, &["default"], 1, now_ms()).unwrap();
    assert!(stale.is_empty(), "a resent batch is recognised, not stale");
    assert_eq!(claimed.unwrap().jobs[0].raw, envs[2]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 1, "nothing completed twice");

    // A token no longer held is stale, the rest completes.
    let mixed = vec![(second.jobs[0].token, second.jobs[0].envelope.id.clone()), (1, "gone".to_owned())];
    let (stale, _) = store.ack_claim(&mut c, "n1", &mixed, &["default"], 0, now_ms()).unwrap();
    assert_eq!(stale, vec![1]);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 2);

    // Nothing to complete: a claim alone.
    let (stale, claimed) = store.ack_claim(&mut c, "n1", &[], &["default"], 1, now_ms()).unwrap();
    assert!(stale.is_empty());
    assert_eq!(claimed.unwrap().jobs[0].raw, envs[3]);

    // The node expired: the claim is refused, the completions apply.
    let held: Vec<(u64, String)> = c
        .hgetall::<_, std::collections::HashMap<u64, String>>("solid_jobs:claims:n1")
        .unwrap()
        .into_iter()
        .map(|(token, rec)| (token, Envelope::decode(rec.splitn(3, '|').nth(2).unwrap()).unwrap().id))
        .collect();
    assert_eq!(held.len(), 2);
    let _: () = c.del("solid_jobs:node:n1").unwrap();
    let (stale, claimed) = store.ack_claim(&mut c, "n1", &held, &["default"], 1, now_ms()).unwrap();
    assert!(stale.is_empty());
    assert!(matches!(&claimed, Err(Error::Redis(m)) if m.contains("NODE_EXPIRED")), "{claimed:?}");
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:processed").unwrap(), 4);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 0);
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 0, "nothing claimed");
}

#[test]
fn claim_visits_channels_in_order_and_requires_a_live_node() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.enqueue(&mut c, "a", &[env("Foo", "a", 1).encode()]).unwrap();
    store.enqueue(&mut c, "b", &[env("Foo", "b", 2).encode(), env("Foo", "b", 3).encode()]).unwrap();
    let err = store.claim(&mut c, "ghost", &["a"], 1, now_ms()).unwrap_err();
    assert!(matches!(&err, Error::Redis(m) if m.contains("NODE_EXPIRED")), "{err:?}");
    register(&store, &mut c, "n1");
    let batch = store.claim(&mut c, "n1", &["b", "a"], 10, now_ms()).unwrap();
    let channels: Vec<&str> = batch.jobs.iter().map(|j| j.channel.as_str()).collect();
    assert_eq!(channels, ["b", "b", "a"]);
}

#[test]
fn malformed_entries_are_reported_for_quarantine() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let _: () = c.lpush("solid_jobs:channel:default", "{not json").unwrap();
    register(&store, &mut c, "n1");
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert!(batch.jobs.is_empty());
    let m = &batch.malformed[0];
    store.quarantine(&mut c, "n1", m.token, &m.channel, &m.raw, &m.reason).unwrap();
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 0);
    let entries: Vec<String> = c.hvals("solid_jobs:archive:entries").unwrap();
    assert_eq!(entries.len(), 1);
    let rec: serde_json::Value = serde_json::from_str(&entries[0]).unwrap();
    assert_eq!(rec["raw"], "{not json");
    assert!(rec["reason"].as_str().unwrap().contains("invalid envelope"));
}

#[test]
fn failure_retry_and_discard_are_fenced() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env("Foo", "default", 1);
    store.enqueue(&mut c, "default", &[e.encode()]).unwrap();
    register(&store, &mut c, "n1");
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    let f = store.record_failure(&mut c, "n1", job.token, &e.id, "RuntimeError", "boom").unwrap();
    assert_eq!(f.failures, 1);
    let due = now_ms() + 60_000;
    store.retry(&mut c, "n1", &job, due).unwrap();
    assert_eq!(c.zcard::<_, i64>("solid_jobs:retrying").unwrap(), 1);
    // The same retry resent (its reply lost) is recognised as done and
    // writes nothing; any other settle of that claim is stale.
    store.retry(&mut c, "n1", &job, due).unwrap();
    assert_eq!(c.zcard::<_, i64>("solid_jobs:retrying").unwrap(), 1);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:retried").unwrap(), 1, "the resend is not counted again");
    assert_eq!(
        store.record_failure(&mut c, "n1", job.token, &e.id, "X", "y").unwrap_err(),
        Error::StaleClaim(job.token)
    );
    assert_eq!(
        store.discard(&mut c, "n1", Some(job.token), &e.id, &json!({}), true).unwrap_err(),
        Error::StaleClaim(job.token)
    );
    assert_eq!(c.zcard::<_, i64>("solid_jobs:retrying").unwrap(), 1);
    assert_eq!(c.zcard::<_, i64>("solid_jobs:archive").unwrap(), 0);

    // Move the retry to "now", promote, claim again: the failure count carries over.
    let members: Vec<String> = c.zrange("solid_jobs:retrying", 0, -1).unwrap();
    let _: () = c.zadd("solid_jobs:retrying", &members[0], 0).unwrap();
    let (moved, next) = store.promote(&mut c, 100).unwrap();
    assert_eq!((moved, next), (1, None));
    let job2 = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    assert_eq!(job2.envelope.id, e.id);
    assert_eq!(job2.envelope.queued_ms, due);
    assert!(job2.token > job.token);
    let f = store.record_failure(&mut c, "n1", job2.token, &e.id, "RuntimeError", "boom").unwrap();
    assert_eq!(f.failures, 2);
    let rec = json!({"id": e.id, "reason": "failed"});
    store.discard(&mut c, "n1", Some(job2.token), &e.id, &rec, true).unwrap();
    assert_eq!(c.zcard::<_, i64>("solid_jobs:archive").unwrap(), 1);
    assert!(!c.hexists::<_, _, bool>("solid_jobs:attempts", &e.id).unwrap());
    // Resent: done already. A retry of the discarded claim: stale.
    store.discard(&mut c, "n1", Some(job2.token), &e.id, &rec, true).unwrap();
    assert_eq!(c.zcard::<_, i64>("solid_jobs:archive").unwrap(), 1);
    assert_eq!(store.retry(&mut c, "n1", &job2, due).unwrap_err(), Error::StaleClaim(job2.token));
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:retried").unwrap(), 1, "a stale retry counts nothing");
}

#[test]
fn unknown_task_attempts_are_counted_apart_from_failures() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env("Foo", "default", 1);
    store.enqueue(&mut c, "default", &[e.encode()]).unwrap();
    register(&store, &mut c, "n1");
    let attempts = |c: &mut redis::Connection| -> serde_json::Value {
        serde_json::from_str(&c.hget::<_, _, String>("solid_jobs:attempts", &e.id).unwrap()).unwrap()
    };
    // A real failure first, then two attempts on a worker without the task.
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    let f = store.record_failure(&mut c, "n1", job.token, &e.id, "RuntimeError", "boom").unwrap();
    assert_eq!(f.failures, 1);
    store.retry(&mut c, "n1", &job, 0).unwrap();
    let mut first_unknown = 0;
    for n in 1..=2 {
        assert_eq!(store.promote(&mut c, 100).unwrap().0, 1);
        let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
        let u = store.record_unknown(&mut c, "n1", job.token, &e.id, "SolidJobs::UnknownTaskError", "unknown").unwrap();
        assert_eq!(u.failures, n, "the unknown attempts are counted");
        if n == 1 {
            first_unknown = u.first_failure_ms;
        }
        // Redis records the time; the store reports it on this process's
        // clock (now minus the age Redis measured), so two reports of the
        // same instant may differ by the milliseconds between the readings.
        assert!(u.first_failure_ms.abs_diff(first_unknown) <= 50, "timed from the first unknown attempt");
        let rec = attempts(&mut c);
        assert_eq!(rec["failures"], 1, "the task's own failures are left as they were: {rec}");
        assert_eq!(rec["unknown"], n);
        assert_eq!(rec["error_class"], "SolidJobs::UnknownTaskError");
        store.retry(&mut c, "n1", &job, 0).unwrap();
    }
    // The task is known again and fails: its count goes on from its own
    // failures, and the unknown count is gone.
    assert_eq!(store.promote(&mut c, 100).unwrap().0, 1);
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    let f = store.record_failure(&mut c, "n1", job.token, &e.id, "RuntimeError", "boom").unwrap();
    assert_eq!(f.failures, 2);
    assert!(attempts(&mut c).get("unknown").is_none());
    // Fenced like a failure: once settled, the claim is stale and nothing is written.
    store.retry(&mut c, "n1", &job, 0).unwrap();
    assert_eq!(
        store.record_unknown(&mut c, "n1", job.token, &e.id, "X", "y").unwrap_err(),
        Error::StaleClaim(job.token)
    );
    assert_eq!(attempts(&mut c)["failures"], 2);
}

#[test]
fn archive_is_capped_by_count() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let mut store = Store::new(Keyspace::default());
    store.archive.max_entries = 3;
    for i in 0..5 {
        let id = format!("id-{i}");
        store.discard(&mut c, "n1", None, &id, &json!({"id": id}), true).unwrap();
    }
    let ids: Vec<String> = c.zrange("solid_jobs:archive", 0, -1).unwrap();
    assert_eq!(ids, ["id-2", "id-3", "id-4"]);
    assert_eq!(c.hlen::<_, i64>("solid_jobs:archive:entries").unwrap(), 3);
}

#[test]
fn schedule_and_promote_only_due_jobs() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let now = now_ms();
    store.schedule(&mut c, "default", now - 1, &[env("Foo", "default", 1).encode()]).unwrap();
    store.schedule(&mut c, "default", now + 600_000, &[env("Foo", "default", 2).encode()]).unwrap();
    let (moved, next) = store.promote(&mut c, 100).unwrap();
    assert_eq!(moved, 1);
    // A delay counted on Redis' clock: about the 600 s asked for.
    let next = next.expect("a job is still planned");
    assert!(next > Duration::from_secs(590) && next <= Duration::from_secs(600), "{next:?}");
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
}

#[test]
fn recovery_requeues_a_dead_nodes_claims_at_the_head_exactly_once() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..4).map(|i| env("Foo", "default", i).encode()).collect();
    store.enqueue(&mut c, "default", &envs).unwrap();
    register(&store, &mut c, "dead");
    let claimed = store.claim(&mut c, "dead", &["default"], 3, now_ms()).unwrap();
    // Alive: recovery refuses.
    assert_eq!(store.requeue(&mut c, "dead", Requeue::Recover).unwrap(), None);
    let _: () = c.del("solid_jobs:node:dead").unwrap();
    // Several scanners at once: exactly one moves the claims.
    let url = redis.url();
    let results: Vec<Option<u64>> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                Store::new(Keyspace::default()).requeue(&mut c, "dead", Requeue::Recover).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let total: u64 = results.iter().map(|r| r.unwrap_or(0)).sum();
    assert_eq!(total, 3, "{results:?}");
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 4);
    assert!(!c.sismember::<_, _, bool>("solid_jobs:nodes", "dead").unwrap());
    // The recovered jobs are next, in their original order, then the unclaimed one.
    register(&store, &mut c, "n2");
    let again = store.claim(&mut c, "n2", &["default"], 4, now_ms()).unwrap();
    let order: Vec<&str> = again.jobs.iter().map(|j| j.raw.as_str()).collect();
    assert_eq!(order, [envs[0].as_str(), &envs[1], &envs[2], &envs[3]]);
    // The dead node's late completion is stale.
    let done: Vec<(u64, String)> = claimed.jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect();
    assert_eq!(store.ack(&mut c, "dead", &done).unwrap().len(), 3);
}

#[test]
fn heartbeat_reports_ready_work_and_dead_nodes() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let hb = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert!(!hb.ready && hb.dead.is_empty());
    store.enqueue(&mut c, "default", &[env("Foo", "default", 1).encode()]).unwrap();
    let _: () = c.sadd("solid_jobs:nodes", "gone").unwrap();
    let hb = store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    assert!(hb.ready);
    assert_eq!(hb.dead, ["gone"]);
    let ttl: i64 = c.pttl("solid_jobs:node:n1").unwrap();
    assert!(ttl > 50_000 && ttl <= 60_000);
}

#[test]
fn node_health_reads_each_nodes_ttl_and_description_on_redis_clock() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let empty = store.node_health(&mut c, 10).unwrap();
    assert_eq!((empty.registered, empty.nodes.len()), (0, 0));
    store.heartbeat(&mut c, "n1", 60_000, r#"{"hostname":"h"}"#, &["default"], 0).unwrap();
    let _: () = c.sadd("solid_jobs:nodes", "gone").unwrap();
    let (time, _): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let h = store.node_health(&mut c, 10).unwrap();
    assert!(h.now_ms / 1000 >= time && h.now_ms / 1000 <= time + 1, "Redis' clock: {} vs TIME {time}", h.now_ms);
    assert_eq!(h.registered, 2);
    let mut nodes = h.nodes;
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(nodes[0].id, "gone");
    assert_eq!((nodes[0].ttl_ms, nodes[0].description.as_deref()), (-2, None));
    assert_eq!(nodes[1].id, "n1");
    assert!(nodes[1].ttl_ms > 50_000 && nodes[1].ttl_ms <= 60_000);
    assert_eq!(nodes[1].description.as_deref(), Some(r#"{"hostname":"h"}"#));
    // The limit bounds the list, not the count.
    let limited = store.node_health(&mut c, 1).unwrap();
    assert_eq!((limited.registered, limited.nodes.len()), (2, 1));
}

#[test]
fn release_requeues_only_the_claims_of_one_stamp() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let envs: Vec<String> = (0..4).map(|i| env("Foo", "default", i).encode()).collect();
    store.enqueue(&mut c, "default", &envs).unwrap();
    register(&store, &mut c, "n1");
    let kept = store.claim(&mut c, "n1", &["default"], 1, 1000).unwrap();
    let lost = store.claim(&mut c, "n1", &["default"], 2, 1001).unwrap();
    assert_eq!((kept.jobs.len(), lost.jobs.len()), (1, 2));
    assert_eq!(store.requeue(&mut c, "n1", Requeue::Release { stamp: 1001 }).unwrap(), Some(2));
    assert_eq!(c.hlen::<_, i64>("solid_jobs:claims:n1").unwrap(), 1);
    assert!(c.sismember::<_, _, bool>("solid_jobs:nodes", "n1").unwrap(), "the node stays registered");
    // Released at the head, in their original order, before the unclaimed one.
    let again = store.claim(&mut c, "n1", &["default"], 3, 1002).unwrap();
    let order: Vec<&str> = again.jobs.iter().map(|j| j.raw.as_str()).collect();
    assert_eq!(order, [envs[1].as_str(), &envs[2], &envs[3]]);
}

#[test]
fn unarchive_puts_a_job_back_once_with_a_fresh_queue_time() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let e = env("Foo", "critical", 7);
    let old = e.encode();
    store.discard(&mut c, "n1", None, &e.id, &json!({"id": e.id, "raw": old, "reason": "test"}), true).unwrap();
    assert!(store.unarchive(&mut c, &e.id).unwrap());
    assert!(!store.unarchive(&mut c, &e.id).unwrap(), "only once");
    assert_eq!(c.zcard::<_, i64>("solid_jobs:archive").unwrap(), 0);
    let raw: String = c.lindex("solid_jobs:channel:critical", 0).unwrap();
    let back = Envelope::decode(&raw).unwrap();
    assert_eq!((back.id.as_str(), &back.arguments), (e.id.as_str(), &json!([7])));
    assert!(back.queued_ms >= e.queued_ms);
    // A quarantined entry that never decoded cannot be re-enqueued.
    store.discard(&mut c, "n1", None, "bad", &json!({"id": "bad", "raw": "{nope"}), true).unwrap();
    assert!(matches!(store.unarchive(&mut c, "bad"), Err(Error::Envelope(_))));
}

#[test]
fn the_job_index_deduplicates_finds_and_cancels() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let (a, b) = (env("Foo", "default", 1), env("Foo", "default", 2));
    assert_eq!(store.enqueue(&mut c, "default", &[a.encode(), b.encode()]).unwrap(), 2);
    assert_eq!(store.enqueue(&mut c, "default", &[a.encode()]).unwrap(), 0, "a live id is not enqueued twice");
    let d = env("Foo", "default", 4);
    assert_eq!(
        store.enqueue(&mut c, "default", &[b.encode(), d.encode(), d.encode()]).unwrap(),
        1,
        "live and repeated ids in one batch are skipped"
    );
    assert_eq!(
        store.schedule(&mut c, "default", now_ms() + 60_000, &[d.encode(), a.encode()]).unwrap(),
        0,
        "a batch of live ids plans nothing"
    );
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 3);
    c.lrem::<_, _, i64>("solid_jobs:channel:default", 0, d.encode()).unwrap();
    c.hdel::<_, _, i64>("solid_jobs:jobs", &d.id).unwrap();
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 2);
    assert_eq!(store.job_state(&mut c, &a.id).unwrap().unwrap().state, "ready");

    // Cancel b while it waits; the claim drops it and takes a only.
    assert!(store.cancel(&mut c, &b.id).unwrap());
    assert!(!store.cancel(&mut c, &b.id).unwrap());
    register(&store, &mut c, "n1");
    let batch = store.claim(&mut c, "n1", &["default"], 10, now_ms()).unwrap();
    assert_eq!(batch.jobs.len(), 1);
    assert_eq!(batch.jobs[0].envelope.id, a.id);
    assert_eq!(c.get::<_, i64>("solid_jobs:metric:cancelled").unwrap(), 1);
    assert_eq!(store.job_state(&mut c, &b.id).unwrap(), None, "a dropped cancelled job is forgotten");

    // Claimed: found with its envelope, and not cancellable.
    let claimed = store.job_state(&mut c, &a.id).unwrap().unwrap();
    assert_eq!((claimed.state.as_str(), claimed.envelope.as_deref()), ("claimed", Some(a.encode().as_str())));
    assert_eq!(store.cancel(&mut c, &a.id), Err(Error::JobRunning(a.id.clone())));
    store.ack(&mut c, "n1", &[(batch.jobs[0].token, a.id.clone())]).unwrap();
    assert_eq!(store.job_state(&mut c, &a.id).unwrap(), None, "completed jobs leave the index");
    assert_eq!(
        store.enqueue(&mut c, "default", &[a.encode()]).unwrap(),
        1,
        "deduplication lasts while the job is live"
    );

    // Planned jobs can be cancelled too; promotion drops them.
    let p = env("Foo", "default", 3);
    store.schedule(&mut c, "default", now_ms() - 1, &[p.encode()]).unwrap();
    assert_eq!(store.job_state(&mut c, &p.id).unwrap().unwrap().state, "planned");
    assert!(store.cancel(&mut c, &p.id).unwrap());
    assert_eq!(store.promote(&mut c, 10).unwrap().0, 0);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
}

#[test]
fn index_lookups_match_ids_exactly_and_unarchive_respects_a_live_id() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let waiting = env("Foo", "default", 1);
    // A running job whose arguments mention the waiting job's id.
    let mentions = Envelope::build("Foo", json!([{"id": waiting.id}]), "default", 3, now_ms(), now_ms()).unwrap();
    store.enqueue(&mut c, "default", &[mentions.encode()]).unwrap();
    register(&store, &mut c, "n1");
    let running = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    store.enqueue(&mut c, "default", &[waiting.encode()]).unwrap();
    assert_eq!(store.job_state(&mut c, &waiting.id).unwrap().unwrap().state, "ready");
    assert!(store.cancel(&mut c, &waiting.id).unwrap(), "a mention in another job's arguments is not a claim");
    let found = store.job_state(&mut c, &mentions.id).unwrap().unwrap();
    assert_eq!((found.state.as_str(), found.envelope.as_deref()), ("claimed", Some(running.raw.as_str())));

    // A dropped cancelled job leaves no failure record behind.
    let _: () = c.hset("solid_jobs:attempts", &waiting.id, r#"{"failures":2}"#).unwrap();
    assert!(store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.is_empty());
    assert!(!c.hexists::<_, _, bool>("solid_jobs:attempts", &waiting.id).unwrap());

    // Unarchiving while a job with the same id is live changes nothing.
    let again = env("Foo", "default", 2);
    store.discard(&mut c, "n1", None, &again.id, &json!({"id": again.id, "raw": again.encode()}), true).unwrap();
    store.enqueue(&mut c, "default", &[again.encode()]).unwrap();
    assert!(!store.unarchive(&mut c, &again.id).unwrap());
    assert_eq!(c.zcard::<_, i64>("solid_jobs:archive").unwrap(), 1, "the archive entry stays");
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 1);
}

/// Calls per command so far, from `INFO commandstats` (commands a script
/// runs included).
fn command_calls(c: &mut redis::Connection) -> std::collections::HashMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// Issue 19: a heartbeat looks for the dead by deadline, not by asking
/// after every registered node, so its commands do not grow with the
/// cluster; a node whose key expired is still reported, and its deadline
/// goes with its recovery.
#[test]
fn a_heartbeat_costs_the_same_with_200_nodes_and_still_finds_the_dead() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let beat_cost = |c: &mut redis::Connection, store: &Store| {
        let before = command_calls(c);
        let beat = store.heartbeat(c, "n0", 60_000, "{}", &["default"], 0).unwrap();
        let after = command_calls(c);
        let delta = |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
        let total: u64 = after.keys().map(|k| delta(k)).sum::<u64>() - delta("info");
        (beat, delta("exists"), total)
    };
    register(&store, &mut c, "n0");
    register(&store, &mut c, "n1");
    let (_, exists_alone, total_alone) = beat_cost(&mut c, &store);
    for i in 2..200 {
        register(&store, &mut c, &format!("n{i}"));
    }
    store.heartbeat(&mut c, "short", 100, "{}", &["default"], 0).unwrap();
    let (beat, exists, total) = beat_cost(&mut c, &store);
    assert!(beat.dead.is_empty(), "{:?}", beat.dead);
    assert_eq!((exists, total), (exists_alone, total_alone), "two nodes or 201: the same commands");
    assert_eq!(exists, 0, "no node is asked after while none is overdue");

    // Wall time: the short node's 100 ms key expires on Redis' clock.
    std::thread::sleep(Duration::from_millis(150));
    let (beat, _, _) = beat_cost(&mut c, &store);
    assert_eq!(beat.dead, vec!["short".to_owned()], "its key expired: reported");
    assert!(store.recover_node(&mut c, "short").unwrap().is_some());
    let score: Option<f64> = c.zscore("solid_jobs:node_deadlines", "short").unwrap();
    assert_eq!(score, None, "its deadline went with its registration");
    assert!(beat_cost(&mut c, &store).0.dead.is_empty());
}

/// A node registered without a deadline (by a version before them, or a
/// ZADD a Redis lost) is found by the two registered nodes each beat
/// samples.
#[test]
fn a_dead_node_without_a_deadline_is_found_by_sampling() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    for node in ["n0", "n1", "n2"] {
        register(&store, &mut c, node);
    }
    let _: () = c.sadd("solid_jobs:nodes", "legacy").unwrap();
    // 2 of 4 sampled per beat: missed 60 times running with odds 2^-60.
    let found = (0..60).any(|_| {
        let beat = store.heartbeat(&mut c, "n0", 60_000, "{}", &["default"], 0).unwrap();
        assert!(beat.dead.iter().all(|d| d == "legacy"), "{:?}", beat.dead);
        !beat.dead.is_empty()
    });
    assert!(found, "the legacy node was never reported");
}

/// More overdue nodes than one beat looks at, none recovered (recovery
/// failing every time): successive beats still report every one of them.
#[test]
fn overdue_nodes_beyond_one_beats_window_are_all_reported_in_turn() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    register(&store, &mut c, "live");
    for i in 0..40 {
        store.heartbeat(&mut c, &format!("gone{i}"), 20, "{}", &["default"], 0).unwrap();
    }
    // Wall time: their 20 ms keys expire on Redis' clock.
    std::thread::sleep(Duration::from_millis(60));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let beat = store.heartbeat(&mut c, "live", 60_000, "{}", &["default"], 0).unwrap();
        assert!(beat.dead.len() <= 16 + 2, "{}", beat.dead.len());
        seen.extend(beat.dead);
        if seen.len() == 40 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(seen.len(), 40, "reported: {seen:?}");
}
