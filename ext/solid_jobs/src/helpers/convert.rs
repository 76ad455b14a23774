//! Ruby values <-> JSON. Only JSON-native values are accepted, so what a task
//! receives is exactly what it was given: anything that would not survive a
//! JSON round trip unchanged is refused with the path of the offending value.

use std::time::Duration;

use magnus::{prelude::*, r_hash::ForEach, Error, Float, Integer, RArray, RHash, RString, Ruby, Symbol, Value};
use serde_json::{Map, Number, Value as Json};

use super::errors::arg_error;

const RULE: &str = "arguments must be JSON-native: nil, true, false, Integer, finite Float, UTF-8 String, Array, or Hash with String keys";
const MAX_DEPTH: usize = 64;

pub fn to_json(ruby: &Ruby, v: Value, path: &str) -> Result<Json, Error> {
    to_json_at(ruby, v, path, 0)
}

fn to_json_at(ruby: &Ruby, v: Value, path: &str, depth: usize) -> Result<Json, Error> {
    if depth > MAX_DEPTH {
        return Err(arg_error(format!("{path} is nested more than {MAX_DEPTH} levels deep")));
    }
    if v.is_nil() {
        return Ok(Json::Null);
    }
    if v.is_kind_of(ruby.class_true_class()) {
        return Ok(Json::Bool(true));
    }
    if v.is_kind_of(ruby.class_false_class()) {
        return Ok(Json::Bool(false));
    }
    if let Some(i) = Integer::from_value(v) {
        if let Ok(n) = i.to_i64() {
            return Ok(Json::Number(n.into()));
        }
        if let Ok(n) = i.to_u64() {
            return Ok(Json::Number(n.into()));
        }
        return Err(arg_error(format!("{path} is an Integer outside the 64-bit range; pass it as a String")));
    }
    if let Some(f) = Float::from_value(v) {
        let x = f.to_f64();
        return Number::from_f64(x)
            .map(Json::Number)
            .ok_or_else(|| arg_error(format!("{path} is {x}, which JSON cannot represent; {RULE}")));
    }
    if let Some(s) = RString::from_value(v) {
        return s
            .to_string()
            .map(Json::String)
            .map_err(|_| arg_error(format!("{path} is a String that is not valid UTF-8; {RULE}")));
    }
    if let Some(a) = RArray::from_value(v) {
        let mut out = Vec::with_capacity(a.len());
        for (i, item) in a.into_iter().enumerate() {
            out.push(to_json_at(ruby, item, &format!("{path}[{i}]"), depth + 1)?);
        }
        return Ok(Json::Array(out));
    }
    if let Some(h) = RHash::from_value(v) {
        let mut out = Map::new();
        let mut failure = None;
        h.foreach(|k: Value, item: Value| {
            let Some(key) = RString::from_value(k).and_then(|s| s.to_string().ok()) else {
                let shown = if Symbol::from_value(k).is_some() {
                    format!("Symbol key {}", k.inspect())
                } else {
                    format!("key {} ({})", k.inspect(), k.class())
                };
                failure = Some(arg_error(format!("{path} has {shown}; {RULE}")));
                return Ok(ForEach::Stop);
            };
            match to_json_at(ruby, item, &format!("{path}[{key:?}]"), depth + 1) {
                Ok(j) => {
                    out.insert(key, j);
                    Ok(ForEach::Continue)
                }
                Err(e) => {
                    failure = Some(e);
                    Ok(ForEach::Stop)
                }
            }
        })?;
        return match failure {
            Some(e) => Err(e),
            None => Ok(Json::Object(out)),
        };
    }
    Err(arg_error(format!("{path} is a {} ({}); {RULE}", v.class(), v.inspect())))
}

pub fn to_ruby(ruby: &Ruby, v: &Json) -> Result<Value, Error> {
    serde_magnus::serialize(ruby, v)
}

/// A number of seconds from Ruby as a `Duration`, refusing negative and
/// non-finite values with an ArgumentError naming `what`.
pub fn seconds(s: f64, what: &str) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s).map_err(|_| arg_error(format!("{what} must be a non-negative number of seconds")))
}
