//! The Lua scripts: every Redis state change is one of these, so each
//! transition is atomic. Sources live in `crates/solid_core/lua/`; scripts
//! that touch the job index get `prelude.lua` prepended.
//!
//! Out of memory (`maxmemory` reached with `noeviction`): Redis refuses
//! writes that may grow memory, yet draining is what frees it. The scripts
//! that keep a node alive and move claimed jobs on (heartbeat, claim,
//! settle, promote, requeue and recovery, lifting the publication barrier)
//! run with `allow-oom`: each either frees memory or moves a job between
//! structures, and their growth is bounded by what is already claimed or
//! held (a claim record per prefetched job, an attempts or archive record
//! per job leaving its claim). Scripts that add work (enqueue, schedule,
//! hold, unarchive, and enqueue_unique) and cancel keep Redis' refusal, so a producer gets
//! `OOM` and nothing is written. Script flags need Redis 7.0 or later.

use redis::Script;

pub struct Scripts {
    pub enqueue: Script,
    pub enqueue_unique: Script,
    pub forget: Script,
    pub schedule: Script,
    pub claim: Script,
    pub ack: Script,
    pub ack_claim: Script,
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
    pub health: Script,
    pub recurring: Script,
    pub pause: Script,
    pub resume: Script,
}

const PRELUDE: &str = include_str!("../../lua/prelude.lua");

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

/// The shebang line that lets a script run while Redis is out of memory;
/// it must be the script's first line, before the prelude.
const ALLOW_OOM: &str = "#!lua flags=allow-oom";

/// A script that runs even when Redis is out of memory (see the module
/// documentation for which scripts may).
fn allowing_oom(body: &str) -> Script {
    Script::new(&format!("{ALLOW_OOM}\n{body}"))
}

fn allowing_oom_with_prelude(body: &str) -> Script {
    Script::new(&format!("{ALLOW_OOM}\n{PRELUDE}\n{body}"))
}

/// `ack_claim.lua` with `ack.lua` and `claim.lua` as its functions
/// `ack_part` and `claim_part`: the two scripts' text, unchanged, each
/// reading its own KEYS and ARGV (function parameters shadow Redis'
/// globals), so the combined call cannot drift from either.
fn ack_claim() -> Script {
    let (ack, claim) = (include_str!("../../lua/ack.lua"), include_str!("../../lua/claim.lua"));
    Script::new(&format!(
        "{ALLOW_OOM}\n{PRELUDE}\nlocal function ack_part(KEYS, ARGV)\n{ack}\nend\n\
         local function claim_part(KEYS, ARGV)\n{claim}\nend\n{}",
        include_str!("../../lua/ack_claim.lua")
    ))
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            enqueue: with_prelude(include_str!("../../lua/enqueue.lua")),
            enqueue_unique: with_prelude(include_str!("../../lua/enqueue_unique.lua")),
            // Removes work (an archive entry and its lock): like the settle
            // scripts, it runs while Redis is out of memory.
            forget: allowing_oom_with_prelude(include_str!("../../lua/forget.lua")),
            schedule: with_prelude(include_str!("../../lua/schedule.lua")),
            claim: allowing_oom_with_prelude(include_str!("../../lua/claim.lua")),
            // With the prelude for the concurrency slot release (it only defines
            // functions: no command for plain jobs).
            ack: allowing_oom_with_prelude(include_str!("../../lua/ack.lua")),
            ack_claim: ack_claim(),
            record_failure: allowing_oom(include_str!("../../lua/record_failure.lua")),
            retry: allowing_oom_with_prelude(include_str!("../../lua/retry.lua")),
            discard: allowing_oom_with_prelude(include_str!("../../lua/discard.lua")),
            promote: allowing_oom_with_prelude(include_str!("../../lua/promote.lua")),
            requeue: allowing_oom_with_prelude(include_str!("../../lua/requeue.lua")),
            heartbeat: allowing_oom_with_prelude(include_str!("../../lua/heartbeat.lua")),
            // With the prelude for `route_channel` (a prioritized job goes back to
            // its own level's list).
            unarchive: with_prelude(include_str!("../../lua/unarchive.lua")),
            cancel: with_prelude(include_str!("../../lua/cancel.lua")),
            find: with_prelude(include_str!("../../lua/find.lua")),
            hold: with_prelude(include_str!("../../lua/hold.lua")),
            release: allowing_oom_with_prelude(include_str!("../../lua/release.lua")),
            // Read-only: answers on a replica and while Redis is out of
            // memory, so a probe reports the nodes rather than OOM.
            // Adds work, so it keeps Redis' out-of-memory refusal: the tick
            // is retried, and decided once memory is freed.
            recurring: with_prelude(include_str!("../../lua/recurring.lua")),
            // An operator pausing a channel that floods Redis must be able
            // to, and resume only moves a byte: both run out of memory.
            pause: allowing_oom(include_str!("../../lua/pause.lua")),
            resume: allowing_oom(include_str!("../../lua/resume.lua")),
            health: Script::new(&format!(
                "#!lua flags=no-writes,allow-oom\n{PRELUDE}\n{}",
                include_str!("../../lua/health.lua")
            )),
        }
    }
}
