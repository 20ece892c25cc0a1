//! Queues and their connections (docs/SEMANTICS.md, "Queues"): FIFO by insertion, each item to
//! exactly one getter, reclaimed when that getter consumes it. In this process or on a node, with
//! one API.

use std::time::Duration;

use stampede_core::{Item, Limits, QueueItem, Result, Stats, Timestamp};

use crate::backend::{forward, remote, Backend};
#[cfg(not(feature = "remote"))]
use crate::backend::{Never as RemoteQueue, Never as RemoteQueueInput, Never as RemoteQueueOutput};
use crate::payload::IntoPayload;
#[cfg(feature = "remote")]
use crate::remote::queue::{RemoteQueue, RemoteQueueInput, RemoteQueueOutput};
use crate::runtime::Info;
use crate::wait::Changed;
use stampede_engine as engine;

/// A named FIFO queue of timestamped items (cheap to clone).
#[derive(Clone)]
pub struct Queue(pub(crate) Backend<engine::Queue, RemoteQueue>);

impl Queue {
    /// The queue's id, unique within its runtime.
    pub fn id(&self) -> u64 {
        forward!(&self.0, q => q.id())
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        forward!(&self.0, q => q.name())
    }

    /// The queue's bounds.
    pub fn limits(&self) -> Limits {
        forward!(&self.0, q => q.limits())
    }

    /// Counters now (remotely: the last ones seen when the node cannot be reached).
    pub fn stats(&self) -> Stats {
        forward!(&self.0, q => q.stats())
    }

    /// Registers a GC handler called with each item this queue reclaims. Through a client it runs on
    /// the client, for items reclaimed on the node.
    pub fn on_reclaim(&self, handler: impl Fn(&Item) + Send + Sync + 'static) -> Result<()> {
        match &self.0 {
            Backend::Local(q) => {
                q.on_reclaim(handler);
                Ok(())
            }
            Backend::Remote(q) => remote!(q => q.on_reclaim(handler)),
        }
    }

    /// What the name service tells of it: name, kind, node, bounds, codec, description.
    pub fn info(&self) -> Info {
        forward!(&self.0, x => x.info())
    }

    /// Destroys the queue: its items are reclaimed, its name is freed, and every operation on it
    /// (blocked ones included) fails `Closed`.
    pub fn destroy(&self) -> Result<()> {
        forward!(&self.0, q => q.destroy())
    }
}

/// Handles are equal when they refer to the same queue through the same runtime.
impl PartialEq for Queue {
    fn eq(&self, other: &Queue) -> bool {
        match (&self.0, &other.0) {
            (Backend::Local(a), Backend::Local(b)) => a == b,
            (Backend::Remote(a), Backend::Remote(b)) => remote!(a, b => a == b),
            _ => false,
        }
    }
}

impl Eq for Queue {}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        forward!(&self.0, q => q.fmt(f))
    }
}

/// A task's output connection to a queue.
pub struct QueueOutput {
    pub(crate) queue: Queue,
    pub(crate) inner: Backend<engine::QueueOutput, RemoteQueueOutput>,
}

impl QueueOutput {
    /// The queue this connection puts into.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Appends `payload` at `ts`; `timeout` bounds the wait for room in a bounded queue (`Full`
    /// when it expires).
    pub fn put(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        forward!(&self.inner, out => out.put(ts, payload, timeout))
    }

    /// The async form of [`put`](Self::put).
    pub async fn put_async(&self, ts: Timestamp, payload: impl IntoPayload, timeout: Option<Duration>) -> Result<()> {
        forward!(&self.inner, out => out.put_async(ts, payload, timeout).await)
    }

    /// As [`ChannelOutput::check_fits`](crate::ChannelOutput::check_fits), for this queue.
    pub fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        forward!(&self.inner, out => out.check_fits(ts, payload_bytes))
    }

    /// As [`ChannelOutput::copy_in`](crate::ChannelOutput::copy_in).
    pub fn copy_in(&self, parts: &[&[u8]]) -> bytes::Bytes {
        forward!(&self.inner, out => out.copy_in(parts))
    }

    /// A future that completes when a put blocked on this connection would wake (as
    /// [`ChannelOutput::freed`](crate::ChannelOutput::freed)).
    pub fn freed(&self) -> Changed {
        forward!(&self.inner, out => out.freed())
    }

    /// Detaches the connection (idempotent; dropping it detaches too).
    pub fn detach(&self) {
        forward!(&self.inner, out => out.detach())
    }
}

/// A task's input connection to a queue.
pub struct QueueInput {
    pub(crate) queue: Queue,
    pub(crate) inner: Backend<engine::QueueInput, RemoteQueueInput>,
}

impl QueueInput {
    /// The queue this connection gets from.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Takes the oldest waiting item; it is open on this connection (holding the task's
    /// visibility at its timestamp) until consumed. `NotAvailable` when the timeout expires.
    /// Blocked getters are served first come, first served; a getter that gives up passes its
    /// turn on (remotely: a getter keeps its place for one wait slice, see `docs/NODES.md`).
    pub fn get(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        forward!(&self.inner, inp => inp.get(timeout))
    }

    /// The async form of [`get`](Self::get). Cancelling it (dropping the future) takes nothing
    /// and gives up its turn.
    pub async fn get_async(&self, timeout: Option<Duration>) -> Result<QueueItem> {
        forward!(&self.inner, inp => inp.get_async(timeout).await)
    }

    /// Consumes an item this connection got; the queue reclaims it.
    pub fn consume(&self, item: &QueueItem) -> Result<()> {
        forward!(&self.inner, inp => inp.consume(item))
    }

    /// Consumes the oldest item open on this connection at `ts`.
    pub fn consume_ts(&self, ts: Timestamp) -> Result<()> {
        forward!(&self.inner, inp => inp.consume_ts(ts))
    }

    /// A future that completes when a get blocked on this connection would wake: an arrival,
    /// the connection detached, its task, the queue or the runtime closed. Registered when
    /// created; see [`Changed`]. It holds no place in line: a zero-timeout get after it is served
    /// only from items no blocked getter is waiting for.
    pub fn changed(&self) -> Changed {
        forward!(&self.inner, inp => inp.changed())
    }

    /// Detaches the connection (idempotent; dropping it detaches too); items it still holds open
    /// go back to the head of the queue. A get blocked on it returns `Closed`; every later call
    /// fails `Closed`.
    pub fn detach(&self) {
        forward!(&self.inner, inp => inp.detach())
    }
}
