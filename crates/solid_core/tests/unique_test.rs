//! Unique jobs' locks against a real Redis, at the script level: the lock
//! is written with the job and follows it through retry, recovery and
//! stale settles; only the job's own transitions release it
//! (docs/unique.md).

mod support;

use redis::Commands;
use serde_json::json;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::{Requeue, Store, ARCHIVE_MAX_AGE};
use solid_core::unique::{lock_hex, meta, Mode};
use solid_core::{now_ms, Envelope};
use support::RedisServer;

/// The default archive_max_age, as a producer without configuration sends it.
const AGE: u64 = ARCHIVE_MAX_AGE.as_millis() as u64;

fn unique_job(key: &str, mode: Mode) -> (String, Envelope) {
    let hex = lock_hex("Sync", &json!(key));
    let env = Envelope::build("Sync", json!([key]), "default", 3, now_ms(), now_ms())
        .unwrap()
        .with_meta(meta(&hex, mode))
        .unwrap();
    (hex, env)
}

fn lock(c: &mut redis::Connection, hex: &str) -> Option<String> {
    c.get(format!("solid_jobs:unique:{hex}")).unwrap()
}

#[test]
fn a_duplicate_gets_the_holders_id_and_a_batch_dedupes_within_itself() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let (hex, first) = unique_job("a", Mode::Running);
    assert_eq!(
        store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), first.clone())]).unwrap(),
        vec![first.id.clone()]
    );
    let (_, again) = unique_job("a", Mode::Running);
    let (hex_b, b1) = unique_job("b", Mode::Running);
    let (_, b2) = unique_job("b", Mode::Running);
    let ids = store
        .enqueue_unique(
            &mut c,
            "default",
            None,
            0,
            AGE,
            &[(hex.clone(), again), (hex_b.clone(), b1.clone()), (hex_b, b2)],
        )
        .unwrap();
    assert_eq!(ids, vec![first.id.clone(), b1.id.clone(), b1.id.clone()]);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 2);
    // The same publication sent again (a lost reply) is its own id, written once.
    assert_eq!(store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex, first.clone())]).unwrap(), vec![first.id]);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:default").unwrap(), 2);
}

#[test]
fn the_lock_follows_a_retry_and_a_recovery_and_a_stale_ack_does_not_release_it() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let (hex, env) = unique_job("r", Mode::Running);
    store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), env.clone())]).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    assert_eq!(lock(&mut c, &hex), Some(env.id.clone()), ":running keeps the lock at claim");

    store.retry(&mut c, "n1", &job, now_ms()).unwrap();
    assert_eq!(lock(&mut c, &hex), Some(env.id.clone()), "kept across the retry");
    store.promote(&mut c, 10).unwrap();
    let again = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    assert_eq!(again.envelope.meta, env.meta, "the retried envelope still names its lock");

    // The node goes away: its claim is requeued with the lock.
    store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap();
    assert_eq!(lock(&mut c, &hex), Some(env.id.clone()), "kept through recovery");
    // The old claim's ack arrives late: stale, and the lock stays.
    assert_eq!(store.ack(&mut c, "n1", &[(again.token, env.id.clone())]).unwrap(), vec![again.token]);
    assert_eq!(lock(&mut c, &hex), Some(env.id.clone()), "a stale ack releases nothing");

    store.heartbeat(&mut c, "n2", 60_000, "{}", &["default"], 0).unwrap();
    let rerun = store.claim(&mut c, "n2", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    assert!(store.ack(&mut c, "n2", &[(rerun.token, env.id.clone())]).unwrap().is_empty());
    assert_eq!(lock(&mut c, &hex), None, "released at the ack of the run that counted");
}

#[test]
fn queued_releases_at_claim_and_a_plain_claim_is_untouched() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    let (hex, env) = unique_job("q", Mode::Queued);
    store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), env.clone())]).unwrap();
    // A plain job whose arguments mimic the marker: a forged marker in the
    // arguments is not the envelope's end, so nothing reads it.
    let forged = format!(r#"{{"unique":{{"lock":"{hex}","while":"queued"}}}}"#);
    let plain = Envelope::build("Plain", json!([forged]), "default", 3, now_ms(), now_ms()).unwrap();
    store.enqueue(&mut c, "default", &[plain.encode()]).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    let first = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    assert_eq!(first.envelope.id, env.id);
    assert_eq!(lock(&mut c, &hex), None, ":queued is released when claimed");
    let (_, next) = unique_job("q", Mode::Queued);
    store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), next.clone())]).unwrap();
    store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap();
    assert_eq!(lock(&mut c, &hex), Some(next.id.clone()), "the plain job's claim left the new lock alone");
    assert!(store.ack(&mut c, "n1", &[(first.token, env.id.clone())]).unwrap().is_empty());
    assert_eq!(lock(&mut c, &hex), Some(next.id), "the first job's ack does not free its successor's lock");
}

#[test]
fn give_up_releases_except_until_done_in_the_archive() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    for (key, mode, archive, kept) in
        [("g1", Mode::Running, true, false), ("g2", Mode::UntilDone, true, true), ("g3", Mode::UntilDone, false, false)]
    {
        let (hex, env) = unique_job(key, mode);
        store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), env.clone())]).unwrap();
        store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
        let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
        let record = json!({"id": env.id, "raw": job.raw, "channel": "default", "reason": "test"});
        store.discard(&mut c, "n1", Some(job.token), &env.id, &record, archive).unwrap();
        assert_eq!(lock(&mut c, &hex).is_some(), kept, "{key}: {mode:?}, archive {archive}");
        if kept {
            let (_, dup) = unique_job(key, mode);
            let ids = store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), dup)]).unwrap();
            assert_eq!(ids, vec![env.id.clone()], "the archived :until_done job answers duplicates");
            assert!(store.forget_archived(&mut c, &env.id).unwrap());
            assert_eq!(lock(&mut c, &hex), None, "forgotten with its archive entry");
        }
    }
}

#[test]
fn an_archived_until_done_holder_stops_counting_at_archive_max_age_without_a_trim() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let mut store = Store::new(Keyspace::default());
    let (hex, env) = unique_job("aged", Mode::UntilDone);
    store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), env.clone())]).unwrap();
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["default"], 0).unwrap();
    let job = store.claim(&mut c, "n1", &["default"], 1, now_ms()).unwrap().jobs.remove(0);
    let record = json!({"id": env.id, "raw": job.raw, "channel": "default", "reason": "test"});
    store.discard(&mut c, "n1", Some(job.token), &env.id, &record, true).unwrap();
    let (_, young) = unique_job("aged", Mode::UntilDone);
    assert_eq!(
        store.enqueue_unique(&mut c, "default", None, 0, AGE, &[(hex.clone(), young)]).unwrap(),
        vec![env.id.clone()],
        "younger than archive_max_age: the archived job answers"
    );
    // Redis' clock moves past a 50 ms archive_max_age; no discard runs, so
    // nothing trims the archive entry.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let (_, b1) = unique_job("aged", Mode::UntilDone);
    let (_, b2) = unique_job("aged", Mode::UntilDone);
    let ids =
        store.enqueue_unique(&mut c, "default", None, 0, 50, &[(hex.clone(), b1.clone()), (hex.clone(), b2)]).unwrap();
    assert_eq!(ids, vec![b1.id.clone(), b1.id.clone()], "taken over once; the batch's second entry is b1's duplicate");
    assert_eq!(lock(&mut c, &hex), Some(b1.id.clone()));
    assert!(
        c.zscore::<_, _, Option<f64>>("solid_jobs:archive", &env.id).unwrap().is_some(),
        "the entry was not trimmed"
    );
    // A later discard trims the stale entry: its lock release is
    // compare-and-delete, so the successor's lock stays.
    store.archive.max_age_ms = 50;
    let (other_hex, other) = unique_job("other", Mode::UntilDone);
    store.enqueue_unique(&mut c, "default", None, 0, 50, &[(other_hex, other.clone())]).unwrap();
    let claimed = store.claim(&mut c, "n1", &["default"], 2, now_ms()).unwrap().jobs;
    let job = claimed.into_iter().find(|j| j.envelope.id == other.id).unwrap();
    let record = json!({"id": other.id, "raw": job.raw, "channel": "default", "reason": "test"});
    store.discard(&mut c, "n1", Some(job.token), &other.id, &record, true).unwrap();
    assert!(c.zscore::<_, _, Option<f64>>("solid_jobs:archive", &env.id).unwrap().is_none(), "trimmed by age");
    assert_eq!(lock(&mut c, &hex), Some(b1.id), "the trim left the lock its successor took");
}
