//! The flush thread of a publisher process (a node flushes on its heartbeat
//! thread instead). It writes once a second while publications happen and
//! sleeps without a timer once an interval passes without any. It holds
//! only a weak reference: when the client that owns the telemetry is
//! dropped, the thread ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{Telemetry, FLUSH_INTERVAL};
use crate::log::log;
use crate::redis::connection::{Connector, Reconnecting};

/// How an idle flush thread is woken: it sleeps while nothing happens, and
/// the next publication wakes it (one atomic load per publication otherwise).
pub(super) struct FlusherWake {
    idle: AtomicBool,
    tx: Sender<()>,
    rx: Receiver<()>,
}

impl FlusherWake {
    pub fn new() -> Self {
        let (tx, rx) = bounded(1);
        FlusherWake { idle: AtomicBool::new(false), tx, rx }
    }

    /// A publication was counted. After the count (SeqCst pairs with
    /// `going_idle`): either this sees the flusher idle and wakes it, or the
    /// flusher sees the count and stays awake.
    pub fn published(&self) {
        if self.idle.load(Ordering::SeqCst) {
            self.idle.store(false, Ordering::Relaxed);
            let _ = self.tx.try_send(());
        }
    }

    /// The flusher is about to sleep; it then checks for activity once more.
    pub fn going_idle(&self) {
        self.idle.store(true, Ordering::SeqCst);
    }

    /// Activity arrived before it slept after all.
    pub fn stay_awake(&self) {
        self.idle.store(false, Ordering::Relaxed);
    }

    pub fn receiver(&self) -> Receiver<()> {
        self.rx.clone()
    }
}

/// Starts flushing `telemetry` every FLUSH_INTERVAL over its own connection.
/// Nothing is sent while there is nothing to write.
pub fn spawn(telemetry: &Arc<Telemetry>, connector: Connector) -> std::io::Result<JoinHandle<()>> {
    let weak: Weak<Telemetry> = Arc::downgrade(telemetry);
    let wake = telemetry.flusher_wake();
    std::thread::Builder::new().name("solid-jobs-telemetry".into()).spawn(move || {
        let mut conn = Reconnecting::new(connector);
        let mut warned = false;
        loop {
            std::thread::sleep(FLUSH_INTERVAL);
            let Some(t) = weak.upgrade() else { return };
            let active = t.tick();
            if t.has_pending() {
                match conn.run(|c| t.flush(c)) {
                    Ok(()) => warned = false,
                    Err(e) => {
                        if !warned {
                            log(
                                "WARN",
                                &format!(
                                    "telemetry journal not written ({e}); entries are kept while the buffer has room"
                                ),
                            );
                            warned = true;
                        }
                        continue;
                    }
                }
            }
            if !active && !t.has_pending() {
                // Nothing happened for a whole interval: sleep until the
                // next publication instead of waking every second.
                if !t.idle_until_activity() {
                    continue;
                }
                drop(t);
                if !Telemetry::wait_for_activity(&wake) {
                    return;
                }
            }
        }
    })
}
