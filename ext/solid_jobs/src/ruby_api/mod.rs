mod client;
mod dispatcher;
mod engine_client;
mod job;
mod keyspace;
mod node_telemetry;
mod publisher_telemetry;

use magnus::{function, prelude::*, Error, RModule, Ruby};

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    client::init(ruby, native)?;
    engine_client::init(ruby, native)?;
    dispatcher::init(ruby, native)?;
    job::init(ruby, native)?;
    keyspace::init(ruby, native)?;
    node_telemetry::init(ruby, native)?;
    publisher_telemetry::init(ruby, native)?;
    native.define_singleton_method("default_backoff", function!(default_backoff, 1))?;
    native.define_singleton_method("decode_envelope", function!(decode_envelope, 1))?;
    Ok(())
}

/// Seconds (Float) of the default retry delay for the n-th failure.
fn default_backoff(failures: u32) -> f64 {
    solid_core::backoff::delay(failures).as_secs_f64()
}

/// Decodes and validates an envelope JSON string into a Hash.
fn decode_envelope(raw: String) -> Result<magnus::Value, Error> {
    let env = solid_core::Envelope::decode(&raw).map_err(crate::helpers::errors::to_ruby)?;
    envelope_to_ruby(&env)
}

pub(crate) fn envelope_to_ruby(env: &solid_core::Envelope) -> Result<magnus::Value, Error> {
    crate::helpers::convert::to_ruby(&serde_json::to_value(env).expect("envelope is JSON"))
}
