//! Pausing channels (pause.lua, resume.lua and the claim's flow check)
//! against a real Redis.

mod support;

use std::time::Duration;

use redis::Commands;
use serde_json::json;
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::Store;
use solid_core::{now_ms, Envelope};
use support::RedisServer;

fn envs(channel: &str, n: i64) -> Vec<String> {
    (0..n).map(|i| Envelope::build("Foo", json!([i]), channel, 3, now_ms(), now_ms()).unwrap().encode()).collect()
}

fn setup() -> (RedisServer, redis::Connection, Store) {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let store = Store::new(Keyspace::default());
    store.heartbeat(&mut c, "n1", 60_000, "{}", &["a", "b"], 0).unwrap();
    (redis, c, store)
}

#[test]
fn a_paused_channel_is_skipped_by_the_next_claim_and_its_jobs_stay_ready() {
    let (_redis, mut c, store) = setup();
    store.enqueue(&mut c, "a", &envs("a", 3)).unwrap();
    store.enqueue(&mut c, "b", &envs("b", 2)).unwrap();
    assert!(store.pause_channel(&mut c, "a", Some("ops")).unwrap());

    let batch = store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap();
    let channels: Vec<&str> = batch.jobs.iter().map(|j| j.channel.as_str()).collect();
    assert_eq!(channels, ["b", "b"]);
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:a").unwrap(), 3);
    assert_eq!(batch.flow.len(), 1);
    assert_eq!(batch.flow[0].channel, "a");
    assert!(batch.flow[0].paused());
    // Enqueue is still accepted; the job waits with the others.
    store.enqueue(&mut c, "a", &envs("a", 1)).unwrap();
    assert!(store.claim(&mut c, "n1", &["a"], 10, now_ms()).unwrap().jobs.is_empty());
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:a").unwrap(), 4);

    assert!(store.resume_channel(&mut c, "a").unwrap());
    let batch = store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap();
    assert_eq!(batch.jobs.len(), 4);
    // Nothing else recorded for `a`: the flow key is gone, and the claim
    // reply has no trailer again.
    assert!(batch.flow.is_empty());
    assert!(!c.exists::<_, bool>("solid_jobs:flow:a").unwrap());
}

#[test]
fn plain_channels_get_no_trailer() {
    let (_redis, mut c, store) = setup();
    store.enqueue(&mut c, "a", &envs("a", 2)).unwrap();
    let batch = store.claim(&mut c, "n1", &["a", "b"], 10, now_ms()).unwrap();
    assert_eq!(batch.jobs.len(), 2);
    assert!(batch.flow.is_empty());
    assert!(batch.malformed.is_empty());
}

#[test]
fn pausing_twice_keeps_the_first_record_and_resume_says_whether_it_was_paused() {
    let (_redis, mut c, store) = setup();
    assert!(!store.resume_channel(&mut c, "a").unwrap());
    assert!(store.pause_channel(&mut c, "a", Some("alice")).unwrap());
    let first = store.paused_channels(&mut c).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].channel, "a");
    assert_eq!(first[0].by.as_deref(), Some("alice"));
    let redis_now: (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let redis_ms = redis_now.0 * 1000 + redis_now.1 / 1000;
    assert!(first[0].paused_ms <= redis_ms && first[0].paused_ms + 5_000 > redis_ms, "{first:?}");
    // Wall time: a second record would carry a later paused_ms.
    std::thread::sleep(Duration::from_millis(5));
    assert!(!store.pause_channel(&mut c, "a", Some("bob")).unwrap());
    assert_eq!(store.paused_channels(&mut c).unwrap(), first);
    // A channel paused before its first job is listed.
    assert!(c.sismember::<_, _, bool>("solid_jobs:channels", "a").unwrap());
    assert!(store.pause_channel(&mut c, "b", None).unwrap());
    let both = store.paused_channels(&mut c).unwrap();
    assert_eq!(both.iter().map(|p| p.channel.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(both[1].by, None);
    assert!(store.resume_channel(&mut c, "a").unwrap());
    assert!(!store.resume_channel(&mut c, "a").unwrap());
    assert_eq!(store.paused_channels(&mut c).unwrap().len(), 1);
}

#[test]
fn resume_keeps_the_rest_of_the_flow_string() {
    let (_redis, mut c, store) = setup();
    // Bytes 1..10 belong to priority levels (written by prioritized
    // pushes): pause and resume move byte 0 only.
    let _: () = redis::cmd("SETRANGE").arg("solid_jobs:flow:a").arg(3).arg("1").query(&mut c).unwrap();
    store.pause_channel(&mut c, "a", None).unwrap();
    assert_eq!(c.get::<_, Vec<u8>>("solid_jobs:flow:a").unwrap(), b"P\0\x001");
    store.resume_channel(&mut c, "a").unwrap();
    assert_eq!(c.get::<_, Vec<u8>>("solid_jobs:flow:a").unwrap(), b"-\0\x001");
    let batch = store.claim(&mut c, "n1", &["a"], 10, now_ms()).unwrap();
    assert_eq!(batch.flow.len(), 1);
    assert!(!batch.flow[0].paused());
}

#[test]
fn resume_rings_the_doorbell_only_when_the_channel_has_ready_jobs() {
    let (redis, mut c, store) = setup();
    let mut sub = redis.conn();
    let mut pubsub = sub.as_pubsub();
    // `ready` rings on the channel's own doorbell (decision 50); the
    // namespace's is listened to as well, to see that nothing rings there.
    pubsub.subscribe(&["solid_jobs:doorbell", "solid_jobs:doorbell:a"]).unwrap();
    pubsub.set_read_timeout(Some(Duration::from_millis(300))).unwrap();

    store.pause_channel(&mut c, "a", None).unwrap();
    store.resume_channel(&mut c, "a").unwrap();
    assert!(pubsub.get_message().is_err(), "an empty channel's resume rang the doorbell");

    store.pause_channel(&mut c, "a", None).unwrap();
    store.enqueue(&mut c, "a", &envs("a", 1)).unwrap();
    let msg = pubsub.get_message().unwrap();
    // The enqueue's own ring (empty -> non-empty).
    assert_eq!(
        (msg.get_channel_name(), msg.get_payload::<String>().unwrap().as_str()),
        ("solid_jobs:doorbell:a", "ready")
    );
    store.resume_channel(&mut c, "a").unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(
        (msg.get_channel_name(), msg.get_payload::<String>().unwrap().as_str()),
        ("solid_jobs:doorbell:a", "ready")
    );
    assert!(pubsub.get_message().is_err(), "one ring per resume");
}

#[test]
fn invalid_channel_names_are_refused() {
    let (_redis, mut c, store) = setup();
    assert!(store.pause_channel(&mut c, "a:b", None).is_err());
    assert!(store.resume_channel(&mut c, "a,b").is_err());
}

/// Work keeps arriving at a paused channel and stays ready there: a
/// shutdown's requeue of a claimed job, a scheduled job promoted, a retry
/// come due. None of it is claimed until resume.
#[test]
fn requeued_promoted_and_retried_jobs_wait_in_a_paused_channel() {
    use solid_core::redis::store::Requeue;
    let (_redis, mut c, store) = setup();
    store.enqueue(&mut c, "a", &envs("a", 2)).unwrap();
    let claimed = store.claim(&mut c, "n1", &["a"], 2, now_ms()).unwrap();
    assert_eq!(claimed.jobs.len(), 2);
    store.pause_channel(&mut c, "a", None).unwrap();
    // One claim fails and is retried at once; the other is requeued by the
    // node's shutdown.
    store.retry(&mut c, "n1", &claimed.jobs[0], now_ms()).unwrap();
    store.schedule(&mut c, "a", now_ms(), &envs("a", 1)).unwrap();
    // Wall time: the retry and the job due now are past due on Redis' clock.
    std::thread::sleep(Duration::from_millis(5));
    let (promoted, _) = store.promote(&mut c, 100).unwrap();
    assert_eq!(promoted, 2, "the retry and the scheduled job are due");
    store.heartbeat(&mut c, "n2", 60_000, "{}", &["a"], 0).unwrap();
    assert_eq!(store.requeue(&mut c, "n1", Requeue::Shutdown).unwrap(), Some(1));
    assert_eq!(c.llen::<_, i64>("solid_jobs:channel:a").unwrap(), 3);
    assert!(store.claim(&mut c, "n2", &["a"], 10, now_ms()).unwrap().jobs.is_empty());

    store.resume_channel(&mut c, "a").unwrap();
    assert_eq!(store.claim(&mut c, "n2", &["a"], 10, now_ms()).unwrap().jobs.len(), 3);
}
