//! What a simulated node asks of the others about moves (`serve::moves::Neighbours`, zenoh's
//! queries on a real node): whether a move's home node made it for the client taking it over,
//! and the declines of moves never taken over. A question goes under the key of the participant
//! it names, as a query on the node's fabric: answered by that node's own code (`Desk::owns_move`,
//! `MeshLink::decline_to`) if it is up, still that incarnation and its link not cut; else it goes
//! unanswered (a no). Answer and question each take a message's delay.
//!
//! Checked when a node asks for a decline: the move is one the declining session made (a task of
//! it closed, or it ended) — a decline from another session would take a live client's move.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stampede_core::mesh::MoveId;
use stampede_core::{MoveProof, Peer};
use stampede_engine::MeshLink;
use tokio::sync::oneshot;

use super::world::{Event, World};
use crate::serve::moves::Neighbours;
use crate::session::Move;

/// A question of one node to another.
#[derive(Debug)]
pub(super) struct Ask {
    /// The node asked, and the participant (life) of it the question is addressed to.
    pub(super) to_node: String,
    pub(super) incarnation: u64,
    pub(super) question: Question,
    pub(super) answer: oneshot::Sender<bool>,
}

#[derive(Debug)]
pub(super) enum Question {
    /// Did you make the move `(to, id)` for the client presenting `proof`?
    Owns { to: Peer, id: MoveId, proof: MoveProof },
    /// Decline `from`'s move `id` to you (asked as session `session` closed a task or ended).
    Decline { from: Peer, to: Peer, id: MoveId, session: String },
}

/// The questions a node's code asks, for the world to carry.
pub(super) type Asks = Arc<Mutex<Vec<Ask>>>;

/// A node's [`Neighbours`] while it serves session `session`.
pub(super) struct SimNeighbours {
    pub(super) asks: Asks,
    pub(super) session: String,
}

impl SimNeighbours {
    /// Asks `taken`'s node to decline it, if it is still open: the answer, when it comes.
    pub(super) fn decline(&self, link: &MeshLink, taken: &Move) -> Option<oneshot::Receiver<bool>> {
        if !link.is_move_open(taken.to, taken.id) {
            return None;
        }
        let question =
            Question::Decline { from: link.peer(), to: taken.to, id: taken.id, session: self.session.clone() };
        Some(self.ask(&taken.to_node, taken.to.incarnation, question))
    }

    fn ask(&self, to_node: &str, incarnation: u64, question: Question) -> oneshot::Receiver<bool> {
        let (answer, answered) = oneshot::channel();
        self.asks.lock().push(Ask { to_node: to_node.to_owned(), incarnation, question, answer });
        answered
    }
}

/// An answer, or `false` when none comes within `timeout`.
async fn answered(answer: oneshot::Receiver<bool>, timeout: Duration) -> bool {
    matches!(tokio::time::timeout(timeout, answer).await, Ok(Ok(true)))
}

impl Neighbours for SimNeighbours {
    async fn owned_there(
        &self,
        from_node: &str,
        from: Peer,
        (to, id, proof): (Peer, MoveId, MoveProof),
        timeout: Duration,
    ) -> bool {
        answered(self.ask(from_node, from.incarnation, Question::Owns { to, id, proof }), timeout).await
    }

    async fn decline_there(&self, link: &MeshLink, moves: Vec<Move>) {
        for taken in &moves {
            if let Some(answer) = self.decline(link, taken) {
                answered(answer, crate::mesh::DECLINE_WAIT).await;
            }
        }
    }
}

impl World {
    /// The questions the nodes asked since the last look, sent on their way.
    pub(super) fn carry_asks(&mut self) -> Result<(), String> {
        for from in 0..self.nodes.len() {
            let Some(node) = self.nodes[from].as_ref() else { continue };
            let (asks, incarnation) = (std::mem::take(&mut *node.asks.lock()), node.incarnation);
            for ask in asks {
                if let Question::Decline { from: mover, to, id, session } = &ask.question {
                    self.counts.declines += 1;
                    self.oracle.declined((*mover, *to, *id), session)?;
                }
                let due = self.now + self.delay();
                self.at(due, Event::Ask { from, incarnation, ask });
            }
        }
        Ok(())
    }

    /// `ask` of node `from` (incarnation `incarnation`) reaches the node it names: answered, the
    /// answer on its way back; or lost with its answer.
    pub(super) fn reach(&mut self, from: usize, incarnation: u32, ask: Ask) {
        let Some(to) = super::node::node_index(&ask.to_node).filter(|&to| to < self.nodes.len()) else { return };
        let Some(node) = self.nodes[to].as_ref().filter(|_| !self.is_cut(from, to)) else { return };
        let Some(addressed) = node.declared.filter(|p| p.incarnation == ask.incarnation) else { return };
        let yes = match &ask.question {
            Question::Owns { to, id, proof } => node.desk.owns_move(*to, *id, proof),
            Question::Decline { from: mover, id, .. } => node.steward.link().decline_to(addressed, *mover, *id),
        };
        let due = self.now + self.delay();
        self.at(due, Event::Answer { node: from, incarnation, via: to, yes, answer: ask.answer });
    }

    /// The answer `yes` reaches node `node` (incarnation `incarnation`) from node `via`, unless
    /// it died since or their link is cut.
    pub(super) fn answered(
        &mut self,
        node: usize,
        incarnation: u32,
        via: usize,
        yes: bool,
        answer: oneshot::Sender<bool>,
    ) {
        let alive = self.nodes[node].as_ref().is_some_and(|n| n.incarnation == incarnation);
        if alive && !self.is_cut(node, via) {
            // Its asker may have stopped waiting.
            let _ = answer.send(yes);
        }
    }
}
