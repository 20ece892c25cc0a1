//! The simulated world: a virtual clock, the messages between clients and their nodes (delayed
//! at random, so reordered between senders, and lost; the fabric says so of half the lost ones,
//! as when a link breaks under a query), the mesh's messages and liveliness between the nodes
//! (`mesh.rs`), and the requests each node serves; each client's call loop is `calls.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use stampede_core::mesh::Message;
use stampede_core::{Outcome, Peer};
use stampede_wire::Reply;

use super::client::{Pending, Role, SimClient};
use super::node::{reply_of, Handled, Serving, SimNode};
use super::oracle::Oracle;
use super::tokens::Token;
use super::{Counts, Rng};

/// A message or a timer, due at a virtual instant.
#[derive(Debug)]
pub(super) enum Event {
    /// A request reaches node `node` (`try_id`: the try it is, 0 when no reply is waited for).
    ToNode {
        node: usize,
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
    /// A question of node `from` (incarnation `incarnation`) reaches the node it names.
    Ask {
        from: usize,
        incarnation: u32,
        ask: super::asks::Ask,
    },
    /// A push event of a node reaches client `client` (in its life `life`), for its session
    /// `session`.
    Pushed {
        client: usize,
        life: u32,
        session: String,
        message: Vec<u8>,
    },
    /// The answer `yes` of node `via` reaches node `node` (incarnation `incarnation`).
    Answer {
        node: usize,
        incarnation: u32,
        via: usize,
        yes: bool,
        answer: tokio::sync::oneshot::Sender<bool>,
    },
}

/// A client process: its life (a kill starts the next), its faults, its call under way.
pub(super) struct Proc {
    pub(super) life: u32,
    pub(super) stopped: bool,
    pub(super) killed: bool,
    pub(super) cut: bool,
    pub(super) pending: Option<Pending>,
    pub(super) next_try: u64,
    pub(super) idle_until: u64,
    /// The phase of its keep-alives.
    pub(super) phase: u64,
}

/// Longest a get asks the node to wait (within the lease's share a reply of a get is taken in).
pub(super) const GET_WAIT_US_MAX: u64 = 500_000;

/// Between two looks of the node at the requests waiting on it.
const NODE_TICK_US: u64 = 10_000;

/// How much later than its retry a stalled request's first copy arrives, at most.
pub(super) const STALL_US: u64 = 500_000;

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
    /// By session: the number of the node's next push event, and when its latest one arrives
    /// (a session's events arrive in order).
    push_seqs: BTreeMap<String, u64>,
    push_dues: BTreeMap<String, u64>,
    /// Node incarnations made so far (each a new number, across nodes).
    pub(super) incarnations: u32,
    pub(super) mesh: super::mesh::Fabric,
    pub(super) clients: Vec<SimClient>,
    pub(super) procs: Vec<Proc>,
    /// By session id; ordered, so that a seed replays exactly.
    pub(super) tokens: BTreeMap<String, Token>,
    pub(super) sessions_made: u64,
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
    pub(super) fn new(seed: u64, roles: &[(Role, usize, usize)], nodes: usize) -> World {
        let mut rng = Rng(seed);
        let procs = roles
            .iter()
            .map(|_| Proc {
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
        let clients = roles
            .iter()
            .enumerate()
            .map(|(i, &(role, home, containers))| SimClient::new(i, role, home, containers))
            .collect();
        World {
            rng,
            now: 0,
            order: 0,
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            nodes: (0..nodes).map(|_| None).collect(),
            ticking: false,
            push_seqs: BTreeMap::new(),
            push_dues: BTreeMap::new(),
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
    pub(super) fn lost(&mut self, client: usize, per_mille: u64) -> bool {
        self.procs[client].cut || (self.lossy && self.rng.below(1000) < per_mille)
    }

    pub(super) fn handle(&mut self, event: Event) -> Result<(), String> {
        if self.trace {
            eprintln!("{:>9} µs  {}", self.now, traced(&event));
        }
        match event {
            Event::ToNode { node, client, life, try_id, message } => self.at_node(node, client, life, try_id, &message),
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
            Event::Ask { from, incarnation, ask } => {
                self.reach(from, incarnation, ask);
                Ok(())
            }
            Event::Answer { node, incarnation, via, yes, answer } => {
                self.answered(node, incarnation, via, yes, answer);
                Ok(())
            }
            Event::Pushed { client, life, session, message } => {
                let proc = &self.procs[client];
                if proc.life != life || proc.killed {
                    return Ok(());
                }
                if proc.cut || proc.stopped {
                    // Lost on the way (a cut link; a stopped process's buffers are not modelled
                    // apart): the client finds the gap at its next event.
                    self.counts.pushes_lost += 1;
                    return Ok(());
                }
                match self.clients[client].conn.as_mut().filter(|conn| conn.id == session) {
                    Some(conn) => conn.pushed(&message),
                    None => Ok(()),
                }
            }
        }?;
        // Whatever the event did (a put, a session closed, an answer, time passing) may answer a
        // request waiting on a node, make it ask another, and give a steward something to do.
        self.poll_nodes()?;
        self.carry_asks()?;
        self.look_at_stewards()
    }

    /// A request reaches node `home`: served by its code, the reply sent back.
    fn at_node(&mut self, home: usize, client: usize, life: u32, try_id: u64, message: &[u8]) -> Result<(), String> {
        if self.procs[client].cut {
            return Ok(());
        }
        let secret = self.rng.next().to_le_bytes().repeat(2).try_into().expect("16 bytes");
        let Some(node) = self.nodes[home].as_mut() else { return Ok(()) };
        self.counts.served += 1;
        let serving = node.serve(message, secret, (client, life, try_id), self.now);
        node.consumes_applied(message)?;
        match serving {
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
                node.close_session(opened);
            }
        }
        if let Some((session, op)) = &handled.ran {
            debug_assert!(self.tokens.get(session).is_none_or(|t| t.client == client));
            self.oracle.served(incarnation, session, op, &handled.reply)?;
            let done = matches!(reply_of(&handled.reply), Ok((Reply::Outcome(Outcome::Done), _)));
            if done {
                let pushes = node.pushes(session, op);
                let newest = super::oracle::channel_timestamps(&node.runtime).into_iter().max();
                self.push(pushes, newest);
            }
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

    /// Sends each session's push events to its client, in order per session, numbered as the
    /// node's sender numbers them. One is lost now and then, as the node's queue drops one when
    /// full: the reset it then sends follows. A client cut off loses them (its link is down), and
    /// finds the gap at the next event that reaches it. `newest` is the channel's newest
    /// timestamp on the node as it made them (for the oracle's `notices`).
    fn push(&mut self, pushes: Vec<(String, Vec<crate::readers::Push>)>, newest: Option<stampede_core::Timestamp>) {
        for (session, pushes) in pushes {
            let Some(token) = self.tokens.get(&session) else { continue };
            let (client, life) = (token.client, token.life);
            for push in pushes {
                let seq = self.push_seqs.entry(session.clone()).or_default();
                let (header, payload) = crate::push::event(&push, *seq);
                self.oracle.notices.made(&session, *seq, newest);
                *seq += 1;
                let mut message = header;
                if self.lossy && self.rng.below(1000) < 10 {
                    // Dropped from the node's full queue: a reset goes out instead, in order.
                    self.counts.pushes_lost += 1;
                    message = stampede_wire::encode(&stampede_wire::PushEvent::Reset { seq: *seq - 1 });
                } else if let Some(payload) = payload {
                    message.extend_from_slice(&payload);
                }
                self.counts.pushes += 1;
                let due = self.push_dues.get(&session).copied().unwrap_or(0).max(self.now + self.delay());
                self.push_dues.insert(session.clone(), due);
                self.at(due, Event::Pushed { client, life, session: session.clone(), message });
            }
        }
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
    pub(super) fn maybe_no_reply(&mut self, client: usize, life: u32, try_id: u64) {
        if self.rng.below(2) == 0 {
            let due = self.now + self.delay();
            self.at(due, Event::NoReply { client, life, try_id });
        }
    }
}

/// An event as the trace shows it: messages decoded.
fn traced(event: &Event) -> String {
    match event {
        Event::ToNode { node, client, life, try_id, message } => match stampede_wire::decode_request(message) {
            Ok((h, _)) => format!(
                "client {client}/{life} try {try_id} → node {node}: {} #{} {:?} acks {:?}{}{}",
                h.session,
                h.seq,
                h.request,
                h.acks,
                match h.released.is_empty() {
                    true => String::new(),
                    false => format!(" released {:?}", h.released),
                },
                match h.opened.is_empty() {
                    true => String::new(),
                    false => format!(" opened {:?}", h.opened.iter().map(|o| (o.connection, o.ts)).collect::<Vec<_>>()),
                },
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
