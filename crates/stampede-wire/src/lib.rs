//! Stampede's wire: what a client and a node say to each other, shared by both sides so that
//! neither imports the other (`stampede`'s client and `stampede-node` both depend on this crate
//! and on `stampede-core`, nothing else of each other).
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
//! Guarantees:
//! - The version byte comes first and is checked before anything else: a node and a client of
//!   different releases fail with a clear [`DecodeError::Version`] naming both versions instead
//!   of misreading each other; a node answers such a request with an `InvalidArgument` error
//!   that says the same.
//! - Decoding never panics, whatever the bytes; every failure is a [`DecodeError`] (proptest over
//!   random and mutated messages in `stampede-node`'s `tests/wire.rs`).
//! - Requests are bounded ([`REQUEST_HEADER_BYTES_MAX`]; the payload by the node's
//!   `payload_bytes_max`); kept error texts by [`KEPT_TEXTS_MAX`]; shared-memory segments by
//!   [`shared::SEGMENTS_MAX`].
//! - Errors cross the wire unchanged ([`WireError`]).
//!
//! # Layout
//!
//! - [`request`] — [`RequestHeader`] and [`Request`]: what a client asks (session control, or an
//!   [`Op`] of `stampede-core`'s vocabulary), and its bounds.
//! - [`reply`] — [`Reply`] (an [`Outcome`] with items as [`ItemHeader`]s, or an error) and what a
//!   node sends unasked ([`ReclaimEvent`], [`PushEvent`]); [`Hello`],
//!   [`DirectPath`] and the direct path's frame ([`FRAME_LENGTH_BYTES`]).
//! - [`values`] — counts from the wire as `usize`.
//! - [`error`] — [`WireError`]: the core's errors on the wire.
//! - [`codec`] — [`encode`] and the `decode_*` functions, [`DecodeError`].
//! - [`fabric`] — zenoh configurations and the key expressions a node answers on.
//! - [`origin`] — which web pages may open a WebSocket of a node or a dashboard.
//! - [`session`] — the session protocol's rules, pure: numbering, acknowledgements, at most
//!   once, retries, when a reply may be taken; the client's and the node's sides.
//! - [`shared`] — large payloads as sealed shared-memory segments on the direct Unix socket.

#![deny(unsafe_code)]

pub mod codec;
pub mod error;
pub mod fabric;
pub mod origin;
pub mod reply;
pub mod request;
pub mod session;
pub mod shared;
pub mod values;

pub use codec::{
    decode_event, decode_name_event, decode_push, decode_push_passed, decode_reply, decode_reply_passed,
    decode_request, decode_request_head, decode_request_passed, encode, DecodeError,
};
pub use error::{WireError, KEPT_TEXTS_MAX, KEPT_TEXT_BYTES_MAX, TEXT_NOT_KEPT};
pub use reply::{
    DirectPath, Hello, ItemHeader, PushEvent, PushOrder, ReclaimEvent, Reply, WireOutcome, FRAME_LENGTH_BYTES,
};
pub use request::{
    Consumed, Handle, Opened, Request, RequestHeader, Secret, ACKS_MAX, CONSUMED_MAX, CONSUME_DELAY_MAX, OPENED_MAX,
    RELEASED_MAX, REMOTE_WAIT_SLICE, REQUEST_HEADER_BYTES_MAX, SESSION_ID_BYTES_MAX,
};
pub use stampede_core::{ContainerInfo, Op, Outcome};
pub use values::size;

/// The wire format's version, the first byte of every message. Bump it on any change to the
/// types of this crate or of those it carries (`Graph`). 12: the wire became its own crate
/// (`stampede-wire`); 13: a graph says what holds ts_min and which session owns each task; 14: an
/// input connection's bound on lag; 15: requests carry `stampede-core`'s `Op` and replies its
/// `Outcome`; 16: a move's proof, presented by its takeover; 17: runtime stats carry the byte
/// budgets' use; 18: a channel's put log (`stampede hz`); 19: the mesh's pause rounds (doors opened
/// and given back: `Pause`, `Paused`, `Opened` between nodes, which a node's hello checks by this
/// version); 20: mesh time (`Op::MeshTime`, `Outcome::MeshTime`); a listing names each name's node
/// (`Listed`); 21: a request header carries the client's floor (`RequestHeader::floor`), below
/// which the node runs no copy of a request it keeps no reply for; 22: on a node with an access
/// policy every payload on the mesh's keys carries a tag (`stampede-node`'s `mesh/seal.rs`), which
/// a node's hello checks by this version; 23: a graph's input connection carries its tape on
/// the node (`stampede_core::Tape`); 24: prefetch — an input connection's policy
/// (`Op::AttachInput::prefetch`), the node's push events (`PushEvent`), and the items a request's
/// header says the client's cache answered (`RequestHeader::opened`); 25: the consumes a
/// request's header carries (`RequestHeader::consumed`); 26: push events on the direct path
/// (`Request::Pushes`); 27: a deferred consume carries its number (`Consumed::number`), carried
/// until a reply confirms it; 28: a request header carries the numbers of the gets the client gave
/// up on (`RequestHeader::released`), whose items the node gives back.
pub const VERSION: u8 = 28;
