//! A multiset of timestamps with its minimum at hand: the building block of ts_min.
//!
//! Cost: each change is one ordered-map operation; the minimum is never recomputed by a scan.

use std::collections::BTreeMap;

use crate::time::{show, Timestamp};

/// A multiset of timestamps (claims) with its minimum at hand.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    counts: BTreeMap<Timestamp, i64>,
}

impl Claims {
    /// Adds `delta` (possibly negative) claims at `ts`. Panics if a claim is released that was
    /// never made: that would be a bookkeeping bug that could let GC reclaim a reachable item.
    pub fn apply_count(&mut self, ts: Timestamp, delta: i64) {
        let count = self.counts.entry(ts).or_insert(0);
        *count += delta;
        assert!(*count >= 0, "claim count at ts={} fell below zero", show(ts));
        if *count == 0 {
            self.counts.remove(&ts);
        }
    }

    /// Adds one claim at `ts`.
    pub fn add(&mut self, ts: Timestamp) {
        self.apply_count(ts, 1);
    }

    /// Releases one claim at `ts`.
    pub fn remove(&mut self, ts: Timestamp) {
        self.apply_count(ts, -1);
    }

    /// The lowest claim, if any.
    pub fn min(&self) -> Option<Timestamp> {
        self.counts.keys().next().copied()
    }

    /// Number of claims held.
    pub fn len(&self) -> usize {
        self.counts.values().map(|&c| c as usize).sum()
    }

    /// `true` when no claim is held.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}
