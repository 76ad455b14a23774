//! SolidJobs engine core.
//!
//! Everything here runs without a Ruby VM and is tested with `cargo test`.
//! The magnus crate under `ext/` only converts values and maps errors.
//!
//! Layout, each group depending only on the ones before it:
//! - shared foundations: [`error`], [`log`], [`redact`], [`envelope`], [`claim`] (the
//!   claimed job both backends hand out), [`backoff`], [`channel_order`],
//!   [`prefetch`], [`interrupt`], [`deadline`] (bounded waits for shutdown),
//!   [`notify`] (systemd's notification socket), [`schedule`] (when recurring
//!   tasks tick), [`unique`] (unique jobs' lock names), [`flow`] (concurrency
//!   limits' keys in the envelope meta);
//! - [`recurring`]: when a recurring schedule ticks and what it enqueues;
//! - [`redis`]: connections, keyspace, Lua scripts, the [`redis::store::Store`]
//!   (one method per state transition), the doorbell;
//! - [`telemetry`]: what a node or publisher journals and observes (written
//!   to Redis);
//! - what every job source shares: the [`source::JobSource`] trait and its
//!   stats, the [`feed`] between workers and fetcher, the [`acker`];
//! - the job sources: [`redis::source::RedisSource`] and, over the
//!   [`engine::wire`] client, [`engine::source::EngineSource`];
//! - [`hub::Hub`], which merges the sources for the workers of one process.

pub mod acker;
pub mod backoff;
pub mod channel_order;
pub mod claim;
pub mod deadline;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod feed;
pub mod flow;
pub mod hub;
pub mod interrupt;
pub mod log;
pub mod notify;
pub mod prefetch;
pub mod priority;
pub mod recurring;
pub mod redact;
pub mod redis;
pub mod schedule;
pub mod source;
pub mod telemetry;
pub mod unique;

/// The redis crate, re-exported so the glue converts replies without its own
/// dependency (as `redis_rs`: [`redis`] is the Redis backend's module).
pub use ::redis as redis_rs;
pub use claim::{ClaimToken, ClaimedJob};
pub use envelope::Envelope;
pub use error::{Error, Result};

/// Milliseconds since the Unix epoch, the only clock unit stored in Redis.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
