//! The node's shared state and the one path every operation's effects take.
//!
//! Locks, always taken in this order and never held across a wait, a sleep or a user callback:
//! a channel's or queue's lock → a task's lock → the registry of gets waiting for a horizon →
//! the progress lock. No path holds two task locks or two
//! container locks. A channel's disk store lock ([`crate::disk`]) comes before all of them: a put
//! moving items to disk holds it around its container lock; GC never waits for it (it frees
//! reclaimed items' places when the store is free, else leaves them to its holder).
//!
//! Wake-ups: every change of claims or of the graph ends in [`Space::progressed`], which wakes
//! joins and the gets registered for a horizon that has now passed what they wait for; every
//! detach — explicit, by drop, or by a task closing — takes [`Space::detach`], which also wakes
//! the container's blocked calls.
//!
//! Progress: one [`Progress`] machine (ts_min, claims by location, settled horizons) behind the
//! progress lock; every operation hands it its claim updates as one batch while the container
//! and the acting task are still locked, so a new claim is reported before the claim it
//! replaces is released, and ts_min can never pass the visibility of a task whose state is locked
//! by that operation. Other tasks touched by an operation (an item reclaimed early, or a
//! channel destroyed, while open on their connection) are updated after the operation's locks
//! are released — their claim waits meanwhile at [`Location::Handover`] and is released under
//! their own lock together with the state change, so at every instant each task's visibility is
//! at or above ts_min (asserted after each operation in debug builds, and by
//! [`Space::check_invariants`]).
//!
//! GC: channels holding something are listed in a sweep index under a lower bound of their
//! oldest stored-or-tombstoned timestamp (updated only when a put goes below it); when ts_min
//! advances, the sweep visits exactly the listed channels below it (cost proportional to what is
//! reclaimed, whatever the number of idle channels), then runs GC handlers outside all locks.
//! ts_min is mirrored in an atomic for lock-free reads.
//!
//! Layout: `containers` (a channel's or queue's shared state and what a name refers to),
//! `tracking` (the participant with the sweep index), `names` (the name service), `mesh` (the
//! linked mesh), `tasks` (tasks, their connections, closing), `commit` (the operation path and
//! the invariant checks), `gc` (settledness, sweeps, GC handlers, horizon waits).
//!
//! [`Progress`]: stampede_core::Progress
//! [`Location::Handover`]: stampede_core::Location::Handover

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::sync::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Mutex, RwLock};
use crate::wait::Signal;
use crate::watch::NameLog;
use stampede_core::{ContainerKey, Error, IdMap, Result, TaskId, Timestamp};

mod commit;
mod containers;
mod gc;
mod mesh;
mod names;
mod tasks;
mod tracking;

pub(crate) use containers::{ChannelShared, ContainerState, Entry, Held, Meta, QueueShared, ReclaimHandler, Shared};
pub(crate) use gc::HorizonWait;
pub(crate) use tasks::{Origin, TaskShared};

use gc::Thresholds;
use tracking::Tracking;

/// One node's Space-Time Memory.
pub(crate) struct Space {
    tracking: Mutex<Tracking>,
    /// Mirror of the progress machine's ts_min for lock-free reads; only ever increases.
    ts_min: AtomicI64,
    names: RwLock<BTreeMap<String, Entry>>,
    /// Recent creations and destructions, for watchers.
    pub(crate) name_log: Arc<NameLog>,
    /// The channels among `names`, by key, for the sweep.
    channels: RwLock<IdMap<ContainerKey, Arc<ChannelShared>>>,
    tasks: Mutex<HashMap<TaskId, Weak<TaskShared>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    handlers: RwLock<Vec<ReclaimHandler>>,
    /// Channels with a blocked get that a horizon move ends, with the thresholds those gets wait
    /// for the horizon to pass (see [`Space::wait_horizon`]): woken without visiting every
    /// channel.
    horizon_waiters: Mutex<IdMap<ContainerKey, (Weak<ChannelShared>, Thresholds)>>,
    /// How many gets are registered in `horizon_waiters` (progress skips its lock at 0).
    horizon_waiting: AtomicUsize,
    /// Notified on every put and every claim change: what joins wait on, since settledness only
    /// moves when a claim does.
    pub(crate) progress: Arc<Signal>,
}

/// A runtime dropped without `close()` still ends its watchers' waits (they find it gone).
impl Drop for Space {
    fn drop(&mut self) {
        self.name_log.signal.notify();
    }
}

impl Space {
    pub(crate) fn new() -> Arc<Space> {
        Arc::new(Space {
            tracking: Mutex::new(Tracking::default()),
            ts_min: AtomicI64::new(0),
            names: RwLock::new(BTreeMap::new()),
            name_log: Arc::default(),
            channels: RwLock::new(IdMap::default()),
            tasks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            handlers: RwLock::new(Vec::new()),
            horizon_waiters: Mutex::new(IdMap::default()),
            horizon_waiting: AtomicUsize::new(0),
            progress: Arc::default(),
        })
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn ts_min(&self) -> Timestamp {
        self.ts_min.load(Ordering::Acquire)
    }

    /// Where the claims at ts_min live (`Progress::holders`), read under the progress lock.
    pub(crate) fn ts_min_holders(&self) -> Vec<stampede_core::Location> {
        self.tracking.lock().progress().holders()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn check_open(&self, name: &str) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed { name: name.to_owned(), reason: "the runtime was closed" });
        }
        Ok(())
    }

    /// Refuses a task of another runtime: its claims live in another progress machine, so this
    /// one's GC could never see them.
    pub(crate) fn check_same(self: &Arc<Self>, task: &TaskShared, op: &'static str, name: &str) -> Result<()> {
        if Arc::ptr_eq(self, &task.space) {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            op,
            name: name.to_owned(),
            reason: format!(
                "{} and the channel or queue belong to different runtimes; attach a task of the runtime that \
                 created the container",
                task.state.lock().name()
            ),
        })
    }

    pub(crate) fn claim_count(&self) -> usize {
        self.tracking.lock().progress().claim_count()
    }

    pub(crate) fn add_handler(&self, handler: ReclaimHandler) {
        self.handlers.write().push(handler);
    }
}
