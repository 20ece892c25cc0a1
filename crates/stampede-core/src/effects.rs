//! What an operation on a channel or queue did beyond its return value.
//!
//! The core never locks, wakes or calls back; it reports. The driver applies `opens` to the tasks
//! named, `claims` to the ts_min tracker, runs GC handlers on `reclaimed` outside every lock, and
//! wakes waiters.

use crate::item::Item;
use crate::progress::Updates;
use crate::task::TaskId;
use crate::time::Timestamp;

/// An item became open (`opened`) or stopped being open on one of `task`'s input connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenChange {
    pub task: TaskId,
    pub ts: Timestamp,
    pub opened: bool,
}

/// Open changes of one operation (inline: usually zero or one).
pub type OpenChanges = smallvec::SmallVec<[OpenChange; 2]>;

/// Side effects of one operation.
#[derive(Debug, Default)]
pub struct Effects {
    /// Changes of claims on ts_min (at the container's connections or the queue itself).
    pub claims: Updates,
    /// Changes to tasks' open items (and so to their visibility).
    pub opens: OpenChanges,
    /// Items reclaimed by this operation, for GC handlers.
    pub reclaimed: Vec<Item>,
    /// The timestamp this operation put, if it put one (it may raise the put watermark).
    pub put: Option<Timestamp>,
}
