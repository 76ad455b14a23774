//! The flush thread of a publisher process (a node flushes on its heartbeat
//! thread instead). It writes once a second while publications happen and
//! sleeps without a timer once an interval passes without any. It holds
//! only a weak reference: when the client that owns the telemetry is
//! dropped, the thread ends.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crate::redis::connection::{Connector, Reconnecting};
use crate::log::log;

use super::{Telemetry, FLUSH_INTERVAL};

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
                            log("WARN", &format!("telemetry journal not written ({e}); entries are kept while the buffer has room"));
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
