//! What the semantics allow, checked against the node's real state when an item reaches an
//! application, and at the end: an item reaches a caller only while the session it was served
//! for lives on the node; a channel item only while the node still stores it; a queue item is
//! held by at most one live connection (a far client's shadow task, and its connections, close
//! when its home node is declared dead, while its session lives: what it held goes back), is
//! never delivered again once consumed, and is at the end
//! either consumed or still in the queue. A node declines a move only for the session that made
//! it (`asks.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use stampede_core::mesh::MoveId;
use stampede_core::{Handle, Op, Outcome, Peer};
use stampede_core::{Timestamp, INFINITY};
use stampede_engine::{Container, Runtime};
use stampede_wire::{Reply, Secret};

use super::client::{CHANNEL, QUEUE};
use super::node::{reply_of, SimNode};
use crate::release::Given;
use stampede_engine::session::Connection;

/// Where an item reached its application: the session and node incarnation that served it.
pub(super) struct Delivery<'a> {
    pub(super) session: &'a str,
    pub(super) secret: Secret,
    pub(super) incarnation: u32,
    /// The connection its get went through.
    pub(super) connection: Handle,
    /// A queue item's number; `None` for a channel item.
    pub(super) seq: Option<u64>,
    pub(super) ts: Timestamp,
    pub(super) payload: &'a Bytes,
}

#[derive(Default)]
struct QueueItem {
    /// The session and connection it was last delivered in.
    holder: Option<(String, Handle)>,
    consumed: bool,
}

#[derive(Default)]
pub(super) struct Oracle {
    /// Queue items delivered, by node incarnation and payload (unique: producer and timestamp).
    queue: HashMap<(u32, Bytes), QueueItem>,
    /// Queue puts the node acknowledged, by incarnation and payload.
    acknowledged: BTreeSet<(u32, Bytes)>,
    /// The payload of each queue item a get took on the node and the session it took it for, by
    /// incarnation and item number.
    taken: BTreeMap<(u32, u64), (Bytes, String, Handle)>,
    /// The queue item each payload was stored as, by incarnation.
    item_of: BTreeMap<(u32, Bytes), u64>,
    /// The session that made each move (from, to, id) of a task.
    moves: BTreeMap<(Peer, Peer, MoveId), String>,
    pub(super) delivered: u64,
    /// What each push event's notice was sent beside (`notices.rs`).
    pub(super) notices: super::notices::Notices,
    /// Replies of a node incarnation that died before they were read.
    pub(super) from_dead_nodes: u64,
    /// Queue items delivered again after their first getter's session ended.
    pub(super) given_back: u64,
}

impl Oracle {
    /// `delivery` reached an application, `node` being the node now (`None`: down).
    pub(super) fn delivered(&mut self, node: Option<&SimNode>, delivery: Delivery<'_>) -> Result<(), String> {
        self.delivered += 1;
        let Delivery { session, secret, incarnation, connection, seq, ts, payload } = delivery;
        let put_at = std::str::from_utf8(payload).ok().and_then(|p| p.split_once(':')).map(|(_, ts)| ts.parse());
        if put_at != Some(Ok(ts)) {
            return Err(format!("an item at {ts} carries {payload:?}, not its producer's payload"));
        }
        let Some(node) = node.filter(|node| node.incarnation == incarnation) else {
            // Its node died since: what it held went with it.
            self.from_dead_nodes += 1;
            return Ok(());
        };
        if node.desk.proven(session, &secret).is_none() {
            return Err(format!("session {session} received the item at {ts} after the node ended the session"));
        }
        let Some(seq) = seq else {
            let stored = channel_timestamps(&node.runtime).contains(&ts);
            return match stored {
                true => Ok(()),
                false => Err(format!("session {session} received the item at {ts}, which the node reclaimed")),
            };
        };
        let item = self.queue.entry((incarnation, payload.clone())).or_default();
        if item.consumed {
            return Err(format!("session {session} received queue item #{seq}, consumed already"));
        }
        if let Some((holder, through)) = &item.holder {
            let open = |s: &crate::session::Session| !s.ended() && s.handles.connection("get", *through).is_ok();
            if node.desk.get(holder).is_some_and(|s| open(&s)) {
                return Err(format!("queue item #{seq} reached session {session} while session {holder} holds it"));
            }
            self.given_back += 1;
        }
        item.holder = Some((session.to_owned(), connection));
        Ok(())
    }

    /// A client's prefetch cache answered a get with `delivery` (no request went to `node`, the
    /// node now): on a live node the item is still unseen on the connection there — the node has
    /// not given it to this connection yet, nor let it go (docs/PREFETCH.md). `delivered` checks
    /// the rest, as for any item.
    ///
    /// An item a get of the session opened is unseen as far as its client knows while the client
    /// released that get (`released`) and the node has not heard so yet: the release, which
    /// every later header carries before its cache answers, makes it unseen there first.
    pub(super) fn cached(
        &self,
        node: Option<&SimNode>,
        delivery: &Delivery<'_>,
        released: &[u64],
    ) -> Result<(), String> {
        let Some(node) = node.filter(|node| node.incarnation == delivery.incarnation) else { return Ok(()) };
        let Some(session) = node.desk.get(delivery.session) else { return Ok(()) };
        let unseen = session.readers.input(delivery.connection).and_then(|input| input.pushable(delivery.ts));
        let opened_by_released = || {
            let replies = session.replies.lock();
            released
                .iter()
                .filter_map(|&seq| replies.answer(seq)?.1.clone())
                .any(|given| given == Given::Channel { connection: delivery.connection, ts: vec![delivery.ts] })
        };
        match unseen {
            Some((_, Some(_))) => Ok(()),
            _ if opened_by_released() => Ok(()),
            _ => Err(format!(
                "a cache of session {} answered the item at {}, which is not unseen on its connection on the node",
                delivery.session, delivery.ts
            )),
        }
    }

    /// Node `incarnation` served `op` with `reply` (whether or not its client reads it): what a
    /// queue get took, and what a queue consume consumed.
    /// `Err` if a get took a second item of one put (its payload is unique).
    pub(super) fn served(&mut self, incarnation: u32, session: &str, op: &Op, reply: &[u8]) -> Result<(), String> {
        let Ok((Reply::Outcome(outcome), payload)) = reply_of(reply) else { return Ok(()) };
        match (op, outcome) {
            (Op::QueueGet { connection, .. }, Outcome::QueueItem { seq, .. }) => {
                let first = *self.item_of.entry((incarnation, payload.clone())).or_insert(seq);
                if first != seq {
                    return Err(format!("one put of {payload:?} was stored twice: queue items #{first} and #{seq}"));
                }
                self.taken.insert((incarnation, seq), (payload, session.to_owned(), *connection));
            }
            (Op::MoveTask { to, .. }, Outcome::Moved { from, id, .. }) => {
                self.moves.insert((from, *to, id), session.to_owned());
            }
            (Op::QueueConsume { seq: Some(seq), .. }, Outcome::Done) => {
                if let Some((payload, ..)) = self.taken.get(&(incarnation, *seq)) {
                    self.queue.entry((incarnation, payload.clone())).or_default().consumed = true;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Session `session` ended, or closed a task, and its node asks for the decline of `taken`:
    /// `Err` unless the session made it.
    pub(super) fn declined(&self, taken: (Peer, Peer, MoveId), session: &str) -> Result<(), String> {
        match self.moves.get(&taken) {
            Some(made) if made != session => {
                Err(format!("the end of session {session} declined move {taken:?}, which session {made} made"))
            }
            _ => Ok(()),
        }
    }

    /// The node `incarnation` acknowledged the queue put of `payload`.
    pub(super) fn acknowledged(&mut self, incarnation: u32, payload: Bytes) {
        self.acknowledged.insert((incarnation, payload));
    }

    /// With no call under way: every queue item a live session took on the node, did not consume
    /// and still holds open there (not given back) is the one its application holds (`holds`: what the application of a session
    /// holds, by session id), or one a get took that the client released and has sent no header
    /// since (`unsent`: those gets' numbers, by session id; the next header gives it back). An
    /// item no application knows of would be held for as long as the session lives.
    pub(super) fn known_holdings(
        &self,
        node: &SimNode,
        holds: &HashMap<String, u64>,
        unsent: &HashMap<String, Vec<u64>>,
    ) -> Result<(), String> {
        let released = |session: &crate::session::Session, item: u64| {
            let replies = session.replies.lock();
            let gets = unsent.get(&session.id).map_or(&[][..], Vec::as_slice);
            gets.iter()
                .filter_map(|&get| replies.answer(get)?.1.clone())
                .any(|given| matches!(given, Given::Queue { seq, .. } if seq == item))
        };
        for ((incarnation, seq), (payload, session, connection)) in &self.taken {
            let consumed = self.queue.get(&(*incarnation, payload.clone())).is_some_and(|item| item.consumed);
            let live = node.desk.get(session).filter(|s| !s.ended());
            // Still open on its connection there (not given back since, nor detached).
            let held = live.as_ref().is_some_and(|s| {
                matches!(s.handles.connection("oracle", *connection), Ok(Connection::QueueInput(input)) if input.holds(*seq))
            });
            let known = holds.get(session) == Some(seq) || live.as_ref().is_some_and(|s| released(s, *seq));
            if *incarnation == node.incarnation && held && !consumed && !known {
                return Err(format!("session {session} holds queue item #{seq} its application never received"));
            }
        }
        Ok(())
    }

    /// At the end, every session closed: the queue holds exactly the items put and not consumed
    /// (those whose put's reply was lost may be there or not), none held; once drained, with no
    /// task left, nothing holds ts_min.
    pub(super) fn at_end(&self, node: &SimNode) -> Result<(), String> {
        if node.desk.len() != 0 {
            return Err(format!("{} sessions still open after every client closed", node.desk.len()));
        }
        let incarnation = node.incarnation;
        let drained = drain_queue(&node.runtime)?;
        for payload in &drained {
            if self.queue.get(&(incarnation, payload.clone())).is_some_and(|item| item.consumed) {
                return Err(format!("queue item {payload:?} is still there after it was consumed"));
            }
        }
        let drained: HashSet<&Bytes> = drained.iter().collect();
        for (at, payload) in &self.acknowledged {
            let consumed = self.queue.get(&(*at, payload.clone())).is_some_and(|item| item.consumed);
            if *at == incarnation && !consumed && !drained.contains(payload) {
                return Err(format!("queue item {payload:?}, put and never consumed, is gone"));
            }
        }
        let stats = node.runtime.stats();
        if stats.claims != 0 {
            return Err(format!("with no task left the node still holds claims: {stats:?}"));
        }
        Ok(())
    }
}

/// The timestamps the node's channel stores now (none if it was never created).
pub(super) fn channel_timestamps(runtime: &Runtime) -> Vec<Timestamp> {
    match runtime.lookup(CHANNEL) {
        Ok(Container::Channel(channel)) => channel.timestamps(),
        _ => Vec::new(),
    }
}

/// Takes every item left in the queue with a task of the oracle's own, consuming each; their
/// payloads. Fails if an item is held open by someone.
fn drain_queue(runtime: &Runtime) -> Result<Vec<Bytes>, String> {
    let Ok(Container::Queue(queue)) = runtime.lookup(QUEUE) else { return Ok(Vec::new()) };
    let task = runtime.task(INFINITY).map_err(|e| e.to_string())?;
    let input = queue.attach_input(&task).map_err(|e| e.to_string())?;
    let mut drained = Vec::new();
    while let Ok(item) = input.get(Some(std::time::Duration::ZERO)) {
        drained.push(item.item.payload.data.clone());
        input.consume(&item).map_err(|e| e.to_string())?;
    }
    let left = queue.stats().live_items;
    if left != 0 {
        return Err(format!("{left} queue items are held open with every session closed"));
    }
    drop(input);
    task.close();
    Ok(drained)
}
