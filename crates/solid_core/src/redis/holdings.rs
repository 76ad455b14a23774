//! The claims a Redis node holds: every token it claimed whose settle is not
//! yet written, and the stamps of its claim calls. The heartbeat sends them
//! (`Store::heartbeat_holding`) so that a claim recorded under the node
//! that the node does not hold goes back to its channel at once instead of
//! staying claimed until shutdown: a claim whose reply was lost and whose
//! request reached Redis late, or a claim Redis brought back after losing
//! writes (a restore from an older AOF or RDB, a failover to a replica that
//! was behind) although the node had completed it.
//!
//! The rule the reconciliation relies on: a token leaves the holdings only
//! after Redis answered its settle (ack, retry, discard, quarantine), or
//! when the node lets the claim go without settling it (abandon), so a job
//! still running or finished but not yet written is never handed back.
//! Claim stamps are handed out here, under the same lock as the snapshot,
//! so every claim call the snapshot does not cover is stamped at or above
//! its floor.
//!
//! Locked once per claimed batch (fetcher), once per completion batch
//! (acker), once per failure settle and once per heartbeat; never per job
//! on the completion path and never during I/O.

use std::collections::HashSet;

use parking_lot::Mutex;

use crate::claim::ClaimToken;
use crate::now_ms;
use crate::redis::store::Held;

#[derive(Default)]
pub struct Holdings {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tokens: HashSet<ClaimToken>,
    /// The last stamp handed out (claim stamps increase strictly).
    last_stamp: u64,
    /// The claim call in flight, whose claims may be in Redis before its
    /// reply is here.
    pending: Option<u64>,
    /// The highest token this node was ever given: a fence counter below it
    /// means Redis went back in time.
    max_token: ClaimToken,
    /// The last check stamp handed out, and the last one Redis acknowledged.
    last_check: u64,
    acknowledged_check: u64,
}

impl Holdings {
    /// The stamp of the next claim call (its records' `claimed_ms`): unique
    /// to this node and increasing, the wall clock when it moves forward.
    /// Until `claimed` or `claim_failed`, claims with this stamp are not
    /// reconciled.
    pub fn begin_claim(&self) -> u64 {
        let mut inner = self.inner.lock();
        let stamp = now_ms().max(inner.last_stamp + 1);
        inner.last_stamp = stamp;
        inner.pending = Some(stamp);
        stamp
    }

    /// The claim call stamped `stamp` answered with these tokens.
    pub fn claimed(&self, stamp: u64, tokens: impl IntoIterator<Item = ClaimToken>) {
        let mut inner = self.inner.lock();
        for token in tokens {
            inner.max_token = inner.max_token.max(token);
            inner.tokens.insert(token);
        }
        if inner.pending == Some(stamp) {
            inner.pending = None;
        }
    }

    /// The claim call stamped `stamp` got no answer (or an error): whatever
    /// it may have claimed is not held.
    pub fn claim_failed(&self, stamp: u64) {
        let mut inner = self.inner.lock();
        if inner.pending == Some(stamp) {
            inner.pending = None;
        }
    }

    /// These claims are no longer held: Redis answered their settle, or the
    /// node let them go.
    pub fn release(&self, tokens: impl IntoIterator<Item = ClaimToken>) {
        let mut inner = self.inner.lock();
        for token in tokens {
            inner.tokens.remove(&token);
        }
    }

    /// What the node holds now, for one heartbeat, with a fresh check stamp.
    pub fn snapshot(&self) -> Held {
        let mut inner = self.inner.lock();
        let check = now_ms().max(inner.last_check + 1);
        inner.last_check = check;
        Held {
            floor: inner.pending.unwrap_or(inner.last_stamp + 1),
            check,
            tokens: inner.tokens.iter().copied().collect(),
        }
    }

    /// Redis answered the heartbeat that sent `held`, which found the
    /// holding record stamped `previous`. When that record is older than
    /// one Redis had already acknowledged, Redis lost writes: returns how
    /// far back it went, at least (check stamps are the node's clock in ms).
    pub fn checked(&self, held: &Held, previous: Option<u64>) -> Option<u64> {
        let mut inner = self.inner.lock();
        let went_back = previous.filter(|&p| p < inner.acknowledged_check).map(|p| inner.acknowledged_check - p);
        inner.acknowledged_check = inner.acknowledged_check.max(held.check);
        went_back
    }

    pub fn len(&self) -> usize {
        self.inner.lock().tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max_token(&self) -> ClaimToken {
        self.inner.lock().max_token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_covers_the_claim_in_flight_and_every_later_one() {
        let h = Holdings::default();
        let first = h.begin_claim();
        assert_eq!(h.snapshot().floor, first, "a claim in flight is not reconciled");
        h.claimed(first, [7, 8]);
        let held = h.snapshot();
        assert_eq!(held.floor, first + 1, "the next call is stamped at or above the floor");
        assert_eq!(held.tokens.iter().copied().collect::<HashSet<_>>(), HashSet::from([7, 8]));
        let second = h.begin_claim();
        assert!(second > first);
        h.claim_failed(second);
        assert_eq!(h.snapshot().floor, second + 1, "a failed call's claims are not held");
        h.release([7]);
        assert_eq!(h.snapshot().tokens, vec![8]);
        assert_eq!(h.max_token(), 8);
    }

    #[test]
    fn a_holding_record_older_than_one_acknowledged_means_redis_went_back() {
        let h = Holdings::default();
        let first = h.snapshot();
        assert_eq!(h.checked(&first, None), None, "the first heartbeat finds no record");
        let second = h.snapshot();
        assert!(second.check > first.check);
        assert_eq!(h.checked(&second, Some(first.check)), None);
        let third = h.snapshot();
        assert_eq!(
            h.checked(&third, Some(first.check)),
            Some(second.check - first.check),
            "the second record was lost"
        );
        // A heartbeat whose reply was lost is not counted as acknowledged, so
        // finding its record later is no alarm.
        let lost_reply = h.snapshot();
        let fourth = h.snapshot();
        assert_eq!(h.checked(&fourth, Some(lost_reply.check)), None);
    }
}
