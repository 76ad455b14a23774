//! The server's clock: wall time read once, advanced by the monotonic
//! clock.
//!
//! Guarantees:
//! - Within one process `now_ms` never goes back and advances at the rate
//!   of `CLOCK_MONOTONIC`: stepping the host's wall clock (an operator,
//!   NTP after a suspend, a VM restore) neither expires leases early nor
//!   keeps them alive late, and never makes a held job go to a second
//!   worker.
//! - It starts at the wall clock, so the times that must survive a restart
//!   (due times of scheduled jobs, `PUSH AT` times, finish times for
//!   retention) stay on the Unix epoch scale. It is re-anchored to the wall
//!   clock at every start: a step taken while the server runs is seen at
//!   the next restart, not before.

use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    anchor_ms: u64,
    anchor: Instant,
}

impl Clock {
    /// Anchored to the wall clock now.
    pub fn new() -> Clock {
        Clock::anchored_at(crate::now_ms())
    }

    /// Anchored so that `now_ms()` is `wall_ms` at this instant.
    pub fn anchored_at(wall_ms: u64) -> Clock {
        Clock { anchor_ms: wall_ms, anchor: Instant::now() }
    }

    /// Milliseconds since the Unix epoch, as of the anchor, plus the
    /// monotonic time elapsed since.
    pub fn now_ms(&self) -> u64 {
        self.anchor_ms.saturating_add(self.anchor.elapsed().as_millis() as u64)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_the_anchor_and_follows_the_monotonic_clock() {
        let clock = Clock::anchored_at(1_000_000);
        let first = clock.now_ms();
        assert!((1_000_000..1_000_050).contains(&first), "{first}");
        // Wall time: the clock under test must advance.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let later = clock.now_ms();
        assert!(later >= first + 30 && later < first + 1_000, "{first} -> {later}");
    }
}
