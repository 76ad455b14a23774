//! Maps solid_core errors onto the exception classes defined in Ruby
//! (`lib/solid_jobs/errors.rb`). Classes are looked up when raised: errors
//! are the slow path, and lookup by name works from any Ractor.

use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};
use solid_core::Error as CoreError;

fn class(name: &str) -> ExceptionClass {
    let ruby = Ruby::get().expect("called with the GVL");
    ruby.class_object()
        .const_get::<_, RModule>("SolidJobs")
        .and_then(|m| m.const_get::<_, ExceptionClass>(name))
        .unwrap_or_else(|_| ruby.exception_runtime_error())
}

pub fn to_ruby(e: CoreError) -> Error {
    let name = match &e {
        CoreError::Connection(_) | CoreError::Timeout(_) => "ConnectionError",
        CoreError::Redis(_) => "RedisError",
        CoreError::Envelope(_) => "EnvelopeError",
        CoreError::Invalid(_) => return Error::new(Ruby::get().expect("GVL").exception_arg_error(), e.to_string()),
        CoreError::StaleClaim(_) => "StaleClaimError",
        CoreError::Stopped => "Error",
    };
    Error::new(class(name), e.to_string())
}

pub fn internal(msg: &str) -> Error {
    Error::new(class("Error"), msg.to_owned())
}

pub fn arg_error(msg: String) -> Error {
    Error::new(Ruby::get().expect("GVL").exception_arg_error(), msg)
}
