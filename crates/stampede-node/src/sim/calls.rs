//! The clients' calls, driven through the session protocol's steps as the real client drives
//! them (`stampede_wire::session::ClientSession`, whose module doc lists the steps): a call opens
//! a session or sends its request, each try's header is the protocol's and waits for its reply
//! until its deadline, `retry` says whether to send it again, `conclude` what the reply or its
//! absence means and `Call::confirmed` what the node applied; the application then takes what
//! it allows. Only the I/O is the simulation's: the world's events stand for sockets and time.

use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Error, Op};
use stampede_wire::session::{Answer, ClientSession, Reports, Standing, Verdict};
use stampede_wire::{encode, Reply, Request, RequestHeader};

use super::client::{Conn, Effect, Next, Pending, Purpose, Role, Side};
use super::node::reply_of;
use super::oracle::Delivery;
use super::tokens::Token;
use super::world::{Event, World, GET_WAIT_US_MAX, STALL_US};
use super::LEASE_US;

impl World {
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
            let conn = self.clients[client].conn_mut(pending.side).expect("a call has its session");
            // The try failed: what it carried is carried by every request until a reply confirms it.
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
        self.start_call(client)
    }

    /// Starts the client's next call, or gives the answer its cache has (`Err`: the oracle's).
    fn start_call(&mut self, client: usize) -> Result<(), String> {
        let wait_us = match self.rng.below(2) {
            0 => 0,
            _ => self.rng.below(GET_WAIT_US_MAX),
        };
        let (side, request, payload, purpose) = match self.clients[client].next_call(wait_us, self.now) {
            Next::Cached { connection, item, payload, told } => {
                self.counts.cached += 1;
                let conn = self.clients[client].conn.as_ref().expect("a cache answers in an open session");
                let (session, secret, node) = (conn.id.clone(), conn.secret.unwrap_or_default(), conn.node);
                // The incarnation the cache heard from: the one its session was opened on (one that
                // died since took what it said with it, as for a reply).
                let incarnation = conn.incarnation;
                let (ts, payload) = (item.ts, &payload);
                let delivery = Delivery { session: &session, secret, incarnation, connection, seq: None, ts, payload };
                let released: Vec<u64> = conn.protocol.released().collect();
                self.oracle.cached(self.nodes[node].as_ref(), &delivery, &released)?;
                // The node's channel now, if the node the cache heard from still holds the session.
                let here = self.nodes[node].as_ref().filter(|n| n.desk.get(&session).is_some());
                let now = here.and_then(|n| super::oracle::channel_timestamps(&n.runtime).into_iter().max());
                self.oracle.notices.answered(&session, told, ts, now)?;
                self.oracle.delivered(self.nodes[node].as_ref(), delivery)?;
                let idle_until = self.now + self.think(client);
                self.procs[client].idle_until = idle_until;
                let life = self.procs[client].life;
                self.at(idle_until, Event::Wake { client, life });
                return Ok(());
            }
            Next::Open(side) => {
                self.sessions_made += 1;
                let id = format!("{:x}", (self.sessions_made << 16) | client as u64);
                let proc = &self.procs[client];
                let node = self.clients[client].node_of(side);
                let token = Token {
                    client,
                    node,
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
                self.clients[client].connect(side, Conn::new(id, node, protocol));
                (side, Request::Open { user: None, password: None }, Vec::new(), Purpose::Open)
            }
            Next::Call { side, request, payload, purpose } => (side, request, payload, purpose),
        };
        let wait = match &request {
            Request::Op(Op::Get { wait_us, .. } | Op::QueueGet { wait_us, .. }) => Duration::from_micros(*wait_us),
            _ => Duration::ZERO,
        };
        // A get is its caller's last wait slice, as the real client's: its timeout ends with it,
        // and it gives up `REPLY_GRACE` later.
        let deadline = request.releasable().then_some(wait);
        let conn = self.clients[client].conn_mut(side).expect("a session");
        let call = conn.protocol.call(&request, wait, deadline);
        let first_sent = self.now;
        let pending = Pending {
            side,
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
        Ok(())
    }

    /// Sends the call under way once more (its first try, or a retry with its number), its reply
    /// waited for `timeout`.
    fn send_try(&mut self, client: usize, timeout: Duration) {
        let proc = &mut self.procs[client];
        let pending = proc.pending.as_mut().expect("a call under way");
        let conn = self.clients[client].conn_mut(pending.side).expect("a call has its session");
        proc.next_try += 1;
        pending.try_id = proc.next_try;
        pending.try_ends = self.now + timeout.as_micros() as u64;
        let reports =
            Reports { opened: conn.opened.reports(|_| 0), consumed: conn.consumed.carried(), ..Reports::default() };
        self.counts.consumes_carried += reports.consumed.len() as u64;
        let (secret, request) = (conn.secret.unwrap_or_default(), pending.request.clone());
        let header = conn.protocol.header(Some(&mut pending.call), &conn.id, secret, request, reports);
        conn.released_unsent.clear();
        let mut message = encode(&header);
        message.extend_from_slice(&pending.payload);
        let (life, try_ends, try_id, node) = (proc.life, pending.try_ends, pending.try_id, conn.node);
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
        self.at(due, Event::ToNode { node, client, life, try_id, message });
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
        let conn = self.clients[client].conn_mut(pending.side).expect("a call has its session");
        if let Some(Reports { opened, consumed, .. }) = pending.call.confirmed(answer) {
            conn.opened.confirm(opened);
            conn.consumed.confirm(consumed);
        }
        let bound = conn.protocol.try_timeout(&pending.call, Duration::ZERO);
        if !pending.stopped && taken > bound {
            return Err(format!("a call of client {client} took {taken:?}, past its deadline {bound:?}"));
        }
        let verdict =
            conn.protocol.conclude(&pending.call, answer, taken, Standing { closed: conn.closed, ended: conn.ended });
        // A get the node served (any reply but `Closed`, as the client's rule): its connection
        // was open there when it was sent, and stays so a lease after at least.
        let served = match (&pending.request, verdict, &decoded) {
            (Request::Op(Op::Get { .. }), Verdict::Deliver, _) => true,
            (Request::Op(Op::Get { .. }), Verdict::NodeError, Some((Reply::Error(e), _))) => {
                !matches!(Error::from(e.clone()), Error::Closed { .. } | Error::Unreachable { .. })
            }
            _ => false,
        };
        if served {
            conn.served_at = conn.served_at.max(Some(pending.first_sent));
        }
        if verdict == Verdict::Released {
            conn.released_unsent.push(pending.call.seq);
        }
        let (session, secret, opened) = (conn.id.clone(), conn.secret.unwrap_or_default(), conn.secret.is_some());
        let node = conn.node;
        if let (Verdict::Deliver, Some((Reply::Opened(secret), _))) = (verdict, &decoded) {
            conn.secret = Some(*secret);
            conn.incarnation = served_by;
            // Its hello said which participant the node has now.
            conn.mesh = self.nodes[node].as_ref().and_then(|n| n.declared);
        }
        let idle_until = self.now + self.think(client);
        self.procs[client].idle_until = idle_until;
        let life = self.procs[client].life;
        self.at(idle_until, Event::Wake { client, life });
        let outcome = match (verdict, decoded) {
            (Verdict::Deliver, Some((Reply::Opened(_), _))) => {
                let client = &self.clients[client];
                if client.far() && client.conn.as_ref().is_some_and(|c| c.mesh.is_none()) {
                    // Its node has no participant to move its task to right now: it starts over.
                    self.end_session(client.index);
                }
                return Ok(());
            }
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
        let effect = self.clients[client].take(pending.side, pending.purpose, outcome)?;
        match effect {
            Effect::None => match (pending.purpose, self.clients[client].role) {
                (Purpose::Put(_), Role::QueueProducer) => {
                    self.oracle.acknowledged(served_by, Bytes::from(pending.payload));
                }
                (Purpose::TakeOver, _) => self.counts.shadows += 1,
                _ => {}
            },
            Effect::Delivered { seq, ts, payload } => {
                let through = match pending.request {
                    Request::Op(Op::QueueGet { connection, .. } | Op::Get { connection, .. }) => connection,
                    _ => unreachable!("only gets deliver items"),
                };
                let delivery = Delivery {
                    session: &session,
                    secret,
                    incarnation: served_by,
                    connection: through,
                    seq,
                    ts,
                    payload: &payload,
                };
                self.oracle.delivered(self.nodes[node].as_ref(), delivery)?;
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
        for side in [Side::Containers, Side::Home] {
            if let Some(conn) = self.clients[client].conn_mut(side) {
                conn.closed = true;
            }
        }
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

    /// The client ends its sessions: it says so to their nodes (if the messages get there) and
    /// withdraws their tokens; its next call opens a new session.
    pub(super) fn end_session(&mut self, client: usize) {
        let sessions = [self.clients[client].conn.take(), self.clients[client].home_conn.take()];
        for mut conn in sessions.into_iter().flatten() {
            conn.ended = true;
            self.counts.sessions_ended += 1;
            let (life, delay, node) = (self.procs[client].life, self.delay(), conn.node);
            if let Some(secret) = conn.secret.filter(|_| !self.lost(client, 20)) {
                let message = encode(&RequestHeader::new(conn.id.clone(), secret, Request::Close));
                self.at(self.now + delay, Event::ToNode { node, client, life, try_id: 0, message });
            }
            self.withdraw(&conn.id, client);
        }
        self.clients[client].reset();
    }
}
