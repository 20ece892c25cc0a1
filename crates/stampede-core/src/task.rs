//! A task's virtual time and visibility (docs/SEMANTICS.md, "Virtual time, visibility, GC").
//!
//! `visibility = min(virtual_time, timestamps of items open on any of the task's input
//! connections)`. Visibility bounds what the task may put or spawn.
//!
//! The task's claim on ts_min is its **virtual time**, not its visibility: every item it holds
//! open is open on one of its input connections, whose claim already covers that timestamp, so
//! `min(visibilities, connection claims) = min(virtual times, connection claims)` — the same
//! ts_min, without a claim update each time a consumer opens or consumes an item (the hot path).
//! Methods that move the virtual time return the [`Updates`] that move the claim, at
//! [`Location::Task`]. The driver also parks there, for a moment, the claim of an item another
//! task's operation took away while it was open here (see [`crate::progress`]).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::progress::{push_move, Location, Updates};
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
    pub fn new(id: TaskId, virtual_time: Timestamp) -> (TaskState, Updates) {
        assert!(virtual_time >= 0, "virtual time must not be negative");
        let task = TaskState { id, name: format!("task {id}"), virtual_time, open: BTreeMap::new(), closed: false };
        let mut updates = Updates::new();
        push_move(&mut updates, Location::Task(id), None, Some(virtual_time));
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
    pub fn set_virtual_time(&mut self, v: Timestamp) -> Result<Updates> {
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
        let mut updates = Updates::new();
        push_move(&mut updates, Location::Task(self.id), Some(self.virtual_time), Some(v));
        self.virtual_time = v;
        Ok(updates)
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
    pub fn open_item(&mut self, ts: Timestamp) {
        *self.open.entry(ts).or_insert(0) += 1;
    }

    /// Records that an item at `ts` is no longer open on one of the task's input connections.
    pub fn close_item(&mut self, ts: Timestamp) {
        let count = self.open.get_mut(&ts).expect("closing an item the task never opened");
        *count -= 1;
        if *count == 0 {
            self.open.remove(&ts);
        }
    }

    /// Ends the task; returns `false` if it was closed already. The driver then drops every
    /// claim at [`Location::Task`] of this task; items still open on its connections stay covered
    /// by those connections' claims until they are detached.
    pub fn close(&mut self) -> bool {
        !std::mem::replace(&mut self.closed, true)
    }
}
