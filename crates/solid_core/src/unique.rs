//! Unique jobs: the lock a unique task's job holds (docs/unique.md).
//!
//! A lock is the Redis string `<ns>:unique:<hex>` whose value is the id of
//! the job holding it. `hex` is the first 32 hex digits (128 bits) of the
//! SHA-256 of `task name`, a NUL byte, and the canonical JSON of the key
//! material (the `by:` result: object keys sorted, no whitespace), so a key
//! is the namespace plus 40 bytes (`:unique:` and the hex) whatever the arguments. The job's envelope
//! names its lock in `meta.unique` = `{"lock":"<hex>","while":"<mode>"}`:
//! the scripts that move the job read it there (a suffix check, so plain
//! envelopes cost nothing) and release the lock only while its value is
//! still that job's id (compare-and-delete).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Hex digits of a lock name: 128 bits of SHA-256.
pub const LOCK_HEX_LEN: usize = 32;

/// How long the lock holds (the `while:` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Until the job is claimed.
    Queued,
    /// Until the job stops for good: completed, given up (archived or
    /// dropped) or cancelled; kept across retries and recovery.
    Running,
    /// Until the job is done: completed, dropped or cancelled; kept across
    /// retries and recovery, and while the given-up job waits in the
    /// archive (until it is deleted, trimmed, or re-enqueued and completes).
    UntilDone,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "queued" => Ok(Mode::Queued),
            "running" => Ok(Mode::Running),
            "until_done" => Ok(Mode::UntilDone),
            other => Err(Error::Invalid(format!("unique while: must be queued, running or until_done, not {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Queued => "queued",
            Mode::Running => "running",
            Mode::UntilDone => "until_done",
        }
    }
}

/// The lock name (hex) of `task`'s job whose key material is `material`.
pub fn lock_hex(task: &str, material: &Value) -> String {
    let mut input = Vec::with_capacity(task.len() + 64);
    input.extend_from_slice(task.as_bytes());
    input.push(0);
    canonical(material, &mut input);
    let digest = Sha256::digest(&input);
    digest[..LOCK_HEX_LEN / 2].iter().map(|b| format!("{b:02x}")).collect()
}

/// Canonical JSON: object keys sorted (the workspace's serde_json keeps
/// insertion order), no whitespace, so equal values give equal bytes.
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(serde_json::to_string(k).expect("string encodes").as_bytes());
                out.push(b':');
                canonical(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(v, out);
            }
            out.push(b']');
        }
        scalar => out.extend_from_slice(serde_json::to_string(scalar).expect("scalar encodes").as_bytes()),
    }
}

/// The envelope `meta` of a unique job.
pub fn meta(hex: &str, mode: Mode) -> Map<String, Value> {
    let mut lock = Map::new();
    lock.insert("lock".into(), Value::String(hex.to_owned()));
    lock.insert("while".into(), Value::String(mode.as_str().into()));
    let mut meta = Map::new();
    meta.insert("unique".into(), Value::Object(lock));
    meta
}

/// The lock an envelope's meta names, if any.
pub fn lock_of(meta: Option<&Map<String, Value>>) -> Option<(String, Mode)> {
    let u = meta?.get("unique")?.as_object()?;
    let hex = u.get("lock")?.as_str()?;
    let mode = Mode::parse(u.get("while")?.as_str()?).ok()?;
    (hex.len() == LOCK_HEX_LEN && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| (hex.to_owned(), mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_name_is_pinned() {
        // SHA-256 of "Sync", NUL, "[42]", first 32 hex digits (Python's
        // hashlib agrees). Pinned: a release that named locks differently
        // would let a duplicate in beside a job enqueued by the one before.
        assert_eq!(lock_hex("Sync", &serde_json::json!([42])), "dcd4154584b5c942ca393762f140f387");
    }

    #[test]
    fn lock_names_are_bounded_and_canonical() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "a": [1, 2], "b": 1 }"#).unwrap();
        assert_eq!(lock_hex("Sync", &a), lock_hex("Sync", &b), "key order and whitespace do not matter");
        assert_ne!(lock_hex("Sync", &a), lock_hex("Other", &a), "the task is part of the key");
        let big = Value::String("x".repeat(100_000));
        assert_eq!(lock_hex("Sync", &big).len(), LOCK_HEX_LEN);
        // The task name and the material are separated: "ab"+"c" is not "a"+"bc".
        assert_ne!(lock_hex("ab", &Value::String("c".into())), lock_hex("a", &Value::String("bc".into())));
    }

    #[test]
    fn meta_round_trips_and_ends_the_envelope() {
        let hex = lock_hex("Sync", &serde_json::json!([42]));
        let m = meta(&hex, Mode::Running);
        assert_eq!(lock_of(Some(&m)), Some((hex.clone(), Mode::Running)));
        let env = crate::envelope::Envelope::build("Sync", serde_json::json!([42]), "default", 3, 1, 1)
            .unwrap()
            .with_meta(m)
            .unwrap();
        // The scripts read the lock from the envelope's end (docs/unique.md).
        let raw = env.encode();
        assert!(raw.ends_with(&format!(r#""unique":{{"lock":"{hex}","while":"running"}}}}}}"#)), "{raw}");
        assert_eq!(lock_of(None), None);
        assert!(Mode::parse("sometimes").unwrap_err().to_string().contains("until_done"));
    }
}
