//! The mesh this space is a node of, when linked: linking and relinking its participant, and
//! running the driver's inputs on it.
//!
//! Every input that may change ts_min settles, mirrors ts_min and sweeps what became garbage;
//! only inputs that add this node's own claims skip settling. The driver is woken after each.

use std::sync::atomic::Ordering;

use crate::mesh_link::MeshWake;
use stampede_core::mesh::MoveId;
use stampede_core::{Mesh, Peer, Result, Timestamp};

use super::Space;

impl Space {
    // ---- the mesh ------------------------------------------------------------------------------

    /// Links a mesh participant ([`Participant::link`]) with its driver's wake-up.
    ///
    /// [`Participant::link`]: stampede_core::Participant::link
    pub(crate) fn link_mesh(&self, mesh: Mesh, wake: MeshWake) -> Result<()> {
        self.check_open("runtime")?;
        let mut tracking = self.tracking.lock();
        let settled = tracking.participant.link(mesh)?;
        tracking.wake = Some(wake);
        if settled.handed {
            tracking.wake();
        }
        self.ts_min.store(tracking.progress().ts_min(), Ordering::Release);
        Ok(())
    }

    /// Replaces the linked mesh's participant by `mesh`, a restart with no door yet
    /// ([`Participant::relink`]), and wakes the driver.
    ///
    /// [`Participant::relink`]: stampede_core::Participant::relink
    pub(crate) fn relink_mesh(&self, mesh: Mesh) -> Result<()> {
        let mut tracking = self.tracking.lock();
        tracking.participant.relink(mesh)?;
        tracking.wake();
        Ok(())
    }

    /// Whether a restarted participant waits for its door before it shows this runtime's claims.
    pub(crate) fn mesh_awaits_floor(&self) -> bool {
        self.tracking.lock().participant.awaits_floor()
    }

    /// Claim changes the linked mesh has not taken yet (0 without a mesh).
    pub(crate) fn mesh_stashed(&self) -> usize {
        self.tracking.lock().participant.stashed()
    }

    /// Runs `f` on the linked mesh, then settles: mirrors its ts_min and sweeps what that made
    /// garbage. Panics if no mesh is linked (only a [`MeshLink`](crate::mesh_link::MeshLink)
    /// calls it).
    pub(crate) fn with_mesh<R>(&self, f: impl FnOnce(&mut Mesh) -> R) -> R {
        let mut tracking = self.tracking.lock();
        let value = f(tracking.participant.mesh_mut().expect("a linked mesh"));
        let due = self.publish(&mut tracking).map(|ts_min| tracking.take_due(ts_min));
        drop(tracking);
        self.progressed();
        self.sweep_due(due);
        value
    }

    /// Reads the linked mesh (a question that changes nothing: no settling, no wake-up).
    pub(crate) fn read_mesh<R>(&self, f: impl FnOnce(&Mesh) -> R) -> R {
        f(self.tracking.lock().participant.mesh().expect("a linked mesh"))
    }

    /// A task's move to `to` at `visibility`, covered by a carry ([`Participant::send_move`])
    /// without settling: it only adds this node's own claim (nothing to mirror or reclaim), so it
    /// may run under the task's lock. Wakes the driver.
    ///
    /// [`Participant::send_move`]: stampede_core::Participant::send_move
    pub(crate) fn send_move(&self, to: Peer, visibility: Timestamp) -> Result<(Peer, MoveId)> {
        let tracking = &mut *self.tracking.lock();
        let moved = tracking.participant.send_move(to, visibility);
        tracking.wake();
        moved
    }
}
