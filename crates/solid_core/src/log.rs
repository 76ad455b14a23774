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
