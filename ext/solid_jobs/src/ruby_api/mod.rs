//! One file per Ruby class under `SolidJobs::Native`, each with its own
//! `init`; they share code only through `crate::helpers`, never by
//! importing each other (except `Job`, which the dispatcher hands out).
//! This file holds the module's own functions.

mod client;
mod dispatcher;
mod engine_client;
mod job;
mod keyspace;

use magnus::{function, prelude::*, Error, RModule, Ruby, Value};

use crate::helpers::envelopes::envelope_to_ruby;
use crate::helpers::errors::to_ruby as err;

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    client::init(ruby, native)?;
    engine_client::init(ruby, native)?;
    dispatcher::init(ruby, native)?;
    job::init(ruby, native)?;
    keyspace::init(ruby, native)?;
    // The archive's default limits, defined once in solid_core.
    native.const_set("ARCHIVE_MAX_ENTRIES", solid_core::redis::store::ARCHIVE_MAX_ENTRIES)?;
    native.const_set("ARCHIVE_MAX_AGE", solid_core::redis::store::ARCHIVE_MAX_AGE.as_secs())?;
    native.define_singleton_method("default_backoff", function!(default_backoff, 1))?;
    native.define_singleton_method("decode_envelope", function!(decode_envelope, 1))?;
    Ok(())
}

/// Seconds (Float) of the default retry delay for the n-th failure.
fn default_backoff(failures: u32) -> f64 {
    solid_core::backoff::delay(failures).as_secs_f64()
}

/// Decodes and validates an envelope JSON string into a Hash.
fn decode_envelope(raw: String) -> Result<Value, Error> {
    let env = solid_core::Envelope::decode(&raw).map_err(err)?;
    envelope_to_ruby(&env)
}
