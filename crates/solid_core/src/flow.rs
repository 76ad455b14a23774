//! Flow control: the concurrency and rate limits a job's envelope carries
//! (docs/flow-control.md, decisions 39 and 42).
//!
//! A limited job's `meta` holds `"flow":{"c":"<32 hex>","cl":<limit>}`
//! and/or `"r":"<32 hex>","rl":<limit>,"rw":<window ms>,"rs":<slack ms>` (rate),
//! after `schedule`/`tick_ms`/`priority`/`flow_label` and before `unique`
//! (which stays last: `prelude.lua::unique_lock` is anchored at the end).
//! The Lua scripts read the object from the envelope's tail
//! (`prelude.lua::flow_of`) with a fixed character set: letters, digits,
//! `"`, `:` and `,`, none of which can occur unescaped next to each other
//! that way inside a JSON string, so arguments cannot imitate it.
//!
//! The key's hex is 128 bits of SHA-256 of `group`, NUL, `concurrency`,
//! NUL and the canonical JSON of the key material (as a unique lock name
//! is, [`crate::unique::lock_hex`]): `group` defaults to the task name, so
//! two tasks share a limit only when they name the same `group:`; the
//! `concurrency` suffix keeps it apart from a rate key of the same task.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::unique;

/// Bounds of `concurrency: {limit:}` (checked at `task_options` too).
pub const MAX_CONCURRENCY: u64 = 10_000;
/// Longest `flow_label` kept (for operators only; Lua never reads it).
pub const MAX_LABEL_CHARS: usize = 64;

/// A concurrency limit: at most `limit` claims of key `hex` at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub hex: String,
    pub limit: u64,
}

/// What an envelope's `meta.flow` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowSpec {
    pub concurrency: Option<Limit>,
    pub rate: Option<Rate>,
}

// >>> rate limits (decision 42)
/// Bounds of `rate: {limit:, per:}` (checked at `task_options` too).
pub const MAX_RATE: u64 = 10_000;
pub const MIN_RATE_PER_MS: u64 = 1_000;
pub const MAX_RATE_PER_MS: u64 = 86_400_000;

/// A rate limit: at most `limit` admissions of key `hex` in any
/// `window_ms` (the user's `per` plus the start slack, design §2.4), on
/// Redis' clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate {
    pub hex: String,
    pub limit: u64,
    pub window_ms: u64,
    /// The start slack (part of `window_ms`): a node hands back, unstarted,
    /// a job of this key that waited longer in its prefetch window.
    pub slack_ms: u64,
}

/// The rate key (hex) of `group`'s job whose key material is `material`.
/// The `rate` suffix keeps it apart from the same group's concurrency key.
pub fn rate_hex(group: &str, material: &Value) -> String {
    unique::lock_hex(&format!("{group}\0rate"), material)
}

/// The default start slack of a rate limit of `per_ms`: a twentieth of
/// the window, at least 50 ms, at most 1 s (design §2.4).
pub fn default_slack_ms(per_ms: u64) -> u64 {
    (per_ms / 20).clamp(50, 1_000)
}

/// `spec` with a rate limit of `group`'s key `material`: `limit` per
/// `window_ms` (per + slack), `slack_ms` of it the start slack.
pub fn with_rate(
    mut spec: FlowSpec,
    group: &str,
    limit: u64,
    window_ms: u64,
    slack_ms: u64,
    material: &Value,
) -> FlowSpec {
    spec.rate = Some(Rate { hex: rate_hex(group, material), limit, window_ms, slack_ms });
    spec
}

/// Checks a rate limit against its bounds (the window includes the slack,
/// at most one `per` more).
pub fn check_rate(limit: u64, window_ms: u64, slack_ms: u64) -> Result<()> {
    if slack_ms >= window_ms {
        return Err(Error::Invalid(format!("rate slack {slack_ms} ms must be shorter than the window {window_ms} ms")));
    }
    if !(1..=MAX_RATE).contains(&limit) {
        return Err(Error::Invalid(format!("rate limit must be 1..{MAX_RATE}, not {limit}")));
    }
    if !(MIN_RATE_PER_MS..=2 * MAX_RATE_PER_MS).contains(&window_ms) {
        return Err(Error::Invalid(format!("rate window must be 1 s..2 days (per + slack), not {window_ms} ms")));
    }
    Ok(())
}

fn check_hex(what: &str, hex: &str) -> Result<()> {
    if hex.len() != unique::LOCK_HEX_LEN || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Invalid(format!("{what} key {hex:?} is not {} hex digits", unique::LOCK_HEX_LEN)));
    }
    Ok(())
}
// <<< rate limits

/// The concurrency key (hex) of `group`'s job whose key material is
/// `material`.
pub fn concurrency_hex(group: &str, material: &Value) -> String {
    unique::lock_hex(&format!("{group}\0concurrency"), material)
}

/// The spec and label of a job of `group` (limit `limit`) whose key
/// material is `material` (null: the group's one key, no label). The label
/// is the key as the user's lambda returned it: a string as is, anything
/// else as its JSON text.
pub fn concurrency(group: &str, limit: u64, material: &Value) -> (FlowSpec, Option<String>) {
    let label = match material {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    (FlowSpec { concurrency: Some(Limit { hex: concurrency_hex(group, material), limit }), rate: None }, label)
}

/// Checks a limit against its bounds.
pub fn check_limit(limit: u64) -> Result<()> {
    if (1..=MAX_CONCURRENCY).contains(&limit) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("concurrency limit must be 1..{MAX_CONCURRENCY}, not {limit}")))
    }
}

/// Inserts the flow keys into `meta` in their fixed order: `flow_label`
/// (the key as the user's lambda returned it, truncated, for the
/// dashboard) and `flow`, before a `unique` entry if there is one, so the
/// scripts find `flow` at the envelope's end or just before `unique`.
pub fn meta_into(meta: &mut Map<String, Value>, spec: &FlowSpec, label: Option<&str>) -> Result<()> {
    if spec.concurrency.is_none() && spec.rate.is_none() {
        return Ok(());
    }
    if let Some(c) = &spec.concurrency {
        check_limit(c.limit)?;
        check_hex("concurrency", &c.hex)?;
    }
    if let Some(r) = &spec.rate {
        check_rate(r.limit, r.window_ms, r.slack_ms)?;
        check_hex("rate", &r.hex)?;
    }
    let unique = meta.remove("unique");
    meta.remove("flow_label");
    meta.remove("flow");
    if let Some(label) = label {
        meta.insert("flow_label".into(), Value::String(label.chars().take(MAX_LABEL_CHARS).collect()));
    }
    let mut flow = Map::new();
    if let Some(c) = &spec.concurrency {
        flow.insert("c".into(), Value::String(c.hex.clone()));
        flow.insert("cl".into(), Value::from(c.limit));
    }
    if let Some(r) = &spec.rate {
        flow.insert("r".into(), Value::String(r.hex.clone()));
        flow.insert("rl".into(), Value::from(r.limit));
        flow.insert("rw".into(), Value::from(r.window_ms));
        flow.insert("rs".into(), Value::from(r.slack_ms));
    }
    meta.insert("flow".into(), Value::Object(flow));
    if let Some(u) = unique {
        meta.insert("unique".into(), u);
    }
    Ok(())
}

/// What `meta` names (an envelope without flow meta: the default).
pub fn parse(meta: Option<&Map<String, Value>>) -> FlowSpec {
    let flow = meta.and_then(|m| m.get("flow")).and_then(Value::as_object);
    let concurrency = flow.and_then(|f| {
        let hex = f.get("c")?.as_str()?;
        let limit = f.get("cl")?.as_u64()?;
        check_hex("concurrency", hex).is_ok().then(|| Limit { hex: hex.to_owned(), limit })
    });
    let rate = flow.and_then(|f| {
        let hex = f.get("r")?.as_str()?;
        let limit = f.get("rl")?.as_u64()?;
        let window_ms = f.get("rw")?.as_u64()?;
        let slack_ms = f.get("rs").and_then(Value::as_u64).unwrap_or(0);
        check_hex("rate", hex).is_ok().then(|| Rate { hex: hex.to_owned(), limit, window_ms, slack_ms })
    });
    FlowSpec { concurrency, rate }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Envelope;
    use serde_json::json;

    #[test]
    fn the_concurrency_key_is_pinned() {
        // SHA-256 of "SyncTenant", NUL, "concurrency", NUL, "\"tenant:7\"",
        // first 32 hex digits (Python: hashlib.sha256(b'SyncTenant\0concurrency\0"tenant:7"')).
        assert_eq!(concurrency_hex("SyncTenant", &json!("tenant:7")), "c677d4e89df067482f2a88fd34ea7a17");
        assert_ne!(
            concurrency_hex("SyncTenant", &json!("tenant:7")),
            unique::lock_hex("SyncTenant", &json!("tenant:7"))
        );
    }

    #[test]
    fn the_envelope_tail_is_pinned_with_and_without_a_unique_lock() {
        let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit: 2 }), rate: None };
        let mut meta = Map::new();
        meta_into(&mut meta, &spec, Some("tenant:7")).unwrap();
        let env = Envelope::build("SyncTenant", json!([7]), "default", 3, 1, 1).unwrap().with_meta(meta).unwrap();
        let raw = env.encode();
        assert!(
            raw.ends_with(&format!(
                r#""meta":{{"flow_label":"tenant:7","flow":{{"c":"{}","cl":2}}}}}}"#,
                "ab".repeat(16)
            )),
            "{raw}"
        );
        assert_eq!(parse(Envelope::decode(&raw).unwrap().meta.as_ref()), spec);

        let mut meta = unique::meta(&"cd".repeat(16), unique::Mode::Running);
        meta_into(&mut meta, &spec, None).unwrap();
        let raw =
            Envelope::build("SyncTenant", json!([7]), "default", 3, 1, 1).unwrap().with_meta(meta).unwrap().encode();
        assert!(
            raw.ends_with(&format!(
                r#""flow":{{"c":"{}","cl":2}},"unique":{{"lock":"{}","while":"running"}}}}}}"#,
                "ab".repeat(16),
                "cd".repeat(16)
            )),
            "{raw}"
        );
    }

    #[test]
    fn limits_outside_their_bounds_are_refused_and_labels_truncated() {
        let mut meta = Map::new();
        for limit in [0, MAX_CONCURRENCY + 1] {
            let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit }), rate: None };
            assert!(meta_into(&mut meta, &spec, None).is_err());
        }
        let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit: 1 }), rate: None };
        meta_into(&mut meta, &spec, Some(&"x".repeat(100))).unwrap();
        assert_eq!(meta["flow_label"].as_str().unwrap().len(), MAX_LABEL_CHARS);
        assert_eq!(parse(None), FlowSpec::default());
    }

    #[test]
    fn the_rate_key_is_pinned_and_apart_from_the_concurrency_key() {
        // Python: hashlib.sha256(b'Api\0rate\0"acct:7"').hexdigest()[:32]
        assert_eq!(rate_hex("Api", &json!("acct:7")), PINNED_RATE_HEX);
        assert_ne!(rate_hex("Api", &json!("acct:7")), concurrency_hex("Api", &json!("acct:7")));
    }

    const PINNED_RATE_HEX: &str = "045e55cf84fa10f95d50da8e5a11bc6a";

    #[test]
    fn a_rate_limit_goes_after_the_concurrency_limit_and_before_the_unique_lock() {
        let c = Limit { hex: "ab".repeat(16), limit: 2 };
        let spec = with_rate(FlowSpec { concurrency: Some(c), rate: None }, "Api", 100, 61_000, 1_000, &json!(7));
        let r = spec.rate.clone().unwrap();
        let mut meta = unique::meta(&"cd".repeat(16), unique::Mode::Queued);
        meta_into(&mut meta, &spec, Some("7")).unwrap();
        let raw = Envelope::build("Api", json!([7]), "default", 3, 1, 1).unwrap().with_meta(meta).unwrap().encode();
        assert!(
            raw.ends_with(&format!(
                r#""flow_label":"7","flow":{{"c":"{}","cl":2,"r":"{}","rl":100,"rw":61000,"rs":1000}},"unique":{{"lock":"{}","while":"queued"}}}}}}"#,
                "ab".repeat(16),
                r.hex,
                "cd".repeat(16)
            )),
            "{raw}"
        );
        assert_eq!(parse(Envelope::decode(&raw).unwrap().meta.as_ref()), spec);

        let only_rate = with_rate(FlowSpec::default(), "Api", 3, 1_050, 50, &Value::Null);
        let mut meta = Map::new();
        meta_into(&mut meta, &only_rate, None).unwrap();
        let raw = Envelope::build("Api", json!([7]), "default", 3, 1, 1).unwrap().with_meta(meta).unwrap().encode();
        assert!(
            raw.ends_with(&format!(
                r#""meta":{{"flow":{{"r":"{}","rl":3,"rw":1050,"rs":50}}}}}}"#,
                only_rate.rate.as_ref().unwrap().hex
            )),
            "{raw}"
        );
        assert_eq!(parse(Envelope::decode(&raw).unwrap().meta.as_ref()), only_rate);
    }

    #[test]
    fn rate_bounds_and_the_default_slack() {
        let mut meta = Map::new();
        for (limit, window) in [(0, 2_000), (MAX_RATE + 1, 2_000), (1, 999), (1, 2 * MAX_RATE_PER_MS + 1)] {
            let spec = FlowSpec {
                concurrency: None,
                rate: Some(Rate { hex: "ab".repeat(16), limit, window_ms: window, slack_ms: 0 }),
            };
            assert!(meta_into(&mut meta, &spec, None).is_err(), "{limit} {window}");
        }
        assert!(meta.is_empty());
        assert_eq!(default_slack_ms(1_000), 50);
        assert_eq!(default_slack_ms(2_000), 100);
        assert_eq!(default_slack_ms(60_000), 1_000);
        assert_eq!(default_slack_ms(86_400_000), 1_000);
    }
}
