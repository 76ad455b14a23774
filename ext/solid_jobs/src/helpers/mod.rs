//! Shared by the classes under `ruby_api/`, which never import each other.

pub mod convert;
pub mod envelopes;
pub mod errors;
pub mod flow;
pub mod node_state;
pub mod nogvl;
pub mod publisher_telemetry;
pub mod raw_command;
pub mod settings;
pub mod shareability;
