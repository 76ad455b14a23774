//! Default retry delay: capped exponential backoff with equal jitter.
//!
//! For the n-th failure (n >= 1): `ceiling = min(CAP, BASE * 2^(n-1))`, and the
//! delay is drawn uniformly from `[ceiling / 2, ceiling]`. Equal jitter keeps
//! at least half of the exponential delay (so a failing dependency gets real
//! relief) while spreading a burst of failures over the other half.

use std::time::Duration;

/// Delay ceiling after the first failure.
pub const BASE: Duration = Duration::from_secs(5);
/// No single delay exceeds six hours; with the default 25 failures a job is
/// retried for roughly three to four days before it is archived.
pub const CAP: Duration = Duration::from_secs(6 * 3600);

/// The exponential ceiling for the `failures`-th failure, before jitter.
pub fn ceiling(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(32);
    let ms = (BASE.as_millis() as u64).saturating_mul(1u64 << exp);
    Duration::from_millis(ms.min(CAP.as_millis() as u64))
}

/// The delay for the `failures`-th failure; `unit` is a uniform draw in [0, 1).
pub fn delay_with(failures: u32, unit: f64) -> Duration {
    let c = ceiling(failures).as_millis() as f64;
    Duration::from_millis((c / 2.0 + unit.clamp(0.0, 1.0) * c / 2.0) as u64)
}

pub fn delay(failures: u32) -> Duration {
    delay_with(failures, rand::random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_then_caps() {
        assert_eq!(ceiling(1), Duration::from_secs(5));
        assert_eq!(ceiling(2), Duration::from_secs(10));
        assert_eq!(ceiling(5), Duration::from_secs(80));
        assert_eq!(ceiling(20), CAP);
        assert_eq!(ceiling(u32::MAX), CAP);
        assert_eq!(ceiling(0), BASE);
    }

    #[test]
    fn equal_jitter_keeps_half() {
        for n in 1..30 {
            let c = ceiling(n);
            assert_eq!(delay_with(n, 0.0), c / 2);
            assert_eq!(delay_with(n, 1.0), c);
            let d = delay(n);
            assert!(d >= c / 2 && d <= c, "{n}: {d:?}");
        }
    }
}
