//! A task's virtual time and visibility (SPEC §3).
//!
//! `visibility = min(virtual_time, timestamps of items open on any of the task's input
//! connections)`. The task's claim on ts_min is its visibility; every method that changes the
//! visibility returns the [`ClaimUpdates`] that move that claim. Invariant (asserted):
//! `visibility <= virtual_time`.

use std::collections::BTreeMap;

use crate::claims::{push_move, ClaimUpdates};
use crate::error::{Error, Result};
use crate::time::{Timestamp, INFINITY};

/// Identifies a task within a node.
pub type TaskId = u64;

/// Virtual time and open items of one task.
#[derive(Debug)]
pub struct TaskState {
    id: TaskId,
    name: String,
    virtual_time: Timestamp,
    /// Timestamps open on the task's input connections, with multiplicity (the same timestamp
    /// may be open on several connections).
    open: BTreeMap<Timestamp, u32>,
    closed: bool,
}

impl TaskState {
    /// A task at `virtual_time`; the caller has checked the creation rule (root: `>= ts_min`,
    /// child: `>= visibility(parent)`). Returns the task and its initial claim.
    pub fn new(id: TaskId, virtual_time: Timestamp) -> (TaskState, ClaimUpdates) {
        assert!(virtual_time >= 0, "virtual time must not be negative");
        let task = TaskState { id, name: format!("task {id}"), virtual_time, open: BTreeMap::new(), closed: false };
        let mut updates = ClaimUpdates::new();
        push_move(&mut updates, None, Some(virtual_time));
        (task, updates)
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The name used in error messages ("task 7").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        self.virtual_time
    }

    /// `min(virtual_time, open item timestamps)`.
    pub fn visibility(&self) -> Timestamp {
        let lowest_open = self.open.keys().next().copied().unwrap_or(INFINITY);
        lowest_open.min(self.virtual_time)
    }

    /// `true` once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Fails `Closed` once the task is closed.
    pub fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed { name: self.name.clone(), reason: "the task was closed" });
        }
        Ok(())
    }

    /// Sets the virtual time; `v` must be `>= visibility`.
    pub fn set_virtual_time(&mut self, v: Timestamp) -> Result<ClaimUpdates> {
        self.check_open()?;
        let before = self.visibility();
        if v < before {
            return Err(Error::BelowVisibility {
                op: "set_virtual_time",
                name: self.name.clone(),
                ts: v,
                what: "the task's visibility",
                limit: before,
            });
        }
        self.virtual_time = v;
        Ok(self.visibility_moved(before))
    }

    /// Checks a child's initial virtual time: `>= visibility(self)`.
    pub fn check_spawn(&self, virtual_time: Timestamp) -> Result<()> {
        self.check_open()?;
        let visibility = self.visibility();
        if virtual_time < visibility {
            return Err(Error::BelowVisibility {
                op: "spawn",
                name: self.name.clone(),
                ts: virtual_time,
                what: "the task's visibility",
                limit: visibility,
            });
        }
        Ok(())
    }

    /// Checks a put's timestamp against the visibility (`ts >= visibility`).
    pub fn check_put(&self, container: &str, ts: Timestamp) -> Result<()> {
        self.check_open()?;
        let visibility = self.visibility();
        if ts < visibility {
            return Err(Error::BelowVisibility {
                op: "put",
                name: container.to_owned(),
                ts,
                what: "the task's visibility",
                limit: visibility,
            });
        }
        Ok(())
    }

    /// Records that an item at `ts` became open on one of the task's input connections.
    pub fn open_item(&mut self, ts: Timestamp) -> ClaimUpdates {
        let before = self.visibility();
        *self.open.entry(ts).or_insert(0) += 1;
        self.visibility_moved(before)
    }

    /// Records that an item at `ts` is no longer open on one of the task's input connections.
    pub fn close_item(&mut self, ts: Timestamp) -> ClaimUpdates {
        let before = self.visibility();
        let count = self.open.get_mut(&ts).expect("closing an item the task never opened");
        *count -= 1;
        if *count == 0 {
            self.open.remove(&ts);
        }
        self.visibility_moved(before)
    }

    /// Ends the task: its claim is released. Items still open on its connections are covered by
    /// those connections' claims until they are detached; open changes after this move no claim.
    pub fn close(&mut self) -> ClaimUpdates {
        if self.closed {
            return ClaimUpdates::new();
        }
        let visibility = self.visibility();
        self.closed = true;
        let mut updates = ClaimUpdates::new();
        push_move(&mut updates, Some(visibility), None);
        updates
    }

    fn visibility_moved(&self, before: Timestamp) -> ClaimUpdates {
        if self.closed {
            return ClaimUpdates::new();
        }
        let after = self.visibility();
        debug_assert!(after <= self.virtual_time);
        let mut updates = ClaimUpdates::new();
        push_move(&mut updates, Some(before), Some(after));
        updates
    }
}
