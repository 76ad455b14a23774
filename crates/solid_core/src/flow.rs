//! Flow control: the concurrency limit a job's envelope carries
//! (docs/flow-control.md, decision 39).
//!
//! A limited job's `meta` holds `"flow":{"c":"<32 hex>","cl":<limit>}`,
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

/// What an envelope's `meta.flow` names. Rate limits and priorities keep
/// their places in the format (design §0.1) and are added by later work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowSpec {
    pub concurrency: Option<Limit>,
}

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
    (FlowSpec { concurrency: Some(Limit { hex: concurrency_hex(group, material), limit }) }, label)
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
    let Some(c) = &spec.concurrency else { return Ok(()) };
    check_limit(c.limit)?;
    if c.hex.len() != unique::LOCK_HEX_LEN || !c.hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Invalid(format!("concurrency key {:?} is not {} hex digits", c.hex, unique::LOCK_HEX_LEN)));
    }
    let unique = meta.remove("unique");
    meta.remove("flow_label");
    meta.remove("flow");
    if let Some(label) = label {
        meta.insert("flow_label".into(), Value::String(label.chars().take(MAX_LABEL_CHARS).collect()));
    }
    let mut flow = Map::new();
    flow.insert("c".into(), Value::String(c.hex.clone()));
    flow.insert("cl".into(), Value::from(c.limit));
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
        (hex.len() == unique::LOCK_HEX_LEN && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Limit { hex: hex.to_owned(), limit })
    });
    FlowSpec { concurrency }
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
        let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit: 2 }) };
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
            let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit }) };
            assert!(meta_into(&mut meta, &spec, None).is_err());
        }
        let spec = FlowSpec { concurrency: Some(Limit { hex: "ab".repeat(16), limit: 1 }) };
        meta_into(&mut meta, &spec, Some(&"x".repeat(100))).unwrap();
        assert_eq!(meta["flow_label"].as_str().unwrap().len(), MAX_LABEL_CHARS);
        assert_eq!(parse(None), FlowSpec::default());
    }
}
