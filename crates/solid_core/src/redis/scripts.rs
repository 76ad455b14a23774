//! The Lua scripts: every Redis state change is one of these, so each
//! transition is atomic. Sources live in `crates/solid_core/lua/`; scripts
//! that touch the job index get `prelude.lua` prepended.

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
    pub cancel: Script,
    pub find: Script,
    pub hold: Script,
    pub release: Script,
}

const PRELUDE: &str = include_str!("../../lua/prelude.lua");

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            enqueue: with_prelude(include_str!("../../lua/enqueue.lua")),
            schedule: with_prelude(include_str!("../../lua/schedule.lua")),
            claim: with_prelude(include_str!("../../lua/claim.lua")),
            ack: Script::new(include_str!("../../lua/ack.lua")),
            record_failure: Script::new(include_str!("../../lua/record_failure.lua")),
            retry: with_prelude(include_str!("../../lua/retry.lua")),
            discard: with_prelude(include_str!("../../lua/discard.lua")),
            promote: with_prelude(include_str!("../../lua/promote.lua")),
            requeue: with_prelude(include_str!("../../lua/requeue.lua")),
            heartbeat: with_prelude(include_str!("../../lua/heartbeat.lua")),
            unarchive: Script::new(include_str!("../../lua/unarchive.lua")),
            cancel: with_prelude(include_str!("../../lua/cancel.lua")),
            find: with_prelude(include_str!("../../lua/find.lua")),
            hold: with_prelude(include_str!("../../lua/hold.lua")),
            release: with_prelude(include_str!("../../lua/release.lua")),
        }
    }
}
