//! The simulated world: a virtual clock, the messages between clients and their nodes (delayed
//! at random, so reordered between senders, and lost; the fabric says so of half the lost ones,
//! as when a link breaks under a query), the mesh's messages and liveliness between the nodes
//! (`mesh.rs`), and each client's call loop — the loop of `stampede::remote::client::exchange`
//! over the same pure rules.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use stampede_core::mesh::Message;
use stampede_core::{Error, Op, Peer};
use stampede_wire::session::{Answer, ClientSession, Standing, Verdict};
use stampede_wire::{encode, Reply, Request, RequestHeader};

use super::client::{Conn, Effect, Pending, Purpose, Role, SimClient};
use super::node::{reply_of, Handled, Serving, SimNode};
use super::oracle::{Delivery, Oracle};
use super::tokens::Token;
use super::{Counts, Rng, LEASE_US};

/// A message or a timer, due at a virtual instant.
#[derive(Debug)]
pub(super) enum Event {
    /// A request reaches the node (`try_id`: the try it is, 0 when no reply is waited for).
    ToNode {
        client: usize,
        life: u32,
        try_id: u64,
        message: Vec<u8>,
    },
    /// A reply reaches a client (`try_id`: the try it answers), from node incarnation `node`.
    ToClient {
        client: usize,
        life: u32,
        try_id: u64,
        node: u32,
        message: Vec<u8>,
    },
    /// The fabric tells a client its try ended without a reply (the link it took broke).
    NoReply {
        client: usize,
        life: u32,
        try_id: u64,
    },
    /// A client's timer: a try's deadline, or its next action.
    Wake {
        client: usize,
        life: u32,
    },
    /// A silent client's token expires on the node, if it is still the same silence.
    Expire {
        session: String,
        silence: u64,
    },
    /// A client's withdrawn token is gone on the node.
    Withdrawn {
        session: String,
    },
    /// The fault schedule's next look.
    Fault,
    Resume {
        client: usize,
    },
    Restart {
        client: usize,
    },
    Heal {
        client: usize,
    },
    NodeUp {
        node: usize,
    },
    /// The nodes look at the requests waiting on them.
    NodeTick,
    /// A mesh message from participant `from` reaches node `node` (addressed to `to`).
    Mesh {
        node: usize,
        from: Peer,
        to: Vec<Peer>,
        message: Message,
    },
    /// Node `node`'s fabric reports participant `peer` live (its token appeared) or dead.
    Liveliness {
        node: usize,
        peer: Peer,
        live: bool,
    },
    /// Node `node`'s participant, restarted after an expulsion, declares itself again.
    Begin {
        node: usize,
    },
    /// The link between nodes `a` and `b` comes back.
    Mend {
        a: usize,
        b: usize,
    },
    /// Every node's driver looks at its steward (its tick).
    MeshTick,
}

/// A client process: its life (a kill starts the next), its faults, its call under way.
pub(super) struct Proc {
    /// The node it talks to.
    pub(super) home: usize,
    pub(super) life: u32,
    pub(super) stopped: bool,
    pub(super) killed: bool,
    pub(super) cut: bool,
    pub(super) pending: Option<Pending>,
    next_try: u64,
    idle_until: u64,
    /// The phase of its keep-alives.
    pub(super) phase: u64,
}

/// Longest a get asks the node to wait (within the lease's share a reply of a get is taken in).
const GET_WAIT_US_MAX: u64 = 500_000;

/// Between two looks of the node at the requests waiting on it.
const NODE_TICK_US: u64 = 10_000;

/// How much later than its retry a stalled request's first copy arrives, at most.
const STALL_US: u64 = 500_000;

pub(super) struct World {
    pub(super) rng: Rng,
    pub(super) now: u64,
    order: u64,
    events: BinaryHeap<Reverse<(u64, u64)>>,
    payloads: HashMap<u64, Event>,
    /// The nodes, by index (`None`: down).
    pub(super) nodes: Vec<Option<SimNode>>,
    /// Whether a [`Event::NodeTick`] is due.
    ticking: bool,
    /// Node incarnations made so far (each a new number, across nodes).
    pub(super) incarnations: u32,
    pub(super) mesh: super::mesh::Fabric,
    pub(super) clients: Vec<SimClient>,
    pub(super) procs: Vec<Proc>,
    /// By session id; ordered, so that a seed replays exactly.
    pub(super) tokens: BTreeMap<String, Token>,
    sessions_made: u64,
    pub(super) oracle: Oracle,
    /// Whether messages may be lost now (not once the faults stopped).
    pub(super) lossy: bool,
    /// Whether applications start new work (not while the world winds down).
    pub(super) working: bool,
    pub(super) counts: Counts,
    pub(super) trace: bool,
    /// The session-rule fault switched on in every client and session, if any.
    #[cfg(feature = "mutations")]
    pub(super) mutation: Option<stampede_wire::session::Mutation>,
    /// The mesh-protocol fault switched on in every node's participant, if any.
    #[cfg(feature = "mutations")]
    pub(super) mesh_mutation: Option<stampede_core::mesh::Mutation>,
}

impl World {
    pub(super) fn new(seed: u64, roles: &[(Role, usize)], nodes: usize) -> World {
        let mut rng = Rng(seed);
        let procs = roles
            .iter()
            .map(|&(_, home)| Proc {
                home,
                life: 0,
                stopped: false,
                killed: false,
                cut: false,
                pending: None,
                next_try: 0,
                idle_until: 0,
                phase: rng.below(super::tokens::KEEPALIVE_US),
            })
            .collect();
        let clients = roles.iter().enumerate().map(|(i, (role, _))| SimClient::new(i, *role)).collect();
        World {
            rng,
            now: 0,
            order: 0,
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            nodes: (0..nodes).map(|_| None).collect(),
            ticking: false,
            incarnations: 0,
            mesh: super::mesh::Fabric::default(),
            clients,
            procs,
            tokens: BTreeMap::new(),
            sessions_made: 0,
            oracle: Oracle::default(),
            lossy: true,
            working: true,
            counts: Counts::default(),
            trace: false,
            #[cfg(feature = "mutations")]
            mutation: None,
            #[cfg(feature = "mutations")]
            mesh_mutation: None,
        }
    }

    pub(super) fn at(&mut self, due: u64, event: Event) {
        self.order += 1;
        self.events.push(Reverse((due.max(self.now), self.order)));
        self.payloads.insert(self.order, event);
    }

    /// The next event due at or before `until`, the clock moved to it.
    pub(super) fn next_event(&mut self, until: u64) -> Option<Event> {
        let Reverse((due, order)) = *self.events.peek()?;
        if due > until {
            return None;
        }
        self.events.pop();
        debug_assert!(due >= self.now, "time never goes back");
        self.now = due;
        self.payloads.remove(&order)
    }

    /// A message's delay: short mostly, sometimes long (a loaded link).
    pub(super) fn delay(&mut self) -> u64 {
        match self.rng.below(10) {
            0 => 5_000 + self.rng.below(200_000),
            _ => self.rng.below(5_000),
        }
    }

    /// Whether a message is lost on the way (only while faults run), or its client's link is cut.
    fn lost(&mut self, client: usize, per_mille: u64) -> bool {
        self.procs[client].cut || (self.lossy && self.rng.below(1000) < per_mille)
    }

    pub(super) fn handle(&mut self, event: Event) -> Result<(), String> {
        if self.trace {
            eprintln!("{:>9} µs  {}", self.now, traced(&event));
        }
        match event {
            Event::ToNode { client, life, try_id, message } => self.at_node(client, life, try_id, &message),
            Event::ToClient { client, life, try_id, node, message } => {
                let proc = &mut self.procs[client];
                match proc.pending.as_mut() {
                    Some(pending) if proc.life == life && pending.try_id == try_id => {
                        pending.reply = Some((message, node));
                        self.step(client)
                    }
                    // Its query is gone (an earlier try, or an earlier life): dropped.
                    _ => Ok(()),
                }
            }
            Event::NoReply { client, life, try_id } => {
                let proc = &mut self.procs[client];
                match proc.pending.as_mut() {
                    Some(pending) if proc.life == life && pending.try_id == try_id => {
                        pending.failed = true;
                        self.step(client)
                    }
                    _ => Ok(()),
                }
            }
            Event::Wake { client, life } if self.procs[client].life == life => self.step(client),
            Event::Wake { .. } => Ok(()),
            Event::Expire { session, silence } => {
                if self.tokens.get(&session).is_some_and(|t| t.silence == silence && t.silent_since.is_some()) {
                    self.counts.expired += 1;
                    self.token_gone(&session);
                }
                Ok(())
            }
            Event::Withdrawn { session } => {
                self.token_gone(&session);
                Ok(())
            }
            Event::NodeTick => {
                self.ticking = false;
                Ok(())
            }
            Event::Fault
            | Event::Resume { .. }
            | Event::Restart { .. }
            | Event::Heal { .. }
            | Event::NodeUp { .. }
            | Event::Mend { .. } => self.fault(event),
            Event::Mesh { .. } | Event::Liveliness { .. } | Event::Begin { .. } | Event::MeshTick => {
                self.mesh_event(event)
            }
        }?;
        // Whatever the event did (a put, a session closed, time passing) may answer a request
        // waiting on a node, and give a steward something to do.
        self.poll_nodes()?;
        self.look_at_stewards()
    }

    /// A request reaches the node: served by its code, the reply sent back.
    fn at_node(&mut self, client: usize, life: u32, try_id: u64, message: &[u8]) -> Result<(), String> {
        if self.procs[client].cut {
            return Ok(());
        }
        let secret = self.rng.next().to_le_bytes().repeat(2).try_into().expect("16 bytes");
        let home = self.procs[client].home;
        let Some(node) = self.nodes[home].as_mut() else { return Ok(()) };
        self.counts.served += 1;
        match node.serve(message, secret, (client, life, try_id), self.now) {
            Serving::Now(handled) => return self.answer(home, *handled),
            Serving::Waits => {
                self.counts.waited += 1;
                if self.lossy && self.rng.below(10) == 0 {
                    // The link breaks under the waiting query: its client is told and retries,
                    // while the first run goes on waiting on the node.
                    let due = self.now + self.delay();
                    self.at(due, Event::NoReply { client, life, try_id });
                }
            }
            Serving::RepeatWaits => self.counts.repeats_waited += 1,
            Serving::OpenWaits => self.counts.opens_waited += 1,
        }
        Ok(())
    }

    /// Node `home` answered a request: what the oracle and the tokens learn, and its reply sent
    /// back (unless its client waits for none, or the reply is lost).
    fn answer(&mut self, home: usize, handled: Handled) -> Result<(), String> {
        let Some(node) = self.nodes[home].as_ref() else { return Ok(()) };
        let incarnation = node.incarnation;
        let (client, life, try_id) = handled.to;
        if let Some(opened) = &handled.opened {
            #[cfg(feature = "mutations")]
            if let (Some(mutation), Some(session)) = (self.mutation, node.desk.get(opened)) {
                session.replies.lock().mutate(mutation);
            }
            // The node's open waits for the session's token; one already gone ends it.
            if !self.tokens.contains_key(opened) {
                node.desk.close(opened);
            }
        }
        if let Some((session, op)) = &handled.ran {
            debug_assert!(self.tokens.get(session).is_none_or(|t| t.client == client));
            self.oracle.served(incarnation, session, op, &handled.reply)?;
        }
        if try_id == 0 {
            return Ok(());
        }
        if self.lost(client, 40) {
            self.counts.replies_lost += 1;
            self.maybe_no_reply(client, life, try_id);
            return Ok(());
        }
        let due = self.now + self.delay();
        self.at(due, Event::ToClient { client, life, try_id, node: incarnation, message: handled.reply });
        Ok(())
    }

    /// The nodes' clocks move to now: the requests that waited on them and are answered now.
    /// While some still wait, they look again every [`NODE_TICK_US`].
    pub(super) fn poll_nodes(&mut self) -> Result<(), String> {
        let now = self.now;
        for home in 0..self.nodes.len() {
            let Some(node) = self.nodes[home].as_mut() else { continue };
            for handled in node.poll(now) {
                self.answer(home, handled)?;
            }
        }
        let busy = self.nodes.iter().flatten().any(SimNode::busy);
        if busy && !self.ticking {
            self.ticking = true;
            self.at(now + NODE_TICK_US, Event::NodeTick);
        }
        Ok(())
    }

    /// Half the time a message of try `try_id` is lost, the fabric tells its client so (the
    /// link broke under the query); else the try waits for its deadline.
    fn maybe_no_reply(&mut self, client: usize, life: u32, try_id: u64) {
        if self.rng.below(2) == 0 {
            let due = self.now + self.delay();
            self.at(due, Event::NoReply { client, life, try_id });
        }
    }

    /// Client `client` acts: takes the reply or the lost try of its call, or starts the next.
    pub(super) fn step(&mut self, client: usize) -> Result<(), String> {
        let proc = &mut self.procs[client];
        if proc.stopped || proc.killed {
            return Ok(());
        }
        let now = self.now;
        if let Some(pending) = proc.pending.as_mut() {
            if let Some(reply) = pending.reply.take() {
                return self.conclude(client, Some(reply));
            }
            if now < pending.try_ends && !std::mem::take(&mut pending.failed) {
                return Ok(());
            }
            let taken = Duration::from_micros(now - pending.first_sent);
            let conn = self.clients[client].conn.as_ref().expect("a call has its session");
            return match conn.protocol.retry(&mut pending.call, true, taken, conn.closed) {
                Some(timeout) => {
                    self.counts.retries += 1;
                    self.send_try(client, timeout);
                    Ok(())
                }
                None => self.conclude(client, None),
            };
        }
        if now < proc.idle_until || !self.working {
            return Ok(());
        }
        self.start_call(client);
        Ok(())
    }

    fn start_call(&mut self, client: usize) {
        let (request, payload, purpose) = match self.clients[client].conn {
            None => {
                self.sessions_made += 1;
                let id = format!("{:x}", (self.sessions_made << 16) | client as u64);
                let proc = &self.procs[client];
                let token = Token {
                    client,
                    life: proc.life,
                    declared_at: self.now,
                    silent_since: None,
                    silence: 0,
                    withdrawn: false,
                };
                self.tokens.insert(id.clone(), token);
                #[allow(unused_mut)]
                let mut protocol = ClientSession::new(Duration::from_micros(LEASE_US));
                #[cfg(feature = "mutations")]
                if let Some(mutation) = self.mutation {
                    protocol.mutate(mutation);
                }
                self.clients[client].connect(Some(Conn::new(id, protocol)));
                (Request::Open { user: None, password: None }, Vec::new(), Purpose::Open)
            }
            Some(_) => {
                let wait_us = match self.rng.below(2) {
                    0 => 0,
                    _ => self.rng.below(GET_WAIT_US_MAX),
                };
                self.clients[client].next_request(wait_us)
            }
        };
        let wait = match &request {
            Request::Op(Op::Get { wait_us, .. } | Op::QueueGet { wait_us, .. }) => Duration::from_micros(*wait_us),
            _ => Duration::ZERO,
        };
        let conn = self.clients[client].conn.as_mut().expect("a session");
        let call = conn.protocol.call(&request, wait);
        let first_sent = self.now;
        let pending = Pending {
            call,
            request,
            payload,
            purpose,
            first_sent,
            try_id: 0,
            try_ends: 0,
            reply: None,
            failed: false,
            stopped: false,
        };
        let timeout = conn.protocol.try_timeout(&pending.call, Duration::ZERO);
        self.procs[client].pending = Some(pending);
        self.send_try(client, timeout);
    }

    /// Sends the call under way once more (its first try, or a retry with its number), its reply
    /// waited for `timeout`.
    fn send_try(&mut self, client: usize, timeout: Duration) {
        let conn = self.clients[client].conn.as_mut().expect("a call has its session");
        let proc = &mut self.procs[client];
        let pending = proc.pending.as_mut().expect("a call under way");
        proc.next_try += 1;
        pending.try_id = proc.next_try;
        pending.try_ends = self.now + timeout.as_micros() as u64;
        let header = RequestHeader {
            seq: pending.call.seq,
            acks: conn.protocol.acks(),
            floor: conn.protocol.floor(),
            ..RequestHeader::new(conn.id.clone(), conn.secret.unwrap_or_default(), pending.request.clone())
        };
        let mut message = encode(&header);
        message.extend_from_slice(&pending.payload);
        let (life, try_ends, try_id) = (proc.life, pending.try_ends, pending.try_id);
        self.at(try_ends, Event::Wake { client, life });
        if self.lost(client, 20) {
            self.counts.requests_lost += 1;
            self.maybe_no_reply(client, life, try_id);
            return;
        }
        let mut due = self.now + self.delay();
        if self.lossy && self.rng.below(1000) < 10 {
            // The request's connection stalls and the fabric gives up on it (on the direct path
            // a retry takes another connection): the client is told, retries, and the first copy
            // still arrives, late.
            self.counts.stalled += 1;
            self.at(self.now + 1_000, Event::NoReply { client, life, try_id });
            due += STALL_US;
        }
        self.at(due, Event::ToNode { client, life, try_id, message });
    }

    /// The call under way ends with `reply` (from the node incarnation that served it) or none:
    /// the session protocol's verdict, then the application takes what it allows.
    fn conclude(&mut self, client: usize, reply: Option<(Vec<u8>, u32)>) -> Result<(), String> {
        let pending = self.procs[client].pending.take().expect("a call under way");
        let taken = Duration::from_micros(self.now - pending.first_sent);
        let served_by = reply.as_ref().map_or(0, |(_, node)| *node);
        let decoded = reply.map(|(message, _)| reply_of(&message)).transpose()?;
        let answer = match &decoded {
            None => Answer::Lost,
            Some((Reply::Error(_), _)) => Answer::Error,
            Some(_) => Answer::Outcome,
        };
        let conn = self.clients[client].conn.as_mut().expect("a call has its session");
        if answer != Answer::Lost {
            conn.protocol.read(pending.call.seq);
        }
        let bound = conn.protocol.try_timeout(&pending.call, Duration::ZERO);
        if !pending.stopped && taken > bound {
            return Err(format!("a call of client {client} took {taken:?}, past its deadline {bound:?}"));
        }
        let verdict =
            conn.protocol.conclude(&pending.call, answer, taken, Standing { closed: conn.closed, ended: conn.ended });
        let (session, secret, opened) = (conn.id.clone(), conn.secret.unwrap_or_default(), conn.secret.is_some());
        if let (Verdict::Deliver, Some((Reply::Opened(secret), _))) = (verdict, &decoded) {
            conn.secret = Some(*secret);
        }
        let idle_until = self.now + self.think(client);
        self.procs[client].idle_until = idle_until;
        let life = self.procs[client].life;
        self.at(idle_until, Event::Wake { client, life });
        let outcome = match (verdict, decoded) {
            (Verdict::Deliver, Some((Reply::Opened(_), _))) => return Ok(()),
            (Verdict::Deliver, Some((Reply::Outcome(outcome), payload))) => Ok((outcome, payload)),
            (Verdict::NodeError, Some((Reply::Error(e), _))) => Err(Error::from(e)),
            (Verdict::Deliver | Verdict::NodeError, other) => {
                return Err(format!("verdict {verdict:?} on {other:?}"));
            }
            (verdict, _) => {
                self.counts.count(verdict);
                self.clients[client].lost(pending.purpose);
                if verdict.ends_session() || !opened || verdict == Verdict::SessionEnded {
                    self.end_session(client);
                }
                return Ok(());
            }
        };
        if matches!(pending.purpose, Purpose::Open) {
            // The node refused the session (its bound): try again later.
            self.end_session(client);
            return Ok(());
        }
        let effect = self.clients[client].take(pending.purpose, outcome)?;
        match effect {
            Effect::None => {
                if let (Purpose::Put(_), Role::QueueProducer) = (pending.purpose, self.clients[client].role) {
                    self.oracle.acknowledged(served_by, Bytes::from(pending.payload));
                }
            }
            Effect::Delivered { seq, ts, payload } => {
                let delivery =
                    Delivery { session: &session, secret, incarnation: served_by, seq, ts, payload: &payload };
                let home = self.procs[client].home;
                self.oracle.delivered(self.nodes[home].as_ref(), delivery)?;
            }
            // The oracle saw it on the node.
            Effect::Consumed => {}
            Effect::Reconnect => self.end_session(client),
        }
        Ok(())
    }

    /// The application closes its client from another thread: a call under way ends at once
    /// (`Closed`, whatever its reply would have carried goes back with the session), then the
    /// client says so to the node and withdraws its token; its next call opens a new session.
    pub(super) fn close_client(&mut self, client: usize) -> Result<(), String> {
        let Some(conn) = self.clients[client].conn.as_mut() else { return Ok(()) };
        conn.closed = true;
        if self.procs[client].pending.is_some() {
            self.conclude(client, None)?;
        }
        self.end_session(client);
        Ok(())
    }

    /// How long an application thinks before its next call.
    fn think(&mut self, client: usize) -> u64 {
        match self.clients[client].role.produces() {
            true => 10_000 + self.rng.below(30_000),
            false => self.rng.below(20_000),
        }
    }

    /// The client ends its session: it says so to the node (if the message gets there) and
    /// withdraws its token; its next call opens a new session.
    pub(super) fn end_session(&mut self, client: usize) {
        let Some(mut conn) = self.clients[client].conn.take() else { return };
        conn.ended = true;
        self.counts.sessions_ended += 1;
        let (life, delay) = (self.procs[client].life, self.delay());
        if let Some(secret) = conn.secret.filter(|_| !self.lost(client, 20)) {
            let message = encode(&RequestHeader::new(conn.id.clone(), secret, Request::Close));
            self.at(self.now + delay, Event::ToNode { client, life, try_id: 0, message });
        }
        self.withdraw(&conn.id, client);
        self.clients[client].connect(None);
    }
}

/// An event as the trace shows it: messages decoded.
fn traced(event: &Event) -> String {
    match event {
        Event::ToNode { client, life, try_id, message } => match stampede_wire::decode_request(message) {
            Ok((h, _)) => format!(
                "client {client}/{life} try {try_id} → node: {} #{} {:?} acks {:?}",
                h.session, h.seq, h.request, h.acks
            ),
            Err(e) => format!("client {client} → node: unreadable {e}"),
        },
        Event::ToClient { client, life, try_id, node, message } => match reply_of(message) {
            Ok((reply, _)) => format!("node {node} → client {client}/{life} try {try_id}: {reply:?}"),
            Err(e) => format!("node → client {client}: unreadable {e}"),
        },
        other => format!("{other:?}"),
    }
}
