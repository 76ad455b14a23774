//! The persisted job envelope: seven JSON fields, and an eighth, `meta`, only
//! on jobs a feature marks (a recurring tick, a unique job). Attempts, claims
//! and planning data live in other keys so the envelope never changes while
//! a job waits, which keeps a list entry byte-identical from enqueue to
//! claim.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// Longest channel name accepted; channel names are also used inside keys.
pub const MAX_CHANNEL_LEN: usize = 100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub id: String,
    pub task: String,
    pub arguments: Value,
    pub channel: String,
    pub max_failures: u32,
    pub created_ms: u64,
    pub queued_ms: u64,
    /// What a feature records about the job, not given to the task: for a
    /// recurring job its schedule and tick, for a unique job its lock. A
    /// JSON object of at most [`MAX_META_LEN`] bytes; absent (not `null`,
    /// not `{}`) on every other job, so their envelopes stay the seven
    /// fields they always were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, Value>>,
}

/// Largest `meta`, encoded: metadata names a schedule or a lock, it does not
/// carry data.
pub const MAX_META_LEN: usize = 4096;

/// The task that runs Active Job jobs (lib/solid_jobs/active_job.rb): its
/// one argument is Active Job's serialized job, naming the job class.
pub const ACTIVE_JOB_WRAPPER: &str = "SolidJobs::ActiveJobWrapper";

impl Envelope {
    /// The name a log line gives this job's task: an Active Job job's own
    /// class (the `job_class` its serialized form carries) rather than the
    /// wrapper every such job shares. Only that one string is read: no
    /// argument is ever logged.
    pub fn logged_task(&self) -> &str {
        if self.task == ACTIVE_JOB_WRAPPER {
            if let Some(class) = self.arguments.get(0).and_then(|a| a.get("job_class")).and_then(Value::as_str) {
                return class;
            }
        }
        &self.task
    }

    /// A new envelope with a fresh UUID; `queued_ms` is when it becomes ready
    /// (later than `created_ms` for planned jobs).
    pub fn build(
        task: &str,
        arguments: Value,
        channel: &str,
        max_failures: u32,
        created_ms: u64,
        queued_ms: u64,
    ) -> Result<Self> {
        let env = Envelope {
            id: uuid::Uuid::new_v4().to_string(),
            task: task.to_owned(),
            arguments,
            channel: channel.to_owned(),
            max_failures,
            created_ms,
            queued_ms,
            meta: None,
        };
        env.validate()?;
        Ok(env)
    }

    /// This envelope with `meta` set (an empty map leaves it absent).
    pub fn with_meta(mut self, meta: serde_json::Map<String, Value>) -> Result<Self> {
        self.meta = (!meta.is_empty()).then_some(meta);
        self.validate()?;
        Ok(self)
    }

    pub fn encode(&self) -> String {
        // Serializing a Value tree with string keys cannot fail.
        serde_json::to_string(self).expect("envelope serializes")
    }

    /// Decodes and validates an envelope written by any producer.
    pub fn decode(raw: &str) -> Result<Self> {
        let env: Envelope = serde_json::from_str(raw).map_err(|e| Error::Envelope(e.to_string()))?;
        env.validate()?;
        Ok(env)
    }

    pub fn validate(&self) -> Result<()> {
        uuid::Uuid::parse_str(&self.id).map_err(|_| Error::Envelope(format!("id {:?} is not a UUID", self.id)))?;
        validate_task_name(&self.task).map_err(|e| Error::Envelope(e.to_string()))?;
        if !self.arguments.is_array() {
            return Err(Error::Envelope("arguments must be a JSON array".into()));
        }
        validate_channel(&self.channel).map_err(|e| Error::Envelope(e.to_string()))?;
        if let Some(meta) = &self.meta {
            let len = serde_json::to_string(meta).map_or(usize::MAX, |m| m.len());
            if len > MAX_META_LEN {
                return Err(Error::Envelope(format!("meta is {len} bytes encoded; at most {MAX_META_LEN}")));
            }
        }
        Ok(())
    }
}

/// Channel names appear in Redis keys and in `channel|...` records, so they
/// are limited to a conservative alphabet.
pub fn validate_channel(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_CHANNEL_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid channel name {name:?}: use 1-{MAX_CHANNEL_LEN} characters from A-Z a-z 0-9 _ - ."
        )))
    }
}

/// A task name is a Ruby constant path such as `Billing::Invoice`.
pub fn validate_task_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.split("::").all(|seg| {
            let mut chars = seg.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_uppercase())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!("invalid task name {name:?}: expected a Ruby constant path")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Envelope {
        Envelope::build("Billing::Invoice", json!([42, "x", {"a": [1.5, null, true]}]), "critical", 10, 1000, 2000)
            .unwrap()
    }

    #[test]
    fn round_trips_seven_fields_without_meta() {
        let env = sample();
        let raw = env.encode();
        let v: Value = serde_json::from_str(&raw).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["arguments", "channel", "created_ms", "id", "max_failures", "queued_ms", "task"]);
        assert_eq!(Envelope::decode(&raw).unwrap(), env);
    }

    #[test]
    fn meta_is_an_eighth_field_only_when_set() {
        let plain = sample();
        assert!(!plain.encode().contains("meta"), "absent, not null: {}", plain.encode());
        let empty = sample().with_meta(serde_json::Map::new()).unwrap();
        assert_eq!(empty.encode(), empty.clone().encode());
        assert!(empty.meta.is_none(), "an empty map is no meta");
        let mut m = serde_json::Map::new();
        m.insert("schedule".into(), json!("nightly"));
        m.insert("tick_ms".into(), json!(1_700_000_000_000u64));
        let marked = sample().with_meta(m.clone()).unwrap();
        let raw = marked.encode();
        assert!(raw.starts_with(r#"{"id":""#), "the id stays first (Lua reads it without decoding): {raw}");
        assert_eq!(Envelope::decode(&raw).unwrap().meta, Some(m));
        let mut big = serde_json::Map::new();
        big.insert("x".into(), json!("y".repeat(MAX_META_LEN)));
        assert!(sample().with_meta(big).unwrap_err().to_string().contains("meta is"));
        let not_object = raw.replace(r#""meta":{"#, r#""meta":[{"#).replace("}}", "}]}");
        assert!(Envelope::decode(&not_object).is_err(), "meta must be an object");
    }

    #[test]
    fn accepts_other_producers_in_the_same_shape() {
        let raw = r#"{ "task": "Foo", "id": "0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e", "channel": "default",
                       "arguments": [], "queued_ms": 5, "created_ms": 4, "max_failures": 3 }"#;
        let env = Envelope::decode(raw).unwrap();
        assert_eq!(env.task, "Foo");
        assert_eq!(env.max_failures, 3);
    }

    #[test]
    fn rejects_wrong_shapes_with_a_reason() {
        let cases = [
            ("not json", "expected"),
            (
                r#"{"id":"x","task":"Foo","arguments":[],"channel":"d","max_failures":1,"created_ms":1,"queued_ms":1}"#,
                "not a UUID",
            ),
            (
                r#"{"id":"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e","task":"foo","arguments":[],"channel":"d","max_failures":1,"created_ms":1,"queued_ms":1}"#,
                "task name",
            ),
            (
                r#"{"id":"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e","task":"Foo","arguments":{},"channel":"d","max_failures":1,"created_ms":1,"queued_ms":1}"#,
                "array",
            ),
            (
                r#"{"id":"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e","task":"Foo","arguments":[],"channel":"a b","max_failures":1,"created_ms":1,"queued_ms":1}"#,
                "channel",
            ),
            (
                r#"{"id":"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e","task":"Foo","arguments":[],"channel":"d","max_failures":1,"created_ms":1}"#,
                "queued_ms",
            ),
            (
                r#"{"id":"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e","task":"Foo","arguments":[],"channel":"d","max_failures":1,"created_ms":1,"queued_ms":1,"extra":1}"#,
                "unknown field",
            ),
        ];
        for (raw, needle) in cases {
            let err = Envelope::decode(raw).unwrap_err().to_string();
            assert!(err.contains(needle), "{raw}: {err}");
        }
    }

    #[test]
    fn channel_and_task_names() {
        assert!(validate_channel("critical-1.eu_west").is_ok());
        assert!(validate_channel("").is_err());
        assert!(validate_channel("a|b").is_err());
        assert!(validate_channel(&"x".repeat(101)).is_err());
        assert!(validate_task_name("A::B2_c").is_ok());
        assert!(validate_task_name("A::").is_err());
        assert!(validate_task_name("::A").is_err());
    }

    #[test]
    fn an_active_job_job_is_logged_under_its_job_class() {
        let args = serde_json::json!([{"job_class": "WelcomeMailJob", "arguments": ["secret@example.com"]}]);
        let env = Envelope::build(ACTIVE_JOB_WRAPPER, args, "default", 1, 0, 0).unwrap();
        assert_eq!(env.logged_task(), "WelcomeMailJob");
        let odd = Envelope::build(ACTIVE_JOB_WRAPPER, serde_json::json!(["x"]), "default", 1, 0, 0).unwrap();
        assert_eq!(odd.logged_task(), ACTIVE_JOB_WRAPPER, "no job_class: the wrapper's name");
        let plain = Envelope::build("Mailer", serde_json::json!([{"job_class": "X"}]), "default", 1, 0, 0).unwrap();
        assert_eq!(plain.logged_task(), "Mailer", "only the wrapper's argument names another class");
    }
}
