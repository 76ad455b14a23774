//! Job ids, in their own module so that [`crate::error`] (which names the
//! job a request failed for) and [`crate::engine`] (which returns those
//! errors) both depend on it instead of on each other.

use std::fmt;

/// A job id: a UUID. Kept as a `u128` so hashing and comparison are cheap;
/// always shown in the canonical lowercase hyphenated form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u128);

impl JobId {
    /// Accepts exactly the 36-character hyphenated form, any case.
    pub fn parse(text: &[u8]) -> Option<JobId> {
        if text.len() != 36 {
            return None;
        }
        uuid::Uuid::try_parse_ascii(text).ok().map(|u| JobId(u.as_u128()))
    }

    pub fn random() -> JobId {
        JobId(uuid::Uuid::new_v4().as_u128())
    }

    /// The canonical text without allocating.
    pub fn encode(&self) -> [u8; 36] {
        let mut buf = [0u8; 36];
        uuid::Uuid::from_u128(self.0).hyphenated().encode_lower(&mut buf);
        buf
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&uuid::Uuid::from_u128(self.0).hyphenated(), f)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
