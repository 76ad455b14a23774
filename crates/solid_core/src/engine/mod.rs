//! The SolidEngine backend: [`wire`], a typed client of the job server's
//! RESP protocol (the counterpart of [`crate::redis::store`]: one function
//! per command), and the job source a worker node runs on it
//! ([`source::EngineSource`]). The transport is the Redis backend's
//! connection ([`crate::redis::connection`]): SolidEngine speaks RESP.

pub mod source;
pub mod wire;
