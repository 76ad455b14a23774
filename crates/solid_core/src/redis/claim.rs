//! The claim hash record: how a Redis claim is stored in `claims:<node>`
//! (the claim itself, [`crate::claim::ClaimedJob`], is shared by both
//! backends).

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
