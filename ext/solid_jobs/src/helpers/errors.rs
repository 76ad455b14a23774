//! Maps solid_core errors onto the exception classes defined in Ruby
//! (`lib/solid_jobs/errors.rb`). Classes are looked up when raised: errors
//! are the slow path, and lookup by name works from any Ractor.

use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};
use solid_core::redact::redact;
use solid_core::Error as CoreError;

fn class(name: &str) -> ExceptionClass {
    let ruby = Ruby::get().expect("called with the GVL");
    ruby.class_object()
        .const_get::<_, RModule>("SolidJobs")
        .and_then(|m| m.const_get::<_, ExceptionClass>(name))
        .unwrap_or_else(|_| ruby.exception_runtime_error())
}

/// The Ruby exception for `e`. Its message is redacted here, the one exit
/// every Rust-built message takes into Ruby.
pub fn to_ruby(e: CoreError) -> Error {
    let message = redact(&e.to_string());
    let name = match &e {
        CoreError::Connection(_)
        | CoreError::EngineConnection(_)
        | CoreError::Timeout(_)
        | CoreError::EngineTimeout(_) => "ConnectionError",
        CoreError::Redis(_) => "RedisError",
        CoreError::Engine(_) => "EngineError",
        CoreError::JobRunning(_) => "JobRunning",
        CoreError::OutOfMemory(_) => "OutOfMemoryError",
        CoreError::Envelope(_) => "EnvelopeError",
        CoreError::Invalid(_) => return Error::new(Ruby::get().expect("GVL").exception_arg_error(), message),
        CoreError::StaleClaim(_) => "StaleClaimError",
        CoreError::Stopped => "Error",
    };
    Error::new(class(name), message)
}

pub fn internal(msg: &str) -> Error {
    Error::new(class("Error"), redact(msg))
}

pub fn arg_error(msg: String) -> Error {
    Error::new(Ruby::get().expect("GVL").exception_arg_error(), redact(&msg))
}
