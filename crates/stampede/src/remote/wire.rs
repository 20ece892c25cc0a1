//! The wire format between a client and a node: what a zenoh query and its reply carry.
//!
//! A message is
//!
//! ```text
//! [VERSION: u8][header: postcard][payload: raw bytes, to the end]
//! ```
//!
//! The header is a [`RequestHeader`] (client → node) or a [`Reply`] (node → client), encoded with
//! `postcard` (compact varints, no self-description, safe on hostile input). The payload — the
//! bytes of a put, or of the items a get returns — travels raw after the header, so a 6 MB frame
//! is never copied through serde: the sender appends it to the zenoh buffer without a copy, the
//! receiver slices it out of the message.
//!
//! The version byte comes first and is checked before anything else: a node and a client of
//! different releases fail with a clear [`DecodeError::Version`] instead of misreading each other
//! (SPEC §7). Decoding never panics, whatever the bytes; every failure is a [`DecodeError`]
//! (proptest over random and mutated messages in `tests/wire.rs`). Requests are bounded
//! ([`REQUEST_HEADER_BYTES_MAX`]; the payload by the node's `payload_bytes_max`).
//!
//! Errors cross the wire unchanged: [`WireError`] mirrors [`crate::Error`] variant by variant,
//! and converting it back yields an equal error with the same message text.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use crate::{Error, Limits, Retention, Selector, Stats, Timestamp};
use serde::{Deserialize, Serialize};
use stampede_core::Peer;

/// The wire format's version, the first byte of every message. Bump it on any change to the
/// types below.
pub const VERSION: u8 = 11;

/// Largest request header a node decodes (names are at most `NAME_BYTES_MAX` bytes; codec names
/// and session ids are short): a request whose header does not fit is refused.
pub const REQUEST_HEADER_BYTES_MAX: usize = 16 * 1024;

/// Longest session id: a zenoh id in hex.
pub const SESSION_ID_BYTES_MAX: usize = 32;

/// Identifies a task, connection or container within a client's session on a node.
pub type Handle = u64;

/// What a client asks of a node, with the session it asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// The client's session id (hex, at most [`SESSION_ID_BYTES_MAX`] bytes); empty for
    /// [`Request::Hello`].
    pub session: String,
    /// The session's secret, from the node's reply to [`Request::Open`] (zeros before): session
    /// ids are visible on the fabric (liveliness keys), so a request must also prove it comes
    /// from the client that opened the session.
    pub secret: Secret,
    /// The request's number in its session, for at-most-once execution: the node runs a numbered
    /// request once and answers a repeat (a retry after a lost reply carries the number of the
    /// request it repeats) with the first answer. 0: not numbered (hello, open, requests sent
    /// without waiting for their reply).
    pub seq: u64,
    /// Numbers of this session's requests whose replies the client has read since it last said
    /// so (at most [`ACKS_MAX`]): the node forgets those replies.
    pub acks: Vec<u64>,
    /// The request.
    pub request: Request,
}

/// Most reply numbers one request header acknowledges; the client says the rest with its next
/// requests.
pub const ACKS_MAX: usize = 64;

impl RequestHeader {
    /// A header of `session` proving `secret`, not numbered and acknowledging nothing.
    pub fn new(session: impl Into<String>, secret: Secret, request: Request) -> RequestHeader {
        RequestHeader { session: session.into(), secret, seq: 0, acks: Vec::new(), request }
    }
}

/// A session's secret: random bytes the node hands to the client that opened the session.
pub type Secret = [u8; 16];

/// One request. Waits (`wait_us`) are at most the node's wait slice: a longer wait is clamped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// First contact, before any session: the node's name, zenoh id and bounds.
    Hello,
    /// Opens the session named in the header, as `user` (with `password`) on a node with an access
    /// policy. Its liveliness token must be declared already. Replied [`Reply::Opened`].
    Open {
        user: Option<String>,
        password: Option<String>,
    },
    /// Ends the session: its tasks are closed, its connections detached.
    Close,
    CreateChannel {
        name: String,
        capacity: Option<u64>,
        bytes_max: Option<u64>,
        retention: WireRetention,
        codec: Option<String>,
        description: String,
    },
    CreateQueue {
        name: String,
        capacity: Option<u64>,
        bytes_max: Option<u64>,
        description: String,
    },
    Lookup {
        name: String,
    },
    Names {
        prefix: String,
    },
    ContainerStats {
        container: Handle,
    },
    Destroy {
        container: Handle,
    },
    Task {
        virtual_time: Timestamp,
    },
    Spawn {
        task: Handle,
        virtual_time: Timestamp,
    },
    SetVirtualTime {
        task: Handle,
        virtual_time: Timestamp,
    },
    /// The task's virtual time and visibility.
    Times {
        task: Handle,
    },
    CloseTask {
        task: Handle,
    },
    /// Labels a task for tools.
    SetTaskName {
        task: Handle,
        name: String,
    },
    /// The node's [`Graph`](crate::graph::Graph).
    Graph,
    AttachInput {
        task: Handle,
        container: Handle,
    },
    AttachOutput {
        task: Handle,
        container: Handle,
    },
    Detach {
        connection: Handle,
    },
    /// A put into a channel; the payload follows the header.
    Put {
        connection: Handle,
        ts: Timestamp,
        codec: String,
        refcount: Option<u32>,
        wait_us: u64,
    },
    Get {
        connection: Handle,
        selector: WireSelector,
        wait_us: u64,
    },
    GetRange {
        connection: Handle,
        t0: Timestamp,
        t1: Timestamp,
    },
    Consume {
        connection: Handle,
        ts: Timestamp,
    },
    ConsumeUntil {
        connection: Handle,
        ts: Timestamp,
    },
    /// A put into a queue; the payload follows the header.
    QueuePut {
        connection: Handle,
        ts: Timestamp,
        codec: String,
        wait_us: u64,
    },
    QueueGet {
        connection: Handle,
        wait_us: u64,
    },
    /// Consumes the queue item `seq` at `ts`, or (no `seq`) the oldest open one at `ts`.
    QueueConsume {
        connection: Handle,
        seq: Option<u64>,
        ts: Timestamp,
    },
    /// Timestamps of the items a channel stores now.
    Timestamps {
        container: Handle,
    },
    /// A channel's settled horizon and whether its producer set is closed.
    Settledness {
        container: Handle,
    },
    CloseProducers {
        container: Handle,
    },
    /// Demand feedback on a channel output connection.
    Demand {
        connection: Handle,
    },
    /// Waits at most `wait_us` for what would wake a get (`selector`; a queue input: none) or a
    /// put (an output: none) blocked on the connection; answered `Done` either way (a readiness
    /// wait may end spuriously).
    WaitChanged {
        connection: Handle,
        selector: Option<WireSelector>,
        wait_us: u64,
    },
    /// Waits at most `wait_us` for a put or claim change anywhere on the node (what joins wait
    /// for); answered `Done` either way.
    WaitProgress {
        wait_us: u64,
    },
    TsMin,
    Stats,
    Collect,
    /// The node's host and its monotonic clock, for a traced client's clock exchange
    /// (`docs/TRACING.md`). Replied [`Reply::TraceClock`].
    TraceClock,
    /// The names under `prefix` with their kinds (what a watch starts with).
    Listing {
        prefix: String,
    },
    /// Runs the node runtime's invariant check (a test aid); a violation is answered as an error.
    CheckInvariants,
    /// Moves task `task`'s visibility to node `to_node` (participant `to`), so that a shadow of
    /// the task may start there (docs/PROTOCOL.md "A task spans nodes through shadows"). Replied
    /// [`Reply::Moved`]; the move is declined on `to_node` when this session ends, if nothing
    /// took it over by then.
    MoveTask {
        task: Handle,
        to_node: String,
        to: Peer,
    },
    /// Starts a shadow task at `virtual_time`, owned by this session, taking over `from`'s move
    /// `id` to participant `to` (a [`Reply::Moved`] of the task's home node, for the `to` of its
    /// [`MoveTask`](Request::MoveTask)). Replied [`Reply::Handle`]. Refused without declining
    /// anything when `to` is not the node's incarnation now (the move was to one before a restart).
    TakeOverTask {
        from: Peer,
        id: u64,
        to: Peer,
        virtual_time: Timestamp,
    },
    /// Subscribes the session to the items reclaimed from `container` (`None`: from every
    /// channel and queue), delivered as [`ReclaimEvent`]s on its reclaim key.
    OnReclaim {
        container: Option<Handle>,
    },
}

impl Request {
    /// `true` for the requests a payload follows.
    pub fn carries_payload(&self) -> bool {
        matches!(self, Request::Put { .. } | Request::QueuePut { .. })
    }

    /// `true` for the requests whose lost reply leaves the node holding what the client does not
    /// know of: items made open on a connection (gets), a task or connection created or not
    /// closed (its claims hold ts_min), or a task's move to another node (its carry holds every
    /// node's ts_min until the move is taken over, or declined when the session ends). If the
    /// client does not see their reply, it ends its session so that all of it goes back (see
    /// `docs/NODES.md`).
    pub fn holds_on_node(&self) -> bool {
        matches!(
            self,
            Request::Get { .. }
                | Request::GetRange { .. }
                | Request::QueueGet { .. }
                | Request::Task { .. }
                | Request::Spawn { .. }
                | Request::MoveTask { .. }
                | Request::TakeOverTask { .. }
                | Request::AttachInput { .. }
                | Request::AttachOutput { .. }
                | Request::CloseTask { .. }
                | Request::Detach { .. }
        )
    }

    /// The operation's name in errors.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Hello => "hello",
            Request::Open { .. } => "connect",
            Request::Close => "close",
            Request::CreateChannel { .. } => "create_channel",
            Request::CreateQueue { .. } => "create_queue",
            Request::Lookup { .. } => "lookup",
            Request::Names { .. } => "names",
            Request::ContainerStats { .. } => "stats",
            Request::Destroy { .. } => "destroy",
            Request::Task { .. } => "task",
            Request::Spawn { .. } => "spawn",
            Request::SetVirtualTime { .. } => "set_virtual_time",
            Request::Times { .. } => "virtual_time",
            Request::CloseTask { .. } => "close",
            Request::AttachInput { .. } => "attach_input",
            Request::AttachOutput { .. } => "attach_output",
            Request::Detach { .. } => "detach",
            Request::Put { .. } | Request::QueuePut { .. } => "put",
            Request::Get { .. } | Request::QueueGet { .. } => "get",
            Request::GetRange { .. } => "get_range",
            Request::Consume { .. } | Request::QueueConsume { .. } => "consume",
            Request::ConsumeUntil { .. } => "consume_until",
            Request::Timestamps { .. } => "timestamps",
            Request::Settledness { .. } => "settled_below",
            Request::CloseProducers { .. } => "close_producers",
            Request::Demand { .. } => "demand",
            Request::WaitChanged { .. } => "changed",
            Request::WaitProgress { .. } => "join",
            Request::CheckInvariants => "check_invariants",
            Request::SetTaskName { .. } => "set_name",
            Request::Graph => "graph",
            Request::Listing { .. } => "watch",
            Request::OnReclaim { .. } => "on_reclaim",
            Request::MoveTask { .. } | Request::TakeOverTask { .. } => "shadow",
            Request::TsMin => "ts_min",
            Request::Stats => "stats",
            Request::Collect => "collect",
            Request::TraceClock => "trace_clock",
        }
    }
}

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
    Graph(crate::graph::Graph),
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
/// ([`Request::OnReclaim`]); the item's payload follows the header.
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

/// [`Selector`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireSelector {
    At(Timestamp),
    Oldest,
    Newest,
    OldestUnseen,
    NewestUnseen,
}

impl From<Selector> for WireSelector {
    fn from(s: Selector) -> Self {
        match s {
            Selector::At(ts) => WireSelector::At(ts),
            Selector::Oldest => WireSelector::Oldest,
            Selector::Newest => WireSelector::Newest,
            Selector::OldestUnseen => WireSelector::OldestUnseen,
            Selector::NewestUnseen => WireSelector::NewestUnseen,
        }
    }
}

impl From<WireSelector> for Selector {
    fn from(s: WireSelector) -> Self {
        match s {
            WireSelector::At(ts) => Selector::At(ts),
            WireSelector::Oldest => Selector::Oldest,
            WireSelector::Newest => Selector::Newest,
            WireSelector::OldestUnseen => Selector::OldestUnseen,
            WireSelector::NewestUnseen => Selector::NewestUnseen,
        }
    }
}

/// [`Retention`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireRetention {
    History,
    CurrentReaders,
}

impl From<Retention> for WireRetention {
    fn from(r: Retention) -> Self {
        match r {
            Retention::History => WireRetention::History,
            Retention::CurrentReaders => WireRetention::CurrentReaders,
        }
    }
}

impl From<WireRetention> for Retention {
    fn from(r: WireRetention) -> Self {
        match r {
            WireRetention::History => Retention::History,
            WireRetention::CurrentReaders => Retention::CurrentReaders,
        }
    }
}

/// [`Stats`] on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStats {
    pub live_items: u64,
    pub live_bytes: u64,
    pub reclaimed: u64,
    pub puts: u64,
    pub gets: u64,
    pub inputs: u64,
    pub outputs: u64,
    pub tombstones: u64,
    pub tombstone_runs: u64,
    pub claim: Option<Timestamp>,
    pub ts_min: Timestamp,
}

impl From<&Stats> for WireStats {
    fn from(s: &Stats) -> Self {
        WireStats {
            live_items: s.live_items as u64,
            live_bytes: s.live_bytes as u64,
            reclaimed: s.reclaimed,
            puts: s.puts,
            gets: s.gets,
            inputs: s.inputs as u64,
            outputs: s.outputs as u64,
            tombstones: s.tombstones as u64,
            tombstone_runs: s.tombstone_runs as u64,
            claim: s.claim,
            ts_min: s.ts_min,
        }
    }
}

impl From<&WireStats> for Stats {
    fn from(s: &WireStats) -> Self {
        Stats {
            live_items: size(s.live_items),
            live_bytes: size(s.live_bytes),
            reclaimed: s.reclaimed,
            puts: s.puts,
            gets: s.gets,
            inputs: size(s.inputs),
            outputs: size(s.outputs),
            tombstones: size(s.tombstones),
            tombstone_runs: size(s.tombstone_runs),
            claim: s.claim,
            ts_min: s.ts_min,
        }
    }
}

/// A count from the wire as a `usize`, saturated (only a 32-bit client could ever saturate).
pub fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// [`Limits`] from the wire; `None` when a bound does not fit this machine's `usize`.
pub fn limits(capacity: Option<u64>, bytes_max: Option<u64>) -> Option<Limits> {
    let convert = |n: Option<u64>| n.map(usize::try_from).transpose();
    Some(Limits { capacity: convert(capacity).ok()?, bytes_max: convert(bytes_max).ok()? })
}

/// [`crate::Error`] on the wire, variant by variant; `&'static str` fields travel as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireError {
    BelowVisibility {
        op: String,
        name: String,
        ts: Timestamp,
        what: String,
        limit: Timestamp,
    },
    DuplicateTimestamp {
        name: String,
        ts: Timestamp,
    },
    InvalidTimestamp {
        op: String,
        name: String,
        ts: Timestamp,
    },
    Full {
        name: String,
        ts: Timestamp,
        reason: String,
        can_never_fit: bool,
    },
    NotAvailable {
        op: String,
        name: String,
        selector: WireSelector,
        previous: Option<Timestamp>,
        next: Option<Timestamp>,
        settled: bool,
    },
    AlreadyConsumed {
        name: String,
        ts: Timestamp,
    },
    Reclaimed {
        name: String,
        ts: Timestamp,
        reason: String,
    },
    Closed {
        name: String,
        reason: String,
    },
    NotFound {
        name: String,
    },
    AlreadyExists {
        name: String,
    },
    InvalidArgument {
        op: String,
        name: String,
        reason: String,
    },
    Unreachable {
        op: String,
        name: String,
        reason: String,
    },
    PermissionDenied {
        op: String,
        name: String,
        right: String,
        reason: String,
    },
    Storage {
        op: String,
        name: String,
        reason: String,
    },
}

impl From<&Error> for WireError {
    fn from(e: &Error) -> Self {
        let text = |s: &str| s.to_owned();
        match e {
            Error::BelowVisibility { op, name, ts, what, limit } => WireError::BelowVisibility {
                op: text(op),
                name: name.clone(),
                ts: *ts,
                what: text(what),
                limit: *limit,
            },
            Error::DuplicateTimestamp { name, ts } => WireError::DuplicateTimestamp { name: name.clone(), ts: *ts },
            Error::InvalidTimestamp { op, name, ts } => {
                WireError::InvalidTimestamp { op: text(op), name: name.clone(), ts: *ts }
            }
            Error::Full { name, ts, reason, can_never_fit } => {
                WireError::Full { name: name.clone(), ts: *ts, reason: reason.clone(), can_never_fit: *can_never_fit }
            }
            Error::NotAvailable { op, name, selector, previous, next, settled } => WireError::NotAvailable {
                op: text(op),
                name: name.clone(),
                selector: (*selector).into(),
                previous: *previous,
                next: *next,
                settled: *settled,
            },
            Error::AlreadyConsumed { name, ts } => WireError::AlreadyConsumed { name: name.clone(), ts: *ts },
            Error::Reclaimed { name, ts, reason } => {
                WireError::Reclaimed { name: name.clone(), ts: *ts, reason: reason.clone() }
            }
            Error::Closed { name, reason } => WireError::Closed { name: name.clone(), reason: text(reason) },
            Error::NotFound { name } => WireError::NotFound { name: name.clone() },
            Error::AlreadyExists { name } => WireError::AlreadyExists { name: name.clone() },
            Error::InvalidArgument { op, name, reason } => {
                WireError::InvalidArgument { op: text(op), name: name.clone(), reason: reason.clone() }
            }
            Error::Unreachable { op, name, reason } => {
                WireError::Unreachable { op: text(op), name: name.clone(), reason: reason.clone() }
            }
            Error::PermissionDenied { op, name, right, reason } => WireError::PermissionDenied {
                op: text(op),
                name: name.clone(),
                right: text(right),
                reason: reason.clone(),
            },
            Error::Storage { op, name, reason } => {
                WireError::Storage { op: text(op), name: name.clone(), reason: reason.clone() }
            }
        }
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::BelowVisibility { op, name, ts, what, limit } => {
                Error::BelowVisibility { op: keep(&op), name, ts, what: keep(&what), limit }
            }
            WireError::DuplicateTimestamp { name, ts } => Error::DuplicateTimestamp { name, ts },
            WireError::InvalidTimestamp { op, name, ts } => Error::InvalidTimestamp { op: keep(&op), name, ts },
            WireError::Full { name, ts, reason, can_never_fit } => Error::Full { name, ts, reason, can_never_fit },
            WireError::NotAvailable { op, name, selector, previous, next, settled } => {
                Error::NotAvailable { op: keep(&op), name, selector: selector.into(), previous, next, settled }
            }
            WireError::AlreadyConsumed { name, ts } => Error::AlreadyConsumed { name, ts },
            WireError::Reclaimed { name, ts, reason } => Error::Reclaimed { name, ts, reason },
            WireError::Closed { name, reason } => Error::Closed { name, reason: keep(&reason) },
            WireError::NotFound { name } => Error::NotFound { name },
            WireError::AlreadyExists { name } => Error::AlreadyExists { name },
            WireError::InvalidArgument { op, name, reason } => Error::InvalidArgument { op: keep(&op), name, reason },
            WireError::Unreachable { op, name, reason } => Error::Unreachable { op: keep(&op), name, reason },
            WireError::PermissionDenied { op, name, right, reason } => {
                Error::PermissionDenied { op: keep(&op), name, right: keep(&right), reason }
            }
            WireError::Storage { op, name, reason } => Error::Storage { op: keep(&op), name, reason },
        }
    }
}

/// Most distinct texts this process keeps for the `&'static str` fields of errors decoded from
/// the wire (operation names, `Closed` reasons: a few dozen exist). Past it, or for a text longer
/// than [`KEPT_TEXT_BYTES_MAX`], the field reads [`TEXT_NOT_KEPT`]: a hostile node cannot grow a
/// client's memory without bound.
pub const KEPT_TEXTS_MAX: usize = 1024;
/// Longest text kept for a `&'static str` error field.
pub const KEPT_TEXT_BYTES_MAX: usize = 256;
/// What a `&'static str` error field reads when its text was not kept.
pub const TEXT_NOT_KEPT: &str = "(text not kept: the node sent too many distinct texts)";

/// `text` as a `&'static str`: each distinct text is allocated once and kept for the life of the
/// process (bounded by [`KEPT_TEXTS_MAX`]), so an error decoded from the wire equals, and prints
/// exactly as, the node's.
fn keep(text: &str) -> &'static str {
    static KEPT: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut kept = KEPT.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = kept.get(text) {
        return known;
    }
    if text.len() > KEPT_TEXT_BYTES_MAX || kept.len() >= KEPT_TEXTS_MAX {
        return TEXT_NOT_KEPT;
    }
    let leaked: &'static str = Box::leak(text.into());
    kept.insert(leaked);
    leaked
}

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No bytes at all.
    Empty,
    /// The sender speaks another version of this format.
    Version { found: u8 },
    /// The header is malformed (postcard's reason).
    Header(String),
    /// The header is longer than the bound for its kind of message.
    HeaderTooLarge { bytes: usize, bytes_max: usize },
    /// Bytes follow a header that carries no payload, or item lengths do not add up to the payload.
    Payload(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Empty => f.write_str("an empty message"),
            DecodeError::Version { found } => write!(
                f,
                "wire version mismatch: the other side speaks version {found}, this side speaks {VERSION}; run the \
                 same Stampede release on the node and its clients"
            ),
            DecodeError::Header(reason) => write!(f, "a malformed header ({reason})"),
            DecodeError::HeaderTooLarge { bytes, bytes_max } => {
                write!(f, "a request header of {bytes} bytes (at most {bytes_max})")
            }
            DecodeError::Payload(reason) => write!(f, "a malformed payload ({reason})"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encodes a header: the version byte, then postcard. The payload, if any, is appended by the
/// caller (without a copy).
pub fn encode<T: Serialize>(header: &T) -> Vec<u8> {
    let out = vec![VERSION];
    // The wire types are plain structs and enums of integers, strings, options and vectors, all of
    // which postcard serializes into a growable Vec: this cannot fail.
    postcard::to_extend(header, out).expect("postcard serializes every wire type into a Vec")
}

/// Decodes a request: its header and the payload that follows. Refuses a header longer than
/// [`REQUEST_HEADER_BYTES_MAX`], and a payload after a request that carries none.
pub fn decode_request(message: &[u8]) -> Result<(RequestHeader, &[u8]), DecodeError> {
    let (header, payload): (RequestHeader, _) = decode(message)?;
    let header_bytes = message.len() - payload.len();
    if header_bytes > REQUEST_HEADER_BYTES_MAX {
        return Err(DecodeError::HeaderTooLarge { bytes: header_bytes, bytes_max: REQUEST_HEADER_BYTES_MAX });
    }
    if !payload.is_empty() && !header.request.carries_payload() {
        return Err(DecodeError::Payload(format!("{} bytes after a {} request", payload.len(), header.request.op())));
    }
    Ok((header, payload))
}

/// Decodes a reply: its header and the payload that follows, checked against the item lengths
/// the header declares.
pub fn decode_reply(message: &[u8]) -> Result<(Reply, &[u8]), DecodeError> {
    let (reply, payload): (Reply, _) = decode(message)?;
    check_reply_payload(&reply, payload.len())?;
    Ok((reply, payload))
}

/// Decodes the header of a request whose payload was passed as a shared-memory segment
/// (`shared.rs`) rather than after the header: nothing may follow the header, and the request
/// must be one that carries a payload.
pub fn decode_request_passed(message: &[u8]) -> Result<RequestHeader, DecodeError> {
    let (header, payload) = decode_request(message)?;
    if !payload.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a request whose payload was passed", payload.len())));
    }
    if !header.request.carries_payload() {
        return Err(DecodeError::Payload(format!("a payload passed with a {} request", header.request.op())));
    }
    Ok(header)
}

/// Decodes a reply whose payload, `passed_bytes` long, was passed as a shared-memory segment:
/// nothing may follow the header, which must declare that many bytes.
pub fn decode_reply_passed(message: &[u8], passed_bytes: usize) -> Result<Reply, DecodeError> {
    let (reply, payload): (Reply, _) = decode(message)?;
    if !payload.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a reply whose payload was passed", payload.len())));
    }
    if !matches!(reply, Reply::Item(_) | Reply::QueueItem { .. }) {
        return Err(DecodeError::Payload("a payload passed with a reply that carries no item".into()));
    }
    check_reply_payload(&reply, passed_bytes)?;
    Ok(reply)
}

/// Checks `payload_bytes` against the item lengths `reply` declares.
fn check_reply_payload(reply: &Reply, payload_bytes: usize) -> Result<(), DecodeError> {
    let declared = match reply {
        Reply::Item(item) | Reply::QueueItem { item, .. } => Some(item.len),
        Reply::Items(items) => Some(
            items
                .iter()
                .try_fold(0u64, |sum, item| sum.checked_add(item.len))
                .ok_or_else(|| DecodeError::Payload("item lengths overflow".into()))?,
        ),
        _ => None,
    };
    let actual = payload_bytes as u64;
    match declared {
        Some(n) if n != actual => {
            Err(DecodeError::Payload(format!("the header declares {n} payload bytes, {actual} follow")))
        }
        None if actual != 0 => Err(DecodeError::Payload(format!("{actual} bytes after a reply that carries none"))),
        _ => Ok(()),
    }
}

/// Decodes a name change a node published.
pub fn decode_name_event(message: &[u8]) -> Result<crate::WatchEvent, DecodeError> {
    let (event, rest): (crate::WatchEvent, _) = decode(message)?;
    if !rest.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a name event", rest.len())));
    }
    Ok(event)
}

/// Decodes a reclaim event: its header and the item's payload, checked against its length.
pub fn decode_event(message: &[u8]) -> Result<(ReclaimEvent, &[u8]), DecodeError> {
    let (event, payload): (ReclaimEvent, _) = decode(message)?;
    let (declared, actual) = (event.item.len, payload.len() as u64);
    if declared != actual {
        return Err(DecodeError::Payload(format!("the event declares {declared} payload bytes, {actual} follow")));
    }
    Ok((event, payload))
}

fn decode<'a, T: Deserialize<'a>>(message: &'a [u8]) -> Result<(T, &'a [u8]), DecodeError> {
    let (&version, rest) = message.split_first().ok_or(DecodeError::Empty)?;
    if version != VERSION {
        return Err(DecodeError::Version { found: version });
    }
    postcard::take_from_bytes(rest).map_err(|e| DecodeError::Header(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error variant crosses the wire as an equal error with the same message text.
    #[test]
    fn errors_cross_unchanged() {
        let errors = [
            Error::BelowVisibility { op: "put", name: "cam".into(), ts: 4, what: "the task's visibility", limit: 5 },
            Error::DuplicateTimestamp { name: "cam".into(), ts: 3 },
            Error::InvalidTimestamp { op: "task", name: String::new(), ts: -1 },
            Error::Full { name: "cam".into(), ts: 3, reason: "capacity 1".into(), can_never_fit: false },
            Error::NotAvailable {
                op: "get",
                name: "cam".into(),
                selector: Selector::NewestUnseen,
                previous: Some(1),
                next: None,
                settled: false,
            },
            Error::AlreadyConsumed { name: "cam".into(), ts: 3 },
            Error::Reclaimed { name: "cam".into(), ts: 3, reason: "below ts_min 4".into() },
            Error::detached("cam"),
            Error::NotFound { name: "cam".into() },
            Error::AlreadyExists { name: "cam".into() },
            Error::InvalidArgument { op: "put", name: "cam".into(), reason: "refcount 0".into() },
            Error::Unreachable { op: "get", name: "node".into(), reason: "no reply".into() },
        ];
        for error in errors {
            let reply = Reply::Error(WireError::from(&error));
            let message = encode(&reply);
            let (decoded, payload) = decode_reply(&message).expect("decodes");
            assert!(payload.is_empty());
            let Reply::Error(wire) = decoded else { panic!("not an error: {decoded:?}") };
            let back = Error::from(wire);
            assert_eq!(back, error);
            assert_eq!(back.to_string(), error.to_string());
        }
    }

    /// Kept texts are shared; too long a text is replaced, not kept.
    #[test]
    fn kept_texts_are_bounded() {
        let a = keep("the connection was detached");
        let b = keep(&String::from("the connection was detached"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(keep(&"x".repeat(KEPT_TEXT_BYTES_MAX + 1)), TEXT_NOT_KEPT);
    }

    /// Another version's message is a clear error, whatever follows the version byte.
    #[test]
    fn version_mismatch_is_clear() {
        let mut message = encode(&Reply::Done);
        message[0] = VERSION + 1;
        let e = decode_reply(&message).unwrap_err();
        assert_eq!(e, DecodeError::Version { found: VERSION + 1 });
        assert!(e.to_string().contains("same Stampede release"), "{e}");
    }
}
