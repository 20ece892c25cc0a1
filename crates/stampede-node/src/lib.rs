//! Stampede nodes on the Eclipse Zenoh fabric (SPEC §7): a [`Node`] serves its embedded
//! [`stampede::Runtime`] to clients in other processes and on other machines, and [`connect`]
//! makes such a client.
//!
//! ```no_run
//! use std::time::Duration;
//! use stampede::{Limits, Runtime, INFINITY, NEWEST_UNSEEN};
//! use stampede_node::{connect, Node, NodeOptions, RemoteAttach};
//!
//! // The node (usually `stampede serve --listen tcp/127.0.0.1:7447`, another process).
//! let node = Node::serve(Runtime::new(), NodeOptions::listen("tcp/127.0.0.1:7447"))?;
//!
//! // A client: the same names as the embedded API, through the fabric.
//! let rt = connect("tcp/127.0.0.1:7447", Some(Duration::from_secs(5)))?;
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
//! is lost across the wire.
//!
//! # Layout
//!
//! - [`wire`] — the messages between a client and a node: a version byte, a postcard header, the
//!   payload raw; decoding hostile bytes is a typed error, never a panic.
//! - `fabric` (private) — zenoh configurations and the key expressions a node answers on.
//! - [`node`] — [`Node`] and [`NodeOptions`]: the queryable, the liveliness subscriber, the bounds.
//! - `session` (private) — a client's session on the node: the tasks and connections it owns.
//! - `serve` (private) — one request on the node: the embedded operation, in slices when it waits.
//! - [`client`] — [`connect`]; one request from the client, sliced waits, ending a session.
//! - [`runtime`], [`task`], [`channel`], [`queue`] — the client's types, mirroring the embedded
//!   ones: [`RemoteRuntime`], [`RemoteTask`], [`RemoteChannel`] and its connections,
//!   [`RemoteQueue`] and its connections. `connection` (private): what every connection holds.

use std::time::Duration;

pub mod channel;
pub mod client;
mod connection;
mod fabric;
pub mod node;
pub mod queue;
pub mod runtime;
mod serve;
mod session;
pub mod task;
pub mod wire;

pub use channel::{RemoteChannel, RemoteChannelInput, RemoteChannelOutput};
pub use client::connect;
pub use node::{Node, NodeOptions};
pub use queue::{RemoteQueue, RemoteQueueInput, RemoteQueueOutput};
pub use runtime::{RemoteContainer, RemoteRuntime};
pub use task::{RemoteAttach, RemoteTask};

/// Longest wait a node performs for one request. A blocking remote get or put waits in slices of
/// at most this, each answered (with the result or "not yet"), so that the client always sees
/// the reply of a get that took an item while it is alive (`docs/NODES.md`).
pub const REMOTE_WAIT_SLICE: Duration = Duration::from_secs(1);

/// How much longer than the wait it asks for a client waits for a reply before it declares the
/// node unreachable: room for the fabric's latency, the transfer of the payloads, and a loaded
/// node. A request that may take items and whose reply does not come in time ends the session.
pub const QUERY_MARGIN: Duration = Duration::from_secs(5);
