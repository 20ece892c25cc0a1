//! One operation of an open session, on the node: those that need the node's fabric for
//! themselves run here (a GC handler's subscription; the names of the mesh's other nodes added
//! to a listing), every other in `moves.rs`, whose questions to other nodes zenoh carries
//! ([`Fabric`]).

use std::sync::Arc;
use std::time::Duration;

use stampede_core::mesh::MoveId;
use stampede_core::{Error, MoveProof, Op, Outcome, Peer, Result};
use stampede_engine::{Admission, Body, MeshLink};
use stampede_wire::{Reply, WireOutcome};

use super::moves::{self, Here, Neighbours};
use super::Served;
use crate::node::NodeShared;
use crate::reclaim;
use crate::session::{Move, Session};

/// The node as the operations see it, now.
pub(super) fn here(node: &NodeShared) -> Here<'_> {
    Here {
        name: &node.options.name,
        runtime: &node.runtime,
        desk: &node.desk,
        mesh: node.mesh.get(),
        now_us: node.origin.elapsed().as_micros() as u64,
    }
}

/// Runs one operation of an open session.
pub(super) async fn execute(node: &Arc<NodeShared>, session: &Session, op: Op, body: Body<'_>) -> Result<Served> {
    let name = op.name();
    match op {
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
            Ok((Reply::Outcome(WireOutcome::Done), Vec::new()))
        }
        op => {
            let listed = match &op {
                Op::Names { prefix } | Op::Listing { prefix } => Some(prefix.clone()),
                _ => None,
            };
            let here = here(node);
            let put = crate::push::put_of(&op);
            let (reply, payloads) = moves::execute(&here, &Fabric(node), session, op, body).await?;
            if let (Some((connection, ts)), Reply::Outcome(WireOutcome::Done)) = (put, &reply) {
                crate::push::pushed(node, session, connection, ts);
            }
            match (reply, listed) {
                (Reply::Outcome(outcome), Some(prefix)) => {
                    Ok((Reply::Outcome(with_other_nodes(node, session, &prefix, outcome).await), payloads))
                }
                (reply, _) => Ok((reply, payloads)),
            }
        }
    }
}

/// The node's questions to the other nodes of its mesh, carried by zenoh.
struct Fabric<'a>(&'a Arc<NodeShared>);

impl Neighbours for Fabric<'_> {
    async fn owned_there(
        &self,
        from_node: &str,
        from: Peer,
        asked: (Peer, MoveId, MoveProof),
        timeout: Duration,
    ) -> bool {
        crate::mesh::owned_there((&self.0.zenoh, &self.0.seal), from_node, from, asked, timeout).await
    }

    async fn decline_there(&self, link: &MeshLink, moves: Vec<Move>) {
        // It waits for the other nodes' answers: not on a worker that answers other clients.
        let (declining, link) = (self.0.clone(), link.clone());
        let _ = tokio::task::spawn_blocking(move || {
            for taken in &moves {
                crate::mesh::decline_there((&declining.zenoh, &declining.seal), &link, taken);
            }
        })
        .await;
    }
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
