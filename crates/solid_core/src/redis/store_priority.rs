//! Priorities on Redis (docs/flow-control.md, "Priorities"; decision 41):
//! what a claim's trailer says about the priority levels of its channels.
//! The writes themselves need no Store method of their own: every push
//! takes a route (`name` or `name:p`, [`crate::priority`]) where it took a
//! channel, and the scripts register a level in the channel's flow string
//! (`prelude.lua::route_channel`).

use crate::priority::DEFAULT;
use crate::redis::store_pause::ChannelFlow;

impl ChannelFlow {
    /// The priority levels in use in this channel (bytes 1..=10 of its flow
    /// string, `1` for a level some push wrote to), lowest (first) first;
    /// level 5 is the base list and never listed.
    pub fn levels(&self) -> Vec<u8> {
        (0..10u8).filter(|&p| p != DEFAULT && self.bytes.get(1 + p as usize) == Some(&b'1')).collect()
    }

    /// The routes (`name:p`) of [`ChannelFlow::levels`].
    pub fn level_routes(&self) -> Vec<String> {
        self.levels().into_iter().map(|p| crate::priority::route(&self.channel, p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_string_names_the_levels_in_use() {
        // SETRANGE on a missing key pads with NUL: byte 0 is NUL until a
        // pause writes it.
        let mut bytes = vec![0u8; 11];
        bytes[1] = b'1';
        bytes[1 + 5] = b'1'; // level 5 is never a list of its own
        bytes[1 + 9] = b'1';
        let flow = ChannelFlow { channel: "mailers".into(), bytes };
        assert_eq!(flow.levels(), vec![0, 9]);
        assert_eq!(flow.level_routes(), vec!["mailers:0".to_owned(), "mailers:9".to_owned()]);
        assert!(!flow.paused());
        assert!(ChannelFlow { channel: "a".into(), bytes: b"P".to_vec() }.levels().is_empty());
    }
}
