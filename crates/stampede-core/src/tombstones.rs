//! A channel's tombstones: timestamps of items reclaimed early, kept as runs.
//!
//! An item reclaimed by reference count before ts_min passes it leaves a *tombstone* so that a
//! second put at its timestamp is refused as a duplicate. Tombstones are forgotten once ts_min
//! passes them ([`Tombstones::remove_below`]).
//!
//! Tombstones are stored as disjoint, non-adjacent closed runs `[start, end]`, so a stream of
//! consecutive early reclaims costs one map entry however long it grows. What this guarantees:
//!
//! - Memory is O(1) per run, and at most [`TOMBSTONE_RUNS_MAX`] runs are kept.
//! - [`Tombstones::contains`] and [`Tombstones::insert`] below the bound cost O(log runs);
//!   [`Tombstones::remove_below`] costs O(log runs) plus the runs it removes.
//! - The compaction rule: when an insert would leave more than [`TOMBSTONE_RUNS_MAX`] runs, the
//!   two neighbouring runs with the smallest gap between them (the lowest such pair on a tie) are
//!   merged into one; the gap's timestamps then count as tombstoned. That insert costs O(runs).
//!   A put into such a gap is refused as a duplicate: this trades exactness for bounded memory,
//!   and only ever affects puts into gaps between early-reclaimed items. [`Tombstones::compacted`]
//!   counts the timestamps covered this way. The lowest pair is chosen on a tie because ts_min
//!   reaches it first, so its over-coverage is forgotten soonest.

use std::collections::BTreeMap;

use crate::time::{is_item_ts, Timestamp};

/// The most runs of tombstones one channel keeps. At the limit, [`Tombstones::insert`] merges the
/// two closest neighbouring runs, which tombstones the timestamps between them too (see the module
/// doc); puts there are then refused as duplicates until ts_min passes them.
pub const TOMBSTONE_RUNS_MAX: usize = 4096;

/// The timestamps of a channel's early-reclaimed items, as a bounded set of runs.
#[derive(Default, Debug, Clone)]
pub struct Tombstones {
    /// `start -> end` of each closed run. Runs are disjoint and non-adjacent (`end + 1 < next
    /// start`), so every set of timestamps has exactly one representation and a lookup is one
    /// `range` probe. Every bound is an item timestamp (`0 ..= TS_MAX`).
    runs: BTreeMap<Timestamp, Timestamp>,
    /// Timestamps covered by `runs`, kept here so `len` never scans. At most `TS_MAX + 1`, which
    /// fits a `u64`.
    len: u64,
    /// Timestamps tombstoned by compaction rather than by `insert`, over this value's lifetime
    /// (not reset by `clear`): how much exactness the bound has cost.
    compacted: u64,
}

impl Tombstones {
    /// No tombstones.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tombstones `ts`, merging it with the runs that end at `ts - 1` or start at `ts + 1`.
    /// Returns `false` (and changes nothing) if `ts` was already tombstoned, including by
    /// compaction. If the insert leaves more than [`TOMBSTONE_RUNS_MAX`] runs, the two closest
    /// runs are merged (see the module doc).
    ///
    /// # Panics
    ///
    /// If `ts` is not an item timestamp (`0 ..= TS_MAX`); callers validate timestamps first.
    pub fn insert(&mut self, ts: Timestamp) -> bool {
        assert!(is_item_ts(ts), "tombstone ts={ts} is not an item timestamp");
        let below = self.runs.range(..=ts).next_back().map(|(&start, &end)| (start, end));
        if below.is_some_and(|(_, end)| ts <= end) {
            return false;
        }
        // `end < ts` here, so `end + 1` cannot overflow.
        let start = match below {
            Some((start, end)) if end + 1 == ts => start,
            _ => ts,
        };
        // `ts + 1` overflows only for `ts == i64::MAX`, which is not an item timestamp.
        let end = match ts.checked_add(1).and_then(|next| self.runs.remove(&next)) {
            Some(end) => end,
            None => ts,
        };
        // Overwrites the run below when `ts` extends it.
        self.runs.insert(start, end);
        self.len += 1;
        if self.runs.len() > TOMBSTONE_RUNS_MAX {
            self.compact();
        }
        #[cfg(debug_assertions)]
        self.check();
        true
    }

    /// `true` if `ts` is tombstoned. O(log runs).
    pub fn contains(&self, ts: Timestamp) -> bool {
        self.runs.range(..=ts).next_back().is_some_and(|(_, &end)| ts <= end)
    }

    /// The lowest tombstoned timestamp.
    pub fn first(&self) -> Option<Timestamp> {
        self.runs.first_key_value().map(|(&start, _)| start)
    }

    /// Forgets every tombstone below `ts_min`; a run straddling `ts_min` is cut to start there.
    /// Accepts any `ts_min`, including `INFINITY` (forget everything). O(log runs) plus the runs
    /// removed.
    pub fn remove_below(&mut self, ts_min: Timestamp) {
        match self.first() {
            Some(start) if start < ts_min => {}
            _ => return,
        }
        let kept = self.runs.split_off(&ts_min);
        let below = std::mem::replace(&mut self.runs, kept);
        for (start, end) in below {
            if end < ts_min {
                self.len -= end.abs_diff(start) + 1;
            } else {
                // Only the last run below can straddle; its part at and above `ts_min` stays.
                self.len -= ts_min.abs_diff(start);
                self.runs.insert(ts_min, end);
            }
        }
        #[cfg(debug_assertions)]
        self.check();
    }

    /// Forgets every tombstone. Keeps the [`compacted`](Self::compacted) count.
    pub fn clear(&mut self) {
        self.runs.clear();
        self.len = 0;
        #[cfg(debug_assertions)]
        self.check();
    }

    /// Number of runs stored; at most [`TOMBSTONE_RUNS_MAX`].
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Number of tombstoned timestamps, including those covered by compaction.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `true` when nothing is tombstoned.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Timestamps tombstoned by compaction rather than by [`insert`](Self::insert), ever.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Merges the two neighbouring runs with the smallest gap (the lowest pair on a tie), covering
    /// the gap. O(runs); runs only when the bound is exceeded.
    fn compact(&mut self) {
        let closest = self
            .runs
            .iter()
            .zip(self.runs.iter().skip(1))
            // Non-adjacent runs: `right_start > left_end + 1`, so the gap is at least 1.
            .map(|((&left_start, &left_end), (&right_start, &right_end))| {
                (right_start.abs_diff(left_end) - 1, left_start, right_start, right_end)
            })
            // `min_by_key` keeps the first minimum: the lowest pair wins a tie.
            .min_by_key(|&(gap, ..)| gap);
        let Some((gap, left_start, right_start, right_end)) = closest else {
            return;
        };
        self.runs.remove(&right_start);
        self.runs.insert(left_start, right_end);
        self.len += gap;
        self.compacted += gap;
    }

    /// Asserts the representation invariants: bounds are item timestamps, runs are ordered,
    /// disjoint and non-adjacent, their count is within the bound, and `len` matches them.
    #[cfg(debug_assertions)]
    fn check(&self) {
        let mut len = 0u64;
        let mut previous_end: Option<Timestamp> = None;
        for (&start, &end) in &self.runs {
            assert!(is_item_ts(start) && is_item_ts(end), "run [{start}, {end}] outside item timestamps");
            assert!(start <= end, "run [{start}, {end}] is empty");
            if let Some(previous_end) = previous_end {
                assert!(previous_end + 1 < start, "run ending at {previous_end} touches run [{start}, {end}]");
            }
            previous_end = Some(end);
            len += end.abs_diff(start) + 1;
        }
        assert!(self.runs.len() <= TOMBSTONE_RUNS_MAX, "{} runs exceed the bound", self.runs.len());
        assert_eq!(self.len, len, "len field disagrees with the runs");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::time::{INFINITY, TS_MAX};

    /// A stream of consecutive tombstones is stored as one run.
    #[test]
    fn consecutive_inserts_make_one_run() {
        let mut tombstones = Tombstones::new();
        for ts in 0..100_000 {
            assert!(tombstones.insert(ts));
        }
        assert_eq!(tombstones.runs(), 1);
        assert_eq!(tombstones.len(), 100_000);
        assert_eq!(tombstones.first(), Some(0));
        assert!(tombstones.contains(99_999));
        assert!(!tombstones.contains(100_000));
        assert!(!tombstones.insert(50_000), "a second insert reports a duplicate");
    }

    /// An insert that fills the hole between two runs merges them and both sides into one.
    #[test]
    fn out_of_order_inserts_merge_both_sides() {
        let mut tombstones = Tombstones::new();
        for ts in [5, 1, 3, 9] {
            assert!(tombstones.insert(ts));
        }
        assert_eq!(tombstones.runs(), 4);
        assert!(tombstones.insert(2));
        assert_eq!(tombstones.runs(), 3, "2 joins 1 and 3");
        assert!(tombstones.insert(4));
        assert_eq!(tombstones.runs(), 2, "4 joins [1, 3] and 5");
        assert!(tombstones.insert(8));
        assert!(tombstones.insert(6));
        assert!(tombstones.insert(7));
        assert_eq!(tombstones.runs(), 1);
        assert_eq!(tombstones.len(), 9);
        assert!(!tombstones.contains(0) && !tombstones.contains(10));
        assert!((1..=9).all(|ts| tombstones.contains(ts)));
    }

    /// `remove_below` forgets runs below ts_min and cuts a straddling run to start at ts_min.
    #[test]
    fn remove_below_cuts_a_straddling_run() {
        let mut tombstones = Tombstones::new();
        for ts in (0..=3).chain(10..=20).chain([30]) {
            tombstones.insert(ts);
        }
        tombstones.remove_below(15);
        assert_eq!(tombstones.first(), Some(15));
        assert_eq!(tombstones.runs(), 2);
        assert_eq!(tombstones.len(), 7);
        assert!(!tombstones.contains(14) && tombstones.contains(15) && tombstones.contains(20));
        tombstones.remove_below(-1);
        assert_eq!(tombstones.len(), 7, "a ts_min below every tombstone forgets nothing");
        tombstones.remove_below(INFINITY);
        assert!(tombstones.is_empty());
        assert_eq!(tombstones.len(), 0);
    }

    /// Timestamps at the top of the range neither overflow nor panic.
    #[test]
    fn handles_timestamps_near_the_maximum() {
        let mut tombstones = Tombstones::new();
        assert!(tombstones.insert(TS_MAX));
        assert!(tombstones.insert(TS_MAX - 2));
        assert!(tombstones.insert(0));
        assert!(tombstones.insert(TS_MAX - 1));
        assert_eq!(tombstones.runs(), 2);
        assert_eq!(tombstones.len(), 4);
        assert!(tombstones.contains(TS_MAX) && !tombstones.contains(INFINITY) && !tombstones.contains(i64::MIN));
        tombstones.remove_below(TS_MAX);
        assert_eq!((tombstones.first(), tombstones.len()), (Some(TS_MAX), 1));
        tombstones.clear();
        assert!(tombstones.is_empty() && tombstones.first().is_none());
    }

    /// Past the bound, the closest runs merge: runs stay within `TOMBSTONE_RUNS_MAX`, the gap is
    /// tombstoned and refused, and `compacted` counts exactly the gap timestamps.
    #[test]
    fn compaction_at_the_bound_merges_the_closest_runs() {
        let mut tombstones = Tombstones::new();
        // Runs every 4 timestamps (gaps of 3), except one gap of 1 between 4000 and 4002.
        let stamps: Vec<Timestamp> = (0..TOMBSTONE_RUNS_MAX as i64).map(|i| i * 4).chain([4002]).collect();
        for &ts in &stamps[..TOMBSTONE_RUNS_MAX] {
            assert!(tombstones.insert(ts));
        }
        assert_eq!((tombstones.runs(), tombstones.compacted()), (TOMBSTONE_RUNS_MAX, 0));
        assert!(tombstones.insert(4002));
        assert_eq!(tombstones.runs(), TOMBSTONE_RUNS_MAX);
        assert_eq!(tombstones.compacted(), 1, "the smallest gap, 4001, was covered");
        assert!(tombstones.contains(4001));
        assert!(!tombstones.insert(4001), "a put into a compacted gap is a duplicate");
        assert!(!tombstones.contains(1), "other gaps stay exact");

        // Keep going: every new run forces a merge; runs never exceed the bound and len accounts
        // for every inserted and every compacted timestamp.
        let mut inserted = stamps.len() as u64;
        for i in 0..512 {
            assert!(tombstones.insert(1_000_000 + i * 10));
            inserted += 1;
            assert!(tombstones.runs() <= TOMBSTONE_RUNS_MAX);
        }
        assert_eq!(tombstones.len(), inserted + tombstones.compacted());
        assert!(tombstones.compacted() > 1);
    }

    /// One step of the model test.
    #[derive(Clone, Debug)]
    enum Op {
        Insert(Timestamp),
        RemoveBelow(Timestamp),
        Contains(Timestamp),
    }

    fn ops(timestamps: impl Strategy<Value = Timestamp> + Clone) -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            4 => timestamps.clone().prop_map(Op::Insert),
            1 => timestamps.clone().prop_map(Op::RemoveBelow),
            2 => timestamps.prop_map(Op::Contains),
        ];
        proptest::collection::vec(op, 0..300)
    }

    /// Applies `ops` to `Tombstones` and to a `BTreeSet` model and asserts they agree throughout.
    fn agrees_with_model(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut tombstones = Tombstones::new();
        let mut model = BTreeSet::new();
        for op in ops {
            match op {
                Op::Insert(ts) => prop_assert_eq!(tombstones.insert(ts), model.insert(ts)),
                Op::RemoveBelow(ts_min) => {
                    tombstones.remove_below(ts_min);
                    model = model.split_off(&ts_min);
                }
                Op::Contains(ts) => prop_assert_eq!(tombstones.contains(ts), model.contains(&ts)),
            }
            prop_assert_eq!(tombstones.len(), model.len() as u64);
            prop_assert_eq!(tombstones.first(), model.first().copied());
            prop_assert_eq!(tombstones.is_empty(), model.is_empty());
        }
        prop_assert_eq!(tombstones.compacted(), 0);
        Ok(())
    }

    proptest! {
        /// Below the bound, tombstones behave exactly like a set of small timestamps.
        #[test]
        fn matches_a_set_for_small_timestamps(ops in ops(0..200i64)) {
            agrees_with_model(ops)?;
        }

        /// The same holds at both ends of the item range, where `ts ± 1` could overflow.
        #[test]
        fn matches_a_set_at_the_range_edges(ops in ops(prop_oneof![0..100i64, TS_MAX - 100..=TS_MAX])) {
            agrees_with_model(ops)?;
        }
    }
}
