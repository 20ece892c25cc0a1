//! The remote backend: a client's session on a node over the Eclipse Zenoh fabric (docs/NODES.md).
//!
//! [`crate::connect`] returns a [`crate::Runtime`] whose channels, queues and tasks live on a
//! node (`stampede serve`, or an embedded runtime serving clients through `stampede-node`); the
//! public types forward to the types here, which turn every call into one request (or a few, for
//! a wait) to the node. See `docs/NODES.md` for the design: surrogate sessions, sliced waits, and
//! why no item is lost across the wire.
//!
//! The messages between a client and a node, the zenoh configurations and key expressions and the
//! shared-memory segments are `stampede-wire`'s, shared with the node.
//!
//! - `client` (private) — a client's session on one node, the rules that keep items from being
//!   lost or delivered twice, in parts: `connect` (reaching a node, the hello, opening the
//!   session), `exchange` (one request and its reply, retries, the lateness rule), `waits`
//!   (sliced waits), `sends` (requests sent without waiting), `close` (ending a session).
//! - `direct` (private) — requests on the node's own sockets where it offers them, beside zenoh;
//!   `pipeline` (private) — puts sent there without waiting for their replies.
//! - `runtime`, `task`, `channel`, `queue`, `connection` (private) — the remote forms of the
//!   public types; `reclaim` (private) — GC handlers run on the client for items reclaimed on
//!   the node.

/// The node's wait slice, the default lease and the reply margin, shared with the node
/// (`stampede-wire`).
pub use stampede_wire::{fabric::LIVELINESS_TIMEOUT_DEFAULT, session::QUERY_MARGIN, REMOTE_WAIT_SLICE};

pub(crate) mod channel;
pub(crate) mod client;
pub(crate) mod connection;
pub(crate) mod direct;
#[cfg(feature = "faults")]
pub mod faults;
mod frames;
mod pipeline;
pub(crate) mod queue;
pub(crate) mod reclaim;
pub(crate) mod runtime;
pub(crate) mod task;
pub(crate) mod watch;

/// The reason of the `Closed` error of a call on a client after its runtime was closed.
pub const CLIENT_CLOSED: &str = "the client was closed";

/// The reason of the `Closed` error of a call whose reply came after the call's deadline: the
/// node may have ended the session meanwhile (`client/exchange.rs`), so the reply was dropped.
pub const REPLY_LATE: &str = "the reply came after the call's deadline (was this process stopped or starved?): \
     the node may have ended the session and given back or reclaimed what the reply carried; connect again";
