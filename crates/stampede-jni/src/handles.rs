//! The native objects Java refers to, by id.
//!
//! Java holds a `long` id per native object, never a pointer: a lookup clones the object's `Arc`
//! out of one table under a short read lock, and the call works on that clone. So a handle that
//! was released, or one that never existed, is `Closed`, not a use-after-free; and releasing a
//! handle while another thread is blocked in a call on it only drops the table's reference (the
//! blocked call still holds its own; `detach` and `close` are what wake it).
//!
//! Ids come from one counter and are never reused. Java releases each id exactly once, from the
//! `java.lang.ref.Cleaner` of the object that holds it (or from `Item.close`), which is why an
//! entry outlives `close()` on the Java side: a closed task or a detached connection stays in the
//! table so later calls get Stampede's own `Closed` error with its message.
//!
//! Bound: one entry per live Java object of the API; [`count`] tells how many (tests check that
//! released objects leave the table).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};

use jni::sys::jlong;
use parking_lot::{Mutex, RwLock};
use stampede::{Error, Payload};

use crate::jvm::{Failure, Result};
use crate::reclaim::Handlers;

/// A runtime with the GC handlers written in Java that its channels and queues share.
pub struct RuntimeEntry {
    pub runtime: stampede::Runtime,
    pub handlers: Arc<Handlers>,
}

/// A channel or queue, with its runtime's GC handlers.
pub struct ContainerEntry {
    pub container: stampede::Container,
    pub handlers: Arc<Handlers>,
}

/// An item handed to Java: its bytes stay alive (and in place: Java's `ByteBuffer`s point into
/// them) until the entry is released.
pub struct ItemEntry {
    pub payload: Payload,
}

/// One native object Java holds.
#[derive(Clone)]
pub enum Entry {
    Runtime(Arc<RuntimeEntry>),
    Container(Arc<ContainerEntry>),
    Task(Arc<stampede::Task>),
    ChannelInput(Arc<stampede::ChannelInput>),
    ChannelOutput(Arc<stampede::ChannelOutput>),
    QueueInput(Arc<stampede::QueueInput>),
    QueueOutput(Arc<stampede::QueueOutput>),
    Item(Arc<ItemEntry>),
    Watch(Arc<Mutex<stampede::Watch>>),
}

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::Runtime(_) => "runtime",
            Entry::Container(_) => "channel or queue",
            Entry::Task(_) => "task",
            Entry::ChannelInput(_) => "channel input",
            Entry::ChannelOutput(_) => "channel output",
            Entry::QueueInput(_) => "queue input",
            Entry::QueueOutput(_) => "queue output",
            Entry::Item(_) => "item",
            Entry::Watch(_) => "watch",
        }
    }
}

static TABLE: LazyLock<RwLock<HashMap<jlong, Entry>>> = LazyLock::new(RwLock::default);
static NEXT_ID: AtomicI64 = AtomicI64::new(1);

/// Stores `entry`; returns its id (positive, never reused).
pub fn insert(entry: Entry) -> jlong {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    TABLE.write().insert(id, entry);
    id
}

/// The entry of `id`, if it is still held.
pub fn get(id: jlong) -> Option<Entry> {
    TABLE.read().get(&id).cloned()
}

/// Drops the table's reference to `id` (idempotent). Dropping a connection or task that no one
/// else holds detaches or ends it, which may run GC handlers: that happens after the table's lock
/// is released.
pub fn release(id: jlong) {
    let entry = TABLE.write().remove(&id);
    drop(entry);
}

/// How many entries the table holds.
pub fn count() -> usize {
    TABLE.read().len()
}

/// The error for an id that is not (or no longer) a `wanted`.
fn stale(id: jlong, wanted: &'static str, found: Option<&Entry>) -> Failure {
    let reason = match found {
        None => "the Java object holding it was released",
        Some(_) => "the handle is of another kind (a bug in the Java binding)",
    };
    let name = match found {
        None => format!("{wanted} handle {id}"),
        Some(entry) => format!("{wanted} handle {id} (a {})", entry.kind()),
    };
    Failure::Stampede(Error::Closed { name, reason })
}

macro_rules! typed {
    ($(#[$doc:meta])* $fn:ident, $variant:ident, $ty:ty, $what:literal) => {
        $(#[$doc])*
        pub fn $fn(id: jlong) -> Result<Arc<$ty>> {
            match get(id) {
                Some(Entry::$variant(inner)) => Ok(inner),
                other => Err(stale(id, $what, other.as_ref())),
            }
        }
    };
}

typed!(
    /// The runtime of `id`.
    runtime, Runtime, RuntimeEntry, "runtime"
);
typed!(
    /// The channel or queue of `id`.
    container, Container, ContainerEntry, "channel or queue"
);
typed!(
    /// The task of `id`.
    task, Task, stampede::Task, "task"
);
typed!(
    /// The channel input connection of `id`.
    channel_input, ChannelInput, stampede::ChannelInput, "channel input"
);
typed!(
    /// The queue input connection of `id`.
    queue_input, QueueInput, stampede::QueueInput, "queue input"
);
typed!(
    /// The item of `id`.
    item, Item, ItemEntry, "item"
);
typed!(
    /// The watch of `id`.
    watch, Watch, Mutex<stampede::Watch>, "watch"
);
