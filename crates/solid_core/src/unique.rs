//! Unique jobs: the lock a unique task's job holds (docs/unique.md).
//!
//! A lock is the Redis string `<ns>:unique:<hex>` whose value is the id of
//! the job holding it. `hex` is the first 32 hex digits (128 bits) of the
//! SHA-256 of `task name`, a NUL byte, and the canonical JSON of the key
//! material (the `by:` result: object keys sorted, no whitespace), so a key
//! is 52 bytes plus the namespace whatever the arguments. The job's envelope
//! names its lock in `meta.unique` = `{"lock":"<hex>","while":"<mode>"}`:
//! the scripts that move the job read it there (a suffix check, so plain
//! envelopes cost nothing) and release the lock only while its value is
//! still that job's id (compare-and-delete).

use serde_json::{Map, Value};

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
    let digest = sha256(&input);
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

/// SHA-256 (FIPS 180-4), written here: the one use is naming locks, and a
/// crate for it would be the workspace's only hashing dependency.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, word) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&word.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let million = vec![b'a'; 1_000_000];
        assert_eq!(hex(&sha256(&million)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
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
