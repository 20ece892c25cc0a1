//! Serving one request on the node: decode it, find the client's session, run the embedded
//! operation, encode the reply (items' payloads appended without a copy).
//!
//! Every operation is the embedded one, so its result and its errors are the embedded ones. A
//! blocking get or put waits with the runtime's async form for at most
//! [`REMOTE_WAIT_SLICE`](stampede_wire::REMOTE_WAIT_SLICE), whatever the request asks; the client
//! re-issues "not yet" slices until its own deadline (see `docs/NODES.md`).
//!
//! Here: the request's way to its session (hello, open, close, at most once per numbered
//! request); `execute` runs the operation itself.

pub(crate) mod execute;
pub(crate) mod moves;

use stampede_engine::trace::{self, Kind};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Error, Op, Outcome, Result};
use stampede_engine::Body;
use zenoh::bytes::ZBytes;
use zenoh::sample::SampleKind;

use stampede_engine::MeshLink;
use stampede_wire::fabric;
use stampede_wire::{
    decode_request, decode_request_head, decode_request_passed, encode, Consumed, Hello, Reply, Request, WireError,
    CONSUMED_MAX, OPENED_MAX, RELEASED_MAX, REMOTE_WAIT_SLICE, REQUEST_HEADER_BYTES_MAX,
};

use crate::access;
use crate::desk::{Admitted, Desk, Numbers};
use crate::node::NodeShared;
use crate::reclaim;
use crate::release::Taking;
use crate::serve::execute::execute;
use crate::session::{self, Session};

/// A reply header and the payloads that follow it: what the node sends, and keeps for repeats.
pub(crate) type Served = (Reply, Vec<Bytes>);

/// A reply as sent: its encoded header, and the payloads that follow it.
pub(crate) struct Answer {
    pub(crate) header: Vec<u8>,
    pub(crate) payloads: Vec<Bytes>,
    /// The error the reply is, if it is one (the WebSocket endpoint renders its text).
    pub(crate) error: Option<WireError>,
}

impl Answer {
    /// The reply message, the payloads appended without a copy (for a zenoh reply).
    pub(crate) fn message(self) -> ZBytes {
        let mut writer = ZBytes::writer();
        writer.append(ZBytes::from(self.header));
        for payload in self.payloads {
            writer.append(ZBytes::from(payload));
        }
        writer.finish()
    }
}

/// Answers `message`, a zenoh query's: the encoded reply, an error reply if the request failed.
pub(crate) async fn serve(node: &Arc<NodeShared>, message: &[u8]) -> ZBytes {
    answer(node, message, None, Alive::Token).await.message()
}

/// How the node knows that the client of a session is still there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alive {
    /// Its liveliness token on the fabric: the session ends when the token goes.
    Token,
    /// The WebSocket that opened it (`websocket.rs`): the session ends with the socket.
    Socket,
}

/// Answers `message`, whose payload is `passed` (a shared-memory segment) when it came as one,
/// from a client whose sessions live as `alive` says.
pub(crate) async fn answer(node: &Arc<NodeShared>, message: &[u8], passed: Option<Bytes>, alive: Alive) -> Answer {
    let (reply, payloads) = match respond(node, message, passed, alive).await {
        Ok(served) => served,
        Err(e) => (Reply::Error(WireError::from(&e)), Vec::new()),
    };
    let _encoding = trace::span(Kind::Serialise, 0, 0, 0);
    let error = match &reply {
        Reply::Error(e) => Some(e.clone()),
        _ => None,
    };
    Answer { header: encode(&reply), payloads, error }
}

/// The reply accepting a request that never reached [`serve`] (a stream of push events).
pub(crate) fn accepted() -> Answer {
    Answer { header: encode(&done().0), payloads: Vec::new(), error: None }
}

/// The reply refusing a request that never reached [`serve`] (a frame out of bounds).
pub(crate) fn refusal(e: &Error) -> Answer {
    let error = WireError::from(e);
    Answer { header: encode(&Reply::Error(error.clone())), payloads: Vec::new(), error: Some(error) }
}

async fn respond(node: &Arc<NodeShared>, message: &[u8], passed: Option<Bytes>, alive: Alive) -> Result<Served> {
    let refuse = |reason: String| Error::InvalidArgument { op: "request", name: node.options.name.clone(), reason };
    let message_bytes_max = node.options.payload_bytes_max + REQUEST_HEADER_BYTES_MAX;
    if message.len() > message_bytes_max {
        return Err(refuse(format!("a request of {} bytes (at most {message_bytes_max})", message.len())));
    }
    // In the event log, as on the client: (de)serialisation. The spans of the node's side never
    // cross an await (a task may resume on another worker thread).
    let decoding = trace::span(Kind::Serialise, 0, 0, message.len() as u64);
    let (header, body) = match passed {
        None => decode_request(message).map(|(header, payload)| (header, Body::Inline(payload))),
        Some(passed) => decode_request_passed(message).map(|header| (header, Body::Passed(passed))),
    }
    .map_err(|e| refuse(e.to_string()))?;
    drop(decoding);
    match header.request {
        Request::Hello => Ok((Reply::Hello(hello(node)), Vec::new())),
        Request::Open { user, password } => {
            open(node, &header.session, (user.as_deref(), password.as_deref()), alive).await
        }
        Request::Close => {
            let session = node.desk.closing(&header.session, &header.secret)?;
            end_session(node, &header.session).await;
            if let Some(session) = session {
                // Items the closing released and reclaimed reach the client before the reply.
                reclaim::send(node, &session).await;
            }
            Ok(done())
        }
        Request::Pushes => {
            let reason =
                "a stream of push events opens only on the node's direct path (its Unix socket or TCP port)".into();
            Err(Error::InvalidArgument { op: "prefetch", name: node.options.name.clone(), reason })
        }
        Request::Op(_) if header.opened.len() > OPENED_MAX => {
            Err(refuse(format!("{} cache answers in one request (at most {OPENED_MAX})", header.opened.len())))
        }
        Request::Op(_) if header.consumed.len() > CONSUMED_MAX => {
            Err(refuse(format!("{} deferred consumes in one request (at most {CONSUMED_MAX})", header.consumed.len())))
        }
        Request::Op(_) if header.released.len() > RELEASED_MAX => {
            Err(refuse(format!("{} released requests in one header (at most {RELEASED_MAX})", header.released.len())))
        }
        Request::Op(op) => loop {
            let numbers = Numbers { released: &header.released, floor: header.floor, acks: &header.acks };
            match node.desk.admit(&header.session, &header.secret, header.seq, numbers)? {
                Admitted::Run(session) => {
                    crate::push::opened(&session, &header.opened, node.origin.elapsed().as_micros() as u64);
                    return run_once(node, &session, (header.seq, &header.consumed), op, body).await;
                }
                Admitted::Answered(served) => return Ok(served),
                // Rare (the client gave up on the first before it ended: a loaded node); the first
                // ends within its wait slice.
                Admitted::Wait => tokio::time::sleep(REPEAT_POLL).await,
                Admitted::Forgotten => {
                    end_session(node, &header.session).await;
                    return Err(session::closed(&header.session));
                }
            }
        },
    }
}

/// The live session of this node whose request `message` asks for its stream of push events
/// (`Request::Pushes`, with the session's secret): `None` for any other request; `Err` when the
/// session is not this node's or not live.
pub(crate) fn pushes_to(node: &NodeShared, message: &[u8]) -> Option<Result<Arc<Session>>> {
    let header = decode_request_head(message).ok().filter(|header| header.request == Request::Pushes)?;
    Some(node.desk.proven(&header.session, &header.secret).ok_or_else(|| session::closed(&header.session)))
}

/// Whether the request whose message starts with `head` comes from a live session of this node
/// (its header names one, with its secret): what the direct path checks before it reads the rest
/// of a connection's first request.
pub(crate) fn proves_session(node: &NodeShared, head: &[u8]) -> bool {
    decode_request_head(head).is_ok_and(|header| node.desk.proven(&header.session, &header.secret).is_some())
}

/// Runs the session's request numbered `seq` (0: not numbered), admitted to run, after the
/// consumes its header carried, and records its reply for the repeats (`desk.rs`); the items it
/// reclaimed reach the client before its reply.
async fn run_once(
    node: &Arc<NodeShared>,
    session: &Session,
    (seq, consumed): (u64, &[Consumed]),
    op: Op,
    body: Body<'_>,
) -> Result<Served> {
    /// Forgets the request as under way if it stops before its reply (the node closing).
    struct Running<'a> {
        desk: &'a Desk,
        session: &'a Session,
        seq: u64,
    }
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.desk.abandoned(self.session, self.seq);
        }
    }
    // Dropped after the reply is recorded, it changes nothing.
    let _running = Running { desk: &node.desk, session, seq };
    moves::consumed(&execute::here(node), session, consumed).await;
    let taking = Taking::of(&op, session);
    let served = execute(node, session, op, body).await;
    reclaim::send(node, session).await;
    let served = served.unwrap_or_else(|e| (Reply::Error(WireError::from(&e)), Vec::new()));
    node.desk.answered(session, seq, taking, &served);
    Ok(served)
}

/// Closes session `id` (its tasks, claims and connections). Closing tasks may run GC handlers of
/// the node's application: not on a worker that answers other clients' waits.
async fn end_session(node: &Arc<NodeShared>, id: &str) {
    let (closing, id) = (node.clone(), id.to_owned());
    let _ = tokio::task::spawn_blocking(move || closing.close_session(&id)).await;
}

/// Between two looks at a repeated request's first run.
const REPEAT_POLL: Duration = Duration::from_millis(1);

fn hello(node: &NodeShared) -> Hello {
    let options = &node.options;
    Hello {
        node: options.name.clone(),
        zid: node.zenoh.zid().to_string(),
        liveliness_timeout_ms: millis(options.liveliness_timeout),
        payload_bytes_max: options.payload_bytes_max as u64,
        wait_slice_ms: millis(REMOTE_WAIT_SLICE),
        mesh: node.mesh.get().map(MeshLink::peer),
        direct: node.direct.get().cloned().unwrap_or_default(),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Opens the session `id` as `user`, if the node has an access policy and the password is the
/// user's. A session kept alive by its liveliness token must have it alive once the session is
/// registered: otherwise its client vanished before, and nothing would ever close the session
/// (one kept by a WebSocket ends with it). Replies the session's secret.
async fn open(
    node: &NodeShared,
    id: &str,
    (user, password): (Option<&str>, Option<&str>),
    alive: Alive,
) -> Result<Served> {
    let name = &node.options.name;
    let rights = match &node.options.access {
        // Argon2 is deliberately slow: not on a worker that answers other clients' waits.
        Some(policy) => {
            let (policy, name, user, password) =
                (policy.clone(), name.clone(), user.map(str::to_owned), password.map(str::to_owned));
            let verified =
                tokio::task::spawn_blocking(move || policy.authenticate(&name, user.as_deref(), password.as_deref()))
                    .await;
            let unreachable = |e: tokio::task::JoinError| {
                let reason = format!("the password check failed: {e}");
                Error::Unreachable { op: "connect", name: node.options.name.clone(), reason }
            };
            Some(verified.map_err(unreachable)??)
        }
        None => None,
    };
    let secret =
        access::new_secret().map_err(|reason| Error::Unreachable { op: "connect", name: name.clone(), reason })?;
    node.desk.open(id, || {
        let (handles_max, payload_bytes_max) = (node.options.session_handles_max, node.options.payload_bytes_max);
        let budget = node.budgets.node.session(node.budgets.session_bytes)?;
        Ok(Session::new(id.to_owned(), handles_max, payload_bytes_max, secret, rights).with_budget(budget))
    })?;
    if alive == Alive::Token && !token_alive(node, id).await {
        node.close_session(id);
        let reason = "the session's liveliness token is not on the fabric (the client vanished)".into();
        return Err(Error::Unreachable { op: "connect", name: name.clone(), reason });
    }
    // Its tasks start at or above the node's door: opened for it (a pause round) if need be.
    if let Some(door) = node.door.get() {
        door.changed();
        let timeout = node.options.liveliness_timeout;
        if !door.opened(timeout).await {
            node.close_session(id);
            let reason = format!(
                "this node could not open its door to its mesh within {timeout:?}: a node of the mesh \
                 did not answer its pause round (docs/PROTOCOL.md, \"Doors\"); try again"
            );
            return Err(Error::Unreachable { op: "connect", name: name.clone(), reason });
        }
    }
    Ok((Reply::Opened(secret), Vec::new()))
}

/// Whether the session's liveliness token is on the fabric, or appears there within the
/// liveliness timeout. A query alone could miss it: the client declares the token before it
/// sends `Open`, but zenoh does not order a declaration before a later query on the node's side
/// (seen once in CI: `tls.rs::a_client_over_tls_puts_and_gets` refused a live client).
async fn token_alive(node: &NodeShared, id: &str) -> bool {
    let key = fabric::session_key(&node.options.name, id);
    let Ok(tokens) = node.zenoh.liveliness().declare_subscriber(key).history(true).await else {
        return false;
    };
    let appears = async {
        while let Ok(sample) = tokens.recv_async().await {
            if sample.kind() == SampleKind::Put {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(node.options.liveliness_timeout, appears).await.unwrap_or(false)
}

fn done() -> Served {
    (Reply::Outcome(Outcome::Done), Vec::new())
}
