//! A claimed job: what a worker runs and what it needs to settle the claim.

use crate::envelope::Envelope;

/// The fencing token of one claim: a value of the monotonically increasing
/// `fence` counter, unique across all nodes. Settling a claim (ack, retry,
/// discard) succeeds only while the node's claim hash still holds this token;
/// once recovery has moved the job, the token is stale and rejected.
pub type ClaimToken = u64;

#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub token: ClaimToken,
    pub channel: String,
    /// The exact bytes popped from the channel list; requeue pushes these back.
    pub raw: String,
    pub envelope: Envelope,
    pub claimed_ms: u64,
    /// When a worker took the job; its duration feeds the prefetch window.
    pub taken_at: Option<std::time::Instant>,
    /// Index of the job source (backend) in the hub that delivered it.
    pub source: usize,
    /// Deliveries of this job so far, including this one, when the backend
    /// counts them (SolidEngine); 0 when it does not (Redis).
    pub attempts: u32,
}

/// Encodes the claim hash value `channel|claimed_ms|envelope`. Channel names
/// cannot contain `|` (see `validate_channel`), so the first two separators
/// are unambiguous and Lua can split the record without decoding JSON.
pub fn encode_record(channel: &str, claimed_ms: u64, raw: &str) -> String {
    format!("{channel}|{claimed_ms}|{raw}")
}

pub fn decode_record(record: &str) -> Option<(&str, u64, &str)> {
    let (channel, rest) = record.split_once('|')?;
    let (ms, raw) = rest.split_once('|')?;
    Some((channel, ms.parse().ok()?, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_with_pipes_in_the_envelope() {
        let rec = encode_record("critical", 12, r#"{"a":"x|y"}"#);
        assert_eq!(decode_record(&rec), Some(("critical", 12, r#"{"a":"x|y"}"#)));
        assert_eq!(decode_record("nope"), None);
    }
}
