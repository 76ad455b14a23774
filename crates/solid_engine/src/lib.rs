//! SolidEngine: the SolidJobs job server.
//!
//! Layers, one module each, each depending only on the ones above it:
//! - [`error`]: the crate's one error enum and its protocol error codes.
//! - [`resp`]: RESP2 framing (incremental decoder, encoder).
//! - [`engine`]: the job state machine (pure, clock passed in).
//! - [`command`]: frames to typed commands, typed results to replies.
//! - [`storage`]: append-only log, snapshots, recovery.
//! - [`config`]: flags and TOML file.
//! - [`server`]: listeners, connections, auth, limits, dispatch.

pub mod command;
pub mod engine;
pub mod error;
pub mod resp;

pub use error::{Error, Result};
