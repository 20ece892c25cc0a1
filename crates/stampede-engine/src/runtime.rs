//! The embedded runtime (docs/NODES.md, "Embedded by default, one API everywhere"): channels,
//! queues, names, tasks and GC in this process, with nothing to install or start. The facade's
//! `stampede::Runtime` forwards here when it is embedded.

use std::sync::Arc;

use stampede_core::graph::Graph;
use stampede_core::name::check_name;
use stampede_core::{ChannelState, Codec, Error, Item, Limits, QueueState, Result, Retention, Timestamp};

use crate::channel::Channel;
use crate::clock::MeshClock;
use crate::disk::Store;
use crate::options::{ChannelOptions, QueueOptions, RuntimeStats, DESCRIPTION_BYTES_MAX};
use crate::queue::Queue;
use crate::space::{Entry, Meta, Origin, ReclaimHandler, Shared, Space};
use crate::task::Task;
use crate::wait::Changed;
use crate::watch::{NameFeed, WatchEvent};

/// A container's metadata: a declared codec has a name, the description is at most
/// [`DESCRIPTION_BYTES_MAX`].
fn meta(op: &'static str, name: &str, codec: Option<Codec>, description: String) -> Result<Meta> {
    if codec.as_ref().is_some_and(|codec| codec.name().is_empty()) {
        let reason = "a declared codec needs a name (\"raw\", \"utf8\", \"json\", \"npy\" or yours)".to_owned();
        return Err(Error::InvalidArgument { op, name: name.to_owned(), reason });
    }
    if let Some(codec) = &codec {
        crate::payload::check_codec_name(op, name, codec)?;
    }
    if description.len() > DESCRIPTION_BYTES_MAX {
        let reason = format!("a description of {} bytes (at most {DESCRIPTION_BYTES_MAX})", description.len());
        return Err(Error::InvalidArgument { op, name: name.to_owned(), reason });
    }
    Ok(Meta { codec, description: description.into() })
}

/// Splits the items recovered from a channel's disk tier into those it takes back, as puts
/// would be taken — at or above ts_min, and within its bounds the newest ones (from the first
/// that does not fit on, every older one is dropped: no holes) — and the timestamps of the rest.
/// Under [`Retention::CurrentReaders`] nothing is taken back: no reader holds them. An item a put
/// would refuse outright (another codec than the declared one, a bad `npy` header) fails the
/// creation instead, so a mistyped codec destroys no history.
fn admit_recovered(
    name: &str,
    limits: Limits,
    retention: Retention,
    meta: &Meta,
    ts_min: Timestamp,
    recovered: Vec<Item>,
) -> Result<(Vec<Item>, Vec<Timestamp>)> {
    for item in &recovered {
        crate::payload::check_payload(name, item.ts, &item.payload, meta.codec.as_ref()).map_err(|e| {
            Error::InvalidArgument {
                op: "create_channel",
                name: name.to_owned(),
                reason: format!("its disk tier holds an item it would refuse ({e}); create it as it was"),
            }
        })?;
    }
    let (mut items, mut bytes, mut full) = (0usize, 0usize, retention == Retention::CurrentReaders);
    let (mut kept, mut refused) = (Vec::new(), Vec::new());
    for item in recovered.into_iter().rev() {
        let len = item.payload.len();
        full = full || limits.check_room(name, item.ts, items, bytes, len).is_err();
        if full || item.ts < ts_min {
            refused.push(item.ts);
        } else {
            (items, bytes) = (items + 1, bytes + len);
            kept.push(item);
        }
    }
    kept.reverse();
    Ok((kept, refused))
}

/// What a name refers to in this runtime.
#[derive(Clone)]
pub enum Container {
    Channel(Channel),
    Queue(Queue),
}

impl Container {
    /// The channel's or queue's name.
    pub fn name(&self) -> &str {
        match self {
            Container::Channel(c) => c.name(),
            Container::Queue(q) => q.name(),
        }
    }
}

/// An embedded Stampede node. Cheap to clone; every clone is the same node.
#[derive(Clone)]
pub struct Runtime {
    space: Arc<Space>,
    clock: Arc<MeshClock>,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

impl Runtime {
    /// A new, empty node in this process. Several may coexist; they share nothing.
    pub fn new() -> Runtime {
        Runtime { space: Space::new(), clock: Arc::new(MeshClock::founded()) }
    }

    /// The runtime's mesh time: founded with the runtime, synced with its mesh by the node that
    /// serves it (docs/NODES.md, "Time across hosts").
    pub fn clock(&self) -> &Arc<MeshClock> {
        &self.clock
    }

    /// The space behind this runtime (for the mesh link).
    pub(crate) fn space(&self) -> &Arc<Space> {
        &self.space
    }

    /// Creates a channel with bounds ([`Limits`]) or full [`ChannelOptions`]. Names are
    /// `/`-separated segments (`camera/left`, see [`stampede_core::name`]); a bad name or a zero
    /// bound is `InvalidArgument`, a name in use `AlreadyExists`, a closed runtime `Closed`.
    pub fn create_channel(&self, name: &str, options: ChannelOptions) -> Result<Channel> {
        let ChannelOptions { limits, retention, codec, description, node: _, disk } = options;
        check_name("create_channel", name)?;
        limits.check("create_channel", name)?;
        let meta = meta("create_channel", name, codec, description)?;
        let name: Arc<str> = name.into();
        let key = self.space.next_id();
        let mut state = ChannelState::new(name.clone(), limits, retention);
        let (mut newest, mut refused) = (None, Vec::new());
        let store = match disk {
            Some(tier) => {
                tier.check("create_channel", &name)?;
                self.space.check_open(&name)?;
                if self.space.lookup(&name).is_ok() {
                    return Err(Error::AlreadyExists { name: name.to_string() });
                }
                let (store, recovered) = Store::open(&name, &tier)?;
                state = state.with_disk_tier();
                let (kept, dropped) = admit_recovered(&name, limits, retention, &meta, self.space.ts_min(), recovered)?;
                refused = dropped;
                newest = kept.last().map(|item| item.ts);
                for item in kept {
                    state.restore(item.ts, item.payload)?;
                }
                Some(store)
            }
            None => None,
        };
        let shared = Shared::new(key, name.clone(), limits, meta, state, store);
        self.space.register(&name, Entry::Channel(shared.clone()))?;
        if let Some(disk) = &shared.disk {
            // Only once the channel exists: a creation that fails destroys no history.
            disk.lock().forget(&refused);
        }
        if let Some(newest) = newest {
            self.space.list_restored(&shared, newest);
        }
        Ok(Channel { shared, space: self.space.clone() })
    }

    /// Creates a queue (names and bounds as [`create_channel`](Self::create_channel)).
    pub fn create_queue(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        let QueueOptions { limits, description, node: _ } = options;
        check_name("create_queue", name)?;
        limits.check("create_queue", name)?;
        let meta = meta("create_queue", name, None, description)?;
        let name: Arc<str> = name.into();
        let key = self.space.next_id();
        let shared = Shared::new(key, name.clone(), limits, meta, QueueState::new(key, name.clone(), limits), None);
        self.space.register(&name, Entry::Queue(shared.clone()))?;
        Ok(Queue { shared, space: self.space.clone() })
    }

    /// The channel or queue called `name` (`NotFound` otherwise; `InvalidArgument` for a name
    /// no container can have; `Closed` once the runtime is closed).
    pub fn lookup(&self, name: &str) -> Result<Container> {
        check_name("lookup", name)?;
        Ok(match self.space.lookup(name)? {
            Entry::Channel(shared) => Container::Channel(Channel { shared, space: self.space.clone() }),
            Entry::Queue(shared) => Container::Queue(Queue { shared, space: self.space.clone() }),
        })
    }

    /// Names of the channels and queues `prefix` selects, sorted. Hierarchical
    /// ([`stampede_core::name::under`]): `""` selects all; `"camera/"` the names under `camera/`
    /// (not `cameraX`); `"camera"` `camera` itself and the names under it (not `cameras`).
    pub fn names(&self, prefix: &str) -> Vec<String> {
        self.space.names(prefix)
    }

    /// The channels and queues under `prefix` with their kinds, sorted by name (no node: this
    /// runtime's own).
    pub fn listing(&self, prefix: &str) -> Vec<stampede_core::Listed> {
        self.names(prefix)
            .into_iter()
            .filter_map(|name| match self.lookup(&name) {
                Ok(Container::Channel(_)) => Some(stampede_core::Listed { name, queue: false, node: None }),
                Ok(Container::Queue(_)) => Some(stampede_core::Listed { name, queue: true, node: None }),
                Err(_) => None, // destroyed meanwhile
            })
            .collect()
    }

    /// A root task at `virtual_time` (`INFINITY` allowed). It must be `>= ts_min`: nothing below
    /// ts_min may ever be put again.
    pub fn task(&self, virtual_time: Timestamp) -> Result<Task> {
        Ok(Task { shared: self.space.new_task(virtual_time, Origin::Root)? })
    }

    /// Current ts_min: no existing or future task can get an item below it.
    pub fn ts_min(&self) -> Timestamp {
        self.space.ts_min()
    }

    /// Runs a GC pass now; returns the number of items reclaimed. Reclamation already happens
    /// within the operation that makes an item garbage, so this normally returns 0; it exists
    /// so that tests and tools can be deterministic.
    pub fn collect(&self) -> usize {
        self.space.sweep(self.space.ts_min())
    }

    /// Registers a GC handler for every channel and queue: `handler(name, item)`.
    pub fn on_reclaim(&self, handler: impl Fn(&str, &Item) + Send + Sync + 'static) {
        let handler: ReclaimHandler = Arc::new(handler);
        self.space.add_handler(handler);
    }

    /// Node-wide counters.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            ts_min: self.space.ts_min(),
            containers: self.space.entries().len(),
            claims: self.space.claim_count(),
            budget: None,
        }
    }

    /// What the runtime holds now: tasks, connections, containers ([`Graph`]).
    pub fn graph(&self) -> Graph {
        crate::graph::graph(&self.space, None)
    }

    /// Ends the node: every channel and queue is destroyed (blocked operations wake with
    /// `Closed`), every task closed. Idempotent.
    pub fn close(&self) {
        self.space.close();
    }

    /// Checks, under the locks that make each comparison atomic, that every live task's
    /// visibility is at or above ts_min (docs/PROGRESS.md, "Invariants and why they hold").
    /// Panics naming the task otherwise. For tests and the interleaving scheduler; the driver
    /// asserts the same after its own steps.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        self.space.check_invariants();
    }

    /// A watch of the names under `prefix`: a `Created` event for each name there now, and a
    /// feed of every change after them.
    pub fn watch(&self, prefix: &str) -> (Vec<WatchEvent>, NameFeed) {
        self.space.watch(prefix)
    }

    /// Completes at the next put or claim change in the runtime.
    pub fn progressed(&self) -> Changed {
        Changed::new(&self.space.progress)
    }

    /// `true` once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.space.is_closed()
    }
}
