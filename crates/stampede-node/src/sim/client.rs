//! A simulated client: an application (a producer or a consumer of a queue or a channel), whose
//! requests follow the session protocol's own rules (`stampede_wire::session::ClientSession`:
//! numbers, acknowledgements, retries, what a reply means). The world (`world.rs`) carries its
//! messages and runs its clock.
//!
//! Its task lives on its home node; its channel or queue on the same node (one session), or on
//! another (a far client: two sessions, as a runtime connected to two nodes). A far client moves
//! its task to the containers' node (`MoveTask` at home), takes the move over there as a shadow
//! (`TakeOverTask`, with the move's proof) and works through the shadow; a producer sets its
//! task's virtual time on the shadow, then at home. The end of either session ends both (its
//! runtime starts over), which declines a move not taken over yet.
//!
//! Half the channel readers read the freshest item (`NEWEST_UNSEEN`) with prefetch `newest`: the
//! node's push events reach their cache (`stampede_core::PushCache`, the client's own rule), which
//! answers a get without a request where the rule allows it — within the lease's share after the
//! latest get of its connection the node served (`stampede_wire::session::cache_may_answer`) — and the
//! answers ride on the session's next request (`RequestHeader::opened`).

mod prefetch;

use bytes::Bytes;
use stampede_core::mesh::MoveId;

use stampede_core::{
    Error, ErrorKind, Handle, MoveProof, Op, Outcome, Peer, Prefetch, PushCache, Retention, Selector, Timestamp,
    INFINITY,
};
use stampede_wire::session::{CacheAnswers, Call, ClientSession, Deferred};
use stampede_wire::{decode_push, ItemHeader, PushEvent, PushOrder, Request, Secret, WireOutcome};

/// The channel and the queue every client uses.
pub(super) const CHANNEL: &str = "sim/frames";
pub(super) const QUEUE: &str = "sim/jobs";

/// Producers' timestamps are `index + 1` plus multiples of this: no two producers put the same
/// timestamp into the channel.
const STRIDE: Timestamp = 16;
/// How far a producer whose task was refused below ts_min moves on before it asks again.
const JOIN_STEP: Timestamp = 16 * STRIDE;

/// What a client's application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    QueueProducer,
    QueueWorker,
    ChannelProducer,
    ChannelReader,
}

impl Role {
    pub(super) fn produces(self) -> bool {
        matches!(self, Role::QueueProducer | Role::ChannelProducer)
    }

    fn on_queue(self) -> bool {
        matches!(self, Role::QueueProducer | Role::QueueWorker)
    }
}

/// Which of a client's sessions: at its containers' node (every client has it), or at its
/// task's home node (a far client's other one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Containers,
    Home,
}

/// One session of a client, from its `Open` on.
pub(super) struct Conn {
    pub(super) id: String,
    /// The node it is open on.
    pub(super) node: usize,
    /// That node's participant in the mesh, as its hello said at `Open` (where moves go).
    pub(super) mesh: Option<Peer>,
    /// Handed out by the node's reply to `Open`.
    pub(super) secret: Option<Secret>,
    pub(super) protocol: ClientSession,
    /// The client ended it (a lost or late reply) or found it gone: it withdrew its token.
    pub(super) ended: bool,
    /// The application closed the client (from another thread) while a call was under way.
    pub(super) closed: bool,
    /// Its task (a far client's shadow, on its containers' session).
    task: Option<Handle>,
    container: Option<Handle>,
    /// Whether the container was looked for (then it is created if missing).
    looked_up: bool,
    connection: Option<Handle>,
    /// When the latest get of its connection the node served was sent (µs): its cache answers
    /// within the lease's share after it (the client's rule, docs/PREFETCH.md).
    pub(super) served_at: Option<u64>,
    /// The prefetch cache of its input connection, the number of the node's next push event, and
    /// the cache's answers no reply confirmed yet (the client's rule:
    /// `stampede_wire::session::CacheAnswers`).
    cache: PushCache<(ItemHeader, Bytes)>,
    push_order: PushOrder,
    pub(super) opened: CacheAnswers<u64>,
    /// The newest timestamp the notices it heard since its cache was last emptied told of, and
    /// the number of the latest event that told it (the world checks answers against it).
    told: Option<(Timestamp, u64)>,
    /// Its consumes deferred into the session's requests until a reply confirms them (the
    /// client's rule: `stampede_wire::session::Deferred`).
    pub(super) consumed: Deferred<u64>,
    /// When its reader last consumed (µs): only one that consumes often defers.
    last_consume_us: Option<u64>,
    /// The gets it released since it last sent a header: no header told the node yet, so what
    /// they took is still taken there (the world's check of holdings allows it).
    pub(super) released_unsent: Vec<u64>,
    /// The incarnation of its node that opened it: the session, and what it pushed, live and die
    /// with it.
    pub(super) incarnation: u32,
}

impl Conn {
    pub(super) fn new(id: String, node: usize, protocol: ClientSession) -> Conn {
        Conn {
            id,
            node,
            mesh: None,
            secret: None,
            protocol,
            ended: false,
            closed: false,
            task: None,
            container: None,
            looked_up: false,
            connection: None,
            served_at: None,
            cache: PushCache::default(),
            push_order: PushOrder::default(),
            opened: CacheAnswers::default(),
            told: None,
            released_unsent: Vec::new(),
            incarnation: 0,
            consumed: Deferred::default(),
            last_consume_us: None,
        }
    }

    /// A push event of its node reached it: a missing number (a lost event) or a reset empties
    /// the cache, a notice fills it.
    pub(super) fn pushed(&mut self, message: &[u8]) -> Result<(), String> {
        let (event, payload) = decode_push(message).map_err(|e| format!("a push event does not decode: {e}"))?;
        if self.push_order.forgets(&event) {
            self.cache.reset();
            self.told = None;
        }
        if let PushEvent::Put { seq, connection, notice, item } = event {
            if Some(connection) == self.connection {
                if self.told.is_none_or(|(newest, _)| notice.newest >= newest) {
                    self.told = Some((notice.newest, seq));
                }
                self.cache.noticed(notice, item.map(|item| (item, Bytes::copy_from_slice(payload))));
            }
        }
        Ok(())
    }
}

/// What a request was for, so that its outcome lands in the right place.
#[derive(Clone, Copy, Debug)]
pub(super) enum Purpose {
    Open,
    Task,
    /// A far client's `MoveTask`, and its `TakeOverTask`.
    Move,
    TakeOver,
    Lookup,
    Create,
    Attach,
    Put(Timestamp),
    Advance,
    /// A far client's virtual time set on its home task too.
    AdvanceHome,
    Get,
    Consume,
    /// Deferred consumes sent once due: a `ts_min` question that carries them, whose reply
    /// confirms them; what it returns is dropped.
    SendConsumes,
}

/// What an outcome means for the world.
pub(super) enum Effect {
    /// Nothing to check.
    None,
    /// A queue item (its number) or a channel item reached the application.
    Delivered { seq: Option<u64>, ts: Timestamp, payload: Bytes },
    /// The item taken earlier was consumed.
    Consumed,
    /// The session is gone on the node: connect again.
    Reconnect,
}

/// What a client's next call is.
pub(super) enum Next {
    /// Open a session on this side.
    Open(Side),
    /// The cache answered the get (no request), through input connection `connection`, told it
    /// was the newest item by push event `told` (`None`: by no event).
    Cached {
        connection: Handle,
        item: ItemHeader,
        payload: Bytes,
        told: Option<u64>,
    },
    Call {
        side: Side,
        request: Request,
        payload: Vec<u8>,
        purpose: Purpose,
    },
}

/// A move of a far client's task, made at home, not taken over yet.
#[derive(Clone, Copy, Debug)]
struct Moved {
    from: Peer,
    to: Peer,
    id: MoveId,
    visibility: Timestamp,
    proof: MoveProof,
}

/// An item the application got and consumes next.
#[derive(Clone, Debug)]
struct Held {
    seq: Option<u64>,
    ts: Timestamp,
    /// Its cache answered it (not open on the node): its consume may be deferred.
    cached: bool,
}

pub(super) struct SimClient {
    pub(super) index: usize,
    pub(super) role: Role,
    /// The node of its task, and the node of its channel or queue.
    pub(super) home: usize,
    pub(super) containers: usize,
    /// Its session at its containers' node.
    pub(super) conn: Option<Conn>,
    /// A far client's session at its home node.
    pub(super) home_conn: Option<Conn>,
    moved: Option<Moved>,
    /// A far client's virtual time to set on its home task next.
    home_advance: Option<Timestamp>,
    /// The next timestamp a producer puts (never reused, across sessions and lives).
    next_ts: Timestamp,
    /// A channel producer's virtual time to set next (after a put).
    advance_to: Option<Timestamp>,
    held: Option<Held>,
    /// Work calls that succeeded (puts, gets that returned an item).
    pub(super) progress: u64,
    /// Puts asked for so far.
    puts: u64,
    /// A channel reader of the freshest item, with prefetch `newest`.
    prefetching: bool,
}

/// The payload of a producer's `n`th put, at `ts`: unique, and saying its timestamp, so that a
/// reader can check it.
fn payload_of(index: usize, n: u64, ts: Timestamp) -> Vec<u8> {
    format!("{index}.{n}:{ts}").into_bytes()
}

impl SimClient {
    pub(super) fn new(index: usize, role: Role, home: usize, containers: usize) -> SimClient {
        debug_assert!(index < STRIDE as usize);
        SimClient {
            index,
            role,
            home,
            containers,
            conn: None,
            home_conn: None,
            moved: None,
            home_advance: None,
            next_ts: 1 + index as Timestamp,
            advance_to: None,
            held: None,
            progress: 0,
            puts: 0,
            prefetching: role == Role::ChannelReader && index.is_multiple_of(2),
        }
    }

    /// The process was killed and starts again: a producer goes on from a later timestamp (its
    /// clock ran on; a put of its last life may have landed).
    pub(super) fn restart(&mut self) {
        self.reset();
        self.next_ts += JOIN_STEP;
    }

    /// Its sessions are gone (after a restart of the process, or their end): what they held
    /// went back with them.
    pub(super) fn reset(&mut self) {
        self.conn = None;
        self.home_conn = None;
        self.moved = None;
        self.held = None;
        self.advance_to = None;
        self.home_advance = None;
    }

    /// Whether its containers are on another node than its task.
    pub(super) fn far(&self) -> bool {
        self.home != self.containers
    }

    /// The node a session of `side` is opened on.
    pub(super) fn node_of(&self, side: Side) -> usize {
        match side {
            Side::Containers => self.containers,
            Side::Home => self.home,
        }
    }

    pub(super) fn conn_mut(&mut self, side: Side) -> Option<&mut Conn> {
        match side {
            Side::Containers => self.conn.as_mut(),
            Side::Home => self.home_conn.as_mut(),
        }
    }

    /// A new session on `side`.
    pub(super) fn connect(&mut self, side: Side, conn: Conn) {
        match side {
            Side::Containers => self.conn = Some(conn),
            Side::Home => self.home_conn = Some(conn),
        }
    }

    /// The session and the queue item its application holds, if it holds one.
    pub(super) fn holds(&self) -> Option<(String, u64)> {
        let conn = self.conn.as_ref()?;
        Some((conn.id.clone(), self.held.as_ref()?.seq?))
    }

    /// The gets its session released that no header told the node of yet, with the session's id.
    pub(super) fn releases_unsent(&self) -> Option<(String, Vec<u64>)> {
        let conn = self.conn.as_ref()?;
        Some((conn.id.clone(), conn.released_unsent.clone()))
    }

    /// The virtual time its task starts at: a producer's next timestamp; a consumer's holds
    /// nothing back.
    fn task_virtual_time(&self) -> Timestamp {
        if self.role.produces() {
            self.next_ts
        } else {
            INFINITY
        }
    }

    /// The client's next call at `now` (µs); a get asks the node to wait `wait_us` for an item.
    pub(super) fn next_call(&mut self, wait_us: u64, now: u64) -> Next {
        let virtual_time = self.task_virtual_time();
        let home =
            |op: Op, purpose| Next::Call { side: Side::Home, request: Request::Op(op), payload: Vec::new(), purpose };
        if self.far() {
            let Some(home_conn) = self.home_conn.as_ref() else { return Next::Open(Side::Home) };
            let Some(home_task) = home_conn.task else { return home(Op::Task { virtual_time }, Purpose::Task) };
            let Some(conn) = self.conn.as_ref() else { return Next::Open(Side::Containers) };
            let to = conn.mesh.expect("a far client's containers' session knows its node's participant");
            if conn.task.is_none() {
                let Some(m) = self.moved else {
                    let to_node = super::node::node_name(self.containers);
                    return home(Op::MoveTask { task: home_task, to_node, to }, Purpose::Move);
                };
                let from_node = super::node::node_name(self.home);
                let (from, id, to, virtual_time, proof) = (m.from, m.id, m.to, m.visibility, m.proof);
                let take_over = Op::TakeOverTask { from_node, from, id, to, virtual_time, proof };
                let (request, payload) = (Request::Op(take_over), Vec::new());
                return Next::Call { side: Side::Containers, request, payload, purpose: Purpose::TakeOver };
            }
            if let Some(virtual_time) = self.home_advance {
                return home(Op::SetVirtualTime { task: home_task, virtual_time }, Purpose::AdvanceHome);
            }
        } else if self.conn.is_none() {
            return Next::Open(Side::Containers);
        }
        if let Some(send) = self.defer_consume(now) {
            return send;
        }
        if let Some(cached) = self.cached(now) {
            return cached;
        }
        let (request, payload, purpose) = self.next_request(wait_us);
        Next::Call { side: Side::Containers, request, payload, purpose }
    }

    /// The next request on the containers' session, with its payload and purpose.
    fn next_request(&mut self, wait_us: u64) -> (Request, Vec<u8>, Purpose) {
        let conn = self.conn.as_ref().expect("an open session");
        let name = if self.role.on_queue() { QUEUE } else { CHANNEL };
        let op = |op: Op, purpose| (Request::Op(op), Vec::new(), purpose);
        let Some(task) = conn.task else {
            return op(Op::Task { virtual_time: self.task_virtual_time() }, Purpose::Task);
        };
        let Some(container) = conn.container else {
            if !conn.looked_up {
                return op(Op::Lookup { name: name.into() }, Purpose::Lookup);
            }
            let create = match self.role.on_queue() {
                true => {
                    Op::CreateQueue { name: name.into(), capacity: None, bytes_max: None, description: String::new() }
                }
                false => Op::CreateChannel {
                    name: name.into(),
                    capacity: None,
                    bytes_max: None,
                    retention: Retention::History,
                    codec: None,
                    description: String::new(),
                },
            };
            return op(create, Purpose::Create);
        };
        let Some(connection) = conn.connection else {
            let attach = match self.role.produces() {
                true => Op::AttachOutput { task, container },
                false => {
                    let prefetch = if self.prefetching { Prefetch::Newest } else { Prefetch::Off };
                    Op::AttachInput { task, container, max_lag_items: None, max_lag_ts: None, prefetch }
                }
            };
            return op(attach, Purpose::Attach);
        };
        let ts = self.next_ts;
        if self.role.produces() && self.advance_to.is_none() {
            self.puts += 1;
        }
        match (self.role, self.held.as_ref(), self.advance_to) {
            (Role::QueueProducer, ..) => (
                Request::Op(Op::QueuePut { connection, ts, codec: "raw".into(), wait_us: 0 }),
                payload_of(self.index, self.puts, ts),
                Purpose::Put(ts),
            ),
            (Role::ChannelProducer, _, Some(virtual_time)) => {
                op(Op::SetVirtualTime { task, virtual_time }, Purpose::Advance)
            }
            (Role::ChannelProducer, _, None) => (
                Request::Op(Op::Put { connection, ts, codec: "raw".into(), refcount: None, wait_us: 0 }),
                payload_of(self.index, self.puts, ts),
                Purpose::Put(ts),
            ),
            (Role::QueueWorker, None, _) => op(Op::QueueGet { connection, wait_us }, Purpose::Get),
            (Role::QueueWorker, Some(held), _) => {
                op(Op::QueueConsume { connection, seq: held.seq, ts: held.ts }, Purpose::Consume)
            }
            (Role::ChannelReader, None, _) => {
                let selector = if self.prefetching { Selector::NewestUnseen } else { Selector::OldestUnseen };
                op(Op::Get { connection, selector, wait_us }, Purpose::Get)
            }
            (Role::ChannelReader, Some(held), _) => op(Op::ConsumeUntil { connection, ts: held.ts }, Purpose::Consume),
        }
    }

    /// The application takes the outcome of a request made for `purpose`. `Err` with the reason
    /// when the outcome is one the semantics never give it.
    pub(super) fn take(
        &mut self,
        side: Side,
        purpose: Purpose,
        outcome: Result<(WireOutcome, Bytes), Error>,
    ) -> Result<Effect, String> {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return self.refused(side, purpose, e),
        };
        let to = self.conn.as_ref().and_then(|c| c.mesh);
        let far = self.far();
        let conn = self.conn_mut(side).expect("an open session");
        match (purpose, outcome) {
            (Purpose::Task, (Outcome::Handle(h), _)) => conn.task = Some(h),
            (Purpose::Move, (Outcome::Moved { from, id, visibility, proof }, _)) => {
                let to = to.expect("a move goes to the containers' node");
                self.moved = Some(Moved { from, to, id, visibility, proof });
            }
            (Purpose::TakeOver, (Outcome::Handle(h), _)) => {
                conn.task = Some(h);
                self.moved = None;
            }
            (Purpose::Lookup | Purpose::Create, (Outcome::Container(info), _)) => conn.container = Some(info.id),
            (Purpose::Attach, (Outcome::Handle(h), _)) => conn.connection = Some(h),
            (Purpose::Put(ts), (Outcome::Done, _)) => {
                self.progress += 1;
                self.next_ts = ts + STRIDE;
                if self.role == Role::ChannelProducer {
                    self.advance_to = Some(ts + STRIDE);
                }
            }
            (Purpose::Advance, (Outcome::Done, _)) => {
                self.home_advance = self.advance_to.take().filter(|_| far);
            }
            (Purpose::AdvanceHome, (Outcome::Done, _)) => self.home_advance = None,
            (Purpose::Get, (Outcome::QueueItem { seq, item }, payload)) => {
                return Ok(self.got(Some(seq), &item, payload))
            }
            (Purpose::Get, (Outcome::Item(item), payload)) => {
                conn.cache.seen(item.ts);
                return Ok(self.got(None, &item, payload));
            }
            (Purpose::SendConsumes, _) => {}
            (Purpose::Consume, (Outcome::Done, _)) => {
                let held = self.held.take().expect("an item to consume");
                self.conn_mut(side).expect("an open session").cache.seen(held.ts);
                return Ok(Effect::Consumed);
            }
            (purpose, (outcome, _)) => return Err(format!("{purpose:?} answered {outcome:?}")),
        }
        Ok(Effect::None)
    }

    fn got(&mut self, seq: Option<u64>, item: &ItemHeader, payload: Bytes) -> Effect {
        self.progress += 1;
        self.held = Some(Held { seq, ts: item.ts, cached: false });
        Effect::Delivered { seq, ts: item.ts, payload }
    }

    /// The node's error for a request made for `purpose`: what the application does about it.
    fn refused(&mut self, side: Side, purpose: Purpose, e: Error) -> Result<Effect, String> {
        let conn = self.conn_mut(side).expect("an open session");
        match (purpose, e.kind()) {
            // The session is gone on the node (it ended it, or the node restarted); a put whose
            // first try may have landed before (its reply lost, the retry refused) is not put
            // again under the same timestamp.
            (_, ErrorKind::Closed | ErrorKind::Unreachable) => {
                self.lost(purpose);
                return Ok(Effect::Reconnect);
            }
            // The move's home node did not say it made the move for this client (their link is
            // cut, or it restarted): the runtime starts over, which declines the move.
            (Purpose::TakeOver, ErrorKind::PermissionDenied) => return Ok(Effect::Reconnect),
            // The containers' node reclaimed past the task's visibility (in a life where it was
            // an island, which its runtime keeps): the runtime starts over further on.
            (Purpose::TakeOver, ErrorKind::BelowVisibility) => {
                self.next_ts += JOIN_STEP;
                return Ok(Effect::Reconnect);
            }
            (Purpose::Lookup, ErrorKind::NotFound) => conn.looked_up = true,
            // As a sent consume's: its connection or item went meanwhile.
            (Purpose::SendConsumes, _) => {}
            (Purpose::Create, ErrorKind::AlreadyExists) => conn.looked_up = false,
            // Nothing yet: ask again later.
            (Purpose::Get, ErrorKind::NotAvailable) => {}
            // Nothing open at its timestamp on this connection: an earlier consume whose reply
            // was lost took it (the session lives, so it was not given back).
            (Purpose::Consume, ErrorKind::NotAvailable) => {
                self.held.take().expect("an item to consume");
                return Ok(Effect::Consumed);
            }
            // The item went back and another worker took or consumed it, or the channel's
            // ts_min passed it (a reader's get that held it ended with its session).
            (Purpose::Consume, ErrorKind::NotFound | ErrorKind::AlreadyConsumed | ErrorKind::Reclaimed) => {
                self.held = None;
            }
            // A producer's task below the node's ts_min (its earlier session's items were
            // consumed past it): it joins further on.
            (Purpose::Task, ErrorKind::BelowVisibility) => self.next_ts += JOIN_STEP,
            _ => return Err(format!("{purpose:?} refused: {e}")),
        }
        Ok(Effect::None)
    }

    /// The call made for `purpose` failed without an answer the application can use (a lost
    /// reply): a producer moves on to its next timestamp.
    pub(super) fn lost(&mut self, purpose: Purpose) {
        if let Purpose::Put(ts) = purpose {
            self.next_ts = self.next_ts.max(ts + STRIDE);
        }
    }
}

/// A call under way, as the client's loop keeps it.
pub(super) struct Pending {
    /// The session it is made in.
    pub(super) side: Side,
    pub(super) call: Call,
    pub(super) request: Request,
    pub(super) payload: Vec<u8>,
    pub(super) purpose: Purpose,
    pub(super) first_sent: u64,
    /// Which try is under way: a reply to an earlier one is dropped (its query is gone).
    pub(super) try_id: u64,
    pub(super) try_ends: u64,
    /// The reply to the try under way, once it came, and the node incarnation that served it.
    pub(super) reply: Option<(Vec<u8>, u32)>,
    /// The try under way ended without a reply before its deadline (the fabric said so: its
    /// link broke).
    pub(super) failed: bool,
    /// Whether the process was stopped while the call was under way.
    pub(super) stopped: bool,
}
