//! Wake-ups without polling. Producers publish only when a list goes from
//! empty to non-empty (`ready`, on that channel's own doorbell,
//! `<ns>:doorbell:<channel>`) or a new earliest due time or rate wake is
//! written (`planned`, `throttled`, on the namespace's `<ns>:doorbell`).
//! One subscriber thread per node listens to the namespace's doorbell and
//! to the doorbells of the channels it serves, and turns each message into a
//! local [`Bell`] ring that idle threads wait on. So a push wakes only the
//! nodes that can claim it (decision 50).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::redis::connection::{signals_deferred, Connector};
use crate::redis::keyspace::Keyspace;

/// An epoch counter with a condition variable. A waiter reads the epoch
/// *before* looking for work and then waits for it to move, so a ring that
/// arrives between "found nothing" and "start waiting" is never lost.
#[derive(Default)]
pub struct Bell {
    epoch: Mutex<u64>,
    cv: Condvar,
}

impl Bell {
    pub fn epoch(&self) -> u64 {
        *self.epoch.lock()
    }

    pub fn ring(&self) {
        *self.epoch.lock() += 1;
        self.cv.notify_all();
    }

    /// Waits until the epoch differs from `seen` or `timeout` passes.
    /// Returns true when rung.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut epoch = self.epoch.lock();
        while *epoch == seen {
            if self.cv.wait_until(&mut epoch, deadline).timed_out() {
                return *epoch != seen;
            }
        }
        true
    }
}

/// The bells of one node, and whether the subscription is live (when it is
/// not, waiters fall back to a short poll).
#[derive(Default)]
pub struct Bells {
    pub ready: Bell,
    pub planned: Bell,
    /// Rung by `throttled` (a claim throttled a rate limited job with a new
    /// earliest wake, decision 42) and whenever rings may have been missed:
    /// the node's promotions wake throttled keys until one finds none.
    pub throttled: Bell,
    pub subscribed: AtomicBool,
    /// Doorbell messages the subscriber received. Observation only
    /// (benchmark/nodes.rb).
    pub messages: AtomicU64,
}

impl Bells {
    pub fn ring_all(&self) {
        self.ready.ring();
        self.planned.ring();
        self.throttled.ring();
    }
}

const SUBSCRIBER_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What a node's subscriber listens to: the namespace's doorbell (`planned`,
/// `throttled`) and the per-channel doorbells of the channels it serves,
/// whose every message means `ready`.
#[derive(Debug, Clone)]
pub struct Doorbells {
    pub namespace: String,
    pub channels: Vec<String>,
}

impl Doorbells {
    /// The doorbells of a node serving `channels` (names) in `keys`.
    pub fn of<'a>(keys: &Keyspace, channels: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<String> = channels.into_iter().map(|c| keys.doorbell_channel(c)).collect();
        names.sort();
        names.dedup();
        Doorbells { namespace: keys.doorbell(), channels: names }
    }

    /// Every pub/sub channel, for one SUBSCRIBE.
    fn all(&self) -> Vec<&str> {
        std::iter::once(self.namespace.as_str()).chain(self.channels.iter().map(String::as_str)).collect()
    }
}

/// Subscribes to `doorbells` (one connection, one SUBSCRIBE) until `closed`
/// is set, reconnecting with backoff. After every (re)subscription every
/// bell rings, since messages published while disconnected were missed.
/// `reached` hears whether each (re)connection succeeded and when a live
/// subscription breaks.
pub fn run_subscriber(
    connector: Connector,
    doorbells: Doorbells,
    bells: Arc<Bells>,
    closed: Arc<AtomicBool>,
    reached: impl Fn(bool),
) {
    // Its reads wait on a socket with a read timeout: a signal would cut
    // them short (see `signals_deferred`) and cost a resubscription.
    signals_deferred(|| subscribe_until_closed(connector, doorbells, bells, closed, reached))
}

/// Rings the bell a message on pub/sub channel `channel` stands for.
fn ring_for(bells: &Bells, doorbells: &Doorbells, channel: &[u8], payload: &[u8]) {
    // A per-channel doorbell only ever says `ready`. On the namespace's,
    // anything but `planned` and `throttled` is `ready` too: producers of
    // an earlier version still ring it there (decision 50).
    if channel != doorbells.namespace.as_bytes() {
        return bells.ready.ring();
    }
    match payload {
        b"planned" => bells.planned.ring(),
        b"throttled" => {
            bells.throttled.ring();
            bells.planned.ring();
        }
        _ => bells.ready.ring(),
    }
}

fn subscribe_until_closed(
    connector: Connector,
    doorbells: Doorbells,
    bells: Arc<Bells>,
    closed: Arc<AtomicBool>,
    reached: impl Fn(bool),
) {
    let mut delay = Duration::from_millis(50);
    while !closed.load(Ordering::Acquire) {
        let result = (|| -> redis::RedisResult<()> {
            let mut conn = connector
                .connect()
                .map_err(|e| redis::RedisError::from((redis::ErrorKind::IoError, "connect", e.to_string())))?;
            let mut pubsub = conn.as_pubsub();
            pubsub.subscribe(doorbells.all())?;
            // The read timeout only bounds how long the thread outlives its
            // node (nobody waits for it at shutdown); a short one would wake
            // an idle process several times a second.
            pubsub.set_read_timeout(Some(SUBSCRIBER_READ_TIMEOUT))?;
            bells.subscribed.store(true, Ordering::Release);
            reached(true);
            bells.ring_all();
            delay = Duration::from_millis(50);
            while !closed.load(Ordering::Acquire) {
                match pubsub.get_message() {
                    Ok(msg) => {
                        bells.messages.fetch_add(1, Ordering::Relaxed);
                        ring_for(&bells, &doorbells, msg.get_channel_name().as_bytes(), msg.get_payload_bytes())
                    }
                    Err(e) if e.is_timeout() => continue,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })();
        bells.subscribed.store(false, Ordering::Release);
        if result.is_err() {
            reached(false);
            // Waiters poll while we are away; wake them so they notice.
            bells.ring_all();
            let until = Instant::now() + delay;
            while Instant::now() < until && !closed.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(20));
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_between_check_and_wait_is_not_lost() {
        let bell = Arc::new(Bell::default());
        let seen = bell.epoch();
        bell.ring();
        assert!(bell.wait_past(seen, Duration::from_secs(5)));
        let seen = bell.epoch();
        assert!(!bell.wait_past(seen, Duration::from_millis(20)));
        let b2 = bell.clone();
        let t = std::thread::spawn(move || b2.wait_past(seen, Duration::from_secs(5)));
        // Likely after the wait began (nothing shows it); a ring before it is seen too.
        std::thread::sleep(Duration::from_millis(20));
        bell.ring();
        assert!(t.join().unwrap());
    }

    #[test]
    fn a_per_channel_message_rings_ready_and_the_namespace_keeps_its_kinds() {
        let keys = Keyspace::new("ns");
        let doorbells = Doorbells::of(&keys, ["a", "b", "a"]);
        assert_eq!(doorbells.channels, vec!["ns:doorbell:a".to_string(), "ns:doorbell:b".to_string()]);
        assert_eq!(doorbells.all(), vec!["ns:doorbell", "ns:doorbell:a", "ns:doorbell:b"]);
        let epochs = |b: &Bells| (b.ready.epoch(), b.planned.epoch(), b.throttled.epoch());
        let bells = Bells::default();
        ring_for(&bells, &doorbells, b"ns:doorbell:a", b"ready");
        assert_eq!(epochs(&bells), (1, 0, 0));
        // Whatever the payload: a per-channel doorbell means `ready`.
        ring_for(&bells, &doorbells, b"ns:doorbell:b", b"planned");
        assert_eq!(epochs(&bells), (2, 0, 0));
        ring_for(&bells, &doorbells, b"ns:doorbell", b"planned");
        assert_eq!(epochs(&bells), (2, 1, 0));
        ring_for(&bells, &doorbells, b"ns:doorbell", b"throttled");
        assert_eq!(epochs(&bells), (2, 2, 1));
        // An earlier version's producer rings `ready` on the namespace's.
        ring_for(&bells, &doorbells, b"ns:doorbell", b"ready");
        assert_eq!(epochs(&bells), (3, 2, 1));
    }
}
