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
    /// SolidEngine could not be reached, or the connection broke
    /// mid-command: the same failure as `Connection`, named for the backend
    /// it happened on so no engine error speaks of Redis.
    EngineConnection(String),
    /// SolidEngine did not answer within the connection's timeouts.
    EngineTimeout(String),
    /// SolidEngine answered with an error reply.
    Engine(String),
    /// The job is running (claimed or reserved), so it cannot be cancelled;
    /// nothing was changed. The same on both backends.
    JobRunning(String),
    /// Redis refused a write because it reached `maxmemory` and evicts
    /// nothing (`OOM`). The refused command wrote nothing. Not a connection
    /// error: retrying at once fails the same way until memory is freed.
    OutOfMemory(String),
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
            Error::EngineConnection(m) => write!(f, "SolidEngine connection failed: {m}"),
            Error::EngineTimeout(m) => write!(f, "SolidEngine connection timed out: {m}"),
            Error::Engine(m) => write!(f, "SolidEngine error: {m}"),
            Error::JobRunning(id) => write!(f, "job {id} is running and cannot be cancelled"),
            Error::OutOfMemory(m) => write!(f, "Redis is out of memory (maxmemory reached): {m}"),
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
        } else if e.code() == Some("OOM") {
            Error::OutOfMemory(e.to_string())
        } else {
            Error::Redis(e.to_string())
        }
    }
}

impl Error {
    /// True when retrying the same operation after reconnecting may succeed.
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::EngineConnection(_) | Error::Timeout(_) | Error::EngineTimeout(_))
    }

    /// True when the server did not answer in time (a hung or unreachable
    /// server rather than a refused or reset connection).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::EngineTimeout(_))
    }

    /// The same error, named for SolidEngine: the engine speaks RESP over
    /// the redis crate, whose errors arrive here as Redis ones.
    pub fn on_engine(self) -> Self {
        match self {
            Error::Connection(m) => Error::EngineConnection(m),
            Error::Timeout(m) => Error::EngineTimeout(m),
            Error::Redis(m) => Error::Engine(m),
            other => other,
        }
    }

    /// True when Redis refused a write for lack of memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::OutOfMemory(_))
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

    #[test]
    fn engine_errors_name_the_engine_not_redis() {
        let refused = Error::Connection("Connection refused (tcp://127.0.0.1:1)".into()).on_engine();
        assert!(refused.is_connection());
        assert_eq!(refused.to_string(), "SolidEngine connection failed: Connection refused (tcp://127.0.0.1:1)");
        assert_eq!(Error::Redis("ERR bad".into()).on_engine().to_string(), "SolidEngine error: ERR bad");
        assert_eq!(Error::StaleClaim(3).on_engine(), Error::StaleClaim(3));
    }
}
