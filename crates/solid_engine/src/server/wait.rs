//! Wake-ups for blocked FETCHes.
//!
//! A generation counter under its own small mutex (never the engine lock):
//! a fetcher reads the generation *while holding the engine lock*, right
//! after finding nothing, then releases the engine lock and waits for the
//! generation to move. Anything that makes a job ready bumps it after
//! changing the engine, so a wake-up cannot fall between "found nothing"
//! and "started waiting".

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Notifier {
    pub(crate) fn generation(&self) -> u64 {
        self.state.lock().0
    }

    pub(crate) fn notify(&self) {
        self.state.lock().0 += 1;
        self.cv.notify_all();
    }

    /// Ends every wait now and every later one at once.
    pub(crate) fn shutdown(&self) {
        self.state.lock().1 = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.state.lock().1
    }

    /// Waits until the generation differs from `seen`, shutdown, or `until`.
    pub(crate) fn wait(&self, seen: u64, until: Instant) {
        let mut state = self.state.lock();
        while state.0 == seen && !state.1 {
            if self.cv.wait_until(&mut state, until).timed_out() {
                return;
            }
        }
    }
}
