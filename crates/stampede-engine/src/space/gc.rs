//! Settledness and GC: the horizons below which a channel is settled, the sweep of what ts_min
//! passed, the GC handlers, and the registrations of gets blocked until a horizon moves.
//!
//! No item below ts_min outlives the sweeps (a channel ts_min passed again while it was swept is
//! swept again); GC handlers run outside all locks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use stampede_core::{ContainerKey, Item, Timestamp, INFINITY};

use super::containers::Listing;
use super::tracking::Due;
use super::{ChannelShared, ReclaimHandler, Shared, Space};

impl Space {
    // ---- settledness (docs/CORRELATION.md, "Settled timestamps") -----------------------------

    /// Every timestamp below the returned one is settled on `ch`: no task can still put it.
    /// Computed by the progress machine (see `stampede_core::progress`).
    pub(crate) fn settled_below(&self, ch: &ChannelShared) -> Timestamp {
        self.tracking.lock().progress_mut().settled_below(ch.key)
    }

    /// [`settled_below`](Self::settled_below) without the progress lock when the producer set is
    /// open (the horizon is then ts_min).
    pub(crate) fn horizon(&self, ch: &ChannelShared) -> Timestamp {
        if ch.producers_closed.load(Ordering::SeqCst) {
            self.settled_below(ch)
        } else {
            self.ts_min()
        }
    }

    // ---- GC ----------------------------------------------------------------------------------

    /// Reclaims everything below ts_min in the channels the sweep index lists below `ts_min`.
    /// Returns the number of items reclaimed.
    ///
    /// Each due channel is taken off the index, swept with the ts_min current under its lock and
    /// listed again under what it still holds; if ts_min moved past that meanwhile (a concurrent
    /// sweep could not see it), it is swept again — so no item below ts_min outlives the sweeps.
    pub(crate) fn sweep(&self, ts_min: Timestamp) -> usize {
        let due = self.tracking.lock().take_due(ts_min);
        self.sweep_due(Some(due))
    }

    /// Sweeps channels taken off the index (by [`Tracking::take_due`]) because ts_min passed
    /// their listing; `None` (ts_min did not advance) does nothing.
    ///
    /// [`Tracking::take_due`]: super::tracking::Tracking::take_due
    pub(super) fn sweep_due(&self, due: Option<Due>) -> usize {
        let Some(due) = due else { return 0 };
        let _sweeping = crate::trace::span(crate::trace::Kind::GcSweep, 0, 0, 0);
        let mut total = 0;
        // Inline: a sweep usually reclaims a frame or a few (no allocation per sweep).
        let mut items = smallvec::SmallVec::<[Item; 4]>::new();
        for (popped, key) in due {
            let Some(ch) = self.channels.read().get(&key).cloned() else { continue };
            loop {
                let again = {
                    let mut state = ch.state.lock();
                    state.reclaim_below(self.ts_min(), &mut items);
                    match state.oldest() {
                        // The common case: emptied, and no put listed it again since the pop.
                        None if ch.listed_at.load(Ordering::Acquire) == popped => {
                            ch.listed_at.store(INFINITY, Ordering::Release);
                            false
                        }
                        None => {
                            self.tracking.lock().unlist(key, &ch.listed_at);
                            false
                        }
                        Some(oldest) => {
                            let mut tracking = self.tracking.lock();
                            tracking.list(Some(Listing { key, listed_at: &ch.listed_at, oldest }));
                            oldest < tracking.progress().ts_min()
                        }
                    }
                };
                total += items.len();
                self.reclaimed(&ch, &items);
                items.clear();
                if !again {
                    break;
                }
            }
        }
        total
    }

    /// Accounts for the items restored from a channel's disk tier once it is registered: they
    /// count as put (the watermark rises to `newest`, so ts_min can pass them and a bounded
    /// channel they fill can drain) and are listed for GC; what ts_min is already past is swept.
    /// Restored items are put in before the channel is registered (nothing can attach yet) and
    /// listed after (a sweep before would not find the channel and drop its listing).
    pub(crate) fn list_restored(&self, ch: &ChannelShared, newest: Timestamp) {
        let due = {
            let state = ch.state.lock();
            let Some(oldest) = state.oldest() else { return };
            let mut tracking = self.tracking.lock();
            tracking.list(Some(Listing { key: ch.key, listed_at: &ch.listed_at, oldest }));
            // ts_min may have passed `newest` since the items were admitted: then nothing rises.
            if newest >= tracking.progress().ts_min() {
                tracking.progress_mut().note_put(newest);
            }
            self.publish(&mut tracking);
            let ts_min = tracking.progress().ts_min();
            tracking.take_due(ts_min)
        };
        self.progressed();
        self.sweep_due(Some(due));
    }

    /// Registers a get blocked on `ch` until the returned guard drops: `ch.changed` is notified
    /// whenever, after a progress change, the channel's horizon ([`Space::horizon`]) is above
    /// `threshold`. An exact get of `t` waits for `t` (ts_min past it: `Reclaimed`; settled: a
    /// final `NotAvailable`), a wildcard get for [`TS_MAX`] (settled everywhere: nothing more can
    /// arrive).
    ///
    /// [`TS_MAX`]: stampede_core::TS_MAX
    pub(crate) fn wait_horizon(self: &Arc<Self>, ch: &Arc<ChannelShared>, threshold: Timestamp) -> HorizonWait {
        let mut waiters = self.horizon_waiters.lock();
        self.horizon_waiting.fetch_add(1, Ordering::SeqCst);
        waiters.entry(ch.key).or_insert_with(|| (Arc::downgrade(ch), Thresholds::new())).1.push(threshold);
        HorizonWait { space: self.clone(), key: ch.key, threshold }
    }

    /// Runs GC handlers for `items` reclaimed from the container `name` and wakes blocked puts.
    pub(crate) fn reclaimed<S>(&self, shared: &Shared<S>, items: &[Item]) {
        if items.is_empty() {
            return;
        }
        if let Some(disk) = &shared.disk {
            disk.reclaimed(items);
        }
        shared.freed.notify();
        let local: Vec<ReclaimHandler> = shared.handlers.read().clone();
        let global: Vec<ReclaimHandler> = self.handlers.read().clone();
        let name = shared.trace_name();
        for item in items {
            let (ts, bytes) = (item.ts as u64, item.payload.len() as u64);
            crate::trace::event(crate::trace::Kind::Reclaim, crate::trace::Phase::Instant, name, ts, bytes);
            if !local.is_empty() || !global.is_empty() {
                let _handling = crate::trace::span(crate::trace::Kind::GcHandler, name, ts, bytes);
                for handler in local.iter().chain(&global) {
                    handler(&shared.name, item);
                }
            }
        }
    }
}

/// The thresholds of the gets blocked on one channel, with multiplicity (inline: a channel rarely
/// has more than a few blocked gets; the minimum is found by a scan).
pub(super) type Thresholds = smallvec::SmallVec<[Timestamp; 4]>;

/// A blocked get's registration for horizon moves (see [`Space::wait_horizon`]).
pub(crate) struct HorizonWait {
    space: Arc<Space>,
    key: ContainerKey,
    threshold: Timestamp,
}

impl Drop for HorizonWait {
    fn drop(&mut self) {
        let mut waiters = self.space.horizon_waiters.lock();
        self.space.horizon_waiting.fetch_sub(1, Ordering::SeqCst);
        if let Some((_, thresholds)) = waiters.get_mut(&self.key) {
            if let Some(i) = thresholds.iter().position(|&t| t == self.threshold) {
                thresholds.swap_remove(i);
            }
            if thresholds.is_empty() {
                waiters.remove(&self.key);
            }
        }
    }
}
