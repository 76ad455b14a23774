//! Wake-ups without polling. Producers publish on the Redis doorbell channel
//! only when a list goes from empty to non-empty (or a new earliest due time
//! is planned); one subscriber thread per node turns each message into a
//! local [`Bell`] ring that idle threads wait on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::redis::connection::{signals_deferred, Connector};

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
}

impl Bells {
    pub fn ring_all(&self) {
        self.ready.ring();
        self.planned.ring();
        self.throttled.ring();
    }
}

const SUBSCRIBER_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Subscribes to `channel` until `closed` is set, reconnecting with backoff.
/// After every (re)subscription both bells ring, since messages published
/// while disconnected were missed. `reached` hears whether each
/// (re)connection succeeded and when a live subscription breaks.
pub fn run_subscriber(
    connector: Connector,
    channel: String,
    bells: Arc<Bells>,
    closed: Arc<AtomicBool>,
    reached: impl Fn(bool),
) {
    // Its reads wait on a socket with a read timeout: a signal would cut
    // them short (see `signals_deferred`) and cost a resubscription.
    signals_deferred(|| subscribe_until_closed(connector, channel, bells, closed, reached))
}

fn subscribe_until_closed(
    connector: Connector,
    channel: String,
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
            pubsub.subscribe(&channel)?;
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
                    Ok(msg) => match msg.get_payload_bytes() {
                        b"planned" => bells.planned.ring(),
                        b"throttled" => {
                            bells.throttled.ring();
                            bells.planned.ring();
                        }
                        _ => bells.ready.ring(),
                    },
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
        std::thread::sleep(Duration::from_millis(20));
        bell.ring();
        assert!(t.join().unwrap());
    }
}
