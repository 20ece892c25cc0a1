//! Stampede: threads, processes and machines sharing time-indexed streams through channels that
//! are read by timestamp, correlated by timestamp and garbage-collected by timestamp — a modern
//! Space-Time Memory.
//!
//! ```
//! use stampede::{Limits, Runtime, Selector, INFINITY};
//!
//! let rt = Runtime::new();
//! let frames = rt.create_channel("camera/frames", Limits::unbounded())?;
//!
//! // A digitizer: a task whose virtual time is the frame number.
//! let digitizer = rt.task(0)?;
//! let out = digitizer.attach_output(&frames)?;
//!
//! // A tracker: virtual time INFINITY, it inherits timestamps from what it gets.
//! let tracker = rt.task(INFINITY)?;
//! let inp = tracker.attach_input(&frames)?;
//!
//! for frame in 0..3 {
//!     out.put(frame, vec![frame as u8; 16])?;
//!     digitizer.set_virtual_time(frame + 1)?;
//! }
//! let item = inp.get(Selector::NewestUnseen, None)?;   // the freshest frame, skipping the rest
//! assert_eq!(item.ts, 2);
//! inp.consume_until(item.ts)?;                          // frames 0..=2 are garbage to the tracker
//! assert_eq!(rt.ts_min(), 3);                           // ...and to everyone: reclaimed already
//! assert_eq!(frames.stats().live_items, 0);
//! # Ok::<(), stampede::Error>(())
//! ```
//!
//! # Layout
//!
//! This crate is the typed facade over two backends: the embedded engine ([`stampede_engine`],
//! this process's runtime) and the client of a node ([`remote`]). Every public type holds one or
//! the other (`backend`, private) and forwards each call to it, so one API serves both.
//!
//! - [`runtime`] — [`Runtime`]: names, tasks, ts_min, `collect`, `close`; embedded
//!   ([`Runtime::new`]) or a session on a node ([`connect`]), with one API.
//! - [`task`] — [`Task`]: virtual time, visibility, `spawn`, `attach_input` / `attach_output`.
//! - [`channel`] — [`Channel`], [`ChannelOutput`] (`put`) and [`ChannelInput`] (`get`,
//!   `get_range`, `consume`, `consume_until`), blocking and async.
//! - [`graph`] — [`Graph`]: a snapshot of a runtime's tasks, connections and containers, for tools.
//! - [`queue`] — [`Queue`] and its connections; [`split`](mod@split): splitter/joiner helpers.
//! - [`join`] — [`ExactJoin`] and [`ApproxJoin`]: temporal correlation (docs/CORRELATION.md).
//! - [`pacer`] — [`Pacer`], real-time pacing.
//! - [`watch`] — [`Watch`]: the names under a prefix, their creation and destruction, nodes up and
//!   down.
//! - [`mesh_link`] — the engine's link to a node's mesh participant, for the node's driver.
//! - [`remote`] — the client side of the fabric: sessions on a node over zenoh or the node's own
//!   sockets, and sliced waits (`docs/NODES.md`); the wire it speaks is `stampede-wire`'s.
//! - The engine's, re-exported: [`payload`] (copy-in through recycled buffers; what `put`
//!   accepts), [`npy`] (reading and checking `.npy` headers, codec `"npy"`), [`disk`] (a
//!   channel's disk tier) and [`trace`] (the event log's writer).
//!
//! # Features
//!
//! - `remote` (default): the client of a node — [`connect`], [`remote`], and the remote form of
//!   every type. Without it (`default-features = false`) the crate is the embedded runtime alone
//!   and builds without zenoh or `stampede-wire`; the remote arms of the facade are not compiled
//!   (their type is uninhabited, `backend::Never`).
//! - `shuttle`: the engine's locks swapped for shuttle's, for the interleaving tests.
//! - `faults`: faults a test injects into a client (lost replies); tests only.
//!
//! The semantics live in [`stampede_core`], a pure state machine with no I/O; the engine is the
//! thin concurrent driver around it, and the only crate that locks a runtime's state.

#![forbid(unsafe_code)]

mod backend;
pub mod channel;
pub mod join;
pub mod mesh_link;
pub mod pacer;
pub mod queue;
#[cfg(feature = "remote")]
pub mod remote;
pub mod runtime;
pub mod split;
pub mod task;
pub mod watch;

pub use stampede_engine::{disk, npy, payload, trace};
// The engine's waits, which the remote backend's and the joins' waits share.
use stampede_engine::wait;

pub use channel::{Channel, ChannelInput, ChannelOutput, PutOptions};
pub use disk::{DiskStats, DiskTier};
pub use graph::{ConnectionKind, ConnectionView, ContainerView, Graph, TaskView};
pub use join::{ApproxJoin, ExactJoin, Incomplete, JoinPolicy, JoinStats, Joined, Matched};
pub use pacer::{Epoch, Pacer};
pub use payload::{IntoPayload, Parts};
pub use queue::{Queue, QueueInput, QueueOutput};
#[cfg(feature = "remote")]
pub use runtime::{connect, connect_to, connect_with};
pub use runtime::{
    ChannelOptions, ClientTls, ConnectOptions, Container, Credentials, Info, QueueOptions, Runtime, RuntimeStats,
};
pub use split::{split, Gather};
pub use stampede_core::{graph, name, prefetch, tape};
pub use stampede_core::{
    BudgetUse, Codec, Error, ErrorKind, InputOptions, Item, Limits, OutputOptions, Pace, Payload, Prefetch, PutRecord,
    QueueItem, Result, Retention, Selector, Stats, Timestamp, CODEC_NAME_BYTES_MAX, DETACHED, INFINITY, NAME_BYTES_MAX,
    PUT_WINDOW_MAX, TS_MAX,
};
pub use stampede_engine::Changed;
pub use task::{Attach, Task};
pub use watch::{Watch, WatchEvent};

/// `Selector::Oldest`.
pub const OLDEST: Selector = Selector::Oldest;
/// `Selector::Newest`.
pub const NEWEST: Selector = Selector::Newest;
/// `Selector::OldestUnseen`.
pub const OLDEST_UNSEEN: Selector = Selector::OldestUnseen;
/// `Selector::NewestUnseen`.
pub const NEWEST_UNSEEN: Selector = Selector::NewestUnseen;
