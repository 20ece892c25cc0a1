//! What a node answers: a [`Reply`], and the messages a node sends unasked ([`ReclaimEvent`]),
//! with the records they carry ([`Hello`], [`DirectPath`], [`ItemHeader`]).

use serde::{Deserialize, Serialize};
use stampede_core::{Item, Notice, Outcome, Peer, Timestamp};

use crate::error::WireError;
use crate::request::{Handle, Secret};

/// A node's answer. Replies that carry items are followed by their payloads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    Hello(Hello),
    /// The session is open; every later request carries this secret.
    Opened(Secret),
    Error(WireError),
    /// What the session's operation returned; items as headers, their payloads following.
    Outcome(WireOutcome),
}

/// An [`Outcome`] on the wire: each item as its header, its payload after the reply's header.
pub type WireOutcome = Outcome<ItemHeader>;

impl From<WireOutcome> for Reply {
    fn from(outcome: WireOutcome) -> Reply {
        Reply::Outcome(outcome)
    }
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
    /// The node's participant in the distributed ts_min (every node since wire 19; `None` from a
    /// node that shares none): a task of another node may shadow on it.
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
/// ([`Op::OnReclaim`](stampede_core::Op::OnReclaim)); the item's payload follows the header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimEvent {
    /// The container's id (the handle the session knows it by), or `None` for an event of a
    /// runtime-wide subscription.
    pub container: Option<Handle>,
    /// The container's name.
    pub name: String,
    pub item: ItemHeader,
}

/// What a node sends a session unasked about its input connections with prefetch on
/// (docs/PREFETCH.md), in order, numbered from 0 (`seq`: a client that finds a number missing
/// lost an event on the fabric, and forgets as for a reset): a put's notice, with the item's
/// header when it is pushed (its payload follows), or word that notices were dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PushEvent {
    /// A put on the channel of input connection `connection`.
    Put { seq: u64, connection: Handle, notice: Notice, item: Option<ItemHeader> },
    /// Notices to this session were dropped (it read them too slowly): every pushed item and
    /// everything the notices said must be forgotten.
    Reset { seq: u64 },
}

impl PushEvent {
    /// Its number in its session's events.
    pub fn seq(&self) -> u64 {
        match *self {
            PushEvent::Put { seq, .. } | PushEvent::Reset { seq } => seq,
        }
    }
}

/// A session's push events as its client receives them: the number the next one should carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PushOrder {
    next: u64,
}

impl PushOrder {
    /// `event` arrived: whether the session's caches must forget everything first — it is a
    /// reset, or its number shows an event before it was lost on the fabric.
    pub fn forgets(&mut self, event: &PushEvent) -> bool {
        let lost = event.seq() != self.next;
        self.next = event.seq().saturating_add(1);
        lost || matches!(event, PushEvent::Reset { .. })
    }
}

/// An item's timestamp, codec and payload length (the payload itself follows the header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemHeader {
    pub ts: Timestamp,
    pub codec: String,
    pub len: u64,
}

impl ItemHeader {
    /// The header of `item`.
    pub fn of(item: &Item) -> ItemHeader {
        ItemHeader { ts: item.ts, codec: item.payload.codec.name().to_owned(), len: item.payload.len() as u64 }
    }
}
