//! `SolidJobs::Native::Log`: Ruby's side of solid_core::log, the one
//! formatter. Thin: converts the level, message and fields and calls it;
//! the logger route's queue is drained here with the GVL released.

use std::borrow::Cow;
use std::time::Duration;

use magnus::{
    function, prelude::*, r_hash::ForEach, Error, Float, Integer, RArray, RHash, RModule, RString, Ruby, Symbol, Value,
};
use solid_core::log::{self as core_log, Format, Level};

use crate::helpers::errors::arg_error;
use crate::helpers::nogvl::without_gvl;

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let log = native.define_module("Log")?;
    log.define_singleton_method("write", function!(write, 3))?;
    log.define_singleton_method("threshold", function!(core_log::threshold, 0))?;
    log.define_singleton_method("threshold=", function!(set_threshold, 1))?;
    log.define_singleton_method("format", function!(format, 0))?;
    log.define_singleton_method("format=", function!(set_format, 1))?;
    log.define_singleton_method("node_id", function!(node_id, 0))?;
    log.define_singleton_method("node_id=", function!(set_node_id, 1))?;
    log.define_singleton_method("routed=", function!(core_log::set_routed, 1))?;
    log.define_singleton_method("routed?", function!(core_log::routed, 0))?;
    log.define_singleton_method("take", function!(take, 2))?;
    log.const_set("ROUTE_CAPACITY", core_log::ROUTE_CAPACITY)?;
    Ok(())
}

/// Ruby strings may hold any bytes: invalid UTF-8 is replaced, never
/// refused, so a log call cannot fail on what a task raised.
fn text(s: RString) -> String {
    // SAFETY: the bytes are copied before any Ruby code can run.
    String::from_utf8_lossy(unsafe { s.as_slice() }).into_owned()
}

fn value(v: Value) -> core_log::Value<'static> {
    if v.is_nil() {
        return core_log::Value::Null;
    }
    if let Some(s) = RString::from_value(v) {
        return core_log::Value::Str(Cow::Owned(text(s)));
    }
    if let Some(i) = Integer::from_value(v) {
        return i.to_i64().map_or(core_log::Value::Null, core_log::Value::Int);
    }
    if let Some(f) = Float::from_value(v) {
        return core_log::Value::Float(f.to_f64());
    }
    if let Some(s) = Symbol::from_value(v) {
        return s.name().map_or(core_log::Value::Null, |n| core_log::Value::Str(Cow::Owned(n.into_owned())));
    }
    let ruby = Ruby::get_with(v);
    if v.is_kind_of(ruby.class_true_class()) {
        return core_log::Value::Bool(true);
    }
    if v.is_kind_of(ruby.class_false_class()) {
        return core_log::Value::Bool(false);
    }
    // Anything else is not written: converting it would call the app's
    // to_s or inspect, which may raise or print what it holds.
    core_log::Value::Null
}

/// Writes one line at `rank` (0 debug … 3 error): `fields` is nil or a Hash
/// of Symbol => String, Symbol, Integer, Float, true, false or nil.
fn write(rank: u8, msg: RString, fields: Option<RHash>) -> Result<(), Error> {
    let Some(level) = Level::from_rank(rank) else { return Err(arg_error(format!("no log level {rank}"))) };
    if !core_log::enabled(level) {
        return Ok(());
    }
    let mut pairs: Vec<(String, core_log::Value<'static>)> = Vec::new();
    if let Some(h) = fields {
        h.foreach(|k: Value, v: Value| {
            let key = match Symbol::from_value(k) {
                Some(s) => s.name()?.into_owned(),
                None => RString::from_value(k).map(text).unwrap_or_default(),
            };
            if !key.is_empty() {
                pairs.push((key, value(v)));
            }
            Ok(ForEach::Continue)
        })?;
    }
    let borrowed: Vec<(&str, core_log::Value<'static>)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    core_log::log_fields(level, &text(msg), &borrowed);
    Ok(())
}

fn set_threshold(name: String) -> Result<(), Error> {
    let rank = core_log::parse_threshold(&name)
        .ok_or_else(|| arg_error(format!("unknown log level {name:?}: expected debug, info, warn, error or none")))?;
    core_log::set_threshold(rank);
    Ok(())
}

fn format() -> &'static str {
    match core_log::format() {
        Format::Text => "text",
        Format::Json => "json",
    }
}

fn set_format(name: String) -> Result<(), Error> {
    let format =
        Format::parse(&name).ok_or_else(|| arg_error(format!("unknown log format {name:?}: expected text or json")))?;
    core_log::set_format(format);
    Ok(())
}

fn node_id() -> Option<String> {
    core_log::node_id().map(|id| id.to_string())
}

fn set_node_id(node_id: Option<String>) {
    core_log::set_node_id(node_id.as_deref());
}

/// Up to `max` routed lines as [[rank, line], ...] (then the count of
/// lines dropped since the last batch, if any), waiting up to `timeout`
/// seconds for the first with the GVL released; empty on timeout or when
/// Ruby interrupts the wait (a signal, Thread#kill), so the draining thread
/// can always be stopped.
fn take(max: usize, timeout: f64) -> Result<RArray, Error> {
    let wait = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    let rx = core_log::routed_lines();
    let mut lines = Vec::new();
    match rx.try_recv() {
        Ok(line) => lines.push(line),
        Err(_) if wait.is_zero() => {}
        Err(_) => {
            let first = without_gvl(|interrupt| {
                let stop = interrupt.receiver();
                if interrupt.is_set() {
                    return None;
                }
                crossbeam_channel::select! {
                    recv(rx) -> line => line.ok(),
                    recv(stop) -> _ => None,
                    default(wait) => None,
                }
            })?;
            lines.extend(first);
        }
    }
    if !lines.is_empty() {
        lines.extend(rx.try_iter().take(max.saturating_sub(1)));
        lines.extend(core_log::take_dropped_notice());
    }
    let ruby = Ruby::get().expect("called from Ruby");
    let out = ruby.ary_new_capa(lines.len());
    for (level, line) in lines {
        out.push((level as u8, line))?;
    }
    Ok(out)
}
