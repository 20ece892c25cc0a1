//! The mesh between the simulated nodes: each node's participant in the mesh's ts_min is stepped
//! by the node's own steward (`stampede_engine::steward::Steward`, what the node's driver thread
//! carries over zenoh), and this file is its fabric — one ordered stream of messages from each
//! node to each other (delayed at random; one publisher per node keeps them in order), and
//! liveliness: a participant's token shows to the nodes its links reach from its declaration
//! until its process dies or it leaves as an expelled incarnation; a cut link hides it a lease
//! later on both sides, and messages across it are lost.
//!
//! Checked after every event: each node's ts_min (its runtime's, and its participant's view)
//! never goes back; and no node's ts_min passes the visibility of a task on another node whose
//! participant binds it — a live member of its view, its door open and shown, declared dead by
//! nobody while it lived, neither of them an island (begun while a live node was cut off from
//! it) — `docs/PROTOCOL.md`: ts_min is global; a task starts at or above its node's door, which
//! is at or above every participant's ts_min.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use stampede_core::{Mesh, Peer, Timestamp};
use stampede_engine::steward::Action;

use super::node::SimNode;
use super::world::{Event, World};
use super::LEASE_US;

/// Between two looks of each node's driver at its steward (the driver's tick).
const MESH_TICK_US: u64 = 100_000;
/// Rounds of actions carried out after one look (as the driver: the rest waits for the next).
const ACTION_ROUNDS_MAX: usize = 8;

/// The fabric between the nodes, and what the checks remember.
#[derive(Default)]
pub(super) struct Fabric {
    /// Cut links between nodes, as `(lower, higher)` index.
    cut: BTreeSet<(usize, usize)>,
    /// When the last message on each link (from node, to node) is due: none overtakes another.
    last_due: BTreeMap<(usize, usize), u64>,
    /// Participants some node declared dead while they lived (a cut link, a silence): their
    /// claims bind nobody any more, and they learn it when they next speak.
    suspected: BTreeSet<Peer>,
    /// Participants that began while a live node was cut off from them: alone, they open their
    /// door at their own ts_min, unaware of the other's claims, and give way (restart) if they
    /// find them below it when the link heals (docs/PROTOCOL.md, "Doors"). Until then neither
    /// side's claims bind the other.
    islands: BTreeSet<Peer>,
    /// The highest ts_min each node incarnation's runtime, and each participant's view, showed.
    runtime_ts_min: BTreeMap<u32, Timestamp>,
    view_ts_min: BTreeMap<Peer, Timestamp>,
}

/// The index of the node whose participant `peer` is (its id is its name's); past every node's if
/// none.
fn node_of(peer: Peer) -> usize {
    let named = |index: usize| crate::mesh::peer_id(&super::node::node_name(index)) == peer.id;
    (0..super::NODES_MAX as usize).find(|&index| named(index)).unwrap_or(usize::MAX)
}

impl World {
    pub(super) fn is_cut(&self, a: usize, b: usize) -> bool {
        self.mesh.cut.contains(&(a.min(b), a.max(b)))
    }

    /// Node `node`'s participant, if the node is up and it is declared on the fabric.
    fn declared(&self, node: usize) -> Option<Peer> {
        self.nodes[node].as_ref()?.declared
    }

    /// Whether `peer`'s token shows at node `at`: it is its node's declared participant, on a
    /// link that is not cut.
    fn shows(&self, at: usize, peer: Peer) -> bool {
        let node = node_of(peer);
        node != at && node < self.nodes.len() && self.declared(node) == Some(peer) && !self.is_cut(at, node)
    }

    /// The nodes whose fabric reports node `node`'s tokens (up, links not cut).
    fn reached_from(&self, node: usize) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&o| o != node && self.nodes[o].is_some() && !self.is_cut(node, o)).collect()
    }

    /// Tells the nodes `to` that `peer`'s token appeared or went, each after a message's delay.
    fn tell_liveliness(&mut self, to: Vec<usize>, peer: Peer, live: bool) {
        for node in to {
            let due = self.now + self.delay();
            self.at(due, Event::Liveliness { node, peer, live });
        }
    }

    /// Node `node`'s participant declares itself: it learns the participants whose tokens show to
    /// it, and its token shows to them.
    pub(super) fn begin(&mut self, node: usize) {
        let declared: Vec<Peer> =
            (0..self.nodes.len()).filter(|&o| o != node).filter_map(|o| self.declared(o)).collect();
        let live: Vec<Peer> = declared.iter().copied().filter(|&p| self.shows(node, p)).collect();
        let island = live.len() < declared.len();
        let Some(n) = self.nodes[node].as_mut() else { return };
        n.steward.began(&live);
        let peer = n.steward.peer();
        n.declared = Some(peer);
        if island {
            self.mesh.islands.insert(peer);
        }
        let reached = self.reached_from(node);
        self.tell_liveliness(reached, peer, true);
    }

    /// Node `node` starts, a new incarnation, and declares its participant.
    pub(super) fn node_up(&mut self, node: usize) {
        self.incarnations += 1;
        #[allow(unused_mut)] // Mutated only with the `mutations` feature.
        let mut new = SimNode::new(node, self.incarnations, self.now, self.trace);
        #[cfg(feature = "mutations")]
        if let Some(mutation) = self.mutation {
            std::sync::Arc::get_mut(&mut new.desk).expect("a new node's desk is its own").mutate(mutation);
        }
        self.nodes[node] = Some(new);
        self.mutate_participant(node);
        self.begin(node);
    }

    /// Switches the mesh-protocol fault under test on in node `node`'s participant (a new one
    /// after each restart).
    fn mutate_participant(&mut self, node: usize) {
        #[cfg(feature = "mutations")]
        if let (Some(mutation), Some(n)) = (self.mesh_mutation, self.nodes[node].as_ref()) {
            n.steward.link().with(|mesh| mesh.mutate(mutation));
        }
        #[cfg(not(feature = "mutations"))]
        let _ = node;
    }

    /// The nodes of a new world start, and their drivers start ticking.
    pub(super) fn start_mesh(&mut self) {
        for node in 0..self.nodes.len() {
            self.node_up(node);
        }
        self.at(self.now + MESH_TICK_US, Event::MeshTick);
    }

    /// Node `node` dies: its token goes, a lease later at most where it showed.
    pub(super) fn kill_node(&mut self, node: usize) {
        let peer = self.declared(node);
        self.nodes[node] = None;
        if let Some(peer) = peer {
            for other in self.reached_from(node) {
                let due = self.now + self.rng.below(LEASE_US);
                self.at(due, Event::Liveliness { node: other, peer, live: false });
            }
        }
    }

    /// The link between nodes `a` and `b` is cut (`false`: it was already): messages across it
    /// are lost, and each side's fabric drops the other's token within a lease.
    pub(super) fn split(&mut self, a: usize, b: usize) -> bool {
        if !self.mesh.cut.insert((a.min(b), a.max(b))) {
            return false;
        }
        for (at, of) in [(a, b), (b, a)] {
            if let (Some(_), Some(peer)) = (self.nodes[at].as_ref(), self.declared(of)) {
                let due = self.now + LEASE_US / 2 + self.rng.below(LEASE_US / 2);
                self.at(due, Event::Liveliness { node: at, peer, live: false });
            }
        }
        true
    }

    /// The link between nodes `a` and `b` comes back: each side's token shows to the other.
    pub(super) fn mend(&mut self, a: usize, b: usize) {
        self.mesh.cut.remove(&(a.min(b), a.max(b)));
        for (at, of) in [(a, b), (b, a)] {
            if let (Some(_), Some(peer)) = (self.nodes[at].as_ref(), self.declared(of)) {
                self.tell_liveliness(vec![at], peer, true);
            }
        }
    }

    /// `peer` was declared dead at some node: if it lives (its node's declared participant), it
    /// was declared so while it lived.
    fn declared_dead(&mut self, peer: Peer) {
        if node_of(peer) < self.nodes.len() && self.declared(node_of(peer)) == Some(peer) {
            self.mesh.suspected.insert(peer);
        }
    }

    /// Node `node`'s fabric says whether `peer`'s token shows.
    fn report(&mut self, node: usize, peer: Peer, live: bool) {
        let now = self.since_start();
        let Some(n) = self.nodes[node].as_mut() else { return };
        n.steward.reported(peer, live, now);
        if !live {
            self.declared_dead(peer);
        }
    }

    pub(super) fn mesh_event(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Mesh { node, from, to, message } => {
                if self.is_cut(node, node_of(from)) {
                    return Ok(());
                }
                let now = self.since_start();
                let Some(n) = self.nodes[node].as_mut() else { return Ok(()) };
                self.counts.mesh_messages += 1;
                n.steward.message(from, &to, message, now);
            }
            Event::Liveliness { node, peer, live } => {
                if self.nodes[node].as_ref().is_some_and(|n| n.steward.declared()) {
                    self.report(node, peer, live);
                }
            }
            Event::Begin { node } => {
                if self.nodes[node].as_ref().is_some_and(|n| !n.steward.declared()) {
                    self.begin(node);
                }
            }
            Event::MeshTick => self.at(self.now + MESH_TICK_US, Event::MeshTick),
            other => unreachable!("not a mesh event: {other:?}"),
        }
        Ok(())
    }

    fn since_start(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.now)
    }

    /// Every node's driver looks at its steward — its door wanted while a session is open, as
    /// `stampede serve`'s — and carries out what it says; then the checks.
    pub(super) fn look_at_stewards(&mut self) -> Result<(), String> {
        let now = self.since_start();
        for node in 0..self.nodes.len() {
            let Some(n) = self.nodes[node].as_mut().filter(|n| n.steward.declared()) else { continue };
            n.desk.settle(now);
            let wanted = n.desk.len() > 0 || n.embedded;
            n.door = n.steward.look(wanted, now);
            for _ in 0..ACTION_ROUNDS_MAX {
                let Some(n) = self.nodes[node].as_mut() else { break };
                n.steward.flush();
                let actions: Vec<Action> = std::iter::from_fn(|| n.steward.poll_action()).collect();
                if actions.is_empty() {
                    break;
                }
                for action in actions {
                    self.act(node, action);
                }
            }
        }
        self.check_mesh()
    }

    fn act(&mut self, node: usize, action: Action) {
        // What it sends goes under the key its fabric declared: the incarnation that said it,
        // even when it was replaced since (as the driver publishes before it leaves).
        let Some(me) = self.nodes[node].as_ref().and_then(|n| n.declared) else { return };
        match action {
            Action::Send(transmit) => {
                // One publication: each node whose participant it names hears it once.
                let targets: BTreeSet<usize> = transmit.to.iter().map(|&to| node_of(to)).collect();
                for target in targets {
                    if target >= self.nodes.len() || target == node || self.is_cut(node, target) {
                        continue;
                    }
                    let last = self.mesh.last_due.get(&(node, target)).copied().unwrap_or(0);
                    let due = (self.now + self.delay() / 4).max(last);
                    self.mesh.last_due.insert((node, target), due);
                    let (to, message) = (transmit.to.clone(), transmit.message.clone());
                    self.at(due, Event::Mesh { node: target, from: me, to, message });
                }
            }
            Action::AskLiveliness(peer) => self.report(node, peer, self.shows(node, peer)),
            Action::Fenced(peer) => {
                if let Some(n) = &self.nodes[node] {
                    n.desk.close_shadows_of(peer, self.since_start() + Duration::from_micros(LEASE_US));
                }
                self.declared_dead(peer);
            }
            Action::Restarted { old } => {
                self.counts.expulsions += 1;
                let until = self.since_start() + Duration::from_micros(LEASE_US);
                if let Some(n) = self.nodes[node].as_mut() {
                    n.desk.leave_mesh(until);
                    n.door = false;
                    n.declared = None;
                }
                self.mutate_participant(node);
                // It leaves the fabric as `old`, and declares its new participant soon after.
                let reached = self.reached_from(node);
                self.tell_liveliness(reached, old, false);
                let due = self.now + self.delay();
                self.at(due, Event::Begin { node });
            }
            Action::Note(note) => {
                if self.trace {
                    eprintln!("{:>9} µs  mesh {me:?}: {note}", self.now);
                }
            }
        }
    }

    /// The checks of the module doc.
    fn check_mesh(&mut self) -> Result<(), String> {
        let mut views = Vec::new();
        for n in self.nodes.iter().flatten() {
            let runtime = n.runtime.ts_min();
            let seen = self.mesh.runtime_ts_min.entry(n.incarnation).or_insert(runtime);
            if runtime < *seen {
                return Err(format!("node {}'s ts_min went back from {seen} to {runtime}", n.index));
            }
            *seen = runtime;
            let (peer, view) = (n.steward.peer(), n.steward.link().read(Mesh::ts_min));
            let seen = self.mesh.view_ts_min.entry(peer).or_insert(view);
            if view < *seen {
                return Err(format!("{peer:?}'s view of ts_min went back from {seen} to {view}"));
            }
            *seen = view;
            // A restarted participant's runtime keeps what it reclaimed in its expelled life: the
            // view is what the others' claims bind.
            views.push((n.index, peer, view, n.steward.link().read(Mesh::live_peers)));
        }
        for &(at, me, ts_min, ref live) in &views {
            for other in self.nodes.iter().flatten().filter(|o| o.index != at) {
                let peer = other.steward.peer();
                let binds = other.steward.declared()
                    && live.contains(&peer)
                    && !self.mesh.suspected.contains(&peer)
                    && !self.mesh.suspected.contains(&me)
                    && !self.mesh.islands.contains(&peer)
                    && !self.mesh.islands.contains(&me)
                    && !other.steward.link().awaits_floor();
                let Some(door) = other.steward.link().read(Mesh::join_floor).filter(|_| binds) else { continue };
                let lowest = other.desk.sessions().iter().filter_map(|s| s.handles.visibility()).min();
                let Some(lowest) = lowest else { continue };
                self.counts.mesh_checks += 1;
                let bound = lowest.max(door);
                if ts_min > bound {
                    return Err(format!(
                        "node {at} ({me:?}) has ts_min {ts_min} above {bound}, the visibility of a task on node {} \
                         ({peer:?}, door {door})",
                        other.index
                    ));
                }
            }
        }
        Ok(())
    }
}
