//! The node's shared state and the one path every operation's effects take.
//!
//! Locks, always taken in this order and never held across a wait, a sleep or a user callback:
//! a channel's or queue's lock → the acting task's lock → the tracker's lock. Other tasks touched
//! by an operation (an item reclaimed early while open on their connection) are updated after the
//! first locks are released; that only raises their visibility and moves no claim (a task claims
//! its virtual time; see `stampede_core::task`), so doing it a moment later is safe.
//!
//! GC: when an operation advances ts_min it sweeps every channel before it returns, reclaiming
//! the items below ts_min (work proportional to what is reclaimed plus one lock per channel),
//! then runs GC handlers outside all locks. ts_min is mirrored in an atomic for lock-free reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::payload::Buffers;
use crate::wait::Signal;
use stampede_core::{
    ChannelState, Effects, Error, Item, Limits, OpenChange, OpenChanges, QueueState, Result, Stats, TaskId, TaskState,
    Timestamp, Tracker,
};

/// A GC handler: called with the container's name and each item it reclaims.
pub type ReclaimHandler = Arc<dyn Fn(&str, &Item) + Send + Sync>;

/// A channel's or queue's state plus what waiters, GC handlers and copy-in need.
pub(crate) struct Shared<S> {
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) state: Mutex<S>,
    /// Notified when an item arrives or something a blocked get may care about changes (ts_min
    /// advanced, container closed).
    pub(crate) changed: Signal,
    /// Notified when items are reclaimed, for puts blocked on a full container.
    pub(crate) freed: Signal,
    pub(crate) handlers: RwLock<Vec<ReclaimHandler>>,
    /// Lowest timestamp stored or tombstoned (`INFINITY` if none), published after every
    /// operation so a GC sweep can skip, without locking, a channel with nothing below ts_min.
    pub(crate) oldest: AtomicI64,
    /// Recycled payload buffers for copy-in.
    pub(crate) buffers: Arc<Buffers>,
}

pub(crate) type ChannelShared = Shared<ChannelState>;
pub(crate) type QueueShared = Shared<QueueState>;

/// What the driver needs from a channel's or queue's core state, whichever it is.
pub(crate) trait ContainerState {
    /// Lowest timestamp a GC sweep may have to reclaim (none for a queue: it is not swept).
    fn oldest(&self) -> Option<Timestamp>;
    fn stats(&self) -> Stats;
    fn close(&mut self, reason: &'static str) -> Effects;
}

impl ContainerState for ChannelState {
    fn oldest(&self) -> Option<Timestamp> {
        ChannelState::oldest(self)
    }
    fn stats(&self) -> Stats {
        ChannelState::stats(self)
    }
    fn close(&mut self, reason: &'static str) -> Effects {
        ChannelState::close(self, reason)
    }
}

impl ContainerState for QueueState {
    fn oldest(&self) -> Option<Timestamp> {
        None
    }
    fn stats(&self) -> Stats {
        QueueState::stats(self)
    }
    fn close(&mut self, reason: &'static str) -> Effects {
        QueueState::close(self, reason)
    }
}

impl<S: ContainerState> Shared<S> {
    pub(crate) fn new(name: Arc<str>, limits: Limits, state: S) -> Arc<Shared<S>> {
        Arc::new(Shared {
            name,
            limits,
            state: Mutex::new(state),
            changed: Signal::default(),
            freed: Signal::default(),
            handlers: RwLock::new(Vec::new()),
            oldest: AtomicI64::new(stampede_core::INFINITY),
            buffers: Arc::default(),
        })
    }

    /// Publishes what lock-free readers need, under the lock, after every operation.
    fn publish(&self, state: &S) {
        self.oldest.store(state.oldest().unwrap_or(stampede_core::INFINITY), Ordering::Release);
    }

    /// Counters now, with the node's ts_min.
    pub(crate) fn stats(&self, space: &Space) -> Stats {
        let mut stats = self.state.lock().stats();
        stats.ts_min = space.ts_min();
        stats
    }

    /// Adds a GC handler called with each item this container reclaims.
    pub(crate) fn on_reclaim(&self, handler: impl Fn(&Item) + Send + Sync + 'static) {
        let handler: ReclaimHandler = Arc::new(move |_, item| handler(item));
        self.handlers.write().push(handler);
    }
}

/// What a name refers to.
#[derive(Clone)]
pub(crate) enum Entry {
    Channel(Arc<ChannelShared>),
    Queue(Arc<QueueShared>),
}

/// A connection a task holds, so closing the task can detach it.
pub(crate) enum Held {
    ChannelInput(Weak<ChannelShared>, u64),
    ChannelOutput(Weak<ChannelShared>, u64),
    QueueInput(Weak<QueueShared>, u64),
    QueueOutput(Weak<QueueShared>, u64),
}

impl Held {
    pub(crate) fn conn(&self) -> u64 {
        match self {
            Held::ChannelInput(_, c) | Held::ChannelOutput(_, c) | Held::QueueInput(_, c) | Held::QueueOutput(_, c) => {
                *c
            }
        }
    }
}

/// A task's state, shared by its handles and connections.
pub(crate) struct TaskShared {
    pub(crate) id: TaskId,
    pub(crate) space: Arc<Space>,
    pub(crate) state: Mutex<TaskState>,
    pub(crate) held: Mutex<Vec<Held>>,
}

impl Drop for TaskShared {
    fn drop(&mut self) {
        self.space.close_task(self);
    }
}

/// One node's Space-Time Memory.
pub(crate) struct Space {
    tracker: Mutex<Tracker>,
    /// Mirror of `tracker.ts_min()` for lock-free reads; only ever increases.
    ts_min: AtomicI64,
    names: RwLock<BTreeMap<String, Entry>>,
    /// The channels among `names`, as a shared snapshot a sweep can take without copying.
    channels: RwLock<Arc<Vec<Arc<ChannelShared>>>>,
    tasks: Mutex<HashMap<TaskId, Weak<TaskShared>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    handlers: RwLock<Vec<ReclaimHandler>>,
    /// Notified on every put and every claim change: what joins wait on, since settledness only
    /// moves when a claim does.
    pub(crate) progress: Signal,
}

impl Space {
    pub(crate) fn new() -> Arc<Space> {
        Arc::new(Space {
            tracker: Mutex::new(Tracker::new()),
            ts_min: AtomicI64::new(0),
            names: RwLock::new(BTreeMap::new()),
            channels: RwLock::new(Arc::new(Vec::new())),
            tasks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            handlers: RwLock::new(Vec::new()),
            progress: Signal::default(),
        })
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn ts_min(&self) -> Timestamp {
        self.ts_min.load(Ordering::Acquire)
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

    pub(crate) fn claim_count(&self) -> usize {
        self.tracker.lock().claim_count()
    }

    pub(crate) fn add_handler(&self, handler: ReclaimHandler) {
        self.handlers.write().push(handler);
    }

    // ---- names -------------------------------------------------------------------------------

    pub(crate) fn register(&self, name: &str, entry: Entry) -> Result<()> {
        self.check_open(name)?;
        let mut names = self.names.write();
        if names.contains_key(name) {
            return Err(Error::AlreadyExists { name: name.to_owned() });
        }
        names.insert(name.to_owned(), entry);
        self.refresh_channels(&names);
        Ok(())
    }

    fn refresh_channels(&self, names: &BTreeMap<String, Entry>) {
        let channels = names
            .values()
            .filter_map(|e| match e {
                Entry::Channel(ch) => Some(ch.clone()),
                Entry::Queue(_) => None,
            })
            .collect();
        *self.channels.write() = Arc::new(channels);
    }

    pub(crate) fn lookup(&self, name: &str) -> Result<Entry> {
        self.names.read().get(name).cloned().ok_or_else(|| Error::NotFound { name: name.to_owned() })
    }

    pub(crate) fn names(&self, prefix: &str) -> Vec<String> {
        self.names
            .read()
            .range(prefix.to_owned()..)
            .take_while(|(n, _)| n.starts_with(prefix))
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.names.read().values().cloned().collect()
    }

    /// Destroys the container called `name`: blocked operations wake with `Closed`.
    pub(crate) fn destroy(&self, name: &str, reason: &'static str) -> Result<()> {
        let entry = {
            let mut names = self.names.write();
            let entry = names.remove(name).ok_or_else(|| Error::NotFound { name: name.to_owned() })?;
            self.refresh_channels(&names);
            entry
        };
        self.close_entry(&entry, reason);
        Ok(())
    }

    fn close_entry(&self, entry: &Entry, reason: &'static str) {
        match entry {
            Entry::Channel(ch) => self.close_container(ch, reason),
            Entry::Queue(q) => self.close_container(q, reason),
        }
    }

    fn close_container<S: ContainerState>(&self, shared: &Shared<S>, reason: &'static str) {
        let fx = shared.state.lock().close(reason);
        self.release(&fx.claims, fx.opens);
        self.reclaimed(shared, &fx.reclaimed);
        shared.changed.notify();
    }

    // ---- tasks -------------------------------------------------------------------------------

    /// Creates a task: a root task must start at or above ts_min, a child at or above its
    /// parent's visibility (checked while the parent's claim still covers the child's).
    pub(crate) fn new_task(
        self: &Arc<Self>,
        virtual_time: Timestamp,
        parent: Option<&TaskShared>,
    ) -> Result<Arc<TaskShared>> {
        self.check_open("runtime")?;
        if virtual_time < 0 {
            return Err(Error::InvalidTimestamp { op: "task", name: "runtime".into(), ts: virtual_time });
        }
        let id = self.next_id();
        let (state, updates) = TaskState::new(id, virtual_time);
        match parent {
            Some(parent) => {
                let parent_state = parent.state.lock();
                parent_state.check_spawn(virtual_time)?;
                self.apply(&updates);
            }
            None => {
                let mut tracker = self.tracker.lock();
                if virtual_time < tracker.ts_min() {
                    return Err(Error::BelowVisibility {
                        op: "task",
                        name: format!("task {id}"),
                        ts: virtual_time,
                        what: "ts_min (a root task starts at or above ts_min; spawn from a task to start lower)",
                        limit: tracker.ts_min(),
                    });
                }
                if let Some(ts_min) = self.apply_locked(&mut tracker, &updates) {
                    drop(tracker);
                    self.sweep(ts_min);
                }
            }
        }
        let task =
            Arc::new(TaskShared { id, space: self.clone(), state: Mutex::new(state), held: Mutex::new(Vec::new()) });
        self.tasks.lock().insert(id, Arc::downgrade(&task));
        Ok(task)
    }

    /// Sets a task's virtual time (SPEC §3).
    pub(crate) fn set_virtual_time(&self, task: &TaskShared, v: Timestamp) -> Result<()> {
        let mut state = task.state.lock();
        let updates = state.set_virtual_time(v)?;
        let advanced = self.apply(&updates);
        drop(state);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        Ok(())
    }

    /// Releases a task's claim, then detaches every connection it holds.
    ///
    /// The task's own claim goes first: its connections' claims still cover what it holds, and
    /// a reader at `INFINITY` does not drive ts_min to `INFINITY` on its way out.
    pub(crate) fn close_task(&self, task: &TaskShared) {
        let advanced = {
            let mut state = task.state.lock();
            let updates = state.close();
            self.apply(&updates)
        };
        let held = std::mem::take(&mut *task.held.lock());
        for h in held {
            self.detach(task, h);
        }
        self.tasks.lock().remove(&task.id);
        if advanced.is_some() {
            self.sweep(self.ts_min());
        }
    }

    /// Detaches one connection of `task`.
    pub(crate) fn detach(&self, task: &TaskShared, held: Held) {
        match held {
            Held::ChannelInput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    // Under Retention::CurrentReaders, detaching may reclaim what only it held.
                    if let Ok((_, items)) = self.run(&*ch, task, |s, _, _| Ok(((), s.detach_input(conn)))) {
                        self.reclaimed(&ch, &items);
                    }
                }
            }
            Held::ChannelOutput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    ch.state.lock().detach_output(conn);
                }
            }
            Held::QueueInput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    let _ = self.run(&*q, task, |s, _, _| Ok(((), s.detach_input(conn))));
                    // Items it held open are back in the queue.
                    q.changed.notify();
                }
            }
            Held::QueueOutput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    q.state.lock().detach_output(conn);
                }
            }
        }
    }

    /// Closes every container and task: blocked operations wake with `Closed`.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let entries: Vec<Entry> = std::mem::take(&mut *self.names.write()).into_values().collect();
        *self.channels.write() = Arc::new(Vec::new());
        for entry in &entries {
            self.close_entry(entry, "the runtime was closed");
        }
        let tasks: Vec<Arc<TaskShared>> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        for task in tasks {
            self.close_task(&task);
        }
    }

    // ---- the operation path ------------------------------------------------------------------

    /// Runs `op` on a container's state with the acting task locked, then applies its effects:
    /// the acting task's open changes and all claim updates under the locks, other tasks' open
    /// changes after, then a GC sweep if ts_min advanced. Returns the op's value and the items it
    /// reclaimed itself (for the caller's GC handlers).
    pub(crate) fn run<S: ContainerState, R>(
        &self,
        container: &Shared<S>,
        task: &TaskShared,
        op: impl FnOnce(&mut S, &mut TaskState, Timestamp) -> Result<(R, Effects)>,
    ) -> Result<(R, Vec<Item>)> {
        let mut guard = container.state.lock();
        let mut state = task.state.lock();
        let (value, fx) = op(&mut guard, &mut state, self.ts_min())?;
        container.publish(&guard);
        let Effects { claims, opens, reclaimed } = fx;
        let mut others = Vec::new();
        for change in opens {
            if change.task == state.id() {
                open_change(&mut state, change);
            } else {
                others.push(change);
            }
        }
        let advanced = self.apply(&claims);
        drop(state);
        drop(guard);
        self.apply_others(others);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        Ok((value, reclaimed))
    }

    /// Applies claim releases and other tasks' open changes outside every container lock, then
    /// sweeps if ts_min advanced.
    fn release(&self, claims: &[stampede_core::ClaimUpdate], opens: OpenChanges) {
        let advanced = self.apply(claims);
        self.apply_others(opens);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
    }

    /// Applies the open changes of other tasks than the acting one. They only ever close items
    /// (raising those tasks' visibility) and move no claim, so they may come after the
    /// operation's own locks are gone.
    fn apply_others(&self, others: impl IntoIterator<Item = OpenChange>) {
        for change in others {
            let Some(task) = self.tasks.lock().get(&change.task).and_then(Weak::upgrade) else { continue };
            open_change(&mut task.state.lock(), change);
        }
    }

    /// Applies claim updates to the tracker; returns the new ts_min if it advanced.
    fn apply(&self, updates: &[stampede_core::ClaimUpdate]) -> Option<Timestamp> {
        if updates.is_empty() {
            return None;
        }
        self.apply_locked(&mut self.tracker.lock(), updates)
    }

    /// Applies claim updates to the locked tracker and mirrors an advanced ts_min.
    fn apply_locked(&self, tracker: &mut Tracker, updates: &[stampede_core::ClaimUpdate]) -> Option<Timestamp> {
        let advanced = tracker.apply(updates);
        if let Some(ts_min) = advanced {
            self.ts_min.store(ts_min, Ordering::Release);
        }
        self.progress.notify_waiters();
        advanced
    }

    // ---- settledness (SPEC §4) ---------------------------------------------------------------

    /// Every timestamp below the returned one is settled on `ch`: no task can still put it.
    ///
    /// Open producer set: ts_min (any task, even one created later, may become a producer, and
    /// no task can ever put below ts_min). Closed producer set: the lowest timestamp any current
    /// producer may still put — its visibility, or lower if it may still open an older item on
    /// one of its input connections — and never less than ts_min. Each producer's visibility is
    /// read before its connections' claims, so an item it opens in between is still counted.
    pub(crate) fn settled_below(&self, ch: &ChannelShared) -> Timestamp {
        let ts_min = self.ts_min();
        let producers: Vec<TaskId> = {
            let state = ch.state.lock();
            if !state.producers_closed() {
                return ts_min;
            }
            state.producers().collect()
        };
        let mut floor = stampede_core::INFINITY;
        for id in producers {
            let Some(task) = self.tasks.lock().get(&id).and_then(Weak::upgrade) else { continue };
            floor = floor.min(self.put_floor(&task));
        }
        floor.max(ts_min)
    }

    /// The lowest timestamp `task` may still put (INFINITY once closed).
    fn put_floor(&self, task: &TaskShared) -> Timestamp {
        let mut floor = {
            let state = task.state.lock();
            if state.is_closed() {
                return stampede_core::INFINITY;
            }
            state.visibility()
        };
        let inputs: Vec<(Option<Entry>, u64)> = task
            .held
            .lock()
            .iter()
            .filter_map(|h| match h {
                Held::ChannelInput(ch, conn) => Some((ch.upgrade().map(Entry::Channel), *conn)),
                Held::QueueInput(q, conn) => Some((q.upgrade().map(Entry::Queue), *conn)),
                Held::ChannelOutput(..) | Held::QueueOutput(..) => None,
            })
            .collect();
        for (entry, conn) in inputs {
            let claim = match entry {
                Some(Entry::Channel(ch)) => ch.state.lock().input_claim(conn),
                Some(Entry::Queue(q)) => q.state.lock().claim(),
                None => None,
            };
            floor = floor.min(claim.unwrap_or(stampede_core::INFINITY));
        }
        floor
    }

    /// Reclaims everything below `ts_min` in every channel and wakes waiters that may now fail
    /// `Reclaimed`. Returns the number of items reclaimed.
    pub(crate) fn sweep(&self, ts_min: Timestamp) -> usize {
        let mut total = 0;
        let mut items = Vec::new();
        let channels = self.channels.read().clone();
        for ch in channels.iter() {
            // A blocked exact get may have to fail `Reclaimed` now, even with nothing stored.
            if ch.changed.has_waiters() {
                ch.changed.notify();
            }
            if ch.oldest.load(Ordering::Acquire) >= ts_min {
                continue;
            }
            {
                let mut state = ch.state.lock();
                state.reclaim_below(ts_min, &mut items);
                ch.publish(&state);
            }
            total += items.len();
            self.reclaimed(ch, &items);
            items.clear();
        }
        total
    }

    /// Runs GC handlers for `items` reclaimed from the container `name` and wakes blocked puts.
    pub(crate) fn reclaimed<S>(&self, shared: &Shared<S>, items: &[Item]) {
        if items.is_empty() {
            return;
        }
        shared.freed.notify();
        let local: Vec<ReclaimHandler> = shared.handlers.read().clone();
        let global: Vec<ReclaimHandler> = self.handlers.read().clone();
        for item in items {
            for handler in local.iter().chain(&global) {
                handler(&shared.name, item);
            }
        }
    }
}

fn open_change(state: &mut TaskState, change: OpenChange) {
    if change.opened {
        state.open_item(change.ts);
    } else {
        state.close_item(change.ts);
    }
}
