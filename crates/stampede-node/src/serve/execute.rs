//! One operation of an open session: the node's own operations (moves and takeovers of tasks
//! between nodes, GC-handler subscriptions: they need the fabric) run here; every other runs on
//! the node's engine ([`stampede_engine::Runtime::execute`]), which resolves the session's handles
//! and checks its rights and bounds. The outcome's items become headers, their payloads appended
//! after the reply's header uncopied. A wait lasts at most the node's slice.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::{Error, Item, Op, Outcome, Result};
use stampede_engine::{Admission, Body, MeshLink, Runtime};
use stampede_wire::{ItemHeader, Reply, WireOutcome, REMOTE_WAIT_SLICE};

use super::Served;
use crate::desk::Desk;
use crate::node::NodeShared;
use crate::reclaim;
use crate::session::{Move, Session};

/// Runs one operation of an open session.
pub(super) async fn execute(node: &Arc<NodeShared>, session: &Session, op: Op, body: Body<'_>) -> Result<Served> {
    let name = op.name();
    let outcome = match op {
        Op::MoveTask { task, to_node, to } => {
            let link = shares_ts_min(node, name)?;
            if to_node == node.options.name || crate::mesh::peer_id(&to_node) != to.id {
                let reason = format!("{to_node:?} is not another node's name, or {to:?} is not its participant");
                return Err(Error::InvalidArgument { op: name, name: node.options.name.clone(), reason });
            }
            // The moves taken over or declined since are forgotten. The session's table is read
            // first: the mesh is read under the progress lock, never inside the session's.
            let recorded = session.move_ids();
            let resolved: HashSet<_> =
                link.read(|mesh| recorded.into_iter().filter(|&(to, id)| !mesh.is_move_open(to, id)).collect());
            let (from, id, visibility) = link.move_task(&session.handles.task(name, task)?, to)?;
            let proof = crate::access::new_secret().map_err(|reason| Error::Unreachable {
                op: name,
                name: node.options.name.clone(),
                reason,
            })?;
            let taken = Move { task, to_node, to, id, proof };
            if let Err(e) = session.add_move(name, taken.clone(), &resolved) {
                decline(node, vec![taken]).await;
                return Err(e);
            }
            WireOutcome::Moved { from, id, visibility, proof }
        }
        Op::TakeOverTask { from_node, from, id, to, virtual_time, proof } => {
            let link = shares_ts_min(node, name)?;
            // Only the client that moved the task may take the move over: its home node says
            // whether the proof is the one it handed out. Refused, nothing is declined (the move
            // stays its owner's). The question and the wait for the carry below share one bound.
            let deadline = tokio::time::Instant::now() + TAKEOVER_WAIT;
            let asking = deadline.saturating_duration_since(tokio::time::Instant::now());
            let owned = crate::mesh::peer_id(&from_node) == from.id
                && crate::mesh::owned_there((&node.zenoh, &node.seal), &from_node, from, (to, id, proof), asking).await;
            if !owned {
                let reason = format!(
                    "node {from_node:?} made no move #{id} to this node for this client (a takeover presents the proof \
                     its move returned)"
                );
                return Err(Error::PermissionDenied {
                    op: name,
                    name: node.options.name.clone(),
                    right: "own",
                    reason,
                });
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
            decline(node, moves).await;
            WireOutcome::Done
        }
        Op::OnReclaim { container } => {
            if session.restricted() {
                // Reclaimed items travel on a key any client of the fabric could subscribe to.
                let reason = "GC handlers of remote clients are not offered on a node with an access policy \
                              (docs/SECURITY.md)"
                    .into();
                let node_name = node.options.name.clone();
                return Err(Error::PermissionDenied { op: name, name: node_name, right: "read", reason });
            }
            reclaim::subscribe(node, session, container)?;
            WireOutcome::Done
        }
        _ => {
            let listed = match &op {
                Op::Names { prefix } | Op::Listing { prefix } => Some(prefix.clone()),
                _ => None,
            };
            let (mut outcome, payloads) = on_engine(&node.runtime, &node.desk, session, op, body).await?;
            if let Some(prefix) = listed {
                outcome = with_other_nodes(node, session, &prefix, outcome).await;
            }
            return Ok((Reply::Outcome(outcome), payloads));
        }
    };
    Ok((Reply::Outcome(outcome), Vec::new()))
}

/// The names of every node of the mesh (those the session's user may see: any right on a name
/// shows it, as on its own node) beside this node's: the name service is the mesh's
/// (docs/NODES.md, "The name service").
/// Any other outcome as it is.
async fn with_other_nodes<I>(node: &NodeShared, session: &Session, prefix: &str, outcome: Outcome<I>) -> Outcome<I> {
    let me = &node.options.name;
    let others = crate::names::on_other_nodes((&node.zenoh, &node.seal), me, prefix)
        .await
        .into_iter()
        .filter(|l| session.sees(&l.name));
    match outcome {
        Outcome::Names(mut names) => {
            names.extend(others.map(|l| l.name));
            names.sort();
            names.dedup();
            Outcome::Names(names)
        }
        Outcome::Listing(mut listing) => {
            for here in &mut listing {
                here.node = Some(me.clone());
            }
            listing.extend(others);
            listing.sort_by(|a, b| (&a.name, &a.node).cmp(&(&b.name, &b.node)));
            Outcome::Listing(listing)
        }
        other => other,
    }
}

/// Runs `op`, one the engine runs (any but the node's own), in `session` on `runtime`: its waits
/// at most the node's slice, its items' payloads after the reply's header (pushed onto the
/// payloads, uncopied), a graph with the client session that owns each task (`desk`'s) and the
/// node's name.
pub(crate) async fn on_engine(
    runtime: &Runtime,
    desk: &Desk,
    session: &Session,
    mut op: Op,
    body: Body<'_>,
) -> Result<(WireOutcome, Vec<Bytes>)> {
    op.clamp_waits(REMOTE_WAIT_SLICE.as_micros() as u64);
    let outcome = runtime.execute(&session.handles, session, op, body).await?;
    let mut payloads = Vec::new();
    let outcome = outcome.map_items(|item| Ok::<_, Error>(header(item, &mut payloads)))?;
    let WireOutcome::Graph(mut graph) = outcome else { return Ok((outcome, payloads)) };
    graph.node = Some(desk.node().to_owned());
    let sessions = desk.sessions();
    for task in &mut graph.tasks {
        task.session = sessions.iter().find(|s| s.handles.owns_task(task.id)).map(|s| s.id.clone());
    }
    Ok((WireOutcome::Graph(graph), payloads))
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

/// Declines on their nodes the `moves` still open (their takeover never came). Asks the other
/// nodes and waits for them: not on a worker that answers other clients.
async fn decline(node: &Arc<NodeShared>, moves: Vec<Move>) {
    let Some(link) = node.mesh.get().filter(|_| !moves.is_empty()).cloned() else { return };
    let declining = node.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for taken in &moves {
            crate::mesh::decline_there((&declining.zenoh, &declining.seal), &link, taken);
        }
    })
    .await;
}

/// The node's mesh participant (set before the node serves anyone; `Unreachable` otherwise).
fn shares_ts_min<'a>(node: &'a NodeShared, op: &'static str) -> Result<&'a MeshLink> {
    node.mesh.get().ok_or_else(|| Error::Unreachable {
        op,
        name: node.options.name.clone(),
        reason: "this node has not joined its mesh yet; try again".into(),
    })
}
