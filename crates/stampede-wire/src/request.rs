//! What a client asks of a node: the [`RequestHeader`] (session, secret, at-most-once number and
//! acknowledgements) around one [`Request`], and the bounds a node holds a request to.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_core::{Peer, Timestamp};

use crate::values::{WireRetention, WireSelector};

/// Longest wait a node performs for one request. A blocking remote get or put waits in slices of
/// at most this, each answered (with the result or "not yet"), so that the client always sees
/// the reply of a get that took an item while it is alive (`docs/NODES.md`).
pub const REMOTE_WAIT_SLICE: Duration = Duration::from_secs(1);

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
    /// policy. Its liveliness token must be declared already. Replied [`Reply::Opened`](crate::Reply::Opened).
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
    /// The node's [`Graph`](stampede_core::graph::Graph).
    Graph,
    /// An input connection; a channel's with its bound on lag (`InputOptions`; none for a queue).
    AttachInput {
        task: Handle,
        container: Handle,
        max_lag_items: Option<u64>,
        max_lag_ts: Option<u64>,
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
    /// (`docs/TRACING.md`). Replied [`Reply::TraceClock`](crate::Reply::TraceClock).
    TraceClock,
    /// The names under `prefix` with their kinds (what a watch starts with).
    Listing {
        prefix: String,
    },
    /// Runs the node runtime's invariant check (a test aid); a violation is answered as an error.
    CheckInvariants,
    /// Moves task `task`'s visibility to node `to_node` (participant `to`), so that a shadow of
    /// the task may start there (docs/PROTOCOL.md "A task spans nodes through shadows"). Replied
    /// [`Reply::Moved`](crate::Reply::Moved); the move is declined on `to_node` when this session ends, if nothing
    /// took it over by then.
    MoveTask {
        task: Handle,
        to_node: String,
        to: Peer,
    },
    /// Starts a shadow task at `virtual_time`, owned by this session, taking over `from`'s move
    /// `id` to participant `to` (a [`Reply::Moved`](crate::Reply::Moved) of the task's home node, for the `to` of its
    /// [`MoveTask`](Request::MoveTask)). Replied [`Reply::Handle`](crate::Reply::Handle). Refused without declining
    /// anything when `to` is not the node's incarnation now (the move was to one before a restart).
    TakeOverTask {
        from: Peer,
        id: u64,
        to: Peer,
        virtual_time: Timestamp,
    },
    /// Subscribes the session to the items reclaimed from `container` (`None`: from every
    /// channel and queue), delivered as [`ReclaimEvent`](crate::ReclaimEvent)s on its reclaim key.
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
