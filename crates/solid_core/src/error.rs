//! The one error type of the core. The Ruby glue maps each variant to one
//! Ruby exception class (defined in `lib/solid_jobs/errors.rb`).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Redis could not be reached, or the connection broke mid-command.
    Connection(String),
    /// Redis (or SolidEngine) did not answer within the connection's
    /// timeouts: a connection failure whose command may or may not have run.
    Timeout(String),
    /// Redis answered with an error (script error, wrong type, ...).
    Redis(String),
    /// An envelope could not be decoded or has the wrong shape.
    Envelope(String),
    /// A value handed to the core is invalid (bad channel name, bad URL...).
    Invalid(String),
    /// The claim was recovered and handed to someone else: the operation was
    /// rejected and changed nothing.
    StaleClaim(u64),
    /// The dispatcher is shutting down and accepts no new work.
    Stopped,
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connection(m) => write!(f, "Redis connection failed: {m}"),
            Error::Timeout(m) => write!(f, "Redis connection timed out: {m}"),
            Error::Redis(m) => write!(f, "Redis error: {m}"),
            Error::Envelope(m) => write!(f, "invalid envelope: {m}"),
            Error::Invalid(m) => write!(f, "{m}"),
            Error::StaleClaim(t) => write!(f, "claim {t} is stale: it was recovered and may run elsewhere"),
            Error::Stopped => write!(f, "dispatcher is stopped"),
        }
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        // LOADING (a restarted Redis replaying its AOF), TRYAGAIN, MASTERDOWN
        // and READONLY pass on their own: treat them like a lost connection,
        // which every caller already retries or reports as ConnectionError.
        let transient = matches!(
            e.kind(),
            redis::ErrorKind::BusyLoadingError
                | redis::ErrorKind::TryAgain
                | redis::ErrorKind::MasterDown
                | redis::ErrorKind::ReadOnly
        );
        if e.is_timeout() {
            Error::Timeout(e.to_string())
        } else if transient || e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            Error::Connection(e.to_string())
        } else {
            Error::Redis(e.to_string())
        }
    }
}

impl Error {
    /// True when retrying the same operation after reconnecting may succeed.
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::Timeout(_))
    }

    /// True when the server did not answer in time (a hung or unreachable
    /// server rather than a refused or reset connection).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loading_redis_counts_as_unavailable() {
        let e =
            redis::RedisError::from((redis::ErrorKind::BusyLoadingError, "LOADING", "Redis is loading".to_string()));
        assert!(Error::from(e).is_connection());
        let e = redis::RedisError::from((redis::ErrorKind::ResponseError, "ERR", "wrong type".to_string()));
        assert!(!Error::from(e).is_connection());
    }
}
