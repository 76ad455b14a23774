//! Rate limits (docs/flow-control.md, "Rate limits", decision 42): the
//! promotion that wakes throttled keys.
//!
//! `claim.lua` throttles a job over its key's rate into `throttled:<hex>`
//! and records the key once in `flow:wake` with the Redis-clock time its
//! oldest admission leaves the window, ringing `throttled` when that wake
//! is the earliest. `promote.lua` with `wake` moves the due keys' jobs
//! back to the heads of their lists, as many as the log has room for. A
//! node passes `wake` from its start, and after every `throttled` ring
//! (or missed rings), until a promotion reports no wake left: so a
//! namespace without rate limits runs the commands it always ran.

use std::time::Duration;

use redis::Connection;

use crate::error::Result;
use crate::redis::store::Store;

impl Store {
    /// Promotes planned and retrying jobs due on Redis' clock and, with
    /// `wake`, the throttled jobs of rate keys whose wake time has come;
    /// returns (planned and retrying jobs moved, how long until the next
    /// one or the next wake is due, whether throttled keys still wait: with
    /// `wake` only, else false).
    pub fn promote_waking(
        &self,
        conn: &mut Connection,
        limit: usize,
        wake: bool,
    ) -> Result<(u64, Option<Duration>, bool)> {
        let reply: Vec<i64> = self
            .scripts
            .promote
            .key(self.keys.planned())
            .key(self.keys.retrying())
            .key(self.keys.doorbell())
            .key(self.keys.archive_entries())
            .key(self.keys.jobs())
            .key(self.keys.metric("cancelled"))
            .key(self.keys.cancelling())
            .key(self.keys.attempts())
            .arg(limit)
            .arg(self.keys.prefix())
            .arg(if wake { "1" } else { "0" })
            .invoke(conn)?;
        let at = |i: usize| reply.get(i).copied().unwrap_or(0);
        Ok((u64::try_from(at(0)).unwrap_or(0), u64::try_from(at(1)).ok().map(Duration::from_millis), at(2) == 1))
    }

    /// Moves `node_id`'s claims `tokens` back to the heads of their lists,
    /// unstarted (`requeue.lua` mode `tokens`: their slots released, their
    /// admissions kept); returns how many were still claimed.
    pub fn hand_back(&self, conn: &mut Connection, node_id: &str, tokens: &[u64]) -> Result<u64> {
        let mut inv = self.scripts.requeue.prepare_invoke();
        inv.key(self.keys.claims(node_id))
            .key(self.keys.node(node_id))
            .key(self.keys.nodes())
            .key(self.keys.doorbell())
            .key(self.keys.archive_entries())
            .key(self.keys.jobs())
            .arg(self.keys.prefix())
            .arg(node_id)
            .arg("tokens")
            .arg("")
            .arg("0");
        for t in tokens {
            inv.arg(t.to_string());
        }
        let n: i64 = inv.invoke(conn)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
