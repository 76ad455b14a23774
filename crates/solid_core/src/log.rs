//! Log lines in the same format and with the same level setting
//! (`SOLID_JOBS_LOG_LEVEL`) as `SolidJobs::Log` on the Ruby side.

use std::sync::OnceLock;

fn rank(level: &str) -> u8 {
    match level.to_ascii_lowercase().as_str() {
        "debug" => 0,
        "warn" => 2,
        "error" => 3,
        "none" => 4,
        _ => 1,
    }
}

/// Writes one line. Every line is redacted here, whatever built it, so no
/// message that quotes a URL or a backend spec prints a password.
pub fn log(level: &str, msg: &str) {
    static MIN: OnceLock<u8> = OnceLock::new();
    let min = *MIN.get_or_init(|| std::env::var("SOLID_JOBS_LOG_LEVEL").map(|l| rank(&l)).unwrap_or(1));
    if rank(level) >= min {
        eprintln!("[solid-jobs] {level} {}", crate::redact::redact(msg));
    }
}

/// A log line written from a retry loop, which may meet the same failure
/// many times a second (Redis out of memory, a script error): the first
/// occurrence is written at once, then at most one line per `every`, saying
/// how many were left out. One per call site, so what is left out is the
/// same kind of line.
pub struct Throttled {
    every: std::time::Duration,
    /// When the last line was written, and how many were left out since.
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

/// How often a repeating warning is written at most.
pub const REPEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Throttled {
    pub const fn new(every: std::time::Duration) -> Self {
        Throttled { every, state: std::sync::Mutex::new((None, 0)) }
    }

    /// Writes `msg` unless a line was written less than `every` ago; returns
    /// whether it was written.
    pub fn log(&self, level: &str, msg: &str) -> bool {
        let now = std::time::Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.0.is_some_and(|last| now.duration_since(last) < self.every) {
            state.1 += 1;
            return false;
        }
        let left_out = std::mem::take(&mut state.1);
        state.0 = Some(now);
        drop(state);
        if left_out > 0 {
            log(level, &format!("{msg} ({left_out} more like this since the last one)"));
        } else {
            log(level, msg);
        }
        true
    }
}

impl Default for Throttled {
    fn default() -> Self {
        Throttled::new(REPEAT_EVERY)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Throttled;

    #[test]
    fn a_repeating_line_is_written_once_per_interval() {
        let t = Throttled::new(Duration::from_millis(200));
        assert!(t.log("DEBUG", "first"));
        assert!((0..50).all(|_| !t.log("DEBUG", "again")), "left out within the interval");
        std::thread::sleep(Duration::from_millis(210));
        assert!(t.log("DEBUG", "after the interval"));
        assert_eq!(t.state.lock().unwrap().1, 0, "the count of lines left out restarts");
    }
}
