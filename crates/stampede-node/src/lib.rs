//! Stampede nodes on the Eclipse Zenoh fabric (docs/NODES.md): a [`Node`] serves the engine of
//! an embedded `stampede::Runtime` (`Runtime::engine`) to clients in other processes and on other
//! machines, running their operations on it directly. The client is
//! `stampede::connect`, which returns a `stampede::Runtime` with the embedded API.
//!
//! ```no_run
//! use std::time::Duration;
//! use stampede::{Limits, Runtime, INFINITY, NEWEST_UNSEEN};
//! use stampede_node::{Node, NodeOptions};
//!
//! // The node (usually `stampede serve --listen tcp/127.0.0.1:7447`, another process).
//! let node = Node::serve(Runtime::new().engine()?, NodeOptions::listen("tcp/127.0.0.1:7447"))?;
//!
//! // A client: the embedded API, through the fabric.
//! let rt = stampede::connect("tcp/127.0.0.1:7447", Some(Duration::from_secs(5)))?;
//! let frames = rt.create_channel("camera/frames", Limits::unbounded())?;
//! let camera = rt.task(0)?;
//! let out = camera.attach_output(&frames)?;
//! let tracker = rt.task(INFINITY)?;
//! let inp = tracker.attach_input(&frames)?;
//! out.put(0, vec![7u8; 16])?;
//! let item = inp.get(NEWEST_UNSEEN, Some(Duration::from_secs(1)))?;
//! inp.consume(item.ts)?;
//! # Ok::<(), stampede::Error>(())
//! ```
//!
//! See `docs/NODES.md` for the design: surrogate sessions, the fabric, failures, and why no item
//! is lost across the wire. The wire format and the key expressions are `stampede-wire`'s,
//! shared with the client.
//!
//! # Layout
//!
//! - [`node`] — [`Node`] and [`NodeOptions`]: the queryable, the liveliness subscriber, the bounds.
//! - `session` (private) — a client's session on the node: the tasks and connections it owns.
//! - `desk` (private) — the node's sessions and the session protocol's rules for each request
//!   (which session, at most once): sans-IO, driven by `serve` and by the whole-path simulation.
//! - `serve` (private) — one request on the node: the embedded operation, in slices when it waits.
//! - [`direct`] — the node's own sockets beside zenoh (the direct request path), serving the
//!   same requests.
//! - [`websocket`] — the node's WebSocket endpoint: browser clients' sessions, the same requests.
//! - [`access`] — access control: users, passwords, rights per name prefix, session secrets.
//! - [`budget`] — the byte budgets of the sessions' puts, node-wide and per session, and their
//!   defaults from the machine's memory.
//! - [`mesh`] — the fabric driver of the distributed ts_min: the node's participant, its door,
//!   its messages and liveliness on zenoh (`docs/PROTOCOL.md`).
//! - `linger` (private) — a refused connection's close that lets the refusal arrive.
//! - `places` (private) — places for connections not yet proven, bounded in all and per source.
//! - `names` (private) — the node's liveliness token and its runtime's name changes, for watchers.
//! - `reclaim` (private) — remote clients' GC handlers: items reclaimed here, sent to them.
//! - `release` (private) — what a get a client gave up on took, given back.

pub mod access;
pub mod budget;
mod desk;
pub mod direct;
mod join;
mod linger;
pub mod mesh;
mod names;
pub mod node;
mod places;
mod push;
mod readers;
mod reclaim;
mod release;
mod serve;
mod session;
#[cfg(test)]
mod sim;
pub mod websocket;

pub use access::AccessPolicy;
pub use node::{
    workers_default, Node, NodeOptions, TlsOptions, LIVELINESS_TIMEOUT_MAX, LIVELINESS_TIMEOUT_MIN, WORKERS_MAX,
};
pub use reclaim::RECLAIM_OUTBOX_MAX;
pub use stampede_wire::session::REPLIES_KEPT_MAX;
