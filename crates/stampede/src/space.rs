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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::disk::{Store, Tier};
use crate::mesh_link::MeshWake;
use crate::payload::Buffers;
use crate::sync::{lock_traced, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Mutex, RwLock};
use crate::wait::Signal;
use crate::watch::{self, NameLog, Watch, WatchEvent};
use stampede_core::mesh::MoveId;
use stampede_core::name;
use stampede_core::{
    ChannelState, Codec, ConnectionStats, ContainerKey, Effects, Error, IdMap, Item, Limits, Location, OpenChange,
    OpenChanges, Progress, QueueState, Refusal, Result, Stats, TaskId, TaskState, Timestamp, Update, Updates, INFINITY,
};
use stampede_core::{Mesh, Participant, Peer};

/// A GC handler: called with the container's name and each item it reclaims.
pub type ReclaimHandler = Arc<dyn Fn(&str, &Item) + Send + Sync>;

/// A channel's or queue's state plus what waiters, GC handlers and copy-in need.
pub(crate) struct Shared<S> {
    /// The container's key in the progress machine and the sweep index.
    pub(crate) key: ContainerKey,
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    /// What the name service says of it (fixed at creation).
    pub(crate) meta: Meta,
    pub(crate) state: Mutex<S>,
    /// Notified when an item arrives or something a blocked get may care about changes (a
    /// horizon it waits on moved, a connection detached, the container closed). An `Arc` so that a
    /// [`Changed`](crate::wait::Changed) future can own its registration.
    pub(crate) changed: Arc<Signal>,
    /// Notified when items are reclaimed, for puts blocked on a full container (and when a
    /// connection detaches or the container closes).
    pub(crate) freed: Arc<Signal>,
    pub(crate) handlers: RwLock<Vec<ReclaimHandler>>,
    /// Mirrors the channel's "producer set closed" (never set for a queue): whether a blocked
    /// wildcard get needs a horizon registration, read without the container's lock.
    pub(crate) producers_closed: AtomicBool,
    /// The timestamp under which the sweep index lists this container (`INFINITY`: not listed),
    /// a lower bound of its oldest stored-or-tombstoned timestamp. Written only with the
    /// container locked.
    listed_at: AtomicI64,
    /// Recycled payload buffers for copy-in.
    pub(crate) buffers: Arc<Buffers>,
    /// Its name's index in the event log's name table, once traced (`trace.rs`).
    trace_name: std::sync::OnceLock<u32>,
    /// Puts that ended `Full` (the item was not stored): the producers' drops, for tools.
    dropped: AtomicU64,
    /// A channel's disk tier, if it has one (never a queue).
    pub(crate) disk: Option<Tier>,
}

/// A container's declared codec and description.
#[derive(Clone, Debug, Default)]
pub(crate) struct Meta {
    pub(crate) codec: Option<Codec>,
    pub(crate) description: Arc<str>,
}

pub(crate) type ChannelShared = Shared<ChannelState>;
pub(crate) type QueueShared = Shared<QueueState>;

/// What the driver needs from a channel's or queue's core state, whichever it is.
pub(crate) trait ContainerState {
    /// Lowest timestamp a GC sweep may have to reclaim (none for a queue: it is not swept).
    fn oldest(&self) -> Option<Timestamp>;
    fn stats(&self) -> Stats;
    fn connection_stats(&self, conn: u64) -> Option<ConnectionStats>;
    fn close(&mut self, reason: &'static str) -> Effects;
    fn detach_input(&mut self, conn: u64) -> Effects;
}

impl ContainerState for ChannelState {
    fn oldest(&self) -> Option<Timestamp> {
        ChannelState::oldest(self)
    }
    fn stats(&self) -> Stats {
        ChannelState::stats(self)
    }
    fn connection_stats(&self, conn: u64) -> Option<ConnectionStats> {
        ChannelState::connection_stats(self, conn)
    }
    fn close(&mut self, reason: &'static str) -> Effects {
        ChannelState::close(self, reason)
    }
    fn detach_input(&mut self, conn: u64) -> Effects {
        ChannelState::detach_input(self, conn)
    }
}

impl ContainerState for QueueState {
    fn oldest(&self) -> Option<Timestamp> {
        None
    }
    fn stats(&self) -> Stats {
        QueueState::stats(self)
    }
    fn connection_stats(&self, conn: u64) -> Option<ConnectionStats> {
        QueueState::connection_stats(self, conn)
    }
    fn close(&mut self, reason: &'static str) -> Effects {
        QueueState::close(self, reason)
    }
    fn detach_input(&mut self, conn: u64) -> Effects {
        QueueState::detach_input(self, conn)
    }
}

impl<S> Shared<S> {
    /// The container's name in the event log (0 while tracing is off).
    #[inline]
    pub(crate) fn trace_name(&self) -> u32 {
        crate::trace::cached_name(&self.trace_name, &self.name)
    }
}

impl<S: ContainerState> Shared<S> {
    pub(crate) fn new(
        key: ContainerKey,
        name: Arc<str>,
        limits: Limits,
        meta: Meta,
        state: S,
        disk: Option<Store>,
    ) -> Arc<Shared<S>> {
        Arc::new(Shared {
            key,
            name,
            limits,
            meta,
            state: Mutex::new(state),
            changed: Arc::default(),
            freed: Arc::default(),
            handlers: RwLock::new(Vec::new()),
            producers_closed: AtomicBool::new(false),
            listed_at: AtomicI64::new(INFINITY),
            buffers: Arc::default(),
            trace_name: std::sync::OnceLock::new(),
            dropped: AtomicU64::new(0),
            disk: disk.map(Tier::new),
        })
    }

    /// Passes a put's outcome through, counting it as a drop when it is `Full`.
    pub(crate) fn count_drop(&self, outcome: Result<()>) -> Result<()> {
        if matches!(outcome, Err(Error::Full { .. })) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// Puts that ended `Full` so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Wakes every call blocked on this container, gets and puts: they try again and find what
    /// changed (a connection detached, the container closed).
    pub(crate) fn wake_all(&self) {
        self.changed.notify();
        self.freed.notify();
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

    /// The listing this container needs in the sweep index: only when something is now older
    /// than where it is listed (a put below everything present); reclamation only raises the
    /// oldest timestamp, so the listing stays a valid lower bound until a sweep visits it. Call
    /// with the container locked, and apply the listing before unlocking it.
    fn listing(&self, state: &S) -> Option<Listing<'_>> {
        let oldest = state.oldest()?;
        (oldest < self.listed_at.load(Ordering::Acquire)).then_some(Listing {
            key: self.key,
            listed_at: &self.listed_at,
            oldest,
        })
    }
}

/// Channels due for a sweep, with the timestamp each was listed under.
type Due = smallvec::SmallVec<[(Timestamp, ContainerKey); 4]>;

/// A container to be listed in the sweep index under `oldest`.
struct Listing<'a> {
    key: ContainerKey,
    listed_at: &'a AtomicI64,
    oldest: Timestamp,
}

/// What a name refers to.
#[derive(Clone)]
pub(crate) enum Entry {
    Channel(Arc<ChannelShared>),
    Queue(Arc<QueueShared>),
}

impl Entry {
    /// `"channel"` or `"queue"`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Entry::Channel(_) => "channel",
            Entry::Queue(_) => "queue",
        }
    }
}

/// A connection a task holds, so closing the task can detach it.
#[derive(Clone)]
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
    /// Its label for tools ([`crate::Task::set_name`]).
    pub(crate) name: Mutex<Option<Arc<str>>>,
    pub(crate) space: Arc<Space>,
    pub(crate) state: Mutex<TaskState>,
    pub(crate) held: Mutex<Vec<Held>>,
}

impl Drop for TaskShared {
    fn drop(&mut self) {
        self.space.close_task(self);
    }
}

/// The participant (progress machine and mesh) and the sweep index, under one lock.
struct Tracking {
    participant: Participant,
    /// Channels listed under a lower bound of their oldest stored-or-tombstoned timestamp: what
    /// a sweep visits. Channels with nothing stored are not listed (idle channels cost nothing).
    listed: BTreeSet<(Timestamp, ContainerKey)>,
    /// The driver's wake-up when this space is a node in a mesh ([`crate::mesh_link`]).
    wake: Option<MeshWake>,
}

/// A permanent last entry of the sweep index: it keeps the index's root node allocated when no
/// channel is listed (a pipeline's channel is listed and unlisted on every frame), and no ts_min
/// ever passes it.
const LISTED_SENTINEL: (Timestamp, ContainerKey) = (INFINITY, ContainerKey::MAX);

impl Default for Tracking {
    fn default() -> Self {
        Tracking { participant: Participant::default(), listed: BTreeSet::from([LISTED_SENTINEL]), wake: None }
    }
}

impl Tracking {
    /// Lists (or re-lists lower) a container in the sweep index.
    fn list(&mut self, listing: Option<Listing<'_>>) {
        let Some(Listing { key, listed_at, oldest }) = listing else { return };
        let before = listed_at.swap(oldest, Ordering::AcqRel);
        if before != INFINITY {
            self.listed.remove(&(before, key));
        }
        self.listed.insert((oldest, key));
    }

    /// Takes off the index every channel listed below `ts_min`: they are due for a sweep.
    fn take_due(&mut self, ts_min: Timestamp) -> Due {
        let mut due = Due::new();
        while let Some(&(listed, key)) = self.listed.first() {
            if listed >= ts_min {
                break;
            }
            self.listed.pop_first();
            due.push((listed, key));
        }
        due
    }

    /// Removes a container from the sweep index.
    fn unlist(&mut self, key: ContainerKey, listed_at: &AtomicI64) {
        let before = listed_at.swap(INFINITY, Ordering::AcqRel);
        if before != INFINITY {
            self.listed.remove(&(before, key));
        }
    }

    /// Settles the participant ([`Participant::settle`]) and wakes the mesh's driver when the
    /// mesh took claim changes; returns the new local ts_min if settling let it advance.
    fn settle(&mut self) -> Option<Timestamp> {
        let settled = self.participant.settle();
        if settled.handed {
            self.wake();
        }
        settled.advanced
    }

    /// Wakes the mesh's driver, if linked.
    fn wake(&self) {
        if let Some(wake) = &self.wake {
            wake();
        }
    }

    fn progress(&self) -> &Progress {
        self.participant.progress()
    }

    fn progress_mut(&mut self) -> &mut Progress {
        self.participant.progress_mut()
    }

    /// Applies a batch the driver built; a refusal is a driver bug (it would let GC reclaim a
    /// reachable item), so it panics with the offending claim.
    fn apply(&mut self, batch: &[Update]) -> Option<Timestamp> {
        match self.participant.apply(batch) {
            Ok(advanced) => advanced,
            Err(refusal) => panic!("progress batch refused: {refusal:?}"),
        }
    }
}

/// Where a new task's claim is covered from (SPEC §3: whoever creates a claim holds one below
/// it, or starts at or above ts_min).
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A root task: at or above ts_min and the node's door.
    Root,
    /// A child: at or above its parent's visibility.
    Child(&'a TaskShared),
    /// A shadow of a task of another node (docs/PROTOCOL.md): the takeover of that node's move
    /// `id` of the task's visibility, sent to participant `to`.
    Moved { from: Peer, id: MoveId, to: Peer },
}

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

    // ---- names -------------------------------------------------------------------------------

    pub(crate) fn register(&self, name: &str, entry: Entry) -> Result<()> {
        self.check_open(name)?;
        let mut names = self.names.write();
        if names.contains_key(name) {
            return Err(Error::AlreadyExists { name: name.to_owned() });
        }
        let key = match &entry {
            Entry::Channel(ch) => {
                self.channels.write().insert(ch.key, ch.clone());
                ch.key
            }
            Entry::Queue(q) => q.key,
        };
        self.tracking.lock().progress_mut().add_container(key);
        let kind = entry.kind();
        names.insert(name.to_owned(), entry);
        // Recorded under the names lock, so a watcher's snapshot and the log agree.
        self.name_log.record(WatchEvent::Created { name: name.to_owned(), kind: kind.into(), node: None });
        Ok(())
    }

    pub(crate) fn lookup(&self, name: &str) -> Result<Entry> {
        self.check_open(name)?;
        self.names.read().get(name).cloned().ok_or_else(|| Error::NotFound { name: name.to_owned() })
    }

    /// The names `prefix` selects ([`stampede_core::name::under`]), sorted.
    pub(crate) fn names(&self, prefix: &str) -> Vec<String> {
        self.names
            .read()
            .range(prefix.to_owned()..)
            .take_while(|(n, _)| n.starts_with(prefix))
            .filter(|(n, _)| name::under(n, prefix))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The tasks open now, by id.
    pub(crate) fn open_tasks(&self) -> Vec<Arc<TaskShared>> {
        let mut tasks: Vec<_> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        tasks.sort_by_key(|task| task.id);
        tasks
    }

    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.names.read().values().cloned().collect()
    }

    /// Destroys the container called `name`: blocked operations wake with `Closed`.
    pub(crate) fn destroy(&self, name: &str, reason: &'static str) -> Result<()> {
        let entry = {
            let mut names = self.names.write();
            let entry = names.remove(name).ok_or_else(|| Error::NotFound { name: name.to_owned() })?;
            let destroyed = WatchEvent::Destroyed { name: name.to_owned(), kind: entry.kind().into(), node: None };
            self.name_log.record(destroyed);
            entry
        };
        self.close_entry(&entry, reason);
        Ok(())
    }

    /// A watch of the names under `prefix`: those that exist now, then every change.
    pub(crate) fn watch(self: &Arc<Self>, prefix: &str, timeout: Option<Duration>) -> Watch {
        let (snapshot, cursor) = {
            let names = self.names.read();
            let snapshot = names.iter().filter(|(n, _)| name::under(n, prefix)).map(|(n, e)| (n.clone(), e.kind()));
            (watch::snapshot(snapshot.collect::<Vec<_>>(), None), self.name_log.end())
        };
        let space = Arc::downgrade(self);
        let closed = Box::new(move || space.upgrade().is_none_or(|space| space.is_closed()));
        Watch::local(prefix, timeout, snapshot, self.name_log.clone(), cursor, closed)
    }

    fn close_entry(&self, entry: &Entry, reason: &'static str) {
        match entry {
            Entry::Channel(ch) => {
                self.channels.write().remove(&ch.key);
                self.close_container(ch, reason);
            }
            Entry::Queue(q) => self.close_container(q, reason),
        }
    }

    /// Closes a container: its connections' claims go, items still open in other tasks' states
    /// are handed over to those tasks until their states are updated.
    fn close_container<S: ContainerState>(&self, shared: &Shared<S>, reason: &'static str) {
        let (opens, reclaimed, advanced) = {
            let mut state = shared.state.lock();
            let Effects { mut claims, opens, reclaimed, .. } = state.close(reason);
            park_handovers(&mut claims, &opens);
            let mut tracking = self.tracking.lock();
            tracking.unlist(shared.key, &shared.listed_at);
            tracking.progress_mut().remove_container(shared.key);
            let advanced = tracking.apply(&claims);
            let advanced = self.publish(&mut tracking).or(advanced);
            (opens, reclaimed, advanced)
        };
        self.progressed();
        self.apply_others(opens);
        self.reclaimed(shared, &reclaimed);
        if let Some(disk) = &shared.disk {
            disk.lock().release();
        }
        shared.wake_all();
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
    }

    // ---- the mesh ------------------------------------------------------------------------------

    /// Links a mesh participant ([`Participant::link`]) with its driver's wake-up.
    pub(crate) fn link_mesh(&self, mesh: Mesh, wake: MeshWake) -> Result<()> {
        self.check_open("runtime")?;
        let mut tracking = self.tracking.lock();
        let settled = tracking.participant.link(mesh)?;
        tracking.wake = Some(wake);
        if settled.handed {
            tracking.wake();
        }
        self.ts_min.store(tracking.progress().ts_min(), Ordering::Release);
        Ok(())
    }

    /// Replaces the linked mesh's participant by `mesh`, a restart with no door yet
    /// ([`Participant::relink`]), and wakes the driver.
    pub(crate) fn relink_mesh(&self, mesh: Mesh) -> Result<()> {
        let mut tracking = self.tracking.lock();
        tracking.participant.relink(mesh)?;
        tracking.wake();
        Ok(())
    }

    /// Claim changes the linked mesh has not taken yet (0 without a mesh).
    pub(crate) fn mesh_stashed(&self) -> usize {
        self.tracking.lock().participant.stashed()
    }

    /// Runs `f` on the linked mesh, then settles: mirrors its ts_min and sweeps what that made
    /// garbage. Panics if no mesh is linked (only a [`MeshLink`](crate::mesh_link::MeshLink)
    /// calls it).
    pub(crate) fn with_mesh<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        let mut tracking = self.tracking.lock();
        let value = f(tracking.participant.mesh_mut().expect("a linked mesh"));
        let due = self.publish(&mut tracking).map(|ts_min| tracking.take_due(ts_min));
        drop(tracking);
        self.progressed();
        self.sweep_due(due);
        value
    }

    /// Reads the linked mesh (a question that changes nothing: no settling, no wake-up).
    pub(crate) fn read_mesh<R>(&self, f: impl FnOnce(&Mesh) -> R) -> R {
        f(self.tracking.lock().participant.mesh().expect("a linked mesh"))
    }

    /// Runs `f` on the linked mesh without settling: for inputs that only add this node's own
    /// claims (nothing to mirror or reclaim), so it may run under a task's lock. What waits in
    /// the stash goes first, in order (if the mesh takes it now). Wakes the driver.
    pub(crate) fn with_mesh_unsettled<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        let tracking = &mut *self.tracking.lock();
        let value = f(tracking.participant.mesh_flushed().expect("a linked mesh"));
        tracking.wake();
        value
    }

    // ---- tasks -------------------------------------------------------------------------------

    /// Creates a task: a root task must start at or above ts_min (and the node's door), a child
    /// at or above its parent's visibility (checked while the parent's claims still cover the
    /// child's), a shadow at or above ts_min, its claim the takeover of the move that covers it.
    pub(crate) fn new_task(self: &Arc<Self>, virtual_time: Timestamp, origin: Origin<'_>) -> Result<Arc<TaskShared>> {
        self.check_open("runtime")?;
        let op = match origin {
            Origin::Root => "task",
            Origin::Child(_) => "spawn",
            Origin::Moved { .. } => "shadow",
        };
        if virtual_time < 0 {
            return Err(Error::InvalidTimestamp { op, name: "runtime".into(), ts: virtual_time });
        }
        let id = self.next_id();
        let (state, updates) = TaskState::new(id, virtual_time);
        let parent_state = match origin {
            Origin::Child(parent) => Some(parent.state.lock()),
            Origin::Root | Origin::Moved { .. } => None,
        };
        if let Some(parent_state) = &parent_state {
            parent_state.check_spawn(virtual_time)?;
        }
        let advanced = {
            let mut tracking = self.tracking.lock();
            match origin {
                Origin::Root => tracking.participant.check_root(virtual_time)?,
                Origin::Moved { from, id, to } => tracking.participant.check_takeover(from, id, to, virtual_time)?,
                Origin::Child(_) => {}
            }
            tracking.progress_mut().add_task(id);
            let advanced = tracking.apply(&updates);
            if let Origin::Moved { from, id: move_id, .. } = origin {
                tracking.participant.take_over_task(from, move_id, id)?;
            }
            self.publish(&mut tracking).or(advanced)
        };
        drop(parent_state);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        let task = Arc::new(TaskShared {
            id,
            name: Mutex::new(None),
            space: self.clone(),
            state: Mutex::new(state),
            held: Mutex::new(Vec::new()),
        });
        self.tasks.lock().insert(id, Arc::downgrade(&task));
        Ok(task)
    }

    /// Sets a task's virtual time (SPEC §3).
    pub(crate) fn set_virtual_time(&self, task: &TaskShared, v: Timestamp) -> Result<()> {
        let mut state = task.state.lock();
        let updates = state.set_virtual_time(v)?;
        let due = self.commit(&updates, None, None, Some(&state));
        drop(state);
        self.sweep_due(due);
        Ok(())
    }

    /// Releases a task's claim, then detaches every connection it holds.
    ///
    /// The task's own claim goes first: its connections' claims still cover what it holds open.
    pub(crate) fn close_task(&self, task: &TaskShared) {
        let advanced = {
            let mut state = task.state.lock();
            if state.close() {
                let mut tracking = self.tracking.lock();
                let advanced = tracking.progress_mut().remove_task(task.id);
                self.publish(&mut tracking).or(advanced)
            } else {
                None
            }
        };
        let held = std::mem::take(&mut *task.held.lock());
        for h in held {
            self.detach(task, h);
        }
        self.tasks.lock().remove(&task.id);
        if let Some(ts_min) = advanced {
            self.sweep(ts_min);
        }
        self.progressed();
    }

    /// Detaches one connection of `task`: the one path every detach takes (explicit, dropped, or
    /// its task closing). Idempotent. The progress machine forgets the connection (settledness
    /// and joins follow), and the container's waiters wake, so a call blocked on this connection
    /// returns `Closed` at once.
    pub(crate) fn detach(&self, task: &TaskShared, held: Held) {
        let conn = held.conn();
        task.held.lock().retain(|h| h.conn() != conn);
        match held {
            Held::ChannelInput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    // Under Retention::CurrentReaders, detaching may reclaim what only it held.
                    if let Ok((_, items)) = self.run(&*ch, task, |s, _, _| Ok(((), s.detach_input(conn)))) {
                        self.reclaimed(&ch, &items);
                    }
                    self.forget_connection(&ch, |_| {});
                }
            }
            Held::ChannelOutput(ch, conn) => {
                if let Some(ch) = ch.upgrade() {
                    self.forget_connection(&ch, |s| s.detach_output(conn));
                }
            }
            Held::QueueInput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    // Items it held open go back to the queue.
                    let _ = self.run(&*q, task, |s, _, _| Ok(((), s.detach_input(conn))));
                    self.forget_connection(&q, |_| {});
                }
            }
            Held::QueueOutput(q, conn) => {
                if let Some(q) = q.upgrade() {
                    self.forget_connection(&q, |s| s.detach_output(conn));
                }
            }
        }
        // After the container forgot it (no put can pass it any more), so horizons only rise; and
        // whether or not the container is gone.
        self.tracking.lock().progress_mut().detach(conn, task.id);
        self.progressed();
    }

    /// Removes a connection from the container's state (`forget`), then wakes the container's
    /// waiters.
    fn forget_connection<S: ContainerState>(&self, shared: &Shared<S>, forget: impl FnOnce(&mut S)) {
        forget(&mut shared.state.lock());
        shared.wake_all();
    }

    /// Closes every container and task: blocked operations wake with `Closed`.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let entries: Vec<(String, Entry)> = std::mem::take(&mut *self.names.write()).into_iter().collect();
        for (name, entry) in &entries {
            self.name_log.record(WatchEvent::Destroyed { name: name.clone(), kind: entry.kind().into(), node: None });
        }
        // Watchers wake to find the runtime closed once the log says so.
        self.name_log.signal.notify();
        for (_, entry) in &entries {
            self.close_entry(entry, "the runtime was closed");
        }
        let tasks: Vec<Arc<TaskShared>> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        for task in tasks {
            self.close_task(&task);
        }
    }

    // ---- connections -------------------------------------------------------------------------

    /// Attaches input connection `conn` of `task` to a channel or queue. Refused
    /// (`InvalidArgument`) when `task` produces into a channel with a closed producer set whose
    /// settled horizon this input could bring back below (SPEC §4: settledness never goes back).
    pub(crate) fn attach_input<S: ContainerState>(
        &self,
        container: &Shared<S>,
        task: &TaskShared,
        conn: u64,
        attach: impl FnOnce(&mut S, &TaskState) -> Result<(Option<Timestamp>, Effects)>,
    ) -> Result<()> {
        let mut guard = container.state.lock();
        let state = task.state.lock();
        state.check_open()?;
        let (first_claim, fx) = attach(&mut guard, &state)?;
        let mut tracking = self.tracking.lock();
        if let Err(refusal) = tracking.progress_mut().check_attach_input(task.id, container.key, first_claim) {
            drop(tracking);
            // Undo on the still-locked container: nobody saw the connection, and its claims were
            // never applied.
            let undo = guard.detach_input(conn);
            debug_assert!(undo.reclaimed.is_empty(), "undoing an attach reclaims nothing");
            return Err(self.unsettle_error(&container.name, refusal));
        }
        tracking.progress_mut().attach_input(conn, task.id, container.key);
        let advanced = tracking.apply(&fx.claims);
        debug_assert!(advanced.is_none(), "attaching an input only adds claims");
        // Settling may still advance ts_min: the mesh's view moved since the last change.
        let due = self.publish(&mut tracking).map(|ts_min| tracking.take_due(ts_min));
        drop(tracking);
        drop(state);
        drop(guard);
        self.sweep_due(due);
        Ok(())
    }

    /// Records output connection `conn` of `task` to a container (after its core state took it).
    pub(crate) fn attach_output(&self, key: ContainerKey, task: &TaskShared, conn: u64) {
        self.tracking.lock().progress_mut().attach_output(conn, task.id, key);
    }

    /// Closes a channel's producer set: in its core state, the progress machine and the mirror
    /// flag, then wakes its blocked gets (a wildcard get may now need a horizon registration).
    pub(crate) fn close_producers(&self, ch: &ChannelShared) {
        {
            let mut state = ch.state.lock();
            state.close_producers();
            self.tracking.lock().progress_mut().close_producers(ch.key);
            ch.producers_closed.store(true, Ordering::SeqCst);
        }
        self.progressed();
        ch.wake_all();
    }

    fn unsettle_error(&self, name: &str, refusal: Refusal) -> Error {
        let reason = match refusal {
            Refusal::WouldUnsettle { channel, horizon, earliest } => {
                let channel = self.channels.read().get(&channel).map(|c| c.name.to_string()).unwrap_or_default();
                format!(
                    "the task produces into \"{channel}\", whose producer set is closed and which is settled below \
                     {horizon}; this input could deliver ts={earliest} and so let the task put below what is already \
                     settled. Attach a producer's inputs before close_producers()"
                )
            }
            other => format!("{other:?}"),
        };
        Error::InvalidArgument { op: "attach_input", name: name.to_owned(), reason }
    }

    // ---- the operation path ------------------------------------------------------------------

    /// Runs `op` on a container's state with the acting task locked, then commits its effects:
    /// the acting task's open changes and every claim update while both are locked, other tasks'
    /// open changes after, then a GC sweep if ts_min advanced. Returns the op's value and the
    /// items it reclaimed itself (for the caller's GC handlers).
    pub(crate) fn run<S: ContainerState, R>(
        &self,
        container: &Shared<S>,
        task: &TaskShared,
        op: impl FnOnce(&mut S, &mut TaskState, Timestamp) -> Result<(R, Effects)>,
    ) -> Result<(R, Vec<Item>)> {
        let mut guard = lock_traced(&container.state);
        let mut state = lock_traced(&task.state);
        let (value, fx) = op(&mut guard, &mut state, self.ts_min())?;
        let Effects { mut claims, opens, reclaimed, put } = fx;
        let mut others = OpenChanges::new();
        for change in opens {
            if change.task == state.id() {
                open_change(&mut state, change);
            } else {
                others.push(change);
            }
        }
        park_handovers(&mut claims, &others);
        let due = self.commit(&claims, put, container.listing(&guard), Some(&state));
        drop(state);
        drop(guard);
        self.apply_others(others);
        self.sweep_due(due);
        Ok((value, reclaimed))
    }

    /// Applies one operation's claim updates, put watermark and sweep-index listing as one step;
    /// asserts that the acting task (still locked by the caller) stays at or above ts_min. If
    /// ts_min advanced, returns the channels due for a sweep, taken off the index under the same
    /// lock (hand them to [`Space::sweep_due`]).
    fn commit(
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
    fn progressed(&self) {
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
    fn publish(&self, tracking: &mut Tracking) -> Option<Timestamp> {
        let advanced = tracking.settle();
        self.ts_min.store(tracking.progress().ts_min(), Ordering::Release);
        advanced
    }

    /// Applies the open changes of tasks other than the acting one, each under that task's lock
    /// together with the release of the claim parked for it at [`Location::Handover`].
    fn apply_others(&self, others: impl IntoIterator<Item = OpenChange>) {
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
    /// visibility is at or above ts_min (SPEC §3). Panics naming the task otherwise.
    pub(crate) fn check_invariants(&self) {
        let tasks: Vec<Arc<TaskShared>> = self.tasks.lock().values().filter_map(Weak::upgrade).collect();
        for task in tasks {
            let state = task.state.lock();
            assert_visible(&state, self.tracking.lock().progress().ts_min());
        }
    }

    // ---- settledness (SPEC §4) ---------------------------------------------------------------

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
    fn sweep_due(&self, due: Option<Due>) -> usize {
        let Some(due) = due else { return 0 };
        let _sweeping = crate::trace::span(crate::trace::Kind::GcSweep, 0, 0, 0);
        let mut total = 0;
        let mut items = Vec::new();
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
type Thresholds = smallvec::SmallVec<[Timestamp; 4]>;

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

/// Parks, at the front of `claims`, one claim at [`Location::Handover`] for every item the
/// operation took away from another task while it was open there: the claim covers the item
/// until that task's state no longer counts it (released by [`Space::apply_others`]).
fn park_handovers(claims: &mut Updates, others: &[OpenChange]) {
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

/// SPEC §3's invariant, checked with the task and the progress machine locked together: a live
/// task's visibility is at or above ts_min.
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
