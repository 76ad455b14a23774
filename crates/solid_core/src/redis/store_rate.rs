//! Rate limits (docs/flow-control.md, "Rate limits", decision 42): the
//! promotion that wakes throttled keys.
//!
//! `claim.lua` throttles a job over its key's rate into `throttled:<hex>`
//! and records the key once in `flow:wake` with the Redis-clock time its
//! oldest admission leaves the window. `promote.lua`, run by a node that
//! loads a rate limited task (`flow_wake`), moves the due keys' jobs back
//! to the heads of their lists, as many as the log has room for. Nodes
//! without such a task pass '0': their promotion runs the commands it
//! always ran.

use std::time::Duration;

use redis::Connection;

use crate::error::Result;
use crate::redis::store::Store;

impl Store {
    /// Promotes planned and retrying jobs due on Redis' clock and, with
    /// `flow_wake`, the throttled jobs of rate keys whose wake time has
    /// come; returns (planned and retrying jobs moved, how long until the
    /// next one or the next wake is due).
    pub fn promote_waking(
        &self,
        conn: &mut Connection,
        limit: usize,
        flow_wake: bool,
    ) -> Result<(u64, Option<Duration>)> {
        let (moved, next): (u64, i64) = self
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
            .arg(if flow_wake { "1" } else { "0" })
            .invoke(conn)?;
        Ok((moved, u64::try_from(next).ok().map(Duration::from_millis)))
    }
}
