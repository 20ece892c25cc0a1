//! A channel's or queue's shared state ([`Shared`]) and what the driver needs of either; what a
//! name refers to ([`Entry`]) and what a task holds ([`Held`]).
//!
//! A container's sweep-index listing ([`Listing`]) is computed and applied with the container
//! locked, so it stays a lower bound of its oldest stored-or-tombstoned timestamp.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::disk::{Store, Tier};
use crate::payload::Buffers;
use crate::sync::{AtomicBool, AtomicI64, AtomicU64, Mutex, RwLock};
use crate::wait::Signal;
use stampede_core::{
    ChannelState, Codec, ConnectionStats, ContainerKey, Effects, Error, Item, Limits, QueueState, Result, Stats,
    Timestamp, INFINITY,
};

use super::Space;

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
    pub(super) listed_at: AtomicI64,
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
    pub(super) fn listing(&self, state: &S) -> Option<Listing<'_>> {
        let oldest = state.oldest()?;
        (oldest < self.listed_at.load(Ordering::Acquire)).then_some(Listing {
            key: self.key,
            listed_at: &self.listed_at,
            oldest,
        })
    }
}

/// A container to be listed in the sweep index under `oldest`.
pub(super) struct Listing<'a> {
    pub(super) key: ContainerKey,
    pub(super) listed_at: &'a AtomicI64,
    pub(super) oldest: Timestamp,
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
