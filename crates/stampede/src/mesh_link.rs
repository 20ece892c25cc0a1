//! The link between an embedded runtime and its node's participant in the distributed ts_min
//! protocol ([`stampede_core::mesh`], `docs/PROTOCOL.md`): what `stampede-node`'s fabric driver
//! holds.
//!
//! **Guarantees.** Once linked, every change of the runtime's claims is handed to the mesh under
//! the same lock as the change itself (new claims before releases, in order), and the mesh's
//! ts_min is mirrored back into the runtime's progress machine at `Location::Peer(0)` — so the
//! runtime reclaims nothing that another node's view still covers, and its ts_min is the mesh's.
//! A root task must start at or above the node's door ([`Mesh::join_floor`]); before the node
//! has one, root tasks are refused `BelowVisibility` (the driver opens the door before it serves).
//! A runtime used alone (a mesh with no other participant) reclaims inside the operation that
//! makes an item garbage, as an embedded one does.

use std::sync::Arc;

use stampede_core::{Error, Mesh, Result, Timestamp, Update};

use crate::space::Space;

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

/// What the space holds of a linked mesh (behind its progress lock).
pub(crate) struct Linked {
    pub(crate) mesh: Mesh,
    /// The mesh's ts_min as mirrored at `Location::Peer(0)`.
    pub(crate) mirror: Timestamp,
    /// Local changes the mesh refused under backpressure, in order: they go first next time.
    pub(crate) stash: Vec<Update>,
    pub(crate) wake: MeshWake,
}

impl MeshLink {
    /// Links `mesh` to the embedded runtime `rt`: from now on its claims go to the mesh, and the
    /// mesh's ts_min holds its own. `InvalidArgument` for a remote runtime or one already linked.
    pub fn attach(rt: &crate::Runtime, mesh: Mesh, wake: MeshWake) -> Result<MeshLink> {
        let crate::backend::Backend::Local(local) = &rt.0 else {
            return Err(Error::InvalidArgument {
                op: "mesh",
                name: "runtime".into(),
                reason: "only an embedded runtime joins a mesh as a node".into(),
            });
        };
        let space = local.space().clone();
        space.link_mesh(Linked { mesh, mirror: 0, stash: Vec::new(), wake })?;
        Ok(MeshLink { space })
    }

    /// Runs `f` on the mesh under the runtime's progress lock (a message from a peer, a death, a
    /// move), then mirrors its ts_min into the runtime and reclaims what that made garbage.
    pub fn with<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        self.space.with_mesh(f)
    }

    /// Claim changes the mesh has not taken yet: held under backpressure (the driver is behind)
    /// and handed over with the next change. None are kept once the mesh expelled this node.
    pub fn stashed(&self) -> usize {
        self.space.mesh_stashed()
    }
}
