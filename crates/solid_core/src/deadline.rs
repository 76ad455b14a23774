//! Waits with an end: a stopping node must be gone within its shutdown
//! budget even when its backend never answers (paused, black-holed). A
//! blocking socket call cannot be cut short from outside, so what may block
//! runs on a helper thread that the caller stops waiting for at the
//! deadline; the helper ends by itself within its connection's timeouts, or
//! with the process.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

/// How often a deadline-bounded join looks whether a thread has finished.
const JOIN_CHECK: Duration = Duration::from_millis(5);

/// Runs `f` on a thread named `name` and returns its result if it finishes
/// before `deadline`; None otherwise (it goes on, and its result is dropped).
/// A thread that cannot be spawned counts as not finished in time.
pub fn within<T: Send + 'static>(deadline: Instant, name: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = bounded(1);
    let spawned = std::thread::Builder::new().name(format!("solid-jobs-{name}")).spawn(move || {
        let _ = tx.send(f());
    });
    if spawned.is_err() {
        return None;
    }
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()
}

/// Joins the threads that finish before `deadline`; the others are left
/// running, detached. Returns the names of those left.
pub fn join_until<N: Copy>(threads: Vec<(N, JoinHandle<()>)>, deadline: Instant) -> Vec<N> {
    let mut left = Vec::new();
    for (name, handle) in threads {
        while !handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(JOIN_CHECK);
        }
        if handle.is_finished() {
            let _ = handle.join();
        } else {
            left.push(name);
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_returns_what_finishes_in_time_and_gives_up_on_the_rest() {
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(within(deadline, "quick", || 7), Some(7));
        let started = Instant::now();
        let deadline = started + Duration::from_millis(50);
        assert_eq!(within(deadline, "slow", || std::thread::sleep(Duration::from_secs(2))), None);
        assert!(started.elapsed() < Duration::from_secs(1), "gave up at the deadline, not when the call ended");
    }

    #[test]
    fn join_until_leaves_threads_still_running_at_the_deadline() {
        let quick = std::thread::spawn(|| ());
        let slow = std::thread::spawn(|| std::thread::sleep(Duration::from_secs(2)));
        let started = Instant::now();
        let left = join_until(vec![("quick", quick), ("slow", slow)], started + Duration::from_millis(50));
        assert_eq!(left, ["slow"]);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
