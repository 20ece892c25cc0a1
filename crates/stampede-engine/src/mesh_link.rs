//! The link between an embedded runtime and its node's participant in the distributed ts_min
//! protocol ([`stampede_core::mesh`], `docs/PROTOCOL.md`): what `stampede-node`'s fabric driver
//! holds. The rules that glue the runtime's progress machine to the mesh are
//! [`stampede_core::Participant`]'s; this is the handle the driver holds on it (through the
//! facade's `stampede::mesh_link`, which takes its runtimes and tasks).
//!
//! **Guarantees.** Once linked, every change of the runtime's claims is handed to the mesh under
//! the same lock as the change itself (new claims before releases, in order), and the mesh's
//! ts_min is mirrored back into the runtime's progress machine at `Location::Peer(0)` — so the
//! runtime reclaims nothing that another node's view still covers, and its ts_min is the mesh's.
//! A root task must start at or above the node's door ([`Mesh::join_floor`]); without one, root
//! tasks are refused `Unreachable` (the driver opens the door through a pause round whenever the
//! node needs one: docs/PROTOCOL.md, "Doors").
//! A runtime used alone (a mesh with no other participant) reclaims inside the operation that
//! makes an item garbage, as an embedded one does.

use std::sync::Arc;

use stampede_core::mesh::MoveId;
use stampede_core::{Error, Mesh, Peer, Result, Timestamp};

use crate::runtime::Runtime;
use crate::space::{Origin, Space};
use crate::task::Task;

/// Called whenever the mesh may have something to transmit: the driver's wake-up. It runs under
/// the runtime's progress lock, so it must only signal (a `Notify`, a flag), never block.
pub type MeshWake = Arc<dyn Fn() + Send + Sync>;

/// A runtime's mesh participant, shared with the runtime's operations.
#[derive(Clone)]
pub struct MeshLink {
    space: Arc<Space>,
}

impl std::fmt::Debug for MeshLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshLink").finish_non_exhaustive()
    }
}

impl MeshLink {
    /// Links `mesh` to the runtime `rt`: from now on its claims go to the mesh, and the mesh's
    /// ts_min holds its own. `InvalidArgument` for a runtime already linked.
    pub fn attach(rt: &Runtime, mesh: Mesh, wake: MeshWake) -> Result<MeshLink> {
        let space = rt.space().clone();
        space.link_mesh(mesh, wake)?;
        Ok(MeshLink { space })
    }

    /// Replaces an expelled participant by `mesh`, a new incarnation of this node that has no
    /// door yet (docs/PROTOCOL.md: `Event::Expelled`). The runtime keeps its ts_min (the mirror
    /// stays where the old participant left it, and only rises); the claims it holds go to the
    /// new participant once it has a door, raised to it. Meanwhile root tasks and
    /// takeovers are refused `Unreachable` (try again). The old participant's moves are resolved by its death.
    /// `InvalidArgument` (nothing changed) for a `mesh` with a door already, or that is not a
    /// larger incarnation of this node's participant.
    pub fn restart(&self, mesh: Mesh) -> Result<()> {
        self.space.relink_mesh(mesh)
    }

    /// Runs `f` on the mesh under the runtime's progress lock (a message from a peer, a death, a
    /// move), then mirrors its ts_min into the runtime and reclaims what that made garbage.
    pub fn with<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        self.space.with_mesh(f)
    }

    /// Reads the mesh under the runtime's progress lock: for questions that change nothing (no
    /// settling, no reclamation, no wake-up of the driver).
    pub fn read<R>(&self, f: impl FnOnce(&Mesh) -> R) -> R {
        self.space.read_mesh(f)
    }

    /// Moves task `task`'s visibility to node `to` (docs/PROTOCOL.md "A task spans nodes through
    /// shadows"): a carry at the task's visibility, covered by the task's own claims, until `to`
    /// takes it over as a shadow task ([`take_over_task`](Self::take_over_task)), declines it,
    /// or is dead. Returns the participant that moved it (this node's incarnation then), the
    /// move's id and the visibility it carries.
    pub fn move_task(&self, task: &Task, to: Peer) -> Result<(Peer, MoveId, Timestamp)> {
        // The task's visibility is its lowest claim; reading it under the task's lock keeps it
        // there until the carry covers it.
        let state = task.shared.state.lock();
        // A closed task holds no claim: nothing would cover the carry.
        state.check_open()?;
        let visibility = state.visibility();
        // A new claim: nothing to mirror or reclaim, so no settling (which could sweep and lock
        // tasks) under the task's lock.
        let (from, id) = self.space.send_move(to, visibility).map_err(|e| match e {
            Error::Unreachable { op, reason, .. } => {
                Error::Unreachable { op, name: format!("task {}", state.id()), reason }
            }
            other => other,
        })?;
        Ok((from, id, visibility))
    }

    /// A shadow task at `virtual_time` on this node, taking over `from`'s move `id` to `to` (what
    /// [`move_task`](Self::move_task) returned there, for `to`). `BelowVisibility` when
    /// `virtual_time` is below this node's ts_min; `Unreachable` when the mesh refuses the move
    /// (its sender fenced, the move resolved already). Every refusal declines the move — but
    /// one for an earlier incarnation of this node (`to` is not [`peer`](Self::peer)): that is
    /// refused `Unreachable` and declines nothing, for move ids count per receiver and the same id
    /// may yet come to this incarnation.
    pub fn take_over_task(&self, from: Peer, id: MoveId, to: Peer, virtual_time: Timestamp) -> Result<Task> {
        match self.space.new_task(virtual_time, Origin::Moved { from, id, to }) {
            Ok(shared) => Ok(Task { shared }),
            Err(e) => {
                // The mesh's refusals and those below ts_min declined it already; an invalid
                // virtual time or a closed runtime did not, and the mover's carry would hold
                // every node's ts_min until the client's home session ends.
                if self.peer() == to {
                    self.decline(from, id);
                }
                Err(e)
            }
        }
    }

    /// Declines `from`'s move `id` if it is still unresolved here (the client that carried it
    /// went away before asking for the takeover); `false` if it was resolved already.
    pub fn decline(&self, from: Peer, id: MoveId) -> bool {
        self.with(|mesh| mesh.decline_move(from, id).is_ok())
    }

    /// A decline of `from`'s move `id` addressed to `addressed`, a life of this node: refused
    /// (`false`) once that life is over, or when the move was resolved already.
    pub fn decline_to(&self, addressed: Peer, from: Peer, id: MoveId) -> bool {
        self.peer() == addressed && self.decline(from, id)
    }

    /// Whether this node's move `id` to `to` is still unresolved.
    pub fn is_move_open(&self, to: Peer, id: MoveId) -> bool {
        self.read(|mesh| mesh.is_move_open(to, id))
    }

    /// This node's participant (its current incarnation).
    pub fn peer(&self) -> Peer {
        self.read(Mesh::me)
    }

    /// The timestamp `from`'s move `id` to this node carries, once its batch reached this node
    /// (see [`Mesh::carried`]).
    pub fn carried(&self, from: Peer, id: MoveId) -> Option<Timestamp> {
        self.read(|mesh| mesh.carried(from, id))
    }

    /// Whether this node, restarted, waits for a door before its claims reach the mesh again:
    /// its driver opens one then, needed or not.
    pub fn awaits_floor(&self) -> bool {
        self.space.mesh_awaits_floor()
    }

    /// Claim changes the mesh has not taken yet: held under backpressure (the driver is behind)
    /// and handed over with the next change. None are kept once the mesh expelled this node.
    pub fn stashed(&self) -> usize {
        self.space.mesh_stashed()
    }
}
