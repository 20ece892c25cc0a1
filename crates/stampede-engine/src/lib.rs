//! Stampede's embedded engine: a runtime's channels, queues, names and tasks in this process,
//! driving the pure state machines of [`stampede_core`] under locks. The `stampede` crate is the
//! typed facade over it and over the client of a node; applications use that facade, and the
//! node (`stampede-node`) runs its clients' operations on this engine directly.
//!
//! **Guarantees.** This is the only crate that locks a runtime's state: every operation's effects
//! take one path (`space`), under one lock order, so each task's visibility stays at or above
//! ts_min at every instant, an item is reclaimed within the operation that makes it garbage, and
//! a blocked call is woken by every change that may end its wait (none lost). It knows nothing of
//! the wire or the fabric: it depends on `stampede-core` (and `stampede-trace`'s record format)
//! only. Its one module allowed `unsafe` is `os` (mappings, file locks and the cycle counter,
//! each justified under `SAFETY`).
//!
//! # Layout
//!
//! - [`runtime`] — [`Runtime`]: create, look up and list channels and queues, root tasks, ts_min,
//!   `collect`, `close`, watching names ([`watch`]) and the runtime's
//!   [`Graph`](stampede_core::graph::Graph) (`graph`, private).
//! - [`task`] — [`Task`]: virtual time, visibility, `spawn`, `close`.
//! - `execute` (private) — [`Runtime::execute`]: one [`Op`](stampede_core::Op) of a [`Session`]
//!   run as the typed calls, its [`Outcome`](stampede_core::Outcome) returned; [`Body`], a put's
//!   payload beside its op.
//! - [`clock`] — [`MeshClock`]: the runtime's mesh time on this host's clock, and its
//!   [`Epoch`] (what paced sources number frames from).
//! - [`budget`] — byte budgets: the live payload bytes a node's sessions may hold, each and all.
//! - [`session`] — [`Session`]: what one caller of `execute` holds under handles, with its bounds;
//!   [`Admission`]: its rights.
//! - [`channel`] — [`Channel`], [`ChannelOutput`] and [`ChannelInput`]; [`queue`] — [`Queue`]
//!   and its connections.
//! - [`options`] — the plain data of the API: [`ChannelOptions`], [`QueueOptions`],
//!   [`PutOptions`], [`Info`], [`RuntimeStats`].
//! - [`payload`] — copy-in through recycled buffers; what `put` accepts. [`npy`] — reading and
//!   checking `.npy` headers (codec `"npy"`).
//! - [`disk`] — a channel's disk tier (docs/RECORDING.md).
//! - [`mesh_link`] — [`MeshLink`]: the runtime's link to its node's participant in the
//!   distributed ts_min protocol; [`steward`] — [`Steward`]: what a node does between its fabric
//!   and that participant (early messages, reminders, the door, silent members, restarts), with
//!   no I/O, so the node's driver and the simulations step the same rules.
//! - [`wait`] — blocking and async waiting without lost wake-ups; [`Changed`].
//! - [`trace`] — the event log's writer (docs/TRACING.md).
//! - `space` (private): locking, the operation path, progress tracking, GC sweeps and handlers;
//!   `sync` (private): the locks and atomics, swapped for shuttle's in the interleaving tests
//!   (feature `shuttle`); `os` (private): the calls into the OS and processor Rust cannot check.

#![deny(unsafe_code)]

pub mod budget;
pub mod channel;
pub mod clock;
pub mod disk;
mod execute;
mod graph;
pub mod mesh_link;
pub mod npy;
pub mod options;
mod os;
pub mod payload;
pub mod queue;
pub mod runtime;
pub mod session;
mod space;
pub mod steward;
mod sync;
pub mod task;
pub mod trace;
pub mod wait;
pub mod watch;

pub use channel::{Channel, ChannelInput, ChannelOutput};
pub use clock::{Epoch, MeshClock};
pub use disk::{DiskStats, DiskTier};
pub use execute::Body;
pub use mesh_link::{MeshLink, MeshWake};
pub use options::{ChannelOptions, Info, PutOptions, QueueOptions, RuntimeStats, DESCRIPTION_BYTES_MAX};
pub use queue::{Queue, QueueInput, QueueOutput};
pub use runtime::{Container, Runtime};
pub use session::{Admission, Right, Session, Unrestricted};
pub use steward::{MeshCounters, Steward};
pub use task::Task;
pub use wait::Changed;
