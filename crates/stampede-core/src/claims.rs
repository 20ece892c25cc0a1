//! ts_min as a multiset of explicit claims (SPEC §3).
//!
//! A *claim* says "something at this timestamp may still be gotten or put": a task's visibility,
//! or the lowest unseen-or-open item of an input connection, or a pending queue item. ts_min is
//! the lowest claim. Claims change only by [`ClaimUpdate`]s — `(timestamp, ±count)` pairs in the
//! manner of Timely Dataflow's progress tracking — so the same bookkeeping can later be driven by
//! a distributed protocol that ships updates between nodes. Locally the rule "report the new claim
//! before releasing the one that covered it" holds because a whole operation's updates are applied
//! under one lock.
//!
//! Cost: each update is one ordered-map operation; ts_min is never recomputed by a scan.

use std::collections::BTreeMap;

use crate::time::{show, Timestamp};

/// One change to a multiset of claims: `delta` claims appear (+) or vanish (−) at `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimUpdate {
    pub ts: Timestamp,
    pub delta: i64,
}

/// Updates produced by one operation, in the order they must be applied. Inline: an operation
/// moves at most a few claims, and this path runs on every put, get and consume.
pub type ClaimUpdates = smallvec::SmallVec<[ClaimUpdate; 4]>;

/// Appends the updates that move one claim from `from` to `to` (either may be absent).
pub fn push_move(updates: &mut ClaimUpdates, from: Option<Timestamp>, to: Option<Timestamp>) {
    if from == to {
        return;
    }
    // New claim first, then the release: whoever creates a claim reports it before releasing
    // the one that covered it.
    if let Some(ts) = to {
        updates.push(ClaimUpdate { ts, delta: 1 });
    }
    if let Some(ts) = from {
        updates.push(ClaimUpdate { ts, delta: -1 });
    }
}

/// A multiset of timestamps with its minimum at hand.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    counts: BTreeMap<Timestamp, i64>,
}

impl Claims {
    /// Applies one update. Panics if a claim is released that was never made: that would be a
    /// bookkeeping bug that could let GC reclaim a reachable item.
    pub fn apply(&mut self, update: ClaimUpdate) {
        let count = self.counts.entry(update.ts).or_insert(0);
        *count += update.delta;
        assert!(*count >= 0, "claim count at ts={} fell below zero", show(update.ts));
        if *count == 0 {
            self.counts.remove(&update.ts);
        }
    }

    /// Adds one claim at `ts`.
    pub fn add(&mut self, ts: Timestamp) {
        self.apply(ClaimUpdate { ts, delta: 1 });
    }

    /// Releases one claim at `ts`.
    pub fn remove(&mut self, ts: Timestamp) {
        self.apply(ClaimUpdate { ts, delta: -1 });
    }

    /// Moves one claim from `from` to `to` (either may be absent), in [`push_move`]'s order
    /// (applied directly: this runs per connection on every put).
    pub fn move_claim(&mut self, from: Option<Timestamp>, to: Option<Timestamp>) {
        if from == to {
            return;
        }
        if let Some(ts) = to {
            self.add(ts);
        }
        if let Some(ts) = from {
            self.remove(ts);
        }
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

/// The global ts_min of one node: the minimum of every claim reported to it.
///
/// With no claims at all (no task, no unconsumed item) ts_min stays where it was: a future root
/// task may still start there. ts_min never moves backwards (asserted).
#[derive(Debug, Default)]
pub struct Tracker {
    claims: Claims,
    ts_min: Timestamp,
}

impl Tracker {
    /// A tracker at ts_min 0 with no claims.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Current ts_min.
    pub fn ts_min(&self) -> Timestamp {
        self.ts_min
    }

    /// Applies one operation's updates; returns the new ts_min if it advanced.
    pub fn apply(&mut self, updates: &[ClaimUpdate]) -> Option<Timestamp> {
        if updates.is_empty() {
            return None;
        }
        for &update in updates {
            assert!(
                update.delta < 0 || update.ts >= self.ts_min,
                "claim at ts={} reported below ts_min {}",
                show(update.ts),
                show(self.ts_min)
            );
            self.claims.apply(update);
        }
        let new = self.claims.min().unwrap_or(self.ts_min);
        assert!(new >= self.ts_min, "ts_min moved backwards");
        if new > self.ts_min {
            self.ts_min = new;
            Some(new)
        } else {
            None
        }
    }

    /// Number of claims held (tasks plus channels and queues with unconsumed items).
    pub fn claim_count(&self) -> usize {
        self.claims.len()
    }
}
