//! SolidJobs engine core.
//!
//! Everything here runs without a Ruby VM and is tested with `cargo test`:
//! the envelope codec, the Redis keyspace, the atomic Lua scripts that move a
//! job between states, the default backoff, channel ordering, and the
//! job sources ([`redis_source::RedisSource`]) whose Rust threads do all I/O
//! for a worker node, merged for the workers by [`hub::Hub`]. The magnus crate under `ext/` only converts values and maps errors.

pub mod acker;
pub mod backoff;
pub mod channel_order;
pub mod claim;
pub mod connection;
pub mod doorbell;
pub mod engine_client;
pub mod engine_source;
pub mod envelope;
pub mod error;
pub mod hub;
pub mod interrupt;
pub mod keyspace;
pub mod log;
pub mod prefetch;
pub mod redis_source;
pub mod source;
pub mod scripts;
pub mod store;
pub mod telemetry;

pub use claim::{ClaimToken, ClaimedJob};
/// Re-exported so the glue converts replies without its own dependency.
pub use redis;
pub use envelope::Envelope;
pub use error::{Error, Result};

/// Milliseconds since the Unix epoch, the only clock unit stored in Redis.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
