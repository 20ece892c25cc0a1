//! The link between an embedded runtime and its node's participant in the distributed ts_min
//! protocol, what `stampede-node`'s fabric driver holds: the engine's
//! [`MeshLink`](stampede_engine::MeshLink) (see [`stampede_engine::mesh_link`] for what it
//! guarantees), taking this crate's runtimes and tasks. A remote runtime or task has no place in
//! a node's mesh: refused `InvalidArgument`. Every other call is the engine's, as it documents.

use stampede_core::mesh::MoveId;
use stampede_core::{Error, Mesh, Peer, Result, Timestamp};

use crate::backend::Backend;
use crate::{Runtime, Task};

pub use stampede_engine::mesh_link::MeshWake;

/// A runtime's mesh participant, shared with the runtime's operations: the engine's
/// [`MeshLink`](stampede_engine::MeshLink) with this crate's runtimes and tasks.
#[derive(Clone, Debug)]
pub struct MeshLink(stampede_engine::MeshLink);

impl MeshLink {
    /// Links `mesh` to the embedded runtime `rt`: from now on its claims go to the mesh, and the
    /// mesh's ts_min holds its own. `InvalidArgument` for a remote runtime or one already linked.
    pub fn attach(rt: &Runtime, mesh: Mesh, wake: MeshWake) -> Result<MeshLink> {
        let Backend::Local(local) = &rt.0 else {
            return Err(Error::InvalidArgument {
                op: "mesh",
                name: "runtime".into(),
                reason: "only an embedded runtime joins a mesh as a node".into(),
            });
        };
        stampede_engine::MeshLink::attach(local, mesh, wake).map(MeshLink)
    }

    /// Moves task `task`'s visibility to node `to` ([`stampede_engine::MeshLink::move_task`]).
    /// `InvalidArgument` for a task of a remote runtime.
    pub fn move_task(&self, task: &Task, to: Peer) -> Result<(Peer, MoveId, Timestamp)> {
        let Backend::Local(task) = &task.0 else {
            return Err(Error::InvalidArgument {
                op: "shadow",
                name: "task".into(),
                reason: "only a task of this node's own runtime moves to another node".into(),
            });
        };
        self.0.move_task(task, to)
    }

    /// A shadow task at `virtual_time` on this node, taking over `from`'s move `id` to `to`
    /// ([`stampede_engine::MeshLink::take_over_task`]).
    pub fn take_over_task(&self, from: Peer, id: MoveId, to: Peer, virtual_time: Timestamp) -> Result<Task> {
        Ok(Task(Backend::Local(self.0.take_over_task(from, id, to, virtual_time)?)))
    }

    /// Replaces an expelled participant by `mesh`, a new incarnation of this node
    /// ([`stampede_engine::MeshLink::restart`]).
    pub fn restart(&self, mesh: Mesh) -> Result<()> {
        self.0.restart(mesh)
    }

    /// Runs `f` on the mesh under the runtime's progress lock, then mirrors its ts_min into the
    /// runtime and reclaims what that made garbage ([`stampede_engine::MeshLink::with`]).
    pub fn with<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        self.0.with(f)
    }

    /// Reads the mesh under the runtime's progress lock ([`stampede_engine::MeshLink::read`]).
    pub fn read<R>(&self, f: impl FnOnce(&Mesh) -> R) -> R {
        self.0.read(f)
    }

    /// Declines `from`'s move `id` if it is still unresolved here; `false` if it was resolved
    /// already ([`stampede_engine::MeshLink::decline`]).
    pub fn decline(&self, from: Peer, id: MoveId) -> bool {
        self.0.decline(from, id)
    }

    /// Whether this node's move `id` to `to` is still unresolved.
    pub fn is_move_open(&self, to: Peer, id: MoveId) -> bool {
        self.0.is_move_open(to, id)
    }

    /// This node's participant (its current incarnation).
    pub fn peer(&self) -> Peer {
        self.0.peer()
    }

    /// The timestamp `from`'s move `id` to this node carries, once its batch reached this node
    /// ([`stampede_engine::MeshLink::carried`]).
    pub fn carried(&self, from: Peer, id: MoveId) -> Option<Timestamp> {
        self.0.carried(from, id)
    }

    /// Claim changes the mesh has not taken yet ([`stampede_engine::MeshLink::stashed`]).
    pub fn stashed(&self) -> usize {
        self.0.stashed()
    }
}
