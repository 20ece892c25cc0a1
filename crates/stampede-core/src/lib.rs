//! The semantics of Stampede's Space-Time Memory, with no I/O, no threads and no clock.
//!
//! # Layout
//!
//! - [`time`] — timestamps, `INFINITY`, selectors.
//! - [`name`] — what a channel or queue name may be; hierarchical prefixes.
//! - [`op`] — the operation vocabulary: every operation on a runtime as data ([`Op`]) and what
//!   it returns ([`Outcome`]).
//! - [`item`] — payloads (bytes + codec) and items.
//! - [`error`] — the one error type; every message names the channel, the timestamp and the rule.
//! - [`claims`] — a multiset of timestamps with its minimum at hand.
//! - [`progress`] — progress tracking: claims keyed by location, `(location, timestamp, ±n)`
//!   batches, the frontier ts_min, settled horizons (docs/PROGRESS.md).
//! - [`mesh`] — the distributed ts_min protocol between nodes and client sessions: batches of
//!   claim changes tagged `(sender, incarnation, seq)`, moves, doors, fences (docs/PROTOCOL.md).
//! - [`mesh_time`] — one clock and one epoch for every node of a mesh (the NTP estimate, and
//!   which peer a node takes its time from).
//! - [`participant`] — a runtime's [`Progress`] and its [`Mesh`] participant with the rules that
//!   glue them (mirror, stash, floors, doors, takeover checks): the engine's and the simulations'.
//! - [`task`] — a task's virtual time, open items and visibility.
//! - [`channel`] — one channel's items and per-connection item states (docs/SEMANTICS.md,
//!   "Channels").
//! - [`tombstones`] — timestamps of early-reclaimed items, as a bounded set of runs.
//! - [`queue`] — one FIFO queue (docs/SEMANTICS.md, "Queues").
//! - [`effects`] — what an operation reports to its driver (claim updates, open changes, reclaimed
//!   items).
//! - [`stats`] — counters.
//! - [`pacer`] — the arithmetic of real-time pacing (docs/SEMANTICS.md, "Pacing").
//! - [`graph`] — a snapshot of a runtime's tasks, connections and containers, for tools.
//! - [`tape`] — what a remote input connection asks for, and the access pattern it shows.
//! - [`prefetch`] — when a node pushes an item ahead of a remote get, and when the client's cache
//!   may answer that get.
//! - [`id_map`] — [`IdMap`]: hash maps keyed by ids, hashed by one multiplication.
//! - [`mutation`] — the fault switch of the simulations' mutation tests (on only with the
//!   `mutations` feature).
//! - [`watch`] — what a watcher of the name service sees.
//!
//! Each state machine is single-threaded and deterministic; the `stampede` crate wraps them in
//! locks, wakes waiters, applies claim updates to the node's [`progress::Progress`] and runs GC
//! handlers. The [`mesh`] machine ships the same [`progress::Update`]s between participants.

#![forbid(unsafe_code)]

pub mod channel;
pub mod claims;
pub mod effects;
pub mod error;
pub mod graph;
pub mod id_map;
pub mod item;
pub mod mesh;
pub mod mesh_time;
pub mod mutation;
pub mod name;
pub mod op;
pub mod pacer;
pub mod participant;
pub mod prefetch;
pub mod progress;
pub mod queue;
pub mod stats;
pub mod tape;
pub mod task;
pub mod time;
pub mod tombstones;
pub mod watch;

pub use channel::{
    ChannelState, ConnId, InputOptions, Limits, OutputOptions, PutRecord, Retention, PUT_LOG_MAX, PUT_WINDOW_MAX,
};
pub use claims::Claims;
pub use effects::{Effects, OpenChange, OpenChanges};
pub use error::{Error, ErrorKind, Result, DETACHED};
pub use id_map::IdMap;
pub use item::{Codec, Item, Payload, CODEC_NAME_BYTES_MAX};
pub use mesh::{Mesh, MeshLimits, MeshRefusal, Peer};
pub use mesh_time::{ClockReading, MeshTime};
pub use name::NAME_BYTES_MAX;
pub use op::{ContainerInfo, Handle, Listed, MoveProof, Op, Outcome};
pub use pacer::{Pace, PaceRule};
pub use participant::{Participant, Settled, SOLO_SETTLES_MAX};
pub use prefetch::{Notice, Prefetch, PushCache, Pusher, PUSH_BYTES_MAX, PUSH_ITEMS_MAX};
pub use progress::{ContainerKey, Location, Progress, Refusal, Update, Updates};
pub use queue::{QueueItem, QueueState};
pub use stats::{BudgetUse, ConnectionStats, Stats};
pub use tape::{Pattern, Tape, TAPE_RECENT_MAX};
pub use task::{TaskId, TaskState};
pub use time::{Selector, Timestamp, INFINITY, TS_MAX};
pub use watch::WatchEvent;
