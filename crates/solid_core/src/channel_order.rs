//! The order in which a claim visits channels.
//!
//! A claim script takes jobs from the channels in the order it is given, so
//! the order decides who is served first when several channels have work:
//! - `Weighted`: smooth weighted round-robin picks the first channel; the rest
//!   follow by weight. Over any `sum(weights)` consecutive claims each channel
//!   is first exactly `weight` times, so a low-weight channel is never starved
//!   (the bound), and an idle channel never blocks the others.
//! - `Priority`: always the configured order; later channels run only when
//!   earlier ones are empty.
//! - `Shuffle`: a uniformly random order per claim.

use rand::seq::SliceRandom;

use crate::envelope::validate_channel;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelOrder {
    Weighted,
    Priority,
    Shuffle,
}

impl ChannelOrder {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "weighted" => Ok(Self::Weighted),
            "priority" => Ok(Self::Priority),
            "shuffle" => Ok(Self::Shuffle),
            other => Err(Error::Invalid(format!("unknown channel order {other:?}: use weighted, priority or shuffle"))),
        }
    }
}

/// Produces the channel visiting order for each claim. Owned by the single
/// fetcher thread of a node, so it needs no lock.
#[derive(Debug)]
pub struct ChannelSelector {
    order: ChannelOrder,
    names: Vec<String>,
    weights: Vec<i64>,
    current: Vec<i64>,
    by_weight: Vec<usize>,
}

impl ChannelSelector {
    pub fn new(channels: Vec<(String, u32)>, order: ChannelOrder) -> Result<Self> {
        if channels.is_empty() {
            return Err(Error::Invalid("at least one channel is required".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for (name, weight) in &channels {
            validate_channel(name)?;
            if *weight == 0 {
                return Err(Error::Invalid(format!("channel {name:?} has weight 0: weights start at 1")));
            }
            if !seen.insert(name.clone()) {
                return Err(Error::Invalid(format!("channel {name:?} is listed twice")));
            }
        }
        let weights: Vec<i64> = channels.iter().map(|(_, w)| *w as i64).collect();
        let mut by_weight: Vec<usize> = (0..channels.len()).collect();
        by_weight.sort_by_key(|&i| std::cmp::Reverse(weights[i]));
        Ok(ChannelSelector {
            order,
            names: channels.into_iter().map(|(n, _)| n).collect(),
            current: vec![0; weights.len()],
            weights,
            by_weight,
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Indexes into `names()` in visiting order for the next claim.
    pub fn next_order(&mut self) -> Vec<usize> {
        match self.order {
            ChannelOrder::Priority => (0..self.names.len()).collect(),
            ChannelOrder::Shuffle => {
                let mut v: Vec<usize> = (0..self.names.len()).collect();
                v.shuffle(&mut rand::thread_rng());
                v
            }
            ChannelOrder::Weighted => {
                let total: i64 = self.weights.iter().sum();
                let mut best = 0;
                for i in 0..self.weights.len() {
                    self.current[i] += self.weights[i];
                    if self.current[i] > self.current[best] {
                        best = i;
                    }
                }
                self.current[best] -= total;
                let mut v = Vec::with_capacity(self.names.len());
                v.push(best);
                v.extend(self.by_weight.iter().copied().filter(|&i| i != best));
                v
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(order: ChannelOrder) -> ChannelSelector {
        ChannelSelector::new(vec![("critical".into(), 3), ("default".into(), 1), ("low".into(), 1)], order).unwrap()
    }

    #[test]
    fn weighted_is_bounded_round_robin() {
        let mut s = sel(ChannelOrder::Weighted);
        let mut firsts = [0; 3];
        for _ in 0..50 {
            let o = s.next_order();
            assert_eq!(o.len(), 3);
            firsts[o[0]] += 1;
        }
        assert_eq!(firsts, [30, 10, 10]);
        // Within any window of sum(weights) claims, every channel leads once.
        let mut s = sel(ChannelOrder::Weighted);
        let window: Vec<usize> = (0..5).map(|_| s.next_order()[0]).collect();
        for i in 0..3 {
            assert!(window.contains(&i), "{window:?}");
        }
    }

    #[test]
    fn priority_and_shuffle() {
        let mut p = sel(ChannelOrder::Priority);
        assert_eq!(p.next_order(), vec![0, 1, 2]);
        let mut s = sel(ChannelOrder::Shuffle);
        let mut seen_first = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut o = s.next_order();
            seen_first.insert(o[0]);
            o.sort();
            assert_eq!(o, vec![0, 1, 2]);
        }
        assert_eq!(seen_first.len(), 3);
    }

    #[test]
    fn rejects_bad_channel_lists() {
        assert!(ChannelSelector::new(vec![], ChannelOrder::Weighted).is_err());
        assert!(ChannelSelector::new(vec![("a".into(), 0)], ChannelOrder::Weighted).is_err());
        assert!(ChannelSelector::new(vec![("a".into(), 1), ("a".into(), 2)], ChannelOrder::Weighted).is_err());
        assert!(ChannelSelector::new(vec![("a b".into(), 1)], ChannelOrder::Weighted).is_err());
        assert!(ChannelOrder::parse("fifo").is_err());
    }
}
