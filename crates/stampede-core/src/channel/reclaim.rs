//! Reclamation of a channel's items: every item below ts_min (TGC), and single items early — once
//! their reference count is reached or, under [`Retention::CurrentReaders`], once no connection
//! holds them — their timestamps kept as tombstones until ts_min passes them.

use crate::channel::{ChannelState, Retention, Stored};
use crate::effects::{Effects, OpenChange};
use crate::item::Item;
use crate::progress::{push_move, Location};
use crate::time::{show, Timestamp};

impl ChannelState {
    /// Reclaims every item below `ts_min` (TGC) into `reclaimed` and forgets tombstones below it.
    /// Work is proportional to what is reclaimed.
    pub fn reclaim_below(&mut self, ts_min: Timestamp, reclaimed: &mut impl Extend<Item>) {
        debug_assert!(
            self.inputs.values().all(|input| input.claim().is_none_or(|claim| claim >= ts_min)),
            "channel \"{}\" has an unconsumed item below ts_min {}",
            self.name,
            show(ts_min)
        );
        while let Some(entry) = self.items.first_entry() {
            if *entry.key() >= ts_min {
                break;
            }
            let (ts, stored) = entry.remove_entry();
            self.live_bytes -= stored.payload.len();
            self.reclaimed += 1;
            reclaimed.extend([Item { ts, payload: stored.payload }]);
        }
        if let Some(in_memory) = self.in_memory.as_mut() {
            *in_memory = in_memory.split_off(&ts_min);
        }
        self.tombstones.remove_below(ts_min);
        debug_assert!(self.oldest().is_none_or(|oldest| oldest >= ts_min), "an item survived a sweep below ts_min");
    }

    /// Counts one consumption of the item at `ts` (unseen/open → consumed on one connection).
    pub(super) fn count_consumption(&mut self, ts: Timestamp, fx: &mut Effects) {
        self.release_holder(ts, true, fx);
    }

    /// One connection stops holding the item at `ts`, by consuming it (`consumed`, which counts
    /// against its reference count) or by detaching; reclaims it early if it became garbage.
    pub(super) fn release_holder(&mut self, ts: Timestamp, consumed: bool, fx: &mut Effects) {
        let Some(stored) = self.items.get_mut(&ts) else { return };
        stored.holders -= 1;
        if consumed {
            if let Some(refs_left) = stored.refs_left.as_mut() {
                *refs_left = refs_left.saturating_sub(1);
            }
        }
        if is_garbage(self.retention, stored) {
            self.reclaim_early(ts, fx);
        }
    }

    /// Reclaims the item at `ts` early if its reference count is reached or, under
    /// [`Retention::CurrentReaders`], no connection holds it any more. Its timestamp is kept as a
    /// tombstone until ts_min passes it, so it cannot be put again.
    pub(super) fn reclaim_if_garbage(&mut self, ts: Timestamp, fx: &mut Effects) {
        if self.items.get(&ts).is_some_and(|stored| is_garbage(self.retention, stored)) {
            self.reclaim_early(ts, fx);
        }
    }

    /// Reclaims the present item at `ts` now, keeping its timestamp as a tombstone.
    fn reclaim_early(&mut self, ts: Timestamp, fx: &mut Effects) {
        let stored = self.items.remove(&ts).expect("item present");
        if let Some(in_memory) = self.in_memory.as_mut() {
            in_memory.remove(&ts);
        }
        self.live_bytes -= stored.payload.len();
        self.reclaimed += 1;
        self.tombstones.insert(ts);
        for (&conn, input) in self.inputs.iter_mut() {
            let before = input.claim();
            let was_open = input.open.remove(&ts);
            if was_open {
                fx.opens.push(OpenChange { task: input.task, ts, opened: false });
            }
            let was_unseen = !was_open && input.unseen.remove(&ts);
            input.counts.skipped += u64::from(was_unseen);
            if was_open || was_unseen {
                push_move(&mut fx.claims, Location::Input(conn), before, input.claim());
            }
        }
        fx.reclaimed.push(Item { ts, payload: stored.payload });
    }
}

/// `true` when an item's reference count is reached or, under [`Retention::CurrentReaders`], no
/// connection holds it any more.
fn is_garbage(retention: Retention, stored: &Stored) -> bool {
    stored.refs_left == Some(0) || (retention == Retention::CurrentReaders && stored.holders == 0)
}
