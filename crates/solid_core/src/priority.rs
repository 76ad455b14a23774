//! Job priorities 0..9 (docs/flow-control.md, "Priorities"; decision 41):
//! 0 runs first, 9 last, 5 is the default. A job's *route* is its channel
//! name (priority 5) or `name:p` (any other priority): the route names the
//! list the job waits in (`channel:<route>`) and is what every stored
//! record carries (`route|envelope` members, claim records, the job
//! index), so the scripts that push a record back (promotion, recovery,
//! release of held publications, blocked jobs moved back) reach the job's
//! own list without knowing about priorities. Channel names cannot contain
//! `:` (`validate_channel`), so a route never collides with a channel.
//!
//! The priority also travels in the envelope's `meta.priority` (present
//! only when not 5), placed before every other meta key but `schedule` and
//! `tick_ms`, so the flow object and the unique lock stay at the end where
//! the scripts look for them.

use serde_json::{Map, Value};

use crate::envelope::{validate_channel, Envelope};
use crate::error::{Error, Result};

/// The priority of a job that names none: the middle, so a job can be made
/// less urgent without raising every other.
pub const DEFAULT: u8 = 5;
/// The lowest priority (runs last).
pub const LOWEST: u8 = 9;

/// `Ok(p)` for 0..=9, else an error naming the range.
pub fn check(p: i64) -> Result<u8> {
    if (0..=LOWEST as i64).contains(&p) {
        Ok(p as u8)
    } else {
        Err(Error::Invalid(format!("priority {p} is out of range: use 0 (first) to 9 (last), 5 by default")))
    }
}

/// The route of a job of `channel` with priority `p`.
pub fn route(channel: &str, p: u8) -> String {
    if p == DEFAULT {
        channel.to_owned()
    } else {
        format!("{channel}:{p}")
    }
}

/// `"mailers:3"` → `("mailers", 3)`, `"mailers"` → `("mailers", 5)`. A
/// suffix that is not one digit other than 5 is an error: no script writes
/// one.
pub fn split_route(route: &str) -> Result<(&str, u8)> {
    match route.split_once(':') {
        None => Ok((route, DEFAULT)),
        Some((channel, level)) => match level.as_bytes() {
            [d @ b'0'..=b'9'] if *d != b'0' + DEFAULT => Ok((channel, d - b'0')),
            _ => Err(Error::Invalid(format!("route {route:?} does not end in a priority level (:0 .. :9, not :5)"))),
        },
    }
}

/// The priority `meta` names (5 when absent or not a level).
pub fn of(meta: Option<&Map<String, Value>>) -> u8 {
    meta.and_then(|m| m.get("priority"))
        .and_then(Value::as_u64)
        .filter(|&p| p <= LOWEST as u64)
        .map_or(DEFAULT, |p| p as u8)
}

/// The route an envelope is written to: its channel and its meta's priority.
pub fn route_of(env: &Envelope) -> String {
    route(&env.channel, of(env.meta.as_ref()))
}

/// `env` with `meta.priority` set to `p` in its fixed place (after
/// `schedule`/`tick_ms`, before the flow and unique keys), or removed when
/// `p` is the default, so a default job's envelope is byte-identical to one
/// that never named a priority.
pub fn with_priority(env: Envelope, p: u8) -> Result<Envelope> {
    check(p as i64)?;
    validate_channel(&env.channel)?;
    let old = env.meta.clone().unwrap_or_default();
    let mut meta = Map::new();
    for key in ["schedule", "tick_ms"] {
        if let Some(v) = old.get(key) {
            meta.insert(key.into(), v.clone());
        }
    }
    if p != DEFAULT {
        meta.insert("priority".into(), Value::from(p));
    }
    for (k, v) in old {
        if !matches!(k.as_str(), "schedule" | "tick_ms" | "priority") {
            meta.insert(k, v);
        }
    }
    env.with_meta(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Envelope {
        Envelope::build("Mail", serde_json::json!([1]), "mailers", 3, 0, 0).unwrap()
    }

    #[test]
    fn routes_name_the_level_list_and_split_back() {
        assert_eq!(route("mailers", 5), "mailers");
        assert_eq!(route("mailers", 0), "mailers:0");
        assert_eq!(split_route("mailers").unwrap(), ("mailers", 5));
        assert_eq!(split_route("mailers:9").unwrap(), ("mailers", 9));
        for bad in ["mailers:5", "mailers:10", "mailers:", "mailers:x"] {
            assert!(split_route(bad).is_err(), "{bad}");
        }
        assert!(check(10).is_err() && check(-1).is_err());
        assert_eq!(check(0).unwrap(), 0);
    }

    #[test]
    fn the_priority_goes_before_the_flow_and_unique_keys_and_the_default_leaves_no_trace() {
        let plain = env();
        let same = with_priority(plain.clone(), 5).unwrap();
        assert_eq!(same.encode(), plain.encode(), "default: byte-identical");
        let mut meta = Map::new();
        meta.insert("flow".into(), serde_json::json!({"c": "ab", "cl": 2}));
        meta.insert("unique".into(), serde_json::json!({"lock": "cd", "while": "queued"}));
        let limited = plain.with_meta(meta).unwrap();
        let urgent = with_priority(limited, 2).unwrap();
        let raw = urgent.encode();
        assert!(
            raw.ends_with(r#""meta":{"priority":2,"flow":{"c":"ab","cl":2},"unique":{"lock":"cd","while":"queued"}}}"#),
            "{raw}"
        );
        assert_eq!(of(urgent.meta.as_ref()), 2);
        assert_eq!(route_of(&urgent), "mailers:2");
        let back = with_priority(urgent, 5).unwrap();
        assert!(!back.encode().contains("priority"));
        assert_eq!(route_of(&back), "mailers");
    }
}
