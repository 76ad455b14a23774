//! The completion writer shared by every job source: completions queue up
//! while a write is in flight and go out together in the next one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::claim::MAX_BATCH;
use crate::error::Result;
use crate::log::{log, Throttled};
use crate::redis::connection::Reconnecting;
use crate::source::Stats;

pub enum AckMsg<T> {
    /// A completed job, in the source's own terms (token and id, id and fence).
    Done(T),
    /// Replies once everything queued before it is written.
    Flush(Sender<()>),
}

/// A safety net only: closing sends a message (see [`wake`]), so an idle
/// acker does not need to wake on a timer to notice it.
const IDLE_WAKE: Duration = Duration::from_secs(5);

/// How long an acker holding a small batch waits for more completions
/// before writing it (completions are asynchronous: no worker waits for
/// this, and a crash loses nothing, since an unwritten completion means the
/// job runs again). Below LINGER_BELOW completions it is worth it.
const LINGER: Duration = Duration::from_micros(500);
const LINGER_BELOW: usize = 64;

/// Wakes an acker blocked on an empty queue so it sees `closed`.
pub fn wake<T>(acks_tx: &Sender<AckMsg<T>>) {
    let (tx, _) = crossbeam_channel::bounded(1);
    let _ = acks_tx.send(AckMsg::Flush(tx));
}

/// Writes completions until `closed` is set and the queue is empty.
/// `write` sends one batch and returns the stale entries (rejected by the
/// backend: someone else owns the job now). A batch is retried until
/// written: dropping a completion would run a finished job again.
pub fn run<T: std::fmt::Debug>(
    acks_rx: Receiver<AckMsg<T>>,
    mut conn: Reconnecting,
    closed: &AtomicBool,
    stats: &Stats,
    mut write: impl FnMut(&mut Reconnecting, &[T]) -> Result<Vec<T>>,
) {
    let mut batch: Vec<T> = Vec::new();
    let mut flushes: Vec<Sender<()>> = Vec::new();
    // A failing write is retried every 50 ms or so: warn at a bounded rate.
    let write_warning = Throttled::default();
    loop {
        let mut next = match acks_rx.recv_timeout(IDLE_WAKE) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut lingered = false;
        while let Some(msg) = next.take() {
            match msg {
                AckMsg::Done(item) => batch.push(item),
                AckMsg::Flush(reply) => flushes.push(reply),
            }
            if batch.len() < MAX_BATCH {
                next = acks_rx.try_recv().ok();
                // A small batch while jobs flow: wait a moment for more
                // instead of writing now. A blocked acker costs every
                // completing worker a futex wake, and each tiny write an
                // EVALSHA; lingering (asleep, so senders need not wake it)
                // turns a stream of completions into few large writes.
                if next.is_none()
                    && !lingered
                    && flushes.is_empty()
                    && batch.len() < LINGER_BELOW
                    && !closed.load(Ordering::Acquire)
                {
                    lingered = true;
                    std::thread::sleep(LINGER);
                    next = acks_rx.try_recv().ok();
                }
            }
        }
        while !batch.is_empty() {
            match write(&mut conn, &batch) {
                Ok(stale) => {
                    stats.completed.fetch_add((batch.len() - stale.len()) as u64, Ordering::Relaxed);
                    if !stale.is_empty() {
                        stats.stale.fetch_add(stale.len() as u64, Ordering::Relaxed);
                        log("WARN", &format!("{} completion(s) rejected as stale (their jobs were recovered or redelivered: {:?}); nothing was changed", stale.len(), stale));
                    }
                    batch.clear();
                }
                Err(e) => {
                    stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                    if !e.is_connection() {
                        write_warning.log("WARN", &format!("writing completions failed: {e}; retrying"));
                    }
                    if closed.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(conn.backoff_remaining().max(Duration::from_millis(50)));
                }
            }
        }
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
        if closed.load(Ordering::Acquire) && acks_rx.is_empty() {
            return;
        }
    }
}
