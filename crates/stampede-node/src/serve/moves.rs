//! One operation of an open session, but those that need the node's fabric for themselves (GC
//! handlers' subscriptions, the mesh's names): the moves of tasks between nodes — `MoveTask` on
//! a task's home node, `TakeOverTask` on the node it moves to, the declines of moves never taken
//! over (`CloseTask`) — and every operation of the engine ([`stampede_engine::Runtime::execute`],
//! which resolves the session's handles and checks its rights and bounds). What a move asks of
//! other nodes goes through [`Neighbours`]: zenoh's queries on a node (`execute.rs`), the world's
//! messages in the whole-path simulation (`sim/`), so both run this same code.
//!
//! Guarantees: a takeover is granted only to the client its move's home node says made it (with
//! the proof the move returned), and starts at or above the move's carry in this node's view; a
//! move whose recording fails, and the open moves of a closed task, are declined on their nodes.
//! The outcome's items become headers, their payloads appended after the reply's header
//! uncopied; a wait lasts at most the node's slice.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::mesh::MoveId;
use stampede_core::tape::Access;
use stampede_core::{Error, ErrorKind, Handle, Item, MoveProof, Op, Outcome, Peer, Result, Selector, Timestamp};
use stampede_engine::{Body, MeshLink, Runtime};
use stampede_wire::session::Mutation;
use stampede_wire::{Consumed, ItemHeader, Reply, WireOutcome, REMOTE_WAIT_SLICE};

use super::Served;
use crate::desk::Desk;
use crate::session::{Move, Session};

/// What serving asks of the other nodes of the mesh.
pub(crate) trait Neighbours {
    /// Whether node `from_node` (participant `from`) made the move `(to, id)` for the client
    /// presenting its proof: `false` when it says no, or does not answer within `timeout`.
    fn owned_there(
        &self,
        from_node: &str,
        from: Peer,
        asked: (Peer, MoveId, MoveProof),
        timeout: Duration,
    ) -> impl Future<Output = bool> + Send;

    /// Declines on their nodes the `moves` of this node (over `link`) still open — their
    /// takeover never came — and waits for the answers (each within a bound).
    fn decline_there(&self, link: &MeshLink, moves: Vec<Move>) -> impl Future<Output = ()> + Send;
}

/// The node that serves: its name, its engine, its sessions, its participant in the mesh's
/// ts_min (`None` until it joined), and its time now (µs on its own clock: the tapes').
pub(crate) struct Here<'a> {
    pub(crate) name: &'a str,
    pub(crate) runtime: &'a Runtime,
    pub(crate) desk: &'a Desk,
    pub(crate) mesh: Option<&'a MeshLink>,
    pub(crate) now_us: u64,
}

/// Runs `op` in `session` on the node `here`, asking `neighbours` what a move needs to know.
pub(crate) async fn execute<N: Neighbours>(
    here: &Here<'_>,
    neighbours: &N,
    session: &Session,
    op: Op,
    body: Body<'_>,
) -> Result<Served> {
    let name = op.name();
    session.refuse_closing(&op)?;
    let outcome = match op {
        Op::MoveTask { task, to_node, to } => {
            let link = shares_ts_min(here, name)?;
            if to_node == here.name || crate::mesh::peer_id(&to_node) != to.id {
                let reason = format!("{to_node:?} is not another node's name, or {to:?} is not its participant");
                return Err(Error::InvalidArgument { op: name, name: here.name.to_owned(), reason });
            }
            // The moves taken over or declined since are forgotten. The session's table is read
            // first: the mesh is read under the progress lock, never inside the session's.
            let recorded = session.move_ids();
            let resolved: HashSet<_> =
                link.read(|mesh| recorded.into_iter().filter(|&(to, id)| !mesh.is_move_open(to, id)).collect());
            let (from, id, visibility) = link.move_task(&session.handles.task(name, task)?, to)?;
            let proof = crate::access::new_secret().map_err(|reason| Error::Unreachable {
                op: name,
                name: here.name.to_owned(),
                reason,
            })?;
            let taken = Move { task, to_node, to, id, proof };
            if let Err(e) = session.add_move(name, taken.clone(), &resolved) {
                neighbours.decline_there(link, vec![taken]).await;
                return Err(e);
            }
            WireOutcome::Moved { from, id, visibility, proof }
        }
        Op::TakeOverTask { from_node, from, id, to, virtual_time, proof } => {
            let link = shares_ts_min(here, name)?;
            // Only the client that moved the task may take the move over: its home node says
            // whether the proof is the one it handed out. Refused, nothing is declined (the move
            // stays its owner's). The question and the wait for the carry below share one bound.
            let deadline = tokio::time::Instant::now() + TAKEOVER_WAIT;
            let asking = deadline.saturating_duration_since(tokio::time::Instant::now());
            let owned = crate::mesh::peer_id(&from_node) == from.id
                && neighbours.owned_there(&from_node, from, (to, id, proof), asking).await;
            if !owned {
                let reason = format!(
                    "node {from_node:?} made no move #{id} to this node for this client (a takeover presents the proof \
                     its move returned)"
                );
                return Err(Error::PermissionDenied { op: name, name: here.name.to_owned(), right: "own", reason });
            }
            // The move's carry reaches this node's view with its mover's next batch: the shadow
            // starts at or above it, whatever the client says.
            // So does every member's snapshot (the takeover waits for a complete view).
            let arrived = || link.carried(from, id).is_some() && link.read(|mesh| mesh.is_complete());
            while !arrived() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(TAKEOVER_POLL).await;
            }
            let task = link.take_over_task(from, id, to, virtual_time)?;
            WireOutcome::Handle(session.add_shadow(name, task, from)?)
        }
        Op::CloseTask { task } => {
            let moves = session.close_task(name, task)?;
            if let Some(link) = here.mesh.filter(|_| !moves.is_empty()) {
                neighbours.decline_there(link, moves).await;
            }
            WireOutcome::Done
        }
        op => return on_engine(here, session, op, body).await,
    };
    Ok((Reply::Outcome(outcome), Vec::new()))
}

/// Applies the consumes a request's header carried (`RequestHeader::consumed`) that no request of
/// the session applied yet, in order, before the request runs: each as if it had come on its own,
/// recorded on its connection's tape. A client carries each deferred consume in every request
/// until a reply confirms it, so several requests under way carry the same numbers: each number
/// is applied once — recorded once on its tape, whose recent reads `push.rs` predicts from — and a
/// request whose consumes another is applying waits for it (the session's
/// `consumes_applied`, held across). What each returns is dropped, as a sent consume's (its call
/// returned long ago; a connection gone meanwhile changes nothing).
pub(crate) async fn consumed(here: &Here<'_>, session: &Session, consumed: &[Consumed]) {
    if consumed.is_empty() || session.replies.lock().mutated(Mutation::IgnoreCarriedConsumes) {
        return;
    }
    let mut applied = session.consumes_applied.lock().await;
    for carried in consumed {
        if carried.number > *applied {
            let _ = on_engine(here, session, carried.op(), Body::Inline(&[])).await;
            *applied = carried.number;
        }
    }
}

/// Runs `op`, one the engine runs (any but the node's own), in `session` on the node's engine:
/// its waits at most the node's slice, its items' payloads after the reply's header (pushed onto
/// the payloads, uncopied), what an input connection asked for on its tape, a graph with the
/// client session that owns each task (the desk's), the tapes of their connections and the
/// node's name.
async fn on_engine(here: &Here<'_>, session: &Session, mut op: Op, body: Body<'_>) -> Result<Served> {
    op.clamp_waits(REMOTE_WAIT_SLICE.as_micros() as u64);
    let reading = Reading::of(&op);
    let prefetch = match op {
        Op::AttachInput { prefetch, .. } => Some(prefetch),
        _ => None,
    };
    let result = here.runtime.execute(&session.handles, session, op, body).await;
    if let (Some(prefetch), Ok(Outcome::Handle(handle))) = (prefetch, &result) {
        session.attached(*handle, prefetch);
    }
    if let Some((connection, access)) = reading.and_then(|(c, reading)| Some((c, reading.access(&result)?))) {
        session.record(connection, access, here.now_us);
    }
    let mut payloads = Vec::new();
    let outcome = result?.map_items(|item| Ok::<_, Error>(header(item, &mut payloads)))?;
    let WireOutcome::Graph(mut graph) = outcome else { return Ok((Reply::Outcome(outcome), payloads)) };
    graph.node = Some(here.desk.node().to_owned());
    let sessions = here.desk.sessions();
    for task in &mut graph.tasks {
        let owner = sessions.iter().find(|s| s.handles.owns_task(task.id));
        task.session = owner.map(|s| s.id.clone());
        for connection in &mut task.connections {
            let kept = owner.and_then(|s| s.tape_of(task.id, connection.id));
            (connection.tape, connection.prefetch) = kept.unzip();
        }
    }
    Ok((Reply::Outcome(WireOutcome::Graph(graph)), payloads))
}

/// What an operation through an input connection reads or consumes, as its tape records it.
#[derive(Clone, Copy)]
enum Reading {
    Get(Selector),
    Range(Timestamp, Timestamp),
    Consume(Timestamp),
}

impl Reading {
    /// The input connection `op` goes through and what it reads; `None` for any other op.
    fn of(op: &Op) -> Option<(Handle, Reading)> {
        Some(match *op {
            Op::Get { connection, selector, .. } => (connection, Reading::Get(selector)),
            Op::QueueGet { connection, .. } => (connection, Reading::Get(Selector::Oldest)),
            Op::GetRange { connection, t0, t1 } => (connection, Reading::Range(t0, t1)),
            Op::Consume { connection, ts }
            | Op::ConsumeUntil { connection, ts }
            | Op::QueueConsume { connection, ts, .. } => (connection, Reading::Consume(ts)),
            _ => return None,
        })
    }

    /// The access the op's `result` made; `None` when it failed (but for a get that found
    /// nothing there, a miss).
    fn access(self, result: &Result<Outcome<Item>>) -> Option<Access> {
        match (self, result) {
            (Reading::Get(selector), Ok(Outcome::Item(item) | Outcome::QueueItem { item, .. })) => {
                Some(Access::Get { selector, got: Some(item.ts) })
            }
            (Reading::Get(selector), Err(e)) if e.kind() == ErrorKind::NotAvailable => {
                Some(Access::Get { selector, got: None })
            }
            (Reading::Range(from, to), Ok(Outcome::Items(items))) => {
                Some(Access::Range { from, to, items: items.len() as u64 })
            }
            (Reading::Consume(until), Ok(_)) => Some(Access::Consume { until }),
            _ => None,
        }
    }
}

/// `item`'s header; its payload pushed onto `payloads`.
fn header(item: Item, payloads: &mut Vec<Bytes>) -> ItemHeader {
    let header = ItemHeader::of(&item);
    payloads.push(item.payload.data);
    header
}

/// Longest a takeover takes before it is refused: asking the move's home node whether the client
/// owns it, then waiting for the move's carry to reach this node's view.
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);
/// Between two looks for it.
const TAKEOVER_POLL: Duration = Duration::from_millis(1);

/// The node's mesh participant (set before the node serves anyone; `Unreachable` otherwise).
fn shares_ts_min<'a>(here: &Here<'a>, op: &'static str) -> Result<&'a MeshLink> {
    here.mesh.ok_or_else(|| Error::Unreachable {
        op,
        name: here.name.to_owned(),
        reason: "this node has not joined its mesh yet; try again".into(),
    })
}
