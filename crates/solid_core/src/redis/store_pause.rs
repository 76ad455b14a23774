//! Pausing channels (docs/flow-control.md, "Pausing channels"): the Store
//! methods of `pause.lua` and `resume.lua`, and what a claim's reply
//! trailer says about the channels it visited.
//!
//! A pause is one byte, `P` at offset 0 of `flow:<channel>`, which every
//! `claim.lua` reads in the MGET it already makes: it holds from the next
//! claim of every node (one round trip), with no heartbeat in between, and
//! channels never paused pay nothing (their MGET value is nil, the reply
//! has no trailer).

use redis::Connection;

use crate::envelope::validate_channel;
use crate::error::{Error, Result};
use crate::redis::store::Store;

/// A channel's `flow:<name>` string as a claim read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelFlow {
    pub channel: String,
    pub bytes: Vec<u8>,
}

impl ChannelFlow {
    pub fn paused(&self) -> bool {
        self.bytes.first() == Some(&b'P')
    }

    /// The trailer's flags, `name=<flow bytes>,name=<flow bytes>`. Channel
    /// names cannot contain `=` or `,` (`validate_channel`), and flow bytes
    /// are `P`, `-`, `1` or NUL, so both split unambiguously.
    pub fn parse_trailer(flags: &str) -> Vec<ChannelFlow> {
        flags
            .split(',')
            .filter_map(|f| f.split_once('='))
            .map(|(channel, bytes)| ChannelFlow { channel: channel.to_owned(), bytes: bytes.as_bytes().to_vec() })
            .collect()
    }
}

/// One paused channel, as `pause.lua` recorded it in the `paused` hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausedChannel {
    pub channel: String,
    /// When it was paused, on Redis' clock.
    pub paused_ms: u64,
    /// Who paused it, when the caller said.
    pub by: Option<String>,
}

impl Store {
    /// Pauses `channel`: claims skip it from their next call on; enqueue,
    /// promotion and recovery still write to it. true when it was not
    /// paused already (pausing twice keeps the first time and author).
    pub fn pause_channel(&self, conn: &mut Connection, channel: &str, by: Option<&str>) -> Result<bool> {
        validate_channel(channel)?;
        let n: i64 = self
            .scripts
            .pause
            .key(self.keys.flow(channel))
            .key(self.keys.paused())
            .key(self.keys.channels())
            .arg(channel)
            .arg(by.unwrap_or(""))
            .invoke(conn)?;
        Ok(n == 1)
    }

    /// Resumes `channel`, and rings the doorbell when it holds ready jobs
    /// so idle nodes claim them at once. true when it was paused.
    pub fn resume_channel(&self, conn: &mut Connection, channel: &str) -> Result<bool> {
        validate_channel(channel)?;
        let n: i64 = self
            .scripts
            .resume
            .key(self.keys.flow(channel))
            .key(self.keys.paused())
            .key(self.keys.channel(channel))
            .key(self.keys.doorbell())
            .arg(channel)
            .invoke(conn)?;
        Ok(n == 1)
    }

    /// The paused channels, by name (one HGETALL).
    pub fn paused_channels(&self, conn: &mut Connection) -> Result<Vec<PausedChannel>> {
        let fields: Vec<(String, String)> = redis::cmd("HGETALL").arg(self.keys.paused()).query(conn)?;
        let mut out = fields
            .into_iter()
            .map(|(channel, info)| {
                let v: serde_json::Value = serde_json::from_str(&info)
                    .map_err(|e| Error::Redis(format!("paused channel {channel} has an unreadable record: {e}")))?;
                Ok(PausedChannel {
                    paused_ms: v.get("paused_ms").and_then(|m| m.as_u64()).unwrap_or(0),
                    by: v.get("by").and_then(|b| b.as_str()).map(str::to_owned),
                    channel,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.channel.cmp(&b.channel));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_names_each_channel_and_its_bytes() {
        let flows = ChannelFlow::parse_trailer("mailers=P,default=-\u{0}\u{0}1");
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0].channel, "mailers");
        assert!(flows[0].paused());
        assert_eq!(flows[1].bytes, b"-\0\x001");
        assert!(!flows[1].paused());
        assert!(ChannelFlow::parse_trailer("").is_empty());
    }
}
