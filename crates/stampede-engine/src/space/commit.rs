//! The operation path: running an operation on a container with its acting task locked, and
//! committing its effects to the progress machine as one batch.
//!
//! Guarantees (see the module doc of `space`): a new claim is reported before the claim it
//! replaces is released; the acting task stays at or above ts_min, asserted under the progress
//! lock; other tasks' open changes are applied after, their claims parked at
//! [`Location::Handover`] meanwhile; every change ends in [`Space::progressed`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::sync::lock_traced;
use stampede_core::{Effects, Item, Location, OpenChange, OpenChanges, Result, TaskState, Timestamp, Update, Updates};

use super::containers::Listing;
use super::tracking::{Due, Tracking};
use super::{ContainerState, Shared, Space, TaskShared};

impl Space {
    // ---- the operation path ------------------------------------------------------------------

    /// Runs `op` on a container's state with the acting task locked (it reports its effects into
    /// the `Effects` it is handed), then commits them: the acting task's open changes and every
    /// claim update while both are locked, other tasks' open changes after, then a GC sweep if
    /// ts_min advanced. Returns the op's value and the items it reclaimed itself (for the
    /// caller's GC handlers).
    pub(crate) fn run<S: ContainerState, R>(
        &self,
        container: &Shared<S>,
        task: &TaskShared,
        op: impl FnOnce(&mut S, &mut TaskState, Timestamp, &mut Effects) -> Result<R>,
    ) -> Result<(R, Vec<Item>)> {
        let mut guard = lock_traced(&container.state);
        let mut state = lock_traced(&task.state);
        // Filled and read in place: the effects are a few hundred bytes, not moved around.
        let mut fx = Effects::default();
        let value = op(&mut guard, &mut state, self.ts_min(), &mut fx)?;
        let mut others = OpenChanges::new();
        for change in fx.opens.drain(..) {
            if change.task == state.id() {
                open_change(&mut state, change);
            } else {
                others.push(change);
            }
        }
        park_handovers(&mut fx.claims, &others);
        let due = self.commit(&fx.claims, fx.put, container.listing(&guard), Some(&state));
        drop(state);
        drop(guard);
        self.apply_others(others);
        self.sweep_due(due);
        Ok((value, fx.reclaimed))
    }

    /// Applies one operation's claim updates, put watermark and sweep-index listing as one step;
    /// asserts that the acting task (still locked by the caller) stays at or above ts_min. If
    /// ts_min advanced, returns the channels due for a sweep, taken off the index under the same
    /// lock (hand them to [`Space::sweep_due`]).
    pub(super) fn commit(
        &self,
        claims: &[Update],
        put: Option<Timestamp>,
        listing: Option<Listing<'_>>,
        acting: Option<&TaskState>,
    ) -> Option<Due> {
        if claims.is_empty() && put.is_none() && listing.is_none() {
            return None;
        }
        let mut tracking = lock_traced(&self.tracking);
        tracking.list(listing);
        let mut advanced = tracking.apply(claims);
        if let Some(ts) = put {
            advanced = tracking.progress_mut().note_put(ts).or(advanced);
        }
        advanced = self.publish(&mut tracking).or(advanced);
        if let Some(state) = acting {
            assert_visible(state, tracking.progress().ts_min());
        }
        let due = advanced.map(|ts_min| tracking.take_due(ts_min));
        drop(tracking);
        self.progressed();
        due
    }

    /// Wakes what waits on progress after a claim or the graph changed (call with the progress
    /// lock released): joins, and gets whose channel's horizon passed what they wait for.
    pub(super) fn progressed(&self) {
        self.progress.notify_waiters();
        if self.horizon_waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        // Checked under the registry's lock (it comes before the progress lock): no allocation
        // on this path, which runs after every put while a get is blocked.
        for (ch, thresholds) in self.horizon_waiters.lock().values() {
            let (Some(ch), Some(&threshold)) = (ch.upgrade(), thresholds.iter().min()) else { continue };
            if self.horizon(&ch) > threshold {
                ch.changed.notify();
            }
        }
    }

    /// Settles the participant ([`Tracking::settle`]), then mirrors ts_min for lock-free
    /// readers (call with the progress lock held). Returns the new ts_min if settling advanced
    /// it.
    pub(super) fn publish(&self, tracking: &mut Tracking) -> Option<Timestamp> {
        let advanced = tracking.settle();
        self.ts_min.store(tracking.progress().ts_min(), Ordering::Release);
        advanced
    }

    /// Applies the open changes of tasks other than the acting one, each under that task's lock
    /// together with the release of the claim parked for it at [`Location::Handover`].
    pub(super) fn apply_others(&self, others: impl IntoIterator<Item = OpenChange>) {
        for change in others {
            debug_assert!(!change.opened, "an operation only ever opens items for its acting task");
            let release = [Update { location: Location::Handover(change.task), ts: change.ts, delta: -1 }];
            let task = self.tasks.lock().get(&change.task).and_then(Weak::upgrade);
            let due = match &task {
                Some(task) => {
                    let mut state = task.state.lock();
                    if !state.is_closed() {
                        open_change(&mut state, change);
                    }
                    self.commit(&release, None, None, Some(&state))
                }
                // The task is gone: nothing can read its visibility any more.
                None => self.commit(&release, None, None, None),
            };
            self.sweep_due(due);
        }
    }

    // ---- invariants --------------------------------------------------------------------------

    /// Checks, with each task and the progress machine locked together, that every live task's
    /// visibility is at or above ts_min (docs/PROGRESS.md, "Invariants and why they hold").
    /// Panics naming the task otherwise.
    pub(crate) fn check_invariants(&self) {
        let tasks: Vec<Arc<TaskShared>> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        for task in tasks {
            let state = task.state.lock();
            assert_visible(&state, self.tracking.lock().progress().ts_min());
        }
    }
}

/// Parks, at the front of `claims`, one claim at [`Location::Handover`] for every item the
/// operation took away from another task while it was open there: the claim covers the item
/// until that task's state no longer counts it (released by [`Space::apply_others`]).
pub(super) fn park_handovers(claims: &mut Updates, others: &[OpenChange]) {
    if others.is_empty() {
        return;
    }
    let mut batch: Updates = others
        .iter()
        .map(|change| Update { location: Location::Handover(change.task), ts: change.ts, delta: 1 })
        .collect();
    batch.extend(claims.drain(..));
    *claims = batch;
}

/// Invariant 4 of docs/PROGRESS.md, "Invariants and why they hold", checked with the task and
/// the progress machine locked together: a live task's visibility is at or above ts_min.
fn assert_visible(state: &TaskState, ts_min: Timestamp) {
    assert!(
        state.is_closed() || state.visibility() >= ts_min,
        "invariant: {} has visibility {} below ts_min {ts_min}",
        state.name(),
        state.visibility()
    );
}

fn open_change(state: &mut TaskState, change: OpenChange) {
    if change.opened {
        state.open_item(change.ts);
    } else {
        state.close_item(change.ts);
    }
}
