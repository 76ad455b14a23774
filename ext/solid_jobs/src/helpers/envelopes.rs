//! Envelope building and validation shared by both producer classes
//! (`Native::Client`, `Native::EngineClient`) and the envelope readers
//! (`Native::Job#envelope`, `Native.decode_envelope`), so the two backends
//! refuse exactly the same arguments and envelopes.

use magnus::{Error, RArray, Ruby, Value};
use solid_core::envelope::Envelope;
use solid_core::now_ms;

use super::convert::{to_json, to_ruby};
use super::errors::{arg_error, to_ruby as err};

/// Builds one envelope; `due_ms` nil means ready now.
pub fn build_envelope(
    ruby: &Ruby,
    task: &str,
    arguments: Value,
    channel: &str,
    max_failures: u32,
    due_ms: Option<u64>,
    path: &str,
) -> Result<Envelope, Error> {
    let args = to_json(ruby, arguments, path)?;
    if !args.is_array() {
        return Err(arg_error(format!("{path} must be an Array")));
    }
    let now = now_ms();
    Envelope::build(task, args, channel, max_failures, now, due_ms.unwrap_or(now).max(now)).map_err(err)
}

/// Envelopes grouped by route (channel, or `channel:p` for the priority in
/// their `meta.priority`, so an interceptor may change it), in first-seen
/// order (one write per route).
pub fn by_channel(envelopes: Vec<Envelope>) -> Vec<(String, Vec<Envelope>)> {
    let mut groups: Vec<(String, Vec<Envelope>)> = Vec::new();
    for env in envelopes {
        let route = solid_core::priority::route_of(&env);
        match groups.iter_mut().find(|(c, _)| *c == route) {
            Some((_, v)) => v.push(env),
            None => groups.push((route, vec![env])),
        }
    }
    groups
}

/// Validates envelope Hashes (possibly changed by interceptors).
pub fn parse_envelopes(ruby: &Ruby, envelopes: RArray) -> Result<Vec<Envelope>, Error> {
    envelopes
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let json = to_json(ruby, h, &format!("envelope {i}"))?;
            let env: Envelope = serde_json::from_value(json)
                .map_err(|e| arg_error(format!("envelope {i} has the wrong shape: {e}")))?;
            env.validate().map_err(err)?;
            Ok(env)
        })
        .collect()
}

/// An envelope as the Hash the Ruby side sees (String keys).
pub fn envelope_to_ruby(ruby: &Ruby, env: &Envelope) -> Result<Value, Error> {
    to_ruby(ruby, &serde_json::to_value(env).expect("envelope is JSON"))
}
