//! The simulated node: one incarnation of a node's engine and desk, serving request messages
//! with the node's own code — the wire codec, the desk's rules (which session, at most once),
//! the moves of tasks between nodes and the engine's operations (`serve::moves::execute`, its
//! questions to other nodes carried by the world: `asks.rs`) — and its participant in the mesh's
//! ts_min with the node's own steward (`stampede_engine::steward`), whose messages the world
//! carries. Nothing of its fabric runs: the world is the fabric.
//!
//! A session's `Open` waits for the node's door to the mesh, as on a real node: answered once the
//! door opened (the world looks at the steward after every event), refused `Unreachable` if it
//! did not within the lease.
//!
//! An operation that waits (a get asked to wait for an item) stays pending on the node's tokio
//! runtime, whose clock is paused and moved to the world's virtual time at every
//! [`poll`](SimNode::poll): the engine's waits time out, and wake on a put, as on a real node. A
//! repeat of a request still running waits for it (`Admitted::Wait`), looked at again each poll.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Error, Mesh, MeshLimits, Op, Peer, Result, Selector};
use stampede_engine::{Body, MeshLink, Runtime, Steward};
use stampede_wire::{decode_request, encode, Reply, Request, Secret, WireError};

use super::asks::{Asks, SimNeighbours};
use crate::desk::{Admitted, Desk, Numbers};
use crate::release::Taking;
use crate::serve::moves::{self, Here};
use crate::serve::Served;
use crate::session::Session;

/// Bounds of a simulated node's sessions (small, so that they are reached).
const SESSIONS_MAX: usize = 16;
const SESSION_HANDLES_MAX: usize = 16;
const PAYLOAD_BYTES_MAX: usize = 1 << 16;

/// Whom a reply goes to: the world's address of the try that sent the request, opaque here.
pub(super) type To = (usize, u32, u64);

/// Node `index`'s name (its participant's id is the name's, as on a real node).
pub(super) fn node_name(index: usize) -> String {
    format!("n{index}")
}

/// The index of the node named `name`.
pub(super) fn node_index(name: &str) -> Option<usize> {
    name.strip_prefix('n')?.parse().ok()
}

/// A participant's incarnation for a node started at `now_us`: a start time, as a real node's,
/// with room below the next microsecond for the restarts of its expelled participant (each one
/// up, `|i| i + 1`).
pub(super) fn peer_incarnation(now_us: u64) -> u64 {
    (now_us + 1) << 20
}

/// A request served: its reply, and what the world's oracle and tokens learn from it.
pub(super) struct Handled {
    pub(super) to: To,
    pub(super) reply: Vec<u8>,
    /// The session `Open` listed.
    pub(super) opened: Option<String>,
    /// The operation that ran, and the session it ran in.
    pub(super) ran: Option<(String, Op)>,
}

/// What serving a request did.
pub(super) enum Serving {
    /// Answered now.
    Now(Box<Handled>),
    /// Its operation waits.
    Waits,
    /// A repeat of a request still running waits for it.
    RepeatWaits,
    /// An `Open` waits for the node's door.
    OpenWaits,
}

/// An operation under way on the node.
type Running = Pin<Box<dyn Future<Output = Result<Served>>>>;

/// A request the node has not answered yet.
struct Waiting {
    to: To,
    state: State,
}

enum State {
    /// Its operation runs (waits) in `session`.
    Running { session: Arc<Session>, seq: u64, op: Op, taking: Taking, future: Running },
    /// A repeat of a request still running: admitted again at each poll.
    Repeat { message: Vec<u8>, secret: Secret },
    /// An `Open` waits for the door, until `until` (µs).
    Opening { session: String, secret: Secret, until: u64 },
}

/// One incarnation of the node.
pub(super) struct SimNode {
    /// Which node of the world it is.
    pub(super) index: usize,
    /// Which incarnation (unique in the world: a restarted node is a new one).
    pub(super) incarnation: u32,
    pub(super) runtime: Runtime,
    pub(super) desk: Arc<Desk>,
    /// Its participant in the mesh's ts_min, linked to its runtime.
    pub(super) steward: Steward,
    /// The participant its fabric declared (its messages' key), until it leaves as expelled.
    pub(super) declared: Option<Peer>,
    /// Whether its door was open at the world's last look.
    pub(super) door: bool,
    /// Whether it wants a door with no session open (an application embeds its runtime: here
    /// the oracle, which drains the queue with a task of its own at the end).
    pub(super) embedded: bool,
    /// What its code asked of other nodes, for the world to carry.
    pub(super) asks: Asks,
    /// Drives the engine's futures on a paused clock, moved to the world's time.
    tokio: tokio::runtime::Runtime,
    /// The world's time (µs) the tokio clock was moved to last, and the time now.
    clock_us: u64,
    now_us: u64,
    waiting: Vec<Waiting>,
}

impl SimNode {
    /// Incarnation `incarnation` of node `index`, started at `now_us`: its participant is
    /// `index + 1` in its first life since `now_us` ([`peer_incarnation`]); its steward notes
    /// what it does when `notes`.
    pub(super) fn new(index: usize, incarnation: u32, now_us: u64, notes: bool) -> SimNode {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a tokio runtime");
        let name = node_name(index);
        let desk = Arc::new(Desk::new(&name, SESSIONS_MAX));
        let runtime = Runtime::new();
        let peer = Peer { id: crate::mesh::peer_id(&name), incarnation: peer_incarnation(now_us) };
        // The world looks at every steward after every event: no wake-up needed.
        let link = MeshLink::attach(&runtime, Mesh::new(peer, MeshLimits::default()), Arc::new(|| {}))
            .expect("a new runtime links");
        let lease = Duration::from_micros(super::LEASE_US);
        let steward = Steward::new(link, lease, |i| i + 1, Arc::default(), notes);
        let waiting = Vec::new();
        SimNode {
            index,
            incarnation,
            runtime,
            desk,
            steward,
            declared: None,
            door: false,
            embedded: false,
            asks: Asks::default(),
            tokio,
            clock_us: now_us,
            now_us,
            waiting,
        }
    }

    /// Whether requests wait on the node (then the world polls it as its time goes by).
    pub(super) fn busy(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Serves one request message for `to`; `secret` is what an `Open` hands out. While its
    /// operation waits (or a repeat waits for the first run), [`poll`](Self::poll) answers it
    /// later.
    pub(super) fn serve(&mut self, message: &[u8], secret: Secret, to: To, now_us: u64) -> Serving {
        let mut handled = Handled { to, reply: Vec::new(), opened: None, ran: None };
        // The operation's deadlines count from the world's time: the clock is moved there first.
        self.now_us = now_us;
        let step = self.step();
        self.tokio.block_on(tokio::time::advance(step));
        match self.respond(message, secret, &mut handled) {
            Ok(Some(state)) => {
                let serving = match state {
                    State::Running { .. } => Serving::Waits,
                    State::Repeat { .. } => Serving::RepeatWaits,
                    State::Opening { .. } => Serving::OpenWaits,
                };
                self.waiting.push(Waiting { to, state });
                serving
            }
            Ok(None) => Serving::Now(Box::new(handled)),
            Err(e) => {
                let reply = reply_bytes((Reply::Error(WireError::from(&e)), Vec::new()));
                Serving::Now(Box::new(Handled { reply, ..handled }))
            }
        }
    }

    /// The tokio clock's step to the world's time, taken now.
    fn step(&mut self) -> Duration {
        debug_assert!(self.now_us >= self.clock_us, "the node's clock never goes back");
        let step = Duration::from_micros(self.now_us - self.clock_us);
        self.clock_us = self.now_us;
        step
    }

    /// Moves the node's clock to `now_us` and looks at every request under way: those answered.
    pub(super) fn poll(&mut self, now_us: u64) -> Vec<Handled> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        self.now_us = now_us;
        let step = self.step();
        let waiting = std::mem::take(&mut self.waiting);
        let mut handled = Vec::new();
        let mut still = Vec::new();
        self.tokio.block_on(async {
            tokio::time::advance(step).await;
            for mut waiting in waiting {
                let done = match &mut waiting.state {
                    State::Running { future, .. } => {
                        std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await.map(Some)
                    }
                    State::Repeat { .. } | State::Opening { .. } => Poll::Ready(None),
                };
                match (done, waiting.state) {
                    (Poll::Pending, state) => still.push(Waiting { to: waiting.to, state }),
                    (Poll::Ready(result), State::Running { session, seq, op, taking, .. }) => {
                        let result = result.expect("a running operation's result");
                        let served = self.answered(&session, seq, taking, result);
                        let ran = Some((session.id.clone(), op));
                        handled.push(Handled { to: waiting.to, reply: reply_bytes(served), opened: None, ran });
                    }
                    (Poll::Ready(_), state) => still.push(Waiting { to: waiting.to, state }),
                }
            }
        });
        // The repeats, once the operations they wait for may have ended, and the opens.
        for waiting in still {
            match waiting.state {
                State::Repeat { message, secret } => {
                    if let Serving::Now(answered) = self.serve(&message, secret, waiting.to, now_us) {
                        handled.push(*answered);
                    }
                }
                State::Opening { session, secret, until } => match self.opening(&session, secret, until) {
                    Some(served) => {
                        let opened = matches!(served.0, Reply::Opened(_)).then_some(session);
                        handled.push(Handled { to: waiting.to, reply: reply_bytes(served), opened, ran: None });
                    }
                    None => {
                        self.waiting.push(Waiting { to: waiting.to, state: State::Opening { session, secret, until } })
                    }
                },
                state => self.waiting.push(Waiting { to: waiting.to, state }),
            }
        }
        handled
    }

    /// An open of `session` waiting for the door: its answer once the door is open (or the
    /// session is gone), or the wait ended at `until`; `None` while it still waits.
    fn opening(&self, session: &str, secret: Secret, until: u64) -> Option<Served> {
        if self.desk.proven(session, &secret).is_none() {
            return Some((Reply::Error(WireError::from(&crate::session::closed(session))), Vec::new()));
        }
        if self.door {
            return Some((Reply::Opened(secret), Vec::new()));
        }
        if self.now_us < until {
            return None;
        }
        self.close_session(session);
        let reason = "this node could not open its door to its mesh within the lease".to_owned();
        let refused = Error::Unreachable { op: "connect", name: "sim".into(), reason };
        Some((Reply::Error(WireError::from(&refused)), Vec::new()))
    }

    /// Serves `message`: `Ok(None)` when answered into `handled`, `Ok(Some(state))` while it
    /// waits.
    fn respond(&mut self, message: &[u8], secret: Secret, handled: &mut Handled) -> Result<Option<State>> {
        let refuse = |reason: String| Error::InvalidArgument { op: "request", name: "sim".into(), reason };
        let (header, payload) = decode_request(message).map_err(|e| refuse(e.to_string()))?;
        let served = match header.request {
            Request::Hello | Request::Pushes => return Err(refuse("the simulation sends neither".into())),
            Request::Open { .. } => {
                let id = header.session.clone();
                self.desk
                    .open(&id, || Ok(Session::new(id.clone(), SESSION_HANDLES_MAX, PAYLOAD_BYTES_MAX, secret, None)))?;
                // Its tasks start at or above the node's door: it waits for one.
                if !self.door {
                    let until = self.now_us + super::LEASE_US;
                    return Ok(Some(State::Opening { session: id, secret, until }));
                }
                handled.opened = Some(id);
                (Reply::Opened(secret), Vec::new())
            }
            Request::Close => {
                if self.desk.closing(&header.session, &header.secret)?.is_some() {
                    self.close_session(&header.session);
                }
                (Reply::Outcome(stampede_core::Outcome::Done), Vec::new())
            }
            Request::Op(op) => {
                let numbers = Numbers { released: &header.released, floor: header.floor, acks: &header.acks };
                match self.desk.admit(&header.session, &header.secret, header.seq, numbers)? {
                    Admitted::Run(session) => {
                        crate::push::opened(&session, &header.opened, self.now_us);
                        let (runtime, desk, running, body) =
                            (self.runtime.clone(), self.desk.clone(), session.clone(), payload.to_vec());
                        let (link, name) = (self.steward.link().clone(), self.desk.node().to_owned());
                        let now_us = self.now_us;
                        let neighbours = SimNeighbours { asks: self.asks.clone(), session: session.id.clone() };
                        let (ran, consumed) = (op.clone(), header.consumed);
                        let taking = Taking::of(&ran, &session);
                        let mut future: Running = Box::pin(async move {
                            let here = Here { name: &name, runtime: &runtime, desk: &desk, mesh: Some(&link), now_us };
                            moves::consumed(&here, &running, &consumed).await;
                            moves::execute(&here, &neighbours, &running, op, Body::Inline(&body)).await
                        });
                        let first =
                            self.tokio.block_on(std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))));
                        let Poll::Ready(result) = first else {
                            return Ok(Some(State::Running { session, seq: header.seq, op: ran, taking, future }));
                        };
                        handled.ran = Some((session.id.clone(), ran));
                        self.answered(&session, header.seq, taking, result)
                    }
                    Admitted::Answered(served) => served,
                    Admitted::Wait => return Ok(Some(State::Repeat { message: message.to_vec(), secret })),
                    Admitted::Forgotten => {
                        self.close_session(&header.session);
                        return Err(crate::session::closed(&header.session));
                    }
                }
            }
        };
        handled.reply = reply_bytes(served);
        Ok(None)
    }

    /// Checks that the consumes `message`'s header carried were applied, as the node applies them
    /// before it runs the request (or ran its first copy): no item of theirs can still be read on
    /// its connection.
    pub(super) fn consumes_applied(&self, message: &[u8]) -> Result<(), String> {
        let Ok((header, _)) = decode_request(message) else { return Ok(()) };
        let Some(session) = self.desk.get(&header.session) else { return Ok(()) };
        for carried in &header.consumed {
            let Some(input) = session.readers.input(carried.connection) else { continue };
            if let Ok(item) = input.get(Selector::At(carried.ts), Some(Duration::ZERO)) {
                let ts = item.ts;
                return Err(format!(
                    "session {} carried {carried:?}, and its item {ts} can still be read",
                    header.session
                ));
            }
        }
        Ok(())
    }

    /// What the put `op` ran in session `session` sends the node's sessions (the node's own code,
    /// `crate::push::after_put`): each session's id with its pushes.
    pub(super) fn pushes(&self, session: &str, op: &Op) -> Vec<(String, Vec<crate::readers::Push>)> {
        let (Some(session), Some((connection, ts))) = (self.desk.get(session), crate::push::put_of(op)) else {
            return Vec::new();
        };
        let pushes = crate::push::after_put(&self.desk, &session, connection, ts, self.now_us);
        pushes.into_iter().map(|(reader, pushes)| (reader.id.clone(), pushes)).collect()
    }

    /// Ends the session `id`, if open, as the node does: its moves still open are declined on
    /// their nodes (the answers not waited for).
    pub(super) fn close_session(&self, id: &str) {
        let Some(moves) = self.desk.close(id) else { return };
        let neighbours = SimNeighbours { asks: self.asks.clone(), session: id.to_owned() };
        for taken in &moves {
            neighbours.decline(self.steward.link(), taken);
        }
    }

    /// The reply of request `seq` of `session`, `taking` what it may give out, kept for its
    /// repeats.
    fn answered(&self, session: &Session, seq: u64, taking: Taking, result: Result<Served>) -> Served {
        let served = result.unwrap_or_else(|e| (Reply::Error(WireError::from(&e)), Vec::new()));
        self.desk.answered(session, seq, taking, &served);
        served
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        // The node dies: what waits on it goes with it.
        self.waiting.clear();
        self.desk.close_all();
    }
}

/// A reply message: its header, the payloads after it.
fn reply_bytes((reply, payloads): Served) -> Vec<u8> {
    let mut bytes = encode(&reply);
    for payload in payloads {
        bytes.extend_from_slice(&payload);
    }
    bytes
}

/// The payloads of a reply message, after its header (as the client reads them).
pub(super) fn reply_of(message: &[u8]) -> std::result::Result<(Reply, Bytes), String> {
    let (reply, payload) = stampede_wire::decode_reply(message).map_err(|e| e.to_string())?;
    Ok((reply, Bytes::copy_from_slice(payload)))
}
