//! What a client asks of a node: the [`RequestHeader`] (session, secret, at-most-once number and
//! acknowledgements) around one [`Request`], and the bounds a node holds a request to.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_core::Op;

/// Longest wait a node performs for one request. A blocking remote get or put waits in slices of
/// at most this, each answered (with the result or "not yet"), so that the client always sees
/// the reply of a get that took an item while it is alive (`docs/NODES.md`).
pub const REMOTE_WAIT_SLICE: Duration = Duration::from_secs(1);

/// Largest request header a node decodes (names are at most `NAME_BYTES_MAX` bytes; codec names
/// and session ids are short): a request whose header does not fit is refused.
pub const REQUEST_HEADER_BYTES_MAX: usize = 16 * 1024;

/// Longest session id: a zenoh id in hex.
pub const SESSION_ID_BYTES_MAX: usize = 32;

pub use stampede_core::Handle;

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
    /// The lowest number of this session's requests still under way at the client (its next
    /// number when none is): a copy of a request numbered below it that the node does not keep
    /// a reply for — its reply was read, or its call gave up — is never run. 0: says nothing.
    pub floor: u64,
    /// Items this session's prefetch caches answered gets with since its previous request (at
    /// most [`OPENED_MAX`]): the node opens each on its connection before it runs the request, as
    /// if the get had come (docs/PREFETCH.md).
    pub opened: Vec<Opened>,
    /// Consumes this session's input connections made of items their gets returned, deferred by
    /// the client and not yet confirmed by a reply (at most [`CONSUMED_MAX`], in the order made,
    /// numbered): the node applies each one it has not applied yet, after
    /// [`opened`](Self::opened), before it runs the request, as if each had come on its own
    /// (docs/PREFETCH.md, "Consumes ride on requests").
    pub consumed: Vec<Consumed>,
    /// Numbers of this session's gets ([`Op::releasable`]) whose calls gave up on their replies
    /// (at most [`RELEASED_MAX`]), carried until a reply confirms them: the node gives back what
    /// each one took, once, before it runs the request, and never runs one that comes later
    /// (docs/NODES.md, "A call's timeout").
    pub released: Vec<u64>,
    /// The request.
    pub request: Request,
}

/// Most reply numbers one request header acknowledges; the client says the rest with its next
/// requests.
pub const ACKS_MAX: usize = 64;

/// Most cache answers one request header reports (`RequestHeader::opened`); past it a client's
/// cache answers nothing until a request carried them.
pub const OPENED_MAX: usize = 64;

/// Most deferred consumes one request header carries (`RequestHeader::consumed`), and most a
/// client's session holds unconfirmed: past it a consume is sent at once.
pub const CONSUMED_MAX: usize = 64;

/// Most released numbers one request header carries (`RequestHeader::released`), and most a
/// client's session holds unconfirmed: past it a call that gives up on its reply ends the session
/// instead.
pub const RELEASED_MAX: usize = 64;

/// Longest a client defers a consume before it sends it, when no request of its session carried
/// it sooner: the delay a deferred consume adds to the item's reclaim.
pub const CONSUME_DELAY_MAX: Duration = Duration::from_millis(100);

impl RequestHeader {
    /// A header of `session` proving `secret`, not numbered and acknowledging nothing.
    pub fn new(session: impl Into<String>, secret: Secret, request: Request) -> RequestHeader {
        RequestHeader {
            session: session.into(),
            secret,
            seq: 0,
            acks: Vec::new(),
            floor: 0,
            opened: Vec::new(),
            consumed: Vec::new(),
            released: Vec::new(),
            request,
        }
    }
}

/// A `NEWEST_UNSEEN` get a client's prefetch cache answered: on which input connection, with
/// which item, and how long before the request that reports it (µs, for the connection's tape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opened {
    pub connection: Handle,
    pub ts: stampede_core::Timestamp,
    pub ago_us: u64,
}

/// A consume of an input connection, deferred into a later request's header: `consume(ts)`, or
/// `consume_until(ts)` when `until`. `number` counts the session's deferred consumes from 1: every
/// request carries each one until a reply confirms it, and the node applies each number once (it
/// is counted once on the connection's tape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumed {
    pub connection: Handle,
    pub ts: stampede_core::Timestamp,
    pub until: bool,
    pub number: u64,
}

impl Consumed {
    /// The operation it stands for.
    pub fn op(self) -> Op {
        let Consumed { connection, ts, until, .. } = self;
        match until {
            true => Op::ConsumeUntil { connection, ts },
            false => Op::Consume { connection, ts },
        }
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
    Open { user: Option<String>, password: Option<String> },
    /// Ends the session: its tasks are closed, its connections detached.
    Close,
    /// Makes the direct connection that carries it (a Unix socket) the session's stream of push
    /// events: the node answers `Done`, then writes each event there as a frame — a large pushed
    /// item that is a shared-memory segment passed as a descriptor — instead of publishing it on
    /// the fabric (docs/PREFETCH.md, "Pushes on the direct path"). Refused anywhere else.
    Pushes,
    /// An operation on the node's runtime, run in the session (its handles are the session's).
    Op(Op),
}

impl From<Op> for Request {
    fn from(op: Op) -> Request {
        Request::Op(op)
    }
}

impl Request {
    /// `true` for the requests a payload follows.
    pub fn carries_payload(&self) -> bool {
        matches!(self, Request::Op(op) if op.carries_payload())
    }

    /// `true` for the requests whose lost reply leaves the node holding what the client does not
    /// know of ([`Op::holds_on_node`]): if the client does not see their reply, it ends its
    /// session so that all of it goes back (see `docs/NODES.md`).
    pub fn holds_on_node(&self) -> bool {
        matches!(self, Request::Op(op) if op.holds_on_node())
    }

    /// `true` for the requests a client gives up on by releasing them ([`Op::releasable`]).
    pub fn releasable(&self) -> bool {
        matches!(self, Request::Op(op) if op.releasable())
    }

    /// The operation's name in errors.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Hello => "hello",
            Request::Open { .. } => "connect",
            Request::Close => "close",
            Request::Pushes => "prefetch",
            Request::Op(op) => op.name(),
        }
    }
}
