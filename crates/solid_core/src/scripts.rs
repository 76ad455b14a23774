//! The Lua scripts: every Redis state change is one of these, so each
//! transition is atomic. Sources live in `crates/solid_core/lua/`.

use redis::Script;

pub struct Scripts {
    pub enqueue: Script,
    pub schedule: Script,
    pub claim: Script,
    pub ack: Script,
    pub record_failure: Script,
    pub retry: Script,
    pub discard: Script,
    pub promote: Script,
    pub requeue: Script,
    pub heartbeat: Script,
    pub unarchive: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            enqueue: Script::new(include_str!("../lua/enqueue.lua")),
            schedule: Script::new(include_str!("../lua/schedule.lua")),
            claim: Script::new(include_str!("../lua/claim.lua")),
            ack: Script::new(include_str!("../lua/ack.lua")),
            record_failure: Script::new(include_str!("../lua/record_failure.lua")),
            retry: Script::new(include_str!("../lua/retry.lua")),
            discard: Script::new(include_str!("../lua/discard.lua")),
            promote: Script::new(include_str!("../lua/promote.lua")),
            requeue: Script::new(include_str!("../lua/requeue.lua")),
            heartbeat: Script::new(include_str!("../lua/heartbeat.lua")),
            unarchive: Script::new(include_str!("../lua/unarchive.lua")),
        }
    }
}
