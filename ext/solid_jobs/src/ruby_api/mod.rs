//! One file per Ruby class under `SolidJobs::Native`, each with its own
//! `init`; they share code only through `crate::helpers`, never by
//! importing each other (except `Job`, which the dispatcher hands out).
//! This file holds the module's own functions.

mod client;
mod dispatcher;
mod engine_client;
mod job;
mod keyspace;
mod log;

use magnus::{function, prelude::*, Error, RModule, Ruby, Value};

use crate::helpers::envelopes::envelope_to_ruby;
use crate::helpers::errors::to_ruby as err;
use crate::helpers::shareability;

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    client::init(ruby, native)?;
    engine_client::init(ruby, native)?;
    dispatcher::init(ruby, native)?;
    job::init(ruby, native)?;
    keyspace::init(ruby, native)?;
    log::init(ruby, native)?;
    // The archive's default limits, defined once in solid_core.
    native.const_set("ARCHIVE_MAX_ENTRIES", solid_core::redis::store::ARCHIVE_MAX_ENTRIES)?;
    native.const_set("COMPLETED_KEPT", solid_core::redis::store::COMPLETED_KEPT)?;
    native.const_set("ARCHIVE_MAX_AGE", solid_core::redis::store::ARCHIVE_MAX_AGE.as_secs())?;
    native.define_singleton_method("default_backoff", function!(default_backoff, 1))?;
    native.define_singleton_method("decode_envelope", function!(decode_envelope, 1))?;
    native.define_singleton_method("redact", function!(redact, 1))?;
    native.define_singleton_method("check_redis_url", function!(check_redis_url, 1))?;
    native.define_singleton_method("check_engine_url", function!(check_engine_url, 1))?;
    native.define_singleton_method("shareability", function!(shareability::kind, 1))?;
    native.define_singleton_method("instance_values", function!(shareability::instance_values, 1))?;
    native.define_singleton_method("schedule_ticks", function!(schedule_ticks, 5))?;
    native.const_set("RECURRING_ON_TIME", solid_core::redis::scheduler::ON_TIME.as_secs())?;
    native.const_set("RECURRING_RETENTION", solid_core::redis::scheduler::RETENTION.as_secs())?;
    native.const_set("RECURRING_MAX_ARGUMENTS", solid_core::recurring::MAX_ARGUMENTS_LEN)?;
    native.define_singleton_method("sd_notify", function!(sd_notify, 1))?;
    native.define_singleton_method("watchdog_interval", function!(watchdog_interval, 0))?;
    Ok(())
}

/// Sends `state` to systemd's NOTIFY_SOCKET (solid_core::notify); false
/// when the process is not run by systemd or the send failed (never raises).
fn sd_notify(state: String) -> bool {
    solid_core::notify::notify(&state)
}

/// Seconds between watchdog pings for this process, or nil without one.
fn watchdog_interval() -> Option<f64> {
    solid_core::notify::Notifier::from_env().and_then(|n| n.watchdog_interval()).map(|d| d.as_secs_f64())
}

/// The text with credentials masked: the one redaction rule
/// (solid_core::redact), for Ruby-built log lines, messages and inspect.
fn redact(text: String) -> String {
    solid_core::redact::redact(&text)
}

/// Raises ArgumentError unless `url` opens as a Redis URL: the parser the
/// client will use, run at configure time. No connection is made.
fn check_redis_url(url: String) -> Result<(), Error> {
    solid_core::redis::connection::Connector::new(&url).map(drop).map_err(err)
}

/// The same for a SolidEngine URL (unix:///path or tcp://host:port).
fn check_engine_url(url: String) -> Result<(), Error> {
    solid_core::engine::wire::connector(&url, None, solid_core::redis::connection::Timeouts::default())
        .map(drop)
        .map_err(err)
}

/// Up to `count` ticks (ms) of a schedule (`every` seconds, or `cron` in
/// time zone `tz`) strictly after `after_ms`: the configuration's check
/// (ArgumentError with the reason) and the next runs `solid-jobs recurring`
/// and the dashboard list, computed by the code the scheduler runs.
fn schedule_ticks(
    every: Option<u64>,
    cron: Option<String>,
    tz: Option<String>,
    after_ms: u64,
    count: usize,
) -> Result<Vec<u64>, Error> {
    let ticks = solid_core::recurring::ticks_from(every, cron.as_deref(), tz.as_deref()).map_err(err)?;
    let mut out = Vec::new();
    let mut t = after_ms;
    while out.len() < count {
        match ticks.next_after(t) {
            Some(next) => {
                out.push(next);
                t = next;
            }
            None => break,
        }
    }
    Ok(out)
}

/// Seconds (Float) of the default retry delay for the n-th failure.
fn default_backoff(failures: u32) -> f64 {
    solid_core::backoff::delay(failures).as_secs_f64()
}

/// Decodes and validates an envelope JSON string into a Hash.
fn decode_envelope(ruby: &Ruby, raw: String) -> Result<Value, Error> {
    let env = solid_core::Envelope::decode(&raw).map_err(err)?;
    envelope_to_ruby(ruby, &env)
}
