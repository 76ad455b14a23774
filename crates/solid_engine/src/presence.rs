//! Which worker nodes say they serve this engine: `NODE` announces one (its
//! id, a time to live, an opaque description), `NODES` lists the live ones.
//!
//! A worker node whose channels are all on SolidEngine writes nothing to
//! Redis, so this is the only place that knows it exists (dashboards read
//! it). Guarantees:
//! - Presence is not job state: it is never logged nor snapshotted, and a
//!   restarted server knows a node again at its next announcement (one
//!   heartbeat interval). No job operation reads or changes it.
//! - An entry is live while `now_ms < announced + ttl`; a TTL of 0 removes
//!   the entry (a node leaving). Expiry is applied when the registry is
//!   read or written, so results never depend on a housekeeping thread.
//! - Bounded: at most [`MAX_NODES`] entries, [`MAX_DESCRIPTION`] bytes per
//!   description (so `NODES` answers at most 16 MiB) and [`MAX_TTL_MS`]
//!   per entry. A description too long is refused and changes nothing. A
//!   new node announced when the registry is full evicts the entry
//!   announced longest ago: live nodes refresh every heartbeat, so a
//!   client that fills the registry with entries it never refreshes
//!   cannot lock real nodes out (an engine-only node that cannot register
//!   would read as dead to health checks, and be restarted for nothing).
//! - Pure and deterministic, like the engine: no I/O, clock passed in.

use std::collections::BTreeMap;

use crate::error::Error;

/// Live entries kept at most. Far above any real deployment (one entry per
/// worker process), low enough that a misbehaving client cannot grow the
/// server without bound.
pub const MAX_NODES: usize = 4096;
/// Largest description accepted (a node's description is a few hundred bytes).
pub const MAX_DESCRIPTION: usize = 4 * 1024;
/// Longest time to live accepted: an hour (a node's is its recovery delay,
/// 30 s by default), so no entry outlives its node by long.
pub const MAX_TTL_MS: u64 = 3_600_000;

/// One live node, as `NODES` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    pub node_id: Vec<u8>,
    /// Milliseconds since its last announcement (the server's clock only:
    /// a reader needs no clock of its own to judge freshness).
    pub age_ms: u64,
    pub ttl_ms: u64,
    pub description: Vec<u8>,
}

struct Announced {
    at_ms: u64,
    ttl_ms: u64,
    description: Vec<u8>,
}

#[derive(Default)]
pub struct Presence {
    /// Ordered by node id, so `NODES` answers in a stable order.
    nodes: BTreeMap<Vec<u8>, Announced>,
}

impl Presence {
    pub fn new() -> Self {
        Presence::default()
    }

    /// A node id: 1..=128 bytes of `A-Z a-z 0-9 _ . : -` (SolidJobs node ids
    /// are UUIDs), so ids are printable and cannot carry markup.
    pub fn valid_id(id: &[u8]) -> bool {
        !id.is_empty() && id.len() <= 128 && id.iter().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(b))
    }

    /// Records (or refreshes) `node_id` for `ttl_ms`; `ttl_ms` 0 removes it.
    pub fn announce(&mut self, now_ms: u64, node_id: Vec<u8>, ttl_ms: u64, description: Vec<u8>) -> Result<(), Error> {
        self.expire(now_ms);
        if ttl_ms == 0 {
            self.nodes.remove(&node_id);
            return Ok(());
        }
        if description.len() > MAX_DESCRIPTION {
            return Err(Error::Invalid(format!("description longer than {MAX_DESCRIPTION} bytes")));
        }
        if !self.nodes.contains_key(&node_id) && self.nodes.len() >= MAX_NODES {
            let stalest = self.nodes.iter().min_by_key(|(id, a)| (a.at_ms, (*id).clone())).map(|(id, _)| id.clone());
            if let Some(id) = stalest {
                self.nodes.remove(&id);
            }
        }
        self.nodes.insert(node_id, Announced { at_ms: now_ms, ttl_ms, description });
        Ok(())
    }

    /// Live nodes, by id.
    pub fn list(&mut self, now_ms: u64) -> Vec<NodeEntry> {
        self.expire(now_ms);
        self.nodes
            .iter()
            .map(|(id, a)| NodeEntry {
                node_id: id.clone(),
                age_ms: now_ms.saturating_sub(a.at_ms),
                ttl_ms: a.ttl_ms,
                description: a.description.clone(),
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn expire(&mut self, now_ms: u64) {
        self.nodes.retain(|_, a| a.at_ms.saturating_add(a.ttl_ms) > now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference: a list scanned in full, entries removed eagerly.
    struct Model(Vec<(Vec<u8>, u64, u64, Vec<u8>)>);

    impl Model {
        fn announce(&mut self, now: u64, id: &[u8], ttl: u64, desc: &[u8]) -> bool {
            self.0.retain(|(_, at, t, _)| at + t > now);
            let known = self.0.iter().any(|(i, ..)| i == id);
            if ttl == 0 {
                self.0.retain(|(i, ..)| i != id);
                return true;
            }
            if desc.len() > MAX_DESCRIPTION {
                return false;
            }
            if !known && self.0.len() >= MAX_NODES {
                // Evicts the entry announced longest ago (the lowest id among equals).
                let stalest = (0..self.0.len()).min_by_key(|&i| (self.0[i].1, self.0[i].0.clone())).unwrap();
                self.0.remove(stalest);
            }
            self.0.retain(|(i, ..)| i != id);
            self.0.push((id.to_vec(), now, ttl, desc.to_vec()));
            true
        }

        fn list(&mut self, now: u64) -> Vec<NodeEntry> {
            self.0.retain(|(_, at, t, _)| at + t > now);
            let mut out: Vec<NodeEntry> = self
                .0
                .iter()
                .map(|(i, at, t, d)| NodeEntry {
                    node_id: i.clone(),
                    age_ms: now - at,
                    ttl_ms: *t,
                    description: d.clone(),
                })
                .collect();
            out.sort_by(|a, b| a.node_id.cmp(&b.node_id));
            out
        }
    }

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    #[test]
    fn matches_a_naive_model_under_random_announcements_expiry_and_removal() {
        for seed in 1..=50u64 {
            let mut rng = Rng(seed * 0x9E37_79B9_7F4A_7C15);
            let (mut p, mut m) = (Presence::new(), Model(Vec::new()));
            let mut now = 1_000;
            for _ in 0..400 {
                now += rng.next(40);
                match rng.next(4) {
                    0 => assert_eq!(p.list(now), m.list(now), "seed {seed} at {now}"),
                    _ => {
                        let id = format!("node-{}", rng.next(6)).into_bytes();
                        let ttl = [0, 1, 50, 200][rng.next(4) as usize];
                        let desc = format!("{{\"at\":{now}}}").into_bytes();
                        let ours = p.announce(now, id.clone(), ttl, desc.clone()).is_ok();
                        assert_eq!(ours, m.announce(now, &id, ttl, &desc), "seed {seed} at {now}");
                    }
                }
            }
            assert_eq!(p.list(now), m.list(now));
        }
    }

    #[test]
    fn an_entry_lives_exactly_its_ttl_and_a_zero_ttl_removes_it() {
        let mut p = Presence::new();
        p.announce(100, b"a".to_vec(), 50, b"{}".to_vec()).unwrap();
        assert_eq!(p.list(149)[0].age_ms, 49);
        assert!(p.list(150).is_empty());
        p.announce(200, b"a".to_vec(), 50, b"{}".to_vec()).unwrap();
        p.announce(210, b"a".to_vec(), 0, Vec::new()).unwrap();
        assert!(p.list(211).is_empty());
    }

    #[test]
    fn refuses_what_would_exceed_its_bounds_and_changes_nothing() {
        let mut p = Presence::new();
        assert!(p.announce(1, b"a".to_vec(), 10, vec![b'x'; MAX_DESCRIPTION + 1]).is_err());
        assert!(p.is_empty());
        for i in 0..MAX_NODES {
            p.announce(1, format!("n{i}").into_bytes(), 1000, Vec::new()).unwrap();
        }
        // A known node refreshes itself at the cap.
        p.announce(2, b"n0".to_vec(), 1000, b"again".to_vec()).unwrap();
        assert_eq!(p.len(), MAX_NODES);
        // A new node at the cap evicts the entry announced longest ago, never
        // one that refreshed itself: a registry filled by entries nobody
        // refreshes cannot lock a live node out.
        p.announce(3, b"real-node".to_vec(), 1000, Vec::new()).unwrap();
        assert_eq!(p.len(), MAX_NODES);
        let ids: Vec<Vec<u8>> = p.list(3).into_iter().map(|e| e.node_id).collect();
        assert!(ids.contains(&b"real-node".to_vec()) && ids.contains(&b"n0".to_vec()));
        assert!(!ids.contains(&b"n1".to_vec()), "the stalest entry (n1, announced at 1, lowest id) made room");
    }

    #[test]
    fn node_ids_are_printable_and_bounded() {
        assert!(Presence::valid_id(b"0d9f5a0e-7c1e-4c36-9a43-9b1f3a1c2d4e"));
        assert!(!Presence::valid_id(b""));
        assert!(!Presence::valid_id(b"a b"));
        assert!(!Presence::valid_id(b"<script>"));
        assert!(!Presence::valid_id(&[b'a'; 129]));
    }
}
