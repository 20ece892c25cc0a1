//! What a node answers: a [`Reply`], and the messages a node sends unasked ([`ReclaimEvent`]),
//! with the records they carry ([`Hello`], [`DirectPath`], [`ContainerInfo`], [`ItemHeader`]).

use serde::{Deserialize, Serialize};
use stampede_core::graph::Graph;
use stampede_core::{Peer, Timestamp};

use crate::error::WireError;
use crate::request::{Handle, Secret};
use crate::values::{WireRetention, WireStats};

/// A node's answer. Replies that carry items are followed by their payloads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    Hello(Hello),
    /// The session is open; every later request carries this secret.
    Opened(Secret),
    Done,
    Container(ContainerInfo),
    Handle(Handle),
    Times {
        virtual_time: Timestamp,
        visibility: Timestamp,
    },
    /// One channel item; its payload follows.
    Item(ItemHeader),
    /// Channel items in timestamp order; their payloads follow back to back.
    Items(Vec<ItemHeader>),
    /// One queue item; its payload follows.
    QueueItem {
        seq: u64,
        item: ItemHeader,
    },
    Names(Vec<String>),
    /// Names with their kinds: `true` for a queue.
    Listing(Vec<(String, bool)>),
    Timestamp(Timestamp),
    Timestamps(Vec<Timestamp>),
    Settledness {
        settled_below: Timestamp,
        producers_closed: bool,
    },
    Stats(WireStats),
    RuntimeStats {
        ts_min: Timestamp,
        containers: u64,
        claims: u64,
    },
    Count(u64),
    Graph(Graph),
    /// A task's visibility moved by node participant `from` as its move `id`.
    Moved {
        from: Peer,
        id: u64,
        visibility: Timestamp,
    },
    Error(WireError),
    /// The node's host, and its monotonic clock (ns) when it received the request and when it
    /// replied.
    TraceClock {
        host: String,
        received_ns: u64,
        replied_ns: u64,
    },
}

/// What a node tells a client on first contact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The node's name (its key expressions are `stampede/<node>/…`).
    pub node: String,
    /// The node's zenoh id, so a client reaching several nodes answers to the one it connected to.
    pub zid: String,
    /// How long after a client vanishes its session is closed (the zenoh lease).
    pub liveliness_timeout_ms: u64,
    /// Largest payload the node accepts in one put.
    pub payload_bytes_max: u64,
    /// Longest wait the node performs for one request.
    pub wait_slice_ms: u64,
    /// The node's participant in the distributed ts_min, when it shares one with its mesh
    /// (`--mesh-ts-min`): only then may a task of another node shadow on it.
    pub mesh: Option<Peer>,
    /// The node's direct request path ([`DirectPath`]): its own sockets beside zenoh.
    pub direct: DirectPath,
}

/// Where a node takes requests on its own sockets (the direct path, `docs/ARCHITECTURE.md`
/// "The request path"): the same messages as its zenoh queryable, in [`FRAME_LENGTH_BYTES`]
/// length-prefixed frames, one request after another per connection. A client on this host
/// uses the Unix socket, one elsewhere the TCP port paired with the zenoh port it reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectPath {
    /// The abstract Unix socket's name (Linux; no file), when the node has one.
    pub unix: Option<String>,
    /// `(zenoh port, direct port)` for each `tcp/` endpoint the node listens on.
    pub tcp: Vec<(u16, u16)>,
}

/// A direct-path frame starts with its body's length, little-endian.
pub const FRAME_LENGTH_BYTES: usize = 4;

/// An item reclaimed on the node, sent to a session that subscribed to it
/// ([`Request::OnReclaim`](crate::Request::OnReclaim)); the item's payload follows the header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimEvent {
    /// The container's id (the handle the session knows it by), or `None` for an event of a
    /// runtime-wide subscription.
    pub container: Option<Handle>,
    /// The container's name.
    pub name: String,
    pub item: ItemHeader,
}

/// A channel or queue as a session sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerInfo {
    pub id: Handle,
    pub queue: bool,
    pub name: String,
    pub capacity: Option<u64>,
    pub bytes_max: Option<u64>,
    /// A channel's retention (a queue's: `History`).
    pub retention: WireRetention,
    /// The codec its payloads must have, if it declares one.
    pub codec: Option<String>,
    pub description: String,
}

/// An item's timestamp, codec and payload length (the payload itself follows the header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemHeader {
    pub ts: Timestamp,
    pub codec: String,
    pub len: u64,
}
